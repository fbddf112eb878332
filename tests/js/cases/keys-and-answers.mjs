// Keys, and how answers are classified: the key on every attempt, brought keys and `keyIn`, retried
// and definite statuses, server hints, replays and `replayStatus`.
// Cases of the JavaScript API (the runners and `ctx`: ../cases.mjs).

import { UUID_V4, assert, adder } from "./support.mjs";

export const cases = [];
const add = adder(cases);

add("same key on every attempt, a UUID v4 that the result reports", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client();
  const op = await client.begin("pay", { url: ctx.url("same", "503,500,reset,201"), body: "{}" });
  assert.match(op.key, UUID_V4, "key is a lowercase UUID v4");
  assert.equal(op.intentId, "pay");
  assert.equal(op.state, "pending");
  assert.equal(op.attempts, 0);
  assert.equal(op.resumed, false);
  assert.equal(op.lastStatus, null, "no status yet");
  const result = await op.send();
  assert.equal(result.status, 201);
  assert.equal(result.ok, true);
  assert.equal(result.replayed, false);
  assert.equal(result.attempts, 4);
  assert.equal(result.key, op.key);
  assert.equal(result.intentId, "pay");
  assert.ok(result.response instanceof Response, "result.response is a Response");
  assert.equal((await result.response.json()).key, op.key);
  assert.equal(op.state, "succeeded");
  assert.equal(op.attempts, 4);
  assert.equal(op.lastStatus, 201);
  const log = await ctx.log("same");
  assert.equal(log.length, 4);
  for (const entry of log) assert.equal(entry.key, op.key, `attempt ${entry.attempt} key`);
});

add("a brought key: sent as given on every attempt, reused after a reload, refused when malformed or when another key is brought for the intent", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { maxAttempts: 2 } });
  const key = "cs_test_a1B2c3D4e5F6g7H8i9J0";
  const request = { url: ctx.url("bk", "503,503,201"), body: "x" };
  const op = await client.begin("pay", request, { key });
  assert.equal(op.key, key);
  await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  // A reload (a new client over the same storage in a page): the stored key, brought again or not.
  const later = ctx.browser ? ctx.client() : client;
  const resumed = await later.begin("pay", request);
  assert.equal(resumed.key, key);
  assert.equal((await resumed.send()).status, 201);
  assert.deepEqual((await ctx.log("bk")).map((e) => e.key), [key, key, key], "the brought key on every attempt");
  for (const bad of ["too-short-key", "a key with spaces in it", `${"k".repeat(256)}`, "quote\"in-the-key-000"]) {
    const error = await assert.rejects(client.begin(`bad:${bad.length}`, request, { key: bad }), "INVALID_REQUEST");
    assert.ok(error.message.includes("16 to 255 characters"), error.message);
  }
  await assert.rejects(client.begin("x", request, { key: 42 }), "INVALID_OPTIONS");
  const other = await assert.rejects(client.begin("pay", request, { key: "another-key-0123456789" }), "INTENT_MISMATCH");
  assert.ok(other.message.includes(`with another key (key ${key})`), other.message);
  const replaced = await client.begin("pay", request, { key: "another-key-0123456789", replace: true });
  assert.equal(replaced.key, "another-key-0123456789");
  // The fetch-shaped form takes it too, in the header the server reads.
  const response = await client.fetch(ctx.url("bk2", "201"), { method: "POST", body: "y", key: "order_7f3a9c2e41b0d865" });
  assert.equal((await response.json()).key, "order_7f3a9c2e41b0d865");
});

