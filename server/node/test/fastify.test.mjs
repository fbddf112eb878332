// Fastify 5 with the plugin: routes marked `idempotent: true` and the key-status routes pass the HTTP suite
// (support/http-suite.mjs), and the plugin under Fastify's `inject`.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, it } from "node:test";

import { PGlite } from "@electric-sql/pglite";
import Fastify from "fastify";
import { idempotentEndpoint } from "idempotent-endpoint";
import { idempotentPlugin, keyStatusRoutes } from "idempotent-endpoint/fastify";

import { httpSuite } from "./support/http-suite.mjs";

httpSuite("Fastify 5 plugin", async (endpoint) => {
  const app = Fastify();
  await app.register(idempotentPlugin, { endpoint, maxBodyBytes: 1024 });
  app.post("/api/orders", { config: { idempotent: true } }, async (request, reply) => {
    const { tx, json } = request.idempotency;
    const { rows } = await tx.query("INSERT INTO orders (sku) VALUES ($1) RETURNING id", [json.sku]);
    return reply.code(201).send({ id: rows[0].id, sku: json.sku });
  });
  keyStatusRoutes(app, endpoint, { path: "/api/idempotency-keys/:key" });

  const base = await app.listen({ port: 0, host: "127.0.0.1" });
  return { base, close: () => app.close() };
});

// Fastify's `inject` (light-my-request, how Fastify apps are usually tested) makes a request without
// Node's `headersDistinct`: the key is read from its headers, a repeated key field still refused.
describe("Fastify 5 plugin under inject", () => {
  it("answers, replays, and refuses a missing or repeated key", async () => {
    const db = new PGlite();
    try {
      await db.exec("CREATE TABLE orders (id SERIAL PRIMARY KEY, sku TEXT NOT NULL)");
      const endpoint = idempotentEndpoint({ database: db });
      await endpoint.install();
      const app = Fastify();
      await app.register(idempotentPlugin, { endpoint });
      app.post("/api/orders", { config: { idempotent: true } }, async (request, reply) => {
        const { tx, json } = request.idempotency;
        const { rows } = await tx.query("INSERT INTO orders (sku) VALUES ($1) RETURNING id", [json.sku]);
        return reply.code(201).send({ id: rows[0].id });
      });
      const post = (key) => app.inject({ method: "POST", url: "/api/orders", headers: { "content-type": "application/json", ...(key === undefined ? {} : { "idempotency-key": key }) }, payload: JSON.stringify({ sku: "mug" }) });
      const key = randomUUID();
      const first = await post(key);
      assert.equal(first.statusCode, 201, first.body);
      const again = await post(key);
      assert.equal(again.statusCode, 201);
      assert.equal(again.headers["idempotent-replayed"], "true");
      assert.equal(again.body, first.body);
      assert.equal((await post(undefined)).statusCode, 400);
      assert.equal((await post(`${randomUUID()}, ${randomUUID()}`)).statusCode, 400);
      assert.equal((await db.query("SELECT count(*)::int AS n FROM orders")).rows[0].n, 1);
      await app.close();
    } finally {
      await db.close();
    }
  });
});
