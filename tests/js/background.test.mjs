// Background completion (`idempotent-fetch-client/sw`) in a real browser with a real service worker,
// against the REAL reference server. Runs in the engine IF_BROWSER names (chromium, firefox, webkit:
// tests/support/browsers.mjs); in Firefox and WebKit a context is a WebDriver session and a page one
// of its windows.
//
// The server runs on 127.0.0.1:0 with its own temp SQLite db and serves tests/background (the page,
// its service worker sw.js and the app's token store token.js) at / and the package at /pkg/: the
// page, the worker and POST /api/orders share one origin, as in an app. The page signs in with a
// bearer token that it passes to `begin` (never stored by the library) and keeps in the app's own
// IndexedDB database, where the worker's `headers()` reads it. Every test has its own browser context
// (fresh storage and service worker registration) and its own account (exact order counts); faults
// are server-wide, reset after each test.
//
//   1. Chromium: the page begins an intent with background: true while the server answers 503, the
//      tab is closed, the server recovers, nothing is sent until a `sync` event is delivered through
//      the DevTools protocol (ServiceWorker.dispatchSyncEvent): one order with the page's key; the
//      reopened page finds the intent succeeded and has nothing pending.
//   2. Every engine: the same, finished when the next page of the origin loads (the navigation's
//      fetch event wakes the worker): one order, the same key.
//   3. Every engine: the page's send and the worker race for one intent: the worker waits for the
//      page's send lock and, the intent answered meanwhile, sends nothing (one attempt, one order).
//      Two pages and the worker: one order, one key, the worker sends nothing.
//   4. Every engine: refused stored requests (another origin, a body over the worker's maxBodyBytes,
//      a stored request altered in IndexedDB) are reported with their typed code and nothing is sent.
//   5. Every engine: no credentials for the worker (headers() answers null): left pending, nothing sent.
//   6. begin(..., { background: true }) with a storage a service worker cannot read: INVALID_OPTIONS.
//
// Needs: the reference server (IF_SERVER_BIN or target/server), the package (cargo xtask build) and
// the engine's browser and driver. Run: node --test tests/js/background.test.mjs
import { test, before, after, afterEach } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";

import { capabilities, collectPageErrors, engine, engineName, launchBrowser, offlineUnsupported, openLibPage, timeoutScale } from "../support/browsers.mjs";
import { pkgDir, pkgMissing, root } from "../support/paths.mjs";
import { startReferenceServer } from "../support/reference-server.mjs";
import { startTestServer } from "../support/test-server.mjs";
import { waitFor as poll } from "../support/timing.mjs";

const pageDir = path.join(root, "tests/background");
const TEST_TIMEOUT_MS = 40_000 * timeoutScale;
/** The namespace of the page's and the worker's clients (tests/background/sw.js). */
const NAMESPACE = "shop";
const INTENT = "checkout:cart-1";
const ORDER = JSON.stringify({ items: [{ sku: "mug", qty: 1 }] });

let server;
let other; // another origin (the scripted test server): a stored request the worker must not send
let browser;
const contexts = new Set();
const pageErrors = [];
let runId = 0;

before(async () => {
  browser = await launchBrowser({ what: `the background tests in ${engineName}`, also: [pkgMissing(pkgDir)] });
  server = await startReferenceServer({ www: pageDir, pkg: pkgDir, label: "background" });
  other = await startTestServer();
});

afterEach(async () => {
  for (const context of contexts) await context.close().catch(() => {});
  contexts.clear();
  if (server) await server.setFaults({});
});

after(async () => {
  await browser?.close();
  await server?.stop();
  await other?.close();
});

const waitFor = (predicate, what, timeoutMs = 15_000 * timeoutScale) => poll(predicate, what, timeoutMs, 50);
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A fresh context and account; the account's bearer token. */
async function fresh(label, options) {
  runId += 1;
  const account = `bg_${label}_${process.pid}_${runId}_${Date.now().toString(36)}`;
  const context = await browser.newContext(options);
  contexts.add(context);
  return { context, account, token: await server.session(account) };
}

