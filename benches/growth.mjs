#!/usr/bin/env node
// Growth: what a long history costs, in headless Chromium with no debugger attached. One page makes
// many named intents (`begin` + `send`, each answered 201 by this script's own server, same origin)
// in localStorage and then in IndexedDB storage; every 5,000 it reports the ms per intent, what the
// namespace stores (items and characters of its records, claims), whether every result was durable,
// the JS heap and the wasm memory. Fresh loads of the origin, before (empty history) and after,
// time the constructor, the first `begin` (a new intent) and `pending()`, side by side; fresh loads
// with the history whose `begin` comes 500 ms after the constructor (a click, after the client's
// warm-up); then fresh loads that do by hand only the storage work a first `begin` needs (its floor).
//
//   node benches/growth.mjs                        100,000 intents per storage, 15 fresh loads before
//                                                  (empty history) and 15 after, per storage
//   --quick                                        5,000 intents and 5 + 5 fresh loads per storage
//   --intents N                                    intents per storage (a multiple of 5,000)
//   --loads N                                      fresh loads per storage
//   --storage local|indexeddb                      only that storage
//
// Each page posts its figures to the server and navigates to the next one by itself (as
// benches/startup.mjs --no-cdp does): with a CDP client attached Chromium records the stack of every
// request, which slows exactly what is measured here. Default client options, namespace
// "growth-<storage>". Timings are `performance.now()` in the page.
// Needs Chromium at CHROMIUM_PATH and a built pkg/. Prints figures; never fails on them.

