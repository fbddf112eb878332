// examples/invite-express installed from the packed package (test/support/invite-app.mjs), its app and its
// mail receiver as Node processes on a real PostgreSQL, driven by the browser package
// (idempotent-fetch-client, IF_PKG) through a proxy that answers 503 before the app and loses the app's
// answers, with the receiver down half the time: one invite and one email per key.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";

import pg from "pg";

import { startCluster } from "../../../tests/fault/pg-cluster.mjs";
import { importPackage } from "../../../tests/support/paths.mjs";
import { waitFor } from "../../../tests/support/timing.mjs";
import { installExample, startFaultyProxy, startNode } from "./support/invite-app.mjs";

const { IdempotentClient } = await importPackage();

let tmpDir;
let cluster;
let pool;
let receiver;
let app;
let proxy;
/** The fate of the coming POST /api/invites requests, in order ("503", "lose", or pass). */
const fates = [];
const keysSeen = [];

before(async () => {
  tmpDir = mkdtempSync(path.join(tmpdir(), "invite-express-"));
  const dir = installExample(tmpDir);
  cluster = await startCluster();
  cluster.createDatabase("invites");
  const DATABASE_URL = cluster.url("invites");
  pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  receiver = await startNode(dir, "receiver.mjs", { DATABASE_URL });
  app = await startNode(dir, "app.mjs", { DATABASE_URL, MAIL_URL: `${receiver.url}/messages` });
  proxy = await startFaultyProxy(app.url, ({ method, path: p, headers }) => {
    if (method !== "POST" || p !== "/api/invites") return "pass";
    keysSeen.push(headers["idempotency-key"]);
    return fates.shift() ?? "pass";
  });
}, { timeout: 180_000 });

after(async () => {
  await proxy?.close();
  await app?.stop();
  await receiver?.stop();
  await pool?.end();
  cluster?.stop();
  if (tmpDir) rmSync(tmpDir, { recursive: true, force: true });
});

const client = () => new IdempotentClient({ namespace: `invite${Date.now().toString(36)}`, retry: { baseDelayMs: 50, maxDelayMs: 200, maxAttempts: 20 } });
const invite = (c, email) =>
  c.fetch(`${proxy.url}/api/invites`, { method: "POST", intent: `invite:${email}`, headers: { "content-type": "application/json" }, body: JSON.stringify({ email }) });
const mailsTo = async (email) => (await (await fetch(`${receiver.url}/messages`)).json()).messages.filter((m) => m.to === email);

describe("the invite app in Express over pg (examples/invite-express)", () => {
  it("a 503, two lost answers and the receiver down half the time: one invite, one email, one key", async () => {
    await fetch(`${receiver.url}/faults`, { method: "PUT", headers: { "content-type": "application/json" }, body: '{"fail":0.5}' });
    fates.push("503", "lose", "lose");
    keysSeen.length = 0;
    const response = await invite(client(), "ann@example.com");
    assert.equal(response.status, 201);
    assert.equal(response.headers.get("idempotent-replayed"), "true", "the answer that arrived is the replay of the first");
    const created = await response.json();
    assert.equal(created.email, "ann@example.com");
    assert.equal(keysSeen.length, 4, "a 503, two lost answers, then the fourth attempt");
    assert.equal(new Set(keysSeen).size, 1, "one key for the intent");
    const { rows } = await pool.query("SELECT id FROM invites WHERE email = 'ann@example.com'");
    assert.deepEqual(rows.map((r) => Number(r.id)), [created.id]);

    const mails = await waitFor(async () => {
      const m = await mailsTo("ann@example.com");
      return m.length > 0 && m;
    }, "the email", 20_000, 100);
    await fetch(`${receiver.url}/faults`, { method: "PUT", headers: { "content-type": "application/json" }, body: '{"fail":0}' });
    await waitFor(async () => (await (await fetch(`${app.url}/api/outbox`)).json()).undelivered === 0, "the outbox drained", 20_000, 100);
    const again = await mailsTo("ann@example.com");
    assert.equal(mails.length, 1);
    assert.equal(again.length, 1, "still one email after the worker's further passes");
    assert.match(again[0].text, new RegExp(`number ${created.id}\\.`));

    const status = await (await fetch(`${app.url}/api/idempotency-keys/${encodeURIComponent(keysSeen[0])}`)).json();
    assert.equal(status.status, "done");
    assert.equal(JSON.parse(status.response.body).id, created.id);
  });

  it("an email the receiver took but whose answer the worker lost is re-delivered and refused as a duplicate: still one email", async () => {
    const c = client();
    const response = await invite(c, "bob@example.com");
    assert.equal(response.status, 201);
    const [mail] = await waitFor(async () => {
      const m = await mailsTo("bob@example.com");
      return m.length > 0 && m;
    }, "bob's email", 20_000, 100);
    // The worker's delivery again, as after a crash between the receiver's answer and the mark.
    const redelivered = await fetch(`${receiver.url}/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": mail.id },
      body: JSON.stringify({ to: "bob@example.com", text: mail.text }),
    });
    assert.equal(redelivered.status, 202);
    assert.equal(redelivered.headers.get("idempotent-replayed"), "true");
    assert.equal((await mailsTo("bob@example.com")).length, 1);
  });

  it("the same key with another body is refused 422; a bad address is a stored 400", async () => {
    keysSeen.length = 0;
    assert.equal((await invite(client(), "cy@example.com")).status, 201);
    const reused = await fetch(`${app.url}/api/invites`, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": keysSeen[0] },
      body: JSON.stringify({ email: "eve@example.com" }),
    });
    assert.equal(reused.status, 422);
    const bad = await invite(client(), "not-an-address");
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).code, "invalid-email");
    assert.equal(Number((await pool.query("SELECT count(*) AS n FROM invites WHERE email IN ('eve@example.com', 'not-an-address')")).rows[0].n), 0);
  });
});
