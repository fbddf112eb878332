// The intent store's fallback (src/js/storage/store.ts) in Node, over a memory twin of Web Storage
// that can be told to fail like a real one: blocked at start, full at start, full later (the records
// are carried into memory, the reason is reported once), an unreadable value (a STORAGE failure,
// no fallback). The browser suites check the same against real localStorage; this pins the rules.
// The TypeScript is bundled on the fly with esbuild (tools/node_modules: cd tools && npm ci).
// Run: node --test tests/js/storage.test.mjs
import { test, afterEach } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";

import { root } from "../support/paths.mjs";

const esbuild = createRequire(path.join(root, "tools/package.json"))("esbuild");
const { outputFiles } = await esbuild.build({
  stdin: {
    contents: 'export { Store } from "./storage/store.ts"; export { StorageFailure } from "./storage/backend.ts";',
    resolveDir: path.join(root, "src/js"),
    loader: "ts",
  },
  bundle: true, format: "esm", write: false, logLevel: "warning",
});
const { Store, StorageFailure } = await import(`data:text/javascript;base64,${Buffer.from(outputFiles[0].text).toString("base64")}`);

/** A Web Storage twin: a Map, with switches to throw like a blocked or full browser storage. */
class StorageTwin {
  constructor() { this.map = new Map(); this.full = false; this.badRead = false; }
  get length() { return this.map.size; }
  key(i) { return [...this.map.keys()][i] ?? null; }
  getItem(k) { if (this.badRead) return { not: "text" }; return this.map.has(k) ? this.map.get(k) : null; }
  setItem(k, v) { if (this.full) throw new DOMException("The quota has been exceeded.", "QuotaExceededError"); this.map.set(k, String(v)); }
  removeItem(k) { this.map.delete(k); }
}

const saved = Object.getOwnPropertyDescriptor(globalThis, "localStorage");
function install(value) {
  Object.defineProperty(globalThis, "localStorage", { configurable: true, ...value });
}
afterEach(() => {
  if (saved) Object.defineProperty(globalThis, "localStorage", saved);
  else delete globalThis.localStorage;
});

test("localStorage works: records live under idempotent-fetch:v1:<namespace>:<id>", async () => {
  const twin = new StorageTwin();
  install({ value: twin });
  const store = new Store("local", "acct");
  assert.equal(store.kind, "local");
  assert.equal(store.fallbackReason, null);
  await store.put("pay", "{}");
  assert.deepEqual([...twin.map], [["idempotent-fetch:v1:acct:pay", "{}"]]);
  assert.deepEqual(await store.all(), [["pay", "{}"]]);
  assert.equal(await store.get("pay"), "{}");
  await store.delete("pay");
  assert.equal(twin.map.size, 0);
});

test("blocked at start (the getter throws SecurityError): memory, with the reason", async () => {
  install({ get() { throw new DOMException("The operation is insecure.", "SecurityError"); } });
  const store = new Store("local", "acct");
  assert.equal(store.kind, "memory");
  assert.match(store.fallbackReason, /^SecurityError: localStorage is blocked/);
  await store.put("pay", "{}");
  assert.equal(await store.get("pay"), "{}");
});

test("full at start (the probe write fails): memory, with the reason", () => {
  const twin = new StorageTwin();
  twin.full = true;
  install({ value: twin });
  const store = new Store("local", "acct");
  assert.equal(store.kind, "memory");
  assert.match(store.fallbackReason, /^QuotaExceededError: localStorage cannot be written/);
});

test("full later: the write lands in memory with every readable record carried over; reported once", async () => {
  const twin = new StorageTwin();
  install({ value: twin });
  const store = new Store("local", "acct");
  const reasons = [];
  store.onFallback = (reason) => reasons.push(reason);
  await store.put("a", "A");
  twin.full = true;
  await store.put("b", "B");
  await store.put("c", "C");
  assert.equal(store.kind, "memory");
  assert.equal(reasons.length, 1);
  assert.match(reasons[0], /^QuotaExceededError: writing to storage failed/);
  assert.deepEqual((await store.all()).sort(), [["a", "A"], ["b", "B"], ["c", "C"]]);
});

test("a value that is not text is a STORAGE failure, not a fallback", async () => {
  const twin = new StorageTwin();
  install({ value: twin });
  const store = new Store("local", "acct");
  await store.put("pay", "{}");
  twin.badRead = true;
  await assert.rejects(store.get("pay"), (e) => e instanceof StorageFailure && !e.unusable);
  assert.equal(store.kind, "local");
});

test("absent (Node): memory with the reason; asked for memory: no reason", () => {
  delete globalThis.localStorage;
  assert.match(new Store("session", "acct").fallbackReason, /sessionStorage is not available here/);
  assert.equal(new Store("memory", "acct").fallbackReason, null);
  assert.match(new Store("indexeddb", "acct").fallbackReason, /indexedDB is not available here/);
});
