// The README recipes for HTTP clients on top of client.fetch (tests/js/http-clients/recipes.mjs: ky,
// ofetch, axios's fetch adapter) in a real browser (IF_BROWSER: chromium, firefox, webkit), from a page
// the reference server serves (tests/js/http-clients/page.html, the clients through an import map),
// with faults on as in the Node twin (http-clients.test.mjs): every committed answer lost, then 50%
// 503s and 50% lost answers. One click (plus "Try again" with the same intent) is one order, every
// attempt carrying that order's key.
//
// Needs: the package (cargo xtask build), the reference server, the engine's browser and driver
// (tests/support/browsers.mjs), the clients (npm ci in tests/js/http-clients, done here when stale).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";

import { collectPageErrors, engineName, launchBrowser, openLibPage, throwPageFailure, timeoutScale } from "../support/browsers.mjs";
import { pkgDir, pkgMissing } from "../support/paths.mjs";
import { startReferenceServer } from "../support/reference-server.mjs";
import { clientsDir, installClients } from "./http-clients/install.mjs";
import { recipes } from "./http-clients/recipes.mjs";

// Not counted here: how many attempts the library made. A browser itself re-sends a POST whose reused
// keep-alive connection closed without a byte, before the library sees an error (the Node twin counts).
const PHASES = [
  { label: "every committed answer lost", faults: { dropAfterCommit: 1 } },
  { label: "50% 503s and 50% lost answers", faults: { failBeforeWork: 0.5, dropAfterCommit: 0.5 } },
];

let browser;
let server;
const pageErrors = [];

before(async () => {
  installClients();
  browser = await launchBrowser({ what: `the HTTP client recipes in ${engineName}`, also: [pkgMissing()] });
  server = await startReferenceServer({ www: clientsDir, pkg: pkgDir, label: "http-clients-browser" });
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

for (const name of Object.keys(recipes)) {
  test(`${name} on top of client.fetch in ${engineName}: one click is one order, one key, under lost answers and 503s`, { timeout: 90_000 * timeoutScale }, async () => {
    for (const [i, phase] of PHASES.entries()) {
      const account = `acct_${name}_${i}`;
      const context = await browser.newContext();
      try {
        await server.signIn(context, account); // the page's requests carry its session cookie
        const page = await context.newPage();
        collectPageErrors(page, pageErrors);
        await openLibPage(page, `${server.url}/page.html`);
        await server.setFaults(phase.faults);
        let outcome;
        try {
          outcome = await page.evaluate(([recipe, namespace]) => window.__pay(recipe, namespace), [name, account]);
        } finally {
          await server.setFaults({});
        }
        throwPageFailure(outcome, "RecipeFailure");
        const what = `${name}, ${phase.label}`;
        const orders = await server.orders(account);
        assert.equal(orders.length, 1, `${what}: one click made ${orders.length} orders`);
        assert.deepEqual(outcome.keys, [orders[0].idempotencyKey], `${what}: every attempt carried the order's key`);
        assert.equal(outcome.order.id, orders[0].id, `${what}: the HTTP client's answer is that order`);
        assert.deepEqual(orders[0].items.map(({ sku, qty }) => ({ sku, qty })), [{ sku: "mug", qty: 2 }], `${what}: the body arrived`);
        console.log(`${what}: ${outcome.clicks} click(s), ${outcome.attempts} attempt(s), one key, order ${orders[0].id}`);
      } finally {
        await context.close().catch(() => {});
      }
    }
  });
}

test("no uncaught errors in the pages", () => {
  assert.deepEqual(pageErrors, []);
});
