// Bodies that are objects (Blob, URLSearchParams, FormData, ReadableStream) and `Request` objects as
// the request of an intent (what HTTP clients such as ky and axios's fetch adapter hand to `fetch`):
// loaded when a page first hands one (lazy.ts). A ReadableStream is read to its end here, within
// maxBodyBytes, before anything is sent: it can be read only once, so the bytes are what every retry
// sends. Only a stream someone else is already reading (locked) cannot be buffered:
// BODY_NOT_REPLAYABLE.

import type { BufferedBody } from "./body.js";
import { isA, tooLarge, unreadable } from "./body-limits.js";
import { IdempotentFetchError } from "./errors.js";
import { hex } from "./hex.js";

/** Buffers a Blob, URLSearchParams, FormData or ReadableStream body (the caller checked the type and
 *  the known sizes). */
export async function bufferObject(body: unknown, maxBodyBytes: number): Promise<BufferedBody> {
  try {
    if (isA(body, "ReadableStream")) return { bytes: await readStream(body as ReadableStream<unknown>, maxBodyBytes), contentType: null };
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
  if (stream.locked) throw new IdempotentFetchError("BODY_NOT_REPLAYABLE", __DEV__ && "the ReadableStream body is locked (being read elsewhere)");
  const reader = stream.getReader();
  const chunks: Uint8Array<ArrayBuffer>[] = [];
  let total = 0;
  try {
    for (let read; !(read = await reader.read()).done; ) {
      // fetch accepts Uint8Array chunks only; anything else would fail each attempt the same way.
      if (!(read.value instanceof Uint8Array)) throw new IdempotentFetchError("INVALID_REQUEST", __DEV__ && "a ReadableStream body must yield Uint8Array chunks");
      if ((total += read.value.byteLength) > maxBodyBytes) throw tooLarge(maxBodyBytes);
      chunks.push(read.value as Uint8Array<ArrayBuffer>);
    }
  } catch (thrown) {
    reader.cancel().catch(() => {});
    throw thrown;
  }
  return new Uint8Array(await new Blob(chunks).arrayBuffer());
}

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

/** The URL, method, headers, signal and body of `request` (the body as a stream, or, where there is
 *  no `Request.prototype.body` (Firefox), its bytes; null when it has none). `withBody` false: the
 *  caller passes its own, and the Request's is left unread. A body already read (`bodyUsed`) is
 *  `BODY_NOT_REPLAYABLE`: its bytes are gone. */
export async function readRequestObject(request: Request, withBody = true) {
  const { url, method, headers, signal } = request;
  let body: ReadableStream | ArrayBuffer | null = null;
  if (withBody) {
    if (request.bodyUsed) throw new IdempotentFetchError("BODY_NOT_REPLAYABLE", __DEV__ && "the Request's body was already read");
    body = request.body;
    if (body === undefined) {
      const bytes = await request.arrayBuffer().catch((thrown: unknown) => Promise.reject(unreadable(thrown)));
      body = bytes.byteLength ? bytes : null; // a bodiless GET reads as empty here
    }
  }
  return { url, method, headers, signal, body };
}
