// The key row in the app's own transaction: one keyed request, key status and the fence, the sweep. Every
// decision is the wasm core's (./core.ts); this module only runs the statements it names and hands the app
// the open transaction.
import type { PGlite, Transaction as PGliteTransaction } from "@electric-sql/pglite";
import type { Pool, PoolClient } from "pg";

import * as core from "./core.js";
import type { Answer } from "./core.js";
import { answered, countDecision, keyHashAttribute, keyInFlight, traced, type SpanHandle } from "./telemetry.js";
import { pgliteStore, pgStore, type PgStoreOptions, type Queryable, type Result, type Statement, type Store } from "./store.js";

/** What the app's handler answers: the status, a JSON body (or text), optional headers. */
export interface HandlerAnswer {
  /** The HTTP status (stored with the key and replayed). */
  status: number;
  /** A value sent as JSON, or a string sent as it is. */
  body?: unknown;
  /** Extra headers to store and send (for example `location`). */
  headers?: Record<string, string>;
}

/** One keyed request, as the framework read it. */
export interface KeyedRequest {
  /** The HTTP method. */
  method: string;
  /** The path (without the query), part of the fingerprint. */
  path: string;
  /** Every value of the `Idempotency-Key` header, in order. */
  keyHeader: string[];
  /** The body, byte for byte. */
  body: Uint8Array;
  /** The scope the key lives in (the account); else the endpoint's scope. */
  scope?: string;
  /** The request's headers (Node's record with lowercase names, or a web `Headers`): the request's span continues the trace in them (`traceparent`), through the app's propagator. */
  headers?: Record<string, string | string[] | undefined> | Headers;
}

/** Options of {@link idempotentEndpoint}. */
export interface EndpointOptions<Tx> {
  /** The database: a node-postgres `Pool`, a `PGlite`, or a store made by {@link pgStore} / {@link pgliteStore}. */
  database: Pool | PGlite | Store<Tx>;
  /**
   * The scope of keys without one of their own (an app with accounts passes each request's account instead).
   * @defaultValue `"public"`
   */
  scope?: string;
  /**
   * How long a key row is kept, in seconds: the library's default retention (a day) when absent.
   */
  retentionSecs?: number;
  /** Where the endpoint reports a failure it answered 500 for (the cause is never sent). @defaultValue `console.error` */
  onError?: (error: unknown) => void;
}

/** The outcome of one keyed request: the answer to send, and what happened. */
export interface RunResult {
  /** What to send. */
  answer: Answer;
  /** `fresh` (the handler ran and committed), `replay`, `mismatch` (422), `in_flight` (409), `fenced` (410) or `refused` (bad input or a failure: nothing stored). */
  outcome: "fresh" | core.Decision | "refused";
}

/** The endpoint: the key row of each request in the handler's transaction. */
export interface IdempotentEndpoint<Tx> {
  /** The store the key rows are in. */
  readonly store: Store<Tx>;
  /** Creates the key table (`idempotency_records`, the Rust library's schema) if missing. */
  install(): Promise<void>;
  /**
   * One keyed request: BEGIN with the key's in-flight mark and the key row (one statement); for a new key,
   * `handler(tx)` with the open transaction, then its answer stored on the key row with COMMIT (on
   * PostgreSQL each pair in one round trip). A key seen before is answered without the
   * handler: the replay, 422, 409 with `Retry-After`, or 410. When the handler throws, its rows and the
   * key row roll back together and the error is rethrown (a retry with the same key does the work).
   */
  run(request: KeyedRequest, handler: (tx: Tx) => Promise<HandlerAnswer>): Promise<RunResult>;
  /** The key-status answer (GET) for a key from the URL. */
  status(rawKey: string, scope?: string): Promise<Answer>;
  /** Settles a key from the URL (POST, the fence). */
  settle(rawKey: string, scope?: string): Promise<Answer>;
  /** Deletes key rows past the retention; resolves to how many. */
  sweep(): Promise<number>;
}

const now = (): number => Math.floor(Date.now() / 1000);

function isStore<Tx>(database: Pool | PGlite | Store<Tx>): database is Store<Tx> {
  return "transaction" in database && "sharedLocks" in database;
}

function isPGlite(database: Pool | PGlite): database is PGlite {
  return "exec" in database && "transaction" in database;
}

/** The store over `database`: a node-postgres `Pool`, a `PGlite`, or a store already. */
export function storeOf(database: Pool | PGlite | Store<unknown>): Store<unknown> {
  return (isStore(database) ? database : isPGlite(database) ? pgliteStore(database) : pgStore(database)) as Store<unknown>;
}

