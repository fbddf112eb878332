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

/** The typed error of a body over the cap. */
function tooLarge(size: string, max: number): IdempotentFetchError {
  return new IdempotentFetchError("BODY_TOO_LARGE", `the body is ${size} bytes, over maxBodyBytes (${max})`);
}

/** Buffers `body`; `null` for `undefined`/`null`. Its size is checked against `maxBodyBytes` BEFORE
 *  anything is copied (a huge body would exhaust memory): `byteLength`, `Blob.size`, and for a string
 *  its UTF-8 bound (at most 3 bytes per UTF-16 unit; measured exactly only when that bound is over). */
export async function bufferBody(body: unknown, maxBodyBytes: number): Promise<BufferedBody | null> {
  if (body === undefined || body === null) return null;
  if (typeof body === "string" && body.length * 3 > maxBodyBytes) {
    // Over the bound: only a string longer than the cap in UTF-16 units is surely over; else encode.
    const size = body.length > maxBodyBytes ? body.length : new TextEncoder().encode(body).length;
    if (size > maxBodyBytes) throw tooLarge(body.length > maxBodyBytes ? `at least ${size}` : String(size), maxBodyBytes);
  } else if ((body instanceof ArrayBuffer || ArrayBuffer.isView(body)) && body.byteLength > maxBodyBytes) {
    throw tooLarge(String(body.byteLength), maxBodyBytes);
  } else if (isA(body, "Blob") && (body as Blob).size > maxBodyBytes) {
    throw tooLarge(String((body as Blob).size), maxBodyBytes);
  }
  const buffered = await bufferUnchecked(body);
  // URLSearchParams and FormData: known only once encoded (they are small unless they hold a Blob).
  if (buffered && buffered.bytes.length > maxBodyBytes) throw tooLarge(String(buffered.bytes.length), maxBodyBytes);
  return buffered;
}

async function bufferUnchecked(body: unknown): Promise<BufferedBody | null> {
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
    try {
      return { bytes: new Uint8Array(await response.arrayBuffer()), contentType };
    } catch (thrown) {
      // WebKit cannot read a FormData holding a Blob/File through a Response ("Unable to read form
      // data blob"): encode it here, as fetch would (multipart/form-data, HTML's encoding algorithm).
      if (isA(body, "FormData")) return await multipart(body as FormData);
      throw thrown;
    }
  } catch (thrown) {
    if (thrown instanceof IdempotentFetchError) throw thrown;
    throw invalidRequest(`body cannot be read: ${describe(thrown)}`);
  }
}

/** @internal HTML's multipart/form-data encoding of `form`, with a random boundary (exported for tests). */
export async function multipart(form: FormData): Promise<BufferedBody> {
  const boundary = `----idempotent-fetch-${Array.from(crypto.getRandomValues(new Uint8Array(12)), (b) => b.toString(16).padStart(2, "0")).join("")}`;
  // Names and file names: CR, LF and '"' percent-escaped; line breaks of values normalised to CRLF.
  const escape = (text: string) => text.replace(/\r\n|\r|\n/g, "\r\n").replace(/[\r\n"]/g, (c) => encodeURIComponent(c));
  const crlf = (text: string) => text.replace(/\r\n|\r|\n/g, "\r\n");
  const encoder = new TextEncoder();
  const parts: Uint8Array[] = [];
  for (const [name, value] of form) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${escape(name)}"`;
    if (typeof value === "string") {
      parts.push(encoder.encode(`${head}\r\n\r\n${crlf(value)}\r\n`));
    } else {
      head += `; filename="${escape(value.name)}"\r\nContent-Type: ${value.type || "application/octet-stream"}\r\n\r\n`;
      parts.push(encoder.encode(head), new Uint8Array(await value.arrayBuffer()), encoder.encode("\r\n"));
    }
  }
  parts.push(encoder.encode(`--${boundary}--\r\n`));
  const bytes = new Uint8Array(parts.reduce((n, part) => n + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    bytes.set(part, offset);
    offset += part.length;
  }
  return { bytes, contentType: `multipart/form-data; boundary=${boundary}` };
}
