// The bad-input matrix: one row per hostile or malformed input through the JavaScript API.
// Run by bad-input.test.mjs in Node (the package by `require`, memory storage) and in headless Chromium (pkg/index.development.js,
// real localStorage) through bad-input.html. Imports only tests/js/cases.mjs (no Node modules), so
// it loads unchanged in a page.
//
// A row is { group, name, env: "both" | "node" | "browser", run(ctx) }. Each row expects a typed
// IdempotentFetchError (its `code` is checked) or a documented safe behaviour, checks that nothing
// is lost (the stored intent and its key survive where they should), and after EVERY row the
// runner does a sanity begin+send against a 201 endpoint (`runCase` of cases.mjs): a panic would
// trap the wasm instance and fail every later call.
//
// ctx (from cases.mjs makeContext): lib, server (scripted test server), ns, client(), url(), log(),
// plus ctx.raw: base URL of a raw TCP server that writes broken HTTP (bad-input.test.mjs starts
// it; paths: /status999, /garbage, /badheader, /close, /junkhdr, /ra/<token>?v=<Retry-After>).

import { assert, override } from "../js/cases.mjs";

const PREFIX = "idempotent-fetch:v1:";
export const rows = [];
/** `options.freshPage`: run on a freshly loaded page (see freshPage() in tests/js/browser.test.mjs). */
const row = (group, name, run, env = "both", options = {}) => rows.push({ group, name: `${group}: ${name}`, env, run, ...options });

// ---------------------------------------------------------------------------------------------
// helpers

/** The option must be refused with INVALID_OPTIONS naming `field`. */
function badOption(name, options, field) {
  row("options", name, (ctx) => {
    const error = assert.throws(() => new ctx.lib.IdempotentClient(options), "INVALID_OPTIONS", name);
    if (field) assert.match(error.message, field, `${name}: message names the field`);
    assert.ok(error instanceof Error && ctx.lib.isIdempotentFetchError(error), "an Error the guard recognises");
  });
}

/** The request must be refused with `code`, nothing stored and nothing sent. */
function badRequest(name, makeRequest, code = "INVALID_REQUEST", env = "both") {
  row("request", name, async (ctx) => {
    const client = ctx.client();
    const url = ctx.url("req", "201");
    await assert.rejects(client.begin("pay", makeRequest(url, ctx)), code, name);
    assert.equal((await client.pending()).length, 0, "nothing stored");
    assert.equal((await ctx.log("req")).length, 0, "nothing sent");
  }, env);
}

/** The body must arrive byte-identical on every attempt (503 then 201). */
function goodBody(name, makeBody, expectedHex, env = "both") {
  row("body", name, async (ctx) => {
    const op = await ctx.client().begin("pay", { url: ctx.url("body", "503,201"), body: makeBody() });
    const result = await op.send();
    assert.equal(result.status, 201);
    const log = await ctx.log("body");
    assert.equal(log.length, 2);
    const hex = (b64) => Array.from(atob(b64), (c) => c.charCodeAt(0).toString(16).padStart(2, "0")).join("");
    if (expectedHex !== undefined) assert.equal(hex(log[0].bodyBase64), expectedHex, "bytes of attempt 1");
    assert.equal(log[0].bodyBase64, log[1].bodyBase64, "attempt 2 re-sends the same bytes");
    assert.equal(log[0].key, op.key);
    assert.equal(log[1].key, op.key);
  }, env);
}

/** Sends against a server answer, expects `check(outcome, op, client)`. */
function serverAnswer(name, urlOf, check, { retry = {}, env = "both" } = {}) {
  row("answer", name, async (ctx) => {
    const client = ctx.client({ retry: { maxAttempts: 3, attemptTimeoutMs: 2000, ...retry } });
    const op = await client.begin("pay", { url: urlOf(ctx), body: "x" });
    const started = Date.now();
    const outcome = await op.send().then((result) => ({ result }), (error) => ({ error }));
    outcome.ms = Date.now() - started;
    await check(outcome, op, client, ctx);
  }, env);
}