/** Opens the page in `context`: the package loaded, the service worker controlling it. */
async function openTab(context) {
  const page = await context.newPage();
  collectPageErrors(page, pageErrors);
  await openLibPage(page, `${server.url}/`, { timeout: 30_000 * timeoutScale });
  return page;
}

/** In the page: saves the token in the app's store, begins INTENT with background: true and sends it
 *  (left running); resolves to the key once the first attempt got its answer. */
function beginAndSend(page, token, body = ORDER) {
  return page.evaluate(async ([namespace, intent, body, token]) => {
    await window.__saveToken(token);
    const client = new window.__lib.IdempotentClient({ namespace, storage: "indexeddb", retry: { baseDelayMs: 400, maxDelayMs: 400, jitter: "none" } });
    window.__attempts = 0;
    client.addEventListener("retry", () => { window.__attempts += 1; });
    const request = { url: "/api/orders", method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body };
    const op = await client.begin(intent, request, { background: true });
    window.__send = op.send().catch((error) => error);
    return op.key;
  }, [NAMESPACE, INTENT, body, token]);
}

/** An order whose body is over the size kept inside a record (stored out of line), under the
 *  worker's 64 KiB cap: `bytes` long, with characters of one to four UTF-8 bytes. */
const bigOrder = (bytes) => {
  const head = JSON.stringify({ items: [{ sku: "mug", qty: 1 }], note: "" }).slice(0, -2);
  const filler = "é€😀x".repeat(Math.floor((bytes - head.length - 2) / 10));
  return `${head}${filler}"}`;
};

/** In the page: the slots of the library's IndexedDB database (its intents store) in NAMESPACE:
 *  [slot, value] with the namespace's prefix cut. */
function librarySlots(page) {
  return page.evaluate(async (namespace) => {
    const db = await new Promise((resolve, reject) => {
      const open = indexedDB.open("idempotent-fetch");
      open.onsuccess = () => resolve(open.result);
      open.onerror = () => reject(open.error);
    });
    const store = db.transaction("intents").objectStore("intents");
    const all = (request) => new Promise((resolve) => { request.onsuccess = () => resolve(request.result); });
    const [keys, values] = await Promise.all([all(store.getAllKeys()), all(store.getAll())]);
    db.close();
    return keys.map((key, i) => [key, values[i]]).filter(([key]) => key.startsWith(`${namespace}:`)).map(([key, value]) => [key.slice(namespace.length + 1), value]);
  }, NAMESPACE);
}

/** The slot of the out-of-line body of intent `id` (src/js/storage/backend.ts BODY). */
const bodySlot = (id) => `\u0001:${id}`;

