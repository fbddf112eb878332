// Claims (begin's create-or-resume as one IndexedDB transaction), retired records past their cap, the
// layout migration, a nearly full localStorage.
// Cases of the JavaScript API (the runners and `ctx`: ../cases.mjs).

import { PREFIX, RETIRED, SECRET_SLOT, assert, override, adder } from "./support.mjs";

export const cases = [];
const add = adder(cases);

// --- claims: begin's create-or-resume is one IndexedDB transaction ------------------------------

/** Runs `run(store)` in one read-write transaction on the claims store (src/js/storage/claims.ts) and
 *  resolves with its request's result. Opens at the database's current version (the library moves
 *  it up when it repairs a missing store) with the library's schema, so it never creates the
 *  database without its store. */
const claimsStore = (run) => idbStore("idempotent-fetch-claims", "claims", run);
/** The same over the intents store of `storage: "indexeddb"`. */
const intentsStore = (run) => idbStore("idempotent-fetch", "intents", run);
async function idbStore(name, storeName, run) {
  const db = await new Promise((resolve, reject) => {
    const request = indexedDB.open(name);
    request.onupgradeneeded = () => request.result.createObjectStore(storeName);
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
  try {
    return await new Promise((resolve, reject) => {
      const transaction = db.transaction(storeName, "readwrite");
      const request = run(transaction.objectStore(storeName));
      transaction.oncomplete = () => resolve(request?.result);
      transaction.onabort = () => reject(transaction.error);
    });
  } finally {
    db.close();
  }
}
const claimOf = (ns, id) => claimsStore((store) => store.get(`${ns}\0${id}`));

/** Settles an IndexedDB open or delete request. */
const idbDone = (request) =>
  new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });

add("claims: a new namespace's fingerprint secret is the one another tab decided first, and clear() removes it", async (ctx) => {
  const { assert } = ctx;
  // Another tab made the namespace's secret (its claim committed); its localStorage write has not
  // reached this tab yet.
  const secret = "ab".repeat(32);
  await claimsStore((store) => store.put(secret, `${ctx.ns}\x01secret`));
  const client = ctx.client();
  await client.begin("pay", { url: ctx.url("secret", "201"), body: "x" });
  assert.equal(localStorage.getItem(`${PREFIX}${ctx.ns}${SECRET_SLOT}`), secret, "this tab fingerprints with the same secret");
  await client.clear();
  assert.equal(await claimsStore((store) => store.get(`${ctx.ns}\x01secret`)), undefined, "logout removes it");
  assert.equal(localStorage.getItem(`${PREFIX}${ctx.ns}${SECRET_SLOT}`), null);
}, { browserOnly: true });

add("claims: after a fallback to memory, a reload's pending() lists the intent begun but never sent, with its key", async (ctx) => {
  const { assert } = ctx;
  const request = { url: ctx.url("fallback-pending", "201"), body: "x" };
  // Storage works at first (the namespace's fingerprint secret is stored), then fills up.
  const client = ctx.client();
  await client.begin("warm", { url: ctx.url("fallback-warm", "201"), body: "x" });
  const restore = override(Storage.prototype, "setItem", {
    writable: true,
    value() { throw new DOMException("The quota has been exceeded.", "QuotaExceededError"); },
  });
  let op;
  try {
    op = await client.begin("pay", request);
    assert.equal(client.storage, "memory", "the record lives in memory only");
  } finally {
    restore();
  }
  // A reload: a new client, this page's memory gone; only the claim knows the key.
  const reloaded = ctx.client();
  const listed = await reloaded.pending();
  assert.deepEqual(listed.filter((e) => e.intentId === "pay").map((e) => [e.key, e.state]), [[op.key, "pending"]]);
  // pending() found it by the lost mark the fallen-back write left, not by reading every claim.
  assert.equal(await claimsStore((store) => store.get(`${ctx.ns}\x02pay`)), "1", "marked lost");
  assert.equal(await claimsStore((store) => store.get(`${ctx.ns}\x02warm`)), undefined, "a durable record is not marked");
  const resumed = await reloaded.begin("pay", request);
  assert.equal(resumed.key, op.key, "begin resumes the key pending() listed");
  assert.equal((await resumed.send()).status, 201);
  assert.deepEqual((await ctx.log("fallback-pending")).map((e) => e.key), [op.key]);
  assert.deepEqual((await reloaded.pending()).map((e) => e.intentId), ["warm"], "stored again (retired): no longer listed from its claim");
  assert.equal(await reloaded.discard("pay"), true);
  assert.equal(await claimsStore((store) => store.get(`${ctx.ns}\x02pay`)), undefined, "discard removed the mark with the claim");
}, { browserOnly: true });

