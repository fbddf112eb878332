#!/usr/bin/env node
// Start-up, from navigation start to a constructed client with default storage as the README's quick
// start writes it (the import, then `new IdempotentClient({ namespace })`; the .wasm loads on its own),
// and on to `ready` (the .wasm instantiated: a first `begin` needs no further wait), on COLD loads: a
// fresh headless Chromium process with a fresh profile for every load (what a first visit to a checkout
// page is), started by itself (no debugger attached), alternating with a bare page and a page that
// imports ky (each variant going first in turn, so the machine's load falls on all alike).
//
//   node benches/startup.mjs                  pkg/, ky and a bare page, 15 cold loads each
//   --loads N                                 loads per variant (--quick: 5)
//   --warm                                    also the same pages as loads in ONE browser process, each
//                                             page navigating to the next (a warm browser): more columns
//   --pkg [NAME=]DIR                          a package directory to time (repeatable; default pkg/)
//   --preload                                 each package also with the README's recipe in the HTML:
//                                             <link rel="preload" as="fetch" crossorigin> of the .wasm and
//                                             <link rel="modulepreload"> of index.js
//   --wasm-variants                           each package also as two rebuilt copies of its index.js: the
//                                             .wasm fetch started at the top of the module, and the .wasm
//                                             inlined as base64 (a data: URL); their gzip -9 cost is printed
//   --wasm-floor                              also two floors of any library that loads a .wasm: a page
//                                             module that fetches and instantiates an empty .wasm, and
//                                             the first package's .wasm, with no driver
//   --cdp                                     the same pages again under playwright-core (a DevTools
//                                             protocol client attached): a second column
//
// A page is a static HTML document whose inline module imports the entry (as an app's page does), so
// the module graph and the .wasm load as they would for a user. It reports, in ms from navigation
// start (performance.now()): when the imports had run, the constructor, `ready`, and from resource
// timing when the .wasm was requested and received; then the first `begin` of a named intent after
// that point (informational: it opens the storage and the claims database, which the constructor
// defers). Server: cross-origin isolated (5 µs timer), `cache-control: no-store` (no HTTP or code cache).
//
// Needs a built pkg/ (node package/build.mjs), benches/size-compare/node_modules (ky, esbuild) and
// Chromium at CHROMIUM_PATH. Prints figures; never fails on them.