/** A RETRIES_EXHAUSTED outcome that kept the intent pending with its key, resumable by a later send. */
async function keptPending({ error }, op, client) {
  assert.ok(error, "expected the send to give up");
  assert.equal(error.code, "RETRIES_EXHAUSTED", `code (${error.message})`);
  assert.equal(error.key, op.key, "the error names the key");
  const pending = await client.pending();
  assert.equal(pending.length, 1, "still pending");
  assert.equal(pending[0].key, op.key, "with its original key");
}

/** A stored record in the page's localStorage (browser rows). */
const slotOf = (ctx, id = "pay") => `${PREFIX}${ctx.ns}:${id}`;

async function storedRecord(ctx, request) {
  const op = await ctx.client().begin("pay", request);
  return { op, record: JSON.parse(localStorage.getItem(slotOf(ctx))) };
}

/** Writes `text` into the intent's slot: begin must refuse STORAGE, send nothing, leave it alone. */
function tamperedRecord(name, mutate) {
  row("storage", name, async (ctx) => {
    const request = { url: ctx.url("tamper", "201"), body: "x" };
    const { op, record } = await storedRecord(ctx, request);
    const text = mutate(record, op);
    localStorage.setItem(slotOf(ctx), text);
    const error = await assert.rejects(ctx.client().begin("pay", request), "STORAGE", name);
    assert.match(error.message, /pay/, "the message names the intent");
    await assert.rejects(op.send(), "STORAGE", `${name}: the old operation's send`);
    assert.equal(localStorage.getItem(slotOf(ctx)), text, "the entry is left alone (never overwritten)");
    assert.deepEqual(await ctx.client().pending(), [], "pending() skips it");
    assert.equal((await ctx.log("tamper")).length, 0, "nothing sent");
    localStorage.removeItem(slotOf(ctx));
  }, "browser");
}

// ---------------------------------------------------------------------------------------------
// 1. options: wrong type, negative, NaN, Infinity, huge, unknown

