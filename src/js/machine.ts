// The wasm machine as the driver sees it (docs/WASM-BOUNDARY.md, the contract). The generated
// bindings must offer at least these members (checked below: a removed or changed export fails `tsc`;
// the machine may add exports freely). Every call is synchronous. A refused `create`, `begin` or
// `load` returns undefined and leaves its error in `lastError()`, the number `code * 256 + detail`
// (messages.ts), which the driver throws (`refused()` in wasm.ts).

import type { Engine as WasmEngine, Machine as WasmMachine } from "./generated/idempotent_fetch.js";

/** One intent's record and one `send` loop: what the driver calls. */
export interface MachineContract {
  /** The idempotency key; `key(true)`: the key header's value (raw or sf-string). */
  key(header: boolean): string;
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
  /** The server's key-status answer after RECONCILE: `kind` one of `KEY_*`, `status`
   *  the stored answer's (done), `retryAfter` the status answer's (in flight). */
  onKeyStatus(nowMs: number, kind: number, status: number, retryAfter: string | undefined): number;
  /** One number of the action's payload or outcome, or of the record: `field` is one of the `F_*` below (booleans 1/0). */
  get(field: number): number;
  /** Frees the wasm memory (wasm-bindgen). */
  free(): void;
}

/** One per client: the policy and the client-wide retry budget. `M`: the generated Machine class. */
export interface EngineContract<M extends MachineContract> {
  budget(): number;
  /** Create-or-resume from this tab's stored record and the intent's claim (both consumed): field
   *  `F_RESUMED` says which record was resumed (`RESUMED_*`: none, the stored one or the claim),
   *  `F_DIRTY` whether to save first. */
  begin(
    intentId: string,
    fingerprint: string,
    storedFingerprint: string,
    nowMs: number,
    replace: boolean,
    key: string | undefined,
    stored: M | undefined,
    claimed: M | undefined,
  ): M | undefined;
  /** A stored record: its strings, and its numbers by `FIELD_*` (`RECORD_SLOTS` long, the state as
   *  its index in `STATES`; see record.ts). */
  load(intentId: string, id: string, key: string, fingerprint: string, numbers: Float64Array): M | undefined;
  /** One of the `SWEEP_*` verdicts. */
  sweep(record: M, nowMs: number): number;
  /** Frees the wasm memory (wasm-bindgen). */
  free(): void;
}

/** The Engine class: `create` range-checks the options, one number per `OPT_*` (undefined when
 *  refused, see `lastError`). */
export interface EngineClassContract<M extends MachineContract> {
  create(options: Float64Array): EngineContract<M> | undefined;
}

/** `T`, once it is known to offer `U`. */
type Satisfies<T extends U, U> = T;

/** The generated classes, checked against the contract: the driver uses these types. */
export type Machine = Satisfies<WasmMachine, MachineContract>;
export type Engine = Satisfies<WasmEngine, EngineContract<WasmMachine>>;
export type EngineClass = Satisfies<typeof WasmEngine, EngineClassContract<WasmMachine>>;

// The numbers of the contract (actions, events, fields, codes, options), generated from src/contract.rs.
export * from "./generated/contract.js";
