// The wasm machine's glue: the driver's side of the module's plain exports (src/wasm/abi.rs is the
// other side of each signature; docs/WASM-BOUNDARY.md, "The ABI"). `Engine` and `Machine` hold the
// address of their box in the module; strings and number arrays go through the module's scratch
// buffer (`put`); a refused call returns undefined with its error in `lastError()`.
//
// `init()` fetches the .wasm next to this module; the package build gives each bundle its own source
// in place of that fetch (package/build.mjs `glueFor`: the request the browser bundle starts first,
// the bytes from disk for Node, which instantiates with `initSync` at import).

import type { Exports, Handle, Length } from "./generated/abi.js";

/** The instance's exports; `undefined` until `init` or `initSync` (every call needs them). */
let wasm = undefined as unknown as Exports;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** `len` bytes of the module's memory at `at` (a fresh view: a grown memory detaches the old ones). */
const bytes = (at: number, len?: number): Uint8Array<ArrayBuffer> => new Uint8Array(wasm.memory.buffer, at, len);

/** Writes a call's numbers, then its strings as UTF-8, into the scratch buffer; returns each string's
 *  byte length, -1 for one that is absent (`Headers.get`'s null included). */
function put<S extends (string | null | undefined)[]>(numbers: ArrayLike<number>, ...strings: S): { [K in keyof S]: Length } {
  // Room for the worst case: 3 bytes of UTF-8 per UTF-16 unit.
  // Addresses as unsigned (`>>> 0`): wasm returns an i32, negative past 2 GiB.
  let at = wasm.if_buf(strings.reduce((size: number, s) => size + (s ? s.length * 3 : 0), numbers.length * 8)) >>> 0;
  new Float64Array(wasm.memory.buffer, at, numbers.length).set(numbers);
  at += numbers.length * 8;
  return strings.map((s) => {
    if (s == null) return -1;
    const written = encoder.encodeInto(s, bytes(at)).written ?? 0;
    at += written;
    return written;
  }) as { [K in keyof S]: Length };
}

/** Frees what the garbage collector collects before the driver freed it. */
const registry = (free: (handle: Handle) => void): FinalizationRegistry<Handle> | undefined =>
  typeof FinalizationRegistry === "undefined" ? undefined : new FinalizationRegistry(free);
const machines = registry((handle) => wasm.machine_free(handle));
const engines = registry((handle) => wasm.engine_free(handle));

/** One intent's record and one `send` loop (src/wasm.rs `Machine`). */
export class Machine {
  /** @internal The box's address in the module; 0 once freed or handed back. */
  wasmHandle: number;

  /** @internal */
  constructor(handle: number) {
    this.wasmHandle = handle;
    machines?.register(this, handle, this);
  }

  /** @internal Hands the box back to the module (`begin` consumes its candidates): this object is empty after. */
  takeHandle(): number {
    const handle = this.wasmHandle;
    this.wasmHandle = 0;
    machines?.unregister(this);
    return handle;
  }

  /** Frees the machine's memory in the module (the object is empty after). */
  free(): void {
    wasm.machine_free(this.takeHandle());
  }

  /** The idempotency key; with `header` true, the key header's value. */
  key(header: boolean): string {
    const len = wasm.machine_key(this.wasmHandle, header);
    return decoder.decode(bytes(wasm.if_buf(0) >>> 0, len >>> 0));
  }

  /** The driver saved the record. */
  markSaved(): void {
    wasm.machine_mark_saved(this.wasmHandle);
  }

  /** One number of the action's payload or of the record, by `F_*` field; NaN for an unknown field. */
  get(field: number): number {
    return wasm.machine_get(this.wasmHandle, field);
  }

  /** The attempt got an answer; header values as `Headers.get` returns them. Returns the action. */
  onResponse(nowMs: number, status: number, retryAfter: string | null | undefined, stripeShouldRetry: string | null | undefined, replayed: string | null | undefined, override: number): number {
    return wasm.machine_on_response(this.wasmHandle, nowMs, status, override, ...put([], retryAfter, stripeShouldRetry, replayed));
  }

  /** The server's key-status answer after RECONCILE. Returns the action. */
  onKeyStatus(nowMs: number, kind: number, status: number, retryAfter?: string | null): number {
    return wasm.machine_on_key_status(this.wasmHandle, nowMs, kind, status, ...put([], retryAfter));
  }

