// Answers that race the attempt timer or the caller's abort: a timeout or ABORTED, never a definite
// answer with a dead body.
// Cases of the JavaScript API (the runners and `ctx`: ../cases.mjs).

import { assert, override, adder } from "./support.mjs";

export const cases = [];
const add = adder(cases);

add("an endless response body is never a definite answer: every attempt times out, the key is kept", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { attemptTimeoutMs: 300, maxAttempts: 2 } });
  const op = await client.begin("pay", { url: ctx.url("endless", "endless"), body: "x" });
  const reasons = [];
  const error = await assert.rejects(op.send({ onRetry: (e) => reasons.push(e.reason) }), "RETRIES_EXHAUSTED");
  assert.equal(error.key, op.key);
  assert.deepEqual(reasons, ["timed out"]);
  assert.equal(op.state, "pending", "not retired: the answer was never held");
  assert.deepEqual((await ctx.log("endless")).map((e) => e.key), [op.key, op.key]);
});

add("an answer whose body comes after the attempt timeout is a timeout; the retry's body is readable", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { attemptTimeoutMs: 300 } });
  const op = await client.begin("pay", { url: ctx.url("slowbody", "slowbody1500,201"), body: "x" });
  const reasons = [];
  const result = await op.send({ onRetry: (e) => reasons.push(e.reason) });
  assert.equal(result.ok, true);
  assert.equal(result.attempts, 2);
  assert.deepEqual(reasons, ["timed out"]);
  assert.equal((await result.response.json()).attempt, 2, "the body the caller gets is the held answer's");
  assert.deepEqual((await ctx.log("slowbody")).map((e) => e.key), [op.key, op.key]);
});

/** Replaces the global fetch for one attempt with WebKit's race, made deterministic: the real
 *  answer is handed over only after the attempt's own timer fired (and its abort killed the body). */
function lateFetch(ms) {
  const real = globalThis.fetch;
  let calls = 0;
  const restore = override(globalThis, "fetch", {
    writable: true,
    value: async (...args) => {
      calls += 1;
      const response = await real(...args);
      if (calls === 1) await new Promise((resolve) => setTimeout(resolve, ms));
      return response;
    },
  });
  return restore;
}

for (const named of [true, false]) {
  add(`a Response handed over after the attempt timer fired is a timeout, never ok with a dead body (${named ? "named intent" : "client.fetch without intent"})`, async (ctx) => {
    const { assert } = ctx;
    const client = ctx.client({ retry: { attemptTimeoutMs: 300 } });
    const restore = lateFetch(600);
    let response;
    try {
      response = await client.fetch(ctx.url("late", "201"), { method: "POST", body: "x", ...(named ? { intent: "pay" } : {}) });
    } finally {
      restore();
    }
    assert.equal(response.status, 201);
    const body = await response.json();
    assert.equal(body.attempt, 2, "the timed-out attempt was retried, its dead body never reported");
    const keys = (await ctx.log("late")).map((e) => e.key);
    assert.equal(keys.length, 2);
    assert.equal(keys[0], keys[1], "one click, one key");
  });
}

add("a caller's abort between the headers and the body is ABORTED with the key kept; the next send replays", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { attemptTimeoutMs: 10_000 } });
  const op = await client.begin("pay", { url: ctx.url("abortbody", "slowbody1500,201r"), body: "x" });
  const controller = new AbortController();
  const sending = op.send({ signal: controller.signal });
  await ctx.waitFor(async () => (await ctx.log("abortbody")).length === 1, "the first attempt at the server");
  await ctx.sleep(200); // the headers are out: the body is due in about a second
  controller.abort();
  const error = await assert.rejects(sending, "ABORTED");
  assert.equal(error.key, op.key);
  assert.equal(op.state, "pending");
  const result = await op.send();
  assert.equal((await result.response.json()).attempt, 2);
  assert.equal(result.replayed, true);
  assert.deepEqual((await ctx.log("abortbody")).map((e) => e.key), [op.key, op.key]);
});