badOption("options a number", 42, /options/);
badOption("options a string", "fast", /options/);
badOption("options an array", [1, 2], /options/);
badOption("retry a string", { storage: "memory", retry: "fast" }, /retry/);
badOption("retry.maxAttempts a string", { storage: "memory", retry: { maxAttempts: "3" } }, /maxAttempts/);
badOption("retry.maxAttempts negative", { storage: "memory", retry: { maxAttempts: -1 } }, /maxAttempts/);
badOption("retry.maxAttempts 0", { storage: "memory", retry: { maxAttempts: 0 } }, /maxAttempts/);
badOption("retry.maxAttempts NaN", { storage: "memory", retry: { maxAttempts: NaN } }, /maxAttempts/);
badOption("retry.maxAttempts Infinity", { storage: "memory", retry: { maxAttempts: Infinity } }, /maxAttempts/);
badOption("retry.maxAttempts huge (1e12)", { storage: "memory", retry: { maxAttempts: 1e12 } }, /maxAttempts/);
badOption("retry.maxAttempts a fraction", { storage: "memory", retry: { maxAttempts: 2.5 } }, /maxAttempts/);
badOption("retry.maxAttempts a BigInt", { storage: "memory", retry: { maxAttempts: 3n } }, /maxAttempts/);
badOption("retry.baseDelayMs negative", { storage: "memory", retry: { baseDelayMs: -5 } }, /baseDelayMs/);
badOption("retry.maxDelayMs Infinity", { storage: "memory", retry: { maxDelayMs: Infinity } }, /maxDelayMs/);
badOption("retry.totalTimeoutMs NaN", { storage: "memory", retry: { totalTimeoutMs: NaN } }, /totalTimeoutMs/);
badOption("retry.attemptTimeoutMs -Infinity", { storage: "memory", retry: { attemptTimeoutMs: -Infinity } }, /attemptTimeoutMs/);
badOption("retry.maxRetryAfterMs huge (1e300)", { storage: "memory", retry: { maxRetryAfterMs: 1e300 } }, /maxRetryAfterMs/);
badOption("retry.maxRetryAfterMs -0.5", { storage: "memory", retry: { maxRetryAfterMs: -0.5 } }, /maxRetryAfterMs/);
badOption("retry.jitter unknown", { storage: "memory", retry: { jitter: "random" } }, /jitter/);
badOption("retry.jitter a number", { storage: "memory", retry: { jitter: 1 } }, /jitter/);
badOption("retry unknown field", { storage: "memory", retry: { retries: 3 } }, /retries/);
badOption("unknown top-level field", { storage: "memory", retries: 3 }, /retries/);
badOption("namespace a number", { storage: "memory", namespace: 42 }, /namespace/);
badOption("namespace empty", { storage: "memory", namespace: "" }, /namespace/);
badOption("namespace with ':'", { storage: "memory", namespace: "a:b" }, /namespace/);
badOption("namespace with a newline", { storage: "memory", namespace: "a\nb" }, /namespace/);
badOption("namespace huge (10k chars)", { storage: "memory", namespace: "n".repeat(10000) }, /namespace/);
badOption("storage unknown", { storage: "cookies" }, /storage/);
badOption("keyTtlMs negative", { storage: "memory", keyTtlMs: -1 }, /keyTtlMs/);
badOption("keyTtlMs 0", { storage: "memory", keyTtlMs: 0 }, /keyTtlMs/);
badOption("keyTtlMs a string", { storage: "memory", keyTtlMs: "1d" }, /keyTtlMs/);
badOption("headerName with CR/LF", { storage: "memory", headerName: "Idempotency-Key\r\nX-Evil: 1" }, /headerName/);
badOption("headerName with a space", { storage: "memory", headerName: "Idempotency Key" }, /headerName/);
badOption("headerName empty", { storage: "memory", headerName: "" }, /headerName/);
badOption("headerForm unknown", { storage: "memory", headerForm: "quoted" }, /headerForm/);
badOption("retryBudget negative", { storage: "memory", retryBudget: -1 }, /retryBudget/);
badOption("retryBudget Infinity", { storage: "memory", retryBudget: Infinity }, /retryBudget/);
badOption("persistRequest a string", { storage: "memory", persistRequest: "yes" }, /persistRequest/);
badOption("shouldRetry not a function", { storage: "memory", shouldRetry: "yes" }, /shouldRetry/);
// What is kept at rest (persistHeaders) and the body cap.
badOption("persistHeaders not an array", { storage: "memory", persistHeaders: "x-trace" }, /persistHeaders/);
badOption("persistHeaders with a bad name", { storage: "memory", persistHeaders: ["x trace"] }, /persistHeaders/);
badOption("resumeOrigins with a path", { storage: "memory", resumeOrigins: ["https://a.example/p"] }, /resumeOrigins/);
badOption("resumeOrigins not a URL", { storage: "memory", resumeOrigins: ["a.example"] }, /resumeOrigins/);
badOption("maxBodyBytes negative", { storage: "memory", maxBodyBytes: -1 }, /maxBodyBytes/);
badOption("maxBodyBytes over 256 MiB", { storage: "memory", maxBodyBytes: 2 ** 29 }, /maxBodyBytes/);
badOption("requireDurable with memory storage", { storage: "memory", requireDurable: true }, /requireDurable/);
badOption("requireDurable a string", { storage: "memory", requireDurable: "yes" }, /requireDurable/);

row("options", "a getter that throws is refused (or its error surfaces), never a trap", (ctx) => {
  const options = { storage: "memory", get retry() { throw new Error("boom from a getter"); } };
  let error;
  try { new ctx.lib.IdempotentClient(options); } catch (e) { error = e; }
  assert.ok(error, "the constructor must not succeed");
  assert.ok(error.code === "INVALID_OPTIONS" || /boom/.test(error.message), `got ${error.name} ${error.code}: ${error.message}`);
});

