// Options, validation and events: the key header's form and name, `shouldRetry`, the events and their
// fields, INVALID_OPTIONS and INVALID_REQUEST.
// Cases of the JavaScript API (the runners and `ctx`: ../cases.mjs).

import { assert, adder } from "./support.mjs";

export const cases = [];
const add = adder(cases);

add("headerForm sf-string sends the key as a quoted string", async (ctx) => {
  const { assert } = ctx;
  const op = await ctx.client({ headerForm: "sf-string" }).begin("pay", { url: ctx.url("sf", "503,201"), body: "x" });
  await op.send();
  const log = await ctx.log("sf");
  assert.equal(log.length, 2);
  for (const entry of log) assert.equal(entry.key, `"${op.key}"`);
});

add("a custom headerName carries the key (and is refused in request headers)", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ headerName: "X-Request-Key" });
  const op = await client.begin("pay", { url: ctx.url("hn", "201"), body: "x" });
  await op.send();
  const [entry] = await ctx.log("hn");
  assert.equal(entry.headers["x-request-key"], op.key);
  assert.equal(entry.headers["idempotency-key"], undefined);
  await assert.rejects(client.begin("b", { url: ctx.url("hn", "201"), headers: { "x-request-key": "mine" }, body: "x" }), "INVALID_REQUEST");
});

add("shouldRetry overrides the classification both ways", async (ctx) => {
  const { assert } = ctx;
  const seen = [];
  const client = ctx.client({
    shouldRetry: (status) => {
      seen.push(status);
      if (status === 400) return true;
      if (status === 503) return false;
      return undefined;
    },
  });
  const retried = await (await client.begin("a", { url: ctx.url("sr-a", "400,201"), body: "x" })).send();
  assert.equal(retried.status, 201);
  assert.equal(retried.attempts, 2);
  const definite = await (await client.begin("b", { url: ctx.url("sr-b", "503,201"), body: "x" })).send();
  assert.equal(definite.status, 503);
  assert.equal(definite.ok, false);
  assert.equal(definite.attempts, 1);
  const normal = await (await client.begin("c", { url: ctx.url("sr-c", "500,201"), body: "x" })).send();
  assert.equal(normal.attempts, 2, "undefined keeps the default (500 retried)");
  assert.ok(seen.includes(400) && seen.includes(503) && seen.includes(500));
  const throwing = ctx.client({ shouldRetry: () => { throw new Error("app bug"); } });
  const safe = await (await throwing.begin("d", { url: ctx.url("sr-d", "500,201"), body: "x" })).send();
  assert.equal(safe.status, 201, "a throwing shouldRetry falls back to the default");
});

add("events attempt/retry/success/failure fire with the documented fields", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { maxAttempts: 2 } });
  const events = [];
  const record = (e) => events.push(e);
  for (const type of ["attempt", "retry", "success", "failure"]) client.addEventListener(type, record);
  client.addEventListener("success", () => { throw new Error("a broken listener must not break a payment"); });
  const callbacks = { attempt: [], retry: [] };
  const op = await client.begin("pay", { url: ctx.url("ev", "503,201"), body: "x" });
  await op.send({ onAttempt: (e) => callbacks.attempt.push(e), onRetry: (e) => callbacks.retry.push(e) });
  const pick = (e) => Object.fromEntries(Object.entries(e).sort(([a], [b]) => (a < b ? -1 : 1)));
  assert.deepEqual(events.map(pick), [
    { attempt: 1, intentId: "pay", key: op.key, totalAttempts: 1, type: "attempt" },
    { attempt: 1, delayMs: events[1]?.delayMs, intentId: "pay", key: op.key, reason: "server busy (503)", status: 503, type: "retry" },
    { attempt: 2, intentId: "pay", key: op.key, totalAttempts: 2, type: "attempt" },
    { attempts: 2, intentId: "pay", key: op.key, replayed: false, status: 201, type: "success" },
  ].map(pick));
  assert.ok(typeof events[1].delayMs === "number" && events[1].delayMs >= 0 && events[1].delayMs <= 5, `delayMs ${events[1].delayMs}`);
  assert.equal(callbacks.attempt.length, 2);
  assert.equal(callbacks.retry.length, 1);
  assert.equal(callbacks.retry[0].status, 503);

  events.length = 0;
  const bad = await client.begin("bad", { url: ctx.url("ev-400", "400"), body: "x" });
  await bad.send();
  const failure = events.find((e) => e.type === "failure");
  assert.equal(failure.code, "HTTP_STATUS");
  assert.equal(failure.status, 400);
  assert.equal(failure.key, bad.key);
  assert.equal(failure.intentId, "bad");
  assert.equal(typeof failure.message, "string");

  events.length = 0;
  const busy = await client.begin("busy", { url: ctx.url("ev-503", "503"), body: "x" });
  await assert.rejects(busy.send(), "RETRIES_EXHAUSTED");
  const exhausted = events.find((e) => e.type === "failure");
  assert.equal(exhausted.code, "RETRIES_EXHAUSTED");
  assert.equal(exhausted.status, 503);
  assert.equal(exhausted.key, busy.key);

  client.removeEventListener("attempt", record);
  events.length = 0;
  await (await client.begin("quiet", { url: ctx.url("ev-q", "201"), body: "x" })).send();
  assert.deepEqual(events.map((e) => e.type), ["success"], "removed listener is not called");

  assert.throws(() => client.addEventListener("bogus", record), "INVALID_OPTIONS", "unknown event type");
  assert.throws(() => client.addEventListener("attempt", "not a function"), "INVALID_OPTIONS", "listener not a function");
  await assert.rejects(op.send({ onRetry: 5 }), "INVALID_OPTIONS", "onRetry not a function");
  await assert.rejects(op.send({ signal: {} }), "INVALID_OPTIONS", "signal not an AbortSignal");
  await assert.rejects(op.send({ retries: 1 }), "INVALID_OPTIONS", "unknown send option");
});

