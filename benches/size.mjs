#!/usr/bin/env node
// What ships: what a browser downloads for idempotent-fetch when an app bundles it the way apps do
// (esbuild --bundle --minify of `import { IdempotentClient } from "idempotent-fetch-client"`, resolved through
// the package's `exports` like an installed package, plus the .wasm it loads), each file gzip -9 and
// brotli q11: the production build (what a bundler resolves by default) beside the development build
// (the `development` condition), what a page that stays open fetches later, every entry of the
// package, the size before the lean core, and the JS retry libraries users pick today bundled the
// same way. Then where the bytes are: the driver's minified JS by source file (esbuild's metafile)
// and the .wasm by function (twiggy, when installed).
//
//   node benches/size.mjs              build pkg/ (node package/build.mjs), then measure
//   node benches/size.mjs --no-build   measure pkg/ as it is
//
// Needs what the package build needs (package/README.md), benches/size-compare/node_modules (the
// libraries and esbuild; `npm ci` there when missing), and for the per-function part twiggy
// (`cargo install twiggy`). Prints figures; never fails on them.

import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { createRequire } from "node:module";
import { homedir, tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";

import { BROWSER_ENTRY, BUILDS, DEFINES, LAZY_PARTS, MINIFY_NAMES, PKG_DIR, WASM_FILE, crateMetadata, dropUnusedExports, fileOf } from "../package/build.mjs";

const benches = dirname(fileURLToPath(import.meta.url));
const root = dirname(benches);
const compareDir = join(benches, "size-compare");
const env = { ...process.env, PATH: `${join(root, "tools/node_modules/.bin")}:${join(homedir(), ".cargo/bin")}:${process.env.PATH}` };
const args = new Set(process.argv.slice(2));

// Before the lean core: main at df381f9 (wasm-pack --target web: an async Rust layer in the wasm).
const BEFORE = { label: "before the lean core (pkg/web: async Rust layer, wasm 88.0 + glue 9.6)", gzipKiB: 97.5 };

function run(cmd, argv, options = {}) {
  console.error(`$ ${cmd} ${argv.join(" ")}`);
  const r = spawnSync(cmd, argv, { cwd: root, env, stdio: ["ignore", "inherit", "inherit"], ...options });
  if (r.status !== 0) throw new Error(`${cmd} exited with ${r.status ?? r.signal}`);
}

const which = (cmd) => spawnSync("sh", ["-c", `command -v ${cmd}`], { env }).status === 0;
const gzip = (buf) => gzipSync(buf, { level: 9 }).length;
const brotli = (buf) =>
  brotliCompressSync(buf, { params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: buf.length } }).length;
const measure = (buf) => ({ raw: buf.length, gzip: gzip(buf), brotli: brotli(buf) });
const add = (a, b) => ({ raw: a.raw + b.raw, gzip: a.gzip + b.gzip, brotli: a.brotli + b.brotli });
const kb = (n) => (n / 1024).toFixed(1);

/** For each character of `out`, the index (in `map.sources`) of the source it came from; -1 where unmapped. */
function sourceOfEachChar(out, map) {
  const VLQ = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const owners = new Int32Array(out.length).fill(-1);
  const lineStarts = [0];
  for (let i = 0; i < out.length; i++) if (out[i] === "\n") lineStarts.push(i + 1);
  let source = 0;
  map.mappings.split(";").forEach((line, lineNo) => {
    let column = 0;
    const segments = line ? line.split(",") : [];
    const starts = [];
    for (const segment of segments) {
      const fields = [];
      let value = 0, shift = 0;
      for (const c of segment) {
        const digit = VLQ.indexOf(c);
        value += (digit & 31) << shift;
        if (digit & 32) shift += 5;
        else {
          fields.push(value & 1 ? -(value >>> 1) : value >>> 1);
          value = shift = 0;
        }
      }
      column += fields[0];
      if (fields.length > 1) source += fields[1];
      starts.push([column, fields.length > 1 ? source : -1]);
    }
    const base = lineStarts[lineNo] ?? out.length;
    const end = lineStarts[lineNo + 1] ?? out.length;
    starts.forEach(([col, src], k) => owners.fill(src, base + col, k + 1 < starts.length ? base + starts[k + 1][0] : end));
  });
  return owners;
}

if (!args.has("--no-build")) run(process.execPath, [join(root, "package/build.mjs")]);
if (!existsSync(join(PKG_DIR, "package.json"))) {
  console.error(`${PKG_DIR} is not built: run without --no-build`);
  process.exit(1);
}
if (!existsSync(join(compareDir, "node_modules", "esbuild"))) run("npm", ["ci", "--no-audit", "--no-fund"], { cwd: compareDir });
const esbuild = createRequire(join(compareDir, "package.json"))("esbuild");
const bundleOptions = { bundle: true, minify: true, format: "esm", platform: "browser", target: "es2020", write: false, logLevel: "silent" };