/** A handler's answer as the stored status, header pairs and body text. */
export function encode(answer: HandlerAnswer): { status: number; headers: [string, string][]; body: string } {
  const headers = Object.entries(answer.headers ?? {}).map(([n, v]): [string, string] => [n.toLowerCase(), v]);
  if (typeof answer.body === "string" || answer.body === undefined) {
    return { status: answer.status, headers, body: answer.body ?? "" };
  }
  if (!headers.some(([n]) => n === "content-type")) headers.unshift(["content-type", "application/json"]);
  return { status: answer.status, headers, body: JSON.stringify(answer.body) };
}

/** Thrown out of a transaction to roll it back when the handler's answer cannot be stored. */
class Unstorable extends Error {
  override name = "Unstorable";
}

/**
 * The endpoint over `database`.
 *
 * ```ts
 * const endpoint = idempotentEndpoint({ database: pool });
 * await endpoint.install();
 * const { answer } = await endpoint.run(request, async (tx) => {
 *   await tx.query("INSERT INTO orders (id) VALUES ($1)", [id]);
 *   return { status: 201, body: { id } };
 * });
 * ```
 *
 * On PostgreSQL (a `pg` Pool) several processes may share the database: a key's in-flight mark is a
 * transaction-scoped advisory lock, seen by every instance. On PGlite one process owns the database and
 * its one connection runs one transaction at a time; a key is in flight from the moment its request is
 * accepted (also while it waits for the connection) until its transaction ends.
 */
