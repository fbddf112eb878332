// The app's open transaction as the outbox and the inbox take it: whatever the endpoint handed the handler
// (a node-postgres `PoolClient` inside `BEGIN`, a PGlite `Transaction`), read through one shape.
import type { Result } from "./store.js";

/** A transaction that runs statements: a pg `PoolClient` inside `BEGIN`, or PGlite's transaction. */
export interface TxLike {
  /** Runs `text` with positional parameters. */
  query(text: string, params?: unknown[]): Promise<TxResult>;
}

/** What a statement in a transaction returned, as node-postgres and PGlite both answer. */
export interface TxResult {
  /** The rows. */
  rows: unknown[];
  /** Rows changed (node-postgres). */
  rowCount?: number | null;
  /** Rows changed (PGlite). */
  affectedRows?: number;
}

/** One statement in `tx`, its result as the stores read it. */
export async function runIn(tx: TxLike, text: string, params: unknown[]): Promise<Result> {
  const r = await tx.query(text, params);
  return { rows: r.rows as Record<string, unknown>[], affected: r.rowCount ?? r.affectedRows ?? 0 };
}
