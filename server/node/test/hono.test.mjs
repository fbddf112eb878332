// Hono 4 on @hono/node-server: the middleware protects the route after it, and the key-status handlers,
// pass the HTTP suite (support/http-suite.mjs); the body limits on both ways a body is read.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import http from "node:http";
import { after, before, describe, it } from "node:test";

import { PGlite } from "@electric-sql/pglite";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { idempotentEndpoint } from "idempotent-endpoint";
import { idempotency, keyStatusHandlers } from "idempotent-endpoint/hono";

import { httpSuite } from "./support/http-suite.mjs";

httpSuite("Hono 4 middleware", async (endpoint) => {
  const app = new Hono();
  app.post("/api/orders", idempotency(endpoint, { maxBodyBytes: 1024 }), async (c) => {
    const { tx, json } = c.get("idempotency");
    const { rows } = await tx.query("INSERT INTO orders (sku) VALUES ($1) RETURNING id", [json.sku]);
    return c.json({ id: rows[0].id, sku: json.sku }, 201);
  });
  const status = keyStatusHandlers(endpoint);
  app.get("/api/idempotency-keys/:key", status.get).post(status.post);

  let server;
  await new Promise((resolve) => (server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, resolve)));
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    close: async () => {
      server.closeAllConnections?.();
      await new Promise((r) => server.close(r));
    },
  };
});

// What the handler answers is what is stored and replayed, however its Response holds its body: text from
// Hono's helpers, bytes, a stream, or a plain answer through `answer` (its body not read back, and a header
// that a later middleware sets on its Response stored with it).
describe("Hono 4 middleware: the handler's Response stored as it is", () => {
  let db;
  let server;
  let base;
  const TEXT = "d\u00e9j\u00e0 vu \u2713";
  const answers = {
    json: (c) => c.json({ sku: "mug", note: TEXT }, 201),
    answer: (c) => c.get("idempotency").answer({ status: 201, body: { sku: "mug", note: TEXT }, headers: { "X-Order": "1" } }),
    "answer-text": (c) => c.get("idempotency").answer({ status: 202, body: TEXT, headers: { "content-type": "text/plain; charset=utf-8", "x-order": "1" } }),
    text: (c) => c.text(TEXT, 202, { "x-order": "1" }),
    bytes: () => new Response(new TextEncoder().encode(TEXT), { status: 201, headers: { "content-type": "text/plain; charset=utf-8" } }),
    stream: () =>
      new Response(
        new ReadableStream({
          start(controller) {
            controller.enqueue(new TextEncoder().encode(TEXT.slice(0, 3)));
            controller.enqueue(new TextEncoder().encode(TEXT.slice(3)));
            controller.close();
          },
        }),
        { status: 201, headers: { "content-type": "text/plain; charset=utf-8" } },
      ),
  };

  before(async () => {
    db = new PGlite();
    const endpoint = idempotentEndpoint({ database: db });
    await endpoint.install();
    const app = new Hono();
    for (const [name, answer] of Object.entries(answers)) app.post(`/${name}`, idempotency(endpoint), async (c) => answer(c));
    const late = async (c, next) => {
      await next();
      c.res.headers.set("x-late", "set after the handler");
    };
    app.post("/answer-late-header", idempotency(endpoint), late, async (c) => answers.answer(c));
    await new Promise((resolve) => (server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, resolve)));
    base = `http://127.0.0.1:${server.address().port}`;
  });

  after(async () => {
    server?.closeAllConnections?.();
    await new Promise((r) => server?.close(r));
    await db?.close();
  });

  const json = JSON.stringify({ sku: "mug", note: TEXT });
  const expected = { json, answer: json, "answer-late-header": json };
  for (const name of [...Object.keys(answers), "answer-late-header"]) {
    it(`${name}: the first answer is the handler's, the replay the same`, async () => {
      const key = randomUUID();
      const post = () => fetch(`${base}/${name}`, { method: "POST", headers: { "content-type": "application/json", "idempotency-key": key }, body: "{}" });
      const first = await post();
      const body = await first.text();
      assert.equal(body, expected[name] ?? TEXT);
      if (name.startsWith("answer")) {
        assert.equal(first.headers.get("x-order"), "1");
        assert.equal(first.headers.get("content-type"), name === "answer-text" ? "text/plain; charset=utf-8" : "application/json");
      }
      if (name === "answer-late-header") assert.equal(first.headers.get("x-late"), "set after the handler");
      const again = await post();
      assert.equal(again.headers.get("idempotent-replayed"), "true");
      assert.equal(again.status, first.status);
      assert.equal(await again.text(), body);
      for (const header of ["content-type", "x-order", "x-late"]) assert.equal(again.headers.get(header), first.headers.get(header), header);
      const stored = (await db.query("SELECT response_body FROM idempotency_records WHERE key = $1", [key])).rows[0];
      assert.equal(stored.response_body, body);
    });
  }
});

