// What is stored and when: `persistRequest` (bodies over 1 KiB out of line), what stays at rest, the body
// cap, start-up, the keyed fingerprint, `resume()`'s checks, durability.
// Cases of the JavaScript API (the runners and `ctx`: ../cases.mjs).

import { PREFIX, RETIRED, storedText, SECRET_TOKEN, CARD, SECRET_SLOT, assert, adder } from "./support.mjs";

export const cases = [];
const add = adder(cases);

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
  // The server is another origin than the page: resume() refuses it unless listed (resumeOrigins).
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

// --- at rest, and the body cap -----------------------------------------------------------------

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

