// The request of an intent, read from JavaScript and checked before anything is stored or sent.

import { bufferBody, type BufferedBody, isRequestObject, type ReplayableBody } from "./body.js";
import { bodyObjectsPart } from "./lazy.js";
import { describe, invalidRequest } from "./errors.js";
import { Fields } from "./fields.js";
import { TOKEN } from "./options.js";

/** The request of an intent. */
export interface IntentRequest {
  /** Where to send it: absolute, or relative to the page. */
  url: string | URL;
  /** Default "POST". */
  method?: string;
  /** Request headers; the idempotency key header is added to them. Never stored unless
   *  `persistRequest` (credentials never). */
  headers?: HeadersInit;
  /** The body, buffered once (within `maxBodyBytes`) and re-sent byte for byte by every retry. */
  body?: ReplayableBody | null;
}

/** A validated, buffered request: what every attempt sends. */
export interface PreparedRequest {
  /** Upper-case method. */
  method: string;
  /** Absolute URL where a base is known (the page), else as given. */
  url: string;
  /** Header pairs as `Headers` normalised them (lower-case names), without the key header. */
  headers: [string, string][];
  /** The buffered body; its `contentType` is null when the caller set one in `headers`. */
  body: BufferedBody | null;
}

/** The content type the request is sent with (the caller's header, else the body's own), or "". */
export function contentTypeOf(request: PreparedRequest): string {
  const header = request.headers.find(([name]) => name === "content-type");
  return header?.[1] ?? request.body?.contentType ?? "";
}

/** Reads `{ url, method, headers, body }` (method defaults to POST), or a `Request` (its body read once). */
export async function prepareRequest(request: unknown, keyHeader: string, maxBodyBytes: number): Promise<PreparedRequest> {
  if (isRequestObject(request)) {
    const { url, method, headers, body } = await (await bodyObjectsPart()).readRequestObject(request);
    return prepareParts(url, method, headers, body, keyHeader, maxBodyBytes);
  }
  const fields = Fields.of(request, "request.", "request", invalidRequest);
  fields.only(["url", "method", "headers", "body"]);
  const url = readUrl(fields.value("url"));
  const method = fields.string("method") ?? "POST";
  return prepareParts(url, method, fields.value("headers"), fields.value("body"), keyHeader, maxBodyBytes);
}

/** Builds a prepared request from its parts (also used by the fetch-shaped API). */
export async function prepareParts(
  url: string,
  rawMethod: string,
  headersInit: unknown,
  bodyValue: unknown,
  keyHeader: string,
  maxBodyBytes: number,
): Promise<PreparedRequest> {
  // CONNECT, TRACE and TRACK: refused by `Request` below, as fetch would.
  if (rawMethod.length > 32 || !TOKEN.test(rawMethod)) {
    throw invalidRequest(__DEV__ && `request.method "${rawMethod}" is not an HTTP method`);
  }
  const method = rawMethod.toUpperCase();
  const headers = readHeaders(headersInit, keyHeader);
  const body = await bufferBody(bodyValue, maxBodyBytes);
  if (body && (method === "GET" || method === "HEAD")) throw invalidRequest(__DEV__ && `a ${method} request cannot have a body`);
  buildable(url, method);
  // The content type fetch would have derived from the body object, unless the caller set one.
  if (body && headers.some(([name]) => name === "content-type")) body.contentType = null;
  return { method, url, headers, body };
}

/** A string or `URL`, resolved against the page's location when there is one. */
export function readUrl(value: unknown): string {
  let text: unknown = value;
  if (typeof value === "object" && value !== null) {
    try {
      text = (value as { href?: unknown }).href;
    } catch {
      text = undefined;
    }
  }
  // eslint-disable-next-line no-control-regex
  if (typeof text !== "string" || text.length === 0 || text.length > 8192 || /[\u0000-\u001f\u007f-\u009f]/.test(text)) {
    throw invalidRequest(__DEV__ && "request.url must be a string or URL of 1 to 8192 characters without control characters");
  }
  const base = pageLocation();
  try {
    return new URL(text, base).href;
  } catch {
    throw invalidRequest(
      __DEV__ && `request.url "${text}" is not ${base === undefined ? "an absolute URL (there is no page to resolve it against)" : "a URL"}`,
    );
  }
}

/** `location.href` in a page or worker; undefined in Node. */
export function pageLocation(): string | undefined {
  try {
    const href = (globalThis as { location?: { href?: unknown } }).location?.href;
    return typeof href === "string" ? href : undefined;
  } catch {
    return undefined;
  }
}

/** Reads headers through `new Headers(init)`, which rejects CR/LF and invalid names exactly as
 *  fetch would. A caller-supplied key header is refused: the library owns it. */
function readHeaders(init: unknown, keyHeader: string): [string, string][] {
  if (init === undefined || init === null) return [];
  let pairs: [string, string][];
  try {
    pairs = [...new Headers(init as HeadersInit)];
  } catch (thrown) {
    throw invalidRequest(__DEV__ && `request.headers are invalid: ${describe(thrown)}`);
  }
  const reserved = keyHeader.toLowerCase();
  if (pairs.some(([name]) => name === reserved)) {
    throw invalidRequest(__DEV__ && `request.headers must not set ${keyHeader} (the library sets it)`);
  }
  return pairs;
}

/** A request `fetch` cannot build (a URL with user:password, a mode the runtime
 *  refuses) is INVALID_REQUEST here, before anything is stored, instead of a "network error"
 *  retried until the attempts run out. `Request` validates exactly what `fetch` will; the headers
 *  are not given to it: `readHeaders` checked them with `Headers` already, which refuses what
 *  `Request` would (its "request" guard only drops forbidden names, it refuses none). */
function buildable(url: string, method: string): void {
  if (typeof Request !== "function") return;
  try {
    new Request(url, { method });
  } catch (thrown) {
    throw invalidRequest(__DEV__ && `the request cannot be built by fetch: ${describe(thrown)}`);
  }
}
