// Buffers a request body once, so that every retry sends exactly the same bytes, with the content
// type `fetch` would have sent for the original object (a multipart boundary included). A
// ReadableStream is read to its end here, within maxBodyBytes, before anything is sent: it can be
// read only once, so the bytes are what every retry sends. Only a stream someone else is already
// reading (locked) cannot be buffered: BODY_NOT_REPLAYABLE.

import { describe, IdempotentFetchError, invalidRequest } from "./errors.js";
import { hex } from "./sha256.js";

/** Body types that are buffered once and re-sent. A `ReadableStream` of `Uint8Array` chunks is read
 *  to its end first (within `maxBodyBytes`); a locked one is refused (`BODY_NOT_REPLAYABLE`). */
export type ReplayableBody = string | ArrayBuffer | ArrayBufferView | Blob | URLSearchParams | FormData | ReadableStream<Uint8Array>;

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

/** The body types that can be buffered and re-sent, for messages. */
const REPLAYABLE = "a string, ArrayBuffer, typed array, Blob, URLSearchParams, FormData or ReadableStream";

/** The typed error of a body over the cap. */
const tooLarge = (max: number) =>
  new IdempotentFetchError("BODY_TOO_LARGE", `the body is larger than maxBodyBytes (${max} bytes)`);

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
  try {
    if (isA(body, "ReadableStream")) return { bytes: await readStream(body as ReadableStream<unknown>, maxBodyBytes), contentType: null };
    // The common cases without a Response round trip (what fetch does for them, synchronously).
    if (typeof body === "string") {
      return { bytes: new TextEncoder().encode(body), contentType: "text/plain;charset=UTF-8" };
    }
    if (body instanceof ArrayBuffer || ArrayBuffer.isView(body)) {
      // Exactly the viewed bytes, copied (the caller may reuse the buffer).
      const bytes = ArrayBuffer.isView(body) ? new Uint8Array(body.buffer, body.byteOffset, body.byteLength) : new Uint8Array(body);
      return { bytes: bytes.slice(), contentType: null };
    }
    if (!["Blob", "URLSearchParams", "FormData"].some((name) => isA(body, name))) {
      throw invalidRequest(`body must be ${REPLAYABLE} (for an object, pass JSON.stringify(object))`);
    }
    const response = new Response(body as BodyInit);
    const contentType = response.headers.get("content-type");
    try {
      return { bytes: new Uint8Array(await response.arrayBuffer()), contentType };
    } catch (thrown) {
      // WebKit cannot read a FormData holding a Blob/File through a Response ("Unable to read form
      // data blob"): encode it here, as fetch would (multipart/form-data, HTML's encoding algorithm).
      if (isA(body, "FormData")) return await multipart(body as FormData);
      throw thrown;
    }
  } catch (thrown) {
    throw thrown instanceof IdempotentFetchError ? thrown : unreadable(thrown);
  }
}

/** The bytes of `stream`, read to its end. Stops (and cancels the stream) as soon as more than
 *  `maxBodyBytes` arrived, so an endless stream cannot exhaust memory. A locked stream is being read
 *  by someone else: what is left of it would not be the whole body. */
async function readStream(stream: ReadableStream<unknown>, maxBodyBytes: number): Promise<Uint8Array<ArrayBuffer>> {
  if (stream.locked) throw new IdempotentFetchError("BODY_NOT_REPLAYABLE", "the ReadableStream body is locked (being read elsewhere)");
  const reader = stream.getReader();
  const chunks: Uint8Array<ArrayBuffer>[] = [];
  let total = 0;
  try {
    for (let read; !(read = await reader.read()).done; ) {
      // fetch accepts Uint8Array chunks only; anything else would fail each attempt the same way.
      if (!(read.value instanceof Uint8Array)) throw invalidRequest("a ReadableStream body must yield Uint8Array chunks");
      if ((total += read.value.byteLength) > maxBodyBytes) throw tooLarge(maxBodyBytes);
      chunks.push(read.value as Uint8Array<ArrayBuffer>);
    }
  } catch (thrown) {
    reader.cancel().catch(() => {});
    throw thrown;
  }
  return new Uint8Array(await new Blob(chunks).arrayBuffer());
}

/** The typed error of a body that failed while being read. */
export const unreadable = (thrown: unknown) => invalidRequest(`body cannot be read: ${describe(thrown)}`);

/** @internal HTML's multipart/form-data encoding of `form`, with a random boundary (exported for tests). */
export async function multipart(form: FormData): Promise<BufferedBody> {
  const boundary = `----idempotent-fetch-${hex(crypto.getRandomValues(new Uint8Array(12)))}`;
  // Line breaks normalised to CRLF; in names and file names, CR, LF and '"' then percent-escaped.
  const crlf = (text: string) => text.replace(/\r\n|\r|\n/g, "\r\n");
  const escape = (text: string) => crlf(text).replace(/[\r\n"]/g, encodeURIComponent);
  // A Blob of the parts: strings are UTF-8 encoded, files are read with the whole.
  const parts: BlobPart[] = [];
  for (const [name, value] of form) {
    parts.push(`--${boundary}\r\nContent-Disposition: form-data; name="${escape(name)}"`);
    if (typeof value === "string") parts.push(`\r\n\r\n${crlf(value)}\r\n`);
    else {
      parts.push(`; filename="${escape(value.name)}"\r\nContent-Type: ${value.type || "application/octet-stream"}\r\n\r\n`, value, "\r\n");
    }
  }
  parts.push(`--${boundary}--\r\n`);
  return { bytes: new Uint8Array(await new Blob(parts).arrayBuffer()), contentType: `multipart/form-data; boundary=${boundary}` };
}
