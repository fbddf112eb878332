// The atomic phases' scenarios, run on PostgreSQL and on PGlite: `env()` gives `{ database, rows(text,
// params), provider }` (a pg Pool or a PGlite, a query for checks, the provider of ./provider.mjs).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { it } from "node:test";

import { CoreError, FINISHED, Held, LeaseLostError, STARTED, atomicPhases } from "idempotent-endpoint";

import { startPhasesApp } from "./phases-app.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const request = (key, body) => ({ method: "POST", path: "/pay", keyHeader: [key], body: new TextEncoder().encode(body) });
const pay = (url, key, body) =>
  fetch(`${url}/api/payments`, { method: "POST", headers: { "content-type": "application/json", "idempotency-key": key }, body: JSON.stringify(body) });

export function phasesScenarios(env) {
  it("phases advance over HTTP; a repeat during the provider call is 409 in flight; after finish, a replay", async () => {
    const { database, rows, provider } = env();
    const app = await startPhasesApp({ database, providerUrl: provider.url, leaseMs: 5000 });
    try {
      const key = `pay-${randomUUID()}`;
      let midway;
      provider.onCharge = async () => {
        // Between two phases: the row is at charge_started, no transaction open, the key in flight.
        const [row] = await rows("SELECT recovery_point FROM idempotency_records WHERE key = $1", [key]);
        const repeat = await pay(app.url, key, { amount: 700 });
        midway = { point: row.recovery_point, status: repeat.status, retryAfter: repeat.headers.has("retry-after") };
      };
      const first = await pay(app.url, key, { amount: 700 });
      provider.onCharge = undefined;
      assert.equal(first.status, 201);
      const answer = await first.json();
      assert.deepEqual(midway, { point: "charge_started", status: 409, retryAfter: true });
      const [row] = await rows("SELECT recovery_point, row_id FROM idempotency_records WHERE key = $1", [key]);
      assert.equal(row.recovery_point, FINISHED);
      const downstream = new Held("public", key, FINISHED, row.row_id).downstreamKey("charge");
      assert.notEqual(downstream, key, "the provider never sees the client's key");
      assert.deepEqual(answer, { amount: 700, charge: provider.charges.get(downstream)?.id });

      const again = await pay(app.url, key, { amount: 700 });
      assert.equal(again.status, 201);
      assert.equal(again.headers.get("idempotent-replayed"), "true");
      assert.deepEqual(await again.json(), answer);
      assert.equal(provider.charges.get(downstream).calls, 1, "a replay calls nobody");
      assert.equal((await pay(app.url, key, { amount: 701 })).status, 422);
      assert.equal((await pay(app.url, "", { amount: 1 })).status, 400);
    } finally {
      provider.onCharge = undefined;
      await app.close();
    }
  });

  it("a provider outage answers 500 and releases the key: the retry resumes at charge_started at once and charges once", async () => {
    const { database, rows, provider } = env();
    const app = await startPhasesApp({ database, providerUrl: provider.url, leaseMs: 60_000 });
    try {
      const key = `outage-${randomUUID()}`;
      provider.outages = 1;
      const failed = await pay(app.url, key, { amount: 40 });
      assert.equal(failed.status, 500);
      const [row] = await rows("SELECT recovery_point, locked_until FROM idempotency_records WHERE key = $1", [key]);
      assert.deepEqual([row.recovery_point, Number(row.locked_until)], ["charge_started", 0], "kept at its point, released");
      const retry = await pay(app.url, key, { amount: 40 });
      assert.equal(retry.status, 201, "taken over at once, not after the minute's lease");
      const downstream = new Held("public", key, FINISHED, (await rows("SELECT row_id FROM idempotency_records WHERE key = $1", [key]))[0].row_id).downstreamKey("charge");
      assert.deepEqual(await retry.json(), { amount: 40, charge: provider.charges.get(downstream)?.id });
      assert.equal(provider.charges.get(downstream).calls, 1);
    } finally {
      provider.outages = 0;
      await app.close();
    }
  });

  it("a holder whose lease ran out is taken over at its point with the same downstream key; its steps write nothing", async () => {
    const { database, rows } = env();
    const phases = atomicPhases({ database, leaseMs: 150 });
    const req = request(`phase-${randomUUID()}`, '{"amount":5}');
    const begun = await phases.begin(req);
    assert.ok(begun.held, "a new key is held");
    const first = begun.held;
    assert.equal(first.point, STARTED);
    const charge = first.downstreamKey("charge");
    assert.match(charge, /^[0-9a-f]{64}$/);
    assert.notEqual(charge, first.downstreamKey("email"));
    assert.equal((await phases.begin(req)).outcome, "in_flight", "while the lease lives");
    await phases.advance(first, "charge_started");
    assert.equal(first.point, "charge_started");
    await assert.rejects(phases.advance(first, FINISHED), CoreError, "finished is reached with finish");

    await sleep(250);
    const second = (await phases.begin(req)).held;
    assert.ok(second, "taken over once the lease ran out");
    assert.equal(second.point, "charge_started");
    assert.equal(second.downstreamKey("charge"), charge);
    await assert.rejects(phases.advance(first, "charged", async () => assert.fail("a stale holder's work never runs")), LeaseLostError);
    await assert.rejects(phases.finish(first, async () => ({ status: 201 })), LeaseLostError);
    assert.equal((await phases.begin(request(req.keyHeader[0], '{"amount":6}'))).outcome, "mismatch");

    const answer = await phases.finish(second, async () => ({ status: 201, body: { paid: true } }));
    assert.equal(answer.status, 201);
    const replay = await phases.begin(req);
    assert.equal(replay.outcome, "replay");
    assert.equal(replay.answer.body, answer.body);
    const [row] = await rows("SELECT recovery_point, lock_token FROM idempotency_records WHERE key = $1", [req.keyHeader[0]]);
    assert.deepEqual(row, { recovery_point: FINISHED, lock_token: null });
  });

  it("the completer takes over what was released or ran out, abandons a key still at started, and leaves a live lease", async () => {
    const { database } = env();
    const phases = atomicPhases({ database, leaseMs: 1000 });
    const live = atomicPhases({ database, leaseMs: 60_000 });
    const [a, b, c] = [`done-${randomUUID()}`, `left-${randomUUID()}`, `live-${randomUUID()}`];
    const released = (await phases.begin(request(a, "{}"))).held;
    await phases.advance(released, "charge_started");
    await phases.release(released);
    const left = (await phases.begin(request(b, "{}"))).held;
    const liveHeld = (await live.begin(request(c, "{}"))).held;
    const keysOf = (held) => held.map((h) => h.key).sort();
    const atOnce = keysOf(await phases.unfinished(10));
    assert.ok(atOnce.includes(a) && !atOnce.includes(b), `only the released one, at once: ${atOnce}`);
    await sleep(1200);
    const later = await phases.unfinished(10);
    assert.ok(keysOf(later).includes(b), "one whose lease ran out");
    assert.ok(!keysOf(later).includes(c), "a live lease is left alone");
    const fromLeft = later.find((h) => h.key === b);
    assert.equal(fromLeft.rowId, left.rowId);
    await phases.abandon(fromLeft);
    await assert.rejects(phases.abandon(left), LeaseLostError, "a holder that lost the row abandons nothing");
    const anew = (await phases.begin(request(b, "{}"))).held;
    assert.ok(anew && anew.rowId !== left.rowId, "an abandoned key is new again");
    await phases.abandon(anew);
    await live.abandon(liveHeld);
  });
}

