// Reconciliation: asking the server what became of a key (the key-status protocol and the app's own
// lookup), and `client.fetch` without intent resuming its key.
// Cases of the JavaScript API (the runners and `ctx`: ../cases.mjs).

import { assert, adder } from "./support.mjs";

export const cases = [];
const add = adder(cases);

// --- reconciliation: asking the server what became of a key ----------------------------------

add("reconcile: an exhausted send whose answers were all lost resolves with the server's stored answer", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { maxAttempts: 2 }, statusUrl: ctx.ksUrl("lost", "done201") });
  const events = [];
  client.addEventListener("reconcile", (e) => events.push(e));
  const op = await client.begin("pay", { url: ctx.url("lost", "reset"), body: "x", headers: { authorization: "Bearer t0k" } });
  const result = await op.send();
  assert.deepEqual([result.status, result.ok, result.replayed, result.uncertain, result.attempts], [201, true, true, false, 2]);
  assert.deepEqual(await result.response.json(), { stored: true, key: op.key }, "the stored answer's body");
  assert.equal(op.state, "succeeded", "retired like a replayed answer");
  const asked = await ctx.log("lost-ks");
  assert.deepEqual(asked.map((e) => [e.method, e.key]), [["GET", op.key]]);
  assert.equal(asked[0].headers.authorization, "Bearer t0k", "with the request's credentials");
  assert.deepEqual(events.map((e) => [e.type, e.key]), [["reconcile", op.key]]);
});

add("reconcile: a key the server never saw is sent once more with the same key", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { maxAttempts: 2 }, statusUrl: ctx.ksUrl("never", "unknown") });
  const op = await client.begin("pay", { url: ctx.url("never", "reset,reset,201"), body: "x" });
  const result = await op.send();
  assert.deepEqual([result.status, result.replayed, result.attempts], [201, false, 3]);
  assert.deepEqual((await ctx.log("never")).map((e) => e.key), [op.key, op.key, op.key]);
});

add("reconcile: the one attempt more after \"unknown\" is counted and said: attempts are requests with the key, never the question", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { maxAttempts: 2 }, statusUrl: ctx.ksUrl("never2", "unknown") });
  const op = await client.begin("pay", { url: ctx.url("never2", "reset"), body: "x" });
  const error = await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  assert.deepEqual([error.attempts, error.reason], [3, "maxAttempts"]);
  // (A browser may re-send a reset request once on its own: the server can count one more.)
  assert.ok((await ctx.log("never2")).every((e) => e.key === op.key), "every request with the key");
  assert.equal((await ctx.log("never2-ks")).length, 1, "and one question, not an attempt");
  assert.ok(error.message.includes("the server had no record of the key, so it was sent once more (3 attempts in all)"), error.message);
});

add("client.fetch without intent: the same request again resumes its key (a retry loop around it makes one order); once answered, an identical request is a new intent", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { maxAttempts: 2 } });
  const url = ctx.url("anon", "503,503,201,201");
  const init = () => ({ method: "POST", headers: { "content-type": "application/json" }, body: '{"qty":2}' });
  const first = await assert.rejects(client.fetch(url, init()), "RETRIES_EXHAUSTED");
  assert.ok(first.message.includes("the key is kept, send again to resume"), first.message);
  // What TanStack Query's or ky's retry does: the same call again.
  const again = await client.fetch(url, init());
  assert.equal(again.status, 201);
  assert.equal((await again.json()).key, first.key, "the same key");
  // Answered: forgotten. The same request later is what the user asked for again.
  const later = await client.fetch(url, init());
  const keys = (await ctx.log("anon")).map((e) => e.key);
  assert.deepEqual(keys.slice(0, 3), [first.key, first.key, first.key]);
  assert.notEqual(keys[3], first.key, "a new intent after the answer");
  assert.equal((await later.json()).key, keys[3]);
  assert.equal((await client.pending()).length, 0, "nothing left pending");
  // Another body is another intent.
  const other = await assert.rejects(client.fetch(ctx.url("anon2", "503"), { ...init(), body: '{"qty":3}' }), "RETRIES_EXHAUSTED");
  const same = await assert.rejects(client.fetch(ctx.url("anon2", "503"), { ...init(), body: '{"qty":4}' }), "RETRIES_EXHAUSTED");
  assert.notEqual(other.key, same.key);
});

add("reconcile: a key still in flight at the server waits its Retry-After, then the same key again", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { maxAttempts: 2 }, statusUrl: ctx.ksUrl("busy", "inflight") });
  const op = await client.begin("pay", { url: ctx.url("busy", "reset,reset,201r"), body: "x" });
  const retries = [];
  const result = await op.send({ onRetry: (e) => retries.push(e) });
  assert.deepEqual([result.status, result.replayed, result.attempts], [201, true, 3]);
  const last = retries.at(-1);
  assert.deepEqual([last.reason, last.status], ["same payment still in progress", null]);
  assert.ok(last.delayMs >= 1000, `waited the status answer's Retry-After (${last.delayMs} ms)`);
  assert.deepEqual((await ctx.log("busy")).map((e) => e.key), [op.key, op.key, op.key]);
});