import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import os from "node:os";
import { dirname, extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";

import { CHROMIUM_ARGS, chromiumPath } from "../tests/support/chromium.mjs";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const argv = process.argv.slice(2);
const option = (name) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
const quick = argv.includes("--quick");
const INTENTS = Number(option("--intents") ?? (quick ? 5_000 : 100_000));
const LOADS = Number(option("--loads") ?? (quick ? 5 : 15));
const STORAGES = option("--storage") ? [option("--storage")] : ["local", "indexeddb"];
const EVERY = 5_000;
const pkg = join(root, "pkg");
if (!existsSync(join(pkg, "index.js"))) throw new Error("pkg/ is missing: build the package (cargo xtask build)");

// The pages, in order: per storage, LOADS fresh loads with an empty history (the baseline), one
// growth page, then LOADS fresh loads with that history.
const freshLoads = (storage, phase) => Array.from({ length: LOADS }, (_, load) => ({ kind: "fresh", storage, phase, load: `${phase}-${load}` }));
// "click" loads are fresh loads with the history whose `begin` comes CLICK_AFTER_MS after the
// constructor, as a shopper's click comes after the page is shown (the client warms up when idle).
const CLICK_AFTER_MS = 500;
// Then LOADS floor loads: the same first storage use with none of our code (see `floor`).
const floorLoads = (storage) => Array.from({ length: LOADS }, (_, load) => ({ kind: "floor", storage, load: `floor-${load}` }));
const pages = STORAGES.flatMap((storage) => [...freshLoads(storage, "empty"), { kind: "grow", storage }, ...freshLoads(storage, "history"), ...freshLoads(storage, "click"), ...floorLoads(storage)]);

// ---- in the page ---------------------------------------------------------------------------------
/** What the namespace stores: its records (items, characters of slot + text) and its claims. */
async function stored(storage) {
  const idb = (name, store, range) =>
    new Promise((resolve, reject) => {
      const open = indexedDB.open(name);
      open.onerror = () => reject(open.error);
      open.onsuccess = () => {
        const db = open.result;
        if (!db.objectStoreNames.contains(store)) return resolve([[], []]);
        const s = db.transaction(store, "readonly").objectStore(store);
        const keys = s.getAllKeys(range);
        const values = s.getAll(range);
        values.onsuccess = () => (db.close(), resolve([keys.result, values.result]));
        values.onerror = () => reject(values.error);
      };
    });
  const size = (keys, values) => keys.reduce((n, k, i) => n + String(k).length + String(values[i]).length, 0);
  let items = 0;
  let chars = 0;
  if (storage === "local") {
    for (let i = 0; i < localStorage.length; i++) {
      const slot = localStorage.key(i);
      if (!slot.startsWith("idempotent-fetch:v1:growth-local:")) continue;
      items += 1;
      chars += slot.length + localStorage.getItem(slot).length;
    }
  } else {
    const [keys, values] = await idb("idempotent-fetch", "intents", IDBKeyRange.bound("growth-indexeddb:", "growth-indexeddb;", false, true));
    items = keys.length;
    chars = size(keys, values);
  }
  const [claimKeys] = await idb("idempotent-fetch-claims", "claims", IDBKeyRange.bound(`growth-${storage}\0`, `growth-${storage}\x01`));
  return { items, chars, claims: claimKeys.length };
}

/** Keeps the wasm instance's memory when the package instantiates its module (run before the
 *  package is imported: its export names are minified, so the Memory is found by its type). */
function watchWasm() {
  for (const name of ["instantiate", "instantiateStreaming"]) {
    const original = WebAssembly[name];
    WebAssembly[name] = async (...args) => {
      const result = await original.apply(WebAssembly, args);
      globalThis.wasmMemory = Object.values((result.instance ?? result).exports).find((v) => v instanceof WebAssembly.Memory);
      return result;
    };
  }
}

/** The wasm module's linear memory, in bytes. */
const wasmBytes = () => globalThis.wasmMemory?.buffer.byteLength ?? 0;

async function grow(storage, intents, every) {
  const { IdempotentClient, ready } = await import("/pkg/index.js");
  await ready;
  const client = new IdempotentClient({ namespace: `growth-${storage}`, storage });
  const rows = [];
  let notDurable = 0;
  for (let done = 0; done < intents; ) {
    const t0 = performance.now();
    for (let k = 0; k < every; k++, done++) {
      const op = await client.begin(`order:${done}`, { url: "/api/orders", method: "POST", body: `{"order":${done}}` });
      const result = await op.send();
      if (!result.durable) notDurable += 1;
    }
    const ms = (performance.now() - t0) / every;
    rows.push({ done, ms, notDurable, ...(await stored(storage)), heap: performance.memory?.usedJSHeapSize ?? 0, wasm: wasmBytes(), storageNow: client.storage });
    await fetch("/progress", { method: "POST", body: JSON.stringify(rows.at(-1)) });
  }
  return rows;
}

async function fresh(storage, load, clickAfterMs) {
  const { IdempotentClient, ready } = await import("/pkg/index.js");
  await ready;
  const t0 = performance.now();
  const client = new IdempotentClient({ namespace: `growth-${storage}`, storage });
  let t1 = performance.now();
  const constructor = t1 - t0;
  if (clickAfterMs) {
    await new Promise((resolve) => setTimeout(resolve, clickAfterMs));
    t1 = performance.now();
  }
  const op = await client.begin(`fresh:${load}`, { url: "/api/orders", method: "POST", body: `{"fresh":"${load}"}` });
  const t2 = performance.now();
  const pending = await client.pending();
  const t3 = performance.now();
  // Answered, so the next load's history is the same but for one retired record.
  const result = await op.send();
  return { constructor, firstBegin: t2 - t1, pending: t3 - t2, listed: pending.length, durable: result.durable };
}

/** The floor of a first `begin` in a fresh page: the storage operations it cannot do without, by
 *  hand, on the same origin and databases, none of our code loaded. Read the intent's slot, open the
 *  claims database and commit one claim, write the record, and one Web Lock, overlapped where
 *  `begin` overlaps them. For "indexeddb" the slot read and the write go to the intents database. */
async function floor(storage, load) {
  const open = (name) => new Promise((resolve, reject) => {
    const request = indexedDB.open(name);
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
  const done = (tx) => new Promise((resolve, reject) => ((tx.oncomplete = resolve), (tx.onerror = () => reject(tx.error))));
  const slot = `idempotent-fetch:v1:growth-${storage}:floor:${load}`;
  const t0 = performance.now();
  // Everything that can overlap does (as in `begin`): the lock and the databases' opens.
  const lock = navigator.locks.request(`growth-floor:${load}`, { ifAvailable: true }, () => {});
  const claimsOpen = open("idempotent-fetch-claims");
  let intents;
  if (storage === "local") localStorage.getItem(slot);
  else {
    intents = await open("idempotent-fetch");
    const read = intents.transaction("intents", "readonly");
    read.objectStore("intents").get(slot);
    await done(read);
  }
  const claims = await claimsOpen;
  const claim = claims.transaction("claims", "readwrite", { durability: "relaxed" });
  claim.objectStore("claims").add("floor", `growth-floor\0${load}`);
  await done(claim);
  if (storage === "local") localStorage.setItem(slot, "floor");
  else {
    const write = intents.transaction("intents", "readwrite", { durability: "relaxed" });
    write.objectStore("intents").put("floor", slot);
    await done(write);
  }
  await lock;
  const total = performance.now() - t0;
  // Leave the history as it was.
  const drop = claims.transaction("claims", "readwrite");
  drop.objectStore("claims").delete(`growth-floor\0${load}`);
  await done(drop);
  if (storage === "local") localStorage.removeItem(slot);
  else {
    const drop2 = intents.transaction("intents", "readwrite");
    drop2.objectStore("intents").delete(slot);
    await done(drop2);
  }
  return { floor: total };
}

// ---- the server: the package, the pages, a 201 for every order, the reports -----------------------
const HEADERS = { "cache-control": "no-store" };
const TYPES = { ".js": "text/javascript", ".wasm": "application/wasm" };
const results = pages.map(() => undefined);
let finished;
const allDone = new Promise((resolve) => (finished = resolve));
const pageHtml = (i) => {
  const p = pages[i];
  const run =
    p.kind === "grow"
      ? `(${grow})(${JSON.stringify(p.storage)}, ${INTENTS}, ${EVERY})`
      : `(${p.kind === "floor" ? floor : fresh})(${JSON.stringify(p.storage)}, ${JSON.stringify(p.load)}, ${p.phase === "click" ? CLICK_AFTER_MS : 0})`;
  return `<!doctype html><meta charset="utf-8"><body><script type="module">
${stored}
${watchWasm}
const wasmBytes = ${wasmBytes};
watchWasm();
let figures;
try { figures = await ${run}; } catch (error) { figures = { error: String(error && error.stack || error) }; }
await fetch("/report/${i}", { method: "POST", body: JSON.stringify(figures) });
location.href = "/page/${i + 1}";
</script>`;
};
const readBody = (req) => new Promise((resolve) => {
  let body = "";
  req.on("data", (chunk) => (body += chunk));
  req.on("end", () => resolve(body));
});
const server = createServer(async (req, res) => {
  const url = new URL(req.url, "http://x");
  let m;
  if (url.pathname === "/api/orders") {
    await readBody(req);
    return res.writeHead(201, { "content-type": "application/json" }).end('{"ok":true}');
  }
  if ((m = url.pathname.match(/^\/page\/(\d+)$/))) {
    return res.writeHead(200, { ...HEADERS, "content-type": "text/html" }).end(+m[1] < pages.length ? pageHtml(+m[1]) : "done");
  }
  if (url.pathname === "/progress") {
    const row = JSON.parse(await readBody(req));
    process.stderr.write(`growth: ${row.done} intents, ${row.ms.toFixed(2)} ms/intent, ${row.items} items\n`);
    return res.writeHead(204).end();
  }
  if ((m = url.pathname.match(/^\/report\/(\d+)$/))) {
    results[+m[1]] = JSON.parse(await readBody(req));
    res.writeHead(204).end();
    if (+m[1] === pages.length - 1) finished();
    return;
  }
  const file = url.pathname.startsWith("/pkg/") && normalize(join(pkg, url.pathname.slice(5)));
  if (!file || !file.startsWith(pkg + "/") || !existsSync(file)) return res.writeHead(404).end();
  res.writeHead(200, { ...HEADERS, "content-type": TYPES[extname(file)] ?? "application/octet-stream" }).end(readFileSync(file));
});
// Keep-alive connections for the page's many requests.
server.keepAliveTimeout = 60_000;
await new Promise((listening) => server.listen(0, "127.0.0.1", listening));
const origin = `http://127.0.0.1:${server.address().port}`;

const profile = mkdtempSync(join(os.tmpdir(), "if-growth-"));
const started = Date.now();
try {
  // A debugging port nobody connects to keeps headless Chromium open on the page.
  const chromium = spawn(chromiumPath(), [...CHROMIUM_ARGS, `--user-data-dir=${profile}`, "--remote-debugging-port=0", `${origin}/page/0`], { stdio: "ignore" });
  const exited = new Promise((done) => chromium.once("exit", done));
  try {
    await allDone;
  } finally {
    chromium.kill();
    await exited;
  }
} finally {
  server.close();
  rmSync(profile, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
}

// ---- the figures -----------------------------------------------------------------------------------
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
};
console.log(
  `# Growth in headless Chromium, no debugger attached\n\n${INTENTS.toLocaleString("en")} named intents per storage in one page, then ${LOADS} fresh loads; ` +
    `${((Date.now() - started) / 1000).toFixed(0)} s; load average at the end ${os.loadavg().map((l) => l.toFixed(1)).join(", ")}.\n`,
);
for (const storage of STORAGES) {
  const at = pages.findIndex((p) => p.kind === "grow" && p.storage === storage);
  const rows = results[at];
  console.log(`## storage "${storage}"\n`);
  if (rows.error) {
    console.log(`the growth page failed: ${rows.error}\n`);
    continue;
  }
  console.log("| intents | ms per intent | not durable (total) | records | record chars | claims | JS heap MB | wasm memory MB | storage in use |");
  console.log("|---:|---:|---:|---:|---:|---:|---:|---:|---|");
  for (const r of rows) {
    console.log(`| ${r.done.toLocaleString("en")} | ${r.ms.toFixed(2)} | ${r.notDurable} | ${r.items} | ${r.chars.toLocaleString("en")} | ${r.claims} | ${(r.heap / 1e6).toFixed(1)} | ${(r.wasm / 1e6).toFixed(2)} | ${r.storageNow} |`);
  }
  const first = rows[0].ms;
  const last = rows.at(-1).ms;
  console.log(`\nlast ${EVERY.toLocaleString("en")} against the first: ${(((last - first) / first) * 100).toFixed(1)} %`);
  // Neighbouring rows of one run differ by up to a third on this kind of machine, so the one-row
  // figure above is also given over the first and last fifth of the rows (means).
  const fifth = Math.max(1, Math.floor(rows.length / 5));
  const mean = (rs) => rs.reduce((n, r) => n + r.ms, 0) / rs.length;
  const [head, tail] = [mean(rows.slice(0, fifth)), mean(rows.slice(-fifth))];
  const span = (fifth * EVERY).toLocaleString("en");
  console.log(`last ${span} against the first ${span} (means of their rows): ${(((tail - head) / head) * 100).toFixed(1)} %\n`);
  console.log("| fresh load (median / max of " + LOADS + ") | constructor ms | first begin ms | pending() ms | pending listed | durable |");
  console.log("|---|---:|---:|---:|---:|---|");
  const figures = {};
  for (const phase of ["empty", "history", "click"]) {
    const loads = results.filter((_, i) => pages[i].kind === "fresh" && pages[i].storage === storage && pages[i].phase === phase);
    const failed = loads.filter((l) => !l || l.error);
    if (failed.length) console.log(`| ${phase}: ${failed.length} loads failed: ${failed[0]?.error} | | | | | |`);
    const ok = loads.filter((l) => l && !l.error);
    const col = (k) => `${median(ok.map((l) => l[k])).toFixed(2)} / ${Math.max(...ok.map((l) => l[k])).toFixed(2)}`;
    figures[phase] = (k) => median(ok.map((l) => l[k]));
    const after = `after ${INTENTS.toLocaleString("en")} intents`;
    const label = phase === "empty" ? "empty history" : phase === "history" ? after : `${after}, begin ${CLICK_AFTER_MS} ms after the constructor (a click)`;
    console.log(`| ${label} | ${col("constructor")} | ${col("firstBegin")} | ${col("pending")} | ${ok[0]?.listed ?? "-"} | ${ok.every((l) => l.durable)} |`);
  }
  const ratio = (k) => (figures.history(k) / figures.empty(k)).toFixed(2);
  console.log(`| history / empty (medians) | ${ratio("constructor")} | ${ratio("firstBegin")} | ${ratio("pending")} | | |\n`);
  const floors = results.filter((l, i) => pages[i].kind === "floor" && pages[i].storage === storage && l && !l.error).map((l) => l.floor);
  if (floors.length) {
    const f = median(floors);
    console.log(`floor of a first begin by hand (fresh load, same history, none of our code; median / max of ${floors.length}): ` +
      `${f.toFixed(2)} / ${Math.max(...floors).toFixed(2)} ms; first begin with history / floor: ${(figures.history("firstBegin") / f).toFixed(2)}\n`);
  }
}
