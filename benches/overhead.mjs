#!/usr/bin/env node
// Overhead per request in headless Chromium, against a loopback Node server that answers every POST
// with 201 and a tiny JSON body, no faults.
//
//   node benches/overhead.mjs            1,000 POSTs per variant, 10,000 intents, 10 page loads
//   node benches/overhead.mjs --quick    200 POSTs per variant, 1,000 intents, 3 page loads
//   --pkg DIR                            serve the package from DIR (default pkg/, built by
//                                        `node package/build.mjs` when missing)
//   --before DIR                         also time the start-up of a `wasm-pack --target web` build of
//                                        0.1 (the async Rust layer, e.g. main at df381f9) in DIR: its loads
//                                        alternate with the package's, so both see the same machine load
//
// 1. Per request: plain fetch, fetch with a hand-made Idempotency-Key, the "floor" (a hand-written
//    fetch that takes a Web Lock and writes localStorage before and after: what any correct
//    implementation must do, issue 12's reference), the "exact floor" (the floor plus the key claimed
//    in one IndexedDB transaction: what an exact cross-tab begin adds, issue 13 item 4), ky with
//    retries, and idempotent-fetch (client.fetch with and without a named intent, and begin + send;
//    memory and localStorage). A named intent's begin claims its key across tabs (the exact floor's
//    IndexedDB transaction); a call without intent is its own intent and claims nothing (the floor).
//    All in one page, in one run, interleaved round-robin (the start variant rotates each round) so
//    that load from other processes on the machine falls on every variant alike. Each request reads the response body.
// 2. Start-up: import of the package (pkg/index.js, which starts fetching the .wasm), `await ready`
//    (the .wasm compiled and instantiated) and new IdempotentClient(), on fresh page loads with
//    caching off.
// 3. Intents: N sequential intents on localStorage, each `begin` (fingerprint, new key, record
//    saved) then `send` (record updated, POST with the key, 201, record marked succeeded: the key is
//    retired; the record itself stays until the keyTtl sweep).
//
// Needs the package (pkg/, built here when missing), tools/node_modules (playwright-core) and
// benches/size-compare/node_modules (ky, esbuild; `npm ci` is run there when missing), and Chromium
// at CHROMIUM_PATH (`cargo xtask bench` sets it). Prints figures; never fails on them.

