// The Prisma adapter on a real PostgreSQL (a throwaway cluster this test starts): the endpoint's store is a
// Prisma client over the `pg` driver adapter, each keyed request runs in Prisma's interactive transaction,
// and the handler writes through the transaction client it gets. A row written that way commits with the
// key row (and is replayed, not written again); a handler that throws leaves neither; concurrent requests
// with one key do the work once, also across a Prisma endpoint and a node-postgres one on the same
// database; the fence and the sweep run through Prisma too.
//
// The client is generated here, from test/support/prisma/schema.prisma, by the Prisma CLI installed from
// the registry. The CLI fetches its schema engine (a native binary from outside the registry, used by
// migrations, not by `generate`) at start-up unless PRISMA_SCHEMA_ENGINE_BINARY names one: it names a
// stub that fails if it is ever run, so nothing is downloaded and a run that needed the engine fails.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import pg from "pg";
import { idempotentEndpoint } from "idempotent-endpoint";
import { PrismaStatementError, prismaStore } from "idempotent-endpoint/prisma";

import { startCluster } from "../../../tests/fault/pg-cluster.mjs";
import { keyed } from "./support/scenarios.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PACKAGE = path.join(HERE, "..");
const require = createRequire(import.meta.url);

let cluster;
let pool;
let prisma;
let endpoint;
let scratch;
const count = async (text, params) => (await pool.query(text, params)).rows[0].n;
const items = (key) => count("SELECT count(*)::int AS n FROM items WHERE key = $1", [key]);
const keyRows = (key) => count("SELECT count(*)::int AS n FROM idempotency_records WHERE key = $1", [key]);
/** A handler writing one item through Prisma's transaction client, after `gate`. */
const writeItem = (key, gate = Promise.resolve()) => async (tx) => {
  const item = await tx.item.create({ data: { sku: "mug", key } });
  await gate;
  return { status: 201, body: { id: item.id } };
};

/** `prisma generate` for the test's schema, with the schema engine a stub (see the top of this file). */
function generateClient() {
  scratch = mkdtempSync(path.join(tmpdir(), "idempotent-endpoint-prisma-"));
  const stub = path.join(scratch, "schema-engine");
  writeFileSync(stub, "#!/bin/sh\necho 'the test has no Prisma schema engine' >&2\nexit 1\n");
  chmodSync(stub, 0o755);
  const cli = path.join(path.dirname(require.resolve("prisma/package.json")), "build/index.js");
  execFileSync(process.execPath, [cli, "generate", "--schema", path.join(HERE, "support/prisma/schema.prisma")], {
    cwd: PACKAGE,
    env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: stub, CHECKPOINT_DISABLE: "1", PRISMA_HIDE_UPDATE_MESSAGE: "1" },
    stdio: ["ignore", "pipe", "inherit"],
  });
}

before(async () => {
  generateClient();
  cluster = await startCluster();
  cluster.createDatabase("prisma");
  pool = new pg.Pool({ connectionString: cluster.url("prisma"), max: 4 });
  await pool.query("CREATE TABLE items (id SERIAL PRIMARY KEY, sku TEXT NOT NULL, key TEXT NOT NULL)");
  // Loaded only now: the client is what generateClient() wrote.
  const { PrismaClient } = require("@prisma/client");
  const { PrismaPg } = require("@prisma/adapter-pg");
  prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: cluster.url("prisma"), max: 8 }) });
  endpoint = idempotentEndpoint({ database: prismaStore(prisma, { timeout: 20_000, maxWait: 20_000 }), onError: () => undefined });
  await endpoint.install();
});

