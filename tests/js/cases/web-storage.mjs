// Browser-only cases over real Web Storage: reloads, fallbacks when storage is blocked or full, corrupt
// and tampered records.
// Cases of the JavaScript API (the runners and `ctx`: ../cases.mjs).

import { PREFIX, SECRET_TOKEN, CARD, assert, allStoredText, override, adder } from "./support.mjs";

export const cases = [];
const add = adder(cases);

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

