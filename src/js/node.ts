// Entry for Node (ESM; the package build also makes the `require` flavour from it). The platform
// part comes first: it tells wasm.ts where the wasm file is before api.ts starts loading it.
import "./platform/node.js";

export * from "./api.js";
