// The endpoint over PGlite, a database folder on disk: the same scenarios and statements as on
// PostgreSQL, and concurrent same-key requests in one process → one effect.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";

import { PGlite } from "@electric-sql/pglite";
import { idempotentEndpoint } from "idempotent-endpoint";

import { keyed, ORDERS, orderHandler, scenarios } from "./support/scenarios.mjs";

let dir;
let db;
let endpoint;
/** What the endpoint reported (a failure it answered 500 for). */
const reported = [];
const count = async (text, params) => (await db.query(text, params)).rows[0].n;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "idempotent-endpoint-pglite-"));
  db = new PGlite(path.join(dir, "data"));
  endpoint = idempotentEndpoint({ database: db, onError: (e) => reported.push(e) });
  await endpoint.install();
  await db.exec(ORDERS);
});

after(async () => {
  await db?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("PGlite on disk", () => {
  scenarios(() => ({ endpoint, count, reported }));

  it("20 concurrent requests with one key: one effect, the others 409 or the replay", async () => {
    const key = randomUUID();
    const slow = new Promise((r) => setTimeout(r, 200));
    const answers = await Promise.all(Array.from({ length: 20 }, () => endpoint.run(keyed(key), orderHandler(key, slow))));
    const outcomes = answers.map((a) => a.outcome);
    assert.equal(outcomes.filter((o) => o === "fresh").length, 1, outcomes.join());
    assert.ok(outcomes.every((o) => ["fresh", "in_flight", "replay"].includes(o)), outcomes.join());
    assert.equal(await count("SELECT count(*)::int AS n FROM orders WHERE idempotency_key = $1", [key]), 1);
  });

  it("the key rows survive a reopen of the folder", async () => {
    const key = randomUUID();
    const first = await endpoint.run(keyed(key), orderHandler(key));
    await db.close();
    db = new PGlite(path.join(dir, "data"));
    endpoint = idempotentEndpoint({ database: db });
    const again = await endpoint.run(keyed(key), orderHandler(key));
    assert.equal(again.outcome, "replay");
    assert.equal(again.answer.body, first.answer.body);
  });
});
