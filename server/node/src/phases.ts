// Atomic phases: work that calls something outside the database (a payment provider) as steps on the key
// row, each one transaction of the app's, with a named recovery point and a lease. The statements are the
// Rust library's (`phases_sql`), the decisions (the take-over of a row, the derived downstream key, the
// points a step may reach) its code, through the wasm core: a Rust and a Node service share the rows.
import { randomBytes } from "node:crypto";

import type { PGlite, Transaction as PGliteTransaction } from "@electric-sql/pglite";
import type { Pool, PoolClient } from "pg";

import * as core from "./core.js";
import type { Answer } from "./core.js";
import { encode, storeOf, type HandlerAnswer, type KeyedRequest } from "./endpoint.js";
import type { Queryable, Store } from "./store.js";
import { activeTraceparent, traced, validTraceparent } from "./telemetry.js";

/** The recovery point of a key row {@link AtomicPhases.begin} inserts (the Rust library's `STARTED`). */
export const STARTED: string = core.constants.phases.started;
/** The recovery point of a row with its answer stored (the Rust library's `FINISHED`). */
export const FINISHED: string = core.constants.phases.finished;

/** A step found that the caller no longer holds the key row (its lease ran out and another caller took it over, or it finished): nothing was written. */
export class LeaseLostError extends Error {
  /** `LeaseLostError`. */
  override name = "LeaseLostError";
  constructor() {
    super("the lease on the key row was lost to another holder");
  }
}

/**
 * Another transaction held the key row longer than the phases wait for it (`keyLockTimeout`, or the
 * session's own `lock_timeout` or `statement_timeout`): the step wrote nothing; answer 409 and let the
 * client retry (the Rust library's `StoreError::KeyBusy`).
 */
export class KeyBusyError extends Error {
  /** `KeyBusyError`. */
  override name = "KeyBusyError";
  constructor(options?: { cause?: unknown }) {
    super("the key row is held by another transaction", options);
  }
}

/** The error a statement waiting for a key row ended with, as {@link KeyBusyError} when it gave up waiting. */
function keyWait(error: unknown): unknown {
  const code = error instanceof Error && "code" in error ? error.code : undefined;
  const { lockNotAvailable, queryCanceled } = core.constants;
  return code === lockNotAvailable || code === queryCanceled ? new KeyBusyError({ cause: error }) : error;
}

/** Runs `step`, turning a wait for a key row that gave up into {@link KeyBusyError}. */
async function waitingForKey<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (error) {
    throw keyWait(error);
  }
}

/** The lease tokens of the holds this process made, out of the app's sight (a token is the proof of the hold). */
const tokens = new WeakMap<Held, string>();

/** A key row whose lease this caller holds (the Rust library's `Held`). */
export class Held {
  /**
   * @param scope - The scope.
   * @param key - The client's key.
   * @param point - Where the work stands.
   * @param rowId - The row's own random id.
   * @param traceparent - The W3C `traceparent` of the request that claimed the row.
   */
  constructor(
    /** The scope. */
    readonly scope: string,
    /** The client's key. */
    readonly key: string,
    /** Where the work stands: {@link STARTED} or the last point an {@link AtomicPhases.advance} reached. */
    public point: string,
    /** The row's own random id (128 bits from the CSPRNG). */
    readonly rowId: string,
    /**
     * The W3C `traceparent` of the request that claimed the row: the span active when {@link AtomicPhases.begin}
     * was called (with `@opentelemetry/api`), kept on the row from its insert; undefined when none was active.
     * The completer's span continues it (see phases-completer.ts), so work finished after a crash joins the
     * trace of the request that started it.
     */
    readonly traceparent?: string,
  ) {}

  /**
   * The idempotency key for the external call made at `step`: lowercase hex SHA-256 of the row id and the
   * step (the Rust library's code). The same step of the same row always gets the same key, so a call
   * repeated after a crash is a replay at a service that honours idempotency keys; never the client's key.
   */
  downstreamKey(step: string): string {
    return core.downstreamKey(this.rowId, step);
  }
}

/** What {@link AtomicPhases.begin} found: the key held by this caller, or the answer that needs no work. */
export type Begun =
  | {
      /** The key is this caller's: new (at {@link STARTED}) or taken over from a holder whose lease ran out. */
      held: Held;
    }
  | {
      /** Not held. */
      held?: undefined;
      /** `replay` (finished), `mismatch` (422), `in_flight` (409: another holder's lease lives), `fenced` (410), or `refused` (a bad key: 400). */
      outcome: core.Decision | "refused";
      /** What to send. */
      answer: Answer;
    };