add("keyIn: the key in a JSON body field (Square) or a GraphQL variable (Saleor), the same bytes on every attempt, no key header, the replay recognised; a body that cannot carry it is refused before anything is stored", async (ctx) => {
  const { assert } = ctx;
  const json = { "content-type": "application/json" };
  const square = ctx.client({ keyIn: { json: "idempotency_key" } });
  const op = await square.begin("pay", { url: ctx.url("sq", "503,201r"), headers: json, body: '{"amount_money":{"amount":1800,"currency":"EUR"}}' });
  const result = await op.send();
  assert.deepEqual([result.status, result.replayed], [201, true]);
  const log = await ctx.log("sq");
  assert.equal(log.length, 2);
  for (const entry of log) {
    assert.equal(entry.key, null, "no key header");
    assert.deepEqual(JSON.parse(entry.body), { amount_money: { amount: 1800, currency: "EUR" }, idempotency_key: op.key });
  }
  assert.equal(log[0].body, log[1].body, "the same bytes on every attempt");

  const saleor = ctx.client({ keyIn: { graphqlVariable: "idempotencyKey" } });
  const query = "mutation($id: ID!, $idempotencyKey: String) { checkoutComplete(id: $id, idempotencyKey: $idempotencyKey) { order { id } } }";
  const gql = await saleor.begin("complete", { url: ctx.url("gql", "201"), headers: json, body: JSON.stringify({ query, variables: { id: "Q2hlY2tvdXQ6MQ==" } }) });
  await gql.send();
  const [sent] = await ctx.log("gql");
  assert.deepEqual(JSON.parse(sent.body), { query, variables: { id: "Q2hlY2tvdXQ6MQ==", idempotencyKey: gql.key } });
  const bare = await saleor.begin("bare", { url: ctx.url("gql2", "201"), headers: json, body: JSON.stringify({ query }) });
  await bare.send();
  assert.deepEqual(JSON.parse((await ctx.log("gql2"))[0].body).variables, { idempotencyKey: bare.key }, "variables made when absent");

  for (const [client, body] of [[square, "not json"], [square, "[1,2]"], [square, '{"order_id":12345678901234567890}'], [saleor, JSON.stringify({ query, variables: [1] })]]) {
    await assert.rejects(client.begin(`bad:${body}`, { url: ctx.url("bad", "201"), headers: json, body }), "INVALID_REQUEST");
  }
  assert.equal((await square.pending()).filter((i) => i.intentId.startsWith("bad:")).length, 0, "nothing stored");
  assert.equal((await ctx.log("bad")).length, 0, "nothing sent");
  for (const keyIn of ["body", { json: "" }, { json: "a", graphqlVariable: "b" }, { graphqlVariable: 1 }]) {
    assert.throws(() => ctx.client({ keyIn }), "INVALID_OPTIONS");
  }
});

add("a new intent gets a new key; re-beginning the same intent keeps its key", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client();
  const request = { url: ctx.url("two", "201"), body: "a" };
  const a = await client.begin("a", request);
  const b = await client.begin("b", request);
  assert.notEqual(a.key, b.key);
  const again = await client.begin("a", request);
  assert.equal(again.key, a.key);
});

for (const status of [408, 409, 423, 425, 429, 500, 502, 503, 504]) {
  add(`retryable ${status} is retried with the same key, then success`, async (ctx) => {
    const { assert } = ctx;
    const client = ctx.client();
    const retries = [];
    const op = await client.begin("pay", { url: ctx.url("r", `${status},201`), body: "x" });
    const result = await op.send({ onRetry: (e) => retries.push(e) });
    assert.equal(result.status, 201);
    assert.equal(result.ok, true);
    assert.equal(result.attempts, 2);
    assert.equal(retries.length, 1);
    assert.equal(retries[0].status, status);
    const log = await ctx.log("r");
    assert.deepEqual(log.map((e) => e.key), [op.key, op.key]);
  });
}

add("network reset is retried with the same key", async (ctx) => {
  const { assert } = ctx;
  const op = await ctx.client().begin("pay", { url: ctx.url("reset", "reset,reset,201"), body: "x" });
  const result = await op.send();
  assert.equal(result.status, 201);
  assert.equal(result.attempts, 3);
  assert.deepEqual((await ctx.log("reset")).map((e) => e.key), [op.key, op.key, op.key]);
});

