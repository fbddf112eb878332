#!/usr/bin/env node
// Where a request's time goes, beside ky's: Chromium's CPU profile (the DevTools protocol's
// Profiler, through playwright-core) of N sequential POSTs of each variant of benches/overhead.mjs's
// quick-start path, one variant per profile. A debugger is attached here (it slows every fetch), so
// this script's milliseconds are not the bench's: read where the CPU time goes and how it compares
// between variants, and measure a change with benches/overhead.mjs.
//
//   node benches/profile-overhead.mjs [--requests N] [--interval US] [--top N] [--pkg DIR]
//
// For each variant: wall ms per request, CPU ms per request on the page's main thread (samples that
// are not idle), split into JS of the package (mapped through its source maps to src/js files and
// functions), wasm, the browser's own (program, GC), ky, other JS; then the top functions by self
// time. Needs the package (pkg/), benches/size-compare/node_modules (ky, esbuild), tools/node_modules
// (playwright-core, source-map-js) and Chromium at CHROMIUM_PATH.

import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import { dirname, extname, join, normalize, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { launchChromium } from "../tests/support/chromium.mjs";

const benches = dirname(fileURLToPath(import.meta.url));
const root = dirname(benches);
const argv = process.argv.slice(2);
const option = (name) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
const REQUESTS = Number(option("--requests") ?? 500);
const INTERVAL_US = Number(option("--interval") ?? 50);
const TOP = Number(option("--top") ?? 25);
const pkgDir = option("--pkg") ? resolve(option("--pkg")) : join(root, "pkg");
const compareDir = join(benches, "size-compare");
const esbuild = createRequire(join(compareDir, "package.json"))("esbuild");
const { SourceMapConsumer } = createRequire(join(root, "tools", "package.json"))("source-map-js");

const kyBundle = (
  await esbuild.build({
    stdin: { contents: `export { default } from "ky";`, resolveDir: compareDir, loader: "js" },
    bundle: true, minify: true, format: "esm", platform: "browser", target: "es2020", write: false, logLevel: "silent",
  })
).outputFiles[0].text;

// The variants, as benches/overhead.mjs writes them (localStorage, the default storage in a page, and
// memory).
const VARIANTS = {
  ky: `await ky.post(url, { headers: json, body: bodyOf(i), retry: { limit: 3, methods: ["post"] } }).text();`,
  "client.fetch without intent": `await (await local.fetch(url, { method: "POST", headers: json, body: bodyOf(i) })).text();`,
  "client.fetch, named": `await (await local.fetch(url, { method: "POST", headers: json, body: bodyOf(i), intent: "n-" + round + "-" + i })).text();`,
  "begin + send": `await (await (await local.begin("b-" + round + "-" + i, { url, method: "POST", headers: json, body: bodyOf(i) })).send()).response.text();`,
  // Memory storage: no storage, claim or lock, so what is left is the package's own work.
  "begin + send, memory": `await (await (await memory.begin("m-" + round + "-" + i, { url, method: "POST", headers: json, body: bodyOf(i) })).send()).response.text();`,
};

const PAGE = `<!doctype html><meta charset="utf-8"><script type="module">
localStorage.clear();
const { IdempotentClient, ready } = await import("/pkg/index.js");
await ready;
const { default: ky } = await import("/ky.js");
const local = new IdempotentClient({ namespace: "profile", storage: "local" });
const memory = new IdempotentClient({ namespace: "profile-memory", storage: "memory" });
const url = "/api/orders";
const json = { "content-type": "application/json" };
const bodyOf = (i) => JSON.stringify({ cart: "cart-42", amount: 4200, currency: "eur", i });
const variants = {${Object.entries(VARIANTS).map(([name, body]) => `${JSON.stringify(name)}: async (i, round) => { ${body} }`).join(",\n")}};
window.runVariant = async (name, count, round) => {
  const t0 = performance.now();
  for (let i = 0; i < count; i++) await variants[name](i, round);
  return (performance.now() - t0) / count;
};
window.pageReady = true;
</script>`;

const HEADERS = { "cross-origin-opener-policy": "same-origin", "cross-origin-embedder-policy": "require-corp", "cache-control": "no-store" };
const TYPES = { ".js": "text/javascript", ".wasm": "application/wasm", ".map": "application/json" };
const server = createServer((req, res) => {
  const url = new URL(req.url, "http://x");
  if (req.method === "POST" && url.pathname === "/api/orders") {
    req.on("data", () => {});
    req.on("end", () => res.writeHead(201, { "content-type": "application/json", "cache-control": "no-store" }).end(`{"id":1}`));
    return;
  }
  const send = (type, body) => res.writeHead(200, { ...HEADERS, "content-type": type }).end(body);
  if (url.pathname === "/") return send("text/html", PAGE);
  if (url.pathname === "/ky.js") return send("text/javascript", kyBundle);
  const file = url.pathname.startsWith("/pkg/") && normalize(join(pkgDir, url.pathname.slice("/pkg/".length)));
  if (!file || !file.startsWith(pkgDir + "/") || !existsSync(file)) return res.writeHead(404).end();
  send(TYPES[extname(file)] ?? "application/octet-stream", readFileSync(file));
});
await new Promise((listening) => server.listen(0, "127.0.0.1", listening));
const origin = `http://127.0.0.1:${server.address().port}`;

// Source maps of the package's files, read once each.
const maps = new Map();
function mapOf(url) {
  if (!url.startsWith(`${origin}/pkg/`)) return undefined;
  const file = join(pkgDir, url.slice(`${origin}/pkg/`.length)) + ".map";
  if (!maps.has(file)) maps.set(file, existsSync(file) ? new SourceMapConsumer(JSON.parse(readFileSync(file, "utf8"))) : undefined);
  return maps.get(file);
}

/** A profile node's place: its category and a readable name (src/js file:line, function). */
function placeOf({ functionName, url, lineNumber, columnNumber }) {
  if (!url) {
    if (/^\((idle|program|garbage collector|root)\)$/.test(functionName)) return { category: functionName, name: functionName };
    return { category: "browser (other)", name: functionName || "(anonymous)" };
  }
  if (url.startsWith("wasm://") || /^\$?wasm-function/.test(functionName)) return { category: "wasm", name: functionName };
  if (url.endsWith("/ky.js")) return { category: "ky", name: `ky ${functionName}` };
  const map = mapOf(url);
  if (map) {
    const at = map.originalPositionFor({ line: lineNumber + 1, column: columnNumber });
    const source = (at.source ?? "?").replace(/^(\.\.\/)+/, "");
    const category = /generated\/idempotent_fetch\.js$/.test(source) ? "wasm glue" : "package JS";
    return { category, name: `${source}:${at.line} ${at.name ?? functionName ?? ""}`.trim() };
  }
  return { category: "other JS", name: `${url.replace(origin, "")} ${functionName}` };
}

/** Self and total time per place (ms; total: the place anywhere on the stack, counted once per
 *  sample), and self time per category, from a CDP profile. */
function summarize(profile) {
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const places = new Map(profile.nodes.map((n) => [n.id, placeOf(n.callFrame)]));
  const self = new Map();
  const total = new Map();
  const categories = new Map();
  const add = (map, key, dt) => map.set(key, (map.get(key) ?? 0) + dt);
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i];
    const dt = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    const { category, name } = places.get(id);
    add(categories, category, dt);
    if (category === "(idle)") continue;
    add(self, `${category}\t${name}`, dt);
    const seen = new Set();
    for (let at = id; at !== undefined; at = parent.get(at)) {
      const place = places.get(at);
      const key = `${place.category}\t${place.name}`;
      if (place.category === "package JS" && !seen.has(key)) {
        seen.add(key);
        add(total, key, dt);
      }
    }
  }
  return { self, total, categories };
}

