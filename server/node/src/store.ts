// The two databases the key rows live in, behind one small interface: node-postgres (a pool; several
// processes may share the database) and PGlite (embedded, one connection). Both run the same statements.
import type { PGlite, Transaction as PGliteTransaction } from "@electric-sql/pglite";
import type { Pool, PoolClient, QueryConfig } from "pg";

import * as core from "./core.js";

/** What a statement returned: its rows and how many rows it changed. */
export interface Result {
  /** The rows, by column name. */
  rows: Record<string, unknown>[];
  /** Rows inserted, updated or deleted. */
  affected: number;
}

/** Runs one statement. */
export interface Queryable {
  /** Runs `text` with positional parameters. */
  query(text: string, params?: unknown[]): Promise<Result>;
}

/** How a transaction ends when its function returns: commit, or roll back and still return. */
export interface Ending<T> {
  /** Commit (true) or roll back (false). */
  commit: boolean;
  /** What the transaction function returns. */
  value: T;
}

/**
 * A database for key rows. `Tx` is the transaction object the app's handler gets (a pg `PoolClient` inside
 * `BEGIN`, a PGlite `Transaction`): its own rows go through it, so they commit with the key row.
 */
export interface Store<Tx> {
  /** `postgres` or `pglite`. */
  readonly kind: "postgres" | "pglite";
  /**
   * Whether a transaction of another connection can hold a key's in-flight mark (the advisory lock). PGlite
   * has one connection and runs one transaction at a time, so there the endpoint keeps the keys in flight
   * in memory instead (one process owns a PGlite database).
   */
  readonly sharedLocks: boolean;
  /** Runs statements outside any transaction (no parameters; several allowed). */
  exec(text: string): Promise<void>;
  /** One statement outside a transaction. */
  query(text: string, params?: unknown[]): Promise<Result>;
  /** One transaction: BEGIN, `fn`, then COMMIT or ROLLBACK as it says; ROLLBACK and rethrow when it throws. */
  transaction<T>(fn: (q: Queryable, tx: Tx) => Promise<Ending<T>>): Promise<T>;
}

function pgResult(r: { rows: Record<string, unknown>[]; rowCount: number | null }): Result {
  return { rows: r.rows, affected: r.rowCount ?? 0 };
}

/** Options of {@link pgStore}. */
export interface PgStoreOptions {
  /**
   * Run the endpoint's own statements as named prepared statements, parsed and planned once per connection
   * (each is then one Bind/Execute, a fraction of the time of parsing and planning it again per request).
   * Turn it off behind a pooler that does not keep protocol-level prepared statements (PgBouncer before
   * 1.21 in transaction mode). The app's statements are never prepared by the store.
   * @defaultValue `true`
   */
  prepared?: boolean;
}

/** The name each of the endpoint's statements is prepared under, by its text. */
const PREPARED_NAMES = new Map(Object.entries(core.constants.sql).map(([name, text]) => [text, `idempotent_endpoint_${name}`]));

/** A node-postgres pool as a store: each transaction takes one client for its whole life. */
export function pgStore(pool: Pool, options: PgStoreOptions = {}): Store<PoolClient> {
  const prepared = options.prepared ?? true;
  /** The query `text` is sent as: under its prepared name when it is one of the endpoint's statements. */
  const config = (text: string, values: unknown[]): QueryConfig => {
    const name = prepared ? PREPARED_NAMES.get(text) : undefined;
    return name === undefined ? { text, values } : { name, text, values };
  };
  return {
    kind: "postgres",
    sharedLocks: true,
    async exec(text) {
      await pool.query(text);
    },
    async query(text, params = []) {
      return pgResult(await pool.query(config(text, params)));
    },
    async transaction(fn) {
      const client = await pool.connect();
      // A client whose BEGIN, COMMIT or ROLLBACK failed is destroyed, not given back to the pool.
      let damaged: Error | undefined;
      const end = async (text: string): Promise<void> => {
        try {
          await client.query(text);
        } catch (error) {
          damaged = error instanceof Error ? error : new Error(String(error));
          throw error;
        }
      };
      try {
        await end("BEGIN");
        const q: Queryable = { query: async (text, params = []) => pgResult(await client.query(config(text, params))) };
        let ending;
        try {
          ending = await fn(q, client);
        } catch (error) {
          await end("ROLLBACK").catch(() => undefined);
          throw error;
        }
        await end(ending.commit ? "COMMIT" : "ROLLBACK");
        return ending.value;
      } finally {
        client.release(damaged);
      }
    },
  };
}

/** The result of a PGlite statement, as a {@link Result}. */
function pgliteResult(r: { rows: unknown[]; affectedRows?: number }): Result {
  return { rows: r.rows as Record<string, unknown>[], affected: r.affectedRows ?? 0 };
}

/**
 * A PGlite database as a store. PGlite runs one transaction at a time and queues every other statement
 * behind it, so transactions are serialised: a handler must use the transaction it is given, never the
 * database itself (that statement would wait for the transaction it is part of).
 */
export function pgliteStore(db: PGlite): Store<PGliteTransaction> {
  return {
    kind: "pglite",
    sharedLocks: false,
    async exec(text) {
      await db.exec(text);
    },
    async query(text, params = []) {
      return pgliteResult(await db.query(text, params));
    },
    async transaction(fn) {
      return db.transaction(async (tx) => {
        const q: Queryable = { query: async (text, params = []) => pgliteResult(await tx.query(text, params)) };
        const ending = await fn(q, tx);
        if (!ending.commit) await tx.rollback();
        return ending.value;
      });
    },
  };
}