add("attempt timeout abandons a hanging attempt and retries with the same key", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { attemptTimeoutMs: 200 } });
  const op = await client.begin("pay", { url: ctx.url("slow", "delay3000,201"), body: "x" });
  const reasons = [];
  const started = Date.now();
  const result = await op.send({ onRetry: (e) => reasons.push(e.reason) });
  assert.equal(result.status, 201);
  assert.equal(result.attempts, 2);
  assert.ok(Date.now() - started < 2500, "did not wait for the hanging answer");
  assert.deepEqual(reasons, ["timed out"]);
  assert.deepEqual((await ctx.log("slow")).map((e) => e.key), [op.key, op.key]);
});

for (const status of [400, 401, 403, 404, 501]) {
  add(`definite ${status} resolves ok:false after one attempt and retires the key`, async (ctx) => {
    const { assert } = ctx;
    const client = ctx.client();
    const op = await client.begin("pay", { url: ctx.url("d", `${status},201`), body: "x" });
    const result = await op.send();
    assert.equal(result.status, status);
    assert.equal(result.ok, false);
    assert.equal(result.attempts, 1);
    assert.equal(result.key, op.key);
    assert.equal(result.response.status, status);
    assert.equal(op.state, "failed");
    assert.equal((await ctx.log("d")).length, 1);
    assert.equal((await client.pending()).length, 0, "a definite answer is not pending");
  });
}

add("422 rejects KEY_MISMATCH with the key and status", async (ctx) => {
  const { assert } = ctx;
  const op = await ctx.client().begin("pay", { url: ctx.url("k", "422,201"), body: "x" });
  const error = await assert.rejects(op.send(), "KEY_MISMATCH");
  assert.equal(error.key, op.key);
  assert.equal(error.lastStatus, 422);
  assert.equal(error.attempts, 1);
  assert.equal(op.state, "failed");
  assert.ok(ctx.lib.isIdempotentFetchError(error));
  assert.equal((await ctx.log("k")).length, 1);
});

add("server hints: Stripe-Should-Retry false ends a 503, true retries a 400", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client();
  const stop = await (await client.begin("a", { url: ctx.url("hint-a", "503s,201"), body: "x" })).send();
  assert.equal(stop.status, 503);
  assert.equal(stop.ok, false);
  assert.equal(stop.attempts, 1);
  const go = await (await client.begin("b", { url: ctx.url("hint-b", "400t,201"), body: "x" })).send();
  assert.equal(go.status, 201);
  assert.equal(go.attempts, 2);
});

add("Idempotent-Replayed: true is reported as replayed", async (ctx) => {
  const { assert } = ctx;
  const result = await (await ctx.client().begin("pay", { url: ctx.url("rep", "201r"), body: "x" })).send();
  assert.equal(result.replayed, true);
  assert.equal(result.ok, true);
});