after(async () => {
  await prisma?.$disconnect();
  await pool?.end();
  cluster?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe("Prisma's interactive transaction as the key row's transaction", () => {
  it("a row written through the transaction client commits with the key row; the replay writes nothing", async () => {
    const key = randomUUID();
    const first = await endpoint.run(keyed(key), writeItem(key));
    assert.equal(first.outcome, "fresh");
    assert.equal(first.answer.status, 201);
    assert.equal(await items(key), 1);
    assert.equal(await keyRows(key), 1);
    const again = await endpoint.run(keyed(key), writeItem(key));
    assert.equal(again.outcome, "replay");
    assert.equal(again.answer.body, first.answer.body);
    assert.equal(await items(key), 1);
  });

  it("a handler that throws after writing leaves neither its row nor the key row; a retry does the work", async () => {
    const key = randomUUID();
    await assert.rejects(
      endpoint.run(keyed(key), async (tx) => {
        await tx.item.create({ data: { sku: "mug", key } });
        // Inside the transaction the row is there; another connection does not see it yet.
        assert.equal(await tx.item.count({ where: { key } }), 1);
        assert.equal(await items(key), 0);
        throw new Error("card declined");
      }),
      /card declined/,
    );
    assert.equal(await items(key), 0);
    assert.equal(await keyRows(key), 0);
    assert.equal((await endpoint.run(keyed(key), writeItem(key))).outcome, "fresh");
    assert.equal(await items(key), 1);
  });

  it("another request with the key is 422, and nothing is written for it", async () => {
    const key = randomUUID();
    await endpoint.run(keyed(key), writeItem(key));
    const other = await endpoint.run(keyed(key, { items: [{ sku: "cup", qty: 2 }] }), writeItem(key));
    assert.equal(other.outcome, "mismatch");
    assert.equal(other.answer.status, 422);
    assert.equal(await items(key), 1);
  });

  it("concurrent requests with one key, through Prisma and through node-postgres: the work once", async () => {
    const key = randomUUID();
    const viaPg = idempotentEndpoint({ database: pool, onError: () => undefined });
    let open;
    const gate = new Promise((resolve) => (open = resolve));
    const first = endpoint.run(keyed(key), writeItem(key, gate));
    // The first holds the key's in-flight mark until the gate opens: wait until the database shows it.
    for (let i = 0; i < 200 && JSON.parse((await viaPg.status(key)).body).status !== "in_flight"; i++) {
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(JSON.parse((await viaPg.status(key)).body).status, "in_flight");
    const racing = await Promise.all([
      ...Array.from({ length: 6 }, () => endpoint.run(keyed(key), writeItem(key))),
      ...Array.from({ length: 6 }, () => viaPg.run(keyed(key), async (tx) => {
        await tx.query("INSERT INTO items (sku, key) VALUES ('mug', $1)", [key]);
        return { status: 201, body: {} };
      })),
    ]);
    assert.deepEqual([...new Set(racing.map((r) => r.outcome))], ["in_flight"]);
    assert.ok(racing.every((r) => r.answer.status === 409));
    open();
    assert.equal((await first).outcome, "fresh");
    // One after another: a request takes the key's mark before it reads the row, so requests racing each
    // other are 409 even for a key that is done.
    for (const later of [endpoint, viaPg]) assert.equal((await later.run(keyed(key), writeItem(key))).outcome, "replay");
    assert.equal(await items(key), 1);
  });

  it("settling a key no request has used fences it (410 for a request after it), through Prisma", async () => {
    const key = randomUUID();
    const settled = JSON.parse((await endpoint.settle(key)).body);
    assert.equal(settled.status, "fenced");
    const late = await endpoint.run(keyed(key), writeItem(key));
    assert.equal(late.outcome, "fenced");
    assert.equal(late.answer.status, 410);
    assert.equal(await items(key), 0);
  });

  it("the sweep deletes expired key rows and counts them; a statement's failure carries PostgreSQL's code", async () => {
    const short = idempotentEndpoint({ database: prismaStore(prisma), retentionSecs: 0 });
    const key = randomUUID();
    await short.run(keyed(key), writeItem(key));
    await new Promise((r) => setTimeout(r, 1100));
    assert.ok((await short.sweep()) >= 1);
    assert.equal(await keyRows(key), 0);
    assert.equal(await items(key), 1, "business rows are never swept");
    const error = await prismaStore(prisma).query("SELECT 1/0").catch((e) => e);
    assert.ok(error instanceof PrismaStatementError, String(error));
    assert.equal(error.code, "22012");
  });
});
