// The intent store (`idempotent-fetch-client/watch`, what the React, Vue and Svelte bindings are made of)
// against the REAL reference server, in Node through the built package. A "reload" is a second
// client (and a second store) over the same storage: an AsyncStorage whose records outlive the
// first client, as localStorage outlives a page. Checked: the phases and the live countdown, the
// abort when the last subscriber leaves and the resume by the next one (same key, one order), and
// each `onMismatch` policy for a reload that rebuilt a different cart: "error" sends nothing,
// "replace" settles the old key first (the order it holds is the intent's answer; a request with it
// still running is waited for; a key it never saw is fenced, so its late request is refused, and
// replaced), "resume" sends the stored request.
// Run: node --test tests/js/watch.test.mjs (the xtask's layer f runs it).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { importPackage, pkgDir, root } from "../support/paths.mjs";
import { startReferenceServer } from "../support/reference-server.mjs";

const { IdempotentClient } = await importPackage();
const { watchIntent } = await import(pathToFileURL(path.join(pkgDir, "watch.js")).href);
const { idempotentAction } = await import(pathToFileURL(path.join(pkgDir, "svelte.js")).href);

let server;
let counter = 0;

before(async () => {
  server = await startReferenceServer({ www: path.join(root, "www"), label: "watch" });
});
after(async () => {
  await server?.stop();
});

/** Storage that outlives a client, as a page's localStorage outlives the page. */
function durableStorage() {
  const records = new Map();
  return {
    get: async (namespace, id) => records.get(`${namespace}\n${id}`),
    put: async (namespace, id, value) => void records.set(`${namespace}\n${id}`, value),
    delete: async (namespace, id) => void records.delete(`${namespace}\n${id}`),
    all: async (namespace) => [...records].filter(([key]) => key.startsWith(`${namespace}\n`)).map(([key, value]) => [key.slice(namespace.length + 1), value]),
  };
}

/** A fresh account: its name, its headers, and `page(options)` making the client of one page load. */
async function account() {
  counter += 1;
  const name = `watch${counter}${Date.now().toString(36)}`;
  const token = await server.session(name);
  const storage = durableStorage();
  const page = (options = {}) =>
    new IdempotentClient({ namespace: name, storage, retry: { baseDelayMs: 200, maxDelayMs: 400, maxAttempts: 40 }, ...options });
  return { name, page, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" } };
}

const order = (headers, qty) => ({ url: `${server.url}/api/orders`, method: "POST", headers, body: JSON.stringify({ items: [{ sku: "mug", qty }] }) });

/** Subscribes to `store`, keeping every snapshot; `until(predicate)` resolves with the first match. */
function observe(store) {
  const seen = [store.getSnapshot()];
  const waiters = [];
  const unsubscribe = store.subscribe(() => {
    const snapshot = store.getSnapshot();
    seen.push(snapshot);
    for (const waiter of [...waiters]) if (waiter.predicate(snapshot)) waiters.splice(waiters.indexOf(waiter), 1), waiter.resolve(snapshot);
  });
  const until = (what, predicate, ms = 30_000) => {
    const found = seen.find(predicate);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`waiting for ${what}; the last snapshot: ${JSON.stringify({ ...seen.at(-1), result: undefined })}`)), ms);
      waiters.push({ predicate, resolve: (s) => (clearTimeout(timer), resolve(s)) });
    });
  };
  return { seen, unsubscribe, until };
}

const settled = (s) => s.phase === "succeeded" || s.phase === "failed" || s.phase === "error";

