// Where a protected request's added time goes, without HTTP, on PostgreSQL: the unprotected order's
// transaction, then the same transaction with the key row's statements added one at a time (parameters made
// beforehand, so these rows are the database's and the driver's share), then `endpoint.run` (adding the
// wasm core's calls and the package's own code), and the wasm calls of one request alone. Rounds alternate
// the steps so drift hits each. For each step: p50 latency, the Node process's CPU per request, and the
// PostgreSQL backend's CPU per request (read from /proc on Linux; "-" elsewhere).
//
// One more row measures a design the endpoint does not use, as a floor for the database's share: the key row
// written once (the in-flight mark and a read of a live row with BEGIN, the whole row with its answer with
// COMMIT, both prepared) instead of claimed and then updated. It is not a safe protocol as it stands (a
// row committed between the read's snapshot and the mark is only caught by the final insert's conflict),
// so it bounds what rewriting the statements could gain.
//
//   IF_PG_BINDIR=/usr/lib/postgresql/15/bin node server/node/bench/breakdown.mjs [--requests N] [--rounds R]
//
// Needs the built package (node server/node/build.mjs) and PostgreSQL binaries (IF_PG_BINDIR or PATH).
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";

const require = createRequire(import.meta.url);
const ORDERS = "CREATE TABLE IF NOT EXISTS orders (id SERIAL PRIMARY KEY, sku TEXT NOT NULL)";
/** The floor row's opening statement: the mark, and a live row if there is one (no row: a fresh key). */
const ONCE_OPEN = `WITH mark AS MATERIALIZED (SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS held)
SELECT held, r.fingerprint, r.status_code, r.response_headers, r.response_body FROM mark
LEFT JOIN idempotency_records r ON held AND r.scope = $2 AND r.key = $3 AND r.created_at >= $4`;
/** The floor row's closing statement: the whole key row with its answer. */
const ONCE_CLOSE = `INSERT INTO idempotency_records (scope, key, fingerprint, created_at, status_code, response_headers, response_body)
VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (scope, key) DO NOTHING`;
const BODY = new TextEncoder().encode(JSON.stringify({ sku: "mug" }));
/** Clock ticks per second of /proc/<pid>/stat (USER_HZ, 100 on Linux). */
const TICKS = 100;

/** The CPU time (µs) the process `pid` has used, or undefined where /proc cannot tell. */
function cpuOf(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return ((Number(fields[11]) + Number(fields[12])) / TICKS) * 1e6;
  } catch {
    return undefined;
  }
}

