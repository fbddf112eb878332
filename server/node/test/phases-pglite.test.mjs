// Atomic phases on PGlite on disk: the shared scenarios in this process, then kill -9 of an app process
// (the owner of its own PGlite folder) between the provider's charge and the next phase, and the completer
// of the next process on that folder finishing the key with the same derived key.
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";

import { PGlite } from "@electric-sql/pglite";

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
