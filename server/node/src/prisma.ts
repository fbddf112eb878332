// Prisma's interactive transactions as a store: the key row's statements run through the transaction
// client Prisma hands `$transaction(async (tx) => ...)`, and the handler gets that same client, so its rows
// written through Prisma commit with the key row and roll back with it.
import type { Ending, Queryable, Result, Statement, Store } from "./store.js";

/** What the store needs of a Prisma client or of its transaction client: raw statements with positional parameters. */
export interface PrismaRaw {
  /** Runs a statement that returns rows; resolves to them. */
  $queryRawUnsafe(query: string, ...values: unknown[]): PromiseLike<unknown>;
  /** Runs a statement; resolves to how many rows it changed. */
  $executeRawUnsafe(query: string, ...values: unknown[]): PromiseLike<number>;
}

/** Options of Prisma's interactive transaction, passed to `$transaction` as they are. */
export interface PrismaTransactionOptions {
  /** How long to wait for a connection, in ms (Prisma's default: 2000). */
  maxWait?: number;
  /** How long the transaction, the handler included, may take, in ms (Prisma's default: 5000). */
  timeout?: number;
  /** The isolation level (PostgreSQL's default, READ COMMITTED, when absent). */
  isolationLevel?: "ReadUncommitted" | "ReadCommitted" | "RepeatableRead" | "Serializable";
}

/** A Prisma client over PostgreSQL (through a driver adapter such as `@prisma/adapter-pg`): `Tx` is its transaction client. */
export interface PrismaClientLike<Tx extends PrismaRaw> extends PrismaRaw {
  /** Prisma's interactive transaction: `fn` with the transaction client; commits when it resolves, rolls back when it throws. */
  $transaction<R>(fn: (tx: Tx) => Promise<R>, options?: PrismaTransactionOptions): Promise<R>;
}

/** A statement of the store failed: `code` is PostgreSQL's SQLSTATE (Prisma reports it as `P2010` with the code in its `meta`). */
export class PrismaStatementError extends Error {
  /** `PrismaStatementError`. */
  override name = "PrismaStatementError";
  /** The SQLSTATE, as node-postgres reports it (`55P03`: a lock wait gave up). */
  readonly code: string | undefined;
  /** `cause`: Prisma's error. */
  constructor(cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.code = sqlState(cause);
  }
}

/** The SQLSTATE in a Prisma error, where Prisma's driver adapters put it. */
function sqlState(error: unknown): string | undefined {
  const meta = typeof error === "object" && error !== null && "meta" in error ? (error as { meta?: unknown }).meta : undefined;
  const adapter = (meta as { driverAdapterError?: { cause?: { originalCode?: unknown } }; code?: unknown } | undefined) ?? {};
  const code = adapter.driverAdapterError?.cause?.originalCode ?? adapter.code;
  return typeof code === "string" ? code : undefined;
}

/**
 * Whether a statement answers rows (a query, or a change with RETURNING): Prisma runs those through
 * `$queryRawUnsafe`, which returns the rows but not how many changed, and the others through
 * `$executeRawUnsafe`, which returns the count but no rows.
 */
function answersRows(text: string): boolean {
  return /^\s*(SELECT|WITH|VALUES)\b/i.test(text) || /\bRETURNING\b/i.test(text);
}

/** A PostgreSQL bigint as node-postgres reads it (a string), so that every store answers the same values. */
function plain(row: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(row).map(([name, value]) => [name, typeof value === "bigint" ? value.toString() : value]));
}

async function run(client: PrismaRaw, text: string, params: unknown[]): Promise<Result> {
  try {
    if (answersRows(text)) {
      const rows = ((await client.$queryRawUnsafe(text, ...params)) as Record<string, unknown>[]).map(plain);
      return { rows, affected: rows.length };
    }
    return { rows: [], affected: await client.$executeRawUnsafe(text, ...params) };
  } catch (error) {
    throw new PrismaStatementError(error);
  }
}

/** Carries a transaction function's value out of a `$transaction` that must roll back (Prisma rolls back on a throw). */
class RollBack<T> {
  constructor(readonly value: T) {}
}

/**
 * A Prisma client on PostgreSQL as the endpoint's store: each keyed request runs in Prisma's interactive
 * transaction, the key row's statements (the Rust library's, through `$queryRawUnsafe` and
 * `$executeRawUnsafe`) and the handler's writes through the transaction client alike.
 *
 * ```ts
 * import { PrismaPg } from "@prisma/adapter-pg";
 * import { PrismaClient } from "./generated/prisma/client";
 * import { idempotent, idempotentEndpoint } from "idempotent-endpoint";
 * import { prismaStore } from "idempotent-endpoint/prisma";
 *
 * const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: process.env.DATABASE_URL }) });
 * const endpoint = idempotentEndpoint({ database: prismaStore(prisma, { timeout: 10_000 }) });
 * await endpoint.install();
 * app.post("/api/orders", idempotent(endpoint, async ({ json, tx }) => {
 *   const order = await tx.order.create({ data: { sku: (json as { sku: string }).sku } });
 *   return { status: 201, body: order };
 * }));
 * ```
 *
 * `options` go to every `$transaction`: Prisma ends a transaction after `timeout` (5 s by default), the
 * handler's time included, so give a slow handler more. The key's in-flight mark is the advisory lock of
 * every PostgreSQL store, so processes using Prisma, node-postgres or the Rust library share keys on one
 * database.
 */
export function prismaStore<Tx extends PrismaRaw>(prisma: PrismaClientLike<Tx>, options: PrismaTransactionOptions = {}): Store<Tx> {
  return {
    kind: "postgres",
    sharedLocks: true,
    async exec(text) {
      await run(prisma, text, []);
    },
    async query(text, params = []) {
      return run(prisma, text, params);
    },
    // Prisma sends each statement on its own, so `first` and `last` are simply the first and last
    // statements of the interactive transaction.
    async transaction<T>(fn: (q: Queryable, tx: Tx, opened: Result | undefined) => Promise<Ending<T>>, first?: Statement): Promise<T> {
      try {
        return await prisma.$transaction(async (tx) => {
          const q: Queryable = { query: (text, params = []) => run(tx, text, params) };
          const opened = first === undefined ? undefined : await q.query(first.text, first.params);
          const ending = await fn(q, tx, opened);
          if (!ending.commit) throw new RollBack(ending.value);
          if (ending.last !== undefined) await q.query(ending.last.text, ending.last.params);
          return ending.value;
        }, options);
      } catch (error) {
        if (error instanceof RollBack) return error.value as T;
        throw error;
      }
    },
  };
}