row("options", "a Proxy options object with hostile traps", (ctx) => {
  const options = new Proxy({}, { ownKeys() { throw new Error("ownKeys trap"); }, get() { throw new Error("get trap"); } });
  let error;
  try { new ctx.lib.IdempotentClient(options); } catch (e) { error = e; }
  assert.ok(error, "the constructor must not succeed");
  assert.ok(error.code === "INVALID_OPTIONS" || /trap/.test(error.message), `got ${error.name} ${error.code}: ${error.message}`);
});

row("options", "shouldRetry that throws: documented safe behaviour (default classification or a typed error)", async (ctx) => {
  const client = ctx.client({ shouldRetry: () => { throw new Error("app bug"); }, retry: { maxAttempts: 3 } });
  const op = await client.begin("pay", { url: ctx.url("sr", "503,201"), body: "x" });
  const outcome = await op.send().then((result) => ({ result }), (error) => ({ error }));
  if (outcome.result) {
    assert.equal(outcome.result.status, 201, "fell back to the default classification");
  } else {
    assert.ok(ctx.lib.isIdempotentFetchError(outcome.error), `a typed error, got ${outcome.error}`);
    const pending = await client.pending();
    assert.equal(pending[0]?.key, op.key, "the intent keeps its key");
  }
});

row("options", "shouldRetry returning junk (\"maybe\", 1) is treated as undefined (default classification)", async (ctx) => {
  for (const junk of ["maybe", 1, null, {}]) {
    const client = ctx.client({ shouldRetry: () => junk, retry: { maxAttempts: 3 } });
    const scenario = `junk${typeof junk}${junk === null ? "null" : ""}`;
    const op = await client.begin(scenario, { url: ctx.url(scenario, "503,201"), body: "x" });
    assert.equal((await op.send()).status, 201, `shouldRetry -> ${JSON.stringify(junk)}`);
  }
});

// ---------------------------------------------------------------------------------------------
// 2. requests: missing url or method, wrong types, CR/LF, reserved headers

badRequest("request null", () => null);
badRequest("request undefined", () => undefined);
badRequest("request a string", (url) => url);
badRequest("missing url", () => ({ method: "POST", body: "x" }));
badRequest("url a number", () => ({ url: 42, body: "x" }));
badRequest("url empty", () => ({ url: "" }));
badRequest("url with CR/LF", (url) => ({ url: `${url}\r\nX-Evil: 1`, body: "x" }));
badRequest("relative url in Node (no page to resolve it)", () => ({ url: "/api/orders", body: "x" }), "INVALID_REQUEST", "node");
badRequest("method a number", (url) => ({ url, method: 42, body: "x" }));
badRequest("method with CR/LF", (url) => ({ url, method: "POST\r\nX: 1", body: "x" }));
badRequest("method with a space", (url) => ({ url, method: "PO ST", body: "x" }));
badRequest("method CONNECT", (url) => ({ url, method: "CONNECT" }));
badRequest("method TRACE", (url) => ({ url, method: "TRACE" }));
badRequest("header value with CR/LF", (url) => ({ url, headers: { "X-A": "a\r\nX-Evil: 1" }, body: "x" }));
badRequest("header value with a bare LF", (url) => ({ url, headers: { "X-A": "a\nb" }, body: "x" }));
badRequest("header value with NUL", (url) => ({ url, headers: { "X-A": "a\u0000b" }, body: "x" }));
badRequest("header name with a colon", (url) => ({ url, headers: { "X:A": "1" }, body: "x" }));
badRequest("header pairs malformed ([[\"a\"]])", (url) => ({ url, headers: [["a"]], body: "x" }));
badRequest("headers a number", (url) => ({ url, headers: 5, body: "x" }));
badRequest("Idempotency-Key set by the caller", (url) => ({ url, headers: { "Idempotency-Key": "mine" }, body: "x" }));
badRequest("GET with a body", (url) => ({ url, method: "GET", body: "x" }));
badRequest("unknown request field", (url) => ({ url, body: "x", retries: 3 }));