const badOptions = [
  ["wrong type", { retry: { maxAttempts: "3" } }, /retry\.maxAttempts/],
  ["wrong type (namespace)", { namespace: 7 }, /namespace/],
  ["wrong type (persistRequest)", { persistRequest: "yes" }, /persistRequest/],
  ["negative", { retry: { baseDelayMs: -1 } }, /retry\.baseDelayMs/],
  ["NaN", { retry: { maxDelayMs: NaN } }, /retry\.maxDelayMs/],
  ["Infinity", { retry: { totalTimeoutMs: Infinity } }, /retry\.totalTimeoutMs/],
  ["huge", { retry: { attemptTimeoutMs: 1e20 } }, /retry\.attemptTimeoutMs/],
  ["huge maxAttempts", { retry: { maxAttempts: 1e9 } }, /retry\.maxAttempts/],
  ["fractional", { retry: { maxAttempts: 1.5 } }, /retry\.maxAttempts/],
  ["zero attempts", { retry: { maxAttempts: 0 } }, /retry\.maxAttempts/],
  ["zero attemptTimeoutMs", { retry: { attemptTimeoutMs: 0 } }, /retry\.attemptTimeoutMs/],
  ["negative maxRetryAfterMs", { retry: { maxRetryAfterMs: -5 } }, /retry\.maxRetryAfterMs/],
  ["maxDelay below base", { retry: { baseDelayMs: 100, maxDelayMs: 10 } }, /retry\.maxDelayMs/],
  ["unknown field", { retries: { maxAttempts: 3 } }, /retries/],
  ["unknown nested retry field", { retry: { maxAttemps: 3 } }, /retry\.maxAttemps/],
  ["retry not an object", { retry: 5 }, /retry/],
  ["bad jitter", { retry: { jitter: "random" } }, /retry\.jitter/],
  ["bad storage", { storage: "cookie" }, /storage/],
  ["bad headerName (space)", { headerName: "Idempotency Key" }, /headerName/],
  ["bad headerName (CRLF)", { headerName: "X-Key\r\nX-Evil" }, /headerName/],
  ["empty headerName", { headerName: "" }, /headerName/],
  ["bad headerForm", { headerForm: "quoted" }, /headerForm/],
  ["zero keyTtlMs", { keyTtlMs: 0 }, /keyTtlMs/],
  ["negative retryBudget", { retryBudget: -1 }, /retryBudget/],
  ["namespace with ':'", { namespace: "a:b" }, /namespace/],
  ["empty namespace", { namespace: "" }, /namespace/],
  ["shouldRetry not a function", { shouldRetry: 1 }, /shouldRetry/],
  ["not an object", 5, /options/],
  ["an array", [], /options/],
];
add("options validation: INVALID_OPTIONS naming the field", async (ctx) => {
  const { assert, lib } = ctx;
  for (const [label, options, field] of badOptions) {
    const error = assert.throws(() => new lib.IdempotentClient(options), "INVALID_OPTIONS", label);
    assert.match(error.message, field, label);
    assert.ok(error instanceof Error && lib.isIdempotentFetchError(error), label);
  }
  // Valid edge values are accepted.
  const ok = new lib.IdempotentClient({
    namespace: ctx.ns, storage: "memory", keyTtlMs: 1, retryBudget: 0, headerForm: "raw", persistRequest: false,
    retry: { maxAttempts: 1000, baseDelayMs: 0, maxDelayMs: 0, totalTimeoutMs: 0, attemptTimeoutMs: 1, maxRetryAfterMs: 0, jitter: "none" },
  });
  assert.equal(ok.namespace, ctx.ns);
  assert.equal(ok.storage, "memory");
  for (const jitter of ["full", "equal", "decorrelated", "none"]) new lib.IdempotentClient({ storage: "memory", retry: { jitter } });
  const defaults = new lib.IdempotentClient(ctx.browser ? { namespace: ctx.ns } : undefined);
  assert.equal(defaults.storage, ctx.browser ? "local" : "memory", "default storage");
  assert.equal(new lib.IdempotentClient({ storage: "memory" }).namespace, "default");
  assert.equal(defaults.retryBudget, 500);
});

