// Behaviour cases of the JavaScript API, shared by the Node runner (node.test.mjs, memory storage)
// and the browser runner (browser.test.mjs: Chromium, Firefox, WebKit; localStorage/sessionStorage in a real page).
//
// This module imports nothing, so it loads unchanged in Node and in a page. Each case is
// `{ name, browserOnly?, run: async (ctx) => {} }`; ctx comes from `makeContext` below:
//   ctx.lib        the package's exports (IdempotentClient, isIdempotentFetchError, ...)
//   ctx.server     base URL of tests/support/test-server.mjs
//   ctx.storage    the persistent storage kind here: "memory" (Node) or "local" (browser)
//   ctx.browser    true in a page
//   ctx.assert     small assertion helpers (identical in both environments)
//   ctx.ns         a namespace unique to this case; ctx.newNamespace() makes more
//   ctx.client()   a client in ctx.ns with fast retries; ctx.url()/ctx.log() talk to the server
// `runCase` runs one case and then proves the module still works (a trap in wasm would poison
// every later call), so every error case is followed by a successful send.

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const PREFIX = "idempotent-fetch:v1:";
/** The mark in front of a retired record's slot id (src/js/storage/backend.ts RETIRED). */
const RETIRED = "\u0002";
/** The localStorage text of intent `id` of namespace `ns`, on either shelf (pending, retired). */
const storedText = (ns, id) => localStorage.getItem(`${PREFIX}${ns}:${id}`) ?? localStorage.getItem(`${PREFIX}${ns}:${RETIRED}${id}`);
const SECRET_TOKEN = "secret-token";
const CARD = "4242424242424242";
/** The Web Storage slot suffix of a namespace's fingerprint secret (a control character: no intent id). */
const SECRET_SLOT = ":\u0001secret";

// ---------------------------------------------------------------------------------------------
// Context and helpers

let namespaceCounter = 0;

function uniqueNamespace() {
  namespaceCounter += 1;
  const random = Math.floor(Math.random() * 0x7fffffff).toString(36);
  return `t${Date.now().toString(36)}${random}${namespaceCounter}`;
}

class AssertionError extends Error {
  constructor(message) {
    super(message);
    this.name = "AssertionError";
  }
}