test("phases, a live countdown, abort when the last subscriber leaves, resume by the next: one key, one order", async () => {
  const { name, page, headers } = await account();
  await server.setFaults({ failBeforeWork: 1 });
  try {
    // Waits of up to 2 s (full jitter): long enough to see the countdown tick.
    const first = watchIntent("checkout", order(headers, 1), { client: page({ retry: { baseDelayMs: 1000, maxDelayMs: 2000, maxAttempts: 40 } }) });
    assert.equal(first.getSnapshot().phase, "checking", "nothing runs before a subscriber");
    first.run();
    assert.equal(first.getSnapshot().phase, "checking", "run() without a subscriber is a no-op");
    const a = observe(first);
    await a.until("idle", (s) => s.phase === "idle");
    first.run();
    const retrying = await a.until("a long retry", (s) => s.phase === "retrying" && s.retryInMs > 700);
    assert.ok(retrying.retryReason, "the reason is given");
    assert.ok(retrying.key, "the key is known");
    // The countdown is renewed while retrying: a later snapshot of the same wait shows less.
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.ok(a.seen.some((s) => s !== retrying && s.phase === "retrying" && s.retryInMs < retrying.retryInMs), "the countdown ticks");
    a.unsubscribe();
    const key = retrying.key;

    // A reload: a new client and store over the same storage resume on their first subscriber.
    await server.setFaults({});
    const second = watchIntent("checkout", order(headers, 1), { client: page() });
    const b = observe(second);
    const done = await b.until("the answer", settled);
    assert.equal(done.phase, "succeeded", JSON.stringify(done.error?.message));
    assert.equal(done.key, key, "resumed with the same key, unclicked");
    const orders = await server.orders(name);
    assert.equal(orders.length, 1, "one order");
    assert.equal(orders[0].idempotencyKey, key);
    b.unsubscribe();

    // Another reload after the answer: already answered, nothing sent.
    const third = watchIntent("checkout", order(headers, 1), { client: page() });
    const c = observe(third);
    const known = await c.until("the lookup", (s) => s.phase !== "checking");
    assert.deepEqual([known.phase, known.alreadyAnswered, known.key, known.result], ["succeeded", true, key, null]);
    c.unsubscribe();
    assert.equal((await server.orders(name)).length, 1, "still one order");
  } finally {
    await server.setFaults({});
  }
});

/** An intent left pending with `qty` 1 by a page that made no order (every request refused). */
async function leftPending(page, headers) {
  await server.setFaults({ failBeforeWork: 1 });
  const store = watchIntent("checkout", order(headers, 1), { client: page() });
  const seen = observe(store);
  await seen.until("idle", (s) => s.phase === "idle");
  store.run();
  const retrying = await seen.until("a retry", (s) => s.phase === "retrying");
  seen.unsubscribe();
  await server.setFaults({});
  return retrying.key;
}

test('onMismatch "error": a reload with another cart sends nothing and says INTENT_MISMATCH', async () => {
  const { name, page, headers } = await account();
  const key = await leftPending(page, headers);
  const store = watchIntent("checkout", order(headers, 3), { client: page(), onMismatch: "error" });
  const s = observe(store);
  const ended = await s.until("the end", settled);
  assert.equal(ended.errorCode, "INTENT_MISMATCH");
  assert.match(ended.error.message, new RegExp(key));
  assert.equal((await server.orders(name)).length, 0, "no order");
  s.unsubscribe();
});

test('onMismatch "ask" (default): a reload with another cart is the phase changed, describing the earlier intent; nothing is sent until the person chooses', async () => {
  const { name, page, headers } = await account();
  const key = await leftPending(page, headers);
  const store = watchIntent("checkout", order(headers, 3), { client: page() });
  const s = observe(store);
  const changed = await s.until("changed", (snapshot) => snapshot.phase === "changed");
  assert.equal(changed.changed.key, key, "the earlier intent's key");
  assert.equal(changed.changed.attempts, 1);
  assert.equal(changed.changed.lastStatus, 503);
  assert.equal(changed.changed.resumable, false, "no persistRequest: resume() cannot send the earlier request");
  assert.equal(changed.error, null);
  store.run(); // "Pay" again: the same question, nothing sent
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.equal(store.getSnapshot().phase, "changed");
  assert.equal((await server.orders(name)).length, 0, "no order");
  s.unsubscribe();
});

/** A reload with a cart of 3 that finds the earlier intent (a cart of 1, its answer lost to 503s) changed. */
async function changedCart(options = {}) {
  const { name, page, headers } = await account();
  const client = (more = {}) => page({ statusUrl: `${server.url}/api/idempotency-keys/{key}`, ...options, ...more });
  const key = await leftPending(client, headers);
  const store = watchIntent("checkout", order(headers, 3), { client: client() });
  const s = observe(store);
  await s.until("changed", (snapshot) => snapshot.phase === "changed");
  return { name, headers, key, store, s };
}