// The body as the web integrations read it (Hono here; Next's wrapper shares the code): a declared length
// is read whole against the deadline, a body of unknown length chunk by chunk against the limit.
describe("Hono 4 middleware: body limits", () => {
  let db;
  let server;
  let port;
  const limits = { maxBodyBytes: 1024, bodyTimeoutMs: 300 };

  before(async () => {
    db = new PGlite();
    await db.exec("CREATE TABLE orders (id SERIAL PRIMARY KEY, sku TEXT NOT NULL)");
    const endpoint = idempotentEndpoint({ database: db });
    await endpoint.install();
    const app = new Hono();
    app.post("/api/orders", idempotency(endpoint, limits), async (c) => {
      const { tx, json } = c.get("idempotency");
      const { rows } = await tx.query("INSERT INTO orders (sku) VALUES ($1) RETURNING id", [json.sku]);
      return c.json({ id: rows[0].id }, 201);
    });
    await new Promise((resolve) => (server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, resolve)));
    port = server.address().port;
  });

  after(async () => {
    server?.closeAllConnections?.();
    await new Promise((r) => server?.close(r));
    await db?.close();
  });

  /** A POST whose body is written by `write(req)`; resolves to the status and the problem code, if any. */
  const send = (headers, write) =>
    new Promise((resolve, reject) => {
      const req = http.request({ host: "127.0.0.1", port, path: "/api/orders", method: "POST", headers: { "content-type": "application/json", "idempotency-key": randomUUID(), ...headers } }, (res) => {
        let text = "";
        res.on("data", (d) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode, code: res.statusCode >= 400 ? JSON.parse(text).code : undefined }));
      });
      req.on("error", reject);
      write(req);
    });
  const count = async () => (await db.query("SELECT count(*)::int AS n FROM orders")).rows[0].n;

  it("a declared body that arrives whole is the order; one that stops halfway is 408 after the deadline", async () => {
    const body = JSON.stringify({ sku: "mug" });
    assert.deepEqual(await send({ "content-length": body.length }, (req) => req.end(body)), { status: 201, code: undefined });
    const started = Date.now();
    const slow = await send({ "content-length": body.length }, (req) => req.write(body.slice(0, 5)));
    assert.deepEqual(slow, { status: 408, code: "body-timeout" });
    assert.ok(Date.now() - started >= limits.bodyTimeoutMs, "answered at the deadline, not before");
    assert.equal(await count(), 1);
  });

  it("a body of unknown length (chunked) is the order within the limit, 413 over it", async () => {
    const before = await count();
    const chunked = (text) => (req) => {
      req.write(text.slice(0, 10));
      req.end(text.slice(10));
    };
    assert.equal((await send({ "transfer-encoding": "chunked" }, chunked(JSON.stringify({ sku: "cup" })))).status, 201);
    assert.deepEqual(await send({ "transfer-encoding": "chunked" }, chunked(JSON.stringify({ sku: "x".repeat(2048) }))), { status: 413, code: "body-too-large" });
    assert.equal(await count(), before + 1);
  });
});
