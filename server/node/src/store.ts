// The two databases the key rows live in, behind one small interface: node-postgres (a pool; several
// processes may share the database) and PGlite (embedded, one connection). Both run the same statements.
import type { PGlite, Transaction as PGliteTransaction } from "@electric-sql/pglite";
import type { Pool, PoolClient, QueryConfig } from "pg";

import { type BatchStatement, canBatch, runBatch } from "./batch.js";
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

/** A statement with its positional parameters. */
export interface Statement {
  /** The SQL, `$1`... parameters. */
  text: string;
  /** The parameters. */
  params: unknown[];
}

/** How a transaction ends when its function returns: commit, or roll back and still return. */
export interface Ending<T> {
  /** Commit (true) or roll back (false). */
  commit: boolean;
  /** What the transaction function returns. */
  value: T;
  /**
   * With `commit`: a statement the store runs last in the transaction, just before COMMIT (node-postgres
   * sends the two in one round trip). Its error rolls the transaction back and is thrown.
   */
  last?: Statement;
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
  /**
   * One transaction: BEGIN, `fn`, then COMMIT or ROLLBACK as it says; ROLLBACK and rethrow when it throws.
   * `first`, when given, is the transaction's first statement (node-postgres sends it with BEGIN, in one
   * round trip): `fn` gets its result as `opened`.
   */
  transaction<T>(fn: (q: Queryable, tx: Tx, opened: Result | undefined) => Promise<Ending<T>>, first?: Statement): Promise<T>;
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
  /** `text` as it is sent: under its prepared name when it is one of the endpoint's statements. */
  const wire = (text: string, values: unknown[]): BatchStatement => {
    const name = prepared ? PREPARED_NAMES.get(text) : undefined;
    return name === undefined ? { text, values } : { name, text, values };
  };
  const config = (s: BatchStatement): QueryConfig => (s.name === undefined ? { text: s.text, values: s.values } : { name: s.name, text: s.text, values: s.values });
  const BEGIN = wire("BEGIN", []);
  const COMMIT = wire("COMMIT", []);
  const ROLLBACK = wire("ROLLBACK", []);
  /** `statements` on `client` in one round trip when it can batch them, else one after the other. */
  const together = async (client: PoolClient, statements: BatchStatement[]): Promise<Result[]> => {
    if (canBatch(client, statements)) return runBatch(client, statements);
    const results: Result[] = [];
    for (const s of statements) results.push(pgResult(await client.query(config(s))));
    return results;
  };
  return {
    kind: "postgres",
    sharedLocks: true,
    async exec(text) {
      await pool.query(text);
    },
    async query(text, params = []) {
      return pgResult(await pool.query(config(wire(text, params))));
    },
    async transaction(fn, first) {
      const client = await pool.connect();
      // A client whose ROLLBACK after a failure fails too is destroyed, not given back to the pool.
      let damaged: Error | undefined;
      try {
        const opening = await together(client, first === undefined ? [BEGIN] : [BEGIN, wire(first.text, first.params)]);
        const q: Queryable = { query: async (text, params = []) => pgResult(await client.query(config(wire(text, params)))) };
        const ending = await fn(q, client, opening[1]);
        const last = ending.commit && ending.last !== undefined ? [wire(ending.last.text, ending.last.params)] : [];
        await together(client, [...last, ending.commit ? COMMIT : ROLLBACK]);
        return ending.value;
      } catch (error) {
        await client.query("ROLLBACK").catch((failed: unknown) => {
          damaged = failed instanceof Error ? failed : new Error(String(failed));
        });
        throw error;
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
    async transaction(fn, first) {
      return db.transaction(async (tx) => {
        const q: Queryable = { query: async (text, params = []) => pgliteResult(await tx.query(text, params)) };
        const ending = await fn(q, tx, first === undefined ? undefined : await q.query(first.text, first.params));
        if (!ending.commit) await tx.rollback();
        else if (ending.last !== undefined) await q.query(ending.last.text, ending.last.params);
        return ending.value;
      });
    },
  };
}
