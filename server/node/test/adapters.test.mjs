// The query-builder adapters on a real PostgreSQL (a throwaway cluster this test starts): Drizzle and
// Kysely bound to the key row's transaction. A row written through the builder commits with the key row
// (and is replayed, not written again); a handler that throws after writing leaves neither row; asking the
// builder for a transaction of its own is refused (its COMMIT would commit the key row early).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";

import { sql } from "drizzle-orm";
import { pgTable, serial, text } from "drizzle-orm/pg-core";
import pg from "pg";
import { idempotentEndpoint } from "idempotent-endpoint";
import { drizzleTx, NestedTransactionError } from "idempotent-endpoint/drizzle";
import { kyselyTx } from "idempotent-endpoint/kysely";

import { startCluster } from "../../../tests/fault/pg-cluster.mjs";
import { keyed } from "./support/scenarios.mjs";

const items = pgTable("items", { id: serial("id").primaryKey(), sku: text("sku").notNull(), key: text("key").notNull() });

let cluster;
let pool;
let endpoint;
const count = async (text, params) => (await pool.query(text, params)).rows[0].n;

before(async () => {
  cluster = await startCluster();
  cluster.createDatabase("adapters");
  pool = new pg.Pool({ connectionString: cluster.url("adapters"), max: 4 });
  endpoint = idempotentEndpoint({ database: pool, onError: () => undefined });
  await endpoint.install();
  await pool.query("CREATE TABLE items (id SERIAL PRIMARY KEY, sku TEXT NOT NULL, key TEXT NOT NULL)");
});

after(async () => {
  await pool?.end();
  cluster?.stop();
});

/** Inserts one item for `key` through each builder, returning its id. */
const writers = {
  drizzle: async (tx, key) => (await drizzleTx(tx).insert(items).values({ sku: "mug", key }).returning({ id: items.id }))[0].id,
  kysely: async (tx, key) => (await kyselyTx(tx).insertInto("items").values({ sku: "mug", key }).returning("id").executeTakeFirstOrThrow()).id,
};
/** Opens a transaction of its own on each builder. */
const nested = {
  drizzle: (tx) => drizzleTx(tx).transaction(async (t) => t.execute(sql`SELECT 1`)),
  kysely: (tx) => kyselyTx(tx).transaction().execute(async (t) => t.selectFrom("items").selectAll().execute()),
};

for (const [name, write] of Object.entries(writers)) {
  describe(`${name} bound to the key row's transaction`, () => {
    const rows = (key) => count("SELECT count(*)::int AS n FROM items WHERE key = $1", [key]);
    const keyRows = (key) => count("SELECT count(*)::int AS n FROM idempotency_records WHERE key = $1", [key]);

    it("a row written through the builder commits with the key row; the replay writes nothing", async () => {
      const key = randomUUID();
      const handler = async (tx) => ({ status: 201, body: { id: await write(tx, key) } });
      const first = await endpoint.run(keyed(key), handler);
      assert.equal(first.outcome, "fresh");
      assert.equal(await rows(key), 1);
      assert.equal(await keyRows(key), 1);
      const again = await endpoint.run(keyed(key), handler);
      assert.equal(again.outcome, "replay");
      assert.equal(again.answer.body, first.answer.body);
      assert.equal(await rows(key), 1);
    });

    it("a handler that throws after writing through the builder leaves neither its row nor the key row", async () => {
      const key = randomUUID();
      let seen;
      await assert.rejects(
        endpoint.run(keyed(key), async (tx) => {
          await write(tx, key);
          // Inside the transaction the row is there; the pool (another connection) does not see it yet.
          seen = (await tx.query("SELECT count(*)::int AS n FROM items WHERE key = $1", [key])).rows[0].n;
          assert.equal(await rows(key), 0);
          throw new Error("card declined");
        }),
        /card declined/,
      );
      assert.equal(seen, 1, "the builder wrote on the handler's transaction");
      assert.equal(await rows(key), 0);
      assert.equal(await keyRows(key), 0);
    });

    it("a transaction of its own is refused, and the key row's transaction rolls back", async () => {
      const key = randomUUID();
      await assert.rejects(
        endpoint.run(keyed(key), async (tx) => {
          await write(tx, key);
          await nested[name](tx);
          return { status: 201 };
        }),
        NestedTransactionError,
      );
      assert.equal(await rows(key), 0);
      assert.equal(await keyRows(key), 0);
    });
  });
}
