// Offline waits and a double send of one intent.
// Cases of the JavaScript API (the runners and `ctx`: ../cases.mjs).

import { assert, override, adder } from "./support.mjs";

export const cases = [];
const add = adder(cases);

add("offline: waits for the online event instead of burning attempts", async (ctx) => {
  const { assert } = ctx;
  const restore = override(navigator, "onLine", { get: () => false });
  let restored = false;
  try {
    const client = ctx.client();
    const offline = [];
    client.addEventListener("offline", (e) => offline.push(e));
    const op = await client.begin("pay", { url: ctx.url("offline", "201"), body: "x" });
    const sending = op.send();
    await ctx.waitFor(() => offline.length > 0, "the offline event");
    assert.equal(offline[0].key, op.key);
    await ctx.sleep(150);
    assert.equal((await ctx.log("offline")).length, 0, "nothing sent while offline");
    restore();
    restored = true;
    globalThis.dispatchEvent(new Event("online"));
    const result = await sending;
    assert.equal(result.status, 201);
    assert.equal(result.attempts, 1);
  } finally {
    if (!restored) restore();
  }
}, { browserOnly: true });

add("a double send of one intent sends once and both calls get the answer", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { maxAttempts: 2 } });
  const request = { url: ctx.url("race", "delay300,201"), body: "x" };
  const op = await client.begin("pay", request);
  const twin = await client.begin("pay", request);
  assert.equal(twin.key, op.key);
  const results = await Promise.all([op.send(), twin.send()]);
  assert.deepEqual(results.map((r) => [r.status, r.ok, r.key]), [[201, true, op.key], [201, true, op.key]]);
  const bodies = await Promise.all(results.map((r) => r.response.json()));
  assert.deepEqual(bodies.map((b) => b.key), [op.key, op.key], "each caller can read its own Response");
  assert.equal((await ctx.log("race")).length, 1, "one request reached the server");
  assert.equal(twin.state, "succeeded");

  // The first call ends without a definite answer: the waiting call takes its turn, same key.
  const busy = await client.begin("busy", { url: ctx.url("race2", "503,503,201"), body: "x" });
  const [first, second] = await Promise.allSettled([busy.send(), busy.send()]);
  assert.equal(first.status, "rejected");
  assert.equal(first.reason.code, "RETRIES_EXHAUSTED");
  assert.equal(second.status, "fulfilled");
  assert.equal(second.value.status, 201);
  assert.deepEqual((await ctx.log("race2")).map((e) => e.key), [busy.key, busy.key, busy.key]);

  // A waiting call can be aborted without disturbing the one that sends.
  const slow = await client.begin("slow", { url: ctx.url("race3", "delay300,201"), body: "x" });
  const controller = new AbortController();
  const sending = slow.send();
  const waiting = slow.send({ signal: controller.signal });
  controller.abort();
  const error = await assert.rejects(waiting, "ABORTED");
  assert.equal(error.key, slow.key);
  assert.equal((await sending).status, 201);
  assert.equal((await ctx.log("race3")).length, 1);
});
