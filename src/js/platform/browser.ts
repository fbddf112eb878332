// Browsers, bundlers (Vite, webpack: they understand `new URL(..., import.meta.url)` and ship the
// file) and workers: the wasm file next to the package's entry, fetched and compiled streaming.

import init, { Engine } from "../generated/idempotent_fetch.js";
import type { EngineConstructor } from "../machine.js";
import { configureWasm } from "../wasm.js";

const engine: EngineConstructor = Engine;
configureWasm(() => init({ module_or_path: new URL("./idempotent_fetch_bg.wasm", import.meta.url) }), { Engine: engine });
