// Bounds and aborts: uncertainty, `maxTotalAttempts`, Retry-After, aborts, exhaustion, the deadline and
// the budget; INTENT_MISMATCH, the fingerprint without `crypto.subtle`, `free()` and `discard`.
// Cases of the JavaScript API (the runners and `ctx`: ../cases.mjs).

import { PREFIX, RETIRED, assert, override, adder } from "./support.mjs";

export const cases = [];
const add = adder(cases);

add("uncertain: a 4xx after an attempt that may have reached the server says so and keeps the intent's request", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client();
  const request = { url: ctx.url("unc", "500,404"), body: '{"cart":1}' };
  const op = await client.begin("pay", request);
  const result = await op.send();
  assert.deepEqual([result.status, result.ok, result.uncertain, result.attempts], [404, false, true, 2]);
  assert.equal(op.state, "failed");
  if (ctx.browser) assert.equal(JSON.parse(localStorage.getItem(`${PREFIX}${ctx.ns}:${RETIRED}pay`)).uncertain, true, "stored");
  const error = await assert.rejects(client.begin("pay", { ...request, body: '{"cart":2}' }), "INTENT_MISMATCH", "a changed request");
  assert.equal(error.key, op.key);
  const plain = await (await client.begin("plain", { url: ctx.url("unc2", "404"), body: "x" })).send();
  assert.deepEqual([plain.status, plain.uncertain], [404, false], "a 4xx on the first attempt is certain");
  const fresh = await client.begin("plain", { url: ctx.url("unc2", "404"), body: "changed" });
  assert.notEqual(fresh.key, plain.key, "a certain failure lets a changed request start a new key");
});

add("retry.maxTotalAttempts bounds the attempts of an intent across sends (key kept)", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { maxAttempts: 2, maxTotalAttempts: 3 } });
  const op = await client.begin("pay", { url: ctx.url("mta", "503"), body: "x" });
  const first = await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  assert.deepEqual([first.reason, first.attempts], ["maxAttempts", 2]);
  const second = await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  assert.deepEqual([second.reason, second.attempts, second.key], ["maxTotalAttempts", 1, op.key]);
  const third = await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  assert.deepEqual([third.reason, third.attempts], ["maxTotalAttempts", 0]);
  assert.equal((await ctx.log("mta")).length, 3);
  assert.equal(op.state, "pending");
  assert.throws(() => ctx.client({ retry: { maxTotalAttempts: -1 } }), "INVALID_OPTIONS", "negative");
  assert.throws(() => ctx.client({ retry: { maxTotalAttempts: 1.5 } }), "INVALID_OPTIONS", "fraction");
});

add("Retry-After in seconds is honoured", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { baseDelayMs: 1, maxDelayMs: 2 } });
  const op = await client.begin("pay", { url: ctx.url("ra", "429~1,201"), body: "x" });
  const delays = [];
  const started = Date.now();
  const result = await op.send({ onRetry: (e) => delays.push(e.delayMs) });
  const elapsed = Date.now() - started;
  assert.equal(result.status, 201);
  assert.ok(elapsed >= 950, `waited ${elapsed} ms for Retry-After: 1`);
  assert.ok(delays[0] >= 1000, `retry event delayMs ${delays[0]}`);
  const log = await ctx.log("ra");
  assert.deepEqual(log.map((e) => e.key), [op.key, op.key]);
});

add("Retry-After is capped by maxRetryAfterMs", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { maxRetryAfterMs: 100 } });
  const op = await client.begin("pay", { url: ctx.url("cap", "503~30,201"), body: "x" });
  const started = Date.now();
  const result = await op.send();
  assert.equal(result.status, 201);
  assert.ok(Date.now() - started < 3000, "a 30 s Retry-After was capped");
});