add("claims: a claims database without its store is repaired once, and claims work again", async (ctx) => {
  const { assert } = ctx;
  const request = { url: ctx.url("repair", "201"), body: "x" };
  // The database exists without the store (deleted by a tool, or made by something else). Deleting
  // it closes the library's connection (versionchange); the next begin opens it again.
  await idbDone(indexedDB.deleteDatabase("idempotent-fetch-claims"));
  const bare = await idbDone(indexedDB.open("idempotent-fetch-claims", 1));
  assert.equal(bare.objectStoreNames.contains("claims"), false);
  bare.close();
  const client = ctx.client();
  const first = await client.begin("first", request); // may take the lock path: its connection is the deleted one
  const op = await client.begin("pay", request);
  assert.equal(JSON.parse(await claimOf(ctx.ns, "pay")).key, op.key, "the repaired store holds the new claim");
  const versions = [];
  for (let i = 0; i < 3; i++) {
    await client.begin(`more-${i}`, request);
    const db = await idbDone(indexedDB.open("idempotent-fetch-claims"));
    versions.push(db.version);
    db.close();
  }
  assert.equal(new Set(versions).size, 1, `repaired once, not reopened on every begin (versions ${versions})`);
  assert.equal((await client.begin("pay", request)).key, op.key);
  assert.ok(first.key);
}, { browserOnly: true });

add("claims: begin claims a new key; a claim without this tab's storage record resumes its key; replace re-claims", async (ctx) => {
  const { assert } = ctx;
  const slot = `${PREFIX}${ctx.ns}:pay`;
  const request = () => ({ url: ctx.url("claim", "201"), body: "x" });
  const client = ctx.client({ persistRequest: true });
  const op = await client.begin("pay", request());
  const claimed = JSON.parse(await claimOf(ctx.ns, "pay"));
  assert.equal(claimed.key, op.key, "begin claimed its key");
  assert.equal(claimed.request, undefined, "a claim never holds the persisted request");
  const record = localStorage.getItem(slot);
  // Another tab's storage write has not reached this tab yet: the claim decides.
  localStorage.removeItem(slot);
  const again = await ctx.client({ persistRequest: true }).begin("pay", request());
  assert.equal(again.key, op.key, "resumed from the claim, not a new key");
  assert.equal(JSON.parse(localStorage.getItem(slot)).key, op.key, "and written to this tab's storage");
  assert.ok(JSON.parse(localStorage.getItem(slot)).request, "with the request just checked against its fingerprint");
  // A new key (replace) is claimed in the same transaction; a stale record of the old key loses.
  const replaced = await client.begin("pay", request(), { replace: true });
  assert.notEqual(replaced.key, op.key);
  assert.equal(JSON.parse(await claimOf(ctx.ns, "pay")).key, replaced.key, "replace claimed the new key");
  localStorage.setItem(slot, record);
  assert.equal((await ctx.client().begin("pay", request())).key, replaced.key, "the claim beats a stale record of another key");
  assert.equal((await (await client.begin("pay", request())).send()).status, 201);
  // Resuming the stored record (same key as the claim) keeps the claim as it was.
  assert.equal(JSON.parse(await claimOf(ctx.ns, "pay")).attempts, 0, "the claim is the record as begin wrote it");
  // Records from before claims (no claim): the storage record decides, and it is not re-claimed.
  await claimsStore((store) => store.delete(`${ctx.ns}\0pay`));
  const old = await ctx.client().begin("pay", request());
  assert.equal(old.key, replaced.key, "a record without a claim resumes");
  assert.equal(old.state, "succeeded");
  assert.equal(await claimOf(ctx.ns, "pay"), undefined);
  // An anonymous fetch claims nothing (its random id is never begun twice).
  await ctx.client().fetch(ctx.url("claim-anon", "201"), { method: "POST", body: "x" });
  const all = await claimsStore((store) => store.getAllKeys(IDBKeyRange.bound(`${ctx.ns}\0`, `${ctx.ns}\x01`)));
  assert.deepEqual(all, [], "no claim left but for named intents");
}, { browserOnly: true });

