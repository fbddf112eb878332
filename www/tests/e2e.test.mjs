// End-to-end tests of the demo checkout page: the real server binary (own temp SQLite db, port 0), the
// built package (pkg/) and a real browser: the engine IF_BROWSER names (chromium, firefox,
// webkit; tests/support/browsers.mjs). Every test uses its own browser context (fresh localStorage)
// and its own account (a session cookie), so order counts are exact.
// Faults are server-wide, so the tests run one after another and reset them afterwards.
//
// Needs: the reference server (IF_SERVER_BIN or target/server, built when missing:
// tests/support/reference-server.mjs), the package (cargo xtask build) and the engine's
// browser and driver (tests/support/browsers.mjs).
import { test, before, after, afterEach } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { capabilities, collectPageErrors, engine, engineName, launchBrowser, offlineUnsupported, timeoutScale } from "../../tests/support/browsers.mjs";
import { pkgDir, pkgMissing, root } from "../../tests/support/paths.mjs";
import { startReferenceServer, startService, startSupervisedServer } from "../../tests/support/reference-server.mjs";

// Each run writes its screenshots under target/ (ignored by git) for a person to look at; they are
// never compared (the tests assert states and orders instead). IF_SCREENSHOT_DIR overrides the place.
// Chromium's go there, the other engines' into a folder named after the engine.
const screenshotDir = path.join(process.env.IF_SCREENSHOT_DIR ?? path.join(root, "target", "screenshots"), engine === "chromium" ? "" : engine);
const TEST_TIMEOUT_MS = 45_000 * timeoutScale;

let server;
let browser;
const contexts = new Set();

const api = (pathname, options) => server.api(pathname, options);
const setFaults = (faults) => server.setFaults(faults);
const ordersOf = (account) => server.orders(account);

/** A fresh browser context (own localStorage); page errors fail the test. */
async function newContext() {
  const context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
  contexts.add(context);
  return context;
}

async function openCheckout(context, account, query = "") {
  const page = await context.newPage();
  page.errors = collectPageErrors(page);
  await page.goto(`${server.url}/?fast=1&account=${account}${query}`);
  return page;
}

const stateOf = (page) => page.locator("main").getAttribute("data-state");
async function waitForState(page, states, timeout = 30_000) {
  const wanted = [].concat(states);
  await page.waitForFunction((w) => w.includes(document.querySelector("main")?.dataset.state), wanted, { timeout })
    .catch(async (error) => {
      const status = await page.locator("#status").textContent().catch(() => "?");
      const detail = await page.locator("#status-detail").textContent().catch(() => "?");
      throw new Error(`page never reached ${wanted.join("|")}; it is ${await stateOf(page)}: ${status} ${detail}\n${error.message}`);
    });
}
const shownKey = async (page) => (await page.locator("#intent-key").textContent()).trim();

/** Polls the server's orders until the page says paid, then checks: exactly one order, made with the shown key. */
async function expectOneOrder(page, account) {
  const deadline = Date.now() + 30_000;
  let orders = [];
  while (Date.now() < deadline) {
    orders = await ordersOf(account);
    assert.ok(orders.length <= 1, `more than one order for one click: ${JSON.stringify(orders.map((o) => o.idempotencyKey))}`);
    if (await stateOf(page) === "paid") break;
    await new Promise((r) => setTimeout(r, 200));
  }
  await waitForState(page, "paid", 1000);
  orders = await ordersOf(account);
  assert.equal(orders.length, 1, "one click, one order");
  const key = await shownKey(page);
  assert.match(key, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, "the page shows a UUID v4 key");
  assert.equal(orders[0].idempotencyKey, key, "the order was made with the key the page shows");
  assert.equal((await page.locator("#order-id").textContent()).trim(), orders[0].id, "the page shows the order id");
  return orders[0];
}

function assertNoPageErrors(...pages) {
  for (const page of pages) assert.deepEqual(page.errors.map(String), [], "no uncaught errors in the page");
}

before(async () => {
  browser = await launchBrowser({ what: `the e2e tests in ${engineName}`, also: [pkgMissing()] });
  server = await startReferenceServer({ www: path.join(root, "www"), pkg: pkgDir, label: "e2e" });
  mkdirSync(screenshotDir, { recursive: true });
});

afterEach(async () => {
  for (const context of contexts) await context.close().catch(() => {});
  contexts.clear();
  if (server) await setFaults({}).catch(() => {});
});

after(async () => {
  await browser?.close().catch(() => {});
  await server?.stop();
});