add("reconcile: an expired key resolves through the server and is never re-sent", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ keyTtlMs: 200, statusUrl: ctx.ksUrl("expired", "done201") });
  const op = await client.begin("pay", { url: ctx.url("expired", "201"), body: "x" });
  await ctx.sleep(300);
  const result = await op.send();
  assert.deepEqual([result.status, result.ok, result.replayed, result.attempts], [201, true, true, 0]);
  assert.equal((await ctx.log("expired")).length, 0, "an expired key is never sent");
  // Unknown past the key's lifetime proves nothing: EXPIRED, saying so.
  const other = ctx.client({ keyTtlMs: 200, statusUrl: ctx.ksUrl("expired2", "unknown") });
  const op2 = await other.begin("pay2", { url: ctx.url("expired2", "201"), body: "x" });
  await ctx.sleep(300);
  const error = await assert.rejects(op2.send(), "EXPIRED");
  assert.match(error.message, /the server has no record of it/);
  assert.equal((await ctx.log("expired2")).length, 0);
});

add("reconcile: an uncertain failure is settled by the server's stored answer", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { attemptTimeoutMs: 200 }, statusUrl: ctx.ksUrl("unc", "done201") });
  const op = await client.begin("pay", { url: ctx.url("unc", "delay1000,404"), body: "x" });
  const result = await op.send();
  assert.deepEqual([result.status, result.ok, result.replayed, result.uncertain], [201, true, true, false]);
});

for (const bad of ["garbage", "html", "500", "otherkey", "noresponse"]) {
  add(`reconcile: a status answer that is not the protocol (${bad}) is "could not ask": exhausted, key kept`, async (ctx) => {
    const { assert } = ctx;
    const client = ctx.client({ retry: { maxAttempts: 2 }, statusUrl: ctx.ksUrl("bad", bad) });
    const op = await client.begin("pay", { url: ctx.url("bad", "reset"), body: "x" });
    const error = await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
    assert.equal(error.key, op.key);
    assert.match(error.message, /the key's status is unknown \(/);
    assert.equal(op.state, "pending");
    assert.equal((await ctx.log("bad")).length, 2, "never resent on a bad answer");
  });
}

add("reconcile: op.reconcile() and client.reconcile(id) ask on request", async (ctx) => {
  const { assert } = ctx;
  const ask = (script) => ctx.client({ retry: { maxAttempts: 1 }, statusUrl: ctx.ksUrl(`own-${script}`, script) });
  const begun = async (client, id) => client.begin(id, { url: ctx.url(`own-${id}`, "201"), body: "x" });
  const done = await (await begun(ask("done201"), "a")).reconcile();
  assert.equal(done.status, "done");
  assert.deepEqual([done.result.status, done.result.replayed, done.result.attempts], [201, true, 0]);
  const inFlight = ask("inflight");
  const opB = await begun(inFlight, "b");
  assert.deepEqual(await opB.reconcile(), { status: "in_flight" });
  assert.equal(opB.state, "pending", "unchanged");
  const unknownClient = ask("unknown");
  await begun(unknownClient, "c");
  assert.deepEqual(await unknownClient.reconcile("c"), { status: "unknown" });
  await assert.rejects((await begun(ask("html"), "d")).reconcile(), "RECONCILE_FAILED");
  await assert.rejects(ask("unknown").reconcile("nothing"), "NOT_FOUND");
  await assert.rejects((await begun(ctx.client(), "e")).reconcile(), "INVALID_OPTIONS", "no way to ask configured");
  assert.equal((await ctx.log("own-b")).length, 0, "asking sends nothing");
});

add("reconcile: the app's own lookup (a reconcile callback), and the options' checks", async (ctx) => {
  const { assert } = ctx;
  const seen = [];
  const client = ctx.client({
    retry: { maxAttempts: 1 },
    reconcile: async ({ intentId, key, signal }) => {
      seen.push([intentId, key, signal instanceof AbortSignal]);
      return { status: "done", response: new Response(JSON.stringify({ order: "o1" }), { status: 201 }) };
    },
  });
  const op = await client.begin("pay", { url: ctx.url("cb", "reset"), body: "x" });
  const result = await op.send();
  assert.deepEqual([result.status, result.replayed], [201, true]);
  assert.deepEqual(await result.response.json(), { order: "o1" });
  assert.deepEqual(seen, [["pay", op.key, true]]);
  const throwing = ctx.client({ retry: { maxAttempts: 1 }, reconcile: async () => { throw new Error("lookup down"); } });
  const error = await assert.rejects((await throwing.begin("t", { url: ctx.url("cb2", "reset"), body: "x" })).send(), "RETRIES_EXHAUSTED");
  assert.match(error.message, /lookup down/);
  assert.throws(() => ctx.client({ statusUrl: "/api/keys/", reconcile: async () => ({ status: "unknown" }) }), "INVALID_OPTIONS", "not both");
  assert.throws(() => ctx.client({ statusUrl: "/api/keys" }), "INVALID_OPTIONS", "a template needs {key}");
  assert.throws(() => ctx.client({ reconcile: "GET /orders" }), "INVALID_OPTIONS", "a function");
});