add("claims: discard, clear and the sweep remove claims (a discarded intent is never resumed)", async (ctx) => {
  const { assert } = ctx;
  const request = (n) => ({ url: ctx.url(`claimdrop${n}`, "201"), body: "x" });
  const client = ctx.client();
  const op = await client.begin("pay", request(0));
  assert.equal(await client.discard("pay"), true);
  assert.equal(await claimOf(ctx.ns, "pay"), undefined, "discard removed the claim");
  assert.notEqual((await client.begin("pay", request(0))).key, op.key, "a new key after discard");
  // clear(): every claim of the namespace, not another namespace's.
  const other = ctx.newNamespace();
  await new ctx.lib.IdempotentClient({ namespace: other, storage: "local" }).begin("pay", request(1));
  await client.begin("b", request(2));
  assert.equal(await client.clear(), 2);
  const left = await claimsStore((store) => store.getAllKeys(IDBKeyRange.bound(`${ctx.ns}\0`, `${ctx.ns}\x01`)));
  assert.deepEqual(left, [], "clear removed the namespace's claims");
  assert.ok(await claimOf(other, "pay"), "and kept another namespace's");
  // The sweep: a retired intent past keyTtlMs goes with its claim...
  const short = ctx.client({ keyTtlMs: 1 }); // sweeps only (its own sends would be EXPIRED)
  await short.sweep();
  await (await client.begin("old", request(3))).send();
  await ctx.sleep(5);
  assert.equal((await short.sweep()).removed, 1);
  assert.equal(await claimOf(ctx.ns, "old"), undefined, "the sweep removed the claim");
  // ...but not when another tab claimed a new key meanwhile (this tab's record is stale): both stay.
  await (await client.begin("old", request(4))).send();
  const fresh = JSON.stringify({ ...JSON.parse(await claimOf(ctx.ns, "old")), key: crypto.randomUUID() });
  await claimsStore((store) => store.put(fresh, `${ctx.ns}\0old`));
  await ctx.sleep(5);
  assert.equal((await short.sweep()).removed, 0, "a stale record of a re-claimed intent is not removed");
  assert.equal(await claimOf(ctx.ns, "old"), fresh);
  assert.ok(localStorage.getItem(`${PREFIX}${ctx.ns}:${RETIRED}old`));
}, { browserOnly: true });

/** A client of namespace `ns` in `storage` with fast retries. */
const clientIn = (ctx, ns, storage, options = {}) =>
  new ctx.lib.IdempotentClient({ namespace: ns, storage, retry: { baseDelayMs: 1, maxDelayMs: 5 }, ...options });

/** The state of each of `ids` in `client` (null: not stored). */
const statesOf = (client, ids) => Promise.all(ids.map(async (id) => (await client.intent(id))?.state ?? null));