function show(value) {
  try {
    return typeof value === "string" ? JSON.stringify(value) : JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

export const assert = {
  ok(value, message) {
    if (!value) throw new AssertionError(message ?? `expected a truthy value, got ${show(value)}`);
  },
  equal(actual, expected, message) {
    if (!Object.is(actual, expected)) {
      throw new AssertionError(`${message ? message + ": " : ""}expected ${show(expected)}, got ${show(actual)}`);
    }
  },
  notEqual(actual, unexpected, message) {
    if (Object.is(actual, unexpected)) {
      throw new AssertionError(`${message ? message + ": " : ""}expected anything but ${show(unexpected)}`);
    }
  },
  deepEqual(actual, expected, message) {
    if (JSON.stringify(actual) !== JSON.stringify(expected)) {
      throw new AssertionError(`${message ? message + ": " : ""}expected ${show(expected)}, got ${show(actual)}`);
    }
  },
  match(text, pattern, message) {
    if (typeof text !== "string" || !pattern.test(text)) {
      throw new AssertionError(`${message ? message + ": " : ""}expected ${show(text)} to match ${pattern}`);
    }
  },
  fail(message) {
    throw new AssertionError(message);
  },
  /** Expects an IdempotentFetchError with `code` (from a promise, or a function that throws or rejects). */
  async rejects(promiseOrFn, code, message) {
    let error;
    try {
      const value = typeof promiseOrFn === "function" ? promiseOrFn() : promiseOrFn;
      await value;
    } catch (e) {
      error = e;
    }
    const what = message ? message + ": " : "";
    if (error === undefined) throw new AssertionError(`${what}expected an IdempotentFetchError ${code}, but it succeeded`);
    if (!(error instanceof Error)) throw new AssertionError(`${what}expected an Error, got ${show(error)}`);
    if (error.name !== "IdempotentFetchError") {
      throw new AssertionError(`${what}expected name IdempotentFetchError, got ${error.name}: ${error.message}`);
    }
    if (error.code !== code) throw new AssertionError(`${what}expected code ${code}, got ${error.code}: ${error.message}`);
    return error;
  },
  /** Same as `rejects` for something that must throw synchronously (the constructor). */
  throws(fn, code, message) {
    let error;
    try {
      fn();
    } catch (e) {
      error = e;
    }
    const what = message ? message + ": " : "";
    if (error === undefined) throw new AssertionError(`${what}expected ${code} to be thrown`);
    if (error.name !== "IdempotentFetchError" || error.code !== code) {
      throw new AssertionError(`${what}expected IdempotentFetchError ${code}, got ${error.name} ${error.code}: ${error.message}`);
    }
    return error;
  },
};

export function makeContext({ lib, server, storage, browser }) {
  const ns = uniqueNamespace();
  const ctx = {
    lib,
    server,
    storage,
    browser: Boolean(browser),
    assert,
    ns,
    newNamespace: uniqueNamespace,
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    /** A client with fast retries (1..5 ms) in `ctx.ns` unless options say otherwise. */
    client(options = {}) {
      const { retry, ...rest } = options;
      return new lib.IdempotentClient({
        namespace: ns,
        storage,
        retry: { baseDelayMs: 1, maxDelayMs: 5, ...retry },
        ...rest,
      });
    },
    /** URL of a scripted scenario; scenario names are prefixed with the namespace (unique).
     *  `close=1`: a fresh connection per attempt, so the browser never re-sends one by itself. */
    url(scenario, script = "201") {
      return `${server}/s/${ns}-${scenario}?script=${encodeURIComponent(script)}&close=1`;
    },
    /** A `statusUrl` template answering the key-status protocol with the steps of `script`. */
    ksUrl(scenario, script) {
      return `${server}/ks/${ns}-${scenario}/{key}?script=${encodeURIComponent(script)}`;
    },
    /** What the server received for `scenario`. */
    async log(scenario) {
      const response = await fetch(`${server}/log/${ns}-${scenario}`);
      return response.json();
    },
    async waitFor(predicate, what, timeoutMs = 5000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const value = await predicate();
        if (value) return value;
        if (Date.now() > until) throw new AssertionError(`timed out waiting for ${what}`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    },
    /** The keys this client's namespace has in a Web Storage area (browser only). */
    slots(area = globalThis.localStorage) {
      const out = [];
      for (let i = 0; i < area.length; i++) {
        const key = area.key(i);
        // Intent slots only: the namespace's fingerprint secret has its own (SECRET_SLOT).
        if (key.startsWith(`${PREFIX}${ns}:`) && !key.endsWith(SECRET_SLOT)) out.push(key);
      }
      return out;
    },
  };
  return ctx;
}

/** Runs a case, then proves the module still works with a fresh client. */
export async function runCase(testCase, ctx) {
  await testCase.run(ctx);
  await stillWorks(ctx);
}

async function stillWorks(ctx) {
  const { assert } = ctx;
  const client = new ctx.lib.IdempotentClient({ namespace: ctx.newNamespace(), storage: "memory" });
  const op = await client.begin("sanity", { url: ctx.url("sanity", "201"), body: "ok" });
  const result = await op.send();
  assert.equal(result.status, 201, "module still works after the case");
  assert.equal(ctx.lib.isIdempotentFetchError(new Error("x")), false);
}

function base64ToBytes(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

function sameBytes(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Every key and value of localStorage and sessionStorage, as one list of strings. */
function allStoredText() {
  const out = [];
  for (const area of [globalThis.localStorage, globalThis.sessionStorage]) {
    for (let i = 0; i < area.length; i++) {
      const key = area.key(i);
      out.push(key, area.getItem(key));
    }
  }
  return out;
}

/** Temporarily replaces a property (restored by the returned function). Also used by tests/fault/bad-input-cases.mjs. */
export function override(target, name, descriptor) {
  const original = Object.getOwnPropertyDescriptor(target, name);
  Object.defineProperty(target, name, { configurable: true, ...descriptor });
  return () => {
    if (original) Object.defineProperty(target, name, original);
    else delete target[name];
  };
}

// ---------------------------------------------------------------------------------------------
// The cases

export const cases = [];
const add = (name, run, options = {}) => cases.push({ name, run, ...options });

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

// Bodies: each type must arrive byte-identical on every attempt with fetch's content type.
const binary = () => new Uint8Array([0, 1, 2, 0x7f, 0x80, 0xfe, 0xff, 13, 10, 0]);
const bodyCases = [
  ["string", () => "héllo ✓ " + CARD.slice(0, 4), () => new TextEncoder().encode("héllo ✓ 4242"), /^text\/plain;charset=utf-8$/i],
  ["ArrayBuffer", () => binary().buffer, binary, null],
  ["Uint8Array subarray", () => {
    const whole = new Uint8Array(32).fill(0xaa);
    whole.set(binary(), 7);
    return whole.subarray(7, 7 + binary().length);
  }, binary, null],
  ["DataView", () => {
    const whole = new Uint8Array(20).fill(0xbb);
    whole.set(binary(), 5);
    return new DataView(whole.buffer, 5, binary().length);
  }, binary, null],
  ["Blob with type", () => new Blob([binary()], { type: "application/x-test" }), binary, /^application\/x-test$/],
  ["URLSearchParams", () => new URLSearchParams({ amount: "10.00", note: "a&b=c é" }),
    () => new TextEncoder().encode("amount=10.00&note=a%26b%3Dc+%C3%A9"), /^application\/x-www-form-urlencoded;charset=utf-8$/i],
];
for (const [label, makeBody, expected, contentType] of bodyCases) {
  add(`body ${label} arrives byte-identical on every attempt with its content type`, async (ctx) => {
    const { assert } = ctx;
    const op = await ctx.client().begin("pay", { url: ctx.url("body", "503,500,201"), body: makeBody() });
    await op.send();
    const log = await ctx.log("body");
    assert.equal(log.length, 3);
    for (const entry of log) {
      const bytes = base64ToBytes(entry.bodyBase64);
      assert.ok(sameBytes(bytes, expected()), `attempt ${entry.attempt}: got ${hex(bytes)}, expected ${hex(expected())}`);
      if (contentType) assert.match(entry.headers["content-type"], contentType, `attempt ${entry.attempt} content-type`);
      else assert.equal(entry.headers["content-type"], undefined, `attempt ${entry.attempt} has no content-type`);
    }
  });
}

add("body FormData arrives identical (same boundary) on every attempt as multipart", async (ctx) => {
  const { assert } = ctx;
  const form = new FormData();
  form.append("amount", "10.00");
  form.append("file", new Blob([binary()], { type: "application/octet-stream" }), "a.bin");
  const op = await ctx.client().begin("pay", { url: ctx.url("form", "503,201"), body: form });
  await op.send();
  const log = await ctx.log("form");
  assert.equal(log.length, 2);
  const type = log[0].headers["content-type"];
  const boundary = /^multipart\/form-data; boundary=(.+)$/.exec(type)?.[1];
  assert.ok(boundary, `multipart content type: ${type}`);
  assert.equal(log[1].headers["content-type"], type, "same boundary on the retry");
  assert.equal(log[1].bodyBase64, log[0].bodyBase64, "same bytes on the retry");
  assert.ok(log[0].body.includes(`--${boundary}`), "body uses the announced boundary");
  assert.ok(log[0].body.includes('name="amount"') && log[0].body.includes("10.00"));
  assert.ok(log[0].body.includes(String.fromCharCode(...binary())), "file bytes intact");
});

add("an explicit content-type header wins over the body's own", async (ctx) => {
  const { assert } = ctx;
  const op = await ctx.client().begin("pay", {
    url: ctx.url("ct", "201"),
    headers: { "Content-Type": "application/json" },
    body: new Blob(["{}"], { type: "text/x-ignored" }),
  });
  await op.send();
  assert.equal((await ctx.log("ct"))[0].headers["content-type"], "application/json");
});

add("no body: nothing is sent as a body, and GET works", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client();
  await (await client.begin("post", { url: ctx.url("nobody", "201") })).send();
  await (await client.begin("get", { url: ctx.url("get", "201"), method: "get" })).send();
  const [post] = await ctx.log("nobody");
  const [get] = await ctx.log("get");
  assert.equal(post.method, "POST", "method defaults to POST");
  assert.equal(post.bodyBase64, "");
  assert.equal(get.method, "GET", "method is upper-cased");
});

add("a ReadableStream body is buffered once and every attempt sends the same bytes", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client();
  const bytes = binary();
  // Two chunks: the second arrives later, so buffering must read to the end.
  const stream = () => new ReadableStream({
    async pull(c) {
      if (!this.sent) { this.sent = true; c.enqueue(bytes.slice(0, 4)); return; }
      await new Promise((r) => setTimeout(r, 5));
      c.enqueue(bytes.slice(4));
      c.close();
    },
  });
  const op = await client.begin("pay", { url: ctx.url("rs", "503,reset,201"), body: stream() });
  assert.equal((await op.send()).status, 201);
  const viaFetch = await client.fetch(ctx.url("rsf", "503,201"), { method: "POST", body: stream(), intent: "fetch-stream" });
  assert.equal(viaFetch.status, 201, "client.fetch with a stream body");
  for (const scenario of ["rs", "rsf"]) {
    const log = await ctx.log(scenario);
    assert.ok(log.length >= 2, `${scenario}: retried`);
    for (const entry of log) assert.ok(sameBytes(base64ToBytes(entry.bodyBase64), bytes), `${scenario}: attempt ${entry.attempt} sent the whole body`);
    assert.equal(new Set(log.map((e) => e.key)).size, 1, `${scenario}: one key`);
  }
});

add("a Request is buffered once: client.fetch(request) and begin(id, request) retry its body, method and headers", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client();
  const request = new Request(ctx.url("rq", "503,reset,201"), {
    method: "PUT", headers: { "content-type": "application/json", "x-from": "request" }, body: '{"cart":42}',
  });
  const response = await client.fetch(request, { intent: "checkout:rq" });
  assert.equal(response.status, 201);
  const log = await ctx.log("rq");
  assert.equal(log.length, 3, "three attempts");
  for (const entry of log) {
    assert.equal(entry.method, "PUT");
    assert.equal(entry.body, '{"cart":42}', "the Request's body on every attempt");
    assert.equal(entry.headers["content-type"], "application/json");
    assert.equal(entry.headers["x-from"], "request");
    assert.equal(entry.key, log[0].key, "one key");
  }
  // The same request again under the same intent: the stored answer's key, not a new one.
  const again = new Request(ctx.url("rq", "503,reset,201"), { method: "PUT", headers: { "content-type": "application/json", "x-from": "request" }, body: '{"cart":42}' });
  const op = await client.begin("checkout:rq", again);
  assert.equal(op.key, log[0].key, "begin(id, Request) resumes the fetch's intent");
  // init.body replaces the Request's (as with fetch); the Request's own body is then not read.
  const replaced = new Request(ctx.url("rq2", "201"), { method: "POST", body: "old" });
  assert.equal((await client.fetch(replaced, { body: "new" })).status, 201);
  assert.equal((await ctx.log("rq2"))[0].body, "new");
  // A Request's signal is the send's signal unless init has one.
  const controller = new AbortController();
  controller.abort();
  const aborted = new Request(ctx.url("rq3", "201"), { method: "POST", body: "x", signal: controller.signal });
  await assert.rejects(client.fetch(aborted), "ABORTED", "the Request's aborted signal");
});

add("bodies that cannot be buffered: a locked stream or a used Request is BODY_NOT_REPLAYABLE, an oversized stream BODY_TOO_LARGE; nothing is sent", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ maxBodyBytes: 1024 });
  const locked = new ReadableStream({ start(c) { c.enqueue(new Uint8Array([1])); c.close(); } });
  locked.getReader();
  const error = await assert.rejects(client.begin("pay", { url: ctx.url("rs", "201"), body: locked }), "BODY_NOT_REPLAYABLE");
  assert.match(error.message, /locked/);
  const used = new Request(ctx.url("rs", "201"), { method: "POST", body: "x" });
  await used.text();
  await assert.rejects(client.fetch(used), "BODY_NOT_REPLAYABLE", "fetch(a used Request)");
  await assert.rejects(client.begin("used", used), "BODY_NOT_REPLAYABLE", "begin(id, a used Request)");
  // An endless stream: reading stops past the cap and the stream is cancelled.
  let cancelled = false;
  const endless = new ReadableStream({ pull(c) { c.enqueue(new Uint8Array(256)); }, cancel() { cancelled = true; } });
  await assert.rejects(client.fetch(ctx.url("rs", "201"), { method: "POST", body: endless }), "BODY_TOO_LARGE", "an endless stream");
  assert.ok(cancelled, "the endless stream was cancelled");
  const big = new Request(ctx.url("rs", "201"), { method: "POST", body: new Uint8Array(4096) });
  await assert.rejects(client.fetch(big), "BODY_TOO_LARGE", "a Request over maxBodyBytes");
  const strings = new ReadableStream({ start(c) { c.enqueue("text"); c.close(); } });
  await assert.rejects(client.fetch(ctx.url("rs", "201"), { method: "POST", body: strings }), "INVALID_REQUEST", "string chunks");
  assert.equal((await ctx.log("rs")).length, 0, "nothing sent");
  assert.equal((await client.pending()).length, 0, "nothing stored");
});

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

