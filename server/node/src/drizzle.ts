// Drizzle over node-postgres: the builder bound to the key row's transaction, so the handler's rows written
// through Drizzle commit with the key row and roll back with it.
import { type DrizzleConfig } from "drizzle-orm";
import { drizzle, type NodePgDatabase } from "drizzle-orm/node-postgres";
import type { PoolClient } from "pg";

import { NestedTransactionError } from "./nested.js";

/**
 * A Drizzle database on `tx`, the open transaction the handler got (a pg `PoolClient` inside `BEGIN`).
 *
 * ```ts
 * app.post("/api/orders", idempotent(endpoint, async ({ json, tx }) => {
 *   const [order] = await drizzleTx(tx).insert(orders).values({ sku: json.sku }).returning();
 *   return { status: 201, body: order };
 * }));
 * ```
 *
 * Its `transaction()` throws {@link NestedTransactionError}: the handler is inside the key row's transaction
 * already, and a BEGIN/COMMIT of its own would commit the key row early.
 */
export function drizzleTx<TSchema extends Record<string, unknown> = Record<string, never>>(tx: PoolClient, config: DrizzleConfig<TSchema> = {}): NodePgDatabase<TSchema> {
  const db = drizzle(tx, config);
  db.transaction = () => {
    throw new NestedTransactionError("drizzleTx");
  };
  return db;
}

export { NestedTransactionError };
