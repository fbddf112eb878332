#!/usr/bin/env node
// Overhead per request in headless Chromium started by itself (no debugger attached), against a
// loopback Node server that answers every POST with 201 and a tiny JSON body, no faults. The pages
// time themselves (performance.now()) and post their figures to the server (benches/support/pages.mjs).
//
//   node benches/overhead.mjs            1,000 POSTs per variant, 10,000 intents
//   node benches/overhead.mjs --quick    200 POSTs per variant, 1,000 intents
//   --requests N, --intents N            other counts (--intents 0: the per-request part alone)
//   --pkg DIR                            serve the package from DIR (default pkg/, built by
//                                        `node package/build.mjs` when missing)
//   --cdp                                the same pages again under playwright-core (a DevTools protocol
//                                        client attached, ~1.7 ms more per fetch): a second column
//
// 1. Per request: plain fetch, fetch with a hand-made Idempotency-Key, the "floor" (a hand-written
//    fetch that takes a Web Lock and writes localStorage before and after: what any correct
//    implementation must do), the "exact floor" (the floor plus the key claimed in one IndexedDB
//    transaction: what an exact cross-tab begin adds), ky with retries, and idempotent-fetch
//    (client.fetch with and without a named intent, and begin + send; memory and localStorage). A
//    named intent's begin claims its key across tabs (the exact floor's IndexedDB transaction); a call
//    without intent is named by its request (its fingerprint first, then a claim like a named one). All in one page, in one run,
//    interleaved round-robin (the start variant rotates each round) so that load from other processes
//    on the machine falls on every variant alike. Each request reads the response body. Begin + send
//    on localStorage once more with tracing (`idempotent-fetch-client/otel` and the OpenTelemetry SDK's
//    tracer: a SimpleSpanProcessor into an InMemorySpanExporter, no export over the network): the
//    traced path's cost, printed as its ratio to the same variant untraced. Each ratio of medians to
//    ky (and traced to untraced, a variant to the exact floor) comes with a 95 % interval from a
//    bootstrap over the paired rounds (benches/support/paired.mjs: round i of every variant ran back
//    to back, so its samples are resampled together).
// 2. Intents: N sequential intents on localStorage, each `begin` (fingerprint, new key, record
//    saved) then `send` (record updated, POST with the key, 201, record marked succeeded: the key is
//    retired; the record itself stays until the keyTtl sweep).
// Start-up is benches/startup.mjs.
//
// Needs the package (pkg/, built here when missing), benches/size-compare/node_modules (ky, esbuild;
// `npm ci` is run there when missing), tools/node_modules (the OpenTelemetry SDK), and Chromium at CHROMIUM_PATH (`cargo xtask bench` sets it;
// --cdp also needs tools/node_modules' playwright-core). Prints figures; never fails on them.

