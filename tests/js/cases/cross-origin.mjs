// Cross-origin: the `cors` event and warnings, the advice on exposed headers, a refused preflight.
// Cases of the JavaScript API (the runners and `ctx`: ../cases.mjs).

import { assert, adder } from "./support.mjs";

export const cases = [];
const add = adder(cases);

/** Every header a default client reads, as its CORS advice spells them. */
const DEFAULT_EXPOSE = "Access-Control-Expose-Headers: Idempotent-Replayed, Idempotency-Replayed, X-Idempotent-Replayed, Retry-After, Stripe-Should-Retry";

/** Runs `body` with console.warn recorded: resolves to the warnings this library gave. */
async function libraryWarnings(body) {
  const original = console.warn;
  const warnings = [];
  console.warn = (...args) => {
    const text = args.map(String).join(" ");
    if (text.startsWith("idempotent-fetch:")) warnings.push(text);
    else original(...args);
  };
  try {
    await body();
  } finally {
    console.warn = original;
  }
  return warnings;
}

add("cross-origin: with every header exposed, answers that lack headers servers may omit raise no cors event and no warning", async (ctx) => {
  const { assert } = ctx;
  const events = [];
  const client = ctx.client({ retry: { maxAttempts: 3 } });
  client.addEventListener("cors", (e) => events.push(e));
  const warnings = await libraryWarnings(async () => {
    const fresh = await (await ctx.client({ retry: { maxAttempts: 4 } }).begin("fresh", { url: ctx.url("cors-fresh", "500,503,503,201"), body: "x" })).send();
    assert.deepEqual([fresh.status, fresh.attempts], [201, 4]);
    const replay = await (await client.begin("replay", { url: ctx.url("cors-exposed", "500r"), body: "x" })).send();
    assert.deepEqual([replay.status, replay.replayed, replay.attempts], [500, true, 1], "the exposed marker is read");
    // In flight, again and again, without Retry-After (the header is optional).
    const busy = await assert.rejects((await client.begin("busy", { url: ctx.url("cors-409", "409"), body: "x" })).send(), "RETRIES_EXHAUSTED");
    assert.ok(!/CORS|Expose/.test(busy.message), busy.message);
    // A handler that keeps failing, on a server that stores no 5xx: 500 each time, nothing to mark.
    const failing = await assert.rejects((await client.begin("failing", { url: ctx.url("cors-500", "500"), body: "x" })).send(), "RETRIES_EXHAUSTED");
    assert.match(failing.message, /answered 500 again without showing this page a header beyond the CORS-safelisted ones: if it marks replayed answers or sends Retry-After/);
    // A stored 500 replayed without a marker, which the key status confirms: the server's own
    // account names no header the page missed.
    const stored = ctx.client({ retry: { maxAttempts: 3 }, statusUrl: ctx.ksUrl("cors-stored", "done500") });
    stored.addEventListener("cors", (e) => events.push(e));
    const result = await (await stored.begin("stored", { url: ctx.url("cors-stored", "500"), body: "x" })).send();
    assert.deepEqual([result.status, result.replayed, result.attempts], [500, true, 3], "the key status's stored 500");
  });
  assert.deepEqual(events, [], "no cors event");
  assert.deepEqual(warnings, [], "no console warning");
}, { browserOnly: true });

add("cross-origin: a replay marker hidden from the page, shown by the key status's account of the answer, warns once with every header the client reads", async (ctx) => {
  const { assert } = ctx;
  const origin = new URL(ctx.server).origin;
  const hidden = `${ctx.url("cors-hidden", "500r")}&expose=0`;
  const events = [];
  const client = ctx.client({ retry: { maxAttempts: 3 }, statusUrl: ctx.ksUrl("cors-hidden", "done500r") });
  client.addEventListener("cors", (e) => events.push(e));
  let op;
  const warnings = await libraryWarnings(async () => {
    op = await client.begin("pay", { url: hidden, body: "x" });
    const result = await op.send();
    assert.deepEqual([result.status, result.replayed, result.attempts], [500, true, 3], "the stored answer, found by asking");
    // Once per origin and client: a second intent adds none.
    await (await client.begin("again", { url: hidden, body: "y" })).send();
  });
  assert.deepEqual(events.map((e) => [e.type, e.origin, e.fix, e.key]), [["cors", origin, DEFAULT_EXPOSE, op.key]]);
  assert.equal(warnings.length, 1, warnings.join("\n"));
  assert.ok(warnings[0].includes(`${origin} hides Idempotent-Replayed from this page: its key status says its 500 answer carries it`), warnings[0]);
  assert.ok(warnings[0].includes(`add "${DEFAULT_EXPOSE}"`), warnings[0]);
  // The same hidden server without a key status to say what it sent: no evidence, no event; the
  // exhausted message says what the CORS answers would need, as a condition.
  const blind = ctx.client({ retry: { maxAttempts: 3 } });
  blind.addEventListener("cors", (e) => events.push(e));
  const error = await assert.rejects((await blind.begin("blind", { url: hidden, body: "x" })).send(), "RETRIES_EXHAUSTED");
  assert.ok(error.message.includes(`if it marks replayed answers or sends Retry-After, its CORS answers need "${DEFAULT_EXPOSE}"`), error.message);
  assert.equal(events.length, 1, "no event without evidence");
}, { browserOnly: true });

add("cross-origin: the advice names the app's replayHeaders, which the usual line leaves hidden, each header once", async (ctx) => {
  const { assert } = ctx;
  // A default spelling repeated in the app's list is named once.
  const client = ctx.client({ retry: { maxAttempts: 3 }, replayHeaders: ["x-replayed", "Idempotent-Replayed"], statusUrl: ctx.ksUrl("cors-custom", "done500x") });
  const events = [];
  client.addEventListener("cors", (e) => events.push(e));
  // The server follows the usual advice, but marks its replays with X-Replayed.
  const url = `${ctx.url("cors-custom", "500x")}&expose=${encodeURIComponent("Idempotent-Replayed, Retry-After")}`;
  await libraryWarnings(async () => {
    const result = await (await client.begin("pay", { url, body: "x" })).send();
    assert.deepEqual([result.status, result.replayed], [500, true]);
  });
  const fix = "Access-Control-Expose-Headers: Idempotent-Replayed, Idempotency-Replayed, X-Idempotent-Replayed, X-Replayed, Retry-After, Stripe-Should-Retry";
  assert.deepEqual(events.map((e) => e.fix), [fix]);
  // With the advised line, the same server's replay is read at once.
  const exposed = `${ctx.url("cors-custom-ok", "500x")}&expose=${encodeURIComponent(fix.slice(fix.indexOf(":") + 2))}`;
  const result = await (await client.begin("ok", { url: exposed, body: "x" })).send();
  assert.deepEqual([result.status, result.replayed, result.attempts], [500, true, 1]);
}, { browserOnly: true });

add("cross-origin: a preflight that does not allow the key header ends in a message that says so", async (ctx) => {
  const { assert } = ctx;
  const op = await ctx.client({ retry: { maxAttempts: 3 } }).begin("pay", {
    url: `${ctx.url("cors-refused", "201")}&allow=0`, body: "x", headers: { "content-type": "application/json" },
  });
  const error = await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  assert.match(error.message, /refused every attempt at once: does its CORS preflight answer "Access-Control-Allow-Headers: Idempotency-Key, Content-Type"\?/);
  assert.equal((await ctx.log("cors-refused")).length, 0, "nothing reached the server");
}, { browserOnly: true });

