// Fastify 5 with the plugin: routes marked `idempotent: true` and the key-status routes pass the HTTP suite
// (support/http-suite.mjs), and the plugin under Fastify's `inject`. The plugin's hooks are on the marked
// routes registered after it and on no other route; a marked route it does not reach throws a typed error
// from `request.idempotency` and stores nothing; a protected route's own hooks still run.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, it } from "node:test";

import { PGlite } from "@electric-sql/pglite";
import Fastify from "fastify";
import { idempotentEndpoint } from "idempotent-endpoint";
import { IdempotencyNotSetError, idempotentPlugin, keyStatusRoutes } from "idempotent-endpoint/fastify";

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

/** An endpoint on a fresh PGlite with an orders table, given to `body`, closed after it. */
async function withEndpoint(body) {
  const db = new PGlite();
  try {
    await db.exec("CREATE TABLE orders (id SERIAL PRIMARY KEY, sku TEXT NOT NULL)");
    const endpoint = idempotentEndpoint({ database: db });
    await endpoint.install();
    await body(endpoint, async (table) => (await db.query(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n);
  } finally {
    await db.close();
  }
}

const json = { "content-type": "application/json" };

describe("Fastify 5 plugin: only the routes it protects", () => {
  it("puts no hook on an unprotected route: a malformed key and a body that is not JSON reach the route and Fastify's parser", async () => {
    await withEndpoint(async (endpoint, count) => {
      const app = Fastify();
      await app.register(idempotentPlugin, { endpoint });
      app.post("/api/orders", { config: { idempotent: true } }, async (request, reply) => reply.code(201).send({ key: request.idempotency.key }));
      app.post("/plain", async (request) => ({ got: request.body }));
      await app.ready();
      // Fastify's own listing of each route's hooks, the app's and the route's: the protected route has the
      // plugin's five, the unprotected one none.
      const routes = app.printRoutes({ includeHooks: true, commonPrefix: false });
      const lines = routes.split("\n");
      const hooksOf = (route) => {
        const at = lines.findIndex((line) => line.endsWith(`${route} (POST)`));
        assert.ok(at >= 0, `${route} in ${routes}`);
        const hooks = [];
        for (const line of lines.slice(at + 1)) {
          const hook = /• \((\w+)\)/.exec(line);
          if (hook === null) break;
          hooks.push(hook[1]);
        }
        return hooks;
      };
      assert.deepEqual(hooksOf("/api/orders"), ["onRequest", "preParsing", "preHandler", "onSend", "onError"], routes);
      assert.deepEqual(hooksOf("/plain"), [], routes);

      const malformed = await app.inject({ method: "POST", url: "/plain", headers: { ...json, "idempotency-key": "a b" }, payload: JSON.stringify({ sku: "mug" }) });
      assert.equal(malformed.statusCode, 200, malformed.body);
      assert.deepEqual(malformed.json(), { got: { sku: "mug" } });
      // Fastify's JSON parser answers a broken body, with its own error (ours is a problem with `invalid-body`).
      const broken = await app.inject({ method: "POST", url: "/plain", headers: { ...json, "idempotency-key": randomUUID() }, payload: "{\"sku\":" });
      assert.equal(broken.statusCode, 400);
      assert.match(broken.headers["content-type"], /^application\/json/);
      assert.match(broken.json().code, /^FST_ERR_CTP_/);
      // The same two on the protected route are the plugin's problems.
      const refused = await app.inject({ method: "POST", url: "/api/orders", headers: { ...json, "idempotency-key": "a b" }, payload: "{}" });
      assert.equal(refused.statusCode, 400);
      assert.match(refused.headers["content-type"], /^application\/problem\+json/);
      const notJson = await app.inject({ method: "POST", url: "/api/orders", headers: { ...json, "idempotency-key": randomUUID() }, payload: "{\"sku\":" });
      assert.equal(notJson.statusCode, 400);
      assert.match(notJson.body, /invalid-body/);
      assert.equal(await count("idempotency_records"), 0);
      await app.close();
    });
  });

  it("a marked route registered before the plugin is not protected: request.idempotency throws IdempotencyNotSetError (undefined in a child registered before it), nothing is stored", async () => {
    await withEndpoint(async (endpoint, count) => {
      const app = Fastify();
      const errors = [];
      app.setErrorHandler((error, _request, reply) => {
        errors.push(error);
        return reply.code(500).send({ name: error.name, message: error.message });
      });
      app.post("/api/orders", { config: { idempotent: true } }, async (request, reply) => {
        const { tx, json: body } = request.idempotency;
        await tx.query("INSERT INTO orders (sku) VALUES ($1)", [body.sku]);
        return reply.code(201).send({});
      });
      // A child context registered before the plugin has neither its hooks nor its decoration.
      await app.register(async (child) => {
        child.post("/api/child", { config: { idempotent: true } }, async (request) => ({ idempotency: String(request.idempotency) }));
      });
      await app.register(idempotentPlugin, { endpoint });
      const answer = await app.inject({ method: "POST", url: "/api/orders", headers: { ...json, "idempotency-key": randomUUID() }, payload: JSON.stringify({ sku: "mug" }) });
      assert.equal(answer.statusCode, 500, answer.body);
      assert.equal(errors.length, 1);
      assert.ok(errors[0] instanceof IdempotencyNotSetError, String(errors[0]));
      assert.equal(answer.json().name, "IdempotencyNotSetError");
      assert.match(answer.json().message, /request\.idempotency exists only on routes with `config: \{ idempotent: true \}` registered after idempotentPlugin/);
      const child = await app.inject({ method: "POST", url: "/api/child", headers: { ...json, "idempotency-key": randomUUID() }, payload: "{}" });
      assert.deepEqual(child.json(), { idempotency: "undefined" });
      assert.equal(await count("idempotency_records"), 0);
      assert.equal(await count("orders"), 0);
      await app.close();
    });
  });

  it("runs a protected route's own hooks (a function or an array) after the plugin's, the app's before: the route's preHandler finds request.idempotency", async () => {
    await withEndpoint(async (endpoint, count) => {
      const app = Fastify();
      await app.register(idempotentPlugin, { endpoint });
      const ran = [];
      // The app's hooks run before the plugin's: request.idempotency is not there yet.
      app.addHook("preHandler", async (request) => {
        if (!request.routeOptions.config.idempotent) return;
        try {
          void request.idempotency;
          ran.push("app preHandler");
        } catch (error) {
          ran.push(`app preHandler ${error.name}`);
        }
      });
      // One array for two routes: the plugin leaves the caller's array as it was.
      const onRequest = [(_request, _reply, done) => void (ran.push("onRequest"), done())];
      const own = {
        onRequest,
        preHandler: async (request) => void ran.push(`preHandler ${request.idempotency.key}`),
        onSend: async (_request, reply, payload) => {
          ran.push("onSend");
          reply.header("x-own-hook", "ran");
          return payload;
        },
        onError: async () => void ran.push("onError"),
      };
      app.post("/api/orders", { config: { idempotent: true }, ...own }, async (request, reply) => {
        const { tx, json: body } = request.idempotency;
        await tx.query("INSERT INTO orders (sku) VALUES ($1)", [body.sku]);
        return reply.code(201).send({ sku: body.sku });
      });
      app.post("/api/fails", { config: { idempotent: true }, ...own }, async () => {
        throw new Error("the payment provider timed out");
      });
      assert.equal(onRequest.length, 1);
      const key = randomUUID();
      const post = (url) => app.inject({ method: "POST", url, headers: { ...json, "idempotency-key": key }, payload: JSON.stringify({ sku: "mug" }) });
      const first = await post("/api/orders");
      assert.equal(first.statusCode, 201, first.body);
      assert.equal(first.headers["x-own-hook"], "ran");
      assert.deepEqual(ran, ["onRequest", "app preHandler IdempotencyNotSetError", `preHandler ${key}`, "onSend"]);
      // The replay is answered by the plugin's preHandler: the route's preHandler and handler do not run.
      ran.length = 0;
      const again = await post("/api/orders");
      assert.equal(again.headers["idempotent-replayed"], "true");
      assert.equal(again.body, first.body);
      assert.deepEqual(ran, ["onRequest", "app preHandler IdempotencyNotSetError", "onSend"]);
      ran.length = 0;
      const failing = randomUUID();
      const failed = await app.inject({ method: "POST", url: "/api/fails", headers: { ...json, "idempotency-key": failing }, payload: "{}" });
      assert.equal(failed.statusCode, 500);
      assert.deepEqual(ran, ["onRequest", "app preHandler IdempotencyNotSetError", `preHandler ${failing}`, "onError", "onSend"]);
      assert.equal(await count("orders"), 1);
      assert.equal(await count("idempotency_records"), 1);
      await app.close();
    });
  });
});