/** Options of {@link atomicPhases}. */
export interface PhasesOptions<Tx> {
  /** The database: a node-postgres `Pool`, a `PGlite`, or a store. */
  database: Pool | PGlite | Store<Tx>;
  /** The scope of keys without one of their own. @defaultValue `"public"` */
  scope?: string;
  /** How long a key row is kept, in seconds: the library's default retention (a day) when absent. */
  retentionSecs?: number;
  /**
   * How long a hold lasts without a step, in milliseconds: each step renews it. A holder that crashed is
   * taken over once it runs out, so it must be longer than the longest external call between two steps.
   * @defaultValue 30000
   */
  leaseMs?: number;
}

/**
 * The phases over one database (the functions of the Rust library's `phases::postgres`). `begin`, `advance`,
 * `finish`, `release` and `abandon` throw {@link KeyBusyError} (nothing written) when another transaction
 * holds the key row longer than `constants.keyLockTimeout`.
 */
export interface AtomicPhases<Tx> {
  /** The store the key rows are in. */
  readonly store: Store<Tx>;
  /** The lease, in milliseconds. */
  readonly leaseMs: number;
  /** Creates the key table (`idempotency_records`, the Rust library's schema) if missing. */
  install(): Promise<void>;
  /**
   * Starts (or takes over) the phased work of a keyed request, in one transaction: a new key is inserted at
   * {@link STARTED} and held, keeping the active span's `traceparent` ({@link Held.traceparent}); an unfinished row of the same request whose lease ran out is taken over at its
   * point; anything else is answered (replay, 422, 409 with `Retry-After`, 410, or 400 for a bad key).
   */
  begin(request: KeyedRequest): Promise<Begun>;
  /**
   * One step, in one transaction: checks the lease, runs `work` (the app's rows for this step, through the
   * transaction it gets; what it resolves to is not used) and moves the row to `point`, renewing the lease. Throws {@link LeaseLostError}
   * (nothing written) when another caller took the row over; `work` throwing rolls the step back.
   */
  advance(held: Held, point: string, work?: (tx: Tx) => Promise<unknown>): Promise<void>;
  /** The last step: checks the lease, runs `work` and stores its answer (replayed from then on), in one transaction. */
  finish(held: Held, work: (tx: Tx) => Promise<HandlerAnswer>): Promise<Answer>;
  /** Gives the row up unfinished: the next request with the key, or the completer, takes it over at once, at its point. */
  release(held: Held): Promise<void>;
  /**
   * Deletes a row this caller holds at {@link STARTED}, as if its request had never come (a completer has no
   * request body to start the work from). A row past {@link STARTED} (its external call may have happened)
   * or taken over is kept: {@link LeaseLostError}.
   */
  abandon(held: Held): Promise<void>;
  /** For a completer: takes over up to `limit` unfinished rows whose lease ran out (`FOR UPDATE SKIP LOCKED`). */
  unfinished(limit: number): Promise<Held[]>;
}

const nowSecs = (): number => Math.floor(Date.now() / 1000);

/** The `idempotency.phase` of a begin's span (the Rust library's name for it). */
const STARTED_SPAN = "begin";

/** One phase's transaction in its span, `idempotency.phase` its point, as the Rust library's phases name it. */
const phase = <T>(point: string, work: () => Promise<T>): Promise<T> => traced("idempotency.phase", { "idempotency.phase": point }, work);
const newToken = (): string => randomBytes(16).toString("hex");

/**
 * Atomic phases over `database`, on the key table the endpoint uses (a route is either phased or run by
 * the endpoint: a phased row is in flight or done to the endpoint's `run`, and the reverse).
 *
 * ```ts
 * const phases = atomicPhases({ database: pool });
 * const begun = await phases.begin(request);
 * if (!begun.held) return begun.answer;                     // replay, 409, 422, 410
 * const { held } = begun;
 * await phases.advance(held, "charge_started", (tx) => insertOrder(tx, held.rowId));
 * const charge = await provider.charge(amount, held.downstreamKey("charge"));
 * await phases.advance(held, "charged", (tx) => recordCharge(tx, held.rowId, charge));
 * return phases.finish(held, async () => ({ status: 201, body: { charge } }));
 * ```
 */
