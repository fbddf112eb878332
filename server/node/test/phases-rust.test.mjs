// One table, two languages, for phased work: a key the Rust library's `phases::postgres` left at
// `charge_started` (its holder gone, through server/node/core/examples/rust_phases.rs) is taken over by the
// Node half at that point with the same derived downstream key and finished, and Rust replays Node's
// answer; and the reverse. On a real PostgreSQL this test starts.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import pg from "pg";
import { atomicPhases } from "idempotent-endpoint";

import { startCluster } from "../../../tests/fault/pg-cluster.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const SCOPE = "public";
const BODY = '{"amount":300}';
// Long enough for a check that the other side's lease lives (a `cargo run` takes a while to start).
const LEASE_MS = 3000;
let cluster;
let pool;
let phases;
let url;
let bin;

/** The key through the Rust library, until `until` (`charge_started`: it exits holding the key, or `finish`). */
function rust(key, until) {
  return JSON.parse(execFileSync(path.join(bin, "rust_phases"), [url, SCOPE, key, BODY, String(LEASE_MS), until], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }));
}

/** Builds the example once and keeps a copy of it (a `cargo run` per call would start too slowly for the leases). */
function buildRust() {
  const cargo = (args) => execFileSync("cargo", args, { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  cargo(["build", "-q", "-p", "idempotent-endpoint-node-core", "--example", "rust_phases"]);
  const target = JSON.parse(cargo(["metadata", "--format-version", "1", "--no-deps"])).target_directory;
  bin = mkdtempSync(path.join(tmpdir(), "rust-phases-"));
  copyFileSync(path.join(target, "debug/examples/rust_phases"), path.join(bin, "rust_phases"));
}

const request = (key) => ({ method: "POST", path: "/pay", keyHeader: [key], body: new TextEncoder().encode(BODY) });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

before(async () => {
  buildRust();
  cluster = await startCluster();
  cluster.createDatabase("shared_phases");
  url = cluster.url("shared_phases");
  pool = new pg.Pool({ connectionString: url });
  phases = atomicPhases({ database: pool, scope: SCOPE, leaseMs: LEASE_MS });
  await phases.install();
});

after(async () => {
  await pool?.end();
  cluster?.stop();
  if (bin) rmSync(bin, { recursive: true, force: true });
});

describe("a Rust service and a Node service share phased key rows", () => {
  it("a key Rust left at charge_started is taken over by Node with the same downstream key; Rust replays Node's answer", async () => {
    const key = randomUUID();
    const left = rust(key, "charge_started");
    const leased = Date.now();
    assert.deepEqual([left.outcome, left.took], ["held", "started"]);
    assert.equal((await phases.begin(request(key))).outcome, "in_flight", "Rust's lease still lives");
    await sleep(leased + LEASE_MS + 100 - Date.now());
    const { held } = await phases.begin(request(key));
    assert.ok(held, "taken over once Rust's lease ran out");
    assert.equal(held.point, "charge_started");
    assert.equal(held.downstreamKey("charge"), left.downstream);
    await phases.advance(held, "charged");
    await phases.finish(held, async () => ({ status: 201, body: { by: "node" } }));
    const replay = rust(key, "finish");
    assert.deepEqual([replay.outcome, replay.status, replay.body], ["replay", 201, '{"by":"node"}']);
  });

  it("a key Node left at charge_started is taken over by Rust with the same downstream key; Node replays Rust's answer", async () => {
    const key = randomUUID();
    const { held } = await phases.begin(request(key));
    await phases.advance(held, "charge_started");
    const leased = Date.now();
    assert.equal(rust(key, "finish").outcome, "in_flight", "Node's lease still lives");
    await sleep(leased + LEASE_MS + 100 - Date.now());
    const done = rust(key, "finish");
    assert.deepEqual([done.outcome, done.took, done.downstream, done.status], ["held", "charge_started", held.downstreamKey("charge"), 201]);
    const replay = await phases.begin(request(key));
    assert.equal(replay.outcome, "replay");
    assert.equal(replay.answer.body, '{"by":"rust"}');
  });
});
