// The README recipes for HTTP clients on top of client.fetch (tests/js/http-clients/recipes.mjs: ky,
// ofetch, axios's fetch adapter) in Node, against the reference server with faults on: first every
// committed order loses its answer (so the library must retry, and gets the server's replay), then
// half the requests fail before the work (503) and half the committed orders lose their answer. Each recipe's one
// click (plus "Try again" with the same intent) must make exactly one order, every attempt carrying
// the key of that order. The browser twin is http-clients-browser.test.mjs.
//
// Needs: the package (cargo xtask build), the reference server (tests/support/reference-server.mjs)
// and the clients (npm ci in tests/js/http-clients, done here when stale).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";

import { importPackage } from "../support/paths.mjs";
import { startReferenceServer } from "../support/reference-server.mjs";
import { clientsDir, installClients } from "./http-clients/install.mjs";
import { payOnce, recipes } from "./http-clients/recipes.mjs";

installClients();
const lib = await importPackage();
const load = (name) => import(createRequire(path.join(clientsDir, "package.json")).resolve(name));
const libs = { ky: (await load("ky")).default, ofetch: (await load("ofetch")).ofetch, axios: (await load("axios")).default };

let server;
before(async () => {
  server = await startReferenceServer({ www: clientsDir, label: "http-clients" });
});
after(async () => {
  await server?.stop();
});

const PHASES = [
  { label: "every committed answer lost", faults: { dropAfterCommit: 1 }, retried: true },
  { label: "50% 503s and 50% lost answers", faults: { failBeforeWork: 0.5, dropAfterCommit: 0.5 }, retried: false },
];

for (const name of Object.keys(recipes)) {
  test(`${name} on top of client.fetch: one click is one order, one key, under lost answers and 503s`, { timeout: 90_000 }, async () => {
    for (const [i, phase] of PHASES.entries()) {
      const account = `acct_${name}_${i}`;
      const headers = { authorization: `Bearer ${await server.session(account)}` };
      await server.setFaults(phase.faults);
      let outcome;
      try {
        outcome = await payOnce({
          lib, libs, name, url: `${server.url}/api/orders`, headers, namespace: account, storage: "memory",
          retry: { baseDelayMs: 5, maxDelayMs: 50, maxAttempts: 12 },
        });
      } finally {
        await server.setFaults({});
      }
      const what = `${name}, ${phase.label}`;
      const orders = await server.orders(account);
      assert.equal(orders.length, 1, `${what}: one click made ${orders.length} orders`);
      assert.deepEqual(outcome.keys, [orders[0].idempotencyKey], `${what}: every attempt carried the order's key`);
      assert.equal(outcome.order.id, orders[0].id, `${what}: the HTTP client's answer is that order`);
      assert.deepEqual(orders[0].items.map(({ sku, qty }) => ({ sku, qty })), [{ sku: "mug", qty: 2 }], `${what}: the body arrived`);
      if (phase.retried) assert.ok(outcome.attempts >= 2, `${what}: the library retried the lost answer (${outcome.attempts} attempts)`);
      console.log(`${what}: ${outcome.clicks} click(s), ${outcome.attempts} attempt(s), one key, order ${orders[0].id}`);
    }
  });
}