/**
 * kill -9 between the provider's charge and the next phase: `startApp(env)` starts the app's process,
 * `readPoint(key)` reads the key row's recovery point with no app running. The first process is killed
 * while the provider answers its charge; a second one's completer finishes the key with the same derived
 * key, so the provider made one charge; the client's retry then gets the answer replayed.
 */
export async function killAfterCharge({ provider, startApp, readPoint }) {
  const lease = { LEASE_MS: "1500", PROVIDER_URL: provider.url };
  const first = await startApp(lease);
  const chargesBefore = provider.charges.size;
  const key = `kill-${randomUUID()}`;
  let chargedKey;
  provider.onCharge = async (downstream) => {
    chargedKey = downstream;
    first.kill("SIGKILL");
    await first.exited;
  };
  await assert.rejects(pay(first.url, key, { amount: 900 }), "the process died under the request");
  provider.onCharge = undefined;
  const { signal } = await first.exited;
  assert.equal(signal, "SIGKILL");
  assert.equal(provider.charges.get(chargedKey)?.calls, 1, "the provider charged before the crash");
  assert.equal(await readPoint(key), "charge_started", "the crash left the key unfinished");

  const second = await startApp({ ...lease, COMPLETER: "1" });
  try {
    const deadline = Date.now() + 20_000;
    // The completer, once the crashed holder's lease ran out, is the only one to ask the provider again.
    while (provider.charges.get(chargedKey).calls < 2 && Date.now() < deadline) await sleep(50);
    let answer;
    while (Date.now() < deadline) {
      const r = await pay(second.url, key, { amount: 900 });
      if (r.status === 201) {
        answer = { replayed: r.headers.get("idempotent-replayed"), body: await r.json() };
        break;
      }
      assert.equal(r.status, 409, "in flight until the completer finishes");
      await sleep(100);
    }
    assert.ok(answer, `the completer finished the key in time:\n${second.output()}`);
    assert.deepEqual(answer, { replayed: "true", body: { amount: 900, charge: provider.charges.get(chargedKey).id } });
    assert.equal(provider.charges.size, chargesBefore + 1, "one charge");
    assert.equal(provider.charges.get(chargedKey).calls, 2, "asked again with the same derived key after the crash");
  } finally {
    await second.stop();
  }
  assert.equal(await readPoint(key), FINISHED);
}