add("persistRequest: true stores the request so resume() re-sends it with the same key", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ persistRequest: true, retry: { maxAttempts: 2 } });
  const body = `{"card":"${CARD}"}`;
  const op = await client.begin("pay", { url: ctx.url("pr", "503,503,201"), headers: { "X-Trace": "t1" }, body });
  await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  if (ctx.browser) {
    const stored = JSON.parse(localStorage.getItem(`${PREFIX}${ctx.ns}:pay`));
    assert.ok(stored.request, "the request is stored when opted in");
    assert.ok(JSON.stringify(stored.request.headers).includes("t1"));
  }
  // The server is another origin than the page: resume() refuses it unless listed (issue 13 item 6).
  if (ctx.browser) await assert.rejects(ctx.client({ persistRequest: true }).resume("pay"), "INVALID_REQUEST", "another origin");
  const later = ctx.browser ? ctx.client({ persistRequest: true, resumeOrigins: [new URL(ctx.server).origin] }) : client;
  const [info] = await later.pending();
  assert.equal(info.resumable, true);
  const resumed = await later.resume("pay");
  assert.equal(resumed.key, op.key);
  assert.equal(resumed.resumed, true);
  assert.equal(resumed.attempts, 2);
  const result = await resumed.send();
  assert.equal(result.status, 201);
  const log = await ctx.log("pr");
  assert.equal(log.length, 3);
  for (const entry of log) {
    assert.equal(entry.key, op.key);
    assert.equal(entry.body, body);
    assert.equal(entry.headers["x-trace"], "t1");
    assert.match(entry.headers["content-type"], /^text\/plain/);
  }
});

/** `length` bytes of every value 0..255 (a body no text encoding would carry unchanged), and their base64. */
function binaryBody(length, seed = 0) {
  const bytes = Uint8Array.from({ length }, (_, i) => (i * 7 + seed) & 255);
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return { bytes, base64: btoa(binary) };
}
/** The Web Storage slot of the out-of-line body of intent `id` (src/js/storage/backend.ts BODY). */
const bodySlot = (ns, id) => `${PREFIX}${ns}:\u0001:${id}`;
/** The Web Storage keys of namespace `ns`. */
const slotsOf = (ns) => Object.keys(localStorage).filter((k) => k.startsWith(`${PREFIX}${ns}:`));

add("persistRequest: a body over 1 KiB is stored out of line (the record holds its length), resumed after a reload with the same bytes, and deleted with the record; none is left behind", async (ctx) => {
  const { assert } = ctx;
  const origins = [new URL(ctx.server).origin];
  const options = { persistRequest: true, resumeOrigins: origins, retry: { maxAttempts: 1 } };
  const client = ctx.client(options);
  const { bytes, base64 } = binaryBody(20_000);
  const op = await client.begin("big", { url: ctx.url("big", "503,201"), method: "POST", body: bytes });
  await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  if (ctx.browser) {
    const record = storedText(ctx.ns, "big");
    assert.ok(record.length < 1000, `the record stays small (${record.length} chars)`);
    assert.equal(JSON.parse(record).request.body, bytes.length, "the record names the body by its length");
    assert.equal(localStorage.getItem(bodySlot(ctx.ns, "big")), base64, "the body's own slot holds its bytes (base64)");
  }
  // A reload: a fresh client over the same storage (Node's memory storage: the same client).
  const later = ctx.browser ? ctx.client(options) : client;
  assert.deepEqual((await later.pending()).map((p) => [p.intentId, p.resumable]), [["big", true]]);
  const resumed = await later.resume("big");
  assert.equal(resumed.key, op.key);
  assert.equal((await resumed.send()).status, 201);
  const log = await ctx.log("big");
  assert.deepEqual(log.map((e) => [e.key, e.bodyBase64]), [[op.key, base64], [op.key, base64]], "the same bytes on every attempt");
  if (ctx.browser) assert.equal(localStorage.getItem(bodySlot(ctx.ns, "big")), null, "the body went with the write that retired the intent");
  // Every other way a record goes takes its body along: discard, the sweep (expiry), clear().
  for (const id of ["gone", "expiring", "cleared"]) {
    const pending = await client.begin(id, { url: ctx.url(id, "503"), method: "POST", body: binaryBody(5000, 1).bytes });
    await assert.rejects(pending.send(), "RETRIES_EXHAUSTED");
    if (ctx.browser) assert.ok(localStorage.getItem(bodySlot(ctx.ns, id)), `${id}: stored out of line`);
  }
  assert.equal(await client.discard("gone"), true);
  if (ctx.browser) {
    assert.equal(localStorage.getItem(bodySlot(ctx.ns, "gone")), null, "discard left the body");
    // Expiry: the sweep marks a pending intent older than keyTtlMs expired (its request goes).
    const expiring = JSON.parse(storedText(ctx.ns, "expiring"));
    expiring.createdAt -= 2 * 24 * 3600 * 1000;
    localStorage.setItem(`${PREFIX}${ctx.ns}:expiring`, JSON.stringify(expiring));
    assert.equal((await ctx.client(options).sweep()).expired, 1);
    assert.equal(localStorage.getItem(bodySlot(ctx.ns, "expiring")), null, "expiry left the body");
  }
  await client.clear();
  // (The other clients' warm-up may write the namespace's secret again: only records and bodies count.)
  if (ctx.browser) assert.deepEqual(slotsOf(ctx.ns).filter((k) => !k.endsWith(SECRET_SLOT)), [], "clear() left slots");
  // A body of at most 1 KiB stays inside its record, as before.
  const small = await client.begin("small", { url: ctx.url("small", "503"), method: "POST", body: binaryBody(1024).bytes });
  await assert.rejects(small.send(), "RETRIES_EXHAUSTED");
  if (ctx.browser) {
    assert.equal(JSON.parse(storedText(ctx.ns, "small")).request.body.length, 1024);
    assert.equal(localStorage.getItem(bodySlot(ctx.ns, "small")), null);
  }
});

add("persistRequest: an out-of-line body altered, cut or missing is STORAGE and nothing is sent; over maxBodyBytes it is BODY_TOO_LARGE before anything is stored", async (ctx) => {
  const { assert } = ctx;
  const options = { persistRequest: true, resumeOrigins: [new URL(ctx.server).origin], retry: { maxAttempts: 1 } };
  const client = ctx.client({ ...options, maxBodyBytes: 8192 });
  await assert.rejects(
    client.begin("huge", { url: ctx.url("huge", "201"), method: "POST", body: binaryBody(8193).bytes }),
    "BODY_TOO_LARGE",
  );
  assert.deepEqual(await client.pending(), []);
  if (ctx.browser) assert.deepEqual(slotsOf(ctx.ns).filter((k) => !k.endsWith(SECRET_SLOT)), [], "a refused body was stored");
  if (!ctx.browser) return; // the storage below is the page's own
  const { bytes, base64 } = binaryBody(8192);
  const same = binaryBody(8192, 3).base64; // the same length, other bytes
  const tampered = { altered: same, cut: base64.slice(0, 4000), garbage: "not base64!", missing: null };
  for (const [id, text] of Object.entries(tampered)) {
    const op = await client.begin(id, { url: ctx.url(`t-${id}`, "503,201"), method: "POST", body: bytes });
    await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
    if (text === null) localStorage.removeItem(bodySlot(ctx.ns, id));
    else localStorage.setItem(bodySlot(ctx.ns, id), text);
    await assert.rejects(ctx.client(options).resume(id), "STORAGE", id);
    assert.equal((await ctx.log(`t-${id}`)).length, 1, `${id}: sent after the body was changed`);
  }
  // Over the resuming client's maxBodyBytes (the stored body is intact): BODY_TOO_LARGE, nothing sent.
  const op = await client.begin("capped", { url: ctx.url("capped", "503,201"), method: "POST", body: bytes });
  await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  await assert.rejects(ctx.client({ ...options, maxBodyBytes: 4096 }).resume("capped"), "BODY_TOO_LARGE");
  assert.equal((await ctx.log("capped")).length, 1);
});

// --- issue 13 item 6 (at rest) and item 7 (body cap) ------------------------------------------

