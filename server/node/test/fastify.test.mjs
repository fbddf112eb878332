// Fastify 5 with the plugin, over real HTTP on 127.0.0.1 and PGlite on disk: routes marked
// `idempotent: true` run in the key row's transaction, key-status routes, bad input refused before any
// row, a throwing handler rolls back.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";

import { PGlite } from "@electric-sql/pglite";
import Fastify from "fastify";
import { idempotentEndpoint } from "idempotent-endpoint";
import { idempotentPlugin, keyStatusRoutes } from "idempotent-endpoint/fastify";

let dir;
let db;
let app;
let base;
const count = async (text) => (await db.query(text)).rows[0].n;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "idempotent-endpoint-fastify-"));
  db = new PGlite(path.join(dir, "data"));
  await db.exec("CREATE TABLE orders (id SERIAL PRIMARY KEY, sku TEXT NOT NULL)");

  // The README's route (its Express, Fastify or Hono section), on PGlite.
  const endpoint = idempotentEndpoint({ database: db });
  await endpoint.install();
  app = Fastify();
  await app.register(idempotentPlugin, { endpoint, maxBodyBytes: 1024 });
  app.post("/api/orders", { config: { idempotent: true } }, async (request, reply) => {
    const { tx, json } = request.idempotency;
    const { rows } = await tx.query("INSERT INTO orders (sku) VALUES ($1) RETURNING id", [json.sku]);
    return reply.code(201).send({ id: rows[0].id, sku: json.sku });
  });
  keyStatusRoutes(app, endpoint, { path: "/api/idempotency-keys/:key" });

  base = await app.listen({ port: 0, host: "127.0.0.1" });
});

after(async () => {
  await app?.close();
  await db?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const post = (key, body, headers = {}) =>
  fetch(`${base}/api/orders`, { method: "POST", headers: { "content-type": "application/json", ...(key === null ? {} : { "idempotency-key": key }), ...headers }, body });

describe("Fastify 5 plugin", () => {
  it("protects the route: the order once, its replay marked, 422, key status done, a fence", async () => {
    const key = randomUUID();
    const first = await post(key, JSON.stringify({ sku: "mug" }));
    assert.equal(first.status, 201);
    const body = await first.text();
    assert.equal(JSON.parse(body).sku, "mug", "the handler's answer is sent");
    const again = await post(key, JSON.stringify({ sku: "mug" }));
    assert.equal(again.status, 201);
    assert.equal(again.headers.get("idempotent-replayed"), "true");
    assert.equal(await again.text(), body);
    assert.equal((await post(key, JSON.stringify({ sku: "cup" }))).status, 422);
    const known = await (await fetch(`${base}/api/idempotency-keys/${key}`)).json();
    assert.equal(known.status, "done");
    assert.equal(known.response.body, body);
    const fenced = randomUUID();
    assert.equal((await (await fetch(`${base}/api/idempotency-keys/${fenced}`, { method: "POST" })).json()).status, "fenced");
    assert.equal((await post(fenced, JSON.stringify({ sku: "mug" }))).status, 410);
    assert.equal(await count("SELECT count(*)::int AS n FROM orders"), 1);
  });

  it("bad input gets a problem answer and stores nothing", async () => {
    const before = await count("SELECT count(*)::int AS n FROM idempotency_records");
    const cases = [
      ["no key", post(null, "{}"), 400, "missing-idempotency-key"],
      ["a malformed key", post("a b", "{}"), 400, "malformed-idempotency-key"],
      ["an over-long key", post("k".repeat(256), "{}"), 400, "malformed-idempotency-key"],
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
  });

  it("a handler that throws: 500, its row and the key row rolled back (key status unknown)", async () => {
    const key = randomUUID();
    const orders = await count("SELECT count(*)::int AS n FROM orders");
    const broken = await post(key, JSON.stringify({}));
    assert.equal(broken.status, 500, "sku NULL violates the column: the handler's insert throws");
    assert.equal((await (await fetch(`${base}/api/idempotency-keys/${key}`)).json()).status, "unknown");
    assert.equal(await count("SELECT count(*)::int AS n FROM orders"), orders);
  });
});