import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import os from "node:os";
import { dirname, extname, join, normalize, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { BOOTSTRAP_METHOD, medianRatioInterval } from "./support/paired.mjs";
import { openChromium, REPORT_SCRIPT, reports } from "./support/pages.mjs";

const benches = dirname(fileURLToPath(import.meta.url));
const root = dirname(benches);
const compareDir = join(benches, "size-compare");
const argv = process.argv.slice(2);
const option = (name) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
const quick = argv.includes("--quick");
const pkgDir = option("--pkg") ? resolve(option("--pkg")) : join(root, "pkg");
const REQUESTS = Number(option("--requests") ?? (quick ? 200 : 1000));
const INTENTS = Number(option("--intents") ?? (quick ? 1000 : 10000));
const FLOOR = "floor: fetch + Web Lock + localStorage before and after";
const FLOOR_EXACT = "exact floor: the floor + the key claimed in one IndexedDB transaction";
const WARMUP = quick ? 20 : 50;

function run(cmd, args, cwd) {
  console.error(`$ ${cmd} ${args.join(" ")}`);
  const r = spawnSync(cmd, args, { cwd, stdio: ["ignore", "inherit", "inherit"] });
  if (r.status !== 0) throw new Error(`${cmd} exited with ${r.status ?? r.signal}`);
}

if (!existsSync(join(pkgDir, "package.json"))) run(process.execPath, [join(root, "package", "build.mjs")], root);
if (!existsSync(join(compareDir, "node_modules", "esbuild"))) run("npm", ["ci", "--no-audit", "--no-fund"], compareDir);
const requireCompare = createRequire(join(compareDir, "package.json"));
const esbuild = requireCompare("esbuild");
const kyVersion = JSON.parse(readFileSync(join(compareDir, "node_modules", "ky", "package.json"), "utf8")).version;

const kyBundle = (
  await esbuild.build({
    stdin: { contents: `export { default } from "ky";`, resolveDir: compareDir, loader: "js" },
    bundle: true, minify: true, format: "esm", platform: "browser", target: "es2020", write: false, logLevel: "silent",
  })
).outputFiles[0].text;

// The traced variant's tracer: the package's otel entry with the OpenTelemetry API and SDK (tools/).
const TRACED = "idempotent-fetch begin + send, localStorage, traced (otel)";
const UNTRACED = "idempotent-fetch begin + send, localStorage";
const otelBundle = (
  await esbuild.build({
    stdin: {
      contents:
        `import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";\n` +
        `import { otelObserver } from ${JSON.stringify(join(pkgDir, "otel.js"))};\n` +
        `const exporter = new InMemorySpanExporter();\n` +
        `const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });\n` +
        `export const observer = otelObserver(provider.getTracer("bench"));\n` +
        `export const finishedSpans = () => exporter.getFinishedSpans().length;\n`,
      resolveDir: root, loader: "js",
    },
    bundle: true, minify: true, format: "esm", platform: "browser", target: "es2020", write: false, logLevel: "silent",
    nodePaths: [join(root, "tools", "node_modules")],
  })
).outputFiles[0].text;

// ---- in the page ------------------------------------------------------------------------------------
async function perRequest({ requests, warmup, FLOOR, FLOOR_EXACT, TRACED }) {
  localStorage.clear();
  const { IdempotentClient, ready } = await import("/pkg/index.js");
  await ready;
  const { default: ky } = await import("/ky.js");
  const otel = await import("/otel.js");
  const traced = new IdempotentClient({ namespace: "bench-traced", storage: "local", observer: otel.observer });
  const url = "/api/orders";
  const bodyOf = (i) => JSON.stringify({ cart: "cart-42", amount: 4200, currency: "eur", i });
  const memory = new IdempotentClient({ namespace: "bench-memory", storage: "memory" });
  const local = new IdempotentClient({ namespace: "bench-local", storage: "local" });
  let fallback = null;
  local.addEventListener("storagefallback", (e) => (fallback = e.reason));
  const json = { "content-type": "application/json" };
  const claims = await new Promise((resolve, reject) => {
    const open = indexedDB.open("bench-claims", 1);
    open.onupgradeneeded = () => open.result.createObjectStore("claims");
    open.onsuccess = () => resolve(open.result);
    open.onerror = () => reject(open.error);
  });
  const variants = {
    "fetch": async (i) => {
      const r = await fetch(url, { method: "POST", headers: json, body: bodyOf(i) });
      await r.text();
    },
    "fetch + Idempotency-Key (crypto.randomUUID)": async (i) => {
      const headers = { ...json, "idempotency-key": crypto.randomUUID() };
      const r = await fetch(url, { method: "POST", headers, body: bodyOf(i) });
      await r.text();
    },
    // What any correct implementation must do at least: one sender per intent across tabs (a Web
    // Lock) and the key on disk before the POST and the outcome after it (two localStorage writes).
    [FLOOR]: async (i, round) => {
      const id = `floor:${round}-${i}`;
      const key = crypto.randomUUID();
      await navigator.locks.request(id, async () => {
        localStorage.setItem(id, JSON.stringify({ key, state: "pending", attempts: 1, at: Date.now() }));
        const r = await fetch(url, { method: "POST", headers: { ...json, "idempotency-key": key }, body: bodyOf(i) });
        await r.text();
        localStorage.setItem(id, JSON.stringify({ key, state: "succeeded", status: r.status, attempts: 1, at: Date.now() }));
      });
    },
    // The floor with issue 13 item 4's exact cross-tab begin: the key claimed in one IndexedDB
    // read-write transaction (an `add` committed at once, what the package does for a new intent)
    // before the floor's Web Lock and writes.
    [FLOOR_EXACT]: async (i, round) => {
      const id = `exact:${round}-${i}`;
      const key = crypto.randomUUID();
      const record = JSON.stringify({ key, state: "pending", attempts: 0, at: Date.now() });
      await new Promise((resolve, reject) => {
        const transaction = claims.transaction("claims", "readwrite", { durability: "relaxed" });
        transaction.objectStore("claims").add(record, id);
        transaction.commit();
        transaction.oncomplete = resolve;
        transaction.onabort = () => reject(transaction.error);
      });
      await navigator.locks.request(id, async () => {
        localStorage.setItem(id, JSON.stringify({ key, state: "pending", attempts: 1, at: Date.now() }));
        const r = await fetch(url, { method: "POST", headers: { ...json, "idempotency-key": key }, body: bodyOf(i) });
        await r.text();
        localStorage.setItem(id, JSON.stringify({ key, state: "succeeded", status: r.status, attempts: 1, at: Date.now() }));
      });
    },
    [`ky (retry: limit 3, POST included)`]: async (i) => {
      await ky.post(url, { headers: json, body: bodyOf(i), retry: { limit: 3, methods: ["post"] } }).text();
    },
    "idempotent-fetch client.fetch, memory": async (i, round) => {
      const r = await memory.fetch(url, { method: "POST", headers: json, body: bodyOf(i), intent: `m-fetch-${round}-${i}` });
      await r.text();
    },
    "idempotent-fetch client.fetch, localStorage": async (i, round) => {
      const r = await local.fetch(url, { method: "POST", headers: json, body: bodyOf(i), intent: `l-fetch-${round}-${i}` });
      await r.text();
    },
    // Without `intent`, the request names the intent (its keyed fingerprint): each body here is
    // another intent, claimed like a named one, and deleted once answered.
    "idempotent-fetch client.fetch without intent, localStorage": async (i) => {
      const r = await local.fetch(url, { method: "POST", headers: json, body: bodyOf(i) });
      await r.text();
    },
    "idempotent-fetch begin + send, memory": async (i, round) => {
      const op = await memory.begin(`m-op-${round}-${i}`, { url, method: "POST", headers: json, body: bodyOf(i) });
      const result = await op.send();
      await result.response.text();
    },
    "idempotent-fetch begin + send, localStorage": async (i, round) => {
      const op = await local.begin(`l-op-${round}-${i}`, { url, method: "POST", headers: json, body: bodyOf(i) });
      const result = await op.send();
      await result.response.text();
    },
    [TRACED]: async (i, round) => {
      const op = await traced.begin(`t-op-${round}-${i}`, { url, method: "POST", headers: json, body: bodyOf(i) });
      const result = await op.send();
      await result.response.text();
    },
  };
  const names = Object.keys(variants);
  const samples = Object.fromEntries(names.map((n) => [n, []]));
  for (let i = 0; i < warmup; i++) for (const n of names) await variants[n](i, "warm");
  for (let i = 0; i < requests; i++) {
    for (let k = 0; k < names.length; k++) {
      const n = names[(i + k) % names.length];
      const t0 = performance.now();
      await variants[n](i, "run");
      samples[n].push(performance.now() - t0);
    }
  }
  return { samples, fallback, isolated: crossOriginIsolated, storedKeys: localStorage.length, spans: otel.finishedSpans() };
}

async function intents({ count }) {
  localStorage.clear();
  const { IdempotentClient, ready } = await import("/pkg/index.js");
  await ready;
  const client = new IdempotentClient({ namespace: "bench-intents", storage: "local" });
  let fallback = null;
  client.addEventListener("storagefallback", (e) => (fallback = e.reason));
  const url = "/api/orders";
  const headers = { "content-type": "application/json" };
  const begin = [];
  const send = [];
  const total = [];
  const plain = [];
  // A plain fetch of the same request next to each intent (before it on even i, after on odd), so the
  // intent's cost can be read against the network's in the same conditions.
  const reference = async (i) => {
    const t = performance.now();
    const r = await fetch(url, { method: "POST", headers, body: JSON.stringify({ cart: i, amount: 4200 }) });
    await r.text();
    plain.push(performance.now() - t);
  };
  let intentMs = 0;
  for (let i = 0; i < count; i++) {
    if (i % 2 === 0) await reference(i);
    const t0 = performance.now();
    const op = await client.begin(`checkout:cart-${i}`, { url, method: "POST", headers, body: JSON.stringify({ cart: i, amount: 4200 }) });
    const t1 = performance.now();
    const result = await op.send();
    await result.response.text();
    const t2 = performance.now();
    if (result.status !== 201) throw new Error(`status ${result.status}`);
    begin.push(t1 - t0);
    send.push(t2 - t1);
    total.push(t2 - t0);
    intentMs += t2 - t0;
    if (i % 2 === 1) await reference(i);
  }
  const wallMs = intentMs;
  let chars = 0;
  for (let i = 0; i < localStorage.length; i++) {
    const k = localStorage.key(i);
    chars += k.length + localStorage.getItem(k).length;
  }
  const pending = (await client.pending()).length;
  return { begin, send, total, plain, wallMs, fallback, storedKeys: localStorage.length, storedChars: chars, pending };
}

// ---- the pages and the loopback server -----------------------------------------------------------
// /run/0 measures per request, /run/1 the intents; each reports, then goes on to the next.
const steps = [
  ["perRequest", perRequest, { requests: REQUESTS, warmup: WARMUP, FLOOR, FLOOR_EXACT, TRACED }],
  ...(INTENTS > 0 ? [["intents", intents, { count: INTENTS }]] : []),
];
const stepPage = (i) =>
  i >= steps.length
    ? "<!doctype html>done"
    : `<!doctype html><meta charset="utf-8"><title>overhead ${steps[i][0]}</title><body><script>${REPORT_SCRIPT}</script><script type="module">
await report("${steps[i][0]}", await (${steps[i][1]})(${JSON.stringify(steps[i][2])}));
location.href = "/run/${i + 1}";
</script>`;
const TYPES = { ".js": "text/javascript", ".wasm": "application/wasm", ".html": "text/html" };
// Cross-origin isolation gives performance.now() 5 µs resolution instead of 100 µs.
const HEADERS = { "cross-origin-opener-policy": "same-origin", "cross-origin-embedder-policy": "require-corp", "cache-control": "no-store" };
let orders = 0;
let pages = reports();
const server = createServer((req, res) => {
  const url = new URL(req.url, "http://x");
  if (pages.handle(req, res, url)) return;
  if (req.method === "POST" && url.pathname === "/api/orders") {
    req.on("data", () => {});
    req.on("end", () => {
      orders += 1;
      res.writeHead(201, { "content-type": "application/json", "cache-control": "no-store" });
      res.end(`{"id":${orders}}`);
    });
    return;
  }
  const send = (type, body) => res.writeHead(200, { ...HEADERS, "content-type": type }).end(body);
  let m;
  if ((m = url.pathname.match(/^\/run\/(\d+)$/))) return send("text/html", stepPage(+m[1]));
  if (url.pathname === "/ky.js") return send("text/javascript", kyBundle);
  if (url.pathname === "/otel.js") return send("text/javascript", otelBundle);
  const file = url.pathname.startsWith("/pkg/") && normalize(join(pkgDir, url.pathname.slice("/pkg/".length)));
  if (!file || !file.startsWith(pkgDir + "/") || !existsSync(file)) return res.writeHead(404).end();
  send(TYPES[extname(file)] ?? "application/octet-stream", readFileSync(file));
});
await new Promise((listening) => server.listen(0, "127.0.0.1", listening));
const origin = `http://127.0.0.1:${server.address().port}`;

/** Every step's figures, in Chromium started by itself, or (cdp) driven by playwright-core. */
async function measure(cdp) {
  pages = reports();
  const browser = await openChromium(`${origin}/run/0`, { cdp, what: "the overhead benchmark" });
  try {
    const figures = { version: browser.version };
    for (const [name] of steps) figures[name] = await pages.next(name);
    return figures;
  } finally {
    await browser.close();
  }
}

// ---- statistics and report ---------------------------------------------------------------------------
const sorted = (xs) => [...xs].sort((a, b) => a - b);
const quantile = (xs, q) => {
  const s = sorted(xs);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
};
const median = (xs) => quantile(xs, 0.5);
const p99 = (xs) => quantile(xs, 0.99);
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
const ms = (x) => x.toFixed(3);

let alone, cdp;
try {
  alone = await measure(false);
  if (argv.includes("--cdp")) cdp = await measure(true);
} finally {
  server.close();
}
const req = alone.perRequest;
console.log(`# Overhead in headless Chromium: ${alone.version} (Node ${process.version} server on 127.0.0.1)\n`);
console.log(
  `crossOriginIsolated: ${req.isolated} (performance.now() resolution ${req.isolated ? "5 µs" : "100 µs"}); ky ${kyVersion}; ` +
    `${REQUESTS} sequential POSTs per variant after ${WARMUP} warm-up each, interleaved round-robin; ` +
    `load average at the end ${os.loadavg().map((l) => l.toFixed(1)).join(", ")}.\n`,
);
console.log("## Per request (ms, wall clock in the page: request sent to body read)\n");
const base = req.samples.fetch;
const floor = req.samples[FLOOR];
const exact = req.samples[FLOOR_EXACT];
const kyName = Object.keys(req.samples).find((n) => n.startsWith("ky "));
// Each ratio to ky with its paired interval: round i of every variant ran back to back.
const toKy = (xs) => {
  const { ratio, low, high } = medianRatioInterval(xs, req.samples[kyName]);
  return `${ratio.toFixed(2)}× (${low.toFixed(2)}-${high.toFixed(2)})`;
};
console.log(
  `| variant | median | p99 | median ÷ fetch | median ÷ floor | median ÷ exact floor | median ÷ ky (95 % interval) | median − fetch |${cdp ? " median, CDP attached | ÷ ky, CDP attached |" : ""}`,
);
console.log(`|---|---:|---:|---:|---:|---:|---:|---:|${cdp ? "---:|---:|" : ""}`);
for (const [name, xs] of Object.entries(req.samples)) {
  const withCdp = cdp && cdp.perRequest.samples[name];
  console.log(
    `| ${name} | ${ms(median(xs))} | ${ms(p99(xs))} | ${(median(xs) / median(base)).toFixed(2)}× | ` +
      `${(median(xs) / median(floor)).toFixed(2)}× | ${(median(xs) / median(exact)).toFixed(2)}× | ${name === kyName ? "1.00×" : toKy(xs)} | ${ms(median(xs) - median(base))} |` +
      (cdp ? ` ${ms(median(withCdp))} | ${(median(withCdp) / median(cdp.perRequest.samples[kyName])).toFixed(2)}× |` : ""),
  );
}
console.log(`\n${BOOTSTRAP_METHOD}.`);
const interval = (xs, ys) => {
  const { ratio, low, high } = medianRatioInterval(xs, ys);
  return `${ratio.toFixed(3)}× (95 % interval ${low.toFixed(3)}-${high.toFixed(3)})`;
};
for (const name of Object.keys(req.samples).filter((n) => n.startsWith("idempotent-fetch") && n.endsWith("localStorage"))) {
  const m = median(req.samples[name]);
  console.log(
    `\n${name}: ${interval(req.samples[name], req.samples[kyName])} ky's median (${ms(m)} vs ${ms(median(req.samples[kyName]))} ms); ` +
      `${interval(req.samples[name], exact)} the exact floor's (${ms(m - median(exact))} ms over it), ` +
      `${(m / median(floor)).toFixed(3)}× the floor's (${ms(m - median(floor))} ms over it).`,
  );
}
{
  const [t, u] = [median(req.samples[TRACED]), median(req.samples[UNTRACED])];
  console.log(
    `\nTraced ÷ untraced (begin + send, localStorage, same run): ${interval(req.samples[TRACED], req.samples[UNTRACED])} the median (${ms(t)} vs ${ms(u)} ms, ` +
      `${ms(t - u)} ms more); p99 ${ms(p99(req.samples[TRACED]))} vs ${ms(p99(req.samples[UNTRACED]))} ms; ${req.spans} spans finished.`,
  );
}
if (req.fallback) console.log(`\nlocalStorage fell back to memory: ${req.fallback}`);

const int = alone.intents;
if (int) {
  console.log(`\n## ${INTENTS.toLocaleString("en")} intents on localStorage (ms per intent)\n`);
  console.log(
    "Each: `await client.begin(id, {url, method: \"POST\", headers, body})` (validate, fingerprint, new key, record saved), " +
      "then `await op.send()` + body read (Web Lock taken, record saved with its attempt count, POST with the key to the 201 server, " +
      "record saved as succeeded: key retired).\n",
  );
  console.log(`| part | median | p99 | mean |${cdp ? " median, CDP attached |" : ""}`);
  console.log(`|---|---:|---:|---:|${cdp ? "---:|" : ""}`);
  for (const [label, key] of [
    ["begin", "begin"],
    ["send (+ body read)", "send"],
    ["begin + send", "total"],
    ["plain fetch of the same request, interleaved (reference)", "plain"],
  ]) {
    const xs = int[key];
    console.log(`| ${label} | ${ms(median(xs))} | ${ms(p99(xs))} | ${ms(mean(xs))} |${cdp ? ` ${ms(median(cdp.intents[key]))} |` : ""}`);
  }
  console.log(
    `\nTime in intents ${(int.wallMs / 1000).toFixed(2)} s, ${ms(int.wallMs / INTENTS)} ms per intent; ` +
      `median begin + send minus median plain fetch: ${ms(median(int.total) - median(int.plain))} ms. ` +
      `Afterwards localStorage holds ${int.storedKeys} entries, ${(int.storedChars / 1024 / 1024).toFixed(2)} M chars ` +
      `(succeeded records stay until the keyTtl sweep); client.pending() lists ${int.pending}.` +
      (int.fallback ? ` localStorage fell back to memory: ${int.fallback}` : ""),
  );
}
