// The wasm machine as the driver sees it (docs/WASM-BOUNDARY.md, the contract): the classes of
// the glue (abi.ts), over the module's exports (src/wasm/abi.rs). Every call is synchronous. A refused
// `create`, `begin` or `load` returns undefined and leaves its error in `lastError()`, the number
// `code * 256 + detail` (messages.ts), which the driver throws (`refused()` in wasm.ts).

import type { Engine as WasmEngine, Machine as WasmMachine } from "./abi.js";

/** One intent's record and one `send` loop (src/wasm.rs `Machine`). */
export type Machine = WasmMachine;
/** One per client: the policy and the client-wide retry budget (src/wasm.rs `Engine`). */
export type Engine = WasmEngine;
/** The Engine class: `create` range-checks the options, one number per `OPT_*`. */
export type EngineClass = typeof WasmEngine;

// The numbers of the contract (actions, events, fields, codes, options), generated from src/contract.rs.
export * from "./generated/contract.js";
