// The outbox and inbox over node-postgres on a real PostgreSQL (a throwaway cluster this test starts): the
// shared scenarios, two workers on one outbox (each message delivered once), and concurrent deliveries of
// one message id to the inbox (the work done once).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import pg from "pg";
import { enqueue, installInbox, installOutbox, newMessage, outboxWorker, pgStore, receiveMessage } from "idempotent-endpoint";

import { startCluster } from "../../../tests/fault/pg-cluster.mjs";
import { MAILS, messageScenarios } from "./support/messages.mjs";

let cluster;
let pool;
let store;

before(async () => {
  cluster = await startCluster();
  cluster.createDatabase("node_messages");
  pool = new pg.Pool({ connectionString: cluster.url("node_messages"), max: 20 });
  store = pgStore(pool);
  await installOutbox(pool);
  await installOutbox(pool); // twice: safe at every start
  await installInbox(pool);
  await pool.query(MAILS);
});

after(async () => {
  await pool?.end();
  cluster?.stop();
});

describe("outbox and inbox on PostgreSQL", () => {
  messageScenarios(() => ({ store, db: pool }));

  it("two workers (two pools, as two processes would) drain one outbox: each message delivered once", async () => {
    await pool.query("DELETE FROM outbox_messages");
    const n = 200;
    await store.transaction(async (_q, tx) => {
      for (let i = 0; i < n; i += 1) await enqueue(tx, newMessage("invite-email", { i }));
      return { commit: true, value: undefined };
    });
    const other = new pg.Pool({ connectionString: cluster.url("node_messages"), max: 5 });
    const seen = new Map();
    const byWorker = [0, 0];
    const deliver = (w) => async (m) => {
      await new Promise((r) => setTimeout(r, 2));
      seen.set(m.id, (seen.get(m.id) ?? 0) + 1);
      byWorker[w] += 1;
    };
    const workers = [outboxWorker(pool, deliver(0), { batch: 10, pollMs: 10 }), outboxWorker(other, deliver(1), { batch: 10, pollMs: 10 })];
    const stop = new AbortController();
    const running = workers.map((w) => w.run(stop.signal));
    const deadline = Date.now() + 20_000;
    const left = async () => Number((await pool.query("SELECT count(*) AS n FROM outbox_messages WHERE delivered_at IS NULL")).rows[0].n);
    while ((await left()) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    stop.abort();
    await Promise.all(running);
    await other.end();
    assert.equal(await left(), 0);
    assert.equal(seen.size, n);
    assert.deepEqual([...new Set(seen.values())], [1], "no message was delivered twice");
    assert.ok(byWorker[0] > 0 && byWorker[1] > 0, `both workers delivered: ${byWorker}`);
  });

  it("10 concurrent deliveries of one message id: the work runs once, every other delivery gets its answer", async () => {
    await pool.query("DELETE FROM inbox_messages");
    await pool.query("DELETE FROM mails");
    const work = async (tx) => {
      await tx.query("INSERT INTO mails (message_id, address) VALUES ('m-c', 'a@example.com')");
      await new Promise((r) => setTimeout(r, 100)); // the others reach the insert while this is uncommitted
      return { status: 202, body: { sent: true } };
    };
    const results = await Promise.all(Array.from({ length: 10 }, () => receiveMessage(pool, "invites", "m-c", work)));
    assert.equal(results.filter((r) => !r.duplicate).length, 1);
    assert.ok(results.every((r) => r.answer.status === 202 && r.answer.body === '{"sent":true}'));
    assert.equal(Number((await pool.query("SELECT count(*) AS n FROM mails")).rows[0].n), 1);
  });
});
