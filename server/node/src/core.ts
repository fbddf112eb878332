// The one edge to the wasm core (server/node/core): every protocol decision is made there, by the Rust
// library's code; this module calls it and reads each JSON answer back once, next to its type. The
// statements, numbers and names are the Rust library's too, generated into ./facts.ts.
import type { Decision, RefusalKind } from "./facts.js";
import * as wasm from "./generated/core.js";

export { constants, IDEMPOTENCY_KEY_HEADER, REPLAYED_HEADER } from "./facts.js";
export type { Constants, Decision, RefusalKind } from "./facts.js";

/** An HTTP answer: what the endpoint sends (status, headers as `[name, value]` pairs, body text). */
export interface Answer {
  /** The HTTP status. */
  status: number;
  /** The headers, lowercase names, in order. */
  headers: [string, string][];
  /** The body, byte for byte. */
  body: string;
}

/** A key row's columns as `selectRow` reads them. */
export type KeyRow = Record<string, unknown>;

/** The wasm core failed to read a value (a corrupt row, an answer it cannot store). */
export class CoreError extends Error {
  /** `CoreError`. */
  override name = "CoreError";
}

type Parsed<T> = T | { error: string };

function read<T extends object>(text: string): T {
  const value = JSON.parse(text) as Parsed<T>;
  if ("error" in value && typeof value.error === "string") throw new CoreError(value.error);
  return value as T;
}

/** The key from every value of the `Idempotency-Key` header, or the 400 answer. */
export function keyFromHeader(values: string[]): { key: string } | { answer: Answer } {
  return read(wasm.keyFromHeader(values));
}

/** A key from a URL (key status), or the 400 answer. */
export function parseKey(raw: string): { key: string } | { answer: Answer } {
  return read(wasm.parseKey(raw));
}

/** The request's fingerprint (method, path, body). */
export function fingerprint(method: string, path: string, body: Uint8Array): string {
  return wasm.fingerprint(method, path, body);
}

/** The decision for a request whose key row exists: replay, 422, 409 or 410, with its answer. */
export function decide(fingerprintOfRequest: string, row: KeyRow): { outcome: Decision; answer: Answer } {
  return read(wasm.decide(fingerprintOfRequest, JSON.stringify(row)));
}

/** The 409 with `Retry-After` for a key in flight. */
export function inFlightAnswer(): Answer {
  return read(wasm.inFlightAnswer());
}

/** The work's answer checked for the key row: the answer and its `response_headers` column. */
export function freshAnswer(status: number, headers: [string, string][], body: string): { answer: Answer; headers: string } {
  return read(wasm.freshAnswer(status, JSON.stringify(headers), body));
}

/** The problem answer of a refusal (`detail` for `invalid-body`). */
export function problemAnswer(kind: RefusalKind, detail?: string): Answer {
  return read(wasm.problemAnswer(kind, detail));
}

/** An answer with a problem of the app's own (RFC 9457, the library's layout: `type` from `code`, `Retry-After` when `retryAfterSecs` is given); `status` is 400 to 599. */
export function customProblem(status: number, code: string, title: string, detail: string, retryAfterSecs?: number): Answer {
  return read(wasm.customProblem(status, code, title, detail, retryAfterSecs));
}

/** The key-status answer (GET) from the in-flight mark and the live row, if any. */
export function statusAnswer(held: boolean, row: KeyRow | undefined): Answer {
  return read(wasm.statusAnswer(held, row === undefined ? undefined : JSON.stringify(row)));
}

/** The settle answer (POST) after the fence insert, and whether to commit. */
export function settleAnswer(inserted: boolean, row: KeyRow | undefined): { commit: boolean; answer: Answer } {
  return read(wasm.settleAnswer(inserted, row === undefined ? undefined : JSON.stringify(row)));
}

/** The `in_flight` key-status answer. */
export function inFlightStatusAnswer(): Answer {
  return read(wasm.inFlightStatusAnswer());
}

/** The retention cutoff (unix seconds) at `nowSecs`. */
export function expiredBefore(nowSecs: number, retentionSecs: number): number {
  return wasm.expiredBefore(nowSecs, retentionSecs);
}

/** Why `scope` cannot own keys, or undefined. */
export function scopeError(scope: string): string | undefined {
  return wasm.scopeError(scope);
}

/** The name of the key's in-flight mark (the advisory lock). */
export function lockName(scope: string, key: string): string {
  return wasm.lockName(scope, key);
}

/** What a span shows of a key, never the key: the first hex digits of its SHA-256 (the Rust library's `key_hash`). */
export function keyHash(key: string): string {
  return wasm.keyHash(key);
}

/** A W3C `traceparent` as the Rust library reads it: its value in the W3C form and its fields. */
export interface Traceparent {
  /** The value, `00-{traceId}-{spanId}-{flags}`. */
  traceparent: string;
  /** The trace id, 32 lowercase hex digits (never all zero). */
  traceId: string;
  /** The parent span's id, 16 lowercase hex digits (never all zero). */
  spanId: string;
  /** The trace flags (bit 0: sampled). */
  traceFlags: number;
}

/** `value` read as a W3C `traceparent` (the Rust library's `TraceParent::parse`), or undefined when it is not a valid version 00 value. */
export function traceparent(value: string): Traceparent | undefined {
  return (JSON.parse(wasm.traceparent(value)) as Traceparent | null) ?? undefined;
}

/** The outbox's wait (ms) before the next attempt of a message that failed `attempts` times: the client crate's capped exponential backoff with full jitter, drawing from `random`. */
export function retryDelay(baseMs: number, maxMs: number, attempts: number, random: Uint8Array): number {
  return wasm.retryDelay(baseMs, maxMs, attempts, random);
}

/** Why an inbox source or message id cannot be recorded, or undefined. */
export function inboxIdsError(source: string, messageId: string): string | undefined {
  return wasm.inboxIdsError(source, messageId);
}

/** The answer stored on an inbox record (marked replayed for a re-delivery). */
export function inboxAnswer(row: Record<string, unknown>, duplicate: boolean): Answer {
  return read(wasm.inboxAnswer(JSON.stringify(row), duplicate));
}

/** The idempotency key of the external call made at `step` by the key row `rowId` (the Rust library's `Held::downstream_key`). */
export function downstreamKey(rowId: string, step: string): string {
  return wasm.downstreamKey(rowId, step);
}

/** Why a phase may not advance to `point` (only finishing reaches the finished point), or undefined. */
export function advancePointError(point: string): string | undefined {
  return wasm.advancePointError(point);
}

/** The decision of a phased begin for an existing key row: take it over (its lease ran out), or the answer. */
export function beginDecision(
  fingerprintOfRequest: string,
  row: KeyRow,
  lockedUntilMs: number,
  nowMs: number,
): { take_over: true } | { outcome: Decision; answer: Answer } {
  return read(wasm.beginDecision(fingerprintOfRequest, JSON.stringify(row), lockedUntilMs, nowMs));
}