row("request", "missing method defaults to POST (documented)", async (ctx) => {
  const op = await ctx.client().begin("pay", { url: ctx.url("nomethod", "201"), body: "x" });
  assert.equal((await op.send()).status, 201);
  assert.equal((await ctx.log("nomethod"))[0].method, "POST");
});

row("request", "intent ids: non-string, empty, control characters, 257 chars are INVALID_REQUEST", async (ctx) => {
  const client = ctx.client();
  const request = { url: ctx.url("ids", "201"), body: "x" };
  for (const id of [42, null, undefined, {}, "", "a\r\nb", "a\u0000b", "x".repeat(257)]) {
    await assert.rejects(client.begin(id, request), "INVALID_REQUEST", `intent id ${JSON.stringify(id)}`);
  }
  assert.equal((await ctx.log("ids")).length, 0);
});

row("request", "send options of the wrong type: INVALID_OPTIONS/INVALID_REQUEST (or ignored), the intent keeps its key", async (ctx) => {
  const client = ctx.client();
  const op = await client.begin("pay", { url: ctx.url("sendopts", "201"), body: "x" });
  for (const options of [{ signal: "nope" }, { onRetry: 5 }, { onAttempt: "x" }, { unknown: 1 }, 42]) {
    const outcome = await op.send(options).then((result) => ({ result }), (error) => ({ error }));
    if (outcome.error) {
      assert.ok(["INVALID_OPTIONS", "INVALID_REQUEST"].includes(outcome.error.code), `send(${JSON.stringify(options)}): ${outcome.error.code} ${outcome.error.message}`);
      assert.equal(op.key, (await client.pending())[0]?.key ?? op.key, "key kept");
    } else {
      assert.equal(outcome.result.key, op.key);
    }
  }
});

row("request", "an onRetry callback that throws does not break the send", async (ctx) => {
  const op = await ctx.client().begin("pay", { url: ctx.url("cbthrow", "503,201"), body: "x" });
  const result = await op.send({ onRetry: () => { throw new Error("ui bug"); }, onAttempt: () => { throw new Error("ui bug"); } });
  assert.equal(result.status, 201);
  assert.equal(result.key, op.key);
});

// ---------------------------------------------------------------------------------------------
// 3. bodies: every type, and the ones that cannot be replayed

goodBody("string (UTF-8)", () => "h\u00e9", "68c3a9");
goodBody("ArrayBuffer", () => new Uint8Array([0, 1, 255]).buffer, "0001ff");
goodBody("Uint8Array view of a larger buffer", () => new Uint8Array(new Uint8Array([9, 1, 2, 9]).buffer, 1, 2), "0102");
goodBody("DataView", () => new DataView(new Uint8Array([7, 8]).buffer), "0708");
goodBody("Blob", () => new Blob(["ab", new Uint8Array([0])]), "616200");
goodBody("URLSearchParams", () => new URLSearchParams({ a: "1 2" }), "613d312b32");
goodBody("FormData", () => { const f = new FormData(); f.append("a", "1"); return f; });
goodBody("empty string", () => "", "");
goodBody("1 MB string", () => "x".repeat(1 << 20));
badRequest("locked ReadableStream body: BODY_NOT_REPLAYABLE, nothing sent", (url) => {
  const body = new ReadableStream({ start(c) { c.enqueue(new Uint8Array([1])); c.close(); } });
  body.getReader();
  return { url, body };
}, "BODY_NOT_REPLAYABLE");
badRequest("plain object body", (url) => ({ url, body: { amount: 1 } }));
badRequest("number body", (url) => ({ url, body: 5 }));
badRequest("boolean body", (url) => ({ url, body: true }));
badRequest("Symbol body", (url) => ({ url, body: Symbol("x") }));
badRequest("URL with user:password (fetch cannot build it): INVALID_REQUEST, not retried", (url) => ({ url: url.replace("://", "://u:p@"), body: "x" }));
// Over the 1 MiB default cap (maxBodyBytes): refused before the body is copied, nothing sent.
badRequest("body of 1 MiB + 1 bytes: BODY_TOO_LARGE", (url) => ({ url, body: new Uint8Array((1 << 20) + 1) }), "BODY_TOO_LARGE");
badRequest("string of 1 MiB + 1 characters: BODY_TOO_LARGE", (url) => ({ url, body: "x".repeat((1 << 20) + 1) }), "BODY_TOO_LARGE");
badRequest("Blob of 1 MiB + 1 bytes: BODY_TOO_LARGE", (url) => ({ url, body: new Blob([new Uint8Array((1 << 20) + 1)]) }), "BODY_TOO_LARGE");