add("at rest: credentials are never persisted, an allowlist keeps the rest, and the request is deleted once retired", async (ctx) => {
  const { assert } = ctx;
  const origins = [new URL(ctx.server).origin];
  const client = ctx.client({ persistRequest: true, resumeOrigins: origins, retry: { maxAttempts: 1 } });
  const headers = { authorization: `Bearer ${SECRET_TOKEN}`, "proxy-authorization": "Basic eDp5", "x-trace": "t1", "x-other": "o" };
  const op = await client.begin("pay", { url: ctx.url("rest", "503,201"), headers, body: "x" });
  await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  if (ctx.browser) {
    const text = localStorage.getItem(`${PREFIX}${ctx.ns}:pay`);
    assert.ok(!text.includes(SECRET_TOKEN) && !text.includes("eDp5"), "no credential in storage");
    assert.ok(text.includes("x-trace") && text.includes("x-other"), "other headers kept by default");
  }
  const resumed = await client.resume("pay");
  assert.equal((await resumed.send()).status, 201);
  const log = await ctx.log("rest");
  assert.equal(log[0].headers.authorization, `Bearer ${SECRET_TOKEN}`, "the live attempt had the credential");
  assert.equal(log[1].headers.authorization, undefined, "the resumed one could not: it was never stored");
  assert.equal(log[1].headers["x-trace"], "t1");
  // The app passes its credentials again to resume (and may replace a stored header).
  const authed = await client.begin("auth", { url: ctx.url("rest-auth", "503,201"), headers, body: "x" });
  await assert.rejects(authed.send(), "RETRIES_EXHAUSTED");
  await assert.rejects(client.resume("auth", { header: {} }), "INVALID_OPTIONS", "unknown resume option");
  await assert.rejects(client.resume("auth", { headers: { "x-bad": "a\r\nb" } }), "INVALID_REQUEST", "headers checked like begin's");
  const withAuth = await client.resume("auth", { headers: { Authorization: "Bearer fresh", "X-Trace": "t2" } });
  assert.equal(withAuth.key, authed.key);
  assert.equal((await withAuth.send()).status, 201);
  const [, resent] = await ctx.log("rest-auth");
  assert.equal(resent.key, authed.key);
  assert.equal(resent.headers.authorization, "Bearer fresh", "the credential given to resume");
  assert.equal(resent.headers["x-trace"], "t2", "replaces the stored header of that name");
  assert.equal(resent.headers["x-other"], "o", "the other stored headers stay");
  if (ctx.browser) assert.ok(!storedText(ctx.ns, "auth").includes("fresh"), "the given credential is not stored");
  // Retired: the stored request is gone with the write that retired it.
  await assert.rejects(client.resume("pay"), "INVALID_REQUEST", "no request kept after success");
  if (ctx.browser) assert.ok(!localStorage.getItem(`${PREFIX}${ctx.ns}:${RETIRED}pay`).includes('"request"'), "request deleted");
  // The allowlist: only the named headers (and the content type) are stored.
  const listed = ctx.client({ persistRequest: true, persistHeaders: ["X-Trace"], resumeOrigins: origins, retry: { maxAttempts: 1 } });
  const two = await listed.begin("two", { url: ctx.url("rest2", "503,201"), headers, body: "x" });
  await assert.rejects(two.send(), "RETRIES_EXHAUSTED");
  await (await listed.resume("two")).send();
  const [, again] = await ctx.log("rest2");
  assert.equal(again.headers["x-trace"], "t1");
  assert.equal(again.headers["x-other"], undefined, "not in the allowlist");
  assert.match(again.headers["content-type"], /^text\/plain/, "the content type is always kept");
  assert.throws(() => ctx.client({ persistHeaders: "x-trace" }), "INVALID_OPTIONS", "persistHeaders must be an array");
  assert.throws(() => ctx.client({ resumeOrigins: ["https://a.example/path"] }), "INVALID_OPTIONS", "an origin, not a URL");
});

add("at rest: an expired intent loses its stored request; clear() removes the namespace (logout)", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ persistRequest: true, keyTtlMs: 50, retry: { maxAttempts: 1 } });
  const op = await client.begin("stale", { url: ctx.url("clr", "503"), body: "x" });
  await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  assert.equal((await client.pending())[0].resumable, true);
  await ctx.sleep(120);
  assert.deepEqual(await client.sweep(), { removed: 0, expired: 1 });
  const [info] = await client.pending();
  assert.equal(info.state, "expired");
  assert.equal(info.resumable, false, "the request was deleted when the intent expired");
  const other = await client.begin("other", { url: ctx.url("clr2", "201"), body: "y" });
  assert.equal(await client.clear(), 2, "two intents removed");
  assert.equal((await client.pending()).length, 0);
  if (ctx.browser) {
    assert.equal(ctx.slots().length, 0, "no intent slot left");
    assert.equal(localStorage.getItem(`${PREFIX}${ctx.ns}${SECRET_SLOT}`), null, "the secret is gone too");
  }
  const fresh = await client.begin("other", { url: ctx.url("clr2", "201"), body: "y" });
  assert.notEqual(fresh.key, other.key, "after clear() a new key is made");
  if (ctx.browser) {
    // The secret this begin fingerprinted with is the one in storage now, so a reload (a new client)
    // recognises the same request and resumes its key instead of calling it another request.
    assert.notEqual(localStorage.getItem(`${PREFIX}${ctx.ns}${SECRET_SLOT}`), null, "a new secret is stored");
    const reloaded = await ctx.client({ persistRequest: true }).begin("other", { url: ctx.url("clr2", "201"), body: "y" });
    assert.equal(reloaded.key, fresh.key, "same key after a reload");
  }
});

add("body cap: maxBodyBytes is checked before copying, with BODY_TOO_LARGE, and nothing is sent", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ maxBodyBytes: 10 });
  const url = ctx.url("cap", "201");
  for (const [what, body] of [
    ["string", "x".repeat(11)],
    ["multi-byte string (12 UTF-8 bytes)", "é".repeat(6)],
    ["Uint8Array", new Uint8Array(11)],
    ["ArrayBuffer", new ArrayBuffer(11)],
    ["Blob", new Blob([new Uint8Array(11)])],
    ["URLSearchParams", new URLSearchParams({ a: "0123456789" })],
  ]) {
    await assert.rejects(client.begin(`cap-${what}`, { url, body }), "BODY_TOO_LARGE", what);
  }
  await assert.rejects(client.fetch(url, { method: "POST", body: "x".repeat(11) }), "BODY_TOO_LARGE", "fetch");
  assert.equal((await client.pending()).length, 0, "nothing stored");
  assert.equal((await ctx.log("cap")).length, 0, "nothing sent");
  assert.equal((await (await client.begin("ok", { url, body: "é".repeat(5) })).send()).status, 201, "10 bytes pass");
  const huge = new Uint8Array((1 << 20) + 1);
  await assert.rejects(ctx.client().begin("big", { url, body: huge }), "BODY_TOO_LARGE", "the 1 MiB default");
  assert.throws(() => ctx.client({ maxBodyBytes: -1 }), "INVALID_OPTIONS", "maxBodyBytes out of range");
});

add("start-up: the constructor touches no storage; once the page is idle the client opens it before any click", async (ctx) => {
  const { assert } = ctx;
  const secretSlot = `${PREFIX}${ctx.ns}${SECRET_SLOT}`;
  const client = ctx.client();
  assert.equal(localStorage.getItem(secretSlot), null, "nothing read or written by the constructor");
  // The warm-up decides the namespace's secret (the storage's first use) before any begin.
  await ctx.waitFor(() => localStorage.getItem(secretSlot), "the warm-up to store the secret", 3000);
  assert.match(localStorage.getItem(secretSlot), /^[0-9a-f]{64}$/);
  assert.deepEqual(ctx.slots(), [], "no intent written");
  const op = await client.begin("after-warm-up", { url: ctx.url("warm", "201"), body: "x" });
  assert.equal((await op.send()).status, 201);
  // A client freed before the page is idle leaves the storage alone.
  const otherNs = ctx.newNamespace();
  new ctx.lib.IdempotentClient({ namespace: otherNs, storage: "local" }).free();
  await ctx.sleep(1200);
  assert.equal(localStorage.getItem(`${PREFIX}${otherNs}${SECRET_SLOT}`), null, "a freed client warms nothing");
}, { browserOnly: true });

add("the fingerprint is keyed: not the plain SHA-256 of the body or of the request, one secret per namespace", async (ctx) => {
  const { assert } = ctx;
  const body = `{"card":"${CARD}"}`;
  const url = ctx.url("keyed", "201");
  const op = await ctx.client().begin("pay", { url, body });
  const record = JSON.parse(localStorage.getItem(`${PREFIX}${ctx.ns}:pay`));
  assert.equal(record.v, 2, "records are written as version 2");
  const sha = async (text) => [...new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)))]
    .map((b) => b.toString(16).padStart(2, "0")).join("");
  const input = `POST\n${url}\ntext/plain;charset=UTF-8\n${body}`;
  assert.match(record.fingerprint, /^[0-9a-f]{64}$/);
  assert.notEqual(record.fingerprint, await sha(body), "not the plain SHA-256 of the body");
  assert.notEqual(record.fingerprint, await sha(input), "not the plain SHA-256 of the request");
  const secret = localStorage.getItem(`${PREFIX}${ctx.ns}${SECRET_SLOT}`);
  assert.match(secret, /^[0-9a-f]{64}$/, "a 32-byte random secret kept in the namespace");
  const key = await crypto.subtle.importKey("raw", new Uint8Array(secret.match(/../g).map((h) => parseInt(h, 16))),
    { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = [...new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(input)))]
    .map((b) => b.toString(16).padStart(2, "0")).join("");
  assert.equal(record.fingerprint, mac, "HMAC-SHA-256(secret, method, URL, content type, body)");
  // Another namespace has another secret: the same request gets another fingerprint.
  const otherNs = ctx.newNamespace();
  await new ctx.lib.IdempotentClient({ namespace: otherNs, storage: "local" }).begin("pay", { url, body });
  const other = JSON.parse(localStorage.getItem(`${PREFIX}${otherNs}:pay`));
  assert.notEqual(other.fingerprint, record.fingerprint, "a secret per namespace");
  // Version 1 records (unkeyed SHA-256) are still matched with the unkeyed hash and keep version 1.
  localStorage.setItem(`${PREFIX}${ctx.ns}:pay`, JSON.stringify({ ...record, v: 1, fingerprint: await sha(input) }));
  const resumed = await ctx.client().begin("pay", { url, body });
  assert.equal(resumed.key, op.key, "a version-1 record resumes");
  await assert.rejects(ctx.client().begin("pay", { url, body: "changed" }), "INTENT_MISMATCH", "and is still checked");
  assert.equal(JSON.parse(localStorage.getItem(`${PREFIX}${ctx.ns}:pay`)).v, 1, "kept as version 1");
  localStorage.setItem(`${PREFIX}${ctx.ns}:pay`, JSON.stringify({ ...record, v: 3 }));
  await assert.rejects(ctx.client().begin("pay", { url, body }), "STORAGE", "an unknown version is refused");
}, { browserOnly: true });

