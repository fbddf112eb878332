// The slow cart, in a real browser (IF_BROWSER: chromium, firefox, webkit) against the REAL reference
// server on SQLite and on PostgreSQL: a cart of 1 mug, Pay while the server takes 3 s over it, a reload
// 1 s later that rebuilds the cart with 2 mugs, and the intent store's onMismatch "replace". The first
// request is still running at the server, so the store must not give the intent a new key: it settles the
// old key (in flight: wait; then done: its order is the answer). And a key the server never saw is fenced
// before the new request goes out, so that key's request arriving late is refused. Either way: one order.
//
// Needs: the package (cargo xtask build), the reference server, the engine's browser and driver
// (tests/support/browsers.mjs), PostgreSQL's binaries (IF_PG_BINDIR, as the fault suite's cluster).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { collectPageErrors, engineName, launchBrowser, openLibPage, timeoutScale } from "../support/browsers.mjs";
import { pkgDir, pkgMissing } from "../support/paths.mjs";
import { startReferenceServer } from "../support/reference-server.mjs";
import { startCluster } from "../fault/pg-cluster.mjs";

const pageDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "slow-cart");
const DATABASES = ["SQLite", "PostgreSQL"];

let browser;
let cluster;
const servers = {};
const pageErrors = [];
let counter = 0;

before(async () => {
  browser = await launchBrowser({ what: `the slow-cart test in ${engineName}`, also: [pkgMissing()] });
  cluster = await startCluster();
  const db = `slowcart_${engineName.toLowerCase()}`;
  await cluster.createDatabase(db);
  const databaseUrl = cluster.url(db);
  servers.SQLite = await startReferenceServer({ www: pageDir, pkg: pkgDir, label: "slow-cart-sqlite" });
  servers.PostgreSQL = await startReferenceServer({ www: pageDir, pkg: pkgDir, label: "slow-cart-pg", databaseUrl });
});

after(async () => {
  await browser?.close();
  for (const server of Object.values(servers)) await server?.stop();
  await cluster?.stop();
});

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A signed-in page of a new account on `server`: { account, page, context }. */
async function shopper(server) {
  counter += 1;
  const account = `slow${counter}${Date.now().toString(36)}`;
  const context = await browser.newContext();
  await server.signIn(context, account);
  const page = await context.newPage();
  collectPageErrors(page, pageErrors);
  await openLibPage(page, `${server.url}/page.html`);
  return { account, page, context };
}

/** Waits until the page's store has sent its first attempt; resolves the snapshot. */
async function firstAttempt(page) {
  for (let i = 0; i < 200; i++) {
    const snapshot = await page.evaluate(() => window.__snapshot());
    if (snapshot.attempt >= 1 && snapshot.key) return snapshot;
    await pause(25);
  }
  throw new Error("the first attempt was never sent");
}

/** The reload: the same tab navigates to the page again (the store's fetch is aborted, storage stays). */
async function reload(page, server) {
  await openLibPage(page, `${server.url}/page.html`);
}

for (const database of DATABASES) {
  test(`${engineName}, ${database}: a reload 1 s after Pay rebuilds the cart (1 mug, then 2) while the first request still runs; replace waits for it: its order is the one order, and the page says it answers the earlier cart`, { timeout: 60_000 * timeoutScale }, async () => {
    const server = servers[database];
    const { account, page, context } = await shopper(server);
    try {
      await page.evaluate((namespace) => window.__pay({ namespace, qty: 1, fault: "latency=3000" }), account);
      const first = await firstAttempt(page);
      await pause(1000);
      await reload(page, server);
      await page.evaluate((namespace) => window.__pay({ namespace, qty: 2, onMismatch: "replace" }), account);
      const done = await page.evaluate(() => window.__done());
      assert.equal(done.phase, "succeeded", `${done.errorCode}: ${done.message}`);
      assert.equal(done.key, first.key, "the first request's key: it was done");
      assert.equal(done.answerFor, "earlier");
      const orders = await server.orders(account);
      assert.equal(orders.length, 1, `one order: ${JSON.stringify(orders)}`);
      assert.deepEqual(orders[0].items.map(({ sku, qty }) => ({ sku, qty })), [{ sku: "mug", qty: 1 }], "the first cart");
      assert.equal(done.data.id, orders[0].id, "the page shows the order that exists");
    } finally {
      await context.close().catch(() => {});
    }
  });

  test(`${engineName}, ${database}: a key the server never saw is fenced before replace sends the new cart; its request arriving late is refused 410: one order, the new cart`, { timeout: 60_000 * timeoutScale }, async () => {
    const server = servers[database];
    const { account, page, context } = await shopper(server);
    try {
      // Every attempt of the first page is refused before any work (503): the key was never seen.
      await page.evaluate((namespace) => window.__pay({ namespace, qty: 1, fault: "fail-before-work" }), account);
      const first = await firstAttempt(page);
      await reload(page, server);
      await page.evaluate((namespace) => window.__pay({ namespace, qty: 2, onMismatch: "replace" }), account);
      const done = await page.evaluate(() => window.__done());
      assert.equal(done.phase, "succeeded", `${done.errorCode}: ${done.message}`);
      assert.notEqual(done.key, first.key, "a new key");
      assert.equal(done.answerFor, "current");
      // The first page's request, still on its way (a proxy's queue, a slow upload), arrives now.
      const late = await fetch(`${server.url}/api/orders`, {
        method: "POST",
        headers: { authorization: `Bearer ${await server.session(account)}`, "content-type": "application/json", "idempotency-key": first.key },
        body: JSON.stringify({ items: [{ sku: "mug", qty: 1 }] }),
      });
      assert.equal(late.status, 410, "the late request is refused");
      assert.equal((await late.json()).code, "key-fenced");
      const orders = await server.orders(account);
      assert.equal(orders.length, 1, `one order: ${JSON.stringify(orders)}`);
      assert.deepEqual(orders[0].items.map(({ sku, qty }) => ({ sku, qty })), [{ sku: "mug", qty: 2 }], "the new cart");
      assert.equal(orders[0].idempotencyKey, done.key);
    } finally {
      await context.close().catch(() => {});
    }
  });
}

test("no uncaught errors in the pages", () => {
  assert.deepEqual(pageErrors, []);
});