import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import { dirname, extname, join, normalize, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { launchChromium } from "../tests/support/chromium.mjs";

const benches = dirname(fileURLToPath(import.meta.url));
const root = dirname(benches);
const compareDir = join(benches, "size-compare");
const quick = process.argv.includes("--quick");
const pkgArg = process.argv.indexOf("--pkg");
const pkgDir = pkgArg >= 0 ? resolve(process.argv[pkgArg + 1]) : join(root, "pkg");
const beforeArg = process.argv.indexOf("--before");
const beforeDir = beforeArg >= 0 ? resolve(process.argv[beforeArg + 1]) : null;
const REQUESTS = quick ? 200 : 1000;
const FLOOR = "floor: fetch + Web Lock + localStorage before and after";
const FLOOR_EXACT = "exact floor: the floor + the key claimed in one IndexedDB transaction";
const WARMUP = quick ? 20 : 50;
const INTENTS = quick ? 1000 : 10000;
const LOADS = quick ? 3 : 10;

function run(cmd, argv, cwd) {
  console.error(`$ ${cmd} ${argv.join(" ")}`);
  const r = spawnSync(cmd, argv, { cwd, stdio: ["ignore", "inherit", "inherit"] });
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

// ---- the loopback server --------------------------------------------------------------------------
const PAGE = `<!doctype html><meta charset="utf-8"><title>overhead</title><body>overhead bench</body>`;
const TYPES = { ".js": "text/javascript", ".wasm": "application/wasm", ".html": "text/html" };
// Cross-origin isolation gives performance.now() 5 µs resolution instead of 100 µs.
const ISOLATION = { "cross-origin-opener-policy": "same-origin", "cross-origin-embedder-policy": "require-corp" };
let orders = 0;
const server = createServer((req, res) => {
  const url = new URL(req.url, "http://x");
  if (req.method === "POST" && url.pathname === "/api/orders") {
    req.on("data", () => {});
    req.on("end", () => {
      orders += 1;
      res.writeHead(201, { "content-type": "application/json", "cache-control": "no-store" });
      res.end(`{"id":${orders}}`);
    });
    return;
  }
  const headers = { ...ISOLATION, "cache-control": "no-store" };
  if (url.pathname === "/") {
    res.writeHead(200, { ...headers, "content-type": "text/html" });
    res.end(PAGE);
  } else if (url.pathname === "/ky.js") {
    res.writeHead(200, { ...headers, "content-type": "text/javascript" });
    res.end(kyBundle);
  } else if (url.pathname.startsWith("/pkg/") || (beforeDir && url.pathname.startsWith("/before/"))) {
    const [prefix, dir] = url.pathname.startsWith("/pkg/") ? ["/pkg/", pkgDir] : ["/before/", beforeDir];
    const file = normalize(join(dir, url.pathname.slice(prefix.length)));
    if (!file.startsWith(dir + "/") || !existsSync(file)) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { ...headers, "content-type": TYPES[extname(file)] ?? "application/octet-stream" });
    res.end(readFileSync(file));
  } else {
    res.writeHead(404).end();
  }
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const origin = `http://127.0.0.1:${server.address().port}`;

// ---- in the page ------------------------------------------------------------------------------------
async function startup() {
  const t0 = performance.now();
  const mod = await import("/pkg/index.js");
  const t1 = performance.now();
  await mod.ready;
  const t2 = performance.now();
  new mod.IdempotentClient({ namespace: `startup-${Math.random()}`, storage: "memory" });
  const t3 = performance.now();
  return { importMs: t1 - t0, initMs: t2 - t1, clientMs: t3 - t2, totalMs: t3 - t0 };
}

// 0.1's API: import the wasm-bindgen glue, await its init(), then the constructor.
async function startupBefore() {
  const t0 = performance.now();
  const mod = await import("/before/idempotent_fetch.js");
  const t1 = performance.now();
  await mod.default();
  const t2 = performance.now();
  new mod.IdempotentClient({ namespace: `startup-${Math.random()}`, storage: "memory" });
  const t3 = performance.now();
  return { importMs: t1 - t0, initMs: t2 - t1, clientMs: t3 - t2, totalMs: t3 - t0 };
}

async function perRequest({ requests, warmup, FLOOR, FLOOR_EXACT }) {
  localStorage.clear();
  const { IdempotentClient, ready } = await import("/pkg/index.js");
  await ready;
  const { default: ky } = await import("/ky.js");
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
    // Without `intent`, each call is its own intent (a random id no other tab can begin): no claim,
    // so this is the one that compares with the floor; named intents compare with the exact floor.
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
  return { samples, fallback, isolated: crossOriginIsolated, storedKeys: localStorage.length };
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

// ---- statistics and report ---------------------------------------------------------------------------
const sorted = (xs) => [...xs].sort((a, b) => a - b);
const quantile = (xs, q) => {
  const s = sorted(xs);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
};
const median = (xs) => quantile(xs, 0.5);
const p99 = (xs) => quantile(xs, 0.99);
const ms = (x) => x.toFixed(3);

const browser = await launchChromium({ what: "the overhead benchmark" });
try {
  const version = browser.version();
  const context = await browser.newContext();

  // Start-up, each on a fresh page load (cache off: the server says no-store).
  const loads = [];
  const beforeLoads = [];
  const load = async (fn, sink) => {
    const page = await context.newPage();
    await page.goto(`${origin}/`);
    sink.push(await page.evaluate(fn));
    await page.close();
  };
  for (let i = 0; i < LOADS; i++) {
    // With --before, the two alternate and take turns going first.
    const order = beforeDir ? (i % 2 ? [[startupBefore, beforeLoads], [startup, loads]] : [[startup, loads], [startupBefore, beforeLoads]]) : [[startup, loads]];
    for (const [fn, sink] of order) await load(fn, sink);
  }

  const page = await context.newPage();
  await page.goto(`${origin}/`);
  const req = await page.evaluate(perRequest, { requests: REQUESTS, warmup: WARMUP, FLOOR, FLOOR_EXACT });
  const int = await page.evaluate(intents, { count: INTENTS });
  await page.close();

  console.log(`# Overhead in headless Chromium ${version} (Node ${process.version} server on 127.0.0.1)\n`);
  console.log(
    `crossOriginIsolated: ${req.isolated} (performance.now() resolution ${req.isolated ? "5 µs" : "100 µs"}); ky ${kyVersion}; ` +
      `${REQUESTS} sequential POSTs per variant after ${WARMUP} warm-up each, interleaved round-robin.\n`,
  );
  console.log("## Per request (ms, wall clock in the page: request sent to body read)\n");
  const base = req.samples.fetch;
  const floor = req.samples[FLOOR];
  console.log("| variant | median | p99 | median ÷ fetch | p99 ÷ fetch | median ÷ floor | median − fetch |");
  console.log("|---|---:|---:|---:|---:|---:|---:|");
  for (const [name, xs] of Object.entries(req.samples)) {
    console.log(
      `| ${name} | ${ms(median(xs))} | ${ms(p99(xs))} | ${(median(xs) / median(base)).toFixed(2)}× | ${(p99(xs) / p99(base)).toFixed(2)}× | ` +
        `${(median(xs) / median(floor)).toFixed(2)}× | ${ms(median(xs) - median(base))} |`,
    );
  }
  const kyName = Object.keys(req.samples).find((n) => n.startsWith("ky "));
  for (const name of Object.keys(req.samples).filter((n) => n.startsWith("idempotent-fetch") && n.endsWith("localStorage"))) {
    const m = median(req.samples[name]);
    const exact = median(req.samples[FLOOR_EXACT]);
    console.log(
      `\n${name}: ${(m / median(floor)).toFixed(2)}× the floor's median (${ms(m - median(floor))} ms over it), ` +
        `${(m / exact).toFixed(2)}× the exact floor's (${ms(m - exact)} ms over it); ` +
        `${m < median(req.samples[kyName]) ? "below" : "not below"} ky's median (${ms(m)} vs ${ms(median(req.samples[kyName]))} ms).`,
    );
  }
  if (req.fallback) console.log(`\nlocalStorage fell back to memory: ${req.fallback}`);

  console.log(`\n## Start-up (ms, ${LOADS} fresh page loads, no cache${beforeDir ? `, alternating with 0.1's (${beforeDir})` : ""})\n`);
  console.log("| step | first load | median | min | max |");
  console.log("|---|---:|---:|---:|---:|");
  const rows = [
    [loads, "importMs", "import(\"/pkg/index.js\") (starts fetching the .wasm)"],
    [loads, "initMs", "await ready: the .wasm fetched, compiled, instantiated"],
    [loads, "clientMs", "new IdempotentClient({storage: \"memory\"})"],
    [loads, "totalMs", "**total**"],
  ];
  if (beforeDir) {
    rows.push(
      [beforeLoads, "importMs", "0.1: import the wasm-bindgen glue"],
      [beforeLoads, "initMs", "0.1: await init(): fetch + compile + instantiate the .wasm"],
      [beforeLoads, "clientMs", "0.1: new IdempotentClient({storage: \"memory\"})"],
      [beforeLoads, "totalMs", "**0.1: total**"],
    );
  }
  for (const [sample, key, label] of rows) {
    const xs = sample.map((l) => l[key]);
    console.log(`| ${label} | ${ms(xs[0])} | ${ms(median(xs))} | ${ms(Math.min(...xs))} | ${ms(Math.max(...xs))} |`);
  }
  if (beforeDir) console.log(`\nMedian total: ${ms(median(loads.map((l) => l.totalMs)))} ms, 0.1's ${ms(median(beforeLoads.map((l) => l.totalMs)))} ms in the same run.`);

  console.log(`\n## ${INTENTS.toLocaleString("en")} intents on localStorage (ms per intent)\n`);
  console.log(
    "Each: `await client.begin(id, {url, method: \"POST\", headers, body})` (validate, fingerprint, new key, record saved), " +
      "then `await op.send()` + body read (Web Lock taken, record saved with its attempt count, POST with the key to the 201 server, " +
      "record saved as succeeded: key retired).\n",
  );
  console.log("| part | median | p99 | mean |");
  console.log("|---|---:|---:|---:|");
  const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
  for (const [label, xs] of [
    ["begin", int.begin],
    ["send (+ body read)", int.send],
    ["begin + send", int.total],
    ["plain fetch of the same request, interleaved (reference)", int.plain],
  ]) {
    console.log(`| ${label} | ${ms(median(xs))} | ${ms(p99(xs))} | ${ms(mean(xs))} |`);
  }
  console.log(
    `\nTime in intents ${(int.wallMs / 1000).toFixed(2)} s, ${ms(int.wallMs / INTENTS)} ms per intent; ` +
      `median begin + send minus median plain fetch: ${ms(median(int.total) - median(int.plain))} ms. ` +
      `Afterwards localStorage holds ${int.storedKeys} entries, ${(int.storedChars / 1024 / 1024).toFixed(2)} M chars ` +
      `(succeeded records stay until the keyTtl sweep); client.pending() lists ${int.pending}.` +
      (int.fallback ? ` localStorage fell back to memory: ${int.fallback}` : ""),
  );
  await context.close();
} finally {
  await browser.close();
  server.close();
}