add("retired records: past maxRetiredRecords the oldest are deleted with their claims; a pending intent never", async (ctx) => {
  const { assert } = ctx;
  for (const storage of ctx.browser ? ["local", "indexeddb"] : [ctx.storage]) {
    const ns = ctx.newNamespace();
    const client = clientIn(ctx, ns, storage, { maxRetiredRecords: 3 });
    // The oldest intent of all, and pending: never evicted however many retire after it.
    const waiting = await client.begin("waiting", { url: ctx.url(`ev-${storage}-w`, "201"), body: "w" });
    const ids = ["done1", "done2", "done3", "done4", "done5"];
    for (const id of ids) {
      const result = await (await client.begin(id, { url: ctx.url(`ev-${storage}-${id}`, id === "done2" ? "400" : "201"), body: id })).send();
      assert.equal(result.durable, storage !== "memory", `${storage}: ${id} durable`);
    }
    await ctx.waitFor(async () => (await client.intent("done2")) === null, `${storage}: the two oldest retired records deleted`);
    assert.deepEqual(await statesOf(client, ["waiting", ...ids]), ["pending", null, null, "succeeded", "succeeded", "succeeded"], storage);
    if (ctx.browser) {
      assert.equal(await claimOf(ns, "done1"), undefined, `${storage}: the claim went with its record`);
      assert.equal(await claimOf(ns, "done2"), undefined, `${storage}: a failed (400) record counts too`);
      assert.ok(await claimOf(ns, "done3"), `${storage}: a kept record keeps its claim`);
      assert.ok(await claimOf(ns, "waiting"), `${storage}: the pending intent keeps its claim`);
    }
    // Retired now, it is the newest: the oldest kept one (done3) goes.
    assert.equal((await waiting.send()).status, 201);
    await ctx.waitFor(async () => (await client.intent("done3")) === null, `${storage}: done3 deleted`);
    assert.deepEqual(await statesOf(client, ["waiting", "done4", "done5"]), ["succeeded", "succeeded", "succeeded"], storage);
    // A second click of a kept one still replays its key; an evicted one begins anew.
    assert.equal((await client.begin("done5", { url: ctx.url(`ev-${storage}-done5`, "201"), body: "done5" })).state, "succeeded");
    await client.clear();
  }
  assert.throws(() => ctx.client({ maxRetiredRecords: -1 }), "INVALID_OPTIONS", "a negative cap");
  assert.throws(() => ctx.client({ maxRetiredRecords: 1.5 }), "INVALID_OPTIONS", "a fractional cap");
});

/** The slot ids of namespace `ns` in `storage` ("local" or "indexeddb"), sorted: an intent id, or
 *  RETIRED + an intent id for a retired record (the fingerprint secret left out). */
async function slotIds(ns, storage) {
  const keys = storage === "local"
    ? Array.from({ length: localStorage.length }, (_, i) => localStorage.key(i)).filter((k) => k.startsWith(`${PREFIX}${ns}:`)).map((k) => k.slice(`${PREFIX}${ns}:`.length))
    : (await intentsStore((store) => store.getAllKeys(IDBKeyRange.bound(`${ns}:`, `${ns};`, false, true)))).map((k) => k.slice(ns.length + 1));
  return keys.filter((id) => id[0] !== "\u0001").sort();
}

/** Moves slot `from` of namespace `ns` to slot `to`, text unchanged (what another layout left). */
async function moveSlot(ns, storage, from, to) {
  if (storage === "local") {
    localStorage.setItem(`${PREFIX}${ns}:${to}`, localStorage.getItem(`${PREFIX}${ns}:${from}`));
    localStorage.removeItem(`${PREFIX}${ns}:${from}`);
  } else {
    const text = await intentsStore((store) => store.get(`${ns}:${from}`));
    await intentsStore((store) => (store.put(text, `${ns}:${to}`), store.delete(`${ns}:${from}`)));
  }
}

