// The wasm machine as the driver sees it (docs/WASM-BOUNDARY.md, the contract). The generated
// bindings must offer at least these members (checked below: a removed or changed export fails `tsc`;
// the machine may add exports freely). Every call is synchronous. A refused `create`, `begin` or
// `load` returns undefined and leaves its error in `lastError()`, the number `code * 256 + detail`
// (messages.ts), which the driver throws (`refused()` in wasm.ts).

import type { Engine as WasmEngine, Machine as WasmMachine } from "./generated/idempotent_fetch.js";

/** One intent's record and one `send` loop: what the driver calls. */
export interface MachineContract {
  /** The idempotency key; `key(true)`: the key header's value (raw or sf-string). */
  key(header?: boolean): string;
  /** The driver saved the record (field F_DIRTY reads 0 until it changes again). */
  markSaved(): void;

  /** An event other than an answer: one of the `EV_*` below; `online` is read by start and wake. */
  on(event: number, nowMs: number, online: boolean): number;
  onResponse(
    nowMs: number,
    status: number,
    retryAfter: string | undefined,
    stripeShouldRetry: string | undefined,
    replayed: string | undefined,
    override: number,
  ): number;
  /** The server's key-status answer after RECONCILE: `kind` one of `KS_*` (reconcile.ts), `status`
   *  the stored answer's (done), `retryAfter` the status answer's (in flight). */
  onKeyStatus(nowMs: number, kind: number, status: number, retryAfter: string | undefined): number;
  /** One number of the action's payload or outcome, or of the record: `field` is one of the `F_*` below (booleans 1/0). */
  get(field: number): number;
  /** Frees the wasm memory (wasm-bindgen). */
  free(): void;
  [Symbol.dispose](): void;
}

/** One per client: the policy and the client-wide retry budget. `M`: the generated Machine class. */
export interface EngineContract<M extends MachineContract> {
  budget(): number;
  begin(intentId: string, fingerprint: string, nowMs: number, replace: boolean, stored: M | undefined): M | undefined;
  load(
    intentId: string,
    v: number,
    id: string,
    key: string,
    fingerprint: string,
    createdAt: number,
    updatedAt: number,
    attempts: number,
    state: string,
    lastStatus: number,
    uncertain: boolean | undefined,
  ): M | undefined;
  /** 0 keep, 1 remove, 2 now expired (save it, emit `expired`). */
  sweep(record: M, nowMs: number): number;
  /** Frees the wasm memory (wasm-bindgen). */
  free(): void;
}

/** The Engine class: `create` range-checks the options (undefined when refused, see `lastError`). */
export interface EngineClassContract<M extends MachineContract> {
  create(
    maxAttempts: number,
    baseDelayMs: number,
    maxDelayMs: number,
    totalTimeoutMs: number,
    attemptTimeoutMs: number,
    maxRetryAfterMs: number,
    jitter: number,
    keyTtlMs: number,
    retryBudget: number,
    sfHeader: boolean,
    maxTotalAttempts: number | undefined,
    reconcile: boolean | undefined,
  ): EngineContract<M> | undefined;
}

/** `T`, once it is known to offer `U`. */
type Satisfies<T extends U, U> = T;

/** The generated classes, checked against the contract: the driver uses these types. */
export type Machine = Satisfies<WasmMachine, MachineContract>;
export type Engine = Satisfies<WasmEngine, EngineContract<WasmMachine>>;
export type EngineClass = Satisfies<typeof WasmEngine, EngineClassContract<WasmMachine>>;

/** Actions returned by the send loop's calls. */
export const SEND = 1;
export const WAIT = 2;
export const WAIT_ONLINE = 3;
export const DONE = 4;
export const FAIL = 5;
/** Ask the server about the key (within F_TIMEOUT_MS), then `onKeyStatus`. */
export const RECONCILE = 6;

/** `sweep` verdicts. */
export const KEEP = 0;
export const REMOVE = 1;
export const NOW_EXPIRED = 2;

/** `onResponse`'s override: the caller's `shouldRetry`. */
export const OVERRIDE_NONE = 0;
export const OVERRIDE_RETRY = 1;
export const OVERRIDE_DEFINITE = 2;

/** `get`'s fields (docs/WASM-BOUNDARY.md "Fields"). SEND: the attempt's timeout; WAIT_ONLINE: what is left of the deadline. */
export const F_TIMEOUT_MS = 0;
/** WAIT: the delay. */
export const F_DELAY_MS = 1;
/** WAIT: 1 network, 2 timeout, 3 status. */
export const F_REASON = 2;
/** Attempt number within this send, 1-based. */
export const F_ATTEMPT = 3;
/** Attempts across every send of the intent. */
export const F_TOTAL_ATTEMPTS = 4;
/** DONE: the answer's status, whether it is 2xx, whether the server replayed it. */
export const F_STATUS = 5;
export const F_OK = 6;
export const F_REPLAYED = 7;
/** FAIL: the error. */
export const F_ERROR_CODE = 8;
export const F_ERROR_DETAIL = 9;
/** The record: when the intent began and last changed (ms since the epoch), the last answer's status
 *  (0 = none), whether an attempt may have reached the server without a known outcome (issue 13),
 *  whether it changed since the last `markSaved()` (save it before anything else). Its attempts are
 *  F_TOTAL_ATTEMPTS. */
export const F_CREATED_AT = 10;
export const F_UPDATED_AT = 11;
export const F_LAST_STATUS = 12;
export const F_UNCERTAIN = 13;
export const F_DIRTY = 14;
/** The record's state, an index into `STATES`. */
export const F_STATE = 15;
/** The states by `F_STATE` (the stored record and `IntentInfo` use these names). */
export const STATES = ["pending", "succeeded", "failed", "expired"] as const;

/** `on`'s events (docs/WASM-BOUNDARY.md "Events"). */
export const EV_START = 0;
export const EV_NETWORK_ERROR = 1;
export const EV_TIMEOUT = 2;
export const EV_ABORT = 3;
export const EV_WAKE = 4;
export const EV_ONLINE = 5;
export const EV_ONLINE_TIMEOUT = 6;
/** The app asks the server about the key (`reconcile()`), between sends. */
export const EV_ASK = 7;
