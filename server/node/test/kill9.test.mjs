// kill -9 under load: the processes of examples/invite-express (installed from the packed package) killed
// with SIGKILL at random moments and restarted, while a keyed load sends every invite again, to any live
// process, until it gets a definite answer (201). The mail receiver fails a share of deliveries, so the
// outbox retries too, and holds each answer 150 ms after its commit, so a kill often lands between an email
// taken and its outbox mark: that email is sent again, and the inbox must refuse it. Then: one invite row
// and one email per key, none lost, none twice. Each run prints one line of counts. Two runs: three
// processes on one real PostgreSQL (400 keys), and one process on PGlite (a folder it owns, the receiver on
// another; 60 keys, as its one process serves a few requests a second). IF_KILL_KEYS=N runs N keys on each.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";

import { startCluster } from "../../../tests/fault/pg-cluster.mjs";
import { installExample, startNode } from "./support/invite-app.mjs";

const SENDERS = 8;
const MIN_KILLS = 5;
/** A bigger run's keys (each store), from IF_KILL_KEYS; unset: the sizes below, which fit CI. */
const KEYS = process.env.IF_KILL_KEYS ? Number(process.env.IF_KILL_KEYS) : undefined;
if (KEYS !== undefined && !(Number.isInteger(KEYS) && KEYS > 0)) throw new Error(`IF_KILL_KEYS must be a whole number above 0, not ${process.env.IF_KILL_KEYS}`);

let tmpDir;
let dir;
let cluster;

before(async () => {
  tmpDir = mkdtempSync(path.join(tmpdir(), "invite-kill9-"));
  dir = installExample(tmpDir);
  cluster = await startCluster();
}, { timeout: 180_000 });

after(async () => {
  cluster?.stop();
  if (tmpDir) rmSync(tmpDir, { recursive: true, force: true });
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const json = async (url, init) => (await fetch(url, init)).json();
const setFaults = (receiver, faults) =>
  fetch(`${receiver.url}/faults`, { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify(faults) });

/**
 * Sends the invite with `key` to a random live process until it answers 201, counting into `tally` its
 * attempts, the 409s, the 5xx answers and the attempts with no answer (connection refused or reset, or
 * none in 3 s).
 */
async function untilDefinite(apps, key, email, deadline, tally) {
  for (;;) {
    if (Date.now() > deadline) throw new Error(`no definite answer for ${email} in time`);
    tally.attempts += 1;
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
        return;
      }
      // 409 (in flight: a process holds the key) or a 5xx: try again.
      assert.ok(r.status === 409 || r.status >= 500, `an answer that is neither definite nor retryable: ${r.status} ${body}`);
      if (r.status === 409) tally.inFlight += 1;
      else tally.serverErrors += 1;
    } catch (error) {
      if (error instanceof assert.AssertionError) throw error;
      // The process died under the request (or was dead already): try again.
      tally.connectionErrors += 1;
    }
    await sleep(20 + Math.random() * 80);
  }
}

/**
 * One run: `processes` app processes with `appEnv`, a receiver with `receiverEnv`, `keys` keys within
 * `loadMs`, each sender pausing `paceMs` ([least, most]) between keys; a kill every `killEveryMs` ([least,
 * most], at random) until the load is done and at least MIN_KILLS were made; then waits for the outbox to
 * drain and counts over HTTP.
 */
