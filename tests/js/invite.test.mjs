// examples/invite, the app built on the server library alone (an endpoint with its own table and one
// email through the outbox), driven by the package in Node: the invite-example binary and the
// workspace's mail-receiver as separate processes on 127.0.0.1, a proxy in front of the app that loses
// answers, and the mail receiver down half the time. Checked: one invitation and one email per intent
// whatever was lost, a double submit sends one key, a replay is marked, another body with the same key
// is refused, and the key-status endpoint answers for the key.
// Run: node --test tests/js/invite.test.mjs (the xtask's layer f runs it).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";

import { importPackage } from "../support/paths.mjs";
import { startService } from "../support/reference-server.mjs";
import { startInjectProxy } from "../support/inject-proxy.mjs";

const { IdempotentClient } = await importPackage();

let mail;
let app;
let proxy;
const seenKeys = [];
let toLose = 0;

before(async () => {
  mail = await startService("mail-receiver", { label: "invite-mail" });
  app = await startService("invite-example", { label: "invite", args: ["--mail-url", mail.url] });
  proxy = await startInjectProxy({
    target: app.url,
    observe: ({ method, path, headers }) => method === "POST" && path === "/api/invites" && seenKeys.push(headers["idempotency-key"]),
    // The app answers; the answer never reaches the client: the order of events retries exist for.
    loseAnswer: ({ method, path }) => method === "POST" && path === "/api/invites" && toLose-- > 0,
  });
});
after(async () => {
  await proxy?.close();
  await app?.stop();
  await mail?.stop();
});

const client = () => new IdempotentClient({ namespace: `invite${Date.now().toString(36)}`, retry: { baseDelayMs: 50, maxDelayMs: 200, maxAttempts: 20 } });
const invite = (c, email, init = {}) =>
  c.fetch(`${proxy.url}/api/invites`, { method: "POST", intent: `invite:${email}`, headers: { "content-type": "application/json" }, body: JSON.stringify({ email }), ...init });

async function until(what, check, ms = 20_000) {
  const end = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

test("answers lost twice and the mail receiver down half the time: one invitation, one email, one key", async () => {
  await mail.setFaults({ fail: 0.5 });
  toLose = 2;
  seenKeys.length = 0;
  const response = await invite(client(), "ann@example.com");
  assert.equal(response.status, 201);
  assert.equal(response.headers.get("idempotent-replayed"), "true", "the answer that arrived is the replay of the first");
  const created = await response.json();
  assert.equal(created.email, "ann@example.com");
  assert.equal(seenKeys.length, 3, "two lost answers, then the third attempt");
  assert.equal(new Set(seenKeys).size, 1, "one key for the intent");

  const { invites } = await app.get("/api/invites");
  assert.deepEqual(invites.filter((i) => i.email === "ann@example.com").map((i) => i.id), [created.id]);
  const messages = await until("the email", async () => {
    const { messages } = await mail.get("/messages");
    const forAnn = messages.filter((m) => m.to === "ann@example.com");
    return forAnn.length > 0 && forAnn;
  });
  await mail.setFaults({ fail: 0 });
  await new Promise((resolve) => setTimeout(resolve, 500));
  const again = (await mail.get("/messages")).messages.filter((m) => m.to === "ann@example.com");
  assert.equal(messages.length, 1);
  assert.equal(again.length, 1, "still one email after the worker's further passes");
  assert.match(again[0].text, new RegExp(`number ${created.id}\\.`));

  const status = await (await fetch(`${app.url}/api/idempotency-keys/${encodeURIComponent(seenKeys[0])}`)).json();
  assert.equal(status.status, "done");
  assert.equal(status.response.status, 201);
  assert.equal(JSON.parse(status.response.body).id, created.id);
});

test("a double submit sends one key; the same key with another body is refused 422", async () => {
  seenKeys.length = 0;
  const c = client();
  const [first, second] = await Promise.all([invite(c, "bob@example.com"), invite(c, "bob@example.com")]);
  assert.equal(first.status, 201);
  assert.equal(second.status, 201);
  assert.equal(new Set(seenKeys).size, 1, "both submits are one intent with one key");
  const { invites } = await app.get("/api/invites");
  assert.equal(invites.filter((i) => i.email === "bob@example.com").length, 1);

  const reused = await fetch(`${app.url}/api/invites`, {
    method: "POST",
    headers: { "content-type": "application/json", "idempotency-key": seenKeys[0] },
    body: JSON.stringify({ email: "eve@example.com" }),
  });
  assert.equal(reused.status, 422);
  assert.equal((await reused.json()).code, "idempotency-key-reused");
  const bad = await invite(client(), "not-an-address");
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).code, "invalid-email");
});
