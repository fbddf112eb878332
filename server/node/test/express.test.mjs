// Express 5 with the middleware, over real HTTP on 127.0.0.1 and PGlite on disk: a protected endpoint in a
// few lines, its key-status routes, and bad input refused with a problem answer that stores nothing.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";

import { PGlite } from "@electric-sql/pglite";
import express from "express";
import { idempotent, idempotentEndpoint, keyStatusRoutes } from "idempotent-endpoint";

let dir;
let db;
let server;
let base;
const count = async (text) => (await db.query(text)).rows[0].n;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "idempotent-endpoint-express-"));
  db = new PGlite(path.join(dir, "data"));
  await db.exec("CREATE TABLE orders (id SERIAL PRIMARY KEY, sku TEXT NOT NULL)");

  // The README's route (its Express, Fastify or Hono section), on PGlite.
  const endpoint = idempotentEndpoint({ database: db });
  await endpoint.install();
  const app = express();
  app.post("/api/orders", idempotent(endpoint, async ({ json, tx }) => {
    const { rows } = await tx.query("INSERT INTO orders (sku) VALUES ($1) RETURNING id", [json.sku]);
    return { status: 201, body: { id: rows[0].id, sku: json.sku } };
  }, { maxBodyBytes: 1024 }));
  keyStatusRoutes(app, endpoint, { path: "/api/idempotency-keys/:key" });

  await new Promise((resolve) => (server = app.listen(0, "127.0.0.1", resolve)));
  base = `http://127.0.0.1:${server.address().port}`;
});

after(async () => {
  server?.closeAllConnections();
  await new Promise((r) => (server ? server.close(r) : r()));
  await db?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const post = (key, body, headers = {}) =>
  fetch(`${base}/api/orders`, { method: "POST", headers: { "content-type": "application/json", ...(key === null ? {} : { "idempotency-key": key }), ...headers }, body });

describe("Express 5 middleware", () => {
  it("protects the route: the order once, its replay marked, key status done", async () => {
    const key = randomUUID();
    const first = await post(key, JSON.stringify({ sku: "mug" }));
    assert.equal(first.status, 201);
    const body = await first.text();
    assert.equal(JSON.parse(body).sku, "mug", "the handler's answer is sent");
    const again = await post(key, JSON.stringify({ sku: "mug" }));
    assert.equal(again.status, 201);
    assert.equal(again.headers.get("idempotent-replayed"), "true");
    assert.equal(await again.text(), body);
    const status = await fetch(`${base}/api/idempotency-keys/${encodeURIComponent(key)}`);
    assert.equal(status.headers.get("cache-control"), "no-store");
    const known = await status.json();
    assert.equal(known.status, "done");
    assert.equal(known.response.body, body);
    const fence = await fetch(`${base}/api/idempotency-keys/${randomUUID()}`, { method: "POST" });
    assert.equal((await fence.json()).status, "fenced");
    assert.equal(await count("SELECT count(*)::int AS n FROM orders"), 1);
  });

  it("bad input gets a problem answer and stores nothing", async () => {
    const before = await count("SELECT count(*)::int AS n FROM idempotency_records");
    const cases = [
      ["no key", post(null, "{}"), 400, "missing-idempotency-key"],
      ["a malformed key", post("a b", "{}"), 400, "malformed-idempotency-key"],
      ["an over-long key", post("k".repeat(256), "{}"), 400, "malformed-idempotency-key"],
      ["two keys", fetch(`${base}/api/orders`, { method: "POST", headers: [["content-type", "application/json"], ["idempotency-key", "a"], ["idempotency-key", "b"]], body: "{}" }), 400, "malformed-idempotency-key"],
      ["a huge body", post(randomUUID(), JSON.stringify({ sku: "x".repeat(4096) })), 413, "body-too-large"],
      ["a body that is not JSON", post(randomUUID(), "sku=mug", { "content-type": "application/x-www-form-urlencoded" }), 400, "invalid-body"],
      ["broken JSON", post(randomUUID(), "{\"sku\":"), 400, "invalid-body"],
    ];
    for (const [what, pending, status, code] of cases) {
      const answer = await pending;
      assert.equal(answer.status, status, what);
      assert.equal(answer.headers.get("content-type"), "application/problem+json", what);
      assert.equal((await answer.json()).code, code, what);
    }
    assert.equal(await count("SELECT count(*)::int AS n FROM idempotency_records"), before, "no key row stored");
    assert.equal(await count("SELECT count(*)::int AS n FROM orders"), 1, "no order");
  });

  it("a handler that throws: Express answers 500 and nothing is stored (key status unknown)", async () => {
    const key = randomUUID();
    const broken = await post(key, JSON.stringify({}));
    assert.equal(broken.status, 500, "sku NULL violates the column: the handler's insert throws");
    const status = await (await fetch(`${base}/api/idempotency-keys/${key}`)).json();
    assert.equal(status.status, "unknown");
  });
});