async function killRun({ label, processes, keys: keyCount, loadMs, paceMs, killEveryMs, appEnv, receiverEnv }) {
  const receiver = await startNode(dir, "receiver.mjs", receiverEnv);
  const env = { ...appEnv, MAIL_URL: `${receiver.url}/messages` };
  const apps = [];
  try {
    for (let slot = 0; slot < processes; slot += 1) apps[slot] = await startNode(dir, "app.mjs", env);
    await setFaults(receiver, { fail: 0.2, delayMs: 150 });
    const deadline = Date.now() + loadMs;
    const keys = Array.from({ length: keyCount }, (_, i) => ({ key: randomUUID(), email: `u${i}@example.com` }));
    let next = 0;
    const tally = { attempts: 0, inFlight: 0, serverErrors: 0, connectionErrors: 0 };
    let done = false;
    const started = Date.now();
    const senders = Array.from({ length: SENDERS }, async () => {
      for (let i = next++; i < keys.length; i = next++) {
        await untilDefinite(apps, keys[i].key, keys[i].email, deadline, tally);
        // Paced, so the load spans many kills.
        await sleep(paceMs[0] + Math.random() * (paceMs[1] - paceMs[0]));
      }
    });
    let kills = 0;
    const killer = (async () => {
      // At least MIN_KILLS, also after the load is done (the outbox is still delivering then).
      while (!done || kills < MIN_KILLS) {
        await sleep(killEveryMs[0] + Math.random() * (killEveryMs[1] - killEveryMs[0]));
        if (done && kills >= MIN_KILLS) break;
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
    await setFaults(receiver, { fail: 0 });
    const drained = Date.now() + 30_000;
    while ((await json(`${apps[0].url}/api/outbox`)).undelivered > 0 && Date.now() < drained) await sleep(100);

    const { invites } = await json(`${apps[0].url}/api/invites`);
    const { messages, duplicates } = await json(`${receiver.url}/messages`);
    const twice = (list) => list.length - new Set(list).size;
    const invited = new Set(invites.map((i) => i.email));
    const mailed = new Set(messages.map((m) => m.to));
    const counts = {
      keys: keyCount,
      kills,
      attempts: tally.attempts,
      connectionErrors: tally.connectionErrors,
      answered409: tally.inFlight,
      answered5xx: tally.serverErrors,
      inviteRows: invites.length,
      emails: messages.length,
      redeliveriesRefused: duplicates,
      duplicateInvites: twice(invites.map((i) => i.email)),
      duplicateEmails: twice(messages.map((m) => m.to)),
      lostInvites: keys.filter((k) => !invited.has(k.email)).length,
      lostEmails: keys.filter((k) => !mailed.has(k.email)).length,
    };
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    console.log(`kill -9 (${label}): ${Object.entries(counts).map(([k, v]) => `${k} ${v}`).join(", ")}, ${seconds} s`);
    assert.equal(counts.duplicateInvites, 0);
    assert.equal(counts.duplicateEmails, 0);
    assert.equal(counts.lostInvites, 0);
    assert.equal(counts.lostEmails, 0);
    assert.equal(counts.inviteRows, keyCount);
    assert.equal(counts.emails, keyCount);
  } finally {
    for (const app of apps) await app?.stop();
    await receiver.stop();
  }
}

// A load's deadline: `perKeyMs` a key, at least `leastMs` (a deadline, not a pace: runs end well before it).
const budget = (keys, perKeyMs, leastMs) => Math.max(leastMs, keys * perKeyMs);
const PG_KEYS = KEYS ?? 400;
const PG_LOAD_MS = budget(PG_KEYS, 100, 40_000);
const PGLITE_KEYS = KEYS ?? 60;
const PGLITE_LOAD_MS = budget(PGLITE_KEYS, 1000, 60_000);

describe("kill -9 of the invite app's processes under a keyed load", () => {
  it("PostgreSQL, 3 processes: 0 duplicate invites or emails, 0 lost", { timeout: PG_LOAD_MS + 80_000 }, async () => {
    cluster.createDatabase("invites");
    const DATABASE_URL = cluster.url("invites");
    await killRun({ label: "PostgreSQL, 3 processes", processes: 3, keys: PG_KEYS, loadMs: PG_LOAD_MS, paceMs: [100, 200], killEveryMs: [150, 650], appEnv: { DATABASE_URL }, receiverEnv: { DATABASE_URL } });
  });

  it("PGlite, 1 process: 0 duplicate invites or emails, 0 lost", { timeout: PGLITE_LOAD_MS + 60_000 }, async () => {
    await killRun({
      label: "PGlite, 1 process",
      processes: 1,
      keys: PGLITE_KEYS,
      loadMs: PGLITE_LOAD_MS,
      paceMs: [1000, 2000],
      // Its one process takes seconds to open (and recover) PGlite and serves a few requests a second: it
      // must be up for a while between kills.
      killEveryMs: [2000, 4000],
      appEnv: { PGLITE_DIR: path.join(tmpDir, "app-data") },
      receiverEnv: { PGLITE_DIR: path.join(tmpDir, "mail-data") },
    });
  });
});