row("body", "a detached ArrayBuffer body: typed error or sent as empty, never a trap", async (ctx) => {
  const buffer = new ArrayBuffer(8);
  structuredClone(buffer, { transfer: [buffer] }); // detaches it
  const outcome = await ctx.client().begin("pay", { url: ctx.url("detached", "201"), body: buffer })
    .then((op) => op.send()).then((result) => ({ result }), (error) => ({ error }));
  if (outcome.error) assert.ok(ctx.lib.isIdempotentFetchError(outcome.error), `typed error, got ${outcome.error}`);
  else assert.equal(outcome.result.status, 201);
});

// ---------------------------------------------------------------------------------------------
// 4. server answers: invalid status, broken HTTP, endless body, bogus Retry-After

serverAnswer("an invalid status line (HTTP/1.1 999 Nope): retried as a network error, key kept", (ctx) => `${ctx.raw}/status999`, async (outcome, op, client) => {
  if (outcome.result) {
    // a runtime that exposes 999 as a status: it must be a definite non-2xx, never ok
    assert.equal(outcome.result.ok, false, "999 is not a success");
  } else {
    await keptPending(outcome, op, client);
  }
}, { env: "node" });

serverAnswer("not HTTP at all (garbage then close): network error, key kept", (ctx) => `${ctx.raw}/garbage`, keptPending, { env: "node" });
serverAnswer("a header with a control character: network error, key kept", (ctx) => `${ctx.raw}/badheader`, async (outcome, op, client) => {
  if (outcome.result) assert.ok(outcome.result.status === 201, "runtime accepted the header");
  else await keptPending(outcome, op, client);
}, { env: "node" });
serverAnswer("connection closed without an answer: network error, key kept", (ctx) => `${ctx.raw}/close`, keptPending, { env: "node" });

