// The integrations on a real PostgreSQL (a throwaway cluster this test starts), over HTTP on 127.0.0.1:
// Express, Fastify and Hono each pass the browser package's conformance check, and a handler that throws
// after writing its row leaves no row. A deliberately broken handler (it writes its row on the pool, outside
// the transaction it was given) passes the check but is caught by the crash test: its row stays.
// The Next.js wrapper runs here as Next calls it (a web Request in, a Response out) on @hono/node-server;
// next.test.mjs runs the check against the built Next example app as well. The Next wrapper also takes its
// endpoint as a promise or a maker: each way answers and replays the same. Hono's handler answering through
// `answer` and Next's answering a plain answer (no Response read back) pass the same check.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";

import { serve } from "@hono/node-server";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import pg from "pg";
import { idempotent, idempotentEndpoint, keyStatusRoutes, REPLAYED_HEADER } from "idempotent-endpoint";
import * as fastifyPlugin from "idempotent-endpoint/fastify";
import * as hono from "idempotent-endpoint/hono";
import { idempotentRoute, keyStatusRoute } from "idempotent-endpoint/next";

import { startCluster } from "../../../tests/fault/pg-cluster.mjs";
import { assertCheckPasses, crashLeaves, CRASH } from "./support/conformance.mjs";

let cluster;
let pool;
let endpoint;
const closers = [];
const rows = async (sku) => (await pool.query("SELECT count(*)::int AS n FROM orders WHERE sku = $1", [sku])).rows[0].n;

/**
 * The business handler: a body without a string `sku` is a 400 (stored, as the check's case 4 wants);
 * else one order row through `db` (the given transaction, or the pool when broken), then a crash when asked.
 */
async function placeOrder(db, json) {
  if (typeof json?.sku !== "string") return { status: 400, body: { title: "an order needs a sku" } };
  const { rows: [order] } = await db.query("INSERT INTO orders (sku) VALUES ($1) RETURNING id", [json.sku]);
  if (json.sku.startsWith(CRASH)) throw new Error("the payment provider timed out");
  return { status: 201, body: { id: order.id, sku: json.sku } };
}

/** Each framework's app: the protected route at /api/orders (its handler writing through `db(tx)`) and key status. */
const apps = {
  async express(db) {
    const app = express();
    app.post("/api/orders", idempotent(endpoint, async ({ json, tx }) => placeOrder(db(tx), json)));
    keyStatusRoutes(app, endpoint, { path: "/api/idempotency-keys/:key" });
    // Express's own error handler would print the crash's stack: answer 500 quietly.
    app.use((_error, _req, res, _next) => res.status(500).end());
    const server = await new Promise((resolve) => {
      const s = app.listen(0, "127.0.0.1", () => resolve(s));
    });
    closers.push(() => new Promise((r) => server.close(r)));
    return `http://127.0.0.1:${server.address().port}`;
  },
  async fastify(db) {
    const app = Fastify();
    await app.register(fastifyPlugin.idempotentPlugin, { endpoint });
    app.post("/api/orders", { config: { idempotent: true } }, async (request, reply) => {
      const { tx, json } = request.idempotency;
      const { status, body } = await placeOrder(db(tx), json);
      return reply.code(status).send(body);
    });
    fastifyPlugin.keyStatusRoutes(app, endpoint, { path: "/api/idempotency-keys/:key" });
    closers.push(() => app.close());
    return app.listen({ port: 0, host: "127.0.0.1" });
  },
  hono: (db) => honoApp(db, (c, { status, body }) => c.json(body, status)),
  "hono, answer()": (db) => honoApp(db, (c, placed) => c.get("idempotency").answer(placed)),
  next: (db) => nextApp(db, ({ status, body }) => Response.json(body, { status })),
  "next, a plain answer": (db) => nextApp(db, (placed) => placed),
};

