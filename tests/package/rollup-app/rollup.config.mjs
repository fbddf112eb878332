// Rollup 4 resolves no package by itself and leaves `new URL("./idempotent_fetch_bg.wasm",
// import.meta.url)` alone: node-resolve finds the package (its `browser` export), and
// import-meta-assets emits the .wasm and rewrites that URL to it (the README's one line).
// tests/js/package.test.mjs runs `rollup -c --dir <a temporary folder>`.
import { nodeResolve } from "@rollup/plugin-node-resolve";
import { importMetaAssets } from "@web/rollup-plugin-import-meta-assets";

export default {
  input: "main.js",
  output: { dir: "dist", format: "es" },
  plugins: [nodeResolve({ browser: true }), importMetaAssets()],
};
