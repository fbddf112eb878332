// A `Request` object as the request of an intent (`begin(id, request)`, `client.fetch(request)`): what
// HTTP clients such as ky and axios's fetch adapter hand to `fetch`. Its body is handed on to
// `bufferBody`, which reads it once within maxBodyBytes; from then on the intent holds the bytes, so a
// retry re-sends them.

import { unreadable } from "./body.js";
import { IdempotentFetchError } from "./errors.js";

/** Whether `value` is a `Request` of this realm. */
export function isRequestObject(value: unknown): value is Request {
  return typeof Request === "function" && value instanceof Request;
}

/** The URL, method, headers, signal and body of `request` (the body as a stream, or, where there is
 *  no `Request.prototype.body` (Firefox), its bytes; null when it has none). `withBody` false: the
 *  caller passes its own, and the Request's is left unread. A body already read (`bodyUsed`) is
 *  `BODY_NOT_REPLAYABLE`: its bytes are gone. */
export async function readRequestObject(request: Request, withBody = true) {
  const { url, method, headers, signal } = request;
  let body: ReadableStream | ArrayBuffer | null = null;
  if (withBody) {
    if (request.bodyUsed) throw new IdempotentFetchError("BODY_NOT_REPLAYABLE", "the Request's body was already read");
    body = request.body;
    if (body === undefined) {
      const bytes = await request.arrayBuffer().catch((thrown: unknown) => Promise.reject(unreadable(thrown)));
      body = bytes.byteLength ? bytes : null; // a bodiless GET reads as empty here
    }
  }
  return { url, method, headers, signal, body };
}
