// Cross-tab behaviour in a real browser against the REAL reference server: two
// pages of one browser context share localStorage and Web Locks exactly as two tabs do. Runs in the
// engine IF_BROWSER names (chromium, firefox, webkit: tests/support/browsers.mjs); in Firefox and
// WebKit a context is a WebDriver session and a page one of its windows.
//
//   1. two tabs race one intent (server latency): the server sees one request at a time, one order,
//      same key, one of the two answers is a replay;
//   2. a duplicated tab (sessionStorage copied, storage: "session"): one order, same key;
//   3. the sending tab is closed mid-retry: the waiting tab takes over (Web Lock released), same key;
//   4. as 3 without Web Locks (localStorage lease): the waiting tab takes over once the lease expires.
//   5, 6. the lease path: a full localStorage does not hang begin/send; renewal never steals a lease.
//
// The server binary runs on 127.0.0.1:0 with its own temp SQLite db and serves tests/tabs (the test
// page) at / and the package (pkg/) at /pkg/, so the page and the API share one origin (no CORS). Every test has
// its own browser context (fresh storage), its own account (a session cookie: exact order counts) and
// namespace. Faults are server-wide: the tests run one after another and reset them afterwards.
//
// Needs: the reference server (IF_SERVER_BIN or target/server, built when missing:
// tests/support/reference-server.mjs), the package (cargo xtask build) and the engine's
// browser and driver (tests/support/browsers.mjs).
// Run: node --test tests/js/tabs.test.mjs (about 30 s).
import { test, before, after, afterEach } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";

import { collectPageErrors, engineName, launchBrowser, openLibPage, timeoutScale } from "../support/browsers.mjs";
import { pkgDir, pkgMissing, root } from "../support/paths.mjs";
import { startReferenceServer } from "../support/reference-server.mjs";
import { waitFor as poll } from "../support/timing.mjs";

const pageDir = path.join(root, "tests/tabs");
const TEST_TIMEOUT_MS = 30_000 * timeoutScale;
const LEASE_TTL_MS = 5_000; // src/web/lock.rs

let server;
let browser;
const contexts = new Set();
let runId = 0;

const setFaults = (faults) => server.setFaults(faults);
const ordersOf = (account) => server.orders(account);

before(async () => {
  browser = await launchBrowser({ what: `the cross-tab tests in ${engineName}`, also: [pkgMissing(pkgDir)] });
  server = await startReferenceServer({ www: pageDir, pkg: pkgDir, label: "tabs" });
});