// A key-status endpoint (statusUrl) that answers anything but the protocol: "could not ask", never
// "unknown" (which would send the key again): the send ends exhausted, its key kept, never resent.
for (const [label, step] of [
  ["garbage (not JSON)", "garbage"], ["an HTML sign-in page", "html"], ["a 500", "500"],
  ["another key's answer", "otherkey"], ['a "done" without its response', "noresponse"],
]) {
  row("key status", `${label}: could not ask, exhausted with the key kept, not resent`, async (ctx) => {
    const client = ctx.client({ retry: { maxAttempts: 2 }, statusUrl: ctx.ksUrl(`ks-${step}`, step) });
    const op = await client.begin("pay", { url: ctx.url(`ks-${step}`, "reset"), body: "x" });
    const outcome = await op.send().then((result) => ({ result }), (error) => ({ error }));
    await keptPending(outcome, op, client);
    assert.match(outcome.error.message, /the key's status is unknown \(/);
    assert.equal((await ctx.log(`ks-${step}`)).length, 2, "only the two attempts");
    assert.equal((await ctx.log(`ks-${step}-ks`)).length, 1, "asked once");
  });
}

// An attempt ends when its whole answer is held: an answer that never ends is never definite.
serverAnswer("an endless body: every attempt times out, key kept", (ctx) => ctx.url("endless", "endless"), async (outcome, op, client) => {
  await keptPending(outcome, op, client);
  assert.equal(outcome.error.reason, "maxAttempts");
  assert.ok(outcome.ms < 8000, `gave up after its attempts (${outcome.ms} ms)`);
}, { retry: { maxAttempts: 2, attemptTimeoutMs: 500 } });

for (const [label, value] of [
  ["soon", "soon"], ["negative", "-5"], ["a fraction", "1.5"], ["empty", ""], ["huge digits", "9".repeat(40)],
  ["far-future date", "Fri, 31 Dec 9999 23:59:59 GMT"], ["past date", "Wed, 21 Oct 2015 07:28:00 GMT"],
  ["an impossible date", "Mon, 32 Foo 2015 99:99:99 GMT"], ["300 chars", "1".repeat(300)], ["with spaces", " 1 "], ["hex", "0x10"],
]) {
  // the raw server answers the first request of a token 429 with this Retry-After, then 201
  serverAnswer(`Retry-After ${label} (${JSON.stringify(value.slice(0, 20))}): ignored or capped, then success`,
    (ctx) => `${ctx.raw}/ra/${ctx.ns}${label.replace(/\W/g, "")}?v=${encodeURIComponent(value)}`, async ({ result, ms }) => {
      assert.ok(result, "succeeded");
      assert.equal(result.status, 201);
      assert.equal(result.attempts, 2);
      assert.ok(ms < 1500, `waited ${ms} ms: a bogus or huge Retry-After must not stall beyond maxRetryAfterMs (200)`);
    }, { retry: { maxRetryAfterMs: 200, baseDelayMs: 1, maxDelayMs: 5 } });
}

serverAnswer("Idempotent-Replayed and Stripe-Should-Retry junk values are ignored", (ctx) => `${ctx.raw}/junkhdr`, async ({ result }) => {
  assert.ok(result, "succeeded");
  assert.equal(result.status, 201);
  assert.equal(result.replayed, false);
}, { env: "node" });

// ---------------------------------------------------------------------------------------------
// 5. storage: throws on read or write, full, corrupt JSON, future version, tampered key

row("storage", "localStorage getter throws SecurityError: falls back to memory and sends", async (ctx) => {
  const restore = override(globalThis, "localStorage", { get() { throw new DOMException("insecure", "SecurityError"); } });
  try {
    const client = ctx.client({ storage: "local" });
    assert.equal(client.storage, "memory");
    assert.match(client.storageFallback, /SecurityError/);
    const op = await client.begin("pay", { url: ctx.url("blocked", "503,201"), body: "x" });
    assert.equal((await op.send()).status, 201);
  } finally {
    restore();
  }
}, "browser", { freshPage: true });

row("storage", "getItem throws on read: typed STORAGE or memory fallback, never a trap", async (ctx) => {
  const request = { url: ctx.url("readfail", "201"), body: "x" };
  const first = await ctx.client().begin("pay", request);
  const restore = override(Storage.prototype, "getItem", { writable: true, value() { throw new DOMException("read failed", "UnknownError"); } });
  let outcome;
  try {
    outcome = await ctx.client().begin("pay", request).then((op) => ({ op }), (error) => ({ error }));
  } finally {
    restore();
  }
  if (outcome.error) assert.equal(outcome.error.code, "STORAGE", outcome.error.message);
  // either way, with storage readable again the stored intent and its key are still there
  const again = await ctx.client().begin("pay", request);
  assert.equal(again.key, first.key, "the stored key survived");
  assert.equal((await again.send()).status, 201);
}, "browser");

row("storage", "setItem throws QuotaExceededError (full) at start: memory fallback, sends", async (ctx) => {
  const restore = override(Storage.prototype, "setItem", { writable: true, value() { throw new DOMException("full", "QuotaExceededError"); } });
  try {
    const client = ctx.client();
    assert.equal(client.storage, "memory");
    assert.match(client.storageFallback, /QuotaExceededError/);
    const op = await client.begin("pay", { url: ctx.url("full", "503,201"), body: "x" });
    assert.equal((await op.send()).status, 201);
  } finally {
    restore();
  }
}, "browser");

row("storage", "storage fills up mid-retry: the key is kept (memory fallback) and the same key is sent", async (ctx) => {
  const client = ctx.client({ retry: { maxAttempts: 1 } });
  const request = { url: ctx.url("fills", "503,201"), body: "x" };
  const op = await client.begin("pay", request);
  await assert.rejects(op.send(), "RETRIES_EXHAUSTED");
  const restore = override(Storage.prototype, "setItem", { writable: true, value() { throw new DOMException("full", "QuotaExceededError"); } });
  try {
    const result = await (await client.begin("pay", request)).send();
    assert.equal(result.key, op.key);
    assert.deepEqual((await ctx.log("fills")).map((e) => e.key), [op.key, op.key]);
  } finally {
    restore();
  }
}, "browser");

row("storage", "getItem returns a non-string (hostile polyfill): STORAGE, never a trap", async (ctx) => {
  const request = { url: ctx.url("nonstring", "201"), body: "x" };
  await ctx.client().begin("pay", request);
  const restore = override(Storage.prototype, "getItem", { writable: true, value() { return { not: "a string" }; } });
  let outcome;
  try {
    outcome = await ctx.client().begin("pay", request).then((op) => ({ op }), (error) => ({ error }));
  } finally {
    restore();
  }
  if (outcome.error) assert.equal(outcome.error.code, "STORAGE", outcome.error.message);
  assert.equal((await ctx.log("nonstring")).length, 0, "nothing sent");
}, "browser");

tamperedRecord("corrupt JSON", () => "{not json");
tamperedRecord("JSON null", () => "null");
tamperedRecord("JSON array", () => "[]");
tamperedRecord("a record of a future version (v: 3; this build writes 2, reads 1 and 2)", (r) => JSON.stringify({ ...r, v: 3 }));
tamperedRecord("a record of version 0", (r) => JSON.stringify({ ...r, v: 0 }));
tamperedRecord("key with CR/LF", (r) => JSON.stringify({ ...r, key: `${r.key}\r\nX-Evil: 1` }));
tamperedRecord("key upper-cased", (r) => JSON.stringify({ ...r, key: r.key.toUpperCase() }));
tamperedRecord("key a UUID v1", (r) => JSON.stringify({ ...r, key: "6ba7b810-9dad-11d1-80b4-00c04fd430c8" }));
tamperedRecord("key a number", (r) => JSON.stringify({ ...r, key: 42 }));
tamperedRecord("fingerprint not hex", (r) => JSON.stringify({ ...r, fingerprint: "z".repeat(64) }));
tamperedRecord("unknown field", (r) => JSON.stringify({ ...r, evil: true }));
tamperedRecord("attempts negative", (r) => JSON.stringify({ ...r, attempts: -1 }));
tamperedRecord("attempts 1e20", (r) => JSON.stringify({ ...r, attempts: 1e20 }));
tamperedRecord("createdAt a string", (r) => JSON.stringify({ ...r, createdAt: "yesterday" }));
tamperedRecord("updatedAt before createdAt", (r) => JSON.stringify({ ...r, updatedAt: r.createdAt - 1 }));
tamperedRecord("state unknown", (r) => JSON.stringify({ ...r, state: "paid?" }));
tamperedRecord("lastStatus 9999", (r) => JSON.stringify({ ...r, lastStatus: 9999 }));
tamperedRecord("record copied from another slot (id differs)", (r) => JSON.stringify({ ...r, id: "other" }));
tamperedRecord("persisted request with a non-byte body", (r) => JSON.stringify({ ...r, request: { method: "POST", url: "/x", headers: [], body: [256] } }));
tamperedRecord("deeply nested JSON (10k levels)", () => "[".repeat(10000) + "]".repeat(10000));

row("storage", "a tampered record is not lost: discard removes it, then a fresh begin works", async (ctx) => {
  const request = { url: ctx.url("discard", "201"), body: "x" };
  localStorage.setItem(slotOf(ctx), "{not json");
  await assert.rejects(ctx.client().begin("pay", request), "STORAGE");
  await ctx.client().discard("pay");
  assert.equal(localStorage.getItem(slotOf(ctx)), null);
  assert.equal((await (await ctx.client().begin("pay", request)).send()).status, 201);
}, "browser");
