// Loads and initialises the wasm machine once. The platform entry (index.ts for browsers, bundlers
// and workers; node.ts for Node) says where the bytes come from before anything asks for them; the
// first `begin`/`fetch` awaits `ready`, and `ready` is exported for apps that warm up early.

import type { EngineConstructor } from "./machine.js";

/** Initialises the generated bindings (wasm-bindgen's `init`/`initSync`) from the platform's bytes. */
export type WasmInit = () => Promise<unknown>;

/** What the machine exports, once initialised. */
export interface MachineModule {
  Engine: EngineConstructor;
}

let init: WasmInit | undefined;
let loading: Promise<MachineModule> | undefined;
let loaded: MachineModule | undefined;
let bindings: MachineModule | undefined;

/** Called once by the platform entry, before any client exists. */
export function configureWasm(platformInit: WasmInit, module: MachineModule): void {
  init = platformInit;
  bindings = module;
}

/** Starts loading (once; again after a failure, e.g. the wasm file could not be fetched);
 *  resolves to the initialised module. */
export function loadMachine(): Promise<MachineModule> {
  loading ??= (async () => {
    if (!init || !bindings) throw new Error("idempotent-fetch: no wasm loader configured (import the package entry)");
    await init();
    loaded = bindings;
    return bindings;
  })().catch((error: unknown) => {
    loading = undefined;
    throw error;
  });
  return loading;
}

/** The module if it is initialised already (the synchronous path after `ready`). */
export function machineIfLoaded(): MachineModule | undefined {
  return loaded;
}