afterEach(async () => {
  for (const context of contexts) await context.close().catch(() => {});
  contexts.clear();
  if (server) await setFaults({});
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

/** A fresh context (own storage, shared by its pages like the tabs of one browser profile), signed in
 *  to `account` (its session cookie). */
async function newContext(account, { withoutWebLocks = false, withoutIndexedDB = false } = {}) {
  const context = await browser.newContext();
  contexts.add(context);
  await server.signIn(context, account);
  if (withoutIndexedDB) {
    await context.addInitScript(() => {
      Object.defineProperty(globalThis, "indexedDB", { get: () => undefined, configurable: true });
    });
  }
  if (withoutWebLocks) {
    await context.addInitScript(() => {
      Object.defineProperty(Navigator.prototype, "locks", { get: () => undefined, configurable: true });
    });
  }
  return context;
}

/** Opens the test page in `context` and waits for the package to load; page errors are collected. */
async function openTab(context) {
  const page = await context.newPage();
  page.errors = collectPageErrors(page);
  await openLibPage(page, `${server.url}/`);
  return page;
}

/** A unique account (also the namespace) per test, so order counts are exact. */
function freshAccount(label) {
  runId += 1;
  return `tabs_${label}_${process.pid}_${runId}_${Date.now().toString(36)}`;
}

const orderRequest = (account) => ({
  url: "/api/orders",
  method: "POST",
  headers: { "content-type": "application/json", "x-account-id": account },
  body: JSON.stringify({ items: [{ sku: "mug", qty: 1 }] }),
});

const tab = {
  create: (page, options) => page.evaluate((o) => window.__tabs.create(o), options),
  begin: (page, intentId, request) => page.evaluate(([i, r]) => window.__tabs.begin(i, r), [intentId, request]),
  send: (page) => page.evaluate(() => window.__tabs.send()),
  wait: (page) => page.evaluate(() => window.__tabs.wait()),
  log: (page) => page.evaluate(() => window.__tabs.log),
  entries: (page, kind) => page.evaluate((k) => window.__tabs.storageEntries(k), kind),
  locks: (page) => page.evaluate(() => window.__tabs.locks()),
};

const waitFor = (predicate, what, timeoutMs = 10_000) => poll(predicate, what, timeoutMs, 25);

const ofType = (log, type) => log.filter((e) => e.type === type);
const statuses409 = (log) => ofType(log, "retry").filter((e) => e.status === 409);

/** Exactly one order for the account, made with `key`. */
async function expectOneOrder(account, key) {
  const orders = await ordersOf(account);
  assert.equal(orders.length, 1, `expected exactly one order, got ${JSON.stringify(orders.map((o) => o.idempotencyKey))}`);
  assert.equal(orders[0].idempotencyKey, key, "the order was made with another key");
}

function expectNoPageErrors(...pages) {
  for (const page of pages) assert.deepEqual(page.errors, [], "errors in the page");
}

test("two tabs racing one intent: the server sees one request at a time, one order, same key, one replay", { timeout: TEST_TIMEOUT_MS }, async () => {
  const account = freshAccount("race");
  const LATENCY_MS = 1500;
  // Every order request is held 1.5 s with its key claimed: an overlapping duplicate would get 409.
  await setFaults({ latencyMs: LATENCY_MS, latencyProbability: 1 });
  const context = await newContext(account);
  const [a, b] = [await openTab(context), await openTab(context)];
  const options = { namespace: account, storage: "local", retry: { baseDelayMs: 100, maxDelayMs: 500, jitter: "none" } };
  await Promise.all([tab.create(a, options), tab.create(b, options)]);

  // Both tabs click Pay at the same moment: begin (a short lock: one key) then send (the intent lock).
  const request = orderRequest(account);
  const go = (page) => page.evaluate(async ([r]) => {
    await window.__tabs.begin("checkout:cart-42", r);
    window.__tabs.send();
  }, [request]);
  await Promise.all([go(a), go(b)]);
  const [ra, rb] = await Promise.all([tab.wait(a), tab.wait(b)]);
  const [logA, logB] = await Promise.all([tab.log(a), tab.log(b)]);

  assert.ok(ra.ok && rb.ok, `both tabs resolve: ${JSON.stringify({ ra, rb })}`);
  assert.equal(ra.status, 201);
  assert.equal(rb.status, 201);
  const keyA = ofType(logA, "begin")[0].key;
  assert.equal(ofType(logB, "begin")[0].key, keyA, "both tabs' begin gave the same key");
  assert.equal(ra.key, keyA);
  assert.equal(rb.key, keyA);
  assert.deepEqual([ra.replayed, rb.replayed].sort(), [false, true], "exactly one of the two answers is a replay");

  // No 409 (nor any retry) in either tab: the second tab did not send while the first was in flight.
  assert.deepEqual([...statuses409(logA), ...statuses409(logB)], [], "a tab saw 409: the two requests overlapped");
  assert.deepEqual([...ofType(logA, "retry"), ...ofType(logB, "retry")], [], "no retries were needed");
  assert.equal(ra.attempts, 1);
  assert.equal(rb.attempts, 1);

  // Timing: the replaying tab's only attempt starts after the first tab's answer (held LATENCY_MS by the server).
  const [first, second] = ra.replayed ? [logB, logA] : [logA, logB];
  const firstAttempt = ofType(first, "attempt")[0].at;
  const firstDone = ofType(first, "done")[0].at;
  const secondAttempt = ofType(second, "attempt")[0].at;
  assert.ok(firstDone - firstAttempt >= LATENCY_MS - 50, `the first request took ${firstDone - firstAttempt} ms (latency fault ${LATENCY_MS} ms)`);
  // 100 ms of slack: the lock is released just before the first tab's promise callback logs `done`.
  assert.ok(secondAttempt >= firstDone - 100,
    `the second tab sent at ${secondAttempt}, before the first tab's answer at ${firstDone}: the requests overlapped`);
  assert.ok(secondAttempt >= firstAttempt + LATENCY_MS - 50, "the second tab sent while the first request was held by the server");

  await expectOneOrder(account, keyA);
  expectNoPageErrors(a, b);
});

// Begin's create-or-resume is one IndexedDB transaction (src/js/storage/claims.ts),
// whatever the timing of localStorage between the tabs' renderer processes; without IndexedDB it is
// the Web Lock + settle path, which must keep working.
for (const [label, storage, withoutIndexedDB] of [
  ["localStorage, IndexedDB claims", "local", false],
  ["IndexedDB storage and claims", "indexeddb", false],
  ["localStorage, no IndexedDB: Web Lock + settle", "local", true],
]) {
  test(`two tabs begin 30 intents at the same moment: one key per intent (${label})`, { timeout: TEST_TIMEOUT_MS }, async () => {
    const account = freshAccount("claims");
    const context = await newContext(account, { withoutIndexedDB });
    const [a, b] = [await openTab(context), await openTab(context)];
    const options = { namespace: account, storage };
    const created = await Promise.all([tab.create(a, options), tab.create(b, options)]);
    assert.deepEqual(created.map((c) => c.storage), withoutIndexedDB && storage === "indexeddb" ? ["memory", "memory"] : [storage, storage]);
    const ids = Array.from({ length: 30 }, (_, i) => `checkout:cart-${i}`);
    const request = orderRequest(account);
    const [keysA, keysB] = await Promise.all(
      [a, b].map((page) => page.evaluate(([i, r]) => window.__tabs.beginMany(i, r), [ids, request])),
    );
    assert.deepEqual(keysB, keysA, "a tab began an intent with another key");
    assert.equal(new Set(keysA).size, ids.length, "one key per intent");
    assert.equal(await a.evaluate((ns) => window.__tabs.claims(ns), account), withoutIndexedDB ? null : ids.length, "claims");
    expectNoPageErrors(a, b);
  });
}

// An unnamed `client.fetch` is forgotten once answered: the claim of its key is deleted, and another
// tab that sends the identical request the moment it hears of the answer makes a new order, never a
// replay of the old one. The word goes tab to tab (BroadcastChannel), the fastest path a causal chain
// between two tabs can take; ten rounds, each with its own body.
for (const storage of ["local", "indexeddb"]) {
  test(`client.fetch without intent, answered in one tab: the identical request in another tab right after is a new order (${storage})`, { timeout: TEST_TIMEOUT_MS }, async () => {
    const account = freshAccount("anon");
    const context = await newContext(account);
    const [a, b] = [await openTab(context), await openTab(context)];
    const options = { namespace: account, storage };
    await Promise.all([tab.create(a, options), tab.create(b, options)]);
    const ROUNDS = 10;
    const request = orderRequest(account);
    const channel = `anon-${account}`;
    await b.evaluate(([n, r, rounds]) => window.__tabs.followRounds(n, r, rounds), [channel, request, ROUNDS]);
    const led = await a.evaluate(([n, r, rounds]) => window.__tabs.leadRounds(n, r, rounds), [channel, request, ROUNDS]);
    const followed = await b.evaluate(() => window.__tabs.following);
    const fresh = { status: 201, replayed: null };
    assert.deepEqual(led, Array(ROUNDS).fill(fresh), "the leading tab's orders");
    assert.deepEqual(followed, Array(ROUNDS).fill(fresh), "the following tab replayed the answered request instead of ordering again");
    assert.deepEqual(await b.evaluate(() => window.__tabs.failures), [], "failure events in the following tab");
    const orders = await ordersOf(account);
    assert.equal(orders.length, 2 * ROUNDS, "two orders per round");
    assert.equal(new Set(orders.map((o) => o.idempotencyKey)).size, 2 * ROUNDS, "each with its own key");
    expectNoPageErrors(a, b);
  });
}

test("duplicated tab (sessionStorage copied): one order, same key", { timeout: TEST_TIMEOUT_MS }, async () => {
  const account = freshAccount("dup");
  const options = { namespace: account, storage: "session", retry: { maxAttempts: 2, baseDelayMs: 50, maxDelayMs: 50, jitter: "none" } };
  const request = orderRequest(account);
  const context = await newContext(account);
  const a = await openTab(context);
  assert.equal((await tab.create(a, options)).storage, "session");

  // Tab A pays while the server fails: the intent stays pending with its key in A's sessionStorage.
  await setFaults({ failBeforeWork: 1 });
  const key = await tab.begin(a, "checkout:cart-42", request);
  await tab.send(a);
  const failed = await tab.wait(a);
  assert.equal(failed.ok, false);
  assert.equal(failed.code, "RETRIES_EXHAUSTED", JSON.stringify(failed));
  assert.equal(failed.key, key, "giving up keeps the key");
  const sessionA = await tab.entries(a, "session");
  assert.ok(sessionA.some(([, value]) => value.includes(key)), `A's sessionStorage holds the key: ${JSON.stringify(sessionA)}`);
  assert.ok(!(await tab.entries(a, "local")).some(([, value]) => value.includes(key)), "storage: session keeps the key out of localStorage");

  // "Duplicate tab": B starts with a copy of A's sessionStorage, before its client exists.
  const b = await openTab(context);
  assert.deepEqual(await tab.entries(b, "session"), [], "a new tab starts with an empty sessionStorage");
  await b.evaluate((entries) => window.__tabs.writeEntries("session", entries), sessionA);
  await tab.create(b, options);
  const keyB = await tab.begin(b, "checkout:cart-42", request);
  assert.equal(keyB, key, "the duplicated tab resumes the intent with the copied key");

  // The server is back (slow: each request is held with its key claimed, so an overlapping duplicate
  // would see 409); both tabs send ("Try again" in A, Pay in B) at once.
  await setFaults({ latencyMs: 800, latencyProbability: 1 });
  await Promise.all([tab.send(a), tab.send(b)]);
  const [ra, rb] = await Promise.all([tab.wait(a), tab.wait(b)]);
  assert.ok(ra.ok && rb.ok, `both tabs resolve: ${JSON.stringify({ ra, rb })}`);
  assert.equal(ra.key, key);
  assert.equal(rb.key, key);
  assert.equal(ra.status, 201);
  assert.equal(rb.status, 201);
  assert.deepEqual([ra.replayed, rb.replayed].sort(), [false, true], "exactly one of the two answers is a replay");
  const [logA, logB] = await Promise.all([tab.log(a), tab.log(b)]);
  assert.deepEqual([...statuses409(logA), ...statuses409(logB)], [], "a tab saw 409: the two requests overlapped");
  await expectOneOrder(account, key);
  expectNoPageErrors(a, b);
});

/**
 * Tab A sends while the server fails (long backoff), tab B sends the same intent and waits; A is
 * closed mid-retry; B takes over. Returns what the caller needs to check the takeover time.
 */
async function closeMidRetry({ withoutWebLocks }) {
  const account = freshAccount(withoutWebLocks ? "lease" : "weblock");
  const intentId = "checkout:cart-42";
  const request = orderRequest(account);
  const context = await newContext(account, { withoutWebLocks });
  const a = await openTab(context);
  assert.equal(await a.evaluate(() => navigator.locks === undefined), withoutWebLocks, "navigator.locks presence");

  await setFaults({ failBeforeWork: 1 });
  // A: long-ish backoff, so it spends most of its time waiting between attempts (mid-retry).
  await tab.create(a, { namespace: account, storage: "local", retry: { maxAttempts: 100, baseDelayMs: 1500, maxDelayMs: 1500, jitter: "none", totalTimeoutMs: 60_000 } });
  const key = await tab.begin(a, intentId, request);
  await tab.send(a);
  await waitFor(async () => ofType(await tab.log(a), "retry").length >= 1, "tab A's first 503 and retry");

  // B: same intent (shared localStorage: same key), short backoff; its send waits for A.
  const b = await openTab(context);
  await tab.create(b, { namespace: account, storage: "local", retry: { maxAttempts: 100, baseDelayMs: 100, maxDelayMs: 200, jitter: "none", totalTimeoutMs: 60_000 } });
  assert.equal(await tab.begin(b, intentId, request), key, "tab B resumes A's intent with A's key");
  await tab.send(b);
  await new Promise((resolve) => setTimeout(resolve, 500));
  assert.deepEqual(ofType(await tab.log(b), "attempt"), [], "tab B must not send while tab A holds the intent");
  const lockName = `idempotent-fetch:send:${account}:${intentId}`;
  let leaseExpires = null;
  if (withoutWebLocks) {
    const lease = (await tab.entries(b, "local")).find(([name]) => name === `idempotent-fetch:lease:${lockName}`);
    assert.ok(lease, `tab A's lease is in localStorage: ${JSON.stringify(await tab.entries(b, "local"))}`);
  } else {
    const locks = await tab.locks(b);
    assert.ok(locks.held.includes(lockName), `tab A holds ${lockName}: ${JSON.stringify(locks)}`);
    assert.ok(locks.pending.includes(lockName), `tab B waits for ${lockName}: ${JSON.stringify(locks)}`);
  }
  const attemptsOfA = ofType(await tab.log(a), "attempt").length;
  assert.ok(attemptsOfA >= 1);

  // Close A mid-retry (no beforeunload, no chance to clean up: like closing the tab).
  const closedAt = Date.now();
  await a.close();
  if (withoutWebLocks) {
    const lease = (await tab.entries(b, "local")).find(([name]) => name === `idempotent-fetch:lease:${lockName}`);
    assert.ok(lease, "the closed tab's lease stays until it expires");
    leaseExpires = Number(lease[1].split(":").pop());
    assert.ok(leaseExpires > closedAt && leaseExpires <= closedAt + LEASE_TTL_MS + 100, `lease expiry ${leaseExpires - closedAt} ms after the close`);
  }

  // B takes over: its attempts fail while the server still does, then succeed once faults are off.
  const firstAttemptOfB = await waitFor(async () => ofType(await tab.log(b), "attempt")[0], "tab B's first attempt", LEASE_TTL_MS + 3_000);
  assert.equal(firstAttemptOfB.key, key, "tab B sends with A's key");
  await waitFor(async () => ofType(await tab.log(b), "retry").some((e) => e.status === 503), "tab B retrying a 503");
  await setFaults({});
  const result = await tab.wait(b);
  assert.ok(result.ok, `tab B resolves: ${JSON.stringify(result)}`);
  assert.equal(result.status, 201);
  assert.equal(result.key, key, "tab B finishes with A's key");
  assert.equal(result.replayed, false, "A never got through, so B's answer is the original");
  assert.deepEqual(statuses409(await tab.log(b)), [], "no 409: A's requests were over before B sent");
  await expectOneOrder(account, key);
  expectNoPageErrors(b);
  return { closedAt, leaseExpires, takeoverAt: firstAttemptOfB.at };
}

test("first tab closed mid-retry (Web Locks): the waiting tab takes over with the same key, one order", { timeout: TEST_TIMEOUT_MS }, async () => {
  const { closedAt, takeoverAt } = await closeMidRetry({ withoutWebLocks: false });
  // The browser releases a closed tab's Web Lock at once.
  assert.ok(takeoverAt - closedAt < 2_000, `tab B took over ${takeoverAt - closedAt} ms after the close`);
});

test("first tab closed mid-retry (no Web Locks: localStorage lease): the waiting tab takes over once the lease expires", { timeout: TEST_TIMEOUT_MS }, async () => {
  const { closedAt, leaseExpires, takeoverAt } = await closeMidRetry({ withoutWebLocks: true });
  // Not before the lease expires (nobody renews it any more), and soon after (B polls every 250 ms).
  assert.ok(takeoverAt >= leaseExpires - 20, `tab B took over ${leaseExpires - takeoverAt} ms before the lease expired`);
  assert.ok(takeoverAt - leaseExpires < 1_500, `tab B took over ${takeoverAt - leaseExpires} ms after the lease expired`);
  assert.ok(takeoverAt - closedAt <= LEASE_TTL_MS + 1_500, `tab B took over ${takeoverAt - closedAt} ms after the close`);
});

// --- the lease path's corner cases (regressions: both fixed in src/web/lock.rs) -------------------

test("no Web Locks and localStorage full: begin and send do not wait forever for a lease they cannot write", { timeout: TEST_TIMEOUT_MS }, async () => {
  const account = freshAccount("full");
  const context = await newContext(account, { withoutWebLocks: true });
  const page = await openTab(context);
  const outcome = await page.evaluate(async ([request]) => {
    let chunk = "x".repeat(1 << 20);
    for (let i = 0; ; i++) {
      try { localStorage.setItem(`fill${i}`, chunk); } catch { if (chunk.length < 16) break; chunk = chunk.slice(chunk.length / 2); }
    }
    const t = window.__tabs;
    const created = t.create({ namespace: request.headers["x-account-id"], storage: "local" });
    const timeout = (what) => new Promise((resolve) => setTimeout(() => resolve({ hung: what }), 5_000));
    const begun = await Promise.race([t.begin("checkout:cart-42", request), timeout("begin")]);
    if (begun?.hung) return begun;
    t.send();
    return { created, result: await Promise.race([t.wait(), timeout("send")]) };
  }, [orderRequest(account)]);
  assert.ok(!outcome.hung, `${outcome.hung} never settled: the lease could not be written and it kept waiting for it`);
  assert.equal(outcome.created.storage, "memory", "a full localStorage falls back to memory");
  assert.ok(outcome.result.ok, JSON.stringify(outcome.result));
  assert.equal(outcome.result.status, 201);
  await expectOneOrder(account, outcome.result.key);
  expectNoPageErrors(page);
});

test("no Web Locks: a tab does not renew (take back) a lease another tab now holds", { timeout: TEST_TIMEOUT_MS }, async () => {
  const account = freshAccount("renew");
  const context = await newContext(account, { withoutWebLocks: true });
  const page = await openTab(context);
  // X-Fault: every attempt fails before work, and the 10 s backoff keeps the tab holding its lease.
  const request = orderRequest(account);
  request.headers["x-fault"] = "fail-before-work";
  await tab.create(page, { namespace: account, storage: "local", retry: { baseDelayMs: 10_000, maxDelayMs: 10_000, jitter: "none" } });
  await tab.begin(page, "checkout:cart-42", request);
  await tab.send(page);
  await waitFor(async () => ofType(await tab.log(page), "retry").length >= 1, "the first retry");
  const slot = `idempotent-fetch:lease:idempotent-fetch:send:${account}:checkout:cart-42`;
  const { held, other, after } = await page.evaluate(async (slot) => {
    const held = localStorage.getItem(slot);
    // Another tab took the lease: this tab's lapsed (its timers were throttled in the background).
    const other = `ffffffffffffffff:${Date.now() + 60_000}`;
    localStorage.setItem(slot, other);
    await new Promise((resolve) => setTimeout(resolve, 2_500)); // > one renewal period (TTL / 3)
    return { held, other, after: localStorage.getItem(slot) };
  }, slot);
  assert.ok(held && !held.startsWith("ffffffffffffffff:"), `the sending tab held the lease: ${held}`);
  assert.equal(after, other, "the renewal timer overwrote the other tab's lease: both tabs now believe they hold it");
  expectNoPageErrors(page);
});