  /** An event of the send loop other than an answer, by `EV_*` number. Returns the action. */
  on(event: number, nowMs: number, online: boolean): number {
    return wasm.machine_on(this.wasmHandle, event, nowMs, online);
  }
}

const machine = (handle: number): Machine | undefined => (handle ? new Machine(handle) : undefined);

/** One per client: the policy and the client-wide retry budget (src/wasm.rs `Engine`). */
export class Engine {
  /** @internal The box's address in the module; 0 once freed. */
  wasmHandle: number;

  /** @internal */
  constructor(handle: number) {
    this.wasmHandle = handle;
    engines?.register(this, handle, this);
  }

  /** Range-checks the options, one number per `OPT_*`; undefined when refused (`lastError()`). */
  static create(options: ArrayLike<number>): Engine | undefined {
    put(options);
    const handle = wasm.engine_create(options.length);
    return handle ? new Engine(handle) : undefined;
  }

  /** Frees the engine's memory in the module (the object is empty after). */
  free(): void {
    engines?.unregister(this);
    wasm.engine_free(this.wasmHandle);
    this.wasmHandle = 0;
  }

  /** Tokens left in the client-wide retry budget. */
  budget(): number {
    return wasm.engine_budget(this.wasmHandle) >>> 0;
  }

  /** Create-or-resume; `stored` and `claimed` are consumed (emptied). Undefined when refused. */
  begin(
    intentId: string,
    fingerprint: string,
    storedFingerprint: string,
    nowMs: number,
    replace: boolean,
    key?: string | null,
    stored?: Machine | null,
    claimed?: Machine | null,
  ): Machine | undefined {
    const lengths = put([], intentId, fingerprint, storedFingerprint, key);
    return machine(wasm.engine_begin(this.wasmHandle, nowMs, replace, stored?.takeHandle(), claimed?.takeHandle(), ...lengths));
  }

  /** Validates a stored record's values (numbers by `FIELD_*`). Undefined when refused. */
  load(intentId: string, id: string, key: string, fingerprint: string, numbers: ArrayLike<number>): Machine | undefined {
    return machine(wasm.engine_load(this.wasmHandle, numbers.length, ...put(numbers, intentId, id, key, fingerprint)));
  }

  /** The sweep's rule for one record: `SWEEP_*`. */
  sweep(record: Machine, nowMs: number): number {
    return wasm.engine_sweep(this.wasmHandle, record.wasmHandle, nowMs);
  }
}

/** The error of the last refused call: `code * 256 + detail`. */
export const lastError = (): number => wasm.if_last_error() >>> 0;

/** What the module imports: the CSPRNG, a throw caught here (0: no Web Crypto). */
function imports(): WebAssembly.Imports {
  return {
    idempotent_fetch: {
      fillRandom(at: number, len: number): boolean {
        try {
          crypto.getRandomValues(bytes(at, len));
          return true;
        } catch {
          return false;
        }
      },
    },
  };
}

function ready(made: WebAssembly.Instance): void {
  wasm = made.exports as unknown as Exports;
}

/** Instantiates the module from its bytes, synchronously (Node, at import). */
export function initSync(module: BufferSource): void {
  if (!wasm) ready(new WebAssembly.Instance(new WebAssembly.Module(module), imports()));
}

/** Fetches and instantiates the module (once; again after a failure). Served without the
 *  `application/wasm` type, it compiles from the bytes instead of while streaming, and warns. */
export async function init(): Promise<void> {
  if (wasm) return;
  const response = await fetch(new URL("idempotent_fetch_bg.wasm", import.meta.url));
  if (!response.ok) throw new Error(`failed to fetch Wasm: ${response.status} ${response.statusText} fetching '${response.url}'`);
  let made: WebAssembly.WebAssemblyInstantiatedSource;
  try {
    made = await WebAssembly.instantiateStreaming(response, imports());
  } catch (error) {
    if (response.headers.get("Content-Type") === "application/wasm") throw error;
    // The production build's warning is short, as its others are (mode.ts); both name the fix.
    console.warn(
      __DEV__
        ? "`WebAssembly.instantiateStreaming` failed because your server does not serve Wasm with `application/wasm` MIME type. Falling back to `WebAssembly.instantiate`. Original error:\n"
        : "idempotent-fetch: serve the .wasm as application/wasm\n",
      error,
    );
    made = await WebAssembly.instantiate(await response.arrayBuffer(), imports());
  }
  if (!wasm) ready(made.instance);
}
