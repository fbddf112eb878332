// kill -9 under load: three processes of examples/invite-express (installed from the packed package) on
// one real PostgreSQL, each killed with SIGKILL at random moments and restarted, while a keyed load sends
// every invite again, to any live process, until it gets a definite answer (201). The mail receiver fails
// a share of deliveries, so the outbox retries too, and holds each answer 150 ms after its commit, so a
// kill often lands between an email taken and its outbox mark: that email is sent again, and the inbox
// must refuse it. Then: one invite row and one email per key, none lost,
// none twice. The counts are printed.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";

import pg from "pg";

import { startCluster } from "../../../tests/fault/pg-cluster.mjs";
import { installExample, startNode } from "./support/invite-app.mjs";

const KEYS = 400;
const SENDERS = 8;
const PROCESSES = 3;
/** The load's bound: every key must have its definite answer by then. */
const LOAD_MS = 40_000;

let tmpDir;
let dir;
let cluster;
let pool;
let receiver;
let env;
/** The app processes, by slot; a killed one is replaced in its slot. */
const apps = [];

before(async () => {
  tmpDir = mkdtempSync(path.join(tmpdir(), "invite-kill9-"));
  dir = installExample(tmpDir);
  cluster = await startCluster();
  cluster.createDatabase("invites");
  const DATABASE_URL = cluster.url("invites");
  pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  receiver = await startNode(dir, "receiver.mjs", { DATABASE_URL });
  env = { DATABASE_URL, MAIL_URL: `${receiver.url}/messages` };
  for (let slot = 0; slot < PROCESSES; slot += 1) apps[slot] = await startNode(dir, "app.mjs", env);
}, { timeout: 180_000 });

after(async () => {
  for (const app of apps) await app?.stop();
  await receiver?.stop();
  await pool?.end();
  cluster?.stop();
  if (tmpDir) rmSync(tmpDir, { recursive: true, force: true });
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const count = async (text) => Number((await pool.query(text)).rows[0].n);

/** Sends the invite with `key` to a random live process until it answers 201; resolves to the attempts. */
async function untilDefinite(key, email, deadline) {
  for (let attempt = 1; ; attempt += 1) {
    if (Date.now() > deadline) throw new Error(`no definite answer for ${email} in time`);
    const app = apps[Math.floor(Math.random() * apps.length)];
    try {
      const r = await fetch(`${app.url}/api/invites`, {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": key },
        body: JSON.stringify({ email }),
        signal: AbortSignal.timeout(3000),
      });
      const body = await r.text();
      if (r.status === 201) {
        assert.equal(JSON.parse(body).email, email);
        return attempt;
      }
      // 409 (in flight: a process holds the key) or a 5xx: try again.
      assert.ok(r.status === 409 || r.status >= 500, `an answer that is neither definite nor retryable: ${r.status} ${body}`);
    } catch (error) {
      if (error instanceof assert.AssertionError) throw error;
      // The process died under the request (or was dead already): try again.
    }
    await sleep(20 + Math.random() * 80);
  }
}

describe("kill -9 of the invite app's processes under a keyed load (PostgreSQL, 3 processes)", () => {
  it("0 duplicate invites or emails, 0 lost", { timeout: 120_000 }, async () => {
    await fetch(`${receiver.url}/faults`, { method: "PUT", headers: { "content-type": "application/json" }, body: '{"fail":0.2,"delayMs":150}' });
    const deadline = Date.now() + LOAD_MS;
    const keys = Array.from({ length: KEYS }, (_, i) => ({ key: randomUUID(), email: `u${i}@example.com` }));
    let next = 0;
    let attempts = 0;
    let done = false;
    const senders = Array.from({ length: SENDERS }, async () => {
      for (let i = next++; i < keys.length; i = next++) {
        const tries = await untilDefinite(keys[i].key, keys[i].email, deadline);
        attempts += tries;
        // Paced, so the load spans many kills.
        await sleep(100 + Math.random() * 100);
      }
    });
    let kills = 0;
    const killer = (async () => {
      while (!done) {
        await sleep(150 + Math.random() * 500);
        if (done) break;
        const slot = Math.floor(Math.random() * apps.length);
        const victim = apps[slot];
        victim.kill("SIGKILL");
        const { signal } = await victim.exited;
        assert.equal(signal, "SIGKILL");
        kills += 1;
        apps[slot] = await startNode(dir, "app.mjs", env);
      }
    })();
    try {
      await Promise.all(senders);
    } finally {
      done = true;
      await killer;
    }
    // Every email delivered: the live processes' workers retake what the killed ones had claimed.
    await fetch(`${receiver.url}/faults`, { method: "PUT", headers: { "content-type": "application/json" }, body: '{"fail":0}' });
    const drained = Date.now() + 30_000;
    while ((await count("SELECT count(*) AS n FROM outbox_messages WHERE delivered_at IS NULL")) > 0 && Date.now() < drained) await sleep(100);

    const rows = await count("SELECT count(*) AS n FROM invites");
    const emails = await count("SELECT count(*) AS n FROM mails");
    const invitedTwice = await count("SELECT count(*) AS n FROM (SELECT email FROM invites GROUP BY email HAVING count(*) > 1) d");
    const mailedTwice = await count("SELECT count(*) AS n FROM (SELECT recipient FROM mails GROUP BY recipient HAVING count(*) > 1) d");
    const lostInvites = KEYS - (await count("SELECT count(DISTINCT email) AS n FROM invites"));
    const lostEmails = await count("SELECT count(*) AS n FROM invites i WHERE NOT EXISTS (SELECT 1 FROM mails m WHERE m.recipient = i.email)");
    const messages = await count("SELECT count(*) AS n FROM outbox_messages");
    const { duplicates } = await (await fetch(`${receiver.url}/messages`)).json();
    console.log(
      `kill -9 (PostgreSQL, ${PROCESSES} processes): keys ${KEYS}, requests ${attempts}, kills ${kills}, invite rows ${rows}, ` +
        `outbox messages ${messages}, emails ${emails}, re-deliveries refused by the inbox ${duplicates}; duplicates: invites ${invitedTwice}, emails ${mailedTwice}; lost: invites ${lostInvites}, emails ${lostEmails}`,
    );
    assert.ok(kills >= 5, `the run killed processes: ${kills}`);
    assert.equal(invitedTwice, 0);
    assert.equal(mailedTwice, 0);
    assert.equal(lostInvites, 0);
    assert.equal(lostEmails, 0);
    assert.equal(rows, KEYS);
    assert.equal(emails, KEYS);
    assert.equal(messages, KEYS, "one outbox message per invite");
  });
});
