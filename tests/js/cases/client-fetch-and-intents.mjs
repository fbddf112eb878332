// `client.fetch`, namespaces, `pending()` and expiry.
// Cases of the JavaScript API (the runners and `ctx`: ../cases.mjs).

import { UUID_V4, PREFIX, RETIRED, assert, adder } from "./support.mjs";

export const cases = [];
const add = adder(cases);

add("client.fetch returns a Response; with intent it reuses the key", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { maxAttempts: 1 } });
  const response = await client.fetch(ctx.url("f1", "201"), { method: "POST", body: "x" });
  assert.ok(response instanceof Response);
  assert.equal(response.status, 201);
  const other = await client.fetch(new URL(ctx.url("f1", "201")), { method: "POST", body: "x" });
  const [a, b] = await ctx.log("f1");
  assert.match(a.key, UUID_V4);
  assert.notEqual(a.key, b.key, "without intent, the same request answered before is a new intent");
  assert.equal((await other.json()).key, b.key);

  const url = ctx.url("f2", "503,201");
  const error = await assert.rejects(client.fetch(url, { method: "POST", body: "x", intent: "checkout:1" }), "RETRIES_EXHAUSTED");
  const again = await client.fetch(url, { method: "POST", body: "x", intent: "checkout:1" });
  assert.equal(again.status, 201);
  const log = await ctx.log("f2");
  assert.deepEqual(log.map((e) => e.key), [error.key, error.key]);

  const definite = await client.fetch(ctx.url("f3", "404"), { method: "DELETE" });
  assert.equal(definite.status, 404, "a definite 4xx resolves");
  const request = new Request(ctx.url("f4", "201"), { method: "PUT", headers: { "X-From": "request" } });
  const fromRequest = await client.fetch(request);
  assert.equal(fromRequest.status, 201);
  const [put] = await ctx.log("f4");
  assert.equal(put.method, "PUT");
  assert.equal(put.headers["x-from"], "request");
  const get = await client.fetch(ctx.url("f5", "200"));
  assert.equal(get.status, 200);
  assert.equal((await ctx.log("f5"))[0].method, "GET");
});

add("client.fetch has its key stored before each attempt (begin leaves the first write to send)", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client();
  // Read at each attempt event: send emits it after the record is written, before the request goes.
  const seen = [];
  client.addEventListener("attempt", (event) => {
    seen.push(client.pending().then((list) => list.find((info) => info.intentId === event.intentId)));
  });
  const response = await client.fetch(ctx.url("fw", "503,201"), { method: "POST", body: "x", intent: "order:fw" });
  assert.equal(response.status, 201);
  const log = await ctx.log("fw");
  const [first, second] = await Promise.all(seen);
  assert.equal(first?.key, log[0].key, "the key is stored before the first attempt");
  assert.equal(first.attempts, 1, "with its attempt count");
  assert.equal(second?.attempts, 2);
  assert.equal((await client.pending()).length, 0, "answered: no longer pending");
  const anonymous = [];
  client.addEventListener("attempt", (event) => anonymous.push(client.pending().then((list) => list.map((i) => i.intentId).includes(event.intentId))));
  await client.fetch(ctx.url("fw2", "201"), { method: "POST", body: "x" });
  assert.deepEqual(await Promise.all(anonymous.slice(-1)), [true], "an intent named by its request, stored too");
  // Answered: the named intent's record stays (retired, until keyTtlMs); one named by its request is
  // deleted, a definite 4xx included (the same request later is a new intent).
  const definite = await client.fetch(ctx.url("fw3", "404"), { method: "POST", body: "x" });
  assert.equal(definite.status, 404);
  if (ctx.browser && ctx.storage === "local") {
    assert.deepEqual(ctx.slots(), [`${PREFIX}${ctx.ns}:${RETIRED}order:fw`], "only the named intent's record is left (retired)");
  }
});

