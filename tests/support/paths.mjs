// Where things are, for the Node test runners, and the one way they report a missing prerequisite.
//
//   root                    the repository root
//   pkgDir                  the built package: $IF_PKG (set by the xtask), else <root>/pkg
//   pkgMissing(dir)         a "build it like this" message when `dir` (default pkgDir) has no package
//   importPackage()         the package as Node's `import` gets it (package.json exports, "node" + "import")
//   requirePackage()        the package as Node's `require` gets it ("node" + "require")
//   requirePrerequisites()  throws one error listing everything missing, so a test run says at once
//                           what to install or build instead of failing test by test
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const pkgDir = process.env.IF_PKG ? path.resolve(process.env.IF_PKG) : path.join(root, "pkg");

/** null when `dir` holds a built package, else what to run. */
export function pkgMissing(dir = pkgDir) {
  if (existsSync(path.join(dir, "package.json"))) return null;
  return `${dir} is not built: run \`node package/build.mjs\` (cargo xtask test does)`;
}

/** The file package.json's `exports["."].node[condition]` names: what Node itself would load. */
function nodeEntry(condition) {
  const missing = pkgMissing();
  if (missing) throw new Error(missing);
  const manifest = JSON.parse(readFileSync(path.join(pkgDir, "package.json"), "utf8"));
  const branch = manifest.exports?.["."]?.node?.[condition];
  // A branch is a file, or `{ types, default }` (the declarations TypeScript reads for that condition).
  const target = typeof branch === "string" ? branch : branch?.default;
  if (typeof target !== "string") throw new Error(`${pkgDir}/package.json has no exports["."].node.${condition}`);
  return path.join(pkgDir, target);
}

export const importPackage = () => import(pathToFileURL(nodeEntry("import")).href);
export const requirePackage = () => createRequire(import.meta.url)(nodeEntry("require"));

/** Throws `cannot run <what>:` and one line per non-empty entry of `missing`; returns otherwise. */
export function requirePrerequisites(what, missing) {
  const list = missing.filter(Boolean);
  if (list.length) throw new Error(`cannot run ${what}:\n  - ${list.join("\n  - ")}`);
}
