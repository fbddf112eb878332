// One keyed request in the web platform's own objects (`Request` in, `Response` out): the shape of Hono's
// context and of Next.js route handlers. The key, the body within the limits and as JSON, then the
// handler's `Response` inside the key row's transaction, stored on the key row and sent as committed.
import * as core from "./core.js";
import type { Answer } from "./core.js";
import type { HandlerAnswer, IdempotentEndpoint } from "./endpoint.js";
import { type BodyLimits, DEFAULT_BODY_TIMEOUT_MS, DEFAULT_MAX_BODY_BYTES, parseJsonBody, readWebBody, splitKeyHeader } from "./http.js";

/** What a protected web handler gets besides the request. */
export interface WebContext<Tx> {
  /** The open transaction: write the app's rows through it, so they commit with the key row. */
  tx: Tx;
  /** The request body, parsed as JSON. */
  json: unknown;
  /** The idempotency key. */
  key: string;
}

/** Options of a protected web handler. */
export interface WebOptions extends BodyLimits {
  /** The scope of the request's key (its account), from the request's headers; the endpoint's scope when absent. */
  scope?: (headers: Headers) => string | undefined;
}

/** An answer as a web `Response`. */
export function toResponse(answer: Answer): Response {
  const body = answer.body === "" ? null : answer.body;
  // A plain record when every name is once (the common case, which @hono/node-server writes without
  // building a Headers); a repeated name (set-cookie) needs the Headers.
  if (new Set(answer.headers.map(([name]) => name)).size === answer.headers.length) {
    return new Response(body, { status: answer.status, headers: Object.fromEntries(answer.headers) });
  }
  const headers = new Headers();
  for (const [name, value] of answer.headers) headers.append(name, value);
  return new Response(body, { status: answer.status, headers });
}

/**
 * The body of `request` within the limits, or the refusal's answer. A body of a declared length within the
 * limit is read whole by the platform (`arrayBuffer()`, which @hono/node-server serves from Node's request
 * without building a stream) against the deadline; a body of unknown length is read chunk by chunk, so
 * that one over the limit is refused as soon as it is.
 */
async function readRequestBody(request: Request, limits: BodyLimits): Promise<Uint8Array | Answer> {
  const declared = request.headers.get("content-length");
  const max = limits.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  if (declared === null || !/^\d+$/.test(declared) || Number(declared) > max) return readWebBody(request.body, declared, limits);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), limits.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS)));
  const read = request.arrayBuffer();
  read.catch(() => undefined);
  try {
    const got = await Promise.race([read, late]);
    if (got === "late") return core.problemAnswer("body-timeout");
    return got.byteLength > max ? core.problemAnswer("body-too-large") : new Uint8Array(got);
  } catch {
    return core.problemAnswer("unreadable-body");
  } finally {
    clearTimeout(timer);
  }
}

/**
 * What a protected web handler answers: a `Response`, or a plain answer (the status, a JSON value or text
 * as the body, headers), which is stored on the key row as it is. A plain answer is the cheaper of the two:
 * a `Response`'s body has to be read back (the platform builds a stream for it) before it can be stored.
 */
export type WebAnswer = Response | HandlerAnswer;

/** Whether the handler answered with a `Response` (of this realm or of another: anything with a readable body). */
function isResponse(answer: WebAnswer): answer is Response {
  return answer instanceof Response || typeof (answer as { arrayBuffer?: unknown }).arrayBuffer === "function";
}

/** A `Response`'s status and headers with `body` as its text: the answer stored on the key row. */
export function answerOf(response: Response, body: string): HandlerAnswer {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    if (name !== "content-length") headers[name] = value;
  });
  return { status: response.status, headers, body };
}

/** The handler's answer as stored on the key row: a plain answer as it is, a `Response` with its body read as text. */
async function fromAnswer(answer: WebAnswer): Promise<HandlerAnswer> {
  return isResponse(answer) ? answerOf(answer, await answer.text()) : answer;
}

/**
 * One keyed web request: a missing or malformed key is 400 before the body is read; a body over the
 * limits or not JSON gets its problem answer; nothing is stored for either. Then `handler` runs inside the
 * key row's transaction and what it returns ({@link WebAnswer}) is stored and returned as a `Response` (or
 * the replay, 409, 422, 410). A handler that throws rolls back and the error is rethrown.
 */
export async function runWeb<Tx>(
  endpoint: IdempotentEndpoint<Tx>,
  request: Request,
  handler: (context: WebContext<Tx>) => Promise<WebAnswer>,
  options: WebOptions = {},
): Promise<Response> {
  // Headers joins a repeated field's values with ", ".
  const values = splitKeyHeader(request.headers.get(core.IDEMPOTENCY_KEY_HEADER));
  const keyed = core.keyFromHeader(values);
  if ("answer" in keyed) return toResponse(keyed.answer);
  const body = await readRequestBody(request, options);
  if (!(body instanceof Uint8Array)) return toResponse(body);
  const parsed = parseJsonBody(request.headers.get("content-type"), body);
  if ("answer" in parsed) return toResponse(parsed.answer);
  const scope = options.scope?.(request.headers);
  const path = new URL(request.url).pathname;
  const keyedRequest = { method: request.method, path, keyHeader: values, body, headers: request.headers, ...(scope === undefined ? {} : { scope }) };
  const result = await endpoint.run(keyedRequest, async (tx) => fromAnswer(await handler({ tx, json: parsed.json, key: keyed.key })));
  return toResponse(result.answer);
}
