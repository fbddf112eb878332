// Kysely (PostgresDialect over pg): the builder bound to the key row's transaction, so the handler's rows
// written through Kysely commit with the key row and roll back with it.
import { Kysely, PostgresDialect, type PostgresPool, type PostgresPoolClient } from "kysely";
import type { PoolClient } from "pg";

import { NestedTransactionError } from "./nested.js";

/**
 * A Kysely instance whose every query runs on `tx`, the open transaction the handler got (a pg
 * `PoolClient` inside `BEGIN`).
 *
 * ```ts
 * app.post("/api/orders", idempotent(endpoint, async ({ json, tx }) => {
 *   const order = await kyselyTx<DB>(tx).insertInto("orders").values({ sku: json.sku }).returningAll().executeTakeFirstOrThrow();
 *   return { status: 201, body: order };
 * }));
 * ```
 *
 * Its `transaction()` and `startTransaction()` throw {@link NestedTransactionError}: the handler is inside
 * the key row's transaction already, and a BEGIN/COMMIT of its own would commit the key row early.
 */
export function kyselyTx<DB>(tx: PoolClient): Kysely<DB> {
  // The dialect's "pool" hands out the one connection and never gives it back: the endpoint owns its life.
  const client = { query: tx.query.bind(tx), release: () => undefined } as unknown as PostgresPoolClient;
  const pool: PostgresPool = { connect: async () => client, end: async () => undefined };
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  const refuse = (): never => {
    throw new NestedTransactionError("kyselyTx");
  };
  Object.assign(db, { transaction: refuse, startTransaction: refuse });
  return db;
}

export { NestedTransactionError };
