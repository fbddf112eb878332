// The package build, every command line once: `node server/node/build.mjs` (the xtask's step g runs it).
//   1. cargo build --release --target wasm32-unknown-unknown -p idempotent-endpoint-node-core
//   2. wasm-bindgen --target nodejs: the glue (src/generated/core.js + .d.ts + core_bg.wasm, git-ignored)
//   3. tsc -p server/node/tsconfig.json: CommonJS and declarations into dist/
//   4. dist/generated/: the glue and the wasm; dist/<entry>.mjs + .d.mts for each entry: the ESM entry,
//      re-exporting the CommonJS module's names (one module instance whichever way it is loaded), and
//      its declarations
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../..");
const CRATE = "idempotent-endpoint-node-core";
const GENERATED = path.join(HERE, "src/generated");
/** The package's entries (package.json "exports"): each gets an ESM wrapper over its CommonJS module. */
const ENTRIES = ["index", "hono", "fastify", "next", "drizzle", "kysely", "prisma"];
const DIST = path.join(HERE, "dist");
const PATH = [path.join(ROOT, "tools/node_modules/.bin"), process.env.PATH, path.join(os.homedir(), ".cargo/bin")].join(path.delimiter);

function run(command, args, capture = false) {
  console.log(`$ ${command} ${args.join(" ")}`);
  return execFileSync(command, args, { cwd: ROOT, env: { ...process.env, PATH }, stdio: capture ? ["ignore", "pipe", "inherit"] : "inherit", encoding: "utf8" });
}

const meta = JSON.parse(run("cargo", ["metadata", "--format-version", "1", "--no-deps"], true));
run("cargo", ["build", "--release", "--target", "wasm32-unknown-unknown", "-p", CRATE]);
const wasm = path.join(meta.target_directory, "wasm32-unknown-unknown/release", `${CRATE.replaceAll("-", "_")}.wasm`);
rmSync(GENERATED, { recursive: true, force: true });
run("wasm-bindgen", ["--target", "nodejs", "--out-dir", GENERATED, "--out-name", "core", wasm]);
rmSync(DIST, { recursive: true, force: true });
run("tsc", ["-p", path.join(HERE, "tsconfig.json")]);
mkdirSync(path.join(DIST, "generated"), { recursive: true });
for (const file of ["core.js", "core.d.ts", "core_bg.wasm"]) copyFileSync(path.join(GENERATED, file), path.join(DIST, "generated", file));
const names = {};
for (const entry of ENTRIES) {
  names[entry] = Object.keys(createRequire(import.meta.url)(path.join(DIST, `${entry}.js`))).filter((n) => n !== "__esModule").sort();
  writeFileSync(path.join(DIST, `${entry}.mjs`), `// The ESM entry: the CommonJS module's exports (built by build.mjs).\nimport cjs from "./${entry}.js";\nexport const { ${names[entry].join(", ")} } = cjs;\n`);
  // The entry's declarations as they are, not a re-export of them: a peer's types imported from here then
  // resolve as ESM (drizzle-orm ships separate .d.ts and .d.cts, and a table from one is not one of the other).
  copyFileSync(path.join(DIST, `${entry}.d.ts`), path.join(DIST, `${entry}.d.mts`));
}
chmodSync(path.join(DIST, "cli.js"), 0o755);
console.log(`built ${path.relative(ROOT, DIST)}/ (exports: ${JSON.stringify(names)})`);
