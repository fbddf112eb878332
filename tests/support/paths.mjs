// Where things are, for the Node test runners, and the one way they report a missing prerequisite.
//
//   root                    the repository root
//   pkgWebMissing(dir)      a "build it like this" message when `dir` (default pkg/web) has no package
//   loadPkgNode()           require()s pkg/node (wasm-pack --target nodejs), or throws how to build it
//   requirePrerequisites()  throws one error listing everything missing, so a test run says at once
//                           what to install or build instead of failing test by test
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** null when `dir` holds a `wasm-pack --target web` build, else what to run. */
export function pkgWebMissing(dir = path.join(root, "pkg/web")) {
  if (existsSync(path.join(dir, "idempotent_fetch.js"))) return null;
  return `${dir} is not built: run \`cargo xtask build\` (cargo xtask test does)`;
}

export function loadPkgNode() {
  const entry = path.join(root, "pkg/node/idempotent_fetch.js");
  if (!existsSync(entry)) {
    throw new Error(`${entry} is missing: build it with \`cargo xtask build\` (cargo xtask test does)`);
  }
  return createRequire(import.meta.url)(entry);
}

/** Throws `cannot run <what>:` and one line per non-empty entry of `missing`; returns otherwise. */
export function requirePrerequisites(what, missing) {
  const list = missing.filter(Boolean);
  if (list.length) throw new Error(`cannot run ${what}:\n  - ${list.join("\n  - ")}`);
}
