// Generated from src/wasm/abi.rs by `IF_BLESS=1 cargo test --test abi_exports`: do not edit.
// The module's exports as the glue (src/js/abi.ts) calls them (docs/WASM-BOUNDARY.md, "The ABI").

/** An `Engine` or `Machine` as the glue holds it: the address of its box in the module, 0 for none. */
export type Handle = number;
/** A string's UTF-8 byte length in the module's scratch buffer, -1 when absent. */
export type Length = number;

/** The module's exports: every value a number (handles, lengths, 0/1 booleans). */
export interface Exports {
  /** The module's memory (the scratch buffer and every string the module returns are in it). */
  readonly memory: WebAssembly.Memory;
  /** Room for `len` bytes of arguments: the address of the scratch buffer (valid until the next call that grows the memory). */
  if_buf(len: number): number;
  /** `lastError()`: the error of the last refused call (`code * 256 + detail`). */
  if_last_error(): number;
  /** `Engine.create(options)`: the options are the buffer's `count` numbers. */
  engine_create(count: number): Handle;
  /** Frees an engine (0: nothing). */
  engine_free(engine: Handle): void;
  /** `engine.budget()`; 0 for a freed engine. */
  engine_budget(engine: Handle): number;
  /** `engine.begin(...)`: the strings are intent id, fingerprint, stored fingerprint and the brought key (optional); `stored` and `claimed` are consumed (freed here) whatever the outcome. */
  engine_begin(engine: Handle, nowMs: number, replace: boolean, stored: Handle | undefined, claimed: Handle | undefined, intentId: Length, fingerprint: Length, storedFingerprint: Length, key: Length): Handle;
  /** `engine.load(...)`: the record's numbers are the buffer's `count` numbers, then the strings intent id, id, key and fingerprint. */
  engine_load(engine: Handle, count: number, intentId: Length, id: Length, key: Length, fingerprint: Length): Handle;
  /** `engine.sweep(record, nowMs)`; `SWEEP_KEEP` for a freed engine or record. */
  engine_sweep(engine: Handle, record: Handle, nowMs: number): number;
  /** Frees a machine (0: nothing). */
  machine_free(machine: Handle): void;
  /** `machine.key(header)`: the string's byte length; the UTF-8 is at the start of the scratch buffer. */
  machine_key(machine: Handle, header: boolean): number;
  /** `machine.markSaved()`. */
  machine_mark_saved(machine: Handle): void;
  /** `machine.get(field)`; NaN for a freed machine. */
  machine_get(machine: Handle, field: number): number;
  /** `machine.onResponse(...)`: the strings are Retry-After, Stripe-Should-Retry and the replay header's value, each optional. A freed machine returns 0, an action no driver knows. */
  machine_on_response(machine: Handle, nowMs: number, status: number, override: number, retryAfter: Length, stripeShouldRetry: Length, replayed: Length): number;
  /** `machine.onKeyStatus(...)`: the string is Retry-After (optional). */
  machine_on_key_status(machine: Handle, nowMs: number, kind: number, status: number, retryAfter: Length): number;
  /** `machine.on(event, nowMs, online)`. */
  machine_on(machine: Handle, event: number, nowMs: number, online: boolean): number;
}