/** Hono's app, its handler answering the order with `respond` (c.json, or `answer`). */
async function honoApp(db, respond) {
  const app = new Hono();
  app.post("/api/orders", hono.idempotency(endpoint), async (c) => {
    const { tx, json } = c.get("idempotency");
    return respond(c, await placeOrder(db(tx), json));
  });
  const status = hono.keyStatusHandlers(endpoint);
  app.get("/api/idempotency-keys/:key", status.get).post(status.post);
  app.onError((_error, c) => c.text("", 500));
  const server = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
  });
  closers.push(() => new Promise((r) => server.close(r)));
  return `http://127.0.0.1:${server.address().port}`;
}

/** Next's route handler, its handler answering the order with `respond` (a Response, or the plain answer). */
async function nextApp(db, respond) {
  const POST = idempotentRoute(endpoint, async (_request, { tx, json }) => respond(await placeOrder(db(tx), json)));
  const status = keyStatusRoute(endpoint);
  // What Next's router does for app/api/orders/route.ts and app/api/idempotency-keys/[key]/route.ts.
  const fetch = async (request) => {
    const { pathname } = new URL(request.url);
    if (pathname === "/api/orders" && request.method === "POST") return POST(request).catch(() => new Response(null, { status: 500 }));
    const key = /^\/api\/idempotency-keys\/([^/]+)$/.exec(pathname)?.[1];
    const handler = key === undefined ? undefined : status[request.method];
    if (handler) return handler(request, { params: Promise.resolve({ key: decodeURIComponent(key) }) });
    return new Response(null, { status: 404 });
  };
  const server = await new Promise((resolve) => {
    const s = serve({ fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
  });
  closers.push(() => new Promise((r) => server.close(r)));
  return `http://127.0.0.1:${server.address().port}`;
}

before(async () => {
  cluster = await startCluster();
  cluster.createDatabase("conformance");
  pool = new pg.Pool({ connectionString: cluster.url("conformance"), max: 10 });
  endpoint = idempotentEndpoint({ database: pool, onError: () => undefined });
  await endpoint.install();
  await pool.query("CREATE TABLE orders (id SERIAL PRIMARY KEY, sku TEXT NOT NULL)");
});

after(async () => {
  for (const close of closers) await close();
  await pool?.end();
  cluster?.stop();
});

for (const [name, start] of Object.entries(apps)) {
  describe(`${name} on PostgreSQL`, () => {
    it("passes the browser package's check; a handler that throws after its write leaves no row", async () => {
      const base = await start((tx) => tx);
      await assertCheckPasses(`${base}/api/orders`, "/api/idempotency-keys/{key}");
      assert.equal(await crashLeaves(`${base}/api/orders`, rows), 0);
    });

    it("a broken handler (its row written on the pool, outside the transaction) is caught: the crash leaves its row", async () => {
      const base = await start(() => pool);
      await assertCheckPasses(`${base}/api/orders`, "/api/idempotency-keys/{key}");
      assert.equal(await crashLeaves(`${base}/api/orders`, rows), 1, "the row written outside the transaction survived the rollback");
    });
  });
}

describe("next: the endpoint given as it is, as a promise, or as a maker", () => {
  it("each way stores the answer and replays it; the maker is called once", async () => {
    let made = 0;
    const refs = { "as it is": endpoint, "a promise": Promise.resolve(endpoint), "a maker": async () => ((made += 1), endpoint) };
    for (const [way, ref] of Object.entries(refs)) {
      const POST = idempotentRoute(ref, async (_request, { tx, json }) => {
        const { status, body } = await placeOrder(tx, json);
        return Response.json(body, { status });
      });
      const key = randomUUID();
      const sku = `ref-${randomUUID()}`;
      const send = () =>
        POST(new Request("http://127.0.0.1/api/orders", { method: "POST", headers: { "content-type": "application/json", "idempotency-key": key }, body: JSON.stringify({ sku }) }));
      const first = await send();
      const second = await send();
      assert.equal(first.status, 201, way);
      assert.equal(second.status, 201, way);
      assert.equal(second.headers.get(REPLAYED_HEADER), "true", way);
      assert.equal(await second.text(), await first.text(), way);
      assert.equal(await rows(sku), 1, way);
    }
    assert.equal(made, 1);
  });
});