/** In the page: POST /api/orders with `key`, the session token and `body`: [status, replay header]. */
function postWithKey(page, token, key, body) {
  return page.evaluate(async ([token, key, body]) => {
    const response = await fetch("/api/orders", { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}`, "idempotency-key": key }, body });
    return [response.status, response.headers.get("idempotent-replayed")];
  }, [token, key, body]);
}

/** In the page: what a fresh client reads of INTENT, and what it lists as pending. */
function readIntent(page) {
  return page.evaluate(async ([namespace, intent]) => {
    const client = new window.__lib.IdempotentClient({ namespace, storage: "indexeddb" });
    return { intent: await client.intent(intent), pending: await client.pending() };
  }, [NAMESPACE, INTENT]);
}

const messagesOf = (page) => page.evaluate(() => window.__messages);

/** The account's orders, each with the key it was made with. */
async function ordersOf(account) {
  return (await server.orders(account)).map((order) => order.idempotencyKey ?? order.idempotency_key);
}

/** The page began the intent (with `body`) while the server answers 503 and is closed mid-retry;
 *  faults cleared. `beforeClose(page)` looks at the page's storage first. */
async function closedWhileDown(context, account, token, body = ORDER, beforeClose = async () => {}) {
  await server.setFaults({ failBeforeWork: 1 });
  const payer = await openTab(context);
  const key = await beginAndSend(payer, token, body);
  await waitFor(async () => (await payer.evaluate(() => window.__attempts)) >= 1, "a 503 retried by the page");
  await beforeClose(payer);
  await payer.close();
  // A worker woken meanwhile (Chromium's own Background Sync fires once the page registers it) runs
  // out of its two attempts against the 503s and leaves the intent pending.
  await pause(1500);
  assert.deepEqual(await ordersOf(account), [], "an order was made while the server answered 503");
  await server.setFaults({});
  return key;
}

test("Chromium: tab closed while the server is down, a sync event (DevTools) sends once with the page's key; the reopened page sees it succeeded", { timeout: TEST_TIMEOUT_MS, skip: capabilities.cdp ? false : `needs CDP (ServiceWorker.dispatchSyncEvent), not in ${engineName}'s WebDriver` }, async () => {
  const { context, account, token } = await fresh("sync");
  const watcher = await openTab(context); // another tab of the app, listening on the BroadcastChannel
  const cdp = await context.newCDPSession(watcher);
  const registrations = [];
  cdp.on("ServiceWorker.workerRegistrationUpdated", ({ registrations: updated }) => registrations.push(...updated));
  await cdp.send("ServiceWorker.enable");
  const key = await closedWhileDown(context, account, token);
  // Recovered, and nothing woke the worker: nothing is sent by itself.
  await pause(1000);
  assert.deepEqual(await ordersOf(account), [], "sent without a trigger");
  const ours = () => registrations.find((r) => !r.isDeleted && r.scopeURL === `${server.url}/`);
  await waitFor(async () => Boolean(ours()), "the service worker's registration (DevTools events)").catch(() => {});
  const registration = ours();
  assert.ok(registration, `no service worker registration for ${server.url}/: ${JSON.stringify(registrations)}`);
  await cdp.send("ServiceWorker.dispatchSyncEvent", { origin: server.url, registrationId: registration.registrationId, tag: "idempotent-fetch", lastChance: false });
  await waitFor(async () => (await messagesOf(watcher)).some((m) => m.state === "succeeded"), "the worker's message that the intent succeeded");
  const done = (await messagesOf(watcher)).find((m) => m.state === "succeeded");
  assert.deepEqual(
    { type: done.type, namespace: done.namespace, intentId: done.intentId, key: done.key, status: done.status, error: done.error },
    { type: "idempotent-fetch:background", namespace: NAMESPACE, intentId: INTENT, key, status: 201, error: null },
  );
  assert.deepEqual(await ordersOf(account), [key], "one order, with the page's key");
  const reopened = await openTab(context);
  const seen = await readIntent(reopened);
  assert.equal(seen.intent?.state, "succeeded", JSON.stringify(seen));
  assert.equal(seen.intent?.key, key);
  assert.equal(seen.intent?.lastStatus, 201);
  assert.deepEqual(seen.pending, []);
  await pause(500);
  assert.deepEqual(await ordersOf(account), [key], "the reopened page sent again");
});

test("tab closed while the server is down, the next page load of the origin wakes the worker: one order with the page's key", { timeout: TEST_TIMEOUT_MS }, async () => {
  const { context, account, token } = await fresh("load");
  const watcher = await openTab(context);
  const key = await closedWhileDown(context, account, token);
  const reopened = await openTab(context); // its navigation is the worker's fetch event
  await waitFor(async () => (await readIntent(reopened)).intent?.state === "succeeded", "the intent to succeed in the background");
  const seen = await readIntent(reopened);
  assert.equal(seen.intent.key, key);
  assert.equal(seen.intent.lastStatus, 201);
  assert.deepEqual(seen.pending, []);
  assert.deepEqual(await ordersOf(account), [key], "one order, with the page's key");
  const done = (await messagesOf(watcher)).filter((m) => m.state === "succeeded");
  assert.deepEqual(done.map((m) => [m.key, m.status]), [[key, 201]], JSON.stringify(await messagesOf(watcher)));
});

test("a body over 1 KiB is stored out of line and sent by the worker after the tab closed: one order, the same bytes at the server; nothing of it left once answered", { timeout: TEST_TIMEOUT_MS }, async () => {
  const { context, account, token } = await fresh("big");
  const body = bigOrder(40_000);
  const length = new TextEncoder().encode(body).length;
  const key = await closedWhileDown(context, account, token, body, async (page) => {
    const slots = Object.fromEntries(await librarySlots(page));
    assert.equal(JSON.parse(slots[INTENT]).request.body, length, "the record names the body by its length");
    assert.ok(slots[INTENT].length < 1000, `the record stays small (${slots[INTENT].length} chars)`);
    assert.equal(atob(slots[bodySlot(INTENT)]).length, length, "the body's own slot holds its bytes");
  });
  const reopened = await openTab(context); // its navigation is the worker's fetch event
  await waitFor(async () => (await readIntent(reopened)).intent?.state === "succeeded", "the intent to succeed in the background");
  assert.equal((await readIntent(reopened)).intent.key, key);
  assert.deepEqual(await ordersOf(account), [key], "one order, with the page's key");
  // The server keyed its stored answer to the bytes it received: the same bytes are replayed, one
  // character changed is another request (422).
  assert.deepEqual(await postWithKey(reopened, token, key, body), [201, "true"], "the server received other bytes");
  assert.equal((await postWithKey(reopened, token, key, body.replace("😀", "😁")))[0], 422);
  assert.deepEqual(await ordersOf(account), [key]);
  const left = (await librarySlots(reopened)).map(([slot]) => slot).filter((slot) => slot.startsWith("\u0001:"));
  assert.deepEqual(left, [], "a body slot outlived its answered intent");
});

// The worker's start as the only trigger: the worker is stopped after the tab closed (Chromium: the
// DevTools protocol's ServiceWorker.stopAllWorkers; Firefox: its own idle timeout, made 2 s for this
// profile), then a page that stayed open posts it a message. backgroundSync() has no message
// listener: only the run its script starts on loading can send. WebKit has neither a command nor a
// preference that stops a worker, and every other way to start it here is a page load (the
// navigation trigger), so there it is not isolated.
const SW_IDLE_MS = 2000;
test("the worker's start alone (stopped, then woken by a page's message, no navigation, no sync): one order with the page's key", { timeout: TEST_TIMEOUT_MS, skip: capabilities.cdp || engine === "firefox" ? false : "WebKit cannot stop a service worker from a test (no DevTools protocol, no timeout preference)" }, async () => {
  const { context, account, token } = await fresh("start", engine === "firefox" ? { firefoxPrefs: { "dom.serviceWorkers.idle_timeout": SW_IDLE_MS, "dom.serviceWorkers.idle_extended_timeout": SW_IDLE_MS } } : {});
  const watcher = await openTab(context);
  const key = await closedWhileDown(context, account, token);
  if (capabilities.cdp) {
    const cdp = await context.newCDPSession(watcher);
    await cdp.send("ServiceWorker.enable");
    await cdp.send("ServiceWorker.stopAllWorkers");
  }
  // Firefox stops it once idle for SW_IDLE_MS (nothing of the origin's pages asks it for anything).
  await pause(capabilities.cdp ? 1000 : 3 * SW_IDLE_MS);
  assert.deepEqual(await ordersOf(account), [], "sent without a trigger");
  assert.deepEqual((await messagesOf(watcher)).filter((m) => m.state === "succeeded"), []);
  await watcher.evaluate(async () => (await navigator.serviceWorker.ready).active.postMessage("wake up"));
  await waitFor(async () => (await messagesOf(watcher)).some((m) => m.state === "succeeded"), "the started worker's report that the intent succeeded");
  assert.deepEqual(await ordersOf(account), [key], "one order, with the page's key");
  assert.equal((await readIntent(watcher)).intent.state, "succeeded");
});

// Back online: the tab went offline, began the intent (it waits for the network: nothing sent) and
// was closed; the browser comes back online while the worker still runs (it loaded for the pages'
// navigations). Firefox (its offline mode) fires `online` on the worker's scope, and that is what
// sends (without the `online` listener the test fails). Chromium (Playwright's offline emulation)
// fires no `online` there; its own Background Sync delivers the page's `sync` registration once the
// browser is back online: a real sync event, no DevTools command (without the `sync` listener the
// test fails, without the `online` one it passes). WebKit: no way to go offline over WebDriver.
test("back online after the tab that began the intent offline was closed (Firefox: the online event on the worker's scope; Chromium: its own Background Sync): one order with the page's key", { timeout: TEST_TIMEOUT_MS, skip: capabilities.offline ? false : offlineUnsupported }, async () => {
  const { context, account, token } = await fresh("online");
  const watcher = await openTab(context);
  const payer = await openTab(context);
  // The page makes its client when it loads, online (as the README's pages do: the parts its options
  // use are loaded then); the network goes before the click.
  await payer.evaluate(async ([namespace]) => {
    window.__client = new window.__lib.IdempotentClient({ namespace, storage: "indexeddb" });
    await window.__client.pending();
  }, [NAMESPACE]);
  await context.setOffline(true);
  const key = await payer.evaluate(async ([namespace, intent, body, token]) => {
    await window.__saveToken(token);
    const client = window.__client;
    window.__offline = 0;
    client.addEventListener("offline", () => { window.__offline += 1; });
    const request = { url: "/api/orders", method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body };
    const op = await client.begin(intent, request, { background: true });
    window.__send = op.send().catch((error) => error);
    return op.key;
  }, [NAMESPACE, INTENT, ORDER, token]);
  await waitFor(async () => (await payer.evaluate(() => window.__offline)) >= 1, "the page to wait for the network");
  await payer.close();
  await pause(500);
  assert.deepEqual(await ordersOf(account), []);
  // (WebDriver: a command in a window that is still open, so that the browser's commands have one.)
  assert.deepEqual((await messagesOf(watcher)).filter((m) => m.state === "succeeded"), []);
  const back = Date.now();
  await context.setOffline(false);
  await waitFor(async () => (await messagesOf(watcher)).some((m) => m.state === "succeeded"), "the worker's report once back online");
  assert.ok(Date.now() - back < 10_000 * timeoutScale, "the worker sent long after the browser came back online");
  assert.deepEqual(await ordersOf(account), [key], "one order, with the page's key");
});

test("the page and the worker race for one intent: the worker waits for the page's send and sends nothing once it is answered", { timeout: TEST_TIMEOUT_MS }, async () => {
  const { context, account, token } = await fresh("race");
  const watcher = await openTab(context);
  // The page's one attempt holds the intent's send lock for 3 s.
  await server.setFaults({ latencyMs: 3000, latencyProbability: 1 });
  const key = await beginAndSend(watcher, token);
  await openTab(context); // wakes the worker while the page's attempt is under way
  await waitFor(async () => (await messagesOf(watcher)).some((m) => m.intentId === INTENT), "the worker's report of the intent", 30_000 * timeoutScale);
  const report = (await messagesOf(watcher)).find((m) => m.intentId === INTENT);
  assert.equal(await watcher.evaluate(async () => (await window.__send).status), 201);
  // Without the check under the lock the worker would send again: attempts 2, a replayed answer.
  assert.deepEqual([report.state, report.key, report.attempts, report.error], ["succeeded", key, 1, null], JSON.stringify(report));
  assert.equal((await readIntent(watcher)).intent.attempts, 1);
  assert.deepEqual(await ordersOf(account), [key]);
});

test("two pages and the worker race for one intent: one order, one key, and the worker sends nothing", { timeout: TEST_TIMEOUT_MS }, async () => {
  const { context, account, token } = await fresh("race2");
  const first = await openTab(context);
  await server.setFaults({ latencyMs: 3000, latencyProbability: 1 });
  const key = await beginAndSend(first, token);
  const second = await openTab(context); // its load wakes the worker too
  // The second page begins the same intent (the same key, resumed) and sends: it waits for the lock.
  const other = await second.evaluate(async ([namespace, intent, body, token]) => {
    const client = new window.__lib.IdempotentClient({ namespace, storage: "indexeddb" });
    const request = { url: "/api/orders", method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body };
    const op = await client.begin(intent, request, { background: true });
    const result = await op.send();
    return { key: op.key, resumed: op.resumed, status: result.status, replayed: result.replayed };
  }, [NAMESPACE, INTENT, ORDER, token]);
  const mine = await first.evaluate(async () => { const r = await window.__send; return { key: r.key, status: r.status }; });
  assert.deepEqual(mine, { key, status: 201 });
  assert.deepEqual(other, { key, resumed: true, status: 201, replayed: true });
  await waitFor(async () => (await messagesOf(first)).some((m) => m.intentId === INTENT), "the worker's report of the intent", 30_000 * timeoutScale);
  const report = (await messagesOf(first)).find((m) => m.intentId === INTENT);
  assert.deepEqual([report.state, report.key, report.error], ["succeeded", key, null], JSON.stringify(report));
  // The first page's attempt and the second page's (answered by a replay): none from the worker.
  assert.equal((await readIntent(first)).intent.attempts, 2);
  assert.deepEqual(await ordersOf(account), [key]);
});

test("refused in the background, nothing sent: a stored request to another origin, a body over maxBodyBytes, a stored request altered in IndexedDB, an out-of-line body altered or cut", { timeout: TEST_TIMEOUT_MS }, async () => {
  const { context, account, token } = await fresh("refuse");
  const scenario = `refuse-${runId}-${Date.now().toString(36)}`;
  const elsewhere = `${other.url}/s/${scenario}?script=201`;
  const watcher = await openTab(context);
  // Begun only (no send: the page is "closed" before its first attempt), with the request stored.
  await watcher.evaluate(async ([namespace, token, elsewhere, body]) => {
    const client = new window.__lib.IdempotentClient({ namespace, storage: "indexeddb", resumeOrigins: [new URL(elsewhere).origin] });
    const headers = { "content-type": "application/json", authorization: `Bearer ${token}` };
    await client.begin("other-origin", { url: elsewhere, method: "POST", headers, body }, { background: true });
    // Over the worker's 64 KiB cap (stored out of line, as any body over 1 KiB).
    const big = JSON.stringify({ items: [{ sku: "mug", qty: 1 }], note: "x".repeat(70_000) });
    await client.begin("too-large", { url: "/api/orders", method: "POST", headers, body: big }, { background: true });
    await client.begin("altered", { url: "/api/orders", method: "POST", headers, body }, { background: true });
    const large = JSON.stringify({ items: [{ sku: "mug", qty: 1 }], note: "y".repeat(5000) });
    for (const id of ["body-altered", "body-cut"]) await client.begin(id, { url: "/api/orders", method: "POST", headers, body: large }, { background: true });
    // Any script of the origin can write the library's database: change the stored body's quantity.
    const db = await new Promise((resolve, reject) => {
      const open = indexedDB.open("idempotent-fetch");
      open.onsuccess = () => resolve(open.result);
      open.onerror = () => reject(open.error);
    });
    // The out-of-line bodies: the same length with another quantity, and cut short.
    const bodies = db.transaction("intents", "readwrite").objectStore("intents");
    bodies.put(btoa(large.replace('"qty":1', '"qty":9')), `${namespace}:\u0001:body-altered`);
    bodies.put(btoa(large.slice(0, 3000)), `${namespace}:\u0001:body-cut`);
    await new Promise((resolve, reject) => {
      bodies.transaction.oncomplete = resolve;
      bodies.transaction.onerror = () => reject(bodies.transaction.error);
    });
    const slot = `${namespace}:altered`;
    const text = await new Promise((resolve) => { const get = db.transaction("intents").objectStore("intents").get(slot); get.onsuccess = () => resolve(get.result); });
    const record = JSON.parse(text);
    const stored = new TextDecoder().decode(new Uint8Array(record.request.body));
    record.request.body = [...new TextEncoder().encode(stored.replace('"qty":1', '"qty":9'))];
    await new Promise((resolve, reject) => {
      const tx = db.transaction("intents", "readwrite");
      tx.objectStore("intents").put(JSON.stringify(record), slot);
      tx.oncomplete = resolve;
      tx.onerror = () => reject(tx.error);
    });
    db.close();
    // Only now the worker can get credentials: a run before (Chromium's Background Sync fires as
    // soon as a page registers it) left every intent pending (ABORTED), before the stored data was altered.
    await window.__saveToken(token);
  }, [NAMESPACE, token, elsewhere, ORDER]);
  await openTab(context); // a page load wakes the worker
  const ids = ["other-origin", "too-large", "altered", "body-altered", "body-cut"];
  const checked = async () => (await messagesOf(watcher)).filter((m) => m.error?.code !== "ABORTED");
  await waitFor(async () => {
    const messages = await checked();
    return ids.every((id) => messages.some((m) => m.intentId === id));
  }, "the worker's report of the five intents");
  const reported = Object.fromEntries((await checked()).map((m) => [m.intentId, [m.state, m.error?.code]]));
  assert.deepEqual(reported, {
    "other-origin": ["pending", "INVALID_REQUEST"],
    "too-large": ["pending", "BODY_TOO_LARGE"],
    altered: ["pending", "STORAGE"],
    "body-altered": ["pending", "STORAGE"],
    "body-cut": ["pending", "STORAGE"],
  });
  assert.deepEqual(await other.log(scenario), [], "the request to another origin was sent");
  assert.deepEqual(await ordersOf(account), [], "a refused request was sent");
});

test("no credentials for the worker (headers() answers null): the intent stays pending for the page, nothing sent", { timeout: TEST_TIMEOUT_MS }, async () => {
  const { context, account, token } = await fresh("nocreds");
  const watcher = await openTab(context);
  // The page has a token but never put it where the worker looks (the app's session store).
  const key = await watcher.evaluate(async ([namespace, intent, body, token]) => {
    const client = new window.__lib.IdempotentClient({ namespace, storage: "indexeddb" });
    const headers = { "content-type": "application/json", authorization: `Bearer ${token}` };
    return (await client.begin(intent, { url: "/api/orders", method: "POST", headers, body }, { background: true })).key;
  }, [NAMESPACE, INTENT, ORDER, token]);
  await openTab(context); // a page load wakes the worker
  await waitFor(async () => (await messagesOf(watcher)).some((m) => m.intentId === INTENT), "the worker's report of the intent");
  const report = (await messagesOf(watcher)).find((m) => m.intentId === INTENT);
  assert.deepEqual([report.state, report.key, report.attempts, report.error?.code], ["pending", key, 0, "ABORTED"], JSON.stringify(report));
  const seen = await readIntent(watcher);
  assert.deepEqual(seen.pending.map((p) => [p.key, p.resumable]), [[key, true]]);
  assert.deepEqual(await ordersOf(account), []);
});

test("begin with background: true and a storage a service worker cannot read: INVALID_OPTIONS, nothing stored", { timeout: TEST_TIMEOUT_MS }, async () => {
  const { context } = await fresh("storage");
  const page = await openTab(context);
  const outcome = await page.evaluate(async (body) => {
    const out = {};
    for (const storage of ["local", "session", "memory"]) {
      const client = new window.__lib.IdempotentClient({ namespace: `kind-${storage}`, storage });
      try {
        await client.begin("checkout:x", { url: "/api/orders", method: "POST", body }, { background: true });
        out[storage] = "begun";
      } catch (error) {
        out[storage] = [error.code, /indexeddb/.test(error.message), (await client.pending()).length];
      }
    }
    return out;
  }, ORDER);
  assert.deepEqual(outcome, { local: ["INVALID_OPTIONS", true, 0], session: ["INVALID_OPTIONS", true, 0], memory: ["INVALID_OPTIONS", true, 0] });
});

test("no uncaught errors in the pages", () => {
  assert.deepEqual(pageErrors, []);
});