test('phase changed, replace(): the earlier key is fenced, the cart given now is ordered once under a new key (answerFor "current")', async () => {
  const { name, headers, key, store, s } = await changedCart();
  store.replace();
  const done = await s.until("the answer", settled);
  assert.equal(done.phase, "succeeded", `${done.errorCode}: ${done.error?.message}`);
  assert.notEqual(done.key, key);
  assert.equal(done.answerFor, "current");
  const fenced = await fetch(`${server.url}/api/idempotency-keys/${key}`, { headers });
  assert.equal((await fenced.json()).status, "fenced");
  const orders = await server.orders(name);
  assert.equal(orders.length, 1);
  assert.equal(JSON.stringify(orders[0]).includes('"qty":3'), true, `the cart given now: ${JSON.stringify(orders[0])}`);
  s.unsubscribe();
});

test('phase changed, resume(): the earlier request is sent with its key, and the answer says so (answerFor "earlier")', async () => {
  const { name, key, store, s } = await changedCart({ persistRequest: true });
  assert.equal(store.getSnapshot().changed.resumable, true);
  store.resume();
  const done = await s.until("the answer", settled);
  assert.equal(done.phase, "succeeded", `${done.errorCode}: ${done.error?.message}`);
  assert.equal(done.key, key);
  assert.equal(done.answerFor, "earlier");
  const orders = await server.orders(name);
  assert.equal(orders.length, 1);
  assert.equal(JSON.stringify(orders[0]).includes('"qty":1'), true, `the earlier cart: ${JSON.stringify(orders[0])}`);
  s.unsubscribe();
});

test('phase changed, discard(): the earlier key is fenced and forgotten, nothing is ordered; the next run() orders the cart given now', async () => {
  const { name, headers, key, store, s } = await changedCart();
  store.discard();
  await s.until("idle", (snapshot) => snapshot.phase === "idle" && snapshot.changed === null);
  const fenced = await fetch(`${server.url}/api/idempotency-keys/${key}`, { headers });
  assert.equal((await fenced.json()).status, "fenced");
  assert.equal((await server.orders(name)).length, 0, "nothing ordered");
  store.run();
  const done = await s.until("the answer", settled);
  assert.equal(done.phase, "succeeded", `${done.errorCode}: ${done.error?.message}`);
  assert.notEqual(done.key, key);
  const orders = await server.orders(name);
  assert.equal(orders.length, 1);
  assert.equal(JSON.stringify(orders[0]).includes('"qty":3'), true);
  s.unsubscribe();
});

test('onMismatch "replace": a key the server never saw is replaced, the new cart is ordered once', async () => {
  const { name, page, headers } = await account();
  const old = await leftPending(page, headers);
  const client = page({ statusUrl: `${server.url}/api/idempotency-keys/{key}` });
  const store = watchIntent("checkout", order(headers, 3), { client, onMismatch: "replace" });
  const s = observe(store);
  const done = await s.until("the answer", settled);
  assert.equal(done.phase, "succeeded", `${done.errorCode}: ${done.error?.message}`);
  assert.notEqual(done.key, old, "a new key");
  const orders = await server.orders(name);
  assert.equal(orders.length, 1, "one order");
  assert.equal(orders[0].idempotencyKey, done.key);
  assert.equal(JSON.stringify(orders[0]).includes('"qty":3'), true, `the new cart: ${JSON.stringify(orders[0])}`);
  s.unsubscribe();
});

test('onMismatch "replace": the order the server made for the old key is the answer; nothing new is sent', async () => {
  const { name, page, headers } = await account();
  // The first page's order is made and its answer lost; the page gives up.
  await server.setFaults({ dropAfterCommit: 1 });
  const first = watchIntent("checkout", order(headers, 1), { client: page({ retry: { baseDelayMs: 1, maxDelayMs: 2, maxAttempts: 1 } }) });
  const a = observe(first);
  await a.until("idle", (s) => s.phase === "idle");
  first.run();
  const gaveUp = await a.until("the end", settled);
  assert.equal(gaveUp.errorCode, "RETRIES_EXHAUSTED");
  a.unsubscribe();
  await server.setFaults({});
  assert.equal((await server.orders(name)).length, 1, "the first page's order exists");

  const client = page({ statusUrl: `${server.url}/api/idempotency-keys/{key}` });
  const store = watchIntent("checkout", order(headers, 3), { client, onMismatch: "replace" });
  const s = observe(store);
  const done = await s.until("the answer", settled);
  assert.equal(done.phase, "succeeded", `${done.errorCode}: ${done.error?.message}`);
  assert.equal(done.key, gaveUp.key, "the old key's answer");
  assert.equal(done.alreadyAnswered, true);
  const orders = await server.orders(name);
  assert.equal(orders.length, 1, "still one order");
  assert.equal(done.data.id, orders[0].id, "the page shows the order that exists");
  s.unsubscribe();
});

