// Node's HTTP objects on the endpoint: read a keyed request (the key before the body, the body within a
// size limit and a deadline, JSON checked), and send an answer. The framework integrations are thin
// shells over these.
import type { IncomingMessage, ServerResponse } from "node:http";

import * as core from "./core.js";
import type { Answer } from "./core.js";
import type { HandlerAnswer, IdempotentEndpoint, RunResult } from "./endpoint.js";

/** Limits on a keyed request's body. */
export interface BodyLimits {
  /** The largest body accepted, in bytes (larger: 413, nothing stored). @defaultValue 65536 */
  maxBodyBytes?: number;
  /** How long the whole body may take to arrive, in milliseconds (slower: 408, nothing stored). @defaultValue 10000 */
  bodyTimeoutMs?: number;
}

/** What a protected handler gets: the parsed JSON body, the open transaction, the key and its scope. */
export interface HandlerContext<Tx> {
  /** The request body, parsed as JSON. */
  json: unknown;
  /** The open transaction: write the app's rows through it, so they commit with the key row. */
  tx: Tx;
  /** The idempotency key. */
  key: string;
}

/** The largest body accepted when `maxBodyBytes` is not given. */
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024;
/** How long a body may take when `bodyTimeoutMs` is not given (the Rust library's `BodyDeadline::DEFAULT`). */
export const DEFAULT_BODY_TIMEOUT_MS: number = core.constants.bodyTimeoutMs;

/** A web `ReadableStream` body (Hono, fetch-style frameworks) within the limits, or the refusal's answer. */
export async function readWebBody(stream: ReadableStream<Uint8Array> | null, declaredLength: string | null | undefined, limits: BodyLimits = {}): Promise<Uint8Array | Answer> {
  const max = limits.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  if (Number(declaredLength ?? "0") > max) return core.problemAnswer("body-too-large");
  if (stream === null) return new Uint8Array();
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), limits.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS)));
  try {
    for (;;) {
      const next = await Promise.race([reader.read(), late]);
      if (next === "late") {
        await reader.cancel().catch(() => undefined);
        return core.problemAnswer("body-timeout");
      }
      if (next.done) return Buffer.concat(chunks);
      size += next.value.length;
      if (size > max) {
        await reader.cancel().catch(() => undefined);
        return core.problemAnswer("body-too-large");
      }
      chunks.push(next.value);
    }
  } catch {
    return core.problemAnswer("unreadable-body");
  } finally {
    clearTimeout(timer);
  }
}

/** The body of `req` within the limits, or the refusal's answer. */
export async function readBody(req: IncomingMessage, limits: BodyLimits = {}): Promise<Uint8Array | Answer> {
  const max = limits.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const declared = Number(req.headers["content-length"] ?? "0");
  if (declared > max) return core.problemAnswer("body-too-large");
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (result: Uint8Array | Answer): void => {
      clearTimeout(timer);
      req.removeAllListeners("data");
      resolve(result);
    };
    const timer = setTimeout(() => finish(core.problemAnswer("body-timeout")), limits.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS);
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) finish(core.problemAnswer("body-too-large"));
      else chunks.push(chunk);
    });
    req.on("end", () => finish(Buffer.concat(chunks)));
    req.on("error", () => finish(core.problemAnswer("unreadable-body")));
    req.on("aborted", () => finish(core.problemAnswer("unreadable-body")));
  });
}

/** A body read as JSON: the value, or the answer refusing it. */
export type ParsedJson = JsonBody | Refused;

/** A body that is JSON. */
export interface JsonBody {
  /** The parsed body. */
  json: unknown;
}

/** Input refused before any key row was written. */
export interface Refused {
  /** The problem answer. */
  answer: Answer;
}

/** The body as JSON, or the 400 `invalid-body` answer (a body that is not JSON stores nothing). */
export function parseJson(req: IncomingMessage, body: Uint8Array): ParsedJson {
  return parseJsonBody(req.headers["content-type"], body);
}

/** A body with its `Content-Type` as JSON, or the 400 `invalid-body` answer. */
export function parseJsonBody(contentType: string | null | undefined, body: Uint8Array): ParsedJson {
  const type = (contentType ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
  if (type !== "application/json" && !type.endsWith("+json")) {
    return { answer: core.problemAnswer("invalid-body", "The body must be JSON, sent with Content-Type: application/json.") };
  }
  try {
    return { json: JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("utf8")) };
  } catch (error) {
    return { answer: core.problemAnswer("invalid-body", `The body is not valid JSON: ${error instanceof Error ? error.message : String(error)}`) };
  }
}

/**
 * Every value of the `Idempotency-Key` header of `req`. A request without `headersDistinct` (Fastify's
 * `inject`, light-my-request, makes one) has a repeated field's values joined with ", ": they are split
 * back, as the key grammar has no comma-space.
 */
export function keyHeader(req: IncomingMessage): string[] {
  const distinct = req.headersDistinct as IncomingMessage["headersDistinct"] | undefined;
  if (distinct !== undefined) return distinct[core.IDEMPOTENCY_KEY_HEADER] ?? [];
  const joined = req.headers[core.IDEMPOTENCY_KEY_HEADER];
  return splitKeyHeader(Array.isArray(joined) ? joined.join(", ") : joined);
}

/** The values of an `Idempotency-Key` field whose repeats were joined with ", " (web `Headers`, a joined record). */
export function splitKeyHeader(joined: string | null | undefined): string[] {
  return joined === null || joined === undefined ? [] : joined.split(", ");
}

/**
 * One protected request from Node's `req`: the key first (400 before the body is read), the body within
 * `limits`, JSON checked, then {@link IdempotentEndpoint.run} with `handler`. Refused input stores nothing.
 */
export async function handleKeyed<Tx>(
  endpoint: IdempotentEndpoint<Tx>,
  req: IncomingMessage,
  handler: (context: HandlerContext<Tx>) => Promise<HandlerAnswer>,
  options: BodyLimits & { scope?: string } = {},
): Promise<RunResult> {
  const keyed = core.keyFromHeader(keyHeader(req));
  if ("answer" in keyed) return { answer: keyed.answer, outcome: "refused" };
  const body = await readBody(req, options);
  if (!(body instanceof Uint8Array)) return { answer: body, outcome: "refused" };
  const parsed = parseJson(req, body);
  if ("answer" in parsed) return { answer: parsed.answer, outcome: "refused" };
  const path = new URL(req.url ?? "/", "http://localhost").pathname;
  const request = { method: req.method ?? "POST", path, keyHeader: keyHeader(req), body, headers: req.headers, ...(options.scope === undefined ? {} : { scope: options.scope }) };
  return endpoint.run(request, (tx) => handler({ json: parsed.json, tx, key: keyed.key }));
}

/** The answer of a failure the endpoint could not attribute (the handler threw): 500, safe to retry. */
export function internalAnswer(): Answer {
  return core.problemAnswer("internal");
}

/** Sends `answer` on `res`. */
export function sendAnswer(res: ServerResponse, answer: Answer): void {
  res.statusCode = answer.status;
  for (const [name, value] of answer.headers) res.appendHeader(name, value);
  res.end(answer.body);
}