// ---- ours ----------------------------------------------------------------------------------------
// The package "installed" (a node_modules symlink), so esbuild resolves it by its exports, as in an app.
const work = mkdtempSync(join(tmpdir(), "if-size-"));
try {
  mkdirSync(join(work, "node_modules"));
  symlinkSync(PKG_DIR, join(work, "node_modules", "idempotent-fetch-client"), "dir");
  const wasm = measure(readFileSync(join(PKG_DIR, WASM_FILE)));
  const none = { raw: 0, gzip: 0, brotli: 0 };
  /** `source` bundled as an app bundles it, for one build (`conditions`): the app's entry and every
   *  chunk it imports statically (what the page downloads first), each chunk it imports with import()
   *  by the file of the package it came from, and all chunks. */
  async function appBundle(source, flavour, options = {}) {
    const out = await esbuild.build({
      ...bundleOptions, splitting: true, outdir: join(work, `app-${flavour}`), metafile: true, conditions: flavour === "development" ? ["development"] : [],
      stdin: { contents: source, resolveDir: work, loader: "js", sourcefile: "app.js" }, ...options,
    });
    const outputs = out.metafile.outputs;
    // The metafile names outputs relative to the working directory.
    const contents = (file) => Buffer.from(out.outputFiles.find((f) => f.path === resolve(file)).contents);
    const sumOf = (files) => files.map((f) => measure(contents(f))).reduce(add, none);
    const entryOut = Object.keys(outputs).find((o) => outputs[o].entryPoint?.endsWith("app.js"));
    const first = new Set();
    for (const pending = [entryOut]; pending.length; ) {
      const file = pending.pop();
      if (first.has(file)) continue;
      first.add(file);
      for (const i of outputs[file].imports) if (i.kind === "import-statement" && outputs[i.path]) pending.push(i.path);
    }
    const js = Object.keys(outputs).filter((o) => o.endsWith(".js"));
    // A part loaded on demand is an entry point of its own: its chunk names the package file.
    const parts = Object.fromEntries(js.filter((o) => !first.has(o) && outputs[o].entryPoint).map((o) => [relative(PKG_DIR, resolve(outputs[o].entryPoint)), sumOf([o])]));
    return { first: sumOf([...first]), all: sumOf(js), parts, chunks: [first.size, js.length] };
  }
  // The quick start as an app writes it (README "Quick start": begin + send, and the fetch-shaped
  // API), bundled with code splitting as Vite, webpack and Rollup do by default: the parts the
  // package loads on first use (LAZY_PARTS) become chunks of their own. What the quick start
  // downloads is the app's entry and every chunk it imports statically, plus the .wasm; the full
  // feature set adds every chunk. (tests/js/browser.test.mjs checks that the quick start, run in a
  // browser, requests none of the lazy parts.)
  const QUICK_START = `import { IdempotentClient } from "idempotent-fetch-client";
const client = new IdempotentClient({ namespace: "acct_42" });
export async function pay(cart) {
  const op = await client.begin("checkout", { url: "/api/orders", method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(cart) });
  return op.send();
}
export const order = (cart) => client.fetch("/api/orders", { method: "POST", body: JSON.stringify(cart), intent: "order" });
`;
  const quick = {};
  for (const flavour of BUILDS) quick[flavour] = await appBundle(QUICK_START, flavour);
  // A page that stays open: once idle, the client warms up (src/js/client.ts `warm`), and after its
  // first send it sweeps. Under the quick start's options the warm-up fetches no file where the
  // browser has Web Locks and crypto.subtle, the localStorage lease (lease.ts) where it has no Web
  // Locks, and the SHA-256 (sha256.ts) on origins without crypto.subtle (plain http, never the
  // https pages these figures are for); the sweep fetches the sweep part (sweep.ts). Every other part
  // waits for the first use of its feature.
  const partOf = (source) => LAZY_PARTS.find((p) => p.source === source).file;
  const idle = (flavour, sources) => sources.map((source) => quick[flavour].parts[fileOf(partOf(source), flavour)] ?? none).reduce(add, none);
  const IDLE = ["sweep.ts"];
  const IDLE_WITHOUT_LOCKS = [...IDLE, "lease.ts"];
  const shipped = (file) => add(measure(readFileSync(join(PKG_DIR, file))), wasm);

  const cell = (m) => (m ? `${m.gzip} | ${m.brotli}` : "– | –");
  console.log("## What a browser downloads (B; gzip -9 and brotli q11 of each file, summed; the .wasm is in every core row)\n");
  console.log("| what | production gzip | production brotli | development gzip | development brotli |");
  console.log("|---|---:|---:|---:|---:|");
  const row = (what, production, development) => console.log(`| ${what} | ${cell(production)} | ${cell(development)} |`);
  const [firstChunks, allChunks] = quick.production.chunks;
  row(`**the quick start**, bundled by the app (esbuild --bundle --minify --splitting: ${firstChunks} of ${allChunks} chunks) + .wasm`, add(quick.production.first, wasm), add(quick.development.first, wasm));
  row("fetched later by a page that stays open (idle, after the first send): with Web Locks (the sweep part)", idle("production", IDLE), idle("development", IDLE));
  row("fetched later by a page that stays open (idle, after the first send): without Web Locks (the sweep and lease parts)", idle("production", IDLE_WITHOUT_LOCKS), idle("development", IDLE_WITHOUT_LOCKS));
  row(`every feature (all ${allChunks} chunks) + .wasm`, add(quick.production.all, wasm), add(quick.development.all, wasm));
  row(`\`idempotent-fetch-client\` as shipped (pkg/${BROWSER_ENTRY} or its development twin) + .wasm`, shipped(BROWSER_ENTRY), shipped(fileOf(BROWSER_ENTRY, "development")));
  const manifest = JSON.parse(readFileSync(join(PKG_DIR, "package.json"), "utf8"));
  row("`idempotent-fetch-client/worker` (service workers: every part bundled in) + .wasm", shipped(manifest.exports["./worker"].default), shipped(manifest.exports["./worker"].development));
  for (const { file } of LAZY_PARTS) {
    row(`part loaded on demand: pkg/${file}`, measure(readFileSync(join(PKG_DIR, file))), measure(readFileSync(join(PKG_DIR, fileOf(file, "development")))));
  }
  // The side entries are built once (package/build.mjs SIDE_ENTRIES); `./file` is for Node only.
  for (const [subpath, conditions] of Object.entries(manifest.exports)) {
    if (!conditions.import?.default || subpath === ".") continue;
    const one = measure(readFileSync(join(PKG_DIR, conditions.import.default)));
    row(`\`idempotent-fetch-client${subpath.slice(1)}\` (${conditions.import.default}; one build)`, one, one);
  }
  const userTotal = add(quick.production.first, wasm);
  console.log(`| ${BEFORE.label} | ${Math.round(BEFORE.gzipKiB * 1024)} | | | |`);
  console.log(`\nThe quick start bundled by the app, production build: **${userTotal.gzip} B gzip** (${kb(userTotal.gzip)} KiB; ${userTotal.brotli} B brotli); ` +
    `development build: ${add(quick.development.first, wasm).gzip} B gzip; ${(BEFORE.gzipKiB / (userTotal.gzip / 1024)).toFixed(1)}× smaller than before (${BEFORE.gzipKiB} KiB).`);

  // ---- theirs ------------------------------------------------------------------------------------
  const LIBS = [
    { name: "ky", entry: `export { default } from "ky";` },
    { name: "p-retry", entry: `export { default } from "p-retry";` },
    { name: "fetch-retry", entry: `export { default } from "fetch-retry";` },
    { name: "axios-retry (alone; axios external)", entry: `export { default } from "axios-retry";`, external: ["axios"] },
    { name: "axios", entry: `export { default } from "axios";` },
    { name: "axios + axios-retry", entry: `import axios from "axios"; import axiosRetry from "axios-retry"; export { axios, axiosRetry };` },
  ];
  const versions = Object.fromEntries(
    ["ky", "p-retry", "fetch-retry", "axios-retry", "axios", "esbuild"].map((p) => [p, JSON.parse(readFileSync(join(compareDir, "node_modules", p, "package.json"), "utf8")).version]),
  );
  console.log(`\n## The JS retry libraries, bundled the same way (esbuild ${versions.esbuild} --bundle --minify, es2020)\n`);
  console.log("| library | version | raw | gzip | brotli | ours ÷ this, gzip | ours ÷ this, brotli |");
  console.log("|---|---|---:|---:|---:|---:|---:|");
  for (const lib of LIBS) {
    const out = await esbuild.build({ ...bundleOptions, stdin: { contents: lib.entry, resolveDir: compareDir, loader: "js" }, external: lib.external ?? [] });
    const t = measure(Buffer.from(out.outputFiles[0].contents));
    const version = lib.name.startsWith("axios + ") ? `${versions.axios} + ${versions["axios-retry"]}` : versions[lib.name.split(" ")[0]];
    console.log(`| ${lib.name} | ${version} | ${kb(t.raw)} | ${kb(t.gzip)} | ${kb(t.brotli)} | ${(userTotal.gzip / t.gzip).toFixed(1)}× | ${(userTotal.brotli / t.brotli).toFixed(1)}× |`);
  }

  // ---- where the JS bytes are ----------------------------------------------------------------------
  // pkg/index.js is one file, so bundle the driver's sources the same way to see which of them costs
  // what: the entry's own chunk (the parts loaded on first use are chunks of their own, left out).
  const driverEntry = join(root, "src/js/index.ts");
  if (existsSync(driverEntry)) {
    const bySource = await esbuild.build({ ...bundleOptions, define: DEFINES.production, splitting: true, metafile: true, sourcemap: "external", outdir: join(work, "driver"), entryPoints: [driverEntry] });
    const entryFile = bySource.outputFiles.find((f) => f.path.endsWith(`${join("driver", "index.js")}`));
    const out = entryFile.text;
    const map = JSON.parse(bySource.outputFiles.find((f) => f.path === `${entryFile.path}.map`).text);
    const owners = sourceOfEachChar(out, map);
    const whole = gzip(Buffer.from(out));
    console.log(
      "\n## The minified JS by source file (src/js/index.ts bundled and minified as the production build; bytes from esbuild's metafile; " +
        "gzip share = gzip -9 of the bundle minus gzip -9 of the bundle without that source's characters, by its source map)\n",
    );
    console.log(`| source | bytes | gzip share B |`);
    console.log("|---|---:|---:|");
    const inputs = Object.values(bySource.metafile.outputs).find((o) => o.entryPoint?.endsWith("src/js/index.ts"))?.inputs ?? {};
    for (const [file, { bytesInOutput }] of Object.entries(inputs).sort((x, y) => y[1].bytesInOutput - x[1].bytesInOutput)) {
      if (bytesInOutput === 0) continue;
      const index = map.sources.findIndex((source) => source.endsWith(file.replace(/^src\/js\//, "")) && source.includes(file.split("/").slice(-2).join("/")));
      const without = out.split("").filter((_, i) => owners[i] !== index).join("");
      console.log(`| ${file} | ${bytesInOutput} | ${index < 0 ? "" : whole - gzip(Buffer.from(without))} |`);
    }
    console.log(`\nThe bundle: ${out.length} B, ${whole} B gzip -9.`);
  }

  // ---- where the wasm bytes are --------------------------------------------------------------------
  // The shipped .wasm has no names; rebuild it from cargo's output with the same wasm-opt flags plus -g.
  const meta = crateMetadata();
  const rawWasm = join(meta.targetDir, "wasm32-unknown-unknown/release/idempotent_fetch.wasm");
  console.log(`\n## What in the .wasm costs the most\n`);
  const named = join(work, "named-opt.wasm");
  run("wasm-opt", [...meta.wasmOpt, "-g", rawWasm, "-o", join(work, "named-all.wasm")]);
  dropUnusedExports(join(work, "named-all.wasm"), named, ["-g"]);
  const plain = join(work, "plain-opt.wasm");
  run("wasm-opt", [...meta.wasmOpt, rawWasm, "-o", join(work, "plain-all.wasm")]);
  dropUnusedExports(join(work, "plain-all.wasm"), plain);
  // As the package build: the exports the glue never calls removed, the import and export names
  // shortened (twiggy reads the -g build, names kept).
  const minified = join(work, "shipped.wasm");
  run("wasm-opt", [...MINIFY_NAMES, plain, "-o", minified], { stdio: ["ignore", "ignore", "inherit"] });
  const same = readFileSync(minified).equals(readFileSync(join(PKG_DIR, WASM_FILE)));
  console.log(`Rebuilt from ${relative(root, rawWasm)} with \`wasm-opt ${meta.wasmOpt.join(" ")}\`, then wasm-metadce (the exports the glue calls), then \`wasm-opt ${MINIFY_NAMES.join(" ")}\`: ${kb(readFileSync(minified).length)} KiB ` +
    `(${same ? "identical to" : "NOT identical to (another build ran in between?)"} pkg/${WASM_FILE}); with -g (names kept, for twiggy) ${kb(readFileSync(named).length)} KiB.\n`);
  if (which("twiggy")) {
    console.log("```");
    console.log(execFileSync("twiggy", ["top", "-n", "25", named], { env, encoding: "utf8" }).trimEnd());
    console.log("```");
  } else {
    console.log("twiggy not found: `cargo install twiggy` (about 3 minutes), then run this again.");
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
