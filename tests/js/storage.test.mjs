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
import { DEFINES } from "../../package/build.mjs";

const esbuild = createRequire(path.join(root, "tools/package.json"))("esbuild");
const { outputFiles } = await esbuild.build({
  define: DEFINES.development, // src/js/mode.ts
  stdin: {
    contents:
      'export { Store } from "./storage/store.ts"; export { StorageFailure } from "./storage/backend.ts"; export { RetiredRecords } from "./storage/retired.ts";',
    resolveDir: path.join(root, "src/js"),
    loader: "ts",
  },
  bundle: true, format: "esm", write: false, logLevel: "warning",
});
const { Store, StorageFailure, RetiredRecords } = await import(`data:text/javascript;base64,${Buffer.from(outputFiles[0].text).toString("base64")}`);

/** A Web Storage twin: a Map, with switches to throw like a blocked or full browser storage. */
class StorageTwin {
  constructor() { this.map = new Map(); this.full = false; this.badRead = false; }
  get length() { return this.map.size; }
  key(i) { return [...this.map.keys()][i] ?? null; }
  getItem(k) { if (this.badRead) return { not: "text" }; return this.map.has(k) ? this.map.get(k) : null; }
  /** With `quota`: refuses a write that would take the keys and values past that many characters. */
  used() { let n = 0; for (const [k, v] of this.map) n += k.length + v.length; return n; }
  setItem(k, v) {
    const grows = k.length + String(v).length - (this.map.has(k) ? k.length + this.map.get(k).length : 0);
    if (this.quota !== undefined && this.used() + grows > this.quota) throw new DOMException("The quota has been exceeded.", "QuotaExceededError");
    if (this.full) throw new DOMException("The quota has been exceeded.", "QuotaExceededError"); this.map.set(k, String(v)); }
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

/** A record text as the client writes it (only what eviction reads), and its stamp. */
const record = (key, state, at) => JSON.stringify({ v: 2, id: key, key, state, updatedAt: at, pad: "p".repeat(60) });
const stamp = (text) => {
  const { state, key, updatedAt } = JSON.parse(text);
  return state === "succeeded" || state === "failed" ? { key, at: updatedAt } : undefined;
};

test("a refused write deletes the oldest half of this namespace's retired records, then lands; never a pending one, never another's data", async () => {
  const twin = new StorageTwin();
  install({ value: twin });
  twin.setItem("app:cart", "c".repeat(200)); // the page's own data
  twin.setItem("idempotent-fetch:v1:other:r0", record("r0", "succeeded", 0)); // another namespace's
  const store = new Store("local", "acct");
  const retired = new RetiredRecords(store, "acct", 1000, stamp, false);
  const warnings = [];
  const warn = console.warn;
  console.warn = (...args) => warnings.push(args.join(" "));
  try {
    const reasons = [];
    store.onFallback = (reason) => reasons.push(reason);
    // Stored before this page (the scan finds them), oldest first by their write time.
    await store.put("p0", record("p0", "pending", 0));
    for (const n of [4, 2, 3, 1]) await store.put(`r${n}`, record(`r${n}`, n === 2 ? "failed" : "succeeded", n));
    twin.quota = twin.used() + 10; // full: the next record does not fit
    await store.put("p1", record("p1", "pending", 9));
    assert.equal(store.kind, "local", "no fallback");
    assert.deepEqual(reasons, []);
    const left = (await store.all()).map(([id]) => id).sort();
    assert.deepEqual(left, ["p0", "p1", "r3", "r4"], "the two oldest retired (r1, r2) made room");
    assert.ok(twin.getItem("idempotent-fetch:v1:other:r0") && twin.getItem("app:cart"), "nothing else touched");
    // This page's retirements are the newest: they go last.
    retired.written("r9", "r9");
    await store.put("r9", record("r9", "succeeded", 0)); // an old write time, written now
    twin.quota = twin.used() + 10;
    await store.put("p2", record("p2", "pending", 10));
    assert.deepEqual((await store.all()).map(([id]) => id).sort(), ["p0", "p1", "p2", "r9"], "r3 and r4 went, r9 stayed");
    assert.deepEqual(warnings, [], "quiet while it works");
    // Only pending records left to the cap: the write falls back to memory, loudly, once.
    twin.quota = twin.used();
    await store.put("p3", record("p3", "pending", 11));
    await store.put("p4", record("p4", "pending", 12));
    await retired.settled();
    assert.equal(store.kind, "memory");
    await new Promise((resolve) => setTimeout(resolve, 0));
    assert.equal(reasons.length, 1);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0], /namespace "acct".*QuotaExceededError/);
    assert.deepEqual((await store.all()).map(([id]) => id).sort(), ["p0", "p1", "p2", "p3", "p4"], "every pending record kept (r9 evicted first)");
  } finally {
    console.warn = warn;
  }
});