const browser = await launchChromium({ what: "the overhead profile" });
try {
  const page = await (await browser.newContext()).newPage();
  page.on("pageerror", (e) => console.error("page error:", e));
  await page.goto(`${origin}/`);
  await page.waitForFunction(() => window.pageReady === true);
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Profiler.enable");
  await cdp.send("Profiler.setSamplingInterval", { interval: INTERVAL_US });
  for (const name of Object.keys(VARIANTS)) await page.evaluate(([n]) => window.runVariant(n, 50, "warm"), [name]);
  console.log(`# CPU profile per request, ${REQUESTS} sequential POSTs per variant, sampling every ${INTERVAL_US} µs (CDP attached)\n`);
  const results = {};
  for (const name of Object.keys(VARIANTS)) {
    await cdp.send("Profiler.start");
    const wall = await page.evaluate(([n, count]) => window.runVariant(n, count, "run"), [name, REQUESTS]);
    const { profile } = await cdp.send("Profiler.stop");
    results[name] = { wall, ...summarize(profile) };
  }
  const categories = [...new Set(Object.values(results).flatMap((r) => [...r.categories.keys()]))].filter((c) => c !== "(idle)" && c !== "(root)");
  console.log(`| variant | wall ms | CPU ms (not idle) | ${categories.join(" | ")} |`);
  console.log(`|---|---:|---:|${categories.map(() => "---:").join("|")}|`);
  for (const [name, r] of Object.entries(results)) {
    const per = (ms) => (ms / REQUESTS).toFixed(3);
    const busy = [...r.categories].filter(([c]) => c !== "(idle)" && c !== "(root)").reduce((a, [, ms]) => a + ms, 0);
    console.log(`| ${name} | ${r.wall.toFixed(3)} | ${per(busy)} | ${categories.map((c) => per(r.categories.get(c) ?? 0)).join(" | ")} |`);
  }
  for (const [name, r] of Object.entries(results)) {
    console.log(`\n## ${name}: top ${TOP} by self time (µs per request)\n`);
    const top = [...r.self].sort((a, b) => b[1] - a[1]).slice(0, TOP);
    for (const [place, ms] of top) console.log(`${((ms / REQUESTS) * 1000).toFixed(1).padStart(7)}  ${place.replace("\t", "  ")}`);
    if (!r.total.size) continue;
    console.log(`\n${name}: the package's functions by total time (self and callees; µs per request)\n`);
    for (const [place, ms] of [...r.total].sort((a, b) => b[1] - a[1]).slice(0, TOP)) {
      console.log(`${((ms / REQUESTS) * 1000).toFixed(1).padStart(7)}  ${place.split("\t")[1]}`);
    }
  }
} finally {
  await browser.close();
  server.close();
}