add("abort during an in-flight attempt keeps the intent pending; a later send reuses the key", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client();
  const op = await client.begin("pay", { url: ctx.url("abort", "delay5000,201"), body: "x" });
  const controller = new AbortController();
  const sending = op.send({ signal: controller.signal });
  await ctx.waitFor(async () => (await ctx.log("abort")).length === 1, "the first attempt to reach the server");
  const started = Date.now();
  controller.abort();
  const error = await assert.rejects(sending, "ABORTED");
  assert.ok(Date.now() - started < 1000, "abort is prompt");
  assert.equal(error.key, op.key);
  assert.equal(op.state, "pending");
  const pending = await client.pending();
  assert.deepEqual(pending.map((p) => [p.intentId, p.key, p.state]), [["pay", op.key, "pending"]]);
  const result = await op.send();
  assert.equal(result.status, 201);
  assert.equal(result.key, op.key);
  assert.deepEqual((await ctx.log("abort")).map((e) => e.key), [op.key, op.key]);
});

add("abort during a backoff sleep keeps the intent pending; a later send reuses the key", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { baseDelayMs: 10000, maxDelayMs: 10000, jitter: "none" } });
  const op = await client.begin("pay", { url: ctx.url("abort-sleep", "503,201"), body: "x" });
  const controller = new AbortController();
  let retrying;
  const retried = new Promise((resolve) => (retrying = resolve));
  const sending = op.send({ signal: controller.signal, onRetry: retrying });
  const event = await retried;
  assert.equal(event.delayMs, 10000);
  const started = Date.now();
  controller.abort();
  const error = await assert.rejects(sending, "ABORTED");
  assert.ok(Date.now() - started < 1000, "abort cuts the sleep short");
  assert.equal(error.key, op.key);
  assert.equal(error.lastStatus, 503);
  assert.equal(op.state, "pending");
  const fast = ctx.client();
  const again = await fast.begin("pay", { url: ctx.url("abort-sleep", "503,201"), body: "x" });
  if (ctx.storage !== "memory") assert.equal(again.key, op.key, "a fresh client resumes the key");
  const result = await op.send({ signal: new AbortController().signal });
  assert.equal(result.status, 201);
  assert.equal(result.key, op.key);
  assert.deepEqual((await ctx.log("abort-sleep")).map((e) => e.key), [op.key, op.key]);
});

add("an already aborted signal sends nothing and keeps the key", async (ctx) => {
  const { assert } = ctx;
  const op = await ctx.client().begin("pay", { url: ctx.url("pre", "201"), body: "x" });
  const controller = new AbortController();
  controller.abort();
  const error = await assert.rejects(op.send({ signal: controller.signal }), "ABORTED");
  assert.equal(error.key, op.key);
  assert.equal((await ctx.log("pre")).length, 0);
  assert.equal((await op.send()).status, 201);
});

add("exhausted attempts keep the key (RETRIES_EXHAUSTED maxAttempts); a later send reuses it", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { maxAttempts: 3 } });
  const op = await client.begin("pay", { url: ctx.url("ex", "503,503,503,201"), body: "x" });
  const error = await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  assert.equal(error.reason, "maxAttempts");
  assert.equal(error.attempts, 3);
  assert.equal(error.lastStatus, 503);
  assert.equal(error.key, op.key);
  assert.match(error.message, /key is kept/);
  assert.equal(op.state, "pending");
  assert.equal(op.attempts, 3);
  assert.equal(op.lastStatus, 503);
  const result = await op.send();
  assert.equal(result.status, 201);
  assert.equal(result.attempts, 1);
  assert.equal(op.attempts, 4);
  const log = await ctx.log("ex");
  assert.equal(log.length, 4);
  for (const entry of log) assert.equal(entry.key, op.key);
});

add("the total deadline ends a send early with reason deadline, key kept", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { totalTimeoutMs: 300, baseDelayMs: 1000, maxDelayMs: 1000, jitter: "none" } });
  const op = await client.begin("pay", { url: ctx.url("dl", "503"), body: "x" });
  const started = Date.now();
  const error = await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  assert.equal(error.reason, "deadline");
  assert.equal(error.key, op.key);
  assert.ok(Date.now() - started < 900, "gave up without sleeping past the deadline");
});

add("an empty retry budget ends a send with reason budget, key kept", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retryBudget: 0 });
  assert.equal(client.retryBudget, 0);
  const op = await client.begin("pay", { url: ctx.url("bud", "503,201"), body: "x" });
  const error = await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  assert.equal(error.reason, "budget");
  assert.equal(error.attempts, 1);
  assert.equal(error.key, op.key);
  const spender = ctx.client({ retryBudget: 100 });
  const spent = await spender.begin("spend", { url: ctx.url("bud2", "503,503,201"), body: "x" });
  await spent.send();
  assert.ok(spender.retryBudget < 100, `budget spent by retries (${spender.retryBudget} left)`);
});