add("resume() re-checks a stored request that a script rewrote", async (ctx) => {
  const { assert } = ctx;
  const origins = [new URL(ctx.server).origin];
  const client = ctx.client({ persistRequest: true, resumeOrigins: origins, retry: { maxAttempts: 1 } });
  const op = await client.begin("pay", { url: ctx.url("rw", "503,201"), body: "x" });
  await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  const slot = `${PREFIX}${ctx.ns}:pay`;
  const record = JSON.parse(localStorage.getItem(slot));
  const tamper = (request) => localStorage.setItem(slot, JSON.stringify({ ...record, request: { ...record.request, ...request } }));
  tamper({ url: "https://evil.example/steal" });
  await assert.rejects(client.resume("pay"), "INVALID_REQUEST", "another origin");
  tamper({ headers: [["idempotency-key", op.key]] });
  await assert.rejects(client.resume("pay"), "INVALID_REQUEST", "the key header");
  tamper({ method: "GET" });
  await assert.rejects(client.resume("pay"), "INVALID_REQUEST", "a GET with a body");
  tamper({ body: [...new TextEncoder().encode("y")] });
  await assert.rejects(client.resume("pay"), "STORAGE", "a changed body breaks the keyed fingerprint");
  tamper({ url: record.request.url.replace("rw", "rw2") });
  await assert.rejects(client.resume("pay"), "STORAGE", "a changed URL too");
  assert.equal((await ctx.log("rw")).length, 1, "nothing more sent");
  localStorage.setItem(slot, JSON.stringify(record));
  assert.equal((await (await client.resume("pay")).send()).status, 201);
}, { browserOnly: true });

add("a request fetch cannot build (a URL with credentials) is INVALID_REQUEST, never retried nor stored", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client();
  const url = ctx.url("creds", "201").replace("http://", "http://user:pw@");
  await assert.rejects(client.begin("pay", { url, body: "x" }), "INVALID_REQUEST", "begin");
  await assert.rejects(client.fetch(url, { method: "POST", body: "x" }), "INVALID_REQUEST", "fetch");
  assert.equal((await client.pending()).length, 0, "nothing stored");
  assert.equal((await ctx.log("creds")).length, 0, "nothing sent");
});

add("durability is reported: op.durable and result.durable; requireDurable cannot be met in memory", async (ctx) => {
  const { assert } = ctx;
  const op = await ctx.client().begin("pay", { url: ctx.url("dur", "201"), body: "x" });
  assert.equal(op.durable, ctx.browser, "localStorage is durable, memory (Node) is not");
  assert.equal((await op.send()).durable, ctx.browser);
  assert.throws(() => ctx.client({ storage: "memory", requireDurable: true }), "INVALID_OPTIONS", "memory is never durable");
  assert.throws(() => ctx.client({ requireDurable: "yes" }), "INVALID_OPTIONS");
  if (ctx.browser) {
    const strict = ctx.client({ requireDurable: true });
    assert.equal((await (await strict.begin("ok", { url: ctx.url("dur2", "201"), body: "x" })).send()).durable, true);
  }
});

// --- browser-only cases (real Web Storage) ---------------------------------------------------

add("reload: a fresh client over the same localStorage resumes the same key", async (ctx) => {
  const { assert } = ctx;
  const request = () => ({ url: ctx.url("reload", "503,503,201"), body: '{"cart":42}' });
  const before = ctx.client({ retry: { maxAttempts: 2 } });
  const op = await before.begin("checkout:cart-42", request());
  await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  const after = ctx.client(); // "the page reloaded"
  const pending = await after.pending();
  assert.deepEqual(pending.map((p) => [p.intentId, p.key, p.attempts]), [["checkout:cart-42", op.key, 2]]);
  const resumed = await after.begin("checkout:cart-42", request());
  assert.equal(resumed.key, op.key);
  assert.equal(resumed.resumed, true);
  assert.equal(resumed.attempts, 2);
  assert.equal(resumed.lastStatus, 503);
  const result = await resumed.send();
  assert.equal(result.status, 201);
  assert.deepEqual((await ctx.log("reload")).map((e) => e.key), [op.key, op.key, op.key]);
}, { browserOnly: true });

add("reload with sessionStorage resumes the same key", async (ctx) => {
  const { assert } = ctx;
  const request = () => ({ url: ctx.url("sess", "503,201"), body: "x" });
  const before = ctx.client({ storage: "session", retry: { maxAttempts: 1 } });
  assert.equal(before.storage, "session");
  const op = await before.begin("pay", request());
  await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  assert.equal(ctx.slots(sessionStorage).length, 1, "stored in sessionStorage");
  assert.equal(ctx.slots(localStorage).length, 0, "not in localStorage");
  const resumed = await ctx.client({ storage: "session" }).begin("pay", request());
  assert.equal(resumed.key, op.key);
  assert.equal((await resumed.send()).status, 201);
}, { browserOnly: true });

add("no body or header is ever written to storage", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { maxAttempts: 2 } });
  const headers = { Authorization: `Bearer ${SECRET_TOKEN}`, "X-Card": CARD };
  const body = JSON.stringify({ card: CARD, cvc: "123" });
  const done = await client.begin("done", { url: ctx.url("sec1", "503,201"), headers, body });
  await done.send();
  const open = await client.begin("open", { url: ctx.url("sec2", "503"), headers, body: new TextEncoder().encode(body) });
  await assert.rejects(open.send(), "RETRIES_EXHAUSTED");
  const form = new FormData();
  form.append("card", CARD);
  await assert.rejects((await client.begin("form", { url: ctx.url("sec3", "503"), headers, body: form })).send(), "RETRIES_EXHAUSTED");
  const [sent] = await ctx.log("sec1");
  assert.equal(sent.headers.authorization, `Bearer ${SECRET_TOKEN}`, "the server did get the token");
  assert.equal(ctx.slots().length, 3, "three intents stored");
  for (const text of allStoredText()) {
    assert.ok(!text.includes(SECRET_TOKEN), `token found in storage: ${text}`);
    assert.ok(!text.includes(CARD), `card number found in storage: ${text}`);
    assert.ok(!text.includes("X-Card") && !text.includes("x-card"), `header name found in storage: ${text}`);
  }
}, { browserOnly: true });

add("storage blocked (SecurityError) falls back to memory, tells the app, and still sends", async (ctx) => {
  const { assert } = ctx;
  const restore = override(globalThis, "localStorage", {
    get() { throw new DOMException("The operation is insecure.", "SecurityError"); },
  });
  try {
    const client = ctx.client({ storage: "local" });
    const events = [];
    client.addEventListener("storagefallback", (e) => events.push(e));
    assert.equal(client.storage, "memory");
    assert.match(client.storageFallback, /SecurityError/);
    await ctx.waitFor(() => events.length > 0, "the storagefallback event");
    assert.equal(events[0].type, "storagefallback");
    assert.match(events[0].reason, /SecurityError/);
    const op = await client.begin("pay", { url: ctx.url("blocked", "503,201"), body: "x" });
    assert.equal(op.durable, false, "the operation says its key would not survive a reload");
    const result = await op.send();
    assert.equal(result.status, 201);
    assert.equal(result.durable, false, "and so does the result");
    const strict = ctx.client({ storage: "local", requireDurable: true });
    await assert.rejects(strict.begin("strict", { url: ctx.url("blocked2", "201"), body: "x" }), "NOT_DURABLE", "requireDurable");
    assert.equal((await ctx.log("blocked2")).length, 0, "nothing sent");
    assert.deepEqual((await ctx.log("blocked")).map((e) => e.key), [op.key, op.key]);
    assert.equal((await client.pending()).length, 0);
  } finally {
    restore();
  }
  assert.equal(ctx.slots().length, 0, "nothing reached localStorage");
}, { browserOnly: true, freshPage: true });

add("storage full (QuotaExceededError) at start falls back to memory and still sends", async (ctx) => {
  const { assert } = ctx;
  const restore = override(Storage.prototype, "setItem", {
    writable: true,
    value() { throw new DOMException("The quota has been exceeded.", "QuotaExceededError"); },
  });
  try {
    const client = ctx.client();
    const events = [];
    client.addEventListener("storagefallback", (e) => events.push(e));
    assert.equal(client.storage, "memory");
    assert.match(client.storageFallback, /QuotaExceededError/);
    await ctx.waitFor(() => events.length > 0, "the storagefallback event");
    assert.match(events[0].reason, /QuotaExceededError/);
    const op = await client.begin("pay", { url: ctx.url("full", "503,201"), body: "x" });
    assert.equal((await op.send()).status, 201);
    assert.deepEqual((await ctx.log("full")).map((e) => e.key), [op.key, op.key]);
  } finally {
    restore();
  }
}, { browserOnly: true });

