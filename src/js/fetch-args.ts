// The arguments of the fetch-shaped API, `client.fetch(input, init)`: input a URL string, a `URL` or
// a `Request` (its body read once here, unless `init.body` replaces it, as with fetch).

import { isRequestObject, type ReplayableBody } from "./body.js";
import { invalidRequest } from "./errors.js";
import { bodyObjectsPart } from "./lazy.js";
import { readUrl } from "./request.js";

/** `fetch`'s init plus the intent id (the request itself names it when omitted). A `RequestInit` is one, so
 *  `client.fetch` has fetch's type (HTTP clients take it as their fetch). */
export interface IdempotentRequestInit extends Omit<RequestInit, "body" | "signal"> {
  /** The body, buffered once and re-sent byte for byte by every retry. */
  body?: ReplayableBody | null;
  /** Aborts the send (`ABORTED`); the intent keeps its key. */
  signal?: AbortSignal | null;
  /** The intent id: the same id (and request) after a reload resumes the same key. Default: the
   *  request's keyed fingerprint, so the same request again resumes the same key until it has a
   *  definite answer (then it is forgotten: a later identical request is a new intent). Name it when
   *  a rebuilt request must still be the same intent (see `begin`'s `replace`). */
  intent?: string;
  /** A key to use instead of minting one (see `BeginOptions.key`). */
  key?: string;
}

/** What `client.fetch` begins and sends. */
export interface FetchArgs {
  url: string;
  method: string;
  headers: unknown;
  body: unknown;
  signal: AbortSignal | undefined;
  intent: string | undefined;
  key: string | undefined;
}

/** `value[name]`, with `undefined` and `null` both meaning absent. */
function prop(value: object | undefined | null, name: string): unknown {
  const v = value ? (value as Record<string, unknown>)[name] : undefined;
  return v === null ? undefined : v;
}

/** Reads `fetch(input, init)`: input a URL string, a `URL` or a `Request`. Like fetch, `init`'s
 *  method, headers, body and signal replace the Request's. A Request's body is taken (and later
 *  buffered within `maxBodyBytes`) only when `init.body` does not replace it. */
export async function readFetchArgs(input: unknown, init: unknown): Promise<FetchArgs> {
  if (init !== undefined && init !== null && typeof init !== "object") throw invalidRequest(__DEV__ && "init must be an object");
  const options = (init ?? undefined) as object | undefined;
  let url: string;
  let method = "GET";
  let headers: unknown;
  let body: unknown;
  let requestSignal: AbortSignal | undefined;
  if (isRequestObject(input)) {
    const parts = await (await bodyObjectsPart()).readRequestObject(input, prop(options, "body") === undefined);
    ({ url, method, headers, body } = parts);
    requestSignal = parts.signal;
  } else {
    url = readUrl(input);
  }
  const m = prop(options, "method");
  if (m !== undefined) {
    if (typeof m !== "string") throw invalidRequest(__DEV__ && "init.method must be a string");
    method = m;
  }
  headers = prop(options, "headers") ?? headers;
  const signal = prop(options, "signal") ?? requestSignal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw invalidRequest(__DEV__ && "init.signal must be an AbortSignal");
  const intent = prop(options, "intent");
  if (intent !== undefined && typeof intent !== "string") throw invalidRequest(__DEV__ && "init.intent must be a string");
  const key = prop(options, "key");
  if (key !== undefined && typeof key !== "string") throw invalidRequest(__DEV__ && "init.key must be a string");
  return { url, method, headers, body: prop(options, "body") ?? body, signal, intent, key };
}
