#!/usr/bin/env node
// What ships: gzip -9 and brotli (quality 11) sizes of idempotent-fetch's package, next to the JS retry
// libraries users pick today, bundled to minified browser ESM with esbuild. Then what in our binary
// costs the most (twiggy top, wasm-opt --metrics).
//
//   node benches/size.mjs              build the package (`cargo xtask build`), then measure
//   node benches/size.mjs --no-build   measure the package as it is
//
// Which files ship, their raw and gzip -9 sizes and the budget come from `cargo xtask size --json`
// (xtask/src/size.rs is the one place that says what ships); this script adds brotli and the rest.
//
// Needs: the xtask's tools (wasm-pack, wasm-bindgen, wasm-opt in tools/node_modules),
// benches/size-compare/node_modules (npm ci in benches/size-compare/: the libraries and esbuild; run
// here when missing), and for the "what costs most" part twiggy (`cargo install twiggy`). Prints
// figures; never fails on them.

import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { homedir, tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";

const benches = dirname(fileURLToPath(import.meta.url));
const root = dirname(benches);
const compareDir = join(benches, "size-compare");
const toolsBin = join(root, "tools", "node_modules", ".bin");
const env = { ...process.env, PATH: `${toolsBin}:${join(homedir(), ".cargo", "bin")}:${process.env.PATH}` };
const args = new Set(process.argv.slice(2));

function run(cmd, argv, options = {}) {
  console.error(`$ ${cmd} ${argv.join(" ")}`);
  const r = spawnSync(cmd, argv, { cwd: root, env, stdio: ["ignore", "inherit", "inherit"], ...options });
  if (r.status !== 0) throw new Error(`${cmd} exited with ${r.status ?? r.signal}`);
}

function which(cmd) {
  return spawnSync("sh", ["-c", `command -v ${cmd}`], { env }).status === 0;
}

const gzip = (buf) => gzipSync(buf, { level: 9 }).length;
const brotli = (buf) =>
  brotliCompressSync(buf, {
    params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: buf.length },
  }).length;
const measure = (buf) => ({ raw: buf.length, gzip: gzip(buf), brotli: brotli(buf) });
const add = (a, b) => ({ raw: a.raw + b.raw, gzip: a.gzip + b.gzip, brotli: a.brotli + b.brotli });
const ZERO = { raw: 0, gzip: 0, brotli: 0 };
const kb = (n) => (n / 1024).toFixed(1);

// ---- build ----------------------------------------------------------------------------------------
if (!existsSync(join(compareDir, "node_modules", "esbuild"))) {
  run("npm", ["ci", "--no-audit", "--no-fund"], { cwd: compareDir });
}
const require = createRequire(join(compareDir, "package.json"));
const esbuild = require("esbuild");

// ---- ours ----------------------------------------------------------------------------------------
// What a user's server sends: each shipped file compressed on its own (that is how they travel; the
// .d.ts files are for the editor and never ship).
if (!args.has("--no-build")) run("cargo", ["xtask", "build"]);
const shipped = JSON.parse(execFileSync("cargo", ["xtask", "size", "--json"], { cwd: root, env, encoding: "utf8" }));
const shippedWasm = join(root, shipped.files.find((f) => f.path.endsWith(".wasm")).path);
const shippedJs = join(root, shipped.files.find((f) => f.path.endsWith(".js")).path);
let wasm = ZERO;
let glue = ZERO;
for (const f of shipped.files) {
  const sizes = { raw: f.raw, gzip: f.gzip, brotli: brotli(readFileSync(join(root, f.path))) };
  if (f.path.endsWith(".wasm")) wasm = add(wasm, sizes);
  else glue = add(glue, sizes);
}
const ours = [{ name: `idempotent-fetch (${dirname(relative(root, shippedJs))})`, wasm, glue, total: add(wasm, glue) }];
// A bundler minifies our glue like it minifies everyone else's JS: the fair row to compare with
// the minified bundles below.
{
  const out = await esbuild.build({
    entryPoints: [shippedJs],
    bundle: true,
    minify: true,
    format: "esm",
    platform: "browser",
    target: "es2020",
    write: false,
    logLevel: "silent",
  });
  const minified = measure(Buffer.from(out.outputFiles[0].contents));
  ours.push({ name: `${ours[0].name}, glue minified`, wasm, glue: minified, total: add(wasm, minified) });
}