add("storage filling up mid-way falls back to memory, keeps the key, and still sends", async (ctx) => {
  const { assert } = ctx;
  const client = ctx.client({ retry: { maxAttempts: 1 } });
  const events = [];
  client.addEventListener("storagefallback", (e) => events.push(e));
  const request = { url: ctx.url("fills", "503,201"), body: "x" };
  const op = await client.begin("pay", request);
  await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  assert.equal(client.storage, "local");
  const restore = override(Storage.prototype, "setItem", {
    writable: true,
    value() { throw new DOMException("The quota has been exceeded.", "QuotaExceededError"); },
  });
  try {
    const again = await client.begin("pay", request);
    assert.equal(again.key, op.key);
    const result = await again.send();
    assert.equal(result.status, 201);
    assert.equal(client.storage, "memory");
    assert.match(client.storageFallback, /QuotaExceededError/);
    assert.equal(events.length, 1);
    assert.match(events[0].reason, /QuotaExceededError/);
    assert.deepEqual((await ctx.log("fills")).map((e) => e.key), [op.key, op.key]);
    assert.equal(result.durable, false, "the result says the key is in memory now");
    const other = await client.begin("other", { url: ctx.url("fills2", "201"), body: "x" });
    assert.equal((await other.send()).status, 201);
    // requireDurable: the write of the new record is refused, the key would live in memory only.
    const strict = ctx.client({ requireDurable: true });
    const strictEvents = [];
    strict.addEventListener("storagefallback", (e) => strictEvents.push(e));
    await assert.rejects(strict.begin("strict", { url: ctx.url("fills3", "201"), body: "x" }), "NOT_DURABLE", "the fallback write");
    assert.equal(strictEvents.length, 1, "the storagefallback event too");
    // Its claim is dropped too. "other" and "pay" (answered while in memory) are listed from their
    // claim and their stale localStorage record: the only traces a reload has of their keys.
    assert.deepEqual((await strict.pending()).map((e) => e.intentId).sort(), ["other", "pay"], "no half-begun intent left");
    assert.equal((await ctx.log("fills3")).length, 0, "nothing sent");
  } finally {
    restore();
  }
}, { browserOnly: true });

add("a corrupt stored record: begin rejects STORAGE and the entry is not overwritten", async (ctx) => {
  const { assert } = ctx;
  const slot = `${PREFIX}${ctx.ns}:pay`;
  const request = { url: ctx.url("corrupt", "201"), body: "x" };
  for (const garbage of ["{not json", "null", '{"v":2}', "[]", '"text"']) {
    localStorage.setItem(slot, garbage);
    const client = ctx.client();
    const error = await assert.rejects(client.begin("pay", request), "STORAGE", garbage);
    assert.match(error.message, /pay/, "the message names the intent");
    assert.equal(localStorage.getItem(slot), garbage, "the corrupt entry is left alone");
    assert.deepEqual(await client.pending(), [], "pending() skips it");
    await client.sweep();
    assert.equal(localStorage.getItem(slot), garbage, "sweep leaves it alone");
  }
  assert.equal((await ctx.log("corrupt")).length, 0, "nothing sent");
  const client = ctx.client();
  await client.discard("pay");
  assert.equal(localStorage.getItem(slot), null, "discard removes it");
  assert.equal((await (await client.begin("pay", request)).send()).status, 201, "and a fresh begin works");
}, { browserOnly: true });

add("a tampered stored key (CR/LF or not a UUID) is refused STORAGE and nothing is sent", async (ctx) => {
  const { assert } = ctx;
  const slot = `${PREFIX}${ctx.ns}:pay`;
  const request = { url: ctx.url("tamper", "201"), body: "x" };
  const original = await ctx.client().begin("pay", request);
  const record = JSON.parse(localStorage.getItem(slot));
  assert.equal(record.key, original.key);
  for (const key of [`${original.key}\r\nX-Evil: 1`, "not-a-uuid", original.key.toUpperCase(), `{${original.key}}`,
    "00000000-0000-1000-8000-000000000000"]) {
    const tampered = JSON.stringify({ ...record, key });
    localStorage.setItem(slot, tampered);
    await assert.rejects(ctx.client().begin("pay", request), "STORAGE", `begin with key ${JSON.stringify(key)}`);
    await assert.rejects(original.send(), "STORAGE", `send with key ${JSON.stringify(key)}`);
    assert.equal(localStorage.getItem(slot), tampered, "left alone");
  }
  assert.equal((await ctx.log("tamper")).length, 0, "nothing sent");
  localStorage.setItem(slot, JSON.stringify({ ...record, fingerprint: "zz" }));
  await assert.rejects(ctx.client().begin("pay", request), "STORAGE", "malformed fingerprint");
  localStorage.setItem(slot, JSON.stringify({ ...record, lastStatus: 9999 }));
  await assert.rejects(ctx.client().begin("pay", request), "STORAGE", "impossible status");
  localStorage.setItem(slot, JSON.stringify({ ...record, updatedAt: record.createdAt - 1 }));
  await assert.rejects(ctx.client().begin("pay", request), "STORAGE", "updatedAt before createdAt");
  localStorage.setItem(slot, JSON.stringify({ ...record, id: "other" }));
  await assert.rejects(ctx.client().begin("pay", request), "STORAGE", "record copied from another slot");
  localStorage.removeItem(slot);
}, { browserOnly: true });

// --- claims: begin's create-or-resume is one IndexedDB transaction ------------------------------

/** Runs `run(store)` in one read-write transaction on the claims store (src/js/storage/claims.ts) and
 *  resolves with its request's result. Opens at the database's current version (the library moves
 *  it up when it repairs a missing store) with the library's schema, so it never creates the
 *  database without its store. */
const claimsStore = (run) => idbStore("idempotent-fetch-claims", "claims", run);
/** The same over the intents store of `storage: "indexeddb"`. */
const intentsStore = (run) => idbStore("idempotent-fetch", "intents", run);
async function idbStore(name, storeName, run) {
  const db = await new Promise((resolve, reject) => {
    const request = indexedDB.open(name);
    request.onupgradeneeded = () => request.result.createObjectStore(storeName);
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
  try {
    return await new Promise((resolve, reject) => {
      const transaction = db.transaction(storeName, "readwrite");
      const request = run(transaction.objectStore(storeName));
      transaction.oncomplete = () => resolve(request?.result);
      transaction.onabort = () => reject(transaction.error);
    });
  } finally {
    db.close();
  }
}
const claimOf = (ns, id) => claimsStore((store) => store.get(`${ns}\0${id}`));

/** Settles an IndexedDB open or delete request. */
const idbDone = (request) =>
  new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });

add("claims: a new namespace's fingerprint secret is the one another tab decided first, and clear() removes it", async (ctx) => {
  const { assert } = ctx;
  // Another tab made the namespace's secret (its claim committed); its localStorage write has not
  // reached this tab yet.
  const secret = "ab".repeat(32);
  await claimsStore((store) => store.put(secret, `${ctx.ns}\x01secret`));
  const client = ctx.client();
  await client.begin("pay", { url: ctx.url("secret", "201"), body: "x" });
  assert.equal(localStorage.getItem(`${PREFIX}${ctx.ns}${SECRET_SLOT}`), secret, "this tab fingerprints with the same secret");
  await client.clear();
  assert.equal(await claimsStore((store) => store.get(`${ctx.ns}\x01secret`)), undefined, "logout removes it");
  assert.equal(localStorage.getItem(`${PREFIX}${ctx.ns}${SECRET_SLOT}`), null);
}, { browserOnly: true });

add("claims: after a fallback to memory, a reload's pending() lists the intent begun but never sent, with its key", async (ctx) => {
  const { assert } = ctx;
  const request = { url: ctx.url("fallback-pending", "201"), body: "x" };
  // Storage works at first (the namespace's fingerprint secret is stored), then fills up.
  const client = ctx.client();
  await client.begin("warm", { url: ctx.url("fallback-warm", "201"), body: "x" });
  const restore = override(Storage.prototype, "setItem", {
    writable: true,
    value() { throw new DOMException("The quota has been exceeded.", "QuotaExceededError"); },
  });
  let op;
  try {
    op = await client.begin("pay", request);
    assert.equal(client.storage, "memory", "the record lives in memory only");
  } finally {
    restore();
  }
  // A reload: a new client, this page's memory gone; only the claim knows the key.
  const reloaded = ctx.client();
  const listed = await reloaded.pending();
  assert.deepEqual(listed.filter((e) => e.intentId === "pay").map((e) => [e.key, e.state]), [[op.key, "pending"]]);
  // pending() found it by the lost mark the fallen-back write left, not by reading every claim.
  assert.equal(await claimsStore((store) => store.get(`${ctx.ns}\x02pay`)), "1", "marked lost");
  assert.equal(await claimsStore((store) => store.get(`${ctx.ns}\x02warm`)), undefined, "a durable record is not marked");
  const resumed = await reloaded.begin("pay", request);
  assert.equal(resumed.key, op.key, "begin resumes the key pending() listed");
  assert.equal((await resumed.send()).status, 201);
  assert.deepEqual((await ctx.log("fallback-pending")).map((e) => e.key), [op.key]);
  assert.deepEqual((await reloaded.pending()).map((e) => e.intentId), ["warm"], "stored again (retired): no longer listed from its claim");
  assert.equal(await reloaded.discard("pay"), true);
  assert.equal(await claimsStore((store) => store.get(`${ctx.ns}\x02pay`)), undefined, "discard removed the mark with the claim");
}, { browserOnly: true });