async function main() {
  const { values } = parseArgs({ options: { requests: { type: "string", default: "1000" }, rounds: { type: "string", default: "6" } } });
  const requests = Number(values.requests);
  const rounds = Number(values.rounds);
  const { default: pg } = await import("pg");
  const { idempotentEndpoint } = await import("idempotent-endpoint");
  // The wasm core as the package calls it (its module is the package's, not an export).
  const core = require("../dist/core.js");
  // The package's batching, so the floor row's statements go in the round trips the endpoint's go in.
  const { canBatch, runBatch } = await import("../dist/batch.js");
  /** `statements` in one round trip once their names are prepared on `client` (as the store sends them), else one by one. */
  const together = async (client, statements) => {
    if (canBatch(client, statements)) return runBatch(client, statements);
    for (const s of statements) await client.query(s.name === undefined ? { text: s.text, values: s.values } : s);
  };
  const { startCluster } = await import("../../../tests/fault/pg-cluster.mjs");
  const cluster = await startCluster();
  cluster.createDatabase("breakdown");
  // One connection: every step runs on the backend whose CPU is read.
  const pool = new pg.Pool({ connectionString: cluster.url("breakdown"), max: 1 });
  const load = [loadavg()[0]];
  try {
    const endpoint = idempotentEndpoint({ database: pool });
    await endpoint.install();
    await pool.query(ORDERS);
    const backend = (await pool.query("SELECT pg_backend_pid() AS pid")).rows[0].pid;
    const { sql } = core.constants;
    const order = async (q) => ({ status: 201, body: { id: (await q.query("INSERT INTO orders (sku) VALUES ($1) RETURNING id", ["mug"])).rows[0].id } });
    const retention = core.constants.defaultRetentionSecs;
    /** The key row's statements of one fresh request, their parameters made as `endpoint.run` makes them. */
    const statements = () => {
      const key = randomUUID();
      const now = Math.floor(Date.now() / 1000);
      const fp = core.fingerprint("POST", "/protected", BODY);
      const claim = { text: sql.claimKey, params: [core.lockName("public", key), "public", key, fp, now, core.expiredBefore(now, retention)] };
      const answer = { text: sql.storeAnswer, params: [201, '[["content-type","application/json"]]', '{"id":1}', "public", key] };
      return { claim, answer };
    };
    let made = [];
    const next = () => made.pop() ?? statements();
    /** The wasm calls `endpoint.run` makes for one fresh request. */
    const wasmCalls = () => {
      const parsed = core.keyFromHeader([randomUUID()]);
      core.scopeError("public");
      core.fingerprint("POST", "/protected", BODY);
      core.lockName("public", parsed.key);
      core.expiredBefore(Math.floor(Date.now() / 1000), retention);
      core.freshAnswer(201, [["content-type", "application/json"]], '{"id":1}');
    };
    const steps = {
      "plain transaction (BEGIN, INSERT, COMMIT)": () => endpoint.store.transaction(async (q) => ({ commit: true, value: await order(q) })),
      "+ the key's claim (with BEGIN)": () => {
        const { claim } = next();
        return endpoint.store.transaction(async (q) => ({ commit: true, value: await order(q) }), claim);
      },
      "+ the answer stored (with COMMIT)": () => {
        const { claim, answer } = next();
        return endpoint.store.transaction(async (q) => ({ commit: true, value: await order(q), last: answer }), claim);
      },
      "floor: the key row written once instead (not the endpoint's protocol)": async () => {
        const key = randomUUID();
        const now = Math.floor(Date.now() / 1000);
        const fp = core.fingerprint("POST", "/protected", BODY);
        const client = await pool.connect();
        try {
          await together(client, [{ text: "BEGIN", values: [] }, { name: "floor_open", text: ONCE_OPEN, values: [core.lockName("public", key), "public", key, core.expiredBefore(now, retention)] }]);
          await order(client);
          const close = { name: "floor_close", text: ONCE_CLOSE, values: ["public", key, fp, now, 201, '[["content-type","application/json"]]', '{"id":1}'] };
          await together(client, [close, { text: "COMMIT", values: [] }]);
        } finally {
          client.release();
        }
      },
      "endpoint.run (all of it)": async () => {
        const { outcome } = await endpoint.run({ method: "POST", path: "/protected", keyHeader: [randomUUID()], body: BODY }, order);
        if (outcome !== "fresh") throw new Error(`endpoint.run: ${outcome}`);
      },
      "the wasm calls of one request alone": async () => wasmCalls(),
    };
    const got = Object.fromEntries(Object.keys(steps).map((name) => [name, { latencies: [], node: 0, backend: 0, n: 0 }]));
    for (const step of Object.values(steps)) for (let i = 0; i < 200; i++) await step();
    for (let r = 0; r < rounds; r++) {
      const names = Object.keys(steps);
      if (r % 2 === 1) names.reverse();
      for (const name of names) {
        // The statements' parameters are made before the round, outside its clock.
        made = Array.from({ length: requests }, statements);
        const g = got[name];
        const node = process.cpuUsage();
        const before = cpuOf(backend);
        for (let i = 0; i < requests; i++) {
          const started = performance.now();
          await steps[name]();
          g.latencies.push(performance.now() - started);
        }
        const used = process.cpuUsage(node);
        const after = cpuOf(backend);
        g.node += used.user + used.system;
        g.backend = before === undefined || after === undefined || g.backend === undefined ? undefined : g.backend + (after - before);
        g.n += requests;
      }
    }
    load.push(loadavg()[0]);
    console.log(`node ${process.version}, one connection, ${rounds} alternating rounds of ${requests} requests per step; load average ${load.map((l) => l.toFixed(1)).join(" -> ")}`);
    console.log("| step | p50 ms | Node CPU µs/request | PostgreSQL backend CPU µs/request |");
    console.log("|---|---:|---:|---:|");
    for (const [name, g] of Object.entries(got)) {
      const sorted = [...g.latencies].sort((a, b) => a - b);
      const backendCpu = g.backend === undefined ? "-" : (g.backend / g.n).toFixed(0);
      console.log(`| ${name} | ${sorted[Math.floor(sorted.length / 2)].toFixed(3)} | ${(g.node / g.n).toFixed(0)} | ${backendCpu} |`);
    }
  } finally {
    await pool.end();
    cluster.stop();
  }
}

await main();