add("request validation: INVALID_REQUEST, nothing stored or sent", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client();
  const url = ctx.url("rv", "201");
  const bad = [
    ["missing url", { body: "x" }],
    ["empty url", { url: "" }],
    ["url with CR/LF", { url: url + "\r\nX: 1" }],
    ["relative url without a page", ctx.browser ? null : { url: "/api/orders" }],
    ["non-string method", { url, method: 42 }],
    ["method with a space", { url, method: "PO ST" }],
    ["CONNECT", { url, method: "CONNECT" }],
    ["header value with CR/LF", { url, headers: { "X-A": "a\r\nX-Evil: 1" }, body: "x" }],
    ["header name invalid", { url, headers: { "X A": "1" }, body: "x" }],
    ["GET with body", { url, method: "GET", body: "x" }],
    ["HEAD with body", { url, method: "HEAD", body: "x" }],
    ["Idempotency-Key set by the caller", { url, headers: { "Idempotency-Key": "mine" }, body: "x" }],
    ["idempotency-key lower case in a Headers", { url, headers: new Headers({ "idempotency-key": "mine" }), body: "x" }],
    ["idempotency-key in header pairs", { url, headers: [["IDEMPOTENCY-KEY", "mine"]], body: "x" }],
    ["plain object body", { url, body: { amount: 1 } }],
    ["number body", { url, body: 5 }],
    ["unknown request field", { url, body: "x", retry: true }],
  ].filter(([, request]) => request);
  for (const [label, request] of bad) {
    await assert.rejects(client.begin("pay", request), "INVALID_REQUEST", label);
  }
  await assert.rejects(client.begin("pay", "not an object"), "INVALID_REQUEST", "request not an object");
  await assert.rejects(client.begin(42, { url, body: "x" }), "INVALID_REQUEST", "intent id not a string");
  await assert.rejects(client.begin("", { url, body: "x" }), "INVALID_REQUEST", "empty intent id");
  await assert.rejects(client.begin("a\nb", { url, body: "x" }), "INVALID_REQUEST", "intent id with a newline");
  await assert.rejects(client.begin("x".repeat(257), { url, body: "x" }), "INVALID_REQUEST", "intent id too long");
  await assert.rejects(client.fetch(url, { method: "POST", body: "x", intent: 5 }), "INVALID_REQUEST", "fetch intent not a string");
  await assert.rejects(client.fetch(url, { method: "GET", body: "x" }), "INVALID_REQUEST", "fetch GET with body");
  await assert.rejects(client.fetch(url, { method: "POST", headers: { "Idempotency-Key": "k" } }), "INVALID_REQUEST", "fetch with a key header");
  await assert.rejects(client.fetch(url, { signal: "nope" }), "INVALID_REQUEST", "fetch signal not a signal");
  assert.equal((await client.pending()).length, 0, "nothing stored");
  assert.equal((await ctx.log("rv")).length, 0, "nothing sent");
  // A URL object is accepted.
  const op = await client.begin("url-object", { url: new URL(url), body: "x" });
  assert.equal((await op.send()).status, 201);
});

