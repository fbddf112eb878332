// One table, two languages: a key row the Rust library wrote (its own `postgres::run`, through
// server/node/core/examples/rust_key_row.rs) is replayed by the Node half, and a row the Node half wrote is
// replayed by the Rust library, on a real PostgreSQL this test starts.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import pg from "pg";
import { idempotentEndpoint } from "idempotent-endpoint";

import { startCluster } from "../../../tests/fault/pg-cluster.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const SCOPE = "public";
const BODY = '{"items":[{"sku":"mug","qty":1}]}';
let cluster;
let pool;
let endpoint;
let url;

/** One request through the Rust library (cargo builds the example once; later runs are a no-op build). */
function rust(key, body = BODY) {
  const out = execFileSync("cargo", ["run", "-q", "-p", "idempotent-endpoint-node-core", "--example", "rust_key_row", "--", url, SCOPE, key, body], { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  return JSON.parse(out);
}

const node = (key, body = BODY) =>
  endpoint.run({ method: "POST", path: "/api/orders", keyHeader: [key], body: new TextEncoder().encode(body) }, async () => ({ status: 201, body: { by: "node" } }));

before(async () => {
  cluster = await startCluster();
  cluster.createDatabase("shared");
  url = cluster.url("shared");
  pool = new pg.Pool({ connectionString: url });
  endpoint = idempotentEndpoint({ database: pool, scope: SCOPE });
  await endpoint.install();
});

after(async () => {
  await pool?.end();
  cluster?.stop();
});

describe("a Rust service and a Node service on one database", () => {
  it("a key the Rust library did is replayed by Node (and 422 for another body)", async () => {
    const key = randomUUID();
    const first = rust(key);
    assert.equal(first.outcome, "fresh");
    const replay = await node(key);
    assert.equal(replay.outcome, "replay");
    assert.equal(replay.answer.status, 201);
    assert.equal(replay.answer.body, '{"by":"rust"}');
    assert.equal((await node(key, '{"items":[]}')).answer.status, 422);
  });

  it("a key Node did is replayed by the Rust library; a key Node fenced is 410 there", async () => {
    const key = randomUUID();
    assert.equal((await node(key)).outcome, "fresh");
    const replay = rust(key);
    assert.equal(replay.outcome, "replay");
    assert.equal(replay.body, '{"by":"node"}');
    const fenced = randomUUID();
    assert.equal(JSON.parse((await endpoint.settle(fenced)).body).status, "fenced");
    assert.equal(rust(fenced).outcome, "fenced");
  });
});