add("client.fetch aborted before its first attempt keeps its key stored, as ABORTED says", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client();
  const controller = new AbortController();
  controller.abort();
  const url = ctx.url("fab", "201");
  const error = await assert.rejects(
    client.fetch(url, { method: "POST", body: "x", intent: "order:fab", signal: controller.signal }),
    "ABORTED",
  );
  const [info] = await client.pending();
  assert.equal(info?.key, error.key, "pending() lists the intent with the key of the error");
  assert.equal(info.attempts, 0);
  assert.equal((await ctx.log("fab")).length, 0, "nothing was sent");
  const response = await client.fetch(url, { method: "POST", body: "x", intent: "order:fab" });
  assert.equal((await response.json()).key, error.key, "the next call resumes that key");
});

add("two namespaces are isolated", async (ctx) => {
  const { assert } = ctx;
  const otherNs = ctx.newNamespace();
  const a = ctx.client();
  const b = new ctx.lib.IdempotentClient({ namespace: otherNs, storage: ctx.storage });
  const request = { url: ctx.url("ns", "201"), body: "x" };
  const opA = await a.begin("checkout:1", request);
  const opB = await b.begin("checkout:1", request);
  assert.notEqual(opA.key, opB.key);
  assert.deepEqual((await a.pending()).map((p) => p.key), [opA.key]);
  assert.deepEqual((await b.pending()).map((p) => p.key), [opB.key]);
  assert.equal(await b.discard("checkout:1"), true);
  assert.deepEqual((await a.pending()).map((p) => p.key), [opA.key], "discarding in one namespace leaves the other");
  if (ctx.browser) {
    assert.deepEqual(ctx.slots(), [`${PREFIX}${ctx.ns}:checkout:1`]);
  }
});

add("pending() lists unfinished intents with their info", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { maxAttempts: 2 } });
  const done = await client.begin("done", { url: ctx.url("p1", "201"), body: "x" });
  await done.send();
  const open = await client.begin("open", { url: ctx.url("p2", "503"), body: "x" });
  await assert.rejects(open.send(), "RETRIES_EXHAUSTED");
  const pending = await client.pending();
  assert.equal(pending.length, 1);
  const [info] = pending;
  assert.equal(info.intentId, "open");
  assert.equal(info.key, open.key);
  assert.equal(info.state, "pending");
  assert.equal(info.attempts, 2);
  assert.equal(info.lastStatus, 503);
  assert.equal(info.resumable, false);
  assert.ok(info.createdAt <= info.updatedAt && info.updatedAt <= Date.now());
  await assert.rejects(client.resume("open"), "INVALID_REQUEST", "resume without persistRequest");
  await assert.rejects(client.resume("nope"), "NOT_FOUND");
});

add("expired intents are not re-sent (EXPIRED) and sweep reports them", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ keyTtlMs: 50, retry: { maxAttempts: 1 } });
  const expiredEvents = [];
  client.addEventListener("expired", (e) => expiredEvents.push(e));
  const request = { url: ctx.url("exp", "503,201"), body: "x" };
  const op = await client.begin("pay", request);
  await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  const stale = await client.begin("stale", { url: ctx.url("exp2", "503"), body: "x" });
  await assert.rejects(stale.send(), "RETRIES_EXHAUSTED");
  const done = await client.begin("done", { url: ctx.url("exp3", "201"), body: "x" });
  await done.send();
  await ctx.sleep(120);
  const again = await client.begin("pay", request);
  assert.equal(again.key, op.key);
  assert.equal(again.state, "expired");
  const error = await assert.rejects(again.send(), "EXPIRED");
  assert.equal(error.key, op.key);
  assert.equal((await ctx.log("exp")).length, 1, "the expired key was not re-sent");
  const swept = await client.sweep();
  assert.deepEqual(swept, { removed: 1, expired: 1 });
  assert.deepEqual(expiredEvents.map((e) => [e.type, e.intentId, e.key]), [["expired", "stale", stale.key]]);
  const pending = await client.pending();
  assert.deepEqual(pending.map((p) => [p.intentId, p.state]).sort(), [["pay", "expired"], ["stale", "expired"]]);
  await client.discard("pay");
  const fresh = await client.begin("pay", request);
  assert.notEqual(fresh.key, op.key, "after discard a new key is made");
});

