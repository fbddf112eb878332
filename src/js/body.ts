// Buffers a request body once, so that every retry sends exactly the same bytes, with the content
// type `fetch` would have sent for the original object (a multipart boundary included). Strings and
// bytes are buffered here; Blob, URLSearchParams, FormData, ReadableStream and `Request` bodies by the
// part loaded when a page first hands one (body-objects.ts, through lazy.ts).

import { invalidRequest } from "./errors.js";
import { bodyObjectsPart } from "./lazy.js";
import { isA, tooLarge, unreadable } from "./body-limits.js";

/** Body types that are buffered once and re-sent. A `ReadableStream` of `Uint8Array` chunks is read
 *  to its end first (within `maxBodyBytes`); a locked one is refused (`BODY_NOT_REPLAYABLE`). */
export type ReplayableBody = string | ArrayBuffer | ArrayBufferView | Blob | URLSearchParams | FormData | ReadableStream<Uint8Array>;

/** A body ready to be sent any number of times. */
export interface BufferedBody {
  bytes: Uint8Array<ArrayBuffer>;
  /** The content type `fetch` would derive from the original body, if any. */
  contentType: string | null;
}

/** The body types that can be buffered and re-sent, for messages. */
const REPLAYABLE = "a string, ArrayBuffer, typed array, Blob, URLSearchParams, FormData or ReadableStream";

/** Whether `value` is a `Request` of this realm. */
export function isRequestObject(value: unknown): value is Request {
  return typeof Request === "function" && value instanceof Request;
}

/** Buffers `body`; `null` for `undefined`/`null`. Its size is checked against `maxBodyBytes` BEFORE
 *  anything is copied where it is known (a huge body would exhaust memory): `byteLength`,
 *  `Blob.size`, and a string's length in UTF-16 units (its UTF-8 bytes are at least as many; one
 *  within the cap is encoded, at most 3 bytes a unit, and measured exactly). URLSearchParams and
 *  FormData are known only once encoded (they are small unless they hold a Blob). */
export async function bufferBody(body: unknown, maxBodyBytes: number): Promise<BufferedBody | null> {
  if (body === undefined || body === null) return null;
  const size =
    typeof body === "string"
      ? body.length
      : body instanceof ArrayBuffer || ArrayBuffer.isView(body)
        ? body.byteLength
        : isA(body, "Blob")
          ? (body as Blob).size
          : 0;
  if (size > maxBodyBytes) throw tooLarge(maxBodyBytes);
  const buffered = await bufferUnchecked(body, maxBodyBytes);
  if (buffered.bytes.length > maxBodyBytes) throw tooLarge(maxBodyBytes);
  return buffered;
}

async function bufferUnchecked(body: unknown, maxBodyBytes: number): Promise<BufferedBody> {
  // The common cases without a Response round trip (what fetch does for them, synchronously).
  if (typeof body === "string") {
    return { bytes: new TextEncoder().encode(body), contentType: "text/plain;charset=UTF-8" };
  }
  if (body instanceof ArrayBuffer || ArrayBuffer.isView(body)) {
    try {
      // Exactly the viewed bytes, copied (the caller may reuse the buffer).
      const bytes = ArrayBuffer.isView(body) ? new Uint8Array(body.buffer, body.byteOffset, body.byteLength) : new Uint8Array(body);
      return { bytes: bytes.slice(), contentType: null };
    } catch (thrown) {
      // A detached buffer (transferred to a worker) cannot be read.
      throw unreadable(thrown);
    }
  }
  if (!["Blob", "URLSearchParams", "FormData", "ReadableStream"].some((name) => isA(body, name))) {
    throw invalidRequest(__DEV__ && `body must be ${REPLAYABLE} (for an object, pass JSON.stringify(object))`);
  }
  const part = await bodyObjectsPart().catch((thrown: unknown) => Promise.reject(unreadable(thrown)));
  return part.bufferObject(body, maxBodyBytes);
}