add("a replayed failure is definite: ok:false, replayed:true, one attempt, key retired (every replay header spelling)", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client();
  const stripe = await client.begin("a", { url: ctx.url("rp-a", "503r,201"), body: "x" });
  const result = await stripe.send();
  assert.deepEqual([result.status, result.ok, result.replayed, result.attempts], [503, false, true, 1]);
  assert.equal(stripe.state, "failed");
  const other = await (await client.begin("b", { url: ctx.url("rp-b", "404q,201"), body: "x" })).send();
  assert.deepEqual([other.status, other.replayed], [404, true], "Idempotency-Replayed");
  const unknown = await (await client.begin("c", { url: ctx.url("rp-c", "500x,201"), body: "x" })).send();
  assert.deepEqual([unknown.status, unknown.replayed, unknown.attempts], [201, false, 2], "X-Replayed is not known by default");
  const x = await (await client.begin("e", { url: ctx.url("rp-e", "500p,201"), body: "x" })).send();
  assert.deepEqual([x.status, x.replayed, x.attempts], [500, true, 1], "X-Idempotent-Replayed is known by default");
  const fresh = await (await client.begin("f", { url: ctx.url("rp-f", "201f"), body: "x" })).send();
  assert.deepEqual([fresh.status, fresh.replayed], [201, false], "Idempotent-Replayed: false is a fresh answer");
  const freshFail = await (await client.begin("g", { url: ctx.url("rp-g", "500f,201"), body: "x" })).send();
  assert.deepEqual([freshFail.status, freshFail.attempts], [201, 2], "a 500 marked replayed: false is retried");
  const named = ctx.client({ replayHeaders: ["X-Replayed"] });
  const custom = await (await named.begin("d", { url: ctx.url("rp-d", "500x,201"), body: "x" })).send();
  assert.deepEqual([custom.status, custom.replayed, custom.attempts], [500, true, 1], "replayHeaders adds a spelling");
  assert.equal((await ctx.log("rp-a")).length, 1);
  assert.throws(() => ctx.client({ replayHeaders: ["bad header"] }), "INVALID_OPTIONS", "replayHeaders are header names");
  assert.throws(() => ctx.client({ replayHeaders: "X-Replayed" }), "INVALID_OPTIONS", "replayHeaders is an array");
});

add("423 Locked is retried like 409, honouring Retry-After", async (ctx) => {
  const { assert } = ctx;
  const op = await ctx.client().begin("pay", { url: ctx.url("locked", "423~1,201"), body: "x" });
  const retries = [];
  const result = await op.send({ onRetry: (e) => retries.push(e) });
  assert.deepEqual([result.status, result.attempts], [201, 2]);
  assert.ok(retries[0].delayMs >= 1000, `waited at least Retry-After (${retries[0].delayMs} ms)`);
  assert.equal(retries[0].reason, "same payment still in progress (locked) (423)");
});

add("an exhausted send after repeated 409s says the server may hold the answer", async (ctx) => {
  const { assert } = ctx;
  const op = await ctx.client({ retry: { maxAttempts: 3 } }).begin("pay", { url: ctx.url("held", "409"), body: "x" });
  const error = await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  assert.match(error.message, /kept answering 409: the request is still in progress there, or it holds the answer/);
  assert.equal(error.key, op.key);
});

add("replayStatus: a replay answered like django-idempotency-key (409 + the stored body) is the order's success", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ replayStatus: 409 });
  // The order is made and its 201 lost on the way; the retry gets the server's replay.
  const op = await client.begin("pay", { url: ctx.url("replay409", "reset,409d"), body: "x" });
  const result = await op.send();
  assert.deepEqual([result.ok, result.status, result.replayed, result.uncertain], [true, 409, true, false]);
  assert.equal((await result.response.json()).attempt, 1, "the replayed body is the order's");
  assert.equal(op.state, "succeeded", "retired as the order that exists");
  const log = await ctx.log("replay409");
  assert.deepEqual(log.map((entry) => entry.key), [op.key, op.key], "one key");
  assert.throws(() => ctx.client({ replayStatus: 200 }), "INVALID_OPTIONS", "a 2xx needs no marker");
  assert.throws(() => ctx.client({ replayStatus: "409" }), "INVALID_OPTIONS", "a number");
});

add("replayStatus with statusUrl: the key status gives the replayed order its original status", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ replayStatus: 409, statusUrl: ctx.ksUrl("replay409ks", "done201") });
  const op = await client.begin("pay", { url: ctx.url("replay409s", "reset,409d"), body: "x" });
  const result = await op.send();
  assert.deepEqual([result.ok, result.status, result.replayed], [true, 201, true]);
  assert.equal((await result.response.json()).stored, true, "the key status's stored answer");
  assert.equal((await ctx.log("replay409ks-ks")).length, 1, "asked once");
});

