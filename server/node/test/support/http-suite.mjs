// The HTTP suite every framework integration passes, over real HTTP on 127.0.0.1 and PGlite on disk: the
// README's route protects the endpoint (the order once, its replay marked, 422, key status done, a fence),
// bad input gets a problem answer and stores nothing, and a handler that throws rolls back its row and the
// key row. Each framework's test file only builds its app (`listen`).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";

import { PGlite } from "@electric-sql/pglite";
import { idempotentEndpoint } from "idempotent-endpoint";

/**
 * Runs the suite against the app `listen(endpoint)` serves: POST /api/orders inserting `{ sku }` into
 * `orders` in the given transaction and answering 201 `{ id, sku }` (bodies over 1,024 bytes refused), and
 * the key-status routes at /api/idempotency-keys/:key. `listen` resolves to `{ base, close }`.
 */
export function httpSuite(name, listen) {
  let dir;
  let db;
  let app;
  const count = async (table) => (await db.query(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n;
  const post = (key, body, headers = {}) =>
    fetch(`${app.base}/api/orders`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(key === null ? {} : { "idempotency-key": key }), ...headers },
      body,
    });
  const keyStatus = (key, init) => fetch(`${app.base}/api/idempotency-keys/${encodeURIComponent(key)}`, init);

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), `idempotent-endpoint-${name.split(" ")[0].toLowerCase()}-`));
    db = new PGlite(path.join(dir, "data"));
    await db.exec("CREATE TABLE orders (id SERIAL PRIMARY KEY, sku TEXT NOT NULL)");
    const endpoint = idempotentEndpoint({ database: db });
    await endpoint.install();
    app = await listen(endpoint);
  });

  after(async () => {
    await app?.close();
    await db?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  describe(name, () => {
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
      const status = await keyStatus(key);
      assert.equal(status.headers.get("cache-control"), "no-store");
      const known = await status.json();
      assert.equal(known.status, "done");
      assert.equal(known.response.body, body);
      const fenced = randomUUID();
      assert.equal((await (await keyStatus(fenced, { method: "POST" })).json()).status, "fenced");
      assert.equal((await post(fenced, JSON.stringify({ sku: "mug" }))).status, 410);
      assert.equal(await count("orders"), 1);
    });

    it("bad input gets a problem answer and stores nothing", async () => {
      const keysBefore = await count("idempotency_records");
      const ordersBefore = await count("orders");
      const cases = [
        ["no key", post(null, "{}"), 400, "missing-idempotency-key"],
        ["a malformed key", post("a b", "{}"), 400, "malformed-idempotency-key"],
        ["an over-long key", post("k".repeat(256), "{}"), 400, "malformed-idempotency-key"],
        ["two keys", fetch(`${app.base}/api/orders`, { method: "POST", headers: [["content-type", "application/json"], ["idempotency-key", "a"], ["idempotency-key", "b"]], body: "{}" }), 400, "malformed-idempotency-key"],
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
      assert.equal(await count("idempotency_records"), keysBefore, "no key row stored");
      assert.equal(await count("orders"), ordersBefore, "no order");
    });

    it("a handler that throws: 500, its row and the key row rolled back (key status unknown)", async () => {
      const key = randomUUID();
      const orders = await count("orders");
      const broken = await post(key, JSON.stringify({}));
      assert.equal(broken.status, 500, "sku NULL violates the column: the handler's insert throws");
      assert.equal((await (await keyStatus(key)).json()).status, "unknown");
      assert.equal(await count("orders"), orders);
    });
  });
}
