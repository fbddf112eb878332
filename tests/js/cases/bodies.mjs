// Bodies: every body type arrives byte-identical on every attempt with fetch's content type; streams
// and Requests are buffered once; bodies that cannot be buffered are refused.
// Cases of the JavaScript API (the runners and `ctx`: ../cases.mjs).

import { CARD, assert, base64ToBytes, sameBytes, hex, adder } from "./support.mjs";

export const cases = [];
const add = adder(cases);

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