test('onMismatch "replace", the slow cart: a reload 1 s after Pay rebuilds the cart while the first request still runs at the server; the store waits for it, and its order is the one order', async () => {
  const { name, page, headers } = await account();
  const statusUrl = `${server.url}/api/idempotency-keys/{key}`;
  // The first page: 1 mug, the server takes 3 s over it; the page reloads (the store's last
  // subscriber leaves: the fetch is aborted) 1 s after Pay.
  const first = watchIntent("checkout", order({ ...headers, "x-fault": "latency=3000" }, 1), { client: page({ statusUrl }) });
  const a = observe(first);
  await a.until("idle", (s) => s.phase === "idle");
  first.run();
  const sending = await a.until("the first attempt", (s) => s.phase === "sending" && s.attempt === 1);
  await new Promise((resolve) => setTimeout(resolve, 1000));
  a.unsubscribe();
  const status = await fetch(statusUrl.replace("{key}", sending.key), { headers });
  assert.equal((await status.json()).status, "in_flight", "the hung-up request is still in flight at the server");

  // The reloaded page rebuilt the cart with 2 mugs.
  const store = watchIntent("checkout", order(headers, 2), { client: page({ statusUrl }), onMismatch: "replace" });
  const s = observe(store);
  const done = await s.until("the answer", settled);
  assert.equal(done.phase, "succeeded", `${done.errorCode}: ${done.error?.message}`);
  assert.equal(done.key, sending.key, "the old key's answer: its request was done");
  const orders = await server.orders(name);
  assert.equal(orders.length, 1, `one order: ${JSON.stringify(orders)}`);
  assert.equal(done.data.id, orders[0].id, "the page shows the order that exists");
  assert.equal(JSON.stringify(orders[0]).includes('"qty":1'), true, `the first cart: ${JSON.stringify(orders[0])}`);
  s.unsubscribe();
});

test('onMismatch "replace": a key the server never saw is fenced before the new one is used, so its request arriving late does nothing', async () => {
  const { name, page, headers } = await account();
  const old = await leftPending(page, headers);
  const client = page({ statusUrl: `${server.url}/api/idempotency-keys/{key}` });
  const store = watchIntent("checkout", order(headers, 2), { client, onMismatch: "replace" });
  const s = observe(store);
  const done = await s.until("the answer", settled);
  assert.equal(done.phase, "succeeded", `${done.errorCode}: ${done.error?.message}`);
  assert.notEqual(done.key, old, "a new key");
  const status = await fetch(`${server.url}/api/idempotency-keys/${old}`, { headers });
  assert.equal((await status.json()).status, "fenced");
  // The old request, still on the wire somewhere (a proxy's queue, a slow upload), arrives now.
  const late = await fetch(`${server.url}/api/orders`, { method: "POST", headers: { ...headers, "idempotency-key": old }, body: JSON.stringify({ items: [{ sku: "mug", qty: 1 }] }) });
  assert.equal(late.status, 410, "the late request is refused");
  assert.equal((await late.json()).code, "key-fenced");
  const orders = await server.orders(name);
  assert.equal(orders.length, 1, `one order: ${JSON.stringify(orders)}`);
  assert.equal(orders[0].idempotencyKey, done.key);
  assert.equal(JSON.stringify(orders[0]).includes('"qty":2'), true, `the new cart: ${JSON.stringify(orders[0])}`);
  s.unsubscribe();
});

