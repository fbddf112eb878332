// Several statements in one round trip on a node-postgres client: each one's extended-protocol messages
// (Parse when it is not prepared, Bind, Describe, Execute) written together and closed by one Sync, so
// PostgreSQL runs them in order and answers them together; after an error it skips the rest. This is how a
// keyed request opens its transaction (BEGIN with the key's claim) and ends it (the answer with COMMIT) in
// one round trip each instead of two.
import type { Connection, PoolClient, Submittable } from "pg";

import type { Result } from "./store.js";

/** One statement of a batch, as it goes on the wire. */
export interface BatchStatement {
  /** The SQL, `$1`... parameters. */
  text: string;
  /** The parameters: strings, numbers or null (numbers are sent as their decimal text). */
  values: unknown[];
  /** The name it is prepared under; absent: parsed as the unnamed statement. */
  name?: string;
}

/** The parts of node-postgres's connection a batch writes to (its own query class writes the same). */
interface WireConnection extends Connection {
  /** Named statements this connection has prepared, by name. */
  parsedStatements?: Record<string, string>;
}

/** A column of a row description. */
interface Field {
  name: string;
  dataTypeID: number;
  format: string;
}

/** How node-postgres hands a client's type parsers out. */
type TypeParsers = { getTypeParser(oid: number, format: "text" | "binary"): (text: string) => unknown };

/** A parameter as the protocol takes it: text, bytes or NULL. */
const wireValue = (value: unknown): string | Buffer | null => {
  if (value === null || value === undefined) return null;
  if (typeof value === "string" || Buffer.isBuffer(value)) return value;
  return String(value);
};

/** The rows changed, from a CommandComplete tag such as `INSERT 0 1` or `UPDATE 1` (0 for `BEGIN`). */
const affectedOf = (tag: string): number => Number(/ (\d+)$/.exec(tag)?.[1] ?? "0");

/** The submittable node-postgres runs as one query: it writes every statement and collects each result. */
class Batch implements Submittable {
  private readonly results: Result[] = [];
  private fields: Field[] = [];
  private parsers: ((text: string) => unknown)[] = [];
  private rows: Record<string, unknown>[] = [];
  private failed: unknown;
  private ended = false;

  constructor(
    private readonly statements: BatchStatement[],
    private readonly types: TypeParsers,
    private readonly done: (error: unknown, results: Result[]) => void,
  ) {}

  submit(connection: Connection): void {
    const wire = connection as WireConnection;
    wire.stream.cork();
    try {
      for (const { text, values, name = "" } of this.statements) {
        if (name === "" || wire.parsedStatements?.[name] === undefined) wire.parse({ text, name, types: [] }, false);
        wire.bind({ statement: name, values, valueMapper: wireValue } as Parameters<Connection["bind"]>[0], false);
        wire.describe({ type: "P", name: "" }, false);
        wire.execute({ portal: "" }, false);
      }
      wire.sync();
    } finally {
      wire.stream.uncork();
    }
  }

  handleRowDescription(message: { fields: Field[] }): void {
    this.fields = message.fields;
    this.parsers = message.fields.map((f) => this.types.getTypeParser(f.dataTypeID, f.format === "binary" ? "binary" : "text"));
  }

  handleDataRow(message: { fields: (string | null)[] }): void {
    if (this.failed !== undefined) return;
    try {
      const row: Record<string, unknown> = {};
      this.fields.forEach((field, i) => {
        const value = message.fields[i];
        row[field.name] = value === null || value === undefined ? null : this.parsers[i]?.(value);
      });
      this.rows.push(row);
    } catch (error) {
      this.failed = error;
    }
  }

  handleCommandComplete(message: { text: string }): void {
    this.results.push({ rows: this.rows, affected: affectedOf(message.text) });
    this.rows = [];
    this.fields = [];
    this.parsers = [];
  }

  handleEmptyQuery(): void {
    this.results.push({ rows: [], affected: 0 });
  }

  handlePortalSuspended(): void {
    // Never asked for: every Execute fetches all rows.
  }

  handleCopyInResponse(connection: Connection & { sendCopyFail?: (message: string) => void }): void {
    connection.sendCopyFail?.("a batch sends no COPY data");
  }

  handleCopyData(): void {
    // A batch runs no COPY.
  }

  handleError(error: unknown): void {
    this.finish(error);
  }

  handleReadyForQuery(): void {
    this.finish(this.failed);
  }

  private finish(error: unknown): void {
    if (this.ended) return;
    this.ended = true;
    this.done(error, this.results);
  }
}

/**
 * Whether `client` can run a batch now: not in node-postgres's pipeline mode (which takes no custom query),
 * and every named statement of `statements` already prepared on its connection (a statement's first Parse
 * goes through node-postgres's own query, which keeps the record of what is prepared).
 */
export function canBatch(client: PoolClient, statements: BatchStatement[]): boolean {
  const c = client as PoolClient & { pipeline?: boolean; connection?: WireConnection };
  const parsed = c.connection?.parsedStatements;
  if (c.pipeline === true || parsed === undefined) return false;
  return statements.every((s) => s.name === undefined || parsed[s.name] === s.text);
}

/** Runs `statements` on `client` in one round trip; resolves to each one's result, or rejects with the first error (the rest skipped). */
export function runBatch(client: PoolClient, statements: BatchStatement[]): Promise<Result[]> {
  return new Promise((resolve, reject) => {
    client.query(new Batch(statements, client as unknown as TypeParsers, (error, results) => (error === undefined ? resolve(results) : reject(error))));
  });
}
