// Atomic phases on PGlite on disk: the shared scenarios in this process, then kill -9 of an app process
// (the owner of its own PGlite folder) between the provider's charge and the next phase, and the completer
// of the next process on that folder finishing the key with the same derived key.
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { PGlite } from "@electric-sql/pglite";
import { atomicPhases } from "idempotent-endpoint";

import { startNode } from "./support/invite-app.mjs";
import { killAfterCharge, phasesScenarios } from "./support/phases-scenarios.mjs";
import { startProvider } from "./support/provider.mjs";

const SUPPORT = path.join(path.dirname(fileURLToPath(import.meta.url)), "support");

let dir;
let db;
let provider;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "node-phases-pglite-"));
  // A new PGlite folder takes seconds to create (more than an app process is given to start): made once
  // here, closed, and copied for this process.
  await (await PGlite.create(path.join(dir, "app"))).close();
  cpSync(path.join(dir, "app"), path.join(dir, "in-process"), { recursive: true });
  db = await PGlite.create(path.join(dir, "in-process"));
  provider = await startProvider();
});

after(async () => {
  await provider?.close();
  await db?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("atomic phases on PGlite", () => {
  phasesScenarios(() => ({ database: db, provider, rows: async (text, params) => (await db.query(text, params)).rows }));

  it("install adds the traceparent column to a key table made before it; a new row keeps none outside a trace", async () => {
    const old = await PGlite.create();
    try {
      await old.exec(`CREATE TABLE idempotency_records (
        scope TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL, status_code INTEGER NULL,
        response_headers TEXT NULL, response_body TEXT NULL, created_at BIGINT NOT NULL,
        recovery_point TEXT NOT NULL DEFAULT 'finished', row_id TEXT NULL, lock_token TEXT NULL,
        locked_until BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (scope, key))`);
      const phases = atomicPhases({ database: old, leaseMs: 1 });
      await phases.install();
      await phases.install();
      const begun = await phases.begin({ method: "POST", path: "/pay", keyHeader: ["old-table-key"], body: new TextEncoder().encode("{}") });
      assert.equal(begun.held?.traceparent, undefined);
      await new Promise((resolve) => setTimeout(resolve, 20));
      const [held] = await phases.unfinished(10);
      assert.equal(held?.key, "old-table-key");
      assert.equal(held.traceparent, undefined);
      const { rows } = await old.query("SELECT traceparent FROM idempotency_records WHERE key = 'old-table-key'");
      assert.deepEqual(rows, [{ traceparent: null }]);
    } finally {
      await old.close();
    }
  });

  it("kill -9 after the provider's charge: the completer finishes the key with the same derived key, one charge", async () => {
    const folder = path.join(dir, "app");
    await killAfterCharge({
      provider,
      startApp: (env) => startNode(SUPPORT, "phases-app.mjs", { ...env, PGLITE_DIR: folder }),
      // Read with no app running: the folder has one owner at a time.
      readPoint: async (key) => {
        const owner = await PGlite.create(folder);
        try {
          return (await owner.query("SELECT recovery_point FROM idempotency_records WHERE key = $1", [key])).rows[0]?.recovery_point;
        } finally {
          await owner.close();
        }
      },
    });
  });
});