import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import os from "node:os";
import { basename, dirname, extname, join, normalize, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

import { openChromium, REPORT_SCRIPT, reports } from "./support/pages.mjs";

const benches = dirname(fileURLToPath(import.meta.url));
const root = dirname(benches);
const compareDir = join(benches, "size-compare");
const argv = process.argv.slice(2);
const option = (name) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
const LOADS = Number(option("--loads") ?? (argv.includes("--quick") ? 5 : 15));
const WASM = "idempotent_fetch_bg.wasm";
const WASM_URL = `new URL("./${WASM}",import.meta.url)`;
const pkgSpecs = argv.flatMap((a, i) => (argv[i - 1] === "--pkg" ? [a] : []));
const packages = (pkgSpecs.length ? pkgSpecs : [join(root, "pkg")]).map((spec) => {
  const [name, dir] = spec.includes("=") ? spec.split("=") : [basename(resolve(spec)), spec];
  if (!existsSync(join(resolve(dir), WASM))) throw new Error(`${dir}/${WASM} is missing: build the package (node package/build.mjs)`);
  return { name, dir: resolve(dir) };
});

if (!existsSync(join(compareDir, "node_modules", "ky"))) {
  const r = spawnSync("npm", ["ci", "--no-audit", "--no-fund"], { cwd: compareDir, stdio: "inherit" });
  if (r.status !== 0) throw new Error("npm ci in benches/size-compare failed");
}
const esbuild = createRequire(join(compareDir, "package.json"))("esbuild");
const kyBundle = (
  await esbuild.build({
    stdin: { contents: `export { default } from "ky";`, resolveDir: compareDir, loader: "js" },
    bundle: true, minify: true, format: "esm", platform: "browser", target: "es2020", write: false, logLevel: "silent",
  })
).outputFiles[0].text;

// ---- the variants ----------------------------------------------------------------------------------
const work = mkdtempSync(join(os.tmpdir(), "if-startup-"));
process.on("exit", () => rmSync(work, { recursive: true, force: true })); // also after a signal (pages.mjs)
const gz = (text) => gzipSync(text, { level: 9 }).length;
/** A copy of `pkg` whose index.js is `edit(index.js)` (the .wasm next to it). */
function rebuilt(pkg, suffix, edit) {
  const dir = join(work, `${packages.indexOf(pkg)}-${suffix.replace(/\W+/g, "-")}`);
  mkdirSync(dir);
  const source = readFileSync(join(pkg.dir, "index.js"), "utf8");
  if (source.split(WASM_URL).length !== 2) throw new Error(`${pkg.dir}/index.js: expected one ${WASM_URL}`);
  const text = edit(source);
  writeFileSync(join(dir, "index.js"), text);
  copyFileSync(join(pkg.dir, WASM), join(dir, WASM));
  return { dir, js: text };
}
const variants = [
  { name: "bare page (no import)", body: "" },
  {
    name: "ky: import, ky.create()",
    body: `import ky from "/ky.js";\nconst t1 = performance.now();\nky.create({ retry: { limit: 3, methods: ["post"] } });\nconst t3 = performance.now();\nfigures = { imported: t1, ready: t1, constructed: t3 };`,
  },
];
const ours = (name, path, { head = "", bytes } = {}) =>
  variants.push({
    name, head, bytes, path,
    body: `import { IdempotentClient, ready } from "${path}index.js";
const t1 = performance.now();
const client = new IdempotentClient({ namespace: "startup" });
const t3 = performance.now();
await ready;
const t2 = performance.now();
figures = { imported: t1, ready: t2, constructed: t3 };
const wasm = performance.getEntriesByType("resource").find((e) => e.name.endsWith(".wasm") || e.name.startsWith("data:"));
if (wasm) Object.assign(figures, { wasmRequested: wasm.startTime, wasmReceived: wasm.responseEnd });
const b0 = performance.now();
await client.begin("startup-" + Math.random(), { url: "/api/orders", method: "POST", body: "{}" });
figures.firstBegin = performance.now() - b0;`,
  });
const shipped = (dir) => gz(readFileSync(join(dir, "index.js"))) + gz(readFileSync(join(dir, WASM)));
for (const [i, pkg] of [...packages.entries()]) {
  const base = `/p${i}/`;
  pkg.path = base;
  ours(`${pkg.name}: import, new IdempotentClient(), then await ready`, base, { bytes: shipped(pkg.dir) });
  if (argv.includes("--preload")) {
    ours(`${pkg.name} + preload links in the HTML`, base, {
      head: `<link rel="modulepreload" href="${base}index.js"><link rel="preload" as="fetch" crossorigin href="${base}${WASM}">`,
      bytes: shipped(pkg.dir),
    });
  }
  // A package whose bundle requests the .wasm at its top already gets no "top" copy.
  const requestsAtTop = /new URL\("\.\/idempotent_fetch_bg\.wasm",import\.meta\.url\),\w+=fetch\(/.test(readFileSync(join(pkg.dir, "index.js"), "utf8"));
  if (argv.includes("--wasm-variants")) {
    // The fetch started by the first statement of the module (before the driver's classes are defined)
    // instead of from a microtask after the module has run.
    const top = rebuilt(pkg, "top", (js) => `const __wasmResponse=fetch(${WASM_URL});\n${js.replace(WASM_URL, "__wasmResponse")}`);
    // The bytes in the module: no second request; base64 in a data: URL (fetch decodes it and
    // instantiateStreaming compiles it as application/wasm).
    const b64 = readFileSync(join(pkg.dir, WASM)).toString("base64");
    const inline = rebuilt(pkg, "inline", (js) => js.replace(WASM_URL, () => `"data:application/wasm;base64,${b64}"`));
    const copies = [["the .wasm inlined as base64", inline]];
    if (!requestsAtTop) copies.unshift(["the .wasm fetch at the top of the module", top]);
    for (const [label, v] of copies) {
      const path = `/p${i}-${basename(v.dir)}/`;
      (v.path = path), (v.name = `${pkg.name}, ${label}`);
      ours(`${v.name}`, path, { bytes: gz(v.js) + (label.includes("inlined") ? 0 : gz(readFileSync(join(pkg.dir, WASM)))) });
      packages.push({ name: v.name, dir: v.dir, path, derived: true });
    }
  }
}
// The floor of any library that loads a .wasm: a page module of a few lines that fetches a .wasm next to
// it and instantiates it (every import a no-op), with the API the page calls as no-ops: once with an empty
// module, once with the first package's .wasm. What a package's "ready" costs above these is its own.
if (argv.includes("--wasm-floor")) {
  const floorJs = `const response = fetch(${WASM_URL});
export class IdempotentClient { async begin() { return {}; } }
export const ready = WebAssembly.compileStreaming(response).then((module) => {
  const imports = {};
  for (const i of WebAssembly.Module.imports(module)) (imports[i.module] ??= {})[i.name] = () => 0;
  return WebAssembly.instantiate(module, imports);
}).then(() => undefined);
`;
  const floors = [
    ["floor: an empty .wasm", Buffer.from([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0])],
    [`floor: ${packages[0].name}'s .wasm, no driver`, readFileSync(join(packages[0].dir, WASM))],
  ];
  for (const [i, [name, wasm]] of floors.entries()) {
    const dir = join(work, `floor-${i}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "index.js"), floorJs);
    writeFileSync(join(dir, WASM), wasm);
    const path = `/floor-${i}/`;
    ours(name, path, { bytes: shipped(dir) });
    packages.push({ name, dir, path, derived: true });
  }
}
variants.forEach((v, i) => (v.index = i));

// The loads, in order: round r starts with variant r mod n; a first round, not counted, warms up the
// browser (its first navigations also start its network and storage services).
const order = [];
for (let r = -1; r < LOADS; r++) for (let k = 0; k < variants.length; k++) order.push(variants[(k + r + variants.length) % variants.length]);
const WARMUP = variants.length;

const page = (i, cold) => {
  const v = order[i];
  return `<!doctype html><html><head><meta charset="utf-8"><title>startup ${i}</title>${v.head ?? ""}</head><body>
<script>${REPORT_SCRIPT}</script><script type="module">
let figures;
${v.body}
figures ??= { imported: performance.now() };
const entry = performance.getEntriesByType("resource").find((e) => e.name.endsWith("/ky.js") || e.name.endsWith("/index.js"));
if (entry) Object.assign(figures, { entryRequested: entry.startTime, entryReceived: entry.responseEnd });
const nav = performance.getEntriesByType("navigation")[0];
figures.documentReceived = nav.responseEnd;
await report("${i}", figures);
${cold ? "" : `location.href = "/page/${i + 1}";`}
</script></body></html>`;
};

// ---- the loopback server --------------------------------------------------------------------------
const HEADERS = { "cross-origin-opener-policy": "same-origin", "cross-origin-embedder-policy": "require-corp", "cache-control": "no-store" };
const TYPES = { ".js": "text/javascript", ".wasm": "application/wasm", ".html": "text/html" };
let pages = reports();
const server = createServer((req, res) => {
  const url = new URL(req.url, "http://x");
  if (pages.handle(req, res, url)) return;
  const send = (type, body) => res.writeHead(200, { ...HEADERS, "content-type": type }).end(body);
  let m;
  if ((m = url.pathname.match(/^\/(page|cold)\/(\d+)$/))) {
    return send("text/html", +m[2] < order.length ? page(+m[2], m[1] === "cold") : "<!doctype html>done");
  }
  if (url.pathname === "/ky.js") return send("text/javascript", kyBundle);
  if (url.pathname === "/api/orders") return req.resume().on("end", () => res.writeHead(201, HEADERS).end("{}"));
  const pkg = packages.find((p) => url.pathname.startsWith(p.path));
  const file = pkg && normalize(join(pkg.dir, url.pathname.slice(pkg.path.length)));
  if (!file || !file.startsWith(pkg.dir + "/") || !existsSync(file)) return res.writeHead(404).end();
  send(TYPES[extname(file)] ?? "application/octet-stream", readFileSync(file));
});
await new Promise((listening) => server.listen(0, "127.0.0.1", listening));
const origin = `http://127.0.0.1:${server.address().port}`;

/** One run over every page in one browser (warm); the figures per variant. */
async function run(cdp) {
  pages = reports({ timeoutMs: 60_000 });
  const samples = new Map(variants.map((v) => [v, []]));
  const browser = await openChromium(`${origin}/page/0`, { cdp, what: "the start-up benchmark" });
  try {
    for (let i = 0; i < order.length; i++) {
      const figures = await pages.next(String(i));
      if (i >= WARMUP) samples.get(order[i]).push({ ...figures, round: Math.floor(i / variants.length) });
    }
  } finally {
    await browser.close();
  }
  return { samples, version: browser.version };
}

/** Every page in its own fresh browser process and profile (cold); the figures per variant. */
async function runCold() {
  pages = reports({ timeoutMs: 60_000 });
  const samples = new Map(variants.map((v) => [v, []]));
  let version;
  for (let i = 0; i < order.length; i++) {
    const browser = await openChromium(`${origin}/cold/${i}`, { what: "the start-up benchmark" });
    version = browser.version;
    try {
      const figures = await pages.next(String(i));
      if (i >= WARMUP) samples.get(order[i]).push({ ...figures, round: Math.floor(i / variants.length) });
    } finally {
      await browser.close();
    }
  }
  return { samples, version: version.replace("started by itself", "a fresh process and profile per load, started by itself") };
}

const runs = [];
let warm;
try {
  runs.push(await runCold());
  if (argv.includes("--cdp")) runs.push(await run(true));
  if (argv.includes("--warm")) warm = await run(false);
} finally {
  server.close();
}

// ---- the figures ------------------------------------------------------------------------------------
const median = (xs) => {
  const s = xs.filter((x) => x !== undefined).sort((a, b) => a - b);
  if (!s.length) return undefined;
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
};
const ms = (x) => (x === undefined ? "" : x.toFixed(1));
const [alone, cdp] = runs;
const ky = variants[1];
const total = (x) => x.constructed ?? x.imported;
/** When the client needs no further wait: `ready` where the page awaits it, else constructed. */
const usable = (x) => x.ready ?? total(x);
const kyMedian = median(alone.samples.get(ky).map(total));
// The difference to ky's load of the same round (a round lasts about a second: the machine's load
// changes less within one than between rounds), then its median.
const differences = (run, v, of = total) => {
  const kyByRound = new Map(run.samples.get(ky).map((x) => [x.round, total(x)]));
  return run.samples.get(v).map((x) => of(x) - kyByRound.get(x.round));
};
const paired = (run, v, of = total) => median(differences(run, v, of));
const signed = (x) => (x >= 0 ? "+" : "") + ms(x);
// A distribution-free 95 % interval for the median of the paired differences: the order statistics
// whose ranks the binomial(n, 1/2) distribution puts at the 2.5 % and 97.5 % points.
const pairedInterval = (run, v, of = total) => {
  const d = differences(run, v, of).filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  const n = d.length;
  if (n < 6) return "";
  let k = 0;
  let below = 0;
  const choose = (n, k) => { let c = 1; for (let i = 1; i <= k; i++) c = (c * (n - i + 1)) / i; return c; };
  while (below + choose(n, k) / 2 ** n <= 0.025) below += choose(n, k++) / 2 ** n;
  return `${signed(d[Math.max(k - 1, 0)])} to ${signed(d[n - k])}`;
};
console.log(
  `# Start-up in headless Chromium: ${alone.version}\n\n` +
    `${LOADS} cold loads per variant (a fresh browser process and profile each; after one round not counted), alternating; ms from navigation start (median); ` +
    `load average at the end ${os.loadavg().map((l) => l.toFixed(1)).join(", ")}.\n`,
);
console.log(
  `| variant | shipped gzip B | document received | .js requested | .js received | imports ran | .wasm requested | .wasm received | **constructed** | − ky | **− ky, paired by round** | 95 % interval | min | max | ready | ready − ky, paired | 95 % interval | first begin after${cdp ? " | constructed, CDP attached | − ky, paired, CDP attached" : ""}${warm ? " | constructed, warm browser | − ky, paired, warm" : ""} |`,
);
console.log(`|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---:|${cdp ? "---:|---:|" : ""}${warm ? "---:|---:|" : ""}`);
for (const v of variants) {
  const xs = alone.samples.get(v);
  const col = (k) => ms(median(xs.map((x) => x[k])));
  const totals = xs.map(total);
  const m = median(totals);
  const cdpCol = cdp ? ` ${ms(median(cdp.samples.get(v).map(total)))} | ${v === ky ? "" : signed(paired(cdp, v))} |` : "";
  const warmCol = warm ? ` ${ms(median(warm.samples.get(v).map(total)))} | ${v === ky ? "" : signed(paired(warm, v))} |` : "";
  console.log(
    `| ${v.name} | ${v.bytes ?? ""} | ${col("documentReceived")} | ${col("entryRequested")} | ${col("entryReceived")} | ${col("imported")} | ${col("wasmRequested")} | ${col("wasmReceived")} | ` +
      `**${ms(m)}** | ${v === ky ? "" : signed(m - kyMedian)} | ${v === ky ? "" : `**${signed(paired(alone, v))}**`} | ${v === ky ? "" : pairedInterval(alone, v)} | ${ms(Math.min(...totals))} | ${ms(Math.max(...totals))} | ` +
      `${col("ready")} | ${v === ky || !v.path ? "" : signed(paired(alone, v, usable))} | ${v === ky || !v.path ? "" : pairedInterval(alone, v, usable)} | ${col("firstBegin")} |${cdpCol}${warmCol}`,
  );
}