export function atomicPhases(options: PhasesOptions<PoolClient> & { database: Pool }): AtomicPhases<PoolClient>;
export function atomicPhases(options: PhasesOptions<PGliteTransaction> & { database: PGlite }): AtomicPhases<PGliteTransaction>;
export function atomicPhases<Tx>(options: PhasesOptions<Tx> & { database: Store<Tx> }): AtomicPhases<Tx>;
export function atomicPhases(options: PhasesOptions<unknown>): AtomicPhases<unknown> {
  const store = storeOf(options.database);
  const defaultScope = options.scope ?? "public";
  const retention = options.retentionSecs ?? core.constants.defaultRetentionSecs;
  const leaseMs = options.leaseMs ?? 30_000;
  const { phases: sql } = core.constants;
  const leaseEnd = (): number => Date.now() + leaseMs;
  // The first statement of every phase transaction: its waits for a key row are bounded (sent with BEGIN).
  const boundWaits = { text: sql.setKeyLockTimeout, params: [core.constants.keyLockTimeout] };

  const tokenOf = (held: Held): string => {
    const token = tokens.get(held);
    if (token === undefined) throw new LeaseLostError();
    return token;
  };

  /** Locks the row and checks `held` still holds it. */
  const checkLease = async (q: Queryable, held: Held): Promise<void> => {
    const row = (await q.query(sql.checkLease, [held.scope, held.key, FINISHED])).rows[0];
    if (row?.["lock_token"] !== tokenOf(held)) throw new LeaseLostError();
  };

  const hold = (scope: string, key: string, point: string, rowId: unknown, token: string, traceparent: unknown): Held => {
    if (typeof rowId !== "string") throw new core.CoreError(`unfinished key ${key} has no row_id`);
    const held = new Held(scope, key, point, rowId, typeof traceparent === "string" ? traceparent : undefined);
    tokens.set(held, token);
    return held;
  };

  return {
    store,
    leaseMs,
    async install() {
      await store.exec(core.constants.sql.schema);
    },

    async begin(request) {
      const parsed = core.keyFromHeader(request.keyHeader);
      if ("answer" in parsed) return { outcome: "refused", answer: parsed.answer };
      const { key } = parsed;
      const scope = request.scope ?? defaultScope;
      const scopeError = core.scopeError(scope);
      if (scopeError !== undefined) throw new core.CoreError(scopeError);
      const fp = core.fingerprint(request.method, request.path, request.body);
      // The caller's span (the request's), read before the begin's own span starts.
      const traceparent = validTraceparent(activeTraceparent()) ?? null;
      return phase(STARTED_SPAN, () => waitingForKey(() => store.transaction<Begun>(async (q) => {
        const t = nowSecs();
        await q.query(sql.forgetExpired, [scope, key, core.expiredBefore(t, retention)]);
        const [rowId, token] = [newToken(), newToken()];
        const inserted = await q.query(sql.insertStarted, [scope, key, fp, t, STARTED, rowId, token, leaseEnd(), traceparent]);
        if (inserted.affected === 1) return { commit: true, value: { held: hold(scope, key, STARTED, rowId, token, traceparent) } };
        const row = (await q.query(sql.selectForBegin, [scope, key])).rows[0];
        if (row === undefined) throw new core.CoreError("the key row vanished after a conflict");
        const decided = core.beginDecision(fp, row, Number(row["locked_until"]), Date.now());
        if (!("take_over" in decided)) return { commit: true, value: decided };
        await q.query(sql.takeOver, [token, leaseEnd(), scope, key]);
        return { commit: true, value: { held: hold(scope, key, String(row["recovery_point"]), row["row_id"], token, row["traceparent"]) } };
      }, boundWaits)));
    },

    async advance(held, point, work) {
      const refused = core.advancePointError(point);
      if (refused !== undefined) throw new core.CoreError(refused);
      await phase(point, () => waitingForKey(() => store.transaction(async (q, tx) => {
        await checkLease(q, held);
        await work?.(tx);
        await q.query(sql.advance, [point, leaseEnd(), held.scope, held.key]);
        return { commit: true, value: undefined };
      }, boundWaits)));
      held.point = point;
    },

    async finish(held, work) {
      const answer = await phase(FINISHED, () => waitingForKey(() => store.transaction<Answer>(async (q, tx) => {
        await checkLease(q, held);
        const given = encode(await work(tx));
        const fresh = core.freshAnswer(given.status, given.headers, given.body);
        await q.query(sql.finish, [fresh.answer.status, fresh.headers, fresh.answer.body, FINISHED, held.scope, held.key]);
        return { commit: true, value: fresh.answer };
      }, boundWaits)));
      held.point = FINISHED;
      tokens.delete(held);
      return answer;
    },

    async release(held) {
      await waitingForKey(() => store.query(sql.release, [held.scope, held.key, tokenOf(held)]));
      tokens.delete(held);
    },

    async abandon(held) {
      const deleted = await waitingForKey(() => store.query(sql.abandon, [held.scope, held.key, tokenOf(held), STARTED]));
      if (deleted.affected !== 1) throw new LeaseLostError();
      tokens.delete(held);
    },

    async unfinished(limit) {
      return store.transaction<Held[]>(async (q) => {
        const { rows } = await q.query(sql.unfinished, [FINISHED, Date.now(), limit]);
        const taken: Held[] = [];
        for (const row of rows) {
          const [scope, key, token] = [String(row["scope"]), String(row["key"]), newToken()];
          await q.query(sql.takeOver, [token, leaseEnd(), scope, key]);
          taken.push(hold(scope, key, String(row["recovery_point"]), row["row_id"], token, row["traceparent"]));
        }
        return { commit: true, value: taken };
      });
    },
  };
}
