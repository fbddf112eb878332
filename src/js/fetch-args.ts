// The arguments of the fetch-shaped API, `client.fetch(input, init)`: input a URL string, a `URL` or
// a `Request` (whose body, if any, must come in `init.body`: a Request's body is a stream).

import type { ReplayableBody } from "./body.js";
import { IdempotentFetchError, invalidRequest } from "./errors.js";
import { readUrl } from "./request.js";

/** `fetch`'s init plus the intent id (one is made per call when omitted). */
export interface IdempotentRequestInit extends Omit<RequestInit, "body" | "signal"> {
  body?: ReplayableBody | null;
  signal?: AbortSignal;
  intent?: string;
}

/** What `client.fetch` begins and sends. */
export interface FetchArgs {
  url: string;
  method: string;
  headers: unknown;
  body: unknown;
  signal: AbortSignal | undefined;
  intent: string | undefined;
}

/** Whether a Request carries a body. Firefox has no `Request.prototype.body` (undefined): there a
 *  clone is read to find out. */
async function hasBody(request: Request): Promise<boolean> {
  const body: unknown = request.body;
  if (body !== undefined) return body !== null;
  try {
    return (await request.clone().arrayBuffer()).byteLength > 0;
  } catch {
    return true; // unreadable: it has one, and it cannot be replayed
  }
}

/** `value[name]`, with `undefined` and `null` both meaning absent. */
function prop(value: object | undefined | null, name: string): unknown {
  const v = value ? (value as Record<string, unknown>)[name] : undefined;
  return v === null ? undefined : v;
}

/** Reads `fetch(input, init)`: input a URL string, a `URL` or a `Request` (whose body, if any, must
 *  be passed in `init.body` instead: a Request's body is a stream). */
export async function readFetchArgs(input: unknown, init: unknown): Promise<FetchArgs> {
  if (init !== undefined && init !== null && typeof init !== "object") throw invalidRequest("init must be an object");
  const options = (init ?? undefined) as object | undefined;
  let url: string;
  let method = "GET";
  let headers: unknown;
  if (typeof Request === "function" && input instanceof Request) {
    if (prop(options, "body") === undefined && (await hasBody(input))) {
      throw new IdempotentFetchError(
        "BODY_NOT_REPLAYABLE",
        "a Request's body is a stream and cannot be retried; pass the body in init.body",
      );
    }
    url = input.url;
    method = input.method;
    headers = input.headers;
  } else {
    url = readUrl(input);
  }
  const m = prop(options, "method");
  if (m !== undefined) {
    if (typeof m !== "string") throw invalidRequest("init.method must be a string");
    method = m;
  }
  headers = prop(options, "headers") ?? headers;
  const signal = prop(options, "signal");
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw invalidRequest("init.signal must be an AbortSignal");
  const intent = prop(options, "intent");
  if (intent !== undefined && typeof intent !== "string") throw invalidRequest("init.intent must be a string");
  return { url, method, headers, body: prop(options, "body"), signal, intent };
}