export function idempotentEndpoint(options: EndpointOptions<PoolClient> & { database: Pool }): IdempotentEndpoint<PoolClient>;
export function idempotentEndpoint(options: EndpointOptions<PGliteTransaction> & { database: PGlite }): IdempotentEndpoint<PGliteTransaction>;
export function idempotentEndpoint<Tx>(options: EndpointOptions<Tx> & { database: Store<Tx> }): IdempotentEndpoint<Tx>;
export function idempotentEndpoint(options: EndpointOptions<unknown>): IdempotentEndpoint<unknown> {
  const { database } = options;
  const store = storeOf(database);
  const defaultScope = options.scope ?? "public";
  const retention = options.retentionSecs ?? core.constants.defaultRetentionSecs;
  const onError = options.onError ?? ((error: unknown) => console.error("idempotent-endpoint:", error));
  const { sql } = core.constants;
  // Keys in flight in this process, for a store whose locks other connections cannot see (PGlite).
  const local = new Set<string>();

  const scopeOf = (scope: string | undefined): string => {
    const s = scope ?? defaultScope;
    const error = core.scopeError(s);
    if (error !== undefined) throw new core.CoreError(error);
    return s;
  };

  /**
   * The statement that takes the key's in-flight mark in its transaction and, holding it, inserts the key
   * row or replaces an expired one: `held` false while another transaction holds the mark (nothing
   * written); `claimed` false when a live row is there.
   */
  const claim = (scope: string, key: string, fp: string): Statement => {
    const t = now();
    return { text: sql.claimKey, params: [core.lockName(scope, key), scope, key, fp, t, core.expiredBefore(t, retention)] };
  };
  const claimed = (r: Result): { held: boolean; claimed: boolean } => {
    const row = r.rows[0];
    return { held: row?.["held"] === true, claimed: row?.["claimed"] === true };
  };

  /** `work` with the key entered in the local set (PGlite), or at once (PostgreSQL): undefined when it is in already. */
  const entered = async <T>(scope: string, key: string, work: () => Promise<T>): Promise<T | undefined> => {
    if (store.sharedLocks) return work();
    const name = core.lockName(scope, key);
    if (local.has(name)) return undefined;
    local.add(name);
    try {
      return await work();
    } finally {
      local.delete(name);
    }
  };

  const refused = (error: unknown): RunResult => {
    onError(error);
    return { answer: core.problemAnswer("internal"), outcome: "refused" };
  };

  /** One keyed request (see `run`), its key's hash on `span` and its transaction in a span of its own. */
  const runKeyed = async (request: KeyedRequest, handler: (tx: unknown) => Promise<HandlerAnswer>, span: SpanHandle): Promise<RunResult> => {
    const parsed = core.keyFromHeader(request.keyHeader);
    if ("answer" in parsed) return { answer: parsed.answer, outcome: "refused" };
    const { key } = parsed;
    const scope = scopeOf(request.scope);
    const fp = core.fingerprint(request.method, request.path, request.body);
    const claiming = claim(scope, key, fp);
    const keyHash = keyHashAttribute(span, key);
    span.set(keyHash);
    const transaction = { "db.system.name": "postgresql", ...keyHash };
    const done = await traced("idempotency.transaction", transaction, () => keyInFlight(() => entered(scope, key, () =>
      store.transaction<RunResult>(async (q, tx, opened) => {
        const { held, claimed: inserted } = claimed(opened ?? (await q.query(claiming.text, claiming.params)));
        if (!held) return { commit: false, value: { answer: core.inFlightAnswer(), outcome: "in_flight" } };
        if (!inserted) {
          const row = (await q.query(sql.selectRow, [scope, key])).rows[0];
          if (row === undefined) throw new core.CoreError("the key row vanished after a conflict");
          const decided = core.decide(fp, row);
          return { commit: true, value: { answer: decided.answer, outcome: decided.outcome } };
        }
        const given = encode(await handler(tx));
        let fresh;
        try {
          fresh = core.freshAnswer(given.status, given.headers, given.body);
        } catch (error) {
          throw new Unstorable(error instanceof Error ? error.message : String(error));
        }
        // The answer goes with COMMIT: one round trip for both on PostgreSQL.
        const last = { text: sql.storeAnswer, params: [fresh.answer.status, fresh.headers, fresh.answer.body, scope, key] };
        return { commit: true, value: { answer: fresh.answer, outcome: "fresh" }, last };
      }, claiming),
    ))).catch((error: unknown) => {
      if (error instanceof Unstorable || error instanceof core.CoreError) return refused(error);
      throw error;
    });
    return done ?? { answer: core.inFlightAnswer(), outcome: "in_flight" };
  };

  return {
    store,
    async install() {
      await store.exec(sql.schema);
    },

    async run(request, handler) {
      const attributes = { "http.request.method": request.method, "url.path": request.path };
      const carrier = request.headers === undefined ? {} : { carrier: request.headers };
      return traced(
        request.method,
        attributes,
        async (span) => {
          const result = await runKeyed(request, handler, span);
          answered(span, result.answer.status);
          if (result.outcome !== "refused") {
            span.set({ "idempotency.decision": result.outcome });
            countDecision(result.outcome);
          }
          return result;
        },
        { kind: "server", ...carrier },
      );
    },

    async status(rawKey, scopeGiven) {
      const parsed = core.parseKey(rawKey);
      if ("answer" in parsed) return parsed.answer;
      const scope = scopeOf(scopeGiven);
      try {
        const name = core.lockName(scope, parsed.key);
        // The mark is looked up before the row, in its own statement: a transaction that ends after the
        // lookup has committed before the row's statement takes its snapshot.
        // A key in this process's set is in a transaction of PGlite's one connection (or waiting for it):
        // its row cannot be read before that transaction ends, so the mark alone answers.
        if (local.has(name)) return core.statusAnswer(true, undefined);
        const held = store.sharedLocks && Object.values((await store.query(sql.lockHeld, [name])).rows[0] ?? {})[0] === true;
        const row = (await store.query(sql.selectLiveRow, [scope, parsed.key, core.expiredBefore(now(), retention)])).rows[0];
        return core.statusAnswer(held, row);
      } catch (error) {
        return refused(error).answer;
      }
    },

    async settle(rawKey, scopeGiven) {
      const parsed = core.parseKey(rawKey);
      if ("answer" in parsed) return parsed.answer;
      const scope = scopeOf(scopeGiven);
      const { key } = parsed;
      try {
        const settled = await entered(scope, key, () =>
          store.transaction<Answer>(async (q) => {
            await q.query(sql.setLockTimeout, [core.constants.settleLockTimeout]);
            const fence = claim(scope, key, core.constants.fencedFingerprint);
            const { held, claimed: inserted } = claimed(await q.query(fence.text, fence.params));
            if (!held) return { commit: false, value: core.inFlightStatusAnswer() };
            const row = inserted ? undefined : (await q.query(sql.selectRow, [scope, key])).rows[0];
            const { commit, answer } = core.settleAnswer(inserted, row);
            return { commit, value: answer };
          }),
        );
        return settled ?? core.inFlightStatusAnswer();
      } catch (error) {
        if (error instanceof Error && "code" in error && error.code === core.constants.lockNotAvailable) return core.inFlightStatusAnswer();
        return refused(error).answer;
      }
    },

    async sweep() {
      return (await store.query(sql.sweep, [core.expiredBefore(now(), retention)])).affected;
    },
  };
}

export { pgStore, pgliteStore };
export type { PgStoreOptions, Store, Queryable };
