// The outbox and inbox scenarios, run on a real PostgreSQL (messages-pg.test.mjs) and on PGlite
// (messages-pglite.test.mjs): the same statements, the same answers.
import assert from "node:assert/strict";
import { it } from "node:test";

import { backlog, enqueue, newMessage, outboxWorker, receive, receiveMessage, sweepInbox, constants } from "idempotent-endpoint";

/** The receiver's own table: what the work of a first delivery writes. */
export const MAILS = "CREATE TABLE IF NOT EXISTS mails (message_id TEXT NOT NULL, address TEXT NOT NULL)";

/**
 * The scenarios. `env()` gives `{ store, db }`: the store (pgStore/pgliteStore) the worker and the inbox
 * run on, and `db` the raw database for assertions (`query(text, params)` → `{ rows }`).
 */
export function messageScenarios(env) {
  const count = async (text, params = []) => Number((await env().db.query(text, params)).rows[0].n);
  const undelivered = () => count("SELECT count(*) AS n FROM outbox_messages WHERE delivered_at IS NULL");
  const clear = async () => {
    await env().db.query("DELETE FROM outbox_messages");
    await env().db.query("DELETE FROM inbox_messages");
    await env().db.query("DELETE FROM mails");
  };

  it("a message enqueued in a transaction that commits is delivered once, its id sent; one rolled back never exists", async () => {
    await clear();
    const { store } = env();
    const kept = newMessage("invite-email", { to: "a@example.com" });
    const dropped = newMessage("invite-email", { to: "b@example.com" });
    await store.transaction(async (_q, tx) => {
      await enqueue(tx, kept);
      return { commit: true, value: undefined };
    });
    await assert.rejects(
      store.transaction(async (_q, tx) => {
        await enqueue(tx, dropped);
        throw new Error("the handler failed");
      }),
      /the handler failed/,
    );
    assert.match(kept.id, /^[0-9a-f]{32}$/);
    const b = await backlog(store);
    assert.equal(b.undelivered, 1);
    assert.ok(b.oldestAgeSecs !== undefined && b.oldestAgeSecs >= 0 && b.oldestAgeSecs < 5);
    const seen = [];
    const worker = outboxWorker(store, async (message, attempts) => {
      seen.push({ ...message, attempts });
    });
    assert.deepEqual(await worker.deliverOnce(), { claimed: 1, delivered: 1, failed: 0 });
    assert.deepEqual(seen, [{ ...kept, attempts: 1 }]);
    assert.deepEqual(JSON.parse(seen[0].payload), { to: "a@example.com" });
    assert.deepEqual(await worker.deliverOnce(), { claimed: 0, delivered: 0, failed: 0 });
    assert.deepEqual(await backlog(store), { undelivered: 0, oldestAgeSecs: undefined });
  });

  it("a message keeps a traceparent the app sets only when it is a valid W3C value, in the W3C form; other text is not stored", async () => {
    await clear();
    const { store } = env();
    const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const cases = [
      [` ${valid} `, valid],
      ["00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", null],
      ["00-00000000000000000000000000000000-00f067aa0ba902b7-01", null],
      [`${valid}\r\nx-injected: 1`, null],
      ["not a trace context", null],
    ];
    for (const [given] of cases) {
      const message = { ...newMessage("invite-email", { given }), traceparent: given };
      await store.transaction(async (_q, tx) => ({ commit: true, value: await enqueue(tx, message) }));
    }
    const { rows } = await env().db.query("SELECT payload, traceparent FROM outbox_messages");
    const stored = new Map(rows.map((row) => [JSON.parse(row.payload).given, row.traceparent]));
    for (const [given, expected] of cases) assert.equal(stored.get(given), expected, JSON.stringify(given));
    await clear();
  });

  it("a failed delivery is retried after the backoff, with the attempt counted; a slow one times out within a third of the lease", async () => {
    await clear();
    const { store } = env();
    const message = newMessage("invite-email", { to: "c@example.com" });
    await store.transaction(async (_q, tx) => ({ commit: true, value: await enqueue(tx, message) }));
    const errors = [];
    let fail = true;
    const attempts = [];
    const worker = outboxWorker(
      store,
      async (_m, n) => {
        attempts.push(n);
        if (fail) throw new Error("receiver down");
      },
      { baseDelayMs: 300, maxDelayMs: 300, onError: (e) => errors.push(e) },
    );
    assert.deepEqual(await worker.deliverOnce(), { claimed: 1, delivered: 0, failed: 1 });
    assert.equal(errors.length, 1);
    const row = (await env().db.query("SELECT next_attempt_at, claimed_until FROM outbox_messages WHERE id = $1", [message.id])).rows[0];
    assert.equal(Number(row.claimed_until), 0);
    const wait = Number(row.next_attempt_at) - Date.now();
    assert.ok(wait <= 300, `the retry waits at most the cap: ${wait} ms`);
    // Not due before its time (unless the jitter drew ~0).
    if (wait > 50) assert.equal((await worker.deliverOnce()).claimed, 0);
    await new Promise((r) => setTimeout(r, Math.max(0, wait) + 20));
    fail = false;
    assert.deepEqual(await worker.deliverOnce(), { claimed: 1, delivered: 1, failed: 0 });
    assert.deepEqual(attempts.slice(-1), [2]);

    const slow = newMessage("invite-email", { to: "d@example.com" });
    await store.transaction(async (_q, tx) => ({ commit: true, value: await enqueue(tx, slow) }));
    const hang = outboxWorker(store, () => new Promise(() => undefined), { leaseMs: 300, onError: () => undefined });
    const started = Date.now();
    assert.deepEqual(await hang.deliverOnce(), { claimed: 1, delivered: 0, failed: 1 });
    assert.ok(Date.now() - started < 250, "the pass ended within a third of the lease");
    assert.equal(await undelivered(), 1);
  });

  it("the retry delays are the client crate's full jitter: within [0, min(max, base·2^(n-1))], spread out", () => {
    const { store } = env();
    const worker = outboxWorker(store, async () => undefined, { baseDelayMs: 100, maxDelayMs: 1000 });
    for (const [attempts, top] of [[1, 100], [2, 200], [3, 400], [4, 800], [5, 1000], [40, 1000]]) {
      const draws = Array.from({ length: 200 }, () => worker.retryDelayMs(attempts));
      assert.ok(draws.every((d) => Number.isInteger(d) && d >= 0 && d <= top), `attempt ${attempts}: ${Math.max(...draws)} > ${top}`);
      assert.ok(Math.max(...draws) > top * 0.8 && Math.min(...draws) < top * 0.2, `attempt ${attempts} is jittered over its window`);
    }
    assert.equal(typeof constants.outbox.claim, "string");
    assert.match(constants.outbox.claim, /FOR UPDATE OF m SKIP LOCKED/);
  });

  it("messages with one ordering key are delivered one at a time, in order; a failing head holds the rest back", async () => {
    await clear();
    const { store } = env();
    const messages = [1, 2, 3].map((n) => newMessage("invite-email", { n }));
    for (const m of messages) await store.transaction(async (_q, tx) => ({ commit: true, value: await enqueue(tx, m, "alice") }));
    const order = [];
    let failFirst = true;
    const worker = outboxWorker(store, async (m) => {
      if (failFirst && m.id === messages[0].id) throw new Error("no");
      order.push(JSON.parse(m.payload).n);
    }, { baseDelayMs: 1, maxDelayMs: 1, onError: () => undefined });
    assert.deepEqual(await worker.deliverOnce(), { claimed: 1, delivered: 0, failed: 1 });
    failFirst = false;
    await new Promise((r) => setTimeout(r, 5));
    for (let i = 0; i < 3; i += 1) assert.equal((await worker.deliverOnce()).delivered, 1);
    assert.deepEqual(order, [1, 2, 3]);
  });

  it("a backlog is drained with a bounded number of deliveries in flight, each message once", async () => {
    await clear();
    const { store } = env();
    const n = 60;
    await store.transaction(async (_q, tx) => {
      for (let i = 0; i < n; i += 1) await enqueue(tx, newMessage("invite-email", { i }));
      return { commit: true, value: undefined };
    });
    let inFlight = 0;
    let most = 0;
    const seen = new Map();
    const worker = outboxWorker(store, async (m) => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      await new Promise((r) => setTimeout(r, 5));
      seen.set(m.id, (seen.get(m.id) ?? 0) + 1);
      inFlight -= 1;
    }, { concurrency: 4, batch: 25, pollMs: 20 });
    const stop = new AbortController();
    const running = worker.run(stop.signal);
    const deadline = Date.now() + 10_000;
    while ((await undelivered()) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    stop.abort();
    await running;
    assert.equal(await undelivered(), 0);
    assert.equal(seen.size, n);
    assert.ok([...seen.values()].every((c) => c === 1));
    assert.equal(most, 4, "deliveries ran 4 at a time, no more");
  });

  it("inbox: the first delivery does the work and records its answer; a re-delivery does nothing and answers the same", async () => {
    await clear();
    const { store } = env();
    const work = async (tx) => {
      await tx.query("INSERT INTO mails (message_id, address) VALUES ($1, $2)", ["m-1", "a@example.com"]);
      return { status: 202, body: { sent: "a@example.com" }, headers: { "x-mail": "1" } };
    };
    const first = await receiveMessage(store, "invites", "m-1", work);
    assert.equal(first.duplicate, false);
    assert.equal(first.answer.status, 202);
    assert.deepEqual(JSON.parse(first.answer.body), { sent: "a@example.com" });
    const again = await receiveMessage(store, "invites", "m-1", async () => assert.fail("a re-delivery must not do the work"));
    assert.equal(again.duplicate, true);
    assert.equal(again.answer.status, 202);
    assert.equal(again.answer.body, first.answer.body);
    assert.ok(again.answer.headers.some(([n, v]) => n === "idempotent-replayed" && v === "true"));
    assert.ok(again.answer.headers.some(([n, v]) => n === "x-mail" && v === "1"));
    assert.equal(await count("SELECT count(*) AS n FROM mails"), 1);
    // Ids are per source.
    assert.equal((await receiveMessage(store, "other", "m-1", async () => ({ status: 200 }))).duplicate, false);
  });

  it("inbox: a failing work leaves no record (rolled back to its savepoint, the caller's earlier writes kept); a re-delivery does the work", async () => {
    await clear();
    const { store } = env();
    await assert.rejects(
      store.transaction(async (_q, tx) => {
        await tx.query("INSERT INTO mails (message_id, address) VALUES ('before', 'x')");
        await assert.rejects(
          receive(tx, "invites", "m-2", async (t) => {
            await t.query("INSERT INTO mails (message_id, address) VALUES ('m-2', 'inside')");
            throw new Error("smtp down");
          }),
          /smtp down/,
        );
        // The transaction is usable again and keeps what was written before the savepoint.
        assert.equal(Number((await tx.query("SELECT count(*) AS n FROM mails")).rows[0].n), 1);
        throw new Error("roll back the test's transaction");
      }),
      /roll back/,
    );
    await store.transaction(async (_q, tx) => {
      await tx.query("INSERT INTO mails (message_id, address) VALUES ('before', 'x')");
      await assert.rejects(receive(tx, "invites", "m-2", async () => { throw new Error("smtp down"); }), /smtp down/);
      return { commit: true, value: undefined };
    });
    assert.equal(await count("SELECT count(*) AS n FROM mails"), 1, "the caller's write committed");
    assert.equal(await count("SELECT count(*) AS n FROM inbox_messages"), 0, "no record of the failed work");
    const retried = await receiveMessage(store, "invites", "m-2", async () => ({ status: 202, body: "ok" }));
    assert.equal(retried.duplicate, false);
    // An answer the library cannot store is refused and records nothing.
    await assert.rejects(receiveMessage(store, "invites", "m-3", async () => ({ status: 202, body: "x".repeat(constants.maxStoredBodyBytes + 1) })));
    assert.equal(await count("SELECT count(*) AS n FROM inbox_messages WHERE message_id = 'm-3'"), 0);
  });

  it("inbox: ids outside the library's bounds are refused before anything is written; the sweep deletes expired records", async () => {
    await clear();
    const { store } = env();
    await assert.rejects(receiveMessage(store, "", "m", async () => ({ status: 200 })), /source/);
    await assert.rejects(receiveMessage(store, "s", "x".repeat(256), async () => ({ status: 200 })), /message id/);
    assert.equal(await count("SELECT count(*) AS n FROM inbox_messages"), 0);
    await receiveMessage(store, "invites", "old", async () => ({ status: 200 }));
    await env().db.query("UPDATE inbox_messages SET received_at = received_at - 100");
    // Expired: a re-delivery counts as new, and the sweep deletes it.
    assert.equal((await receiveMessage(store, "invites", "old", async () => ({ status: 201 }), { retentionSecs: 50 })).duplicate, false);
    await env().db.query("UPDATE inbox_messages SET received_at = received_at - 100");
    assert.equal(await sweepInbox(store, { retentionSecs: 50 }), 1);
    assert.equal(await count("SELECT count(*) AS n FROM inbox_messages"), 0);
  });
}