// ---- theirs --------------------------------------------------------------------------------------
const LIBS = [
  { name: "ky", entry: `export { default } from "ky";` },
  { name: "p-retry", entry: `export { default } from "p-retry";` },
  { name: "fetch-retry", entry: `export { default } from "fetch-retry";` },
  { name: "axios-retry (alone; axios external)", entry: `export { default } from "axios-retry";`, external: ["axios"] },
  { name: "axios", entry: `export { default } from "axios";` },
  {
    name: "axios + axios-retry",
    entry: `import axios from "axios"; import axiosRetry from "axios-retry"; export { axios, axiosRetry };`,
  },
];
const theirs = [];
for (const lib of LIBS) {
  const out = await esbuild.build({
    stdin: { contents: lib.entry, resolveDir: compareDir, loader: "js" },
    bundle: true,
    minify: true,
    format: "esm",
    platform: "browser",
    target: "es2020",
    external: lib.external ?? [],
    write: false,
    logLevel: "silent",
  });
  theirs.push({ name: lib.name, total: measure(Buffer.from(out.outputFiles[0].contents)) });
}
const versions = Object.fromEntries(
  ["ky", "p-retry", "fetch-retry", "axios-retry", "axios", "esbuild"].map((p) => [p, JSON.parse(readFileSync(join(compareDir, "node_modules", p, "package.json"), "utf8")).version]),
);

// ---- report --------------------------------------------------------------------------------------
const reference = ours[0].total; // the package as shipped
console.log(`## What ships (KiB; gzip -9 and brotli q11 of each file, summed; budget ${kb(shipped.budget)} KiB gzip)\n`);
console.log("| package | .wasm raw | .wasm gzip | .wasm brotli | JS raw | JS gzip | JS brotli | total raw | total gzip | total brotli |");
console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
for (const o of ours) {
  console.log(
    `| ${o.name} | ${kb(o.wasm.raw)} | ${kb(o.wasm.gzip)} | ${kb(o.wasm.brotli)} | ${kb(o.glue.raw)} | ${kb(o.glue.gzip)} | ${kb(o.glue.brotli)} | ${kb(o.total.raw)} | ${kb(o.total.gzip)} | ${kb(o.total.brotli)} |`,
  );
}
console.log(`\n## The JS retry libraries, minified browser ESM bundles (esbuild ${versions.esbuild}, es2020)\n`);
console.log("| library | version | raw | gzip | brotli | ours (pkg/web) ÷ this, gzip | ours ÷ this, brotli |");
console.log("|---|---|---:|---:|---:|---:|---:|");
for (const t of theirs) {
  const version = t.name.startsWith("axios + ")
    ? `${versions.axios} + ${versions["axios-retry"]}`
    : versions[t.name.split(" ")[0]];
  console.log(
    `| ${t.name} | ${version} | ${kb(t.total.raw)} | ${kb(t.total.gzip)} | ${kb(t.total.brotli)} | ${(reference.gzip / t.total.gzip).toFixed(1)}× | ${(reference.brotli / t.total.brotli).toFixed(1)}× |`,
  );
}

