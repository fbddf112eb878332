// Atomic phases over node-postgres on a real PostgreSQL (a throwaway cluster this test starts): the shared
// scenarios in this process, then kill -9 of an app process between the provider's charge and the next
// phase, and the completer of another process finishing the key with the same derived key; and a key row
// another transaction holds, which the phases give up waiting for.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";

import pg from "pg";
import { KeyBusyError, atomicPhases, constants } from "idempotent-endpoint";

import { startCluster } from "../../../tests/fault/pg-cluster.mjs";
import { startNode } from "./support/invite-app.mjs";
import { killAfterCharge, phasesScenarios } from "./support/phases-scenarios.mjs";
import { startProvider } from "./support/provider.mjs";

const SUPPORT = path.join(path.dirname(fileURLToPath(import.meta.url)), "support");

let cluster;
let pool;
let provider;

before(async () => {
  cluster = await startCluster();
  cluster.createDatabase("node_phases");
  pool = new pg.Pool({ connectionString: cluster.url("node_phases"), max: 10 });
  provider = await startProvider();
});

after(async () => {
  await provider?.close();
  await pool?.end();
  cluster?.stop();
});

describe("atomic phases on PostgreSQL", () => {
  phasesScenarios(() => ({ database: pool, provider, rows: async (text, params) => (await pool.query(text, params)).rows }));

  it("kill -9 after the provider's charge: the completer finishes the key with the same derived key, one charge", async () => {
    await killAfterCharge({
      provider,
      startApp: (env) => startNode(SUPPORT, "phases-app.mjs", { ...env, PG_URL: cluster.url("node_phases") }),
      readPoint: async (key) => (await pool.query("SELECT recovery_point FROM idempotency_records WHERE key = $1", [key])).rows[0]?.recovery_point,
    });
  });
});

describe("a key row held by another transaction", () => {
  it("begin, advance and finish give up after the key lock timeout as KeyBusyError, write nothing, and go on once it is free", { timeout: 30_000 }, async () => {
    const phases = atomicPhases({ database: pool, leaseMs: 60_000 });
    await phases.install();
    const KEY = randomUUID();
    const request = (key) => ({ method: "POST", path: "/api/payments", keyHeader: [key], body: new TextEncoder().encode("{}") });
    const begun = await phases.begin(request(KEY));
    assert.ok(begun.held, `a new key is held: ${JSON.stringify(begun)}`);
    const holder = await pool.connect();
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT 1 FROM idempotency_records WHERE key = $1 FOR UPDATE", [KEY]);
      const limit = Number.parseInt(constants.keyLockTimeout, 10);
      for (const step of [
        () => phases.begin(request(KEY)),
        () => phases.advance(begun.held, "charge_started"),
        () => phases.finish(begun.held, async () => ({ status: 201, body: { ok: true } })),
      ]) {
        const started = Date.now();
        await assert.rejects(step(), (error) => error instanceof KeyBusyError);
        assert.ok(Date.now() - started >= limit * 0.9, `gave up after the lock timeout (${Date.now() - started} ms)`);
      }
    } finally {
      await holder.query("ROLLBACK");
      holder.release();
    }
    const row = (await pool.query("SELECT recovery_point FROM idempotency_records WHERE key = $1", [KEY])).rows[0];
    assert.equal(row.recovery_point, begun.held.point, "nothing was written while the row was held");
    await phases.advance(begun.held, "charge_started");
    const answer = await phases.finish(begun.held, async () => ({ status: 201, body: { ok: true } }));
    assert.equal(answer.status, 201);
  });
});
