// A payment route in atomic phases on Express 5, as an app writes it: `started -> charge_started` stores the
// payment, the provider is charged with the row's derived key, `charge_started -> charged` records the
// charge, `finished` stores the answer. `drive` resumes at any point, so the route and the completer run the
// same code. Run as a script (a process the kill -9 test kills), it reads PG_URL or PGLITE_DIR,
// PROVIDER_URL, LEASE_MS and COMPLETER from the environment and prints `on http://127.0.0.1:PORT`.
import { fileURLToPath } from "node:url";

import express from "express";
import { STARTED, atomicPhases, phasedHandler, phasesCompleter } from "idempotent-endpoint";

export const PAYMENTS = "CREATE TABLE IF NOT EXISTS payments (key_row_id TEXT PRIMARY KEY, amount INTEGER NOT NULL, charge_id TEXT NULL)";

/** The app on `database` (a pg Pool or a PGlite), listening on 127.0.0.1; `completer` runs one too. */
export async function startPhasesApp({ database, providerUrl, leaseMs, completer = false }) {
  const phases = atomicPhases({ database, leaseMs });
  await phases.install();
  await phases.store.exec(PAYMENTS);

  const charge = async (amount, key) => {
    const r = await fetch(`${providerUrl}/charges`, { method: "POST", headers: { "content-type": "application/json", "idempotency-key": key }, body: JSON.stringify({ amount }) });
    if (!r.ok) throw new Error(`the provider answered ${r.status}`);
    return r.json();
  };

  async function drive(held, order) {
    if (held.point === STARTED) {
      await phases.advance(held, "charge_started", (tx) => tx.query("INSERT INTO payments (key_row_id, amount) VALUES ($1, $2)", [held.rowId, order?.amount]));
    }
    if (held.point === "charge_started") {
      const { rows } = await phases.store.query("SELECT amount FROM payments WHERE key_row_id = $1", [held.rowId]);
      const { id } = await charge(rows[0].amount, held.downstreamKey("charge"));
      await phases.advance(held, "charged", (tx) => tx.query("UPDATE payments SET charge_id = $1 WHERE key_row_id = $2", [id, held.rowId]));
    }
    return phases.finish(held, async (tx) => {
      const { rows } = await tx.query("SELECT amount, charge_id FROM payments WHERE key_row_id = $1", [held.rowId]);
      return { status: 201, body: { amount: rows[0].amount, charge: rows[0].charge_id } };
    });
  }

  const app = express();
  app.post("/api/payments", phasedHandler(phases, ({ held, json }) => drive(held, json)));

  const stop = new AbortController();
  const completing = completer ? phasesCompleter(phases, (held) => (held.point === STARTED ? phases.abandon(held) : drive(held)), { pollMs: 100, onError: (e) => console.error("completer:", e) }).run(stop.signal) : Promise.resolve();
  const server = await new Promise((resolve) => {
    const s = app.listen(0, "127.0.0.1", () => resolve(s));
  });
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    phases,
    drive,
    async close() {
      stop.abort();
      await completing;
      await new Promise((r) => server.close(r));
    },
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const env = process.env;
  let database;
  if (env.PG_URL) {
    const { default: pg } = await import("pg");
    database = new pg.Pool({ connectionString: env.PG_URL });
  } else {
    const { PGlite } = await import("@electric-sql/pglite");
    database = await PGlite.create(env.PGLITE_DIR);
  }
  const app = await startPhasesApp({ database, providerUrl: env.PROVIDER_URL, leaseMs: Number(env.LEASE_MS), completer: env.COMPLETER === "1" });
  console.log(`on ${app.url}`);
}
