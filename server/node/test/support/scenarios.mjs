// The protocol scenarios every store must pass, run by pg.test.mjs (a real PostgreSQL) and
// pglite.test.mjs (PGlite on disk): the same endpoint API, the same statements, other databases.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { it } from "node:test";

/** A keyed request for the endpoint's `run`. */
export function keyed(key, body = { items: [{ sku: "mug", qty: 1 }] }, extra = {}) {
  return { method: "POST", path: "/api/orders", keyHeader: [key], body: new TextEncoder().encode(JSON.stringify(body)), ...extra };
}

/** A handler that inserts one order row through the transaction it is given, after `gate` resolves. */
export function orderHandler(key, gate = Promise.resolve()) {
  return async (tx) => {
    const id = `ord_${randomUUID()}`;
    await tx.query("INSERT INTO orders (id, idempotency_key) VALUES ($1, $2)", [id, key]);
    await gate;
    return { status: 201, body: { id }, headers: { location: `/api/orders/${id}` } };
  };
}

export const ORDERS = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, idempotency_key TEXT NOT NULL)";

const header = (answer, name) => answer.headers.filter(([n]) => n === name).map(([, v]) => v).join(", ");
const statusOf = (answer) => JSON.parse(answer.body).status;

/**
 * The scenarios over `env()`: `{ endpoint, count(sql, params), reported }` once the store is set up (the
 * key table and `orders` installed; `reported` collects what the endpoint's `onError` got).
 */