add("claims: a claims database without its store is repaired once, and claims work again", async (ctx) => {
  const { assert } = ctx;
  const request = { url: ctx.url("repair", "201"), body: "x" };
  // The database exists without the store (deleted by a tool, or made by something else). Deleting
  // it closes the library's connection (versionchange); the next begin opens it again.
  await idbDone(indexedDB.deleteDatabase("idempotent-fetch-claims"));
  const bare = await idbDone(indexedDB.open("idempotent-fetch-claims", 1));
  assert.equal(bare.objectStoreNames.contains("claims"), false);
  bare.close();
  const client = ctx.client();
  const first = await client.begin("first", request); // may take the lock path: its connection is the deleted one
  const op = await client.begin("pay", request);
  assert.equal(JSON.parse(await claimOf(ctx.ns, "pay")).key, op.key, "the repaired store holds the new claim");
  const versions = [];
  for (let i = 0; i < 3; i++) {
    await client.begin(`more-${i}`, request);
    const db = await idbDone(indexedDB.open("idempotent-fetch-claims"));
    versions.push(db.version);
    db.close();
  }
  assert.equal(new Set(versions).size, 1, `repaired once, not reopened on every begin (versions ${versions})`);
  assert.equal((await client.begin("pay", request)).key, op.key);
  assert.ok(first.key);
}, { browserOnly: true });

add("claims: begin claims a new key; a claim without this tab's storage record resumes its key; replace re-claims", async (ctx) => {
  const { assert } = ctx;
  const slot = `${PREFIX}${ctx.ns}:pay`;
  const request = () => ({ url: ctx.url("claim", "201"), body: "x" });
  const client = ctx.client({ persistRequest: true });
  const op = await client.begin("pay", request());
  const claimed = JSON.parse(await claimOf(ctx.ns, "pay"));
  assert.equal(claimed.key, op.key, "begin claimed its key");
  assert.equal(claimed.request, undefined, "a claim never holds the persisted request");
  const record = localStorage.getItem(slot);
  // Another tab's storage write has not reached this tab yet: the claim decides.
  localStorage.removeItem(slot);
  const again = await ctx.client({ persistRequest: true }).begin("pay", request());
  assert.equal(again.key, op.key, "resumed from the claim, not a new key");
  assert.equal(JSON.parse(localStorage.getItem(slot)).key, op.key, "and written to this tab's storage");
  assert.ok(JSON.parse(localStorage.getItem(slot)).request, "with the request just checked against its fingerprint");
  // A new key (replace) is claimed in the same transaction; a stale record of the old key loses.
  const replaced = await client.begin("pay", request(), { replace: true });
  assert.notEqual(replaced.key, op.key);
  assert.equal(JSON.parse(await claimOf(ctx.ns, "pay")).key, replaced.key, "replace claimed the new key");
  localStorage.setItem(slot, record);
  assert.equal((await ctx.client().begin("pay", request())).key, replaced.key, "the claim beats a stale record of another key");
  assert.equal((await (await client.begin("pay", request())).send()).status, 201);
  // Resuming the stored record (same key as the claim) keeps the claim as it was.
  assert.equal(JSON.parse(await claimOf(ctx.ns, "pay")).attempts, 0, "the claim is the record as begin wrote it");
  // Records from before claims (no claim): the storage record decides, and it is not re-claimed.
  await claimsStore((store) => store.delete(`${ctx.ns}\0pay`));
  const old = await ctx.client().begin("pay", request());
  assert.equal(old.key, replaced.key, "a record without a claim resumes");
  assert.equal(old.state, "succeeded");
  assert.equal(await claimOf(ctx.ns, "pay"), undefined);
  // An anonymous fetch claims nothing (its random id is never begun twice).
  await ctx.client().fetch(ctx.url("claim-anon", "201"), { method: "POST", body: "x" });
  const all = await claimsStore((store) => store.getAllKeys(IDBKeyRange.bound(`${ctx.ns}\0`, `${ctx.ns}\x01`)));
  assert.deepEqual(all, [], "no claim left but for named intents");
}, { browserOnly: true });

add("claims: discard, clear and the sweep remove claims (a discarded intent is never resumed)", async (ctx) => {
  const { assert } = ctx;
  const request = (n) => ({ url: ctx.url(`claimdrop${n}`, "201"), body: "x" });
  const client = ctx.client();
  const op = await client.begin("pay", request(0));
  assert.equal(await client.discard("pay"), true);
  assert.equal(await claimOf(ctx.ns, "pay"), undefined, "discard removed the claim");
  assert.notEqual((await client.begin("pay", request(0))).key, op.key, "a new key after discard");
  // clear(): every claim of the namespace, not another namespace's.
  const other = ctx.newNamespace();
  await new ctx.lib.IdempotentClient({ namespace: other, storage: "local" }).begin("pay", request(1));
  await client.begin("b", request(2));
  assert.equal(await client.clear(), 2);
  const left = await claimsStore((store) => store.getAllKeys(IDBKeyRange.bound(`${ctx.ns}\0`, `${ctx.ns}\x01`)));
  assert.deepEqual(left, [], "clear removed the namespace's claims");
  assert.ok(await claimOf(other, "pay"), "and kept another namespace's");
  // The sweep: a retired intent past keyTtlMs goes with its claim...
  const short = ctx.client({ keyTtlMs: 1 }); // sweeps only (its own sends would be EXPIRED)
  await short.sweep();
  await (await client.begin("old", request(3))).send();
  await ctx.sleep(5);
  assert.equal((await short.sweep()).removed, 1);
  assert.equal(await claimOf(ctx.ns, "old"), undefined, "the sweep removed the claim");
  // ...but not when another tab claimed a new key meanwhile (this tab's record is stale): both stay.
  await (await client.begin("old", request(4))).send();
  const fresh = JSON.stringify({ ...JSON.parse(await claimOf(ctx.ns, "old")), key: crypto.randomUUID() });
  await claimsStore((store) => store.put(fresh, `${ctx.ns}\0old`));
  await ctx.sleep(5);
  assert.equal((await short.sweep()).removed, 0, "a stale record of a re-claimed intent is not removed");
  assert.equal(await claimOf(ctx.ns, "old"), fresh);
  assert.ok(localStorage.getItem(`${PREFIX}${ctx.ns}:${RETIRED}old`));
}, { browserOnly: true });

/** A client of namespace `ns` in `storage` with fast retries. */
const clientIn = (ctx, ns, storage, options = {}) =>
  new ctx.lib.IdempotentClient({ namespace: ns, storage, retry: { baseDelayMs: 1, maxDelayMs: 5 }, ...options });

/** The state of each of `ids` in `client` (null: not stored). */
const statesOf = (client, ids) => Promise.all(ids.map(async (id) => (await client.intent(id))?.state ?? null));

add("retired records: past maxRetiredRecords the oldest are deleted with their claims; a pending intent never", async (ctx) => {
  const { assert } = ctx;
  for (const storage of ctx.browser ? ["local", "indexeddb"] : [ctx.storage]) {
    const ns = ctx.newNamespace();
    const client = clientIn(ctx, ns, storage, { maxRetiredRecords: 3 });
    // The oldest intent of all, and pending: never evicted however many retire after it.
    const waiting = await client.begin("waiting", { url: ctx.url(`ev-${storage}-w`, "201"), body: "w" });
    const ids = ["done1", "done2", "done3", "done4", "done5"];
    for (const id of ids) {
      const result = await (await client.begin(id, { url: ctx.url(`ev-${storage}-${id}`, id === "done2" ? "400" : "201"), body: id })).send();
      assert.equal(result.durable, storage !== "memory", `${storage}: ${id} durable`);
    }
    await ctx.waitFor(async () => (await client.intent("done2")) === null, `${storage}: the two oldest retired records deleted`);
    assert.deepEqual(await statesOf(client, ["waiting", ...ids]), ["pending", null, null, "succeeded", "succeeded", "succeeded"], storage);
    if (ctx.browser) {
      assert.equal(await claimOf(ns, "done1"), undefined, `${storage}: the claim went with its record`);
      assert.equal(await claimOf(ns, "done2"), undefined, `${storage}: a failed (400) record counts too`);
      assert.ok(await claimOf(ns, "done3"), `${storage}: a kept record keeps its claim`);
      assert.ok(await claimOf(ns, "waiting"), `${storage}: the pending intent keeps its claim`);
    }
    // Retired now, it is the newest: the oldest kept one (done3) goes.
    assert.equal((await waiting.send()).status, 201);
    await ctx.waitFor(async () => (await client.intent("done3")) === null, `${storage}: done3 deleted`);
    assert.deepEqual(await statesOf(client, ["waiting", "done4", "done5"]), ["succeeded", "succeeded", "succeeded"], storage);
    // A second click of a kept one still replays its key; an evicted one begins anew.
    assert.equal((await client.begin("done5", { url: ctx.url(`ev-${storage}-done5`, "201"), body: "done5" })).state, "succeeded");
    await client.clear();
  }
  assert.throws(() => ctx.client({ maxRetiredRecords: -1 }), "INVALID_OPTIONS", "a negative cap");
  assert.throws(() => ctx.client({ maxRetiredRecords: 1.5 }), "INVALID_OPTIONS", "a fractional cap");
});