// ---- what costs most -----------------------------------------------------------------------------
// wasm-pack's wasm-opt strips the name section, so twiggy would only see numbers. Rebuild the shipped
// file with names kept: wasm-bindgen (keeps names unless told otherwise) on cargo's own output, then
// wasm-opt with the same flags as Cargo.toml's wasm-pack profile plus -g (keep names).
const meta = JSON.parse(execFileSync("cargo", ["metadata", "--format-version", "1", "--no-deps"], { cwd: root, env }));
const rawWasm = join(meta.target_directory, "wasm32-unknown-unknown", "release", "idempotent_fetch.wasm");
const work = mkdtempSync(join(tmpdir(), "if-size-"));
try {
  console.log("\n## What in our binary costs the most\n");
  console.log(`cargo's output before wasm-bindgen and wasm-opt: ${kb(statSync(rawWasm).size)} KiB (${rawWasm.replace(root + "/", "")})`);
  run("wasm-bindgen", ["--target", "web", "--out-dir", work, rawWasm]);
  const named = join(work, "idempotent_fetch_bg.wasm");
  const optimized = join(work, "named-opt.wasm");
  const manifest = readFileSync(join(root, "Cargo.toml"), "utf8");
  const flags = (manifest.match(/wasm-opt\s*=\s*\[([^\]]*)\]/)?.[1] ?? `"-Oz"`).match(/"([^"]+)"/g).map((s) => s.slice(1, -1));
  run("wasm-opt", [...flags, "-g", named, "-o", optimized]);
  const plain = join(work, "plain-opt.wasm");
  run("wasm-opt", [...flags, named, "-o", plain]);
  console.log(
    `rebuilt from that file: wasm-opt ${flags.join(" ")} gives ${kb(readFileSync(plain).length)} KiB (shipped: ${kb(wasm.raw)} KiB); ` +
      `with -g (names kept, for twiggy) ${kb(readFileSync(optimized).length)} KiB.\n`,
  );
  if (which("twiggy")) {
    console.log("### twiggy top -n 25 (the names-kept optimized build; shallow bytes)\n");
    console.log('The "function names" subsection is the name section kept for this analysis: it does not ship.\n');
    console.log("```");
    console.log(execFileSync("twiggy", ["top", "-n", "25", optimized], { env, encoding: "utf8" }).trimEnd());
    console.log("```");
    console.log("\n### The same, summed by crate (a rough grouping of twiggy's item names)\n");
    const items = JSON.parse(execFileSync("twiggy", ["top", "-f", "json", optimized], { env, encoding: "utf8", maxBuffer: 64 << 20 }));
    const groups = new Map();
    let code = 0;
    for (const { name, shallow_size: size } of items) {
      if (/^"[a-z ]+ names?" subsection$/.test(name)) continue; // the name section: kept only for this analysis
      code += size;
      const group = crateOf(name);
      groups.set(group, (groups.get(group) ?? 0) + size);
    }
    console.log("| crate | KiB | share |");
    console.log("|---|---:|---:|");
    for (const [group, size] of [...groups].sort((a, b) => b[1] - a[1])) {
      console.log(`| ${group} | ${kb(size)} | ${((100 * size) / code).toFixed(1)}% |`);
    }
  } else {
    console.log("twiggy not found: `cargo install twiggy` (about 3 minutes), then run this again.");
  }
  console.log("\n### wasm-opt --metrics (the shipped web .wasm): module totals and the most frequent instructions\n");
  const metrics = execFileSync(
    "wasm-opt",
    [...flags.filter((f) => f.startsWith("--enable")), "--metrics", shippedWasm],
    { env, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] },
  );
  const lines = metrics.split("\n").map((l) => l.trimEnd()).filter((l) => /^\s*\[?\w+\]?\s*:\s*\d+/.test(l));
  const totals = lines.filter((l) => l.trim().startsWith("["));
  const ops = lines
    .filter((l) => !l.trim().startsWith("["))
    .map((l) => l.trim().split(/\s*:\s*/))
    .sort((a, b) => Number(b[1]) - Number(a[1]))
    .slice(0, 10);
  console.log("```");
  console.log(totals.map((l) => l.trim().replace(/\s+:\s+/, ": ")).join("\n"));
  console.log(`top instructions: ${ops.map(([op, n]) => `${op} ${n}`).join(", ")}`);
  console.log("```");
} finally {
  rmSync(work, { recursive: true, force: true });
}

/** The crate an item of twiggy's output belongs to, roughly: the first `name::` path segment in it. */
function crateOf(name) {
  if (name.startsWith("data segment")) return "data segments (string constants, tables)";
  if (/^(import|export) /.test(name) || /shim$/.test(name) || /^idempotent(client|operation)_/.test(name) || name.startsWith("__externref") || name.startsWith("__wbindgen")) {
    return "wasm-bindgen imports, exports and shims";
  }
  if (/^(memcmp|memcpy|memmove|memset|__multi3|__rustc|__rust_)/.test(name)) return "core, alloc, std (incl. dlmalloc)";
  const m = name.match(/([A-Za-z_][A-Za-z0-9_]*)(?:\[[0-9a-f]+\])?::/);
  if (!m) return name.startsWith("<") ? "core, alloc, std (incl. dlmalloc)" : "wasm sections (types, tables, elements, headers)";
  const crate = m[1];
  if (["core", "alloc", "std", "dlmalloc", "compiler_builtins", "hashbrown"].includes(crate)) return "core, alloc, std (incl. dlmalloc)";
  if (["wasm_bindgen", "js_sys", "web_sys", "wasm_bindgen_futures"].includes(crate)) return "wasm-bindgen, js-sys, web-sys runtime";
  if (crate.startsWith("serde")) return "serde, serde-wasm-bindgen, serde_path_to_error";
  if (crate.startsWith("futures") || crate === "gloo_timers") return "futures-util, futures-channel, gloo-timers";
  if (crate === "sha2" || crate === "digest" || crate === "block_buffer") return "sha2, digest";
  if (crate === "idempotent_fetch") return "idempotent_fetch (this crate)";
  return crate;
}