add("INTENT_MISMATCH on a changed body names the old key; replace:true makes a new key", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client();
  const url = ctx.url("im", "201");
  const first = await client.begin("checkout:cart-42", { url, body: '{"amount":100}' });
  const error = await assert.rejects(client.begin("checkout:cart-42", { url, body: '{"amount":200}' }), "INTENT_MISMATCH");
  assert.ok(error.message.includes(first.key), `message names the old key: ${error.message}`);
  assert.equal(error.key, first.key);
  await assert.rejects(client.begin("checkout:cart-42", { url: ctx.url("im-other", "201"), body: '{"amount":100}' }), "INTENT_MISMATCH", "changed URL");
  await assert.rejects(client.begin("checkout:cart-42", { url, method: "PUT", body: '{"amount":100}' }), "INTENT_MISMATCH", "changed method");
  const replaced = await client.begin("checkout:cart-42", { url, body: '{"amount":200}' }, { replace: true });
  assert.notEqual(replaced.key, first.key);
  const pending = await client.pending();
  assert.deepEqual(pending.map((p) => p.key), [replaced.key]);
  const result = await replaced.send();
  assert.equal(result.key, replaced.key);
  assert.equal((await ctx.log("im"))[0].body, '{"amount":200}');
  await assert.rejects(client.begin("checkout:cart-42", { url, body: "x" }, { replace: "yes" }), "INVALID_OPTIONS", "replace must be boolean");
  await assert.rejects(client.begin("checkout:cart-42", { url, body: "x" }, { replce: true }), "INVALID_OPTIONS", "unknown begin option");
});

add("without crypto.subtle (a plain-http page) the fingerprint falls back and agrees with it", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client();
  const request = () => ({ url: ctx.url("nosubtle", "201"), headers: { "content-type": "application/json" }, body: '{"cart":42}' });
  const withSubtle = await client.begin("pay", request());
  const restore = override(globalThis.crypto, "subtle", { value: undefined });
  try {
    assert.equal(globalThis.crypto.subtle, undefined, "crypto.subtle is hidden");
    const without = await client.begin("pay", request());
    assert.equal(without.key, withSubtle.key, "same fingerprint without crypto.subtle: the intent resumes");
    await assert.rejects(client.begin("pay", { ...request(), body: '{"cart":43}' }), "INTENT_MISMATCH", "a changed body is still caught");
    const fresh = await client.begin("other", request());
    assert.equal((await fresh.send()).status, 201);
  } finally {
    restore();
  }
  await assert.rejects(client.begin("pay", { ...request(), headers: { "content-type": "text/plain" } }), "INTENT_MISMATCH", "the content type is fingerprinted");
});

add("free(): an operation lets go of the lock begin took and still sends; a freed client refuses to work", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client();
  const op = await client.begin("pay", { url: ctx.url("free", "201"), body: "x" });
  op.free();
  op.free(); // twice is fine
  assert.equal((await op.send()).status, 201);
  const other = ctx.client();
  other.free();
  let error;
  try { await other.begin("x", { url: ctx.url("free2", "201"), body: "x" }); } catch (e) { error = e; }
  assert.ok(error instanceof TypeError, `a freed client rejects, got ${error}`);
  assert.equal((await ctx.log("free2")).length, 0);
});

add("discard forgets the intent: a new begin mints a new key", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client();
  const request = { url: ctx.url("disc", "201"), body: "x" };
  const op = await client.begin("pay", request);
  assert.equal(await client.discard("pay"), true);
  assert.equal(await client.discard("pay"), false);
  await assert.rejects(op.send(), "NOT_FOUND");
  const again = await client.begin("pay", request);
  assert.notEqual(again.key, op.key);
  assert.equal(await again.discard(), true);
  assert.equal((await client.pending()).length, 0);
  assert.equal((await ctx.log("disc")).length, 0);
});