test('onMismatch "resume": the stored request is sent (persistRequest), not the rebuilt one', async () => {
  const { name, page, headers } = await account();
  const persisted = (options = {}) => page({ persistRequest: true, ...options });
  const key = await leftPending(persisted, headers);
  const store = watchIntent("checkout", order(headers, 3), { client: persisted(), onMismatch: "resume" });
  const s = observe(store);
  const done = await s.until("the answer", settled);
  assert.equal(done.phase, "succeeded", `${done.errorCode}: ${done.error?.message}`);
  assert.equal(done.key, key, "the stored intent's key");
  const orders = await server.orders(name);
  assert.equal(orders.length, 1, "one order");
  assert.equal(orders[0].idempotencyKey, key);
  assert.equal(JSON.stringify(orders[0]).includes('"qty":1'), true, `the stored cart: ${JSON.stringify(orders[0])}`);
  s.unsubscribe();

  // Without persistRequest there is nothing to resume: INVALID_REQUEST, nothing sent.
  const other = await account();
  await leftPending(other.page, other.headers);
  const bare = watchIntent("checkout", order(other.headers, 3), { client: other.page(), onMismatch: "resume" });
  const t = observe(bare);
  const refused = await t.until("the end", settled);
  assert.equal(refused.errorCode, "INVALID_REQUEST", refused.error?.message);
  assert.equal((await server.orders(other.name)).length, 0, "no order");
  t.unsubscribe();
});

test("an intent the service worker finished (its BroadcastChannel report) is shown by an open store without sending; other reports change nothing", async () => {
  const { name, page, headers } = await account();
  await server.setFaults({ failBeforeWork: 1 });
  try {
    // This page gave up (one attempt), the key kept: the store shows the error.
    const client = page({ retry: { maxAttempts: 1 } });
    const store = watchIntent("checkout", order(headers, 1), { client });
    const a = observe(store);
    await a.until("idle", (s) => s.phase === "idle");
    store.run();
    const gaveUp = await a.until("the error", (s) => s.phase === "error");
    // The worker (another client over the same storage) finishes it and reports on the channel.
    await server.setFaults({});
    const op = await page().begin("checkout", order(headers, 1));
    assert.equal(op.key, gaveUp.key);
    assert.equal((await op.send()).status, 201);
    const channel = new BroadcastChannel("idempotent-fetch");
    // Reports about another intent or another namespace, or of another shape, are not this store's.
    const before = a.seen.length;
    channel.postMessage({ type: "idempotent-fetch:background", namespace: name, intentId: "other" });
    channel.postMessage({ type: "idempotent-fetch:background", namespace: "someone-else", intentId: "checkout" });
    channel.postMessage({ type: "something", namespace: name, intentId: "checkout" });
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(a.seen.length, before, "a report about something else changed the store");
    channel.postMessage({ type: "idempotent-fetch:background", namespace: name, intentId: "checkout", state: "succeeded" });
    const shown = await a.until("the answer", (s) => s.phase === "succeeded", 5_000);
    assert.deepEqual([shown.key, shown.alreadyAnswered, shown.result], [gaveUp.key, true, null]);
    channel.close();
    a.unsubscribe();
    assert.equal((await server.orders(name)).length, 1, "one order: the store sent nothing");
  } finally {
    await server.setFaults({});
  }
});

test("the Svelte store follows the store contract: the subscriber is called at once, then on each change", async () => {
  const { name, page, headers } = await account();
  const store = idempotentAction("checkout", () => order(headers, 2), { client: page() });
  const phases = [];
  const unsubscribe = store.subscribe((s) => phases.push(s.phase));
  assert.deepEqual(phases, ["checking"], "called at once");
  await new Promise((resolve) => {
    const off = store.subscribe((s) => s.phase === "idle" && (off?.(), resolve()));
  });
  store.run();
  await new Promise((resolve) => {
    const check = setInterval(() => phases.at(-1) === "succeeded" && (clearInterval(check), resolve()), 20);
  });
  unsubscribe();
  assert.equal((await server.orders(name)).length, 1, "one order");
  assert.ok(phases.includes("sending"));
});

test("a key the app brings goes through the store (and so every binding) as given", async () => {
  const { name, page, headers } = await account();
  const key = "srv_issued_4f1c9a7e2b3d5608";
  const store = watchIntent("checkout", order(headers, 2), { client: page(), key });
  const s = observe(store);
  await s.until("idle", (x) => x.phase === "idle");
  store.run();
  const done = await s.until("the answer", settled);
  assert.equal(done.phase, "succeeded", done.error?.message);
  assert.equal(done.key, key);
  const orders = await server.orders(name);
  assert.deepEqual(orders.map((o) => o.idempotencyKey), [key]);
  s.unsubscribe();
});