test("past the cap the oldest retired go, in the order they were written", async () => {
  const twin = new StorageTwin();
  install({ value: twin });
  const store = new Store("local", "acct");
  const retired = new RetiredRecords(store, "acct", 2, stamp, false);
  await store.put("p", record("p", "pending", 0));
  for (const id of ["a", "b", "c", "d"]) {
    await store.put(id, record(id, "succeeded", 0));
    retired.written(id, id);
  }
  // Written retired, then begun again (pending): not evicted, and no longer counted.
  retired.written("c", undefined);
  await store.put("c", record("c", "pending", 0));
  await retired.settled();
  assert.deepEqual((await store.all()).map(([id]) => id).sort(), ["b", "c", "d", "p"]);
  // A record whose stored text changed key (begun anew in another tab) is kept by deleteIf.
  await store.put("d", record("d2", "succeeded", 0));
  for (const id of ["e", "f"]) {
    await store.put(id, record(id, "succeeded", 0));
    retired.written(id, id);
  }
  await retired.settled();
  assert.deepEqual((await store.all()).map(([id]) => id).sort(), ["c", "d", "e", "f", "p"]);
});

test("two shelves: retired records under RETIRED + id, a pending listing reads no retired text, a shelf change leaves one slot", async () => {
  const twin = new StorageTwin();
  let reads = 0;
  const getItem = twin.getItem.bind(twin);
  twin.getItem = (k) => ((reads += 1), getItem(k));
  install({ value: twin });
  const store = new Store("local", "acct");
  await store.put("p", record("p", "pending", 0), false);
  for (let i = 0; i < 500; i++) await store.put(`r${i}`, record(`r${i}`, "succeeded", i), true);
  assert.ok(twin.map.has("idempotent-fetch:v1:acct:\u0002r0") && !twin.map.has("idempotent-fetch:v1:acct:r0"));
  reads = 0;
  assert.deepEqual((await store.all()).map(([id]) => id), ["p"]);
  assert.equal(reads, 1, "one text read: the pending record's");
  assert.equal((await store.all("retired")).length, 500);
  assert.equal((await store.all("retired"))[7][0], "r7", "listed by intent id");
  // Retired, then begun again (pending), then retired again: one slot each time, the latest text.
  await store.put("p", record("p", "succeeded", 1), true);
  assert.deepEqual([twin.map.has("idempotent-fetch:v1:acct:p"), JSON.parse(await store.get("p")).state], [false, "succeeded"]);
  await store.put("p", record("p", "pending", 2), false);
  assert.deepEqual([twin.map.has("idempotent-fetch:v1:acct:\u0002p"), JSON.parse(await store.get("p")).state], [false, "pending"]);
  // A move cut short (both slots): the pending one is read.
  twin.setItem("idempotent-fetch:v1:acct:\u0002p", record("p", "succeeded", 1));
  assert.equal(JSON.parse(await store.get("p")).state, "pending");
  await store.delete("p");
  assert.equal(await store.get("p"), undefined, "delete empties both slots");
  // Eviction finds a retired record on either shelf; never a pending one.
  twin.setItem("idempotent-fetch:v1:acct:old", record("old", "failed", 0));
  const still = (key) => (text) => stamp(text)?.key === key;
  assert.equal(await store.deleteIf("old", still("old")), true, "an earlier version's slot");
  assert.equal(await store.deleteIf("r1", still("r1")), true, "the retired shelf");
  await store.put("q", record("q", "pending", 0), false);
  assert.equal(await store.deleteIf("q", still("q")), false, "a pending record is never evicted");
  twin.setItem("idempotent-fetch:v1:acct:\u0001secret", "s");
  assert.equal(await store.clear(), 500, "clear: both shelves (the secret too, not counted)");
  assert.deepEqual([...twin.map.keys()], []);
});

test("migration: a retired record on the pending shelf moves only if its slot still holds that text", async () => {
  const twin = new StorageTwin();
  install({ value: twin });
  const store = new Store("local", "acct");
  const done = record("a", "succeeded", 1);
  twin.setItem("idempotent-fetch:v1:acct:a", done);
  twin.setItem("idempotent-fetch:v1:acct:b", record("b", "succeeded", 2));
  assert.equal(await store.shelve("a", done), true);
  assert.deepEqual([...twin.map.keys()].sort(), ["idempotent-fetch:v1:acct:\u0002a", "idempotent-fetch:v1:acct:b"]);
  assert.equal(await store.get("a"), done, "read from its new slot, text unchanged");
  // Begun again (by another tab) between the listing and the move: the pending record stays.
  const listed = twin.getItem("idempotent-fetch:v1:acct:b");
  const pendingText = record("b", "pending", 3);
  twin.setItem("idempotent-fetch:v1:acct:b", pendingText);
  assert.equal(await store.shelve("b", listed), false);
  assert.equal(twin.getItem("idempotent-fetch:v1:acct:b"), pendingText);
  assert.deepEqual((await store.all()).map(([id]) => id), ["b"]);
  // A storage full when the move needs room: nothing moves, nothing is lost.
  twin.setItem("idempotent-fetch:v1:acct:c", record("c", "failed", 4));
  twin.quota = twin.used();
  assert.equal(await store.shelve("c", twin.getItem("idempotent-fetch:v1:acct:c")).catch(() => false), false);
  assert.ok(twin.getItem("idempotent-fetch:v1:acct:c"));
});
