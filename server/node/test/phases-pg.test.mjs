// Atomic phases over node-postgres on a real PostgreSQL (a throwaway cluster this test starts): the shared
// scenarios in this process, then kill -9 of an app process between the provider's charge and the next
// phase, and the completer of another process finishing the key with the same derived key.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";

import pg from "pg";

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
