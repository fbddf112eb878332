// Loads and initialises the wasm machine once: the first `begin`/`fetch` awaits it, and `ready`
// (index.ts) is exported for apps that warm up early. Loading starts when the package is imported.
//
// The glue's `init()` finds the wasm file by itself: its fetch of
// `new URL("idempotent_fetch_bg.wasm", import.meta.url)` is rewritten per platform by the package
// build (package/build.mjs: browsers, bundlers and workers keep the URL next to the bundle, which
// Vite and webpack understand; Node reads the file from disk).

import { Engine, init, lastError } from "./abi.js";
import type { EngineClass } from "./machine.js";

/** What the machine exports, once initialised. */
export interface MachineModule {
  Engine: EngineClass;
}

/** Throws the error of the machine's last refused call (`Engine.create`, `begin`, `load` returned
 *  undefined): the number `code * 256 + detail`, as the call sites' handlers expect. */
export function refused(): never {
  throw lastError();
}

// Checked against the contract (machine.ts): a change on either side fails `tsc`.
const module: MachineModule = { Engine };

let loading: Promise<MachineModule> | undefined;
let loaded: MachineModule | undefined;

/** Starts loading (once; again after a failure, e.g. the wasm file could not be fetched);
 *  resolves to the initialised module. */
export function loadMachine(): Promise<MachineModule> {
  loading ??= init().then(
    () => (loaded = module),
    (error: unknown) => {
      loading = undefined;
      throw error;
    },
  );
  return loading;
}

/** The module if it is initialised already (the synchronous path once `ready` has resolved). */
export function machineIfLoaded(): MachineModule | undefined {
  return loaded;
}