test("with every fault on, one click makes exactly one order", { timeout: TEST_TIMEOUT_MS }, async () => {
  const account = "e2e_faults";
  await setFaults({ failBeforeWork: 0.5, dropAfterCommit: 0.6, status429: 0.4, retryAfterSecs: 0, latencyMs: 30, latencyProbability: 0.5 });
  const page = await openCheckout(await newContext(), account);
  await waitForState(page, "idle");
  await page.click("#pay");
  const order = await expectOneOrder(page, account);
  assert.equal(order.items.length, 1);
  assert.match(await page.locator("#status").textContent(), /^Paid: order ord_/);
  assert.match(await page.locator("#orders-summary").textContent(), /1 with this payment's key/);

  // A reload after paying shows the paid cart, not a new payment.
  const key = await shownKey(page);
  await page.reload();
  await waitForState(page, "paid", 10_000);
  assert.equal(await shownKey(page), key);
  assert.equal((await ordersOf(account)).length, 1);
  assertNoPageErrors(page);
});

test("a reload while retrying resumes with the same key, and still one order", { timeout: TEST_TIMEOUT_MS }, async () => {
  const account = "e2e_reload";
  await setFaults({ failBeforeWork: 1, retryAfterSecs: 0 });
  const page = await openCheckout(await newContext(), account);
  await waitForState(page, "idle");
  await page.click("#pay");
  await page.waitForFunction(() => Number(document.getElementById("attempt").textContent) >= 2, null, { timeout: 10_000 });
  const key = await shownKey(page);
  const cartId = (await page.locator("#cart-id").textContent()).trim();

  await page.reload();
  await page.waitForFunction(() => /Resuming your payment/.test(document.getElementById("status-detail").textContent), null, { timeout: 10_000 });
  assert.equal(await shownKey(page), key, "same key after the reload");
  assert.equal((await page.locator("#cart-id").textContent()).trim(), cartId, "same cart after the reload");
  assert.match(await page.locator("#status-detail").textContent(), new RegExp(`same key ${key.slice(0, 8)}`));
  assert.ok(await page.locator("#pay").isDisabled(), "Pay is disabled while the payment is being resumed");
  assert.equal((await ordersOf(account)).length, 0, "the server failed every attempt so far");

  await setFaults({});
  await expectOneOrder(page, account);
  assert.equal(await shownKey(page), key, "paid with the key from before the reload");
  assertNoPageErrors(page);
});

test("background (?background=1): the tab is closed while the server is down, the service worker pays once with the page's key", { timeout: TEST_TIMEOUT_MS }, async () => {
  const account = "e2e_background";
  await setFaults({ failBeforeWork: 1, retryAfterSecs: 0 });
  const context = await newContext();
  // Another tab of the shop stays open (it registered the service worker); the paying tab is closed.
  const other = await openCheckout(context, account, "&background=1");
  await waitForState(other, "idle");
  assert.equal(await other.evaluate(() => navigator.serviceWorker.ready.then((r) => Boolean(r.active))), true);
  const payer = await openCheckout(context, account, "&background=1");
  await waitForState(payer, "idle");
  await payer.click("#pay");
  await payer.waitForFunction(() => Number(document.getElementById("attempt").textContent) >= 2, null, { timeout: 10_000 });
  const key = await shownKey(payer);
  assertNoPageErrors(payer);
  await payer.close();
  await setFaults({});
  if (capabilities.cdp) {
    // Chromium: the Background Sync the page registered, delivered now (the browser would on its own).
    const cdp = await context.newCDPSession(other);
    const registrations = [];
    cdp.on("ServiceWorker.workerRegistrationUpdated", ({ registrations: updated }) => registrations.push(...updated));
    await cdp.send("ServiceWorker.enable");
    const ours = () => registrations.find((r) => !r.isDeleted && r.scopeURL === `${server.url}/`);
    for (let i = 0; i < 100 && !ours(); i++) await new Promise((r) => setTimeout(r, 50)); // the events follow enable
    const registration = ours();
    assert.ok(registration, JSON.stringify(registrations));
    await cdp.send("ServiceWorker.dispatchSyncEvent", { origin: server.url, registrationId: registration.registrationId, tag: "idempotent-fetch", lastChance: false });
    const deadline = Date.now() + 15_000;
    while ((await ordersOf(account)).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  }
  // Firefox and WebKit have no Background Sync: opening the shop again wakes the worker.
  const reopened = await openCheckout(context, account, "&background=1");
  await expectOneOrder(reopened, account);
  assert.equal(await shownKey(reopened), key, "paid with the key of the closed tab");
  if (capabilities.cdp) assert.match(await reopened.locator("#status").textContent(), /^Paid in the background: order ord_/);
  assertNoPageErrors(other, reopened);
});

test("two tabs paying the same cart at once make one order", { timeout: TEST_TIMEOUT_MS }, async () => {
  const account = "e2e_tabs";
  const context = await newContext();
  const first = await openCheckout(context, account);
  await waitForState(first, "idle");
  const second = await openCheckout(context, account);
  await waitForState(second, "idle");
  assert.equal(await second.locator("#cart-id").textContent(), await first.locator("#cart-id").textContent(), "both tabs show one cart");

  // Slow and lossy: each attempt stays in flight a while, and some answers are lost after the commit.
  await setFaults({ latencyMs: 400, latencyProbability: 1, dropAfterCommit: 0.5 });
  await Promise.all([first.click("#pay"), second.click("#pay")]);
  await Promise.all([waitForState(first, "paid"), waitForState(second, "paid")]);

  const orders = await ordersOf(account);
  assert.equal(orders.length, 1, "one order for two tabs");
  assert.equal(await shownKey(first), orders[0].idempotencyKey);
  assert.equal(await shownKey(second), orders[0].idempotencyKey);
  // Exactly one send did the work; the other tab's send (same key) got the server's stored answer.
  const details = [await first.locator("#status-detail").textContent(), await second.locator("#status-detail").textContent()];
  assert.ok(details.some((d) => /replayed its answer/.test(d)), `one tab got the replay: ${JSON.stringify(details)}`);
  assertNoPageErrors(first, second);
});

test("offline: the payment waits for the network, then completes once", { timeout: TEST_TIMEOUT_MS, skip: capabilities.offline ? false : offlineUnsupported }, async () => {
  const account = "e2e_offline";
  const context = await newContext();
  const page = await openCheckout(context, account);
  await waitForState(page, "idle");

  await context.setOffline(true);
  await page.click("#pay");
  await waitForState(page, "offline", 10_000);
  assert.match(await page.locator("#status").textContent(), /offline/i);
  assert.ok(await page.locator("#offline-banner").isVisible(), "the offline banner is shown");
  const key = await shownKey(page);
  await page.waitForTimeout(500);
  assert.equal(await stateOf(page), "offline", "still waiting, not burning attempts");
  assert.equal((await ordersOf(account)).length, 0);
  await page.screenshot({ path: path.join(screenshotDir, "offline.png"), fullPage: true });

  await context.setOffline(false);
  await expectOneOrder(page, account);
  assert.equal(await shownKey(page), key, "the same key after coming back online");
  assertNoPageErrors(page);
});

test("gave up: Try again re-sends the same key", { timeout: TEST_TIMEOUT_MS }, async () => {
  const account = "e2e_gaveup";
  await setFaults({ failBeforeWork: 1, retryAfterSecs: 0 });
  const context = await newContext();
  // Chromium reports every answer the page gets: a load must not ask anything before its session.
  const unauthorized = [];
  if (capabilities.network) context.on("response", (r) => { if (r.status() === 401) unauthorized.push(r.url()); });
  const page = await openCheckout(context, account, "&attempts=2");
  await waitForState(page, "idle");
  await page.click("#pay");
  await waitForState(page, "gaveup", 10_000);
  // The page asked the server about the key before giving up (its answers were 503s): "unknown".
  const attemptsShown = Number(await page.locator("#attempt").textContent());
  assert.match(await page.locator("#status-detail").textContent(), new RegExp(`Gave up after ${attemptsShown} attempts`));
  const key = await shownKey(page);
  assert.ok(await page.locator("#try-again").isVisible(), "a Try again button is offered");
  assert.match(await page.locator("#status-detail").textContent(), /same key/);
  await page.screenshot({ path: path.join(screenshotDir, "gave-up.png"), fullPage: true });

  await setFaults({});
  await page.click("#try-again");
  await expectOneOrder(page, account);
  assert.equal(await shownKey(page), key, "Try again used the same key");
  // A fresh 201 after the outage: neither "every answer was lost" nor a count other than the page's.
  const total = Number(await page.locator("#attempt").textContent());
  assert.ok(total > attemptsShown, "the attempts shown count across sends");
  assert.match(await page.locator("#status-detail").textContent(), new RegExp(`^Confirmed after ${total} attempts\\.`));
  assert.deepEqual(unauthorized, [], "no 401 on load");
  assertNoPageErrors(page);
});

test("reconciliation: an expired key whose order exists resolves with that order through the key-status endpoint, never re-sent", { timeout: TEST_TIMEOUT_MS }, async () => {
  const account = "e2e_reconcile";
  await setFaults({});
  const page = await openCheckout(await newContext(), account);
  await waitForState(page, "idle");
  // In the page, with the package it serves: a client whose keys live 1 s; the intent's key is sent
  // once outside the library (its answer never reaches the client: the lost answer), then the key
  // expires, and the next send can only ask the server what became of it.
  const outcome = await page.evaluate(async () => {
    const { IdempotentClient } = await import("/pkg/index.js");
    const client = new IdempotentClient({ namespace: `reconcile-${Date.now()}`, keyTtlMs: 1000, statusUrl: "/api/idempotency-keys/{key}" });
    const request = { url: "/api/orders", headers: { "content-type": "application/json" }, body: JSON.stringify({ items: [{ sku: "mug", qty: 1 }] }) };
    const op = await client.begin("pay", request);
    const lost = await fetch("/api/orders", { method: "POST", headers: { ...request.headers, "idempotency-key": op.key }, body: request.body });
    await new Promise((resolve) => setTimeout(resolve, 1200));
    const result = await op.send();
    const order = await result.response.json();
    return { key: op.key, lost: lost.status, status: result.status, replayed: result.replayed, attempts: result.attempts, orderKey: order.idempotencyKey, state: op.state };
  });
  assert.equal(outcome.lost, 201, "the server made the order");
  assert.deepEqual([outcome.status, outcome.replayed, outcome.attempts, outcome.state], [201, true, 0, "succeeded"], JSON.stringify(outcome));
  assert.equal(outcome.orderKey, outcome.key);
  const orders = await ordersOf(account);
  assert.deepEqual(orders.map((o) => o.idempotencyKey), [outcome.key], "one order, the one the client found");
  assertNoPageErrors(page);
});

test("a failure the server stored and replays (store-500, like Stripe) is definite: declined, no order, a new key pays once", { timeout: TEST_TIMEOUT_MS }, async () => {
  const account = "e2e_stored500";
  // Every fresh key's outcome is stored as a 500 (no order is made) and replayed on each retry.
  await setFaults({ store500: 1 });
  const page = await openCheckout(await newContext(), account);
  await waitForState(page, "idle");
  const posts = [];
  if (capabilities.network) {
    page.on("response", (response) => {
      if (response.request().method() === "POST" && new URL(response.url()).pathname === "/api/orders") {
        posts.push({ status: response.status(), replayed: response.headers()["idempotent-replayed"] ?? null });
      }
    });
  }
  await page.click("#pay");
  await waitForState(page, "failed", 20_000);
  const firstKey = await shownKey(page);
  assert.equal(await page.locator("#status").textContent(), "Payment declined (500)");
  assert.deepEqual(await ordersOf(account), [], "a stored failure made no order");
  if (capabilities.network) {
    // The first 500 is fresh (retryable); the retry with the same key gets it replayed, which ends the
    // send: one retry, not maxAttempts of them.
    assert.deepEqual(posts, [{ status: 500, replayed: null }, { status: 500, replayed: "true" }]);
  }

  // The page retired that intent (discard); paying again is a new intent with a new key.
  await setFaults({});
  await page.click("#pay");
  await expectOneOrder(page, account);
  assert.notEqual(await shownKey(page), firstKey, "paying again after a definite failure uses a new key");
  assertNoPageErrors(page);
});

test("screenshots of the main states, faults switched from the page", { timeout: TEST_TIMEOUT_MS }, async () => {
  const account = "e2e_screens";
  const page = await openCheckout(await newContext(), account);
  await waitForState(page, "idle");
  await page.click('tr[data-sku] button[data-step="1"] >> nth=1'); // one more of the second product
  await page.waitForFunction(() => /Pay /.test(document.getElementById("pay").textContent));
  await page.screenshot({ path: path.join(screenshotDir, "idle.png"), fullPage: true });

  // The "Server down" preset on the page really configures the server.
  await page.click('[data-preset="down"]');
  await page.waitForFunction(() => document.querySelector('[data-preset="down"]').getAttribute("aria-pressed") === "true");
  assert.equal((await api("/api/faults")).failBeforeWork, 1);

  await page.click("#pay");
  await waitForState(page, "waiting", 10_000);
  await page.waitForFunction(() => /^Retrying in \d+\.\d s — server busy \(503\)$/.test(document.getElementById("countdown").textContent));
  await page.screenshot({ path: path.join(screenshotDir, "retrying.png"), fullPage: true });

  await page.click('[data-preset="off"]');
  const order = await expectOneOrder(page, account);
  assert.equal(order.items.length, 2, "the order has the cart's two lines");
  await page.waitForFunction(() => document.querySelector("#orders tr.mine") !== null);
  await page.screenshot({ path: path.join(screenshotDir, "paid.png"), fullPage: true });

  // New cart: a new intent (new key next time), the paid order stays.
  const oldCart = await page.locator("#cart-id").textContent();
  await page.click("#new-cart");
  await waitForState(page, "idle");
  assert.notEqual(await page.locator("#cart-id").textContent(), oldCart);
  assert.equal(await shownKey(page), "none yet");
  assertNoPageErrors(page);
});

test("blocked storage: the page warns, and still pays once", { timeout: TEST_TIMEOUT_MS }, async () => {
  const account = "e2e_nostorage";
  const context = await newContext();
  await context.addInitScript(() => {
    Object.defineProperty(window, "localStorage", {
      get() { throw new DOMException("The operation is insecure.", "SecurityError"); },
    });
  });
  await setFaults({ dropAfterCommit: 0.5, failBeforeWork: 0.3 });
  const page = await openCheckout(context, account);
  await waitForState(page, "idle");
  await page.waitForSelector("#storage-banner:not([hidden])", { timeout: 5000 });
  assert.match(await page.locator("#storage-banner").textContent(), /SecurityError.*keep the tab open/s);
  await page.click("#pay");
  await expectOneOrder(page, account);
  assertNoPageErrors(page);
});

test("crash after the charge (the page's preset): the server comes back and the order has one charge and one confirmation", { timeout: TEST_TIMEOUT_MS * 2 }, async () => {
  // The demo's set-up: a payment provider, a mail receiver and a server that is restarted when it dies.
  const provider = await startService("payment-provider", { label: "e2e-provider" });
  const mailbox = await startService("mail-receiver", { label: "e2e-mail" });
  let crashes = 0;
  const dbDir = mkdtempSync(path.join(os.tmpdir(), "if-e2e-crash-"));
  const supervised = await startSupervisedServer({
    www: path.join(root, "www"), pkg: pkgDir, label: "e2e-crash", dbFile: path.join(dbDir, "e2e.sqlite"),
    args: ["--provider-url", provider.url, "--mail-url", mailbox.url, "--key-lease-ms", "1500"],
  }, { onCrash: () => { crashes += 1; }, cleanup: () => rmSync(dbDir, { recursive: true, force: true }) });
  const shared = server;
  server = supervised;
  try {
    const account = "e2e_crash";
    const page = await openCheckout(await newContext(), account);
    await waitForState(page, "idle");
    await page.click('[data-preset="crash"]');
    await page.waitForFunction(() => document.querySelector('[data-preset="crash"]').getAttribute("aria-pressed") === "true");
    await page.click("#pay");
    const order = await expectOneOrder(page, account);
    assert.equal(crashes, 1, "the server crashed once, after the charge");
    const charges = (await provider.get("/charges")).charges;
    assert.equal(charges.length, 1, "one charge at the provider");
    assert.equal(charges[0].reference, order.id);
    assert.equal(order.chargeId, charges[0].id, "the order names that charge");
    await page.waitForFunction(() => /delivered/.test(document.querySelector("#orders .confirmation")?.textContent ?? ""), null, { timeout: 20_000 })
      .catch(async () => { await page.click("#refresh-orders"); await page.waitForFunction(() => /delivered/.test(document.querySelector("#orders .confirmation")?.textContent ?? ""), null, { timeout: 20_000 }); });
    assert.equal(await page.evaluate(() => document.querySelector("#orders .charge")?.textContent.trim()), charges[0].id, "the orders list shows the charge");
    const mail = await mailbox.get("/messages");
    assert.equal(mail.count, 1, "one confirmation at the receiver");
    assert.match(mail.messages[0].subject, new RegExp(order.id));
    // The server came back without faults: the panel no longer shows the crash preset as applied.
    await page.waitForFunction(() => document.querySelector('[data-preset="crash"]').getAttribute("aria-pressed") === "false"
      && document.querySelector('[data-preset="off"]').getAttribute("aria-pressed") === "true", null, { timeout: 10_000 });
    await page.screenshot({ path: path.join(screenshotDir, "crash-after-charge.png"), fullPage: true });
    assertNoPageErrors(page);
  } finally {
    server = shared;
    await supervised.stop();
    await provider.stop();
    await mailbox.stop();
  }
});