add("migration from one shelf (an earlier version's layout): read as it is, moved by the background sweep, trimmed to the cap; every pending key kept", async (ctx) => {
  const { assert } = ctx;
  for (const storage of ["local", "indexeddb"]) {
    const ns = ctx.newNamespace();
    const earlier = clientIn(ctx, ns, storage, { maxRetiredRecords: 100 });
    const pendingOp = await earlier.begin("pending-old", { url: ctx.url(`mig-${storage}-p`, "201"), body: "p" });
    const old = ["old1", "old2", "old3", "old4", "old5", "old6"];
    for (const id of old) {
      await (await earlier.begin(id, { url: ctx.url(`mig-${storage}-${id}`, "201"), body: id })).send();
      await ctx.sleep(2); // distinct write times: the order is the records' own
    }
    assert.deepEqual(await slotIds(ns, storage), [...old.map((id) => RETIRED + id), "pending-old"].sort(), `${storage}: retired on their shelf`);
    // What the earlier version left: every record under its intent id (same record texts).
    for (const id of old) await moveSlot(ns, storage, RETIRED + id, id);
    assert.deepEqual(await slotIds(ns, storage), [...old, "pending-old"].sort(), `${storage}: the earlier layout`);
    const page = clientIn(ctx, ns, storage, { maxRetiredRecords: 2 });
    assert.deepEqual((await page.pending()).map((p) => [p.intentId, p.key]), [["pending-old", pendingOp.key]], `${storage}: retired ones not listed`);
    assert.deepEqual(await statesOf(page, old), old.map(() => "succeeded"), `${storage}: read where they are; nothing deleted before the first begin`);
    // Begun again before the sweep moves it: pending now, it stays on the pending shelf with its new key.
    const again = await page.begin("old6", { url: ctx.url(`mig-${storage}-old6`, "201"), body: "changed" }, { replace: true });
    await (await page.begin("new", { url: ctx.url(`mig-${storage}-new`, "201"), body: "n" })).send();
    await ctx.waitFor(async () => (await slotIds(ns, storage)).includes(RETIRED + "old5"), `${storage}: the background sweep moved old5`);
    await ctx.waitFor(async () => (await page.intent("old4")) === null, `${storage}: the background sweep trimmed the old records`);
    assert.deepEqual(await slotIds(ns, storage), [`${RETIRED}new`, `${RETIRED}old5`, "old6", "pending-old"].sort(), `${storage}: the new layout`);
    assert.deepEqual(await statesOf(page, [...old, "new"]), [null, null, null, null, "succeeded", "pending", "succeeded"], storage);
    assert.equal((await page.intent("old6")).key, again.key, `${storage}: the re-begun key is kept`);
    assert.equal((await page.begin("pending-old", { url: ctx.url(`mig-${storage}-p`, "201"), body: "p" })).key, pendingOp.key, `${storage}: the pending key resumes`);
    assert.deepEqual((await page.pending()).map((p) => p.intentId).sort(), ["old6", "pending-old"], storage);
    for (const id of ["old1", "old4"]) assert.equal(await claimOf(ns, id), undefined, `${storage}: ${id}'s claim pruned`);
    await page.clear();
    assert.deepEqual(await slotIds(ns, storage), [], `${storage}: clear() empties both shelves`);
  }
}, { browserOnly: true });