/** The slot ids of namespace `ns` in `storage` ("local" or "indexeddb"), sorted: an intent id, or
 *  RETIRED + an intent id for a retired record (the fingerprint secret left out). */
async function slotIds(ns, storage) {
  const keys = storage === "local"
    ? Array.from({ length: localStorage.length }, (_, i) => localStorage.key(i)).filter((k) => k.startsWith(`${PREFIX}${ns}:`)).map((k) => k.slice(`${PREFIX}${ns}:`.length))
    : (await intentsStore((store) => store.getAllKeys(IDBKeyRange.bound(`${ns}:`, `${ns};`, false, true)))).map((k) => k.slice(ns.length + 1));
  return keys.filter((id) => id[0] !== "\u0001").sort();
}

/** Moves slot `from` of namespace `ns` to slot `to`, text unchanged (what another layout left). */
async function moveSlot(ns, storage, from, to) {
  if (storage === "local") {
    localStorage.setItem(`${PREFIX}${ns}:${to}`, localStorage.getItem(`${PREFIX}${ns}:${from}`));
    localStorage.removeItem(`${PREFIX}${ns}:${from}`);
  } else {
    const text = await intentsStore((store) => store.get(`${ns}:${from}`));
    await intentsStore((store) => (store.put(text, `${ns}:${to}`), store.delete(`${ns}:${from}`)));
  }
}

add("migration from one shelf (an earlier version's layout): read as it is, moved by the background sweep, trimmed to the cap; every pending key kept", async (ctx) => {
  const { assert } = ctx;
  for (const storage of ["local", "indexeddb"]) {
    const ns = ctx.newNamespace();
    const earlier = clientIn(ctx, ns, storage, { maxRetiredRecords: 100 });
    const pendingOp = await earlier.begin("pending-old", { url: ctx.url(`mig-${storage}-p`, "201"), body: "p" });
    const old = ["old1", "old2", "old3", "old4", "old5", "old6"];
    for (const id of old) {
      await (await earlier.begin(id, { url: ctx.url(`mig-${storage}-${id}`, "201"), body: id })).send();
      await ctx.sleep(2); // distinct write times: the order is the records' own
    }
    assert.deepEqual(await slotIds(ns, storage), [...old.map((id) => RETIRED + id), "pending-old"].sort(), `${storage}: retired on their shelf`);
    // What the earlier version left: every record under its intent id (same record texts).
    for (const id of old) await moveSlot(ns, storage, RETIRED + id, id);
    assert.deepEqual(await slotIds(ns, storage), [...old, "pending-old"].sort(), `${storage}: the earlier layout`);
    const page = clientIn(ctx, ns, storage, { maxRetiredRecords: 2 });
    assert.deepEqual((await page.pending()).map((p) => [p.intentId, p.key]), [["pending-old", pendingOp.key]], `${storage}: retired ones not listed`);
    assert.deepEqual(await statesOf(page, old), old.map(() => "succeeded"), `${storage}: read where they are; nothing deleted before the first begin`);
    // Begun again before the sweep moves it: pending now, it stays on the pending shelf with its new key.
    const again = await page.begin("old6", { url: ctx.url(`mig-${storage}-old6`, "201"), body: "changed" }, { replace: true });
    await (await page.begin("new", { url: ctx.url(`mig-${storage}-new`, "201"), body: "n" })).send();
    await ctx.waitFor(async () => (await slotIds(ns, storage)).includes(RETIRED + "old5"), `${storage}: the background sweep moved old5`);
    await ctx.waitFor(async () => (await page.intent("old4")) === null, `${storage}: the background sweep trimmed the old records`);
    assert.deepEqual(await slotIds(ns, storage), [`${RETIRED}new`, `${RETIRED}old5`, "old6", "pending-old"].sort(), `${storage}: the new layout`);
    assert.deepEqual(await statesOf(page, [...old, "new"]), [null, null, null, null, "succeeded", "pending", "succeeded"], storage);
    assert.equal((await page.intent("old6")).key, again.key, `${storage}: the re-begun key is kept`);
    assert.equal((await page.begin("pending-old", { url: ctx.url(`mig-${storage}-p`, "201"), body: "p" })).key, pendingOp.key, `${storage}: the pending key resumes`);
    assert.deepEqual((await page.pending()).map((p) => p.intentId).sort(), ["old6", "pending-old"], storage);
    for (const id of ["old1", "old4"]) assert.equal(await claimOf(ns, id), undefined, `${storage}: ${id}'s claim pruned`);
    await page.clear();
    assert.deepEqual(await slotIds(ns, storage), [], `${storage}: clear() empties both shelves`);
  }
}, { browserOnly: true });

add("an app that filled localStorage to within 100 KB of its quota still gets durable intents", async (ctx) => {
  const { assert } = ctx;
  const FILLER = "app-data:";
  const fillers = [];
  const put = (key, value) => {
    localStorage.setItem(key, value);
    fillers.push(key);
  };
  try {
    // The page's own data (a cart, a cache): 100 KB (51,200 UTF-16 code units) set aside, the rest
    // filled to the last 16 characters, then the 100 KB freed.
    put(`${FILLER}gap`, "g".repeat(51_200));
    for (const size of [1 << 20, 1 << 16, 1 << 12, 1 << 8, 16]) {
      const chunk = "x".repeat(size);
      for (;;) {
        try {
          put(`${FILLER}${fillers.length}`, chunk);
        } catch {
          break;
        }
      }
    }
    localStorage.removeItem(`${FILLER}gap`);
    const client = ctx.client();
    const fallbacks = [];
    client.addEventListener("storagefallback", (e) => fallbacks.push(e.reason));
    // About 150 records fit in 100 KB: 300 intents need the oldest retired ones deleted twice.
    const N = 300;
    for (let i = 0; i < N; i++) {
      const op = await client.begin(`order:${i}`, { url: ctx.url("quota", "201"), body: String(i) });
      assert.equal(op.durable, true, `intent ${i} durable at begin`);
      const result = await op.send();
      assert.equal(result.durable, true, `intent ${i} durable`);
      // Durable means in localStorage now, not only said so.
      assert.ok(localStorage.getItem(`${PREFIX}${ctx.ns}:${RETIRED}order:${i}`), `intent ${i}'s record is in localStorage`);
    }
    assert.deepEqual(fallbacks, [], "no fallback");
    assert.equal(client.storage, "local");
    assert.equal((await client.intent(`order:${N - 1}`)).state, "succeeded", "the newest is stored");
    assert.ok(ctx.slots().length < N, `older retired records were deleted (${ctx.slots().length} left)`);
    for (const key of fillers.slice(1, 4)) assert.ok(localStorage.getItem(key), "the page's own data is untouched");
    await client.clear();
  } finally {
    for (const key of fillers) localStorage.removeItem(key);
  }
}, { browserOnly: true, freshPage: true });

add("claims: a corrupt or altered claim is a STORAGE error, left alone; discard clears it", async (ctx) => {
  const { assert } = ctx;
  const request = { url: ctx.url("claimbad", "201"), body: "x" };
  const op = await ctx.client().begin("pay", request);
  const good = JSON.parse(await claimOf(ctx.ns, "pay"));
  localStorage.removeItem(`${PREFIX}${ctx.ns}:pay`);
  for (const bad of ["{not json", 42, { key: op.key }, JSON.stringify({ ...good, key: "x\r\nevil: 1" }), JSON.stringify({ ...good, extra: 1 })]) {
    await claimsStore((store) => store.put(bad, `${ctx.ns}\0pay`));
    const error = await assert.rejects(ctx.client().begin("pay", request), "STORAGE", JSON.stringify(bad));
    assert.match(error.message, /pay/, "the message names the intent");
    assert.deepEqual(await claimOf(ctx.ns, "pay"), bad, "the claim is left alone");
  }
  assert.equal((await ctx.log("claimbad")).length, 0, "nothing sent");
  const client = ctx.client();
  await client.discard("pay");
  assert.equal(await claimOf(ctx.ns, "pay"), undefined);
  assert.equal((await (await client.begin("pay", request)).send()).status, 201, "and a fresh begin works");
}, { browserOnly: true });

add("claims: the database going away mid-life (deleted) sends begin down the lock path, then claims again", async (ctx) => {
  const { assert } = ctx;
  const request = { url: ctx.url("claimgone", "201"), body: "x" };
  const client = ctx.client();
  const op = await client.begin("pay", request);
  // Deleting the database closes the library's connection (versionchange): its next transaction fails.
  await new Promise((resolve, reject) => {
    const deleting = indexedDB.deleteDatabase("idempotent-fetch-claims");
    deleting.onsuccess = resolve;
    deleting.onerror = () => reject(deleting.error);
  });
  const again = await client.begin("pay", request);
  assert.equal(again.key, op.key, "the lock path resumed the stored record");
  const other = await client.begin("other", request);
  assert.equal(JSON.parse(await claimOf(ctx.ns, "other")).key, other.key, "the next begin opened the database again and claimed");
  assert.equal((await again.send()).status, 201);
}, { browserOnly: true });

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
