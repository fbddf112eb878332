// The endpoint over node-postgres on a real PostgreSQL (a throwaway cluster this test starts): the
// protocol scenarios, the sweep, and 50 concurrent same-key requests over 3 Node processes → one effect.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import pg from "pg";
import { idempotentEndpoint, pgStore } from "idempotent-endpoint";

import { startCluster } from "../../../tests/fault/pg-cluster.mjs";
import { keyed, ORDERS, orderHandler, scenarios } from "./support/scenarios.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
let cluster;
let pool;
let endpoint;
/** What the endpoint reported (a failure it answered 500 for). */
const reported = [];
let url;
const count = async (text, params) => (await pool.query(text, params)).rows[0].n;

before(async () => {
  cluster = await startCluster();
  cluster.createDatabase("node_half");
  url = cluster.url("node_half");
  pool = new pg.Pool({ connectionString: url, max: 20 });
  endpoint = idempotentEndpoint({ database: pool, onError: (e) => reported.push(e) });
  await endpoint.install();
  await pool.query(ORDERS);
});

after(async () => {
  await pool?.end();
  cluster?.stop();
});

describe("node-postgres on PostgreSQL", () => {
  scenarios(() => ({ endpoint, count, reported }));

  it("the key table is the Rust library's: its schema runs again as a no-op", async () => {
    await endpoint.install();
    const columns = (await pool.query("SELECT column_name FROM information_schema.columns WHERE table_name = 'idempotency_records' ORDER BY ordinal_position")).rows.map((r) => r.column_name);
    assert.deepEqual(columns.slice(0, 7), ["scope", "key", "fingerprint", "status_code", "response_headers", "response_body", "created_at"]);
  });

  it("the sweep deletes key rows past the retention, and only those", async () => {
    const short = idempotentEndpoint({ database: pool, scope: `sweep-${randomUUID()}`, retentionSecs: 1 });
    const key = randomUUID();
    await short.run({ method: "POST", path: "/x", keyHeader: [key], body: new Uint8Array() }, async () => ({ status: 204 }));
    await pool.query("UPDATE idempotency_records SET created_at = created_at - 10 WHERE key = $1", [key]);
    const fresh = randomUUID();
    await short.run({ method: "POST", path: "/x", keyHeader: [fresh], body: new Uint8Array() }, async () => ({ status: 204 }));
    assert.ok((await short.sweep()) >= 1);
    assert.equal(await count("SELECT count(*)::int AS n FROM idempotency_records WHERE key = $1", [key]), 0);
    assert.equal(await count("SELECT count(*)::int AS n FROM idempotency_records WHERE key = $1", [fresh]), 1);
  });

  it("a key past the retention is new again: its row is replaced, the handler runs, another body is no mismatch", async () => {
    const short = idempotentEndpoint({ database: pool, scope: `expire-${randomUUID()}`, retentionSecs: 60 });
    const key = randomUUID();
    const request = (text) => ({ method: "POST", path: "/x", keyHeader: [key], body: new TextEncoder().encode(text) });
    let ran = 0;
    const handler = async () => ({ status: 201, body: { n: ++ran } });
    assert.equal((await short.run(request("one"), handler)).outcome, "fresh");
    assert.equal((await short.run(request("two"), handler)).outcome, "mismatch");
    await pool.query("UPDATE idempotency_records SET created_at = created_at - 120 WHERE key = $1", [key]);
    const again = await short.run(request("two"), handler);
    assert.deepEqual([again.outcome, again.answer.body, ran], ["fresh", JSON.stringify({ n: 2 }), 2]);
    assert.equal((await short.run(request("two"), handler)).outcome, "replay");
    assert.equal(await count("SELECT count(*)::int AS n FROM idempotency_records WHERE key = $1", [key]), 1);
  });

  it("the endpoint's statements are prepared once per connection, and not at all with prepared: false", async () => {
    for (const prepared of [true, false]) {
      const one = new pg.Pool({ connectionString: url, max: 1 });
      try {
        const own = idempotentEndpoint({ database: pgStore(one, { prepared }), scope: `prepared-${randomUUID()}` });
        for (const key of [randomUUID(), randomUUID()]) {
          const done = await own.run({ method: "POST", path: "/x", keyHeader: [key], body: new Uint8Array() }, async () => ({ status: 204 }));
          assert.equal(done.outcome, "fresh");
        }
        const names = (await one.query("SELECT name FROM pg_prepared_statements ORDER BY name")).rows.map((r) => r.name);
        assert.deepEqual(names, prepared ? ["idempotent_endpoint_claimKey", "idempotent_endpoint_storeAnswer"] : [], `prepared: ${prepared}`);
      } finally {
        await one.end();
      }
    }
  });

  it("a new key takes three round trips: BEGIN with the claim, the handler's statement, the answer with COMMIT", async () => {
    for (const prepared of [true, false]) {
      const one = new pg.Pool({ connectionString: url, max: 1 });
      // Each client.query call is one round trip (one Sync), a batch included.
      let trips = 0;
      one.on("connect", (client) => {
        const query = client.query.bind(client);
        client.query = (...args) => {
          trips += 1;
          return query(...args);
        };
      });
      try {
        const own = idempotentEndpoint({ database: pgStore(one, { prepared }), scope: `trips-${randomUUID()}` });
        const counted = [];
        for (let i = 0; i < 3; i++) {
          const key = randomUUID();
          trips = 0;
          const done = await own.run(keyed(key), orderHandler(key));
          assert.equal(done.outcome, "fresh");
          assert.equal(await count("SELECT count(*)::int AS n FROM orders WHERE idempotency_key = $1", [key]), 1);
          counted.push(trips);
        }
        // The first request on a connection prepares the endpoint's statements, one at a time.
        assert.deepEqual(counted.slice(1), [3, 3], `prepared: ${prepared}, round trips per request: ${counted}`);
      } finally {
        await one.end();
      }
    }
  });

  it("a pool in node-postgres's pipeline mode (which takes no batch) runs the statements one by one", async () => {
    const piped = new pg.Pool({ connectionString: url, max: 1, pipeline: true });
    try {
      const own = idempotentEndpoint({ database: piped, scope: `pipeline-${randomUUID()}` });
      for (let i = 0; i < 2; i++) {
        const key = randomUUID();
        assert.equal((await own.run(keyed(key), orderHandler(key))).outcome, "fresh");
        assert.equal((await own.run(keyed(key), orderHandler(key))).outcome, "replay");
        assert.equal(await count("SELECT count(*)::int AS n FROM orders WHERE idempotency_key = $1", [key]), 1);
      }
    } finally {
      await piped.end();
    }
  });

  it("an answer that fails to store rolls back the handler's rows and the key row; the connection serves the next request", async () => {
    const scope = `answer-fails-${randomUUID()}`;
    const one = new pg.Pool({ connectionString: url, max: 1 });
    await pool.query(`CREATE OR REPLACE FUNCTION refuse_answer() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'answer refused'; END $$`);
    await pool.query(`CREATE TRIGGER refuse_answer BEFORE UPDATE ON idempotency_records FOR EACH ROW WHEN (NEW.scope = '${scope}' AND NEW.status_code = 299) EXECUTE FUNCTION refuse_answer()`);
    try {
      const own = idempotentEndpoint({ database: one, scope });
      for (let i = 0; i < 2; i++) {
        // Twice: the first request prepares the statements one at a time, the second batches the answer with COMMIT.
        const key = randomUUID();
        const handler = async (tx) => ({ ...(await orderHandler(key)(tx)), status: 299 });
        await assert.rejects(own.run(keyed(key), handler), /answer refused/);
        assert.equal(await count("SELECT count(*)::int AS n FROM orders WHERE idempotency_key = $1", [key]), 0);
        assert.equal(await count("SELECT count(*)::int AS n FROM idempotency_records WHERE key = $1", [key]), 0);
        const next = randomUUID();
        assert.equal((await own.run(keyed(next), orderHandler(next))).outcome, "fresh");
        assert.equal(await count("SELECT count(*)::int AS n FROM orders WHERE idempotency_key = $1", [next]), 1);
      }
    } finally {
      await pool.query("DROP TRIGGER refuse_answer ON idempotency_records");
      await one.end();
    }
  });

  it("50 concurrent requests with one key over 3 Node processes: one effect, every other answer a 409 or the replay", async () => {
    const key = randomUUID();
    const per = [17, 17, 16];
    const runs = per.map(
      (n) =>
        new Promise((resolve, reject) => {
          const child = spawn(process.execPath, [path.join(HERE, "support/same-key-worker.mjs"), url, key, String(n)], { stdio: ["ignore", "pipe", "inherit"] });
          let out = "";
          child.stdout.on("data", (d) => (out += d));
          child.on("error", reject);
          child.on("exit", (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`worker exited ${code}: ${out}`))));
        }),
    );
    const answers = (await Promise.all(runs)).flat();
    assert.equal(answers.length, 50);
    const fresh = answers.filter((a) => a.outcome === "fresh");
    assert.equal(fresh.length, 1, JSON.stringify(answers.map((a) => a.outcome)));
    for (const a of answers) {
      assert.ok(["fresh", "in_flight", "replay"].includes(a.outcome), a.outcome);
      if (a.outcome === "in_flight") assert.equal(a.status, 409);
      if (a.outcome === "replay") assert.equal(a.body, fresh[0].body);
    }
    assert.ok(answers.some((a) => a.outcome === "in_flight"), "the requests overlapped the work");
    assert.equal(await count("SELECT count(*)::int AS n FROM orders WHERE idempotency_key = $1", [key]), 1);
  });
});