add("an app that filled localStorage to within 100 KB of its quota still gets durable intents", async (ctx) => {
  const { assert } = ctx;
  const FILLER = "app-data:";
  const fillers = [];
  const put = (key, value) => {
    localStorage.setItem(key, value);
    fillers.push(key);
  };
  try {
    // The page's own data (a cart, a cache): 100 KB (51,200 UTF-16 code units) set aside, the rest
    // filled to the last 16 characters, then the 100 KB freed.
    put(`${FILLER}gap`, "g".repeat(51_200));
    for (const size of [1 << 20, 1 << 16, 1 << 12, 1 << 8, 16]) {
      const chunk = "x".repeat(size);
      for (;;) {
        try {
          put(`${FILLER}${fillers.length}`, chunk);
        } catch {
          break;
        }
      }
    }
    localStorage.removeItem(`${FILLER}gap`);
    const client = ctx.client();
    const fallbacks = [];
    client.addEventListener("storagefallback", (e) => fallbacks.push(e.reason));
    // About 150 records fit in 100 KB: 300 intents need the oldest retired ones deleted twice.
    const N = 300;
    for (let i = 0; i < N; i++) {
      const op = await client.begin(`order:${i}`, { url: ctx.url("quota", "201"), body: String(i) });
      assert.equal(op.durable, true, `intent ${i} durable at begin`);
      const result = await op.send();
      assert.equal(result.durable, true, `intent ${i} durable`);
      // Durable means in localStorage now, not only said so.
      assert.ok(localStorage.getItem(`${PREFIX}${ctx.ns}:${RETIRED}order:${i}`), `intent ${i}'s record is in localStorage`);
    }
    assert.deepEqual(fallbacks, [], "no fallback");
    assert.equal(client.storage, "local");
    assert.equal((await client.intent(`order:${N - 1}`)).state, "succeeded", "the newest is stored");
    assert.ok(ctx.slots().length < N, `older retired records were deleted (${ctx.slots().length} left)`);
    for (const key of fillers.slice(1, 4)) assert.ok(localStorage.getItem(key), "the page's own data is untouched");
    await client.clear();
  } finally {
    for (const key of fillers) localStorage.removeItem(key);
  }
}, { browserOnly: true, freshPage: true });

add("claims: a corrupt or altered claim is a STORAGE error, left alone; discard clears it", async (ctx) => {
  const { assert } = ctx;
  const request = { url: ctx.url("claimbad", "201"), body: "x" };
  const op = await ctx.client().begin("pay", request);
  const good = JSON.parse(await claimOf(ctx.ns, "pay"));
  localStorage.removeItem(`${PREFIX}${ctx.ns}:pay`);
  for (const bad of ["{not json", 42, { key: op.key }, JSON.stringify({ ...good, key: "x\r\nevil: 1" }), JSON.stringify({ ...good, extra: 1 })]) {
    await claimsStore((store) => store.put(bad, `${ctx.ns}\0pay`));
    const error = await assert.rejects(ctx.client().begin("pay", request), "STORAGE", JSON.stringify(bad));
    assert.match(error.message, /pay/, "the message names the intent");
    assert.deepEqual(await claimOf(ctx.ns, "pay"), bad, "the claim is left alone");
  }
  assert.equal((await ctx.log("claimbad")).length, 0, "nothing sent");
  const client = ctx.client();
  await client.discard("pay");
  assert.equal(await claimOf(ctx.ns, "pay"), undefined);
  assert.equal((await (await client.begin("pay", request)).send()).status, 201, "and a fresh begin works");
}, { browserOnly: true });

add("claims: the database going away mid-life (deleted) sends begin down the lock path, then claims again", async (ctx) => {
  const { assert } = ctx;
  const request = { url: ctx.url("claimgone", "201"), body: "x" };
  const client = ctx.client();
  const op = await client.begin("pay", request);
  // Deleting the database closes the library's connection (versionchange): its next transaction fails.
  await new Promise((resolve, reject) => {
    const deleting = indexedDB.deleteDatabase("idempotent-fetch-claims");
    deleting.onsuccess = resolve;
    deleting.onerror = () => reject(deleting.error);
  });
  const again = await client.begin("pay", request);
  assert.equal(again.key, op.key, "the lock path resumed the stored record");
  const other = await client.begin("other", request);
  assert.equal(JSON.parse(await claimOf(ctx.ns, "other")).key, other.key, "the next begin opened the database again and claimed");
  assert.equal((await again.send()).status, 201);
}, { browserOnly: true });

