// Reconciliation against the REAL reference server (server/, its GET /api/idempotency-keys/{key}), in
// Node through the built package: when every answer is lost, or the key has expired, the client
// asks the server what became of the key and resolves with the order that exists, never a second
// one; a key the server never saw is sent once more with the same key within its lifetime, and is
// reported unknown (EXPIRED, saying so) after it. Attempts that never reach the server come from a
// real proxy on 127.0.0.1 that resets the first requests before forwarding them.
// Run: node --test tests/js/reconcile.test.mjs (the xtask's layer f runs it).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import path from "node:path";

import { importPackage, root } from "../support/paths.mjs";
import { startReferenceServer } from "../support/reference-server.mjs";

const { IdempotentClient } = await importPackage();
let server;
let counter = 0;

before(async () => {
  server = await startReferenceServer({ www: path.join(root, "www"), label: "reconcile" });
});
after(async () => {
  await server?.stop();
});

/** A fresh account, its bearer header, and a client that asks the server about its keys. */
async function account(options = {}) {
  counter += 1;
  const name = `reconcile${counter}${Date.now().toString(36)}`;
  const token = await server.session(name);
  const client = new IdempotentClient({
    namespace: name,
    retry: { baseDelayMs: 1, maxDelayMs: 5, maxAttempts: 2, ...options.retry },
    statusUrl: `${server.url}/api/idempotency-keys/{key}`,
    ...options.client,
  });
  return { name, client, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" } };
}

const ORDER = JSON.stringify({ items: [{ sku: "mug", qty: 1 }] });

/** A proxy to the server that resets the first `resets` order requests before forwarding them. */
function resettingProxy(resets) {
  let left = resets;
  const proxy = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      if (req.method === "POST" && left > 0) {
        left -= 1;
        req.socket.destroy();
        return;
      }
      const target = new URL(server.url);
      const up = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (upRes) => {
        res.writeHead(upRes.statusCode, upRes.headers);
        upRes.pipe(res);
      });
      up.on("error", () => req.socket.destroy());
      up.end(Buffer.concat(chunks));
    });
  });
  return new Promise((resolve) => proxy.listen(0, "127.0.0.1", () => resolve({
    url: `http://127.0.0.1:${proxy.address().port}`,
    close: () => new Promise((done) => { proxy.closeAllConnections(); proxy.close(() => done()); }),
  })));
}

test("every answer lost (committed, then the connection dropped): the order that exists is the answer, no second order", async () => {
  const { name, client, headers } = await account();
  const op = await client.begin("pay", {
    url: `${server.url}/api/orders`,
    headers: { ...headers, "x-fault": "drop-after-commit" },
    body: ORDER,
  });
  const result = await op.send();
  assert.deepEqual([result.status, result.ok, result.replayed], [201, true, true]);
  const order = await result.response.json();
  assert.equal(order.idempotencyKey, op.key);
  const orders = await server.orders(name);
  assert.deepEqual(orders.map((o) => o.id), [order.id], "exactly one order, the one reported");
});

test("an expired key whose answers were all lost resolves through reconciliation with its order, never re-sent", async () => {
  // The first question finds no server (a dead port): the send ends exhausted with its key.
  let asked = 0;
  const statusUrl = (key) => (asked++ === 0 ? "http://127.0.0.1:9/down" : `${server.url}/api/idempotency-keys/${encodeURIComponent(key)}`);
  const { name, client, headers } = await account({ client: { keyTtlMs: 1_000, statusUrl }, retry: { maxAttempts: 1 } });
  const op = await client.begin("pay", { url: `${server.url}/api/orders`, headers: { ...headers, "x-fault": "drop-after-commit" }, body: ORDER });
  await assert.rejects(op.send(), { code: "RETRIES_EXHAUSTED" });
  assert.equal((await server.orders(name)).length, 1, "the server did the work; its answer was lost");
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  const result = await op.send();
  assert.deepEqual([result.status, result.ok, result.replayed, result.attempts], [201, true, true, 0]);
  const orders = await server.orders(name);
  assert.deepEqual(orders.map((o) => o.id), [(await result.response.json()).id], "the order that exists, no second one");
});

test("a key the server never saw is sent once more with the same key, and makes one order", async () => {
  const proxy = await resettingProxy(2);
  try {
    const { name, client, headers } = await account({ client: { statusUrl: `${proxy.url}/api/idempotency-keys/{key}` } });
    const op = await client.begin("pay", { url: `${proxy.url}/api/orders`, headers, body: ORDER });
    const result = await op.send();
    assert.deepEqual([result.status, result.ok, result.replayed, result.attempts], [201, true, false, 3]);
    assert.equal((await result.response.json()).idempotencyKey, op.key, "the same key");
    assert.equal((await server.orders(name)).length, 1);
  } finally {
    await proxy.close();
  }
});

test("a key the server never saw, past its lifetime, is EXPIRED saying the server has no record of it", async () => {
  const { name, client, headers } = await account({ client: { keyTtlMs: 500 } });
  const op = await client.begin("pay", { url: `${server.url}/api/orders`, headers, body: ORDER });
  await new Promise((resolve) => setTimeout(resolve, 600));
  const error = await op.send().then(() => undefined, (e) => e);
  assert.equal(error?.code, "EXPIRED");
  assert.match(error.message, /the server has no record of it/);
  assert.equal((await server.orders(name)).length, 0, "nothing was sent, nothing was done");
});

test("another account's key is unknown to this one: never its answer", async () => {
  const a = await account({ retry: { maxAttempts: 1 } });
  const op = await a.client.begin("pay", { url: `${server.url}/api/orders`, headers: a.headers, body: ORDER });
  assert.equal((await op.send()).status, 201);
  const b = await account();
  const response = await fetch(`${server.url}/api/idempotency-keys/${op.key}`, { headers: b.headers });
  assert.deepEqual(await response.json(), { status: "unknown" });
});