export function scenarios(env) {
  const orders = async (key) => (await env().count("SELECT count(*)::int AS n FROM orders WHERE idempotency_key = $1", [key]));
  const keyRows = async (key) => (await env().count("SELECT count(*)::int AS n FROM idempotency_records WHERE key = $1", [key]));

  it("a new key does the work once; the same request again is its replay, marked", async () => {
    const { endpoint } = env();
    const key = randomUUID();
    const first = await endpoint.run(keyed(key), orderHandler(key));
    assert.equal(first.outcome, "fresh");
    assert.equal(first.answer.status, 201);
    assert.equal(header(first.answer, "idempotent-replayed"), "");
    const again = await endpoint.run(keyed(`"${key}"`), orderHandler(key));
    assert.equal(again.outcome, "replay", "the sf-string form names the same key");
    assert.equal(again.answer.status, 201);
    assert.equal(again.answer.body, first.answer.body);
    assert.equal(header(again.answer, "idempotent-replayed"), "true");
    assert.equal(header(again.answer, "location"), header(first.answer, "location"));
    assert.equal(await orders(key), 1);
  });

  it("the same key with another request is 422 and does nothing", async () => {
    const { endpoint } = env();
    const key = randomUUID();
    await endpoint.run(keyed(key), orderHandler(key));
    const other = await endpoint.run(keyed(key, { items: [{ sku: "mug", qty: 2 }] }), orderHandler(key));
    assert.equal(other.outcome, "mismatch");
    assert.equal(other.answer.status, 422);
    assert.equal(JSON.parse(other.answer.body).code, "idempotency-key-reused");
    assert.equal(await orders(key), 1);
  });

  it("while a key's work is open: 409 with Retry-After, key status in_flight; then the replay", async () => {
    const { endpoint } = env();
    const key = randomUUID();
    let release;
    const gate = new Promise((r) => (release = r));
    let started;
    const inside = new Promise((r) => (started = r));
    const first = endpoint.run(keyed(key), async (tx) => {
      started();
      return orderHandler(key, gate)(tx);
    });
    await inside;
    const busy = await endpoint.run(keyed(key), orderHandler(key));
    assert.equal(busy.outcome, "in_flight");
    assert.equal(busy.answer.status, 409);
    assert.equal(header(busy.answer, "retry-after"), "1");
    const status = await endpoint.status(key);
    assert.equal(status.status, 200);
    assert.equal(statusOf(status), "in_flight");
    assert.equal(header(status, "retry-after"), "1");
    const settle = await endpoint.settle(key);
    assert.equal(statusOf(settle), "in_flight", "a key in flight is not fenced");
    release();
    assert.equal((await first).outcome, "fresh");
    assert.equal((await endpoint.run(keyed(key), orderHandler(key))).outcome, "replay");
    const done = JSON.parse((await endpoint.status(key)).body);
    assert.equal(done.status, "done");
    assert.equal(done.response.status, 201);
    assert.equal(done.response.headers["idempotent-replayed"], "true");
    assert.equal(await orders(key), 1);
  });

  it("a handler that throws rolls back its rows and the key row; a retry does the work", async () => {
    const { endpoint } = env();
    const key = randomUUID();
    await assert.rejects(
      endpoint.run(keyed(key), async (tx) => {
        await orderHandler(key)(tx);
        throw new Error("payment declined by a bug");
      }),
      /payment declined/,
    );
    assert.equal(await orders(key), 0, "the handler's row rolled back");
    assert.equal(await keyRows(key), 0, "the key row rolled back");
    assert.equal(statusOf(await endpoint.status(key)), "unknown");
    assert.equal((await endpoint.run(keyed(key), orderHandler(key))).outcome, "fresh");
    assert.equal(await orders(key), 1);
  });

  it("settling a key never seen fences it: a late request gets 410 and does nothing", async () => {
    const { endpoint } = env();
    const key = randomUUID();
    assert.equal(statusOf(await endpoint.status(key)), "unknown");
    const fenced = await endpoint.settle(key);
    assert.equal(fenced.status, 200);
    assert.equal(header(fenced, "cache-control"), "no-store");
    assert.equal(statusOf(fenced), "fenced");
    assert.equal(statusOf(await endpoint.settle(key)), "fenced", "settling again");
    let called = false;
    const late = await endpoint.run(keyed(key), async () => {
      called = true;
      return { status: 201 };
    });
    assert.equal(late.answer.status, 410);
    assert.equal(JSON.parse(late.answer.body).code, "key-fenced");
    assert.equal(called, false);
    assert.equal(await orders(key), 0);
    const doneKey = randomUUID();
    const done = await endpoint.run(keyed(doneKey), orderHandler(doneKey));
    const settledDone = JSON.parse((await endpoint.settle(doneKey)).body);
    assert.equal(settledDone.status, "done");
    assert.equal(settledDone.response.body, done.answer.body);
  });

  it("malformed and over-long keys are 400 and store nothing", async () => {
    const { endpoint } = env();
    for (const bad of ["", "a b", '"open', "k".repeat(256), "caf\u00e9"]) {
      const r = await endpoint.run(keyed(bad), orderHandler(bad));
      assert.equal(r.answer.status, 400, JSON.stringify(bad));
      assert.equal(JSON.parse(r.answer.body).code, "malformed-idempotency-key");
      assert.equal(await keyRows(bad), 0);
    }
    const none = await endpoint.run({ ...keyed("x"), keyHeader: [] }, orderHandler("x"));
    assert.equal(JSON.parse(none.answer.body).code, "missing-idempotency-key");
    assert.equal((await endpoint.status("a b")).status, 400);
  });

  it("an answer too large to store is refused and rolls back", async () => {
    const { endpoint } = env();
    const key = randomUUID();
    const r = await endpoint.run(keyed(key), async (tx) => {
      await orderHandler(key)(tx);
      return { status: 200, body: "x".repeat(16 * 1024 + 1) };
    });
    assert.equal(r.answer.status, 500);
    assert.match(String(env().reported.at(-1)), /larger than the 16384 bytes a key row stores/, "the cause is reported, not sent");
    assert.doesNotMatch(r.answer.body, /16384/);
    assert.equal(await orders(key), 0);
    assert.equal(await keyRows(key), 0);
  });
}

export { header, statusOf };
