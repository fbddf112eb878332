// Entry for browsers, bundlers and workers (ESM). The platform part comes first: it tells wasm.ts
// where the wasm file is before api.ts starts loading it.
import "./platform/browser.js";

export * from "./api.js";
