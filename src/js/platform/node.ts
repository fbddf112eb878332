// Node: the wasm file next to the package's entry, read from disk (Node's fetch cannot read file: URLs).

import { readFile } from "node:fs/promises";

import { Engine, initSync } from "../generated/idempotent_fetch.js";
import type { EngineConstructor } from "../machine.js";
import { configureWasm } from "../wasm.js";

const engine: EngineConstructor = Engine;
configureWasm(async () => initSync({ module: await readFile(new URL("./idempotent_fetch_bg.wasm", import.meta.url)) }), {
  Engine: engine,
});
