// Buffers a request body once, so that every retry sends exactly the same bytes, with the content
// type `fetch` would have sent for the original object (a multipart boundary included). A
// ReadableStream is refused before anything is sent: it can be read only once, so a retry would
// send half a request.

import { describe, IdempotentFetchError, invalidRequest } from "./errors.js";

/** Body types that can be buffered and re-sent. A `ReadableStream` is refused (`BODY_NOT_REPLAYABLE`). */
export type ReplayableBody = string | ArrayBuffer | ArrayBufferView | Blob | URLSearchParams | FormData;

/** A body ready to be sent any number of times. */
export interface BufferedBody {
  bytes: Uint8Array<ArrayBuffer>;
  /** The content type `fetch` would derive from the original body, if any. */
  contentType: string | null;
}

/** `value instanceof globalThis[name]`, false where the class does not exist. */
function isA(value: unknown, name: string): boolean {
  const type = (globalThis as Record<string, unknown>)[name];
  return typeof type === "function" && value instanceof (type as abstract new (...args: never[]) => unknown);
}

const UNSUPPORTED =
  "body must be a string, ArrayBuffer, typed array, Blob, URLSearchParams or FormData " +
  "(for an object, pass JSON.stringify(object))";

/** Buffers `body`; `null` for `undefined`/`null`. */
export async function bufferBody(body: unknown): Promise<BufferedBody | null> {
  if (body === undefined || body === null) return null;
  if (isA(body, "ReadableStream")) {
    throw new IdempotentFetchError(
      "BODY_NOT_REPLAYABLE",
      "a ReadableStream body can be read only once, so it cannot be retried; pass a string, " +
        "ArrayBuffer, typed array, Blob, URLSearchParams or FormData instead",
    );
  }
  try {
    // The two common cases without a Response round trip (what fetch does for them, synchronously).
    if (typeof body === "string") {
      return { bytes: new TextEncoder().encode(body), contentType: "text/plain;charset=UTF-8" };
    }
    if (body instanceof ArrayBuffer) return { bytes: new Uint8Array(body.slice(0)), contentType: null };
    if (ArrayBuffer.isView(body)) {
      // Exactly the viewed bytes, copied (the caller may reuse the buffer).
      return { bytes: new Uint8Array(body.buffer, body.byteOffset, body.byteLength).slice(), contentType: null };
    }
    if (!["Blob", "URLSearchParams", "FormData"].some((name) => isA(body, name))) throw invalidRequest(UNSUPPORTED);
    const response = new Response(body as BodyInit);
    const contentType = response.headers.get("content-type");
    return { bytes: new Uint8Array(await response.arrayBuffer()), contentType };
  } catch (thrown) {
    if (thrown instanceof IdempotentFetchError) throw thrown;
    throw invalidRequest(`body cannot be read: ${describe(thrown)}`);
  }
}
