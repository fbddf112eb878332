// The one edge to the wasm core (server/node/core): every protocol decision is made there, by the Rust
// library's code; this module calls it and reads each JSON answer back once, next to its type.
import * as wasm from "./generated/core.js";

/** An HTTP answer: what the endpoint sends (status, headers as `[name, value]` pairs, body text). */
export interface Answer {
  /** The HTTP status. */
  status: number;
  /** The headers, lowercase names, in order. */
  headers: [string, string][];
  /** The body, byte for byte. */
  body: string;
}

/** The PostgreSQL statements (the Rust library's module `postgres_sql`, the very same text; each field names its constant) and the protocol's numbers. */
export interface Constants {
  /** Named statements, `$1`... parameters. */
  sql: {
    /** The key table and its indexes (`SCHEMA`). */
    schema: string;
    /** Takes the key's in-flight mark without waiting and, holding it, inserts the key row or replaces an expired one; one row `{ held, claimed }` (`CLAIM_KEY`). */
    claimKey: string;
    /** Whether any session holds the key's in-flight mark (`LOCK_HELD`). */
    lockHeld: string;
    /** The key row's fingerprint and answer (`SELECT_ROW`). */
    selectRow: string;
    /** The key row within the retention (`SELECT_LIVE_ROW`). */
    selectLiveRow: string;
    /** Stores the work's answer on the key row (`STORE_ANSWER`). */
    storeAnswer: string;
    /** The lock timeout for the rest of the transaction (`SET_LOCK_TIMEOUT`). */
    setLockTimeout: string;
    /** Deletes key rows past the retention (`SWEEP`). */
    sweep: string;
  };
  /** The outbox's statements (the Rust library's module `outbox_sql`, the very same text). */
  outbox: {
    /** The outbox table (`SCHEMA`). */
    schema: string;
    /** Writes a message in the caller's transaction (`ENQUEUE`). */
    enqueue: string;
    /** Claims due messages with `FOR UPDATE SKIP LOCKED` (`CLAIM`). */
    claim: string;
    /** Schedules one message's next attempt (`RETRY`). */
    retry: string;
    /** A pass's marks in one statement (`MARK`). */
    mark: string;
    /** Undelivered messages and the oldest's enqueue time (`BACKLOG`). */
    backlog: string;
  };
  /** The inbox's statements (the Rust library's module `inbox_sql`, the very same text). */
  inbox: {
    /** The inbox table (`SCHEMA`). */
    schema: string;
    /** Deletes the record if it expired (`FORGET_EXPIRED`). */
    forgetExpired: string;
    /** Inserts the record unless one exists (`INSERT`). */
    insert: string;
    /** The record's answer columns (`SELECT_ANSWER`). */
    selectAnswer: string;
    /** Stores the work's answer on the record (`STORE_ANSWER`). */
    storeAnswer: string;
    /** Deletes records past the retention (`SWEEP`). */
    sweep: string;
    /** The savepoint the record and the work run in (`SAVEPOINT`). */
    savepoint: string;
  };
  /** The atomic phases' statements (the Rust library's module `phases_sql`, the very same text) and the points at either end. */
  phases: {
    /** The recovery point of a new row (`phases::STARTED`). */
    started: string;
    /** The recovery point of a row with its answer (`phases::FINISHED`). */
    finished: string;
    /** Deletes the key's row if it expired (`postgres_sql::FORGET_EXPIRED`). */
    forgetExpired: string;
    /** Inserts a new row at the first point, held (`INSERT_STARTED`). */
    insertStarted: string;
    /** The existing row, locked for the decision (`SELECT_FOR_BEGIN`). */
    selectForBegin: string;
    /** Takes a row over with a new lease (`TAKE_OVER`). */
    takeOver: string;
    /** The lease token of an unfinished row, locked (`CHECK_LEASE`). */
    checkLease: string;
    /** Moves the row to a point, renewing the lease (`ADVANCE`). */
    advance: string;
    /** Stores the answer and ends the lease (`FINISH`). */
    finish: string;
    /** Ends a lease at once (`RELEASE`). */
    release: string;
    /** Deletes a held row still at the first point (`ABANDON`). */
    abandon: string;
    /** The completer's query (`UNFINISHED`). */
    unfinished: string;
  };
  /** How many random bytes the outbox's retry delay draws from at most. */
  retryRandomBytes: number;
  /** The `lock_timeout` a settle waits for a key row held by another transaction. */
  settleLockTimeout: string;
  /** The SQLSTATE of a statement that gave up waiting for a lock. */
  lockNotAvailable: string;
  /** The fingerprint stored on a fence row. */
  fencedFingerprint: string;
  /** The default retention of a key row, in seconds. */
  defaultRetentionSecs: number;
  /** The largest answer body a key row stores, in bytes. */
  maxStoredBodyBytes: number;
  /** The longest key, in characters. */
  maxKeyChars: number;
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

/** The statements and numbers, read once. */
export const constants: Constants = JSON.parse(wasm.constants()) as Constants;

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
export function decide(fingerprintOfRequest: string, row: KeyRow): { outcome: "replay" | "mismatch" | "in_flight" | "fenced"; answer: Answer } {
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

/** Input refused before any key row is written. */
export type RefusalKind = "body-too-large" | "unreadable-body" | "body-timeout" | "invalid-body" | "internal";

/** The problem answer of a refusal (`detail` for `invalid-body`). */
export function problemAnswer(kind: RefusalKind, detail?: string): Answer {
  return read(wasm.problemAnswer(kind, detail));
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
): { take_over: true } | { outcome: "replay" | "mismatch" | "in_flight" | "fenced"; answer: Answer } {
  return read(wasm.beginDecision(fingerprintOfRequest, JSON.stringify(row), lockedUntilMs, nowMs));
}
