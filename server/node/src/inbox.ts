// The inbox: the receiving half of the outbox, so a message delivered at least once is applied once. The
// table and statements are the Rust library's (`inbox_sql`), the answer encoding and id bounds its code,
// through the wasm core.
import type { PGlite, Transaction as PGliteTransaction } from "@electric-sql/pglite";
import type { Pool, PoolClient } from "pg";

import * as core from "./core.js";
import type { Answer } from "./core.js";
import { encode, storeOf, type HandlerAnswer } from "./endpoint.js";
import type { Store } from "./store.js";
import { countRedeliveryRefused, traced } from "./telemetry.js";
import { runIn, type TxLike } from "./tx.js";

/** What one delivery of a message got. */
export interface Received {
  /** False for the first delivery (the work was done; its answer commits with the record), true for a re-delivery (nothing was done). */
  duplicate: boolean;
  /** The work's answer, or for a duplicate the first delivery's, marked `Idempotent-Replayed: true`. */
  answer: Answer;
}

/** Options of {@link receive}. */
export interface InboxOptions {
  /** How long message ids are remembered, in seconds: the library's default retention (a day) when absent. Keep it longer than the sender may re-deliver. */
  retentionSecs?: number;
  /**
   * The delivery's W3C `traceparent` (its `traceparent` header, which the sender's outbox sends): the receipt's
   * span (`inbox.receive`, kind consumer) is its child and linked to it, so the receipt joins the trace of the
   * request that enqueued the message. Without it the span is a child of the active span.
   */
  traceparent?: string;
}

/** Creates the inbox table (`inbox_messages`, the Rust library's schema) if missing. */
export async function installInbox(database: Pool | PGlite | Store<unknown>): Promise<void> {
  await storeOf(database).exec(core.constants.inbox.schema);
}

const nowSecs = (): number => Math.floor(Date.now() / 1000);

/**
 * One delivery of `(source, messageId)` inside the caller's transaction `tx` (READ COMMITTED, PostgreSQL's
 * default): `work` runs only for the first delivery, with the same transaction, and its answer is stored on
 * the record; a re-delivery gets the first delivery's answer and does nothing. A concurrent delivery of the
 * same id waits for the first's transaction at the record's insert: if it commits, the second is a
 * duplicate; if it rolls back, the second does the work. The record and the work run inside a savepoint:
 * when the work throws (or its answer cannot be stored), both roll back to it, the error is rethrown, and
 * what the caller wrote before stays. The receipt runs in a span continuing `options.traceparent`.
 */
export async function receive<Tx extends TxLike>(
  tx: Tx,
  source: string,
  messageId: string,
  work: (tx: Tx) => Promise<HandlerAnswer>,
  options: InboxOptions = {},
): Promise<Received> {
  const invalid = core.inboxIdsError(source, messageId);
  if (invalid !== undefined) throw new core.CoreError(invalid);
  const attributes = {
    "messaging.operation.type": "process",
    "messaging.message.id": messageId,
    "messaging.destination.name": source,
  };
  return traced("inbox.receive", attributes, () => receiveIn(tx, source, messageId, work, options), { kind: "consumer", traceparent: options.traceparent });
}

async function receiveIn<Tx extends TxLike>(
  tx: Tx,
  source: string,
  messageId: string,
  work: (tx: Tx) => Promise<HandlerAnswer>,
  options: InboxOptions,
): Promise<Received> {
  const { inbox } = core.constants;
  await runIn(tx, `SAVEPOINT ${inbox.savepoint}`, []);
  let received: Received;
  try {
    received = await apply(tx, source, messageId, work, options.retentionSecs ?? core.constants.defaultRetentionSecs);
  } catch (error) {
    await runIn(tx, `ROLLBACK TO ${inbox.savepoint}`, []);
    await runIn(tx, `RELEASE ${inbox.savepoint}`, []);
    throw error;
  }
  await runIn(tx, `RELEASE ${inbox.savepoint}`, []);
  return received;
}

async function apply<Tx extends TxLike>(
  tx: Tx,
  source: string,
  messageId: string,
  work: (tx: Tx) => Promise<HandlerAnswer>,
  retentionSecs: number,
): Promise<Received> {
  const { inbox } = core.constants;
  const now = nowSecs();
  // An expired record counts as absent even before a sweep deletes it.
  await runIn(tx, inbox.forgetExpired, [source, messageId, core.expiredBefore(now, retentionSecs)]);
  // Waits here while another transaction holds an uncommitted insert of the same id.
  const inserted = await runIn(tx, inbox.insert, [source, messageId, now]);
  if (inserted.affected === 0) {
    const { rows } = await runIn(tx, inbox.selectAnswer, [source, messageId]);
    const row = rows[0];
    if (row === undefined) throw new core.CoreError("an inbox record vanished while it was read");
    countRedeliveryRefused();
    return { duplicate: true, answer: core.inboxAnswer(row, true) };
  }
  const given = encode(await work(tx));
  const fresh = core.freshAnswer(given.status, given.headers, given.body);
  await runIn(tx, inbox.storeAnswer, [fresh.answer.status, fresh.headers, fresh.answer.body, source, messageId]);
  return { duplicate: false, answer: fresh.answer };
}

/**
 * One delivery in a transaction of its own on `database`: BEGIN, {@link receive}, COMMIT (ROLLBACK and
 * rethrow when the work throws). The work gets the transaction (a pg `PoolClient` or PGlite's).
 */
export function receiveMessage(
  database: Pool,
  source: string,
  messageId: string,
  work: (tx: PoolClient) => Promise<HandlerAnswer>,
  options?: InboxOptions,
): Promise<Received>;
export function receiveMessage(
  database: PGlite,
  source: string,
  messageId: string,
  work: (tx: PGliteTransaction) => Promise<HandlerAnswer>,
  options?: InboxOptions,
): Promise<Received>;
export function receiveMessage<Tx>(
  database: Store<Tx>,
  source: string,
  messageId: string,
  work: (tx: Tx) => Promise<HandlerAnswer>,
  options?: InboxOptions,
): Promise<Received>;
export async function receiveMessage<Tx>(
  database: Pool | PGlite | Store<Tx>,
  source: string,
  messageId: string,
  work: (tx: Tx) => Promise<HandlerAnswer>,
  options: InboxOptions = {},
): Promise<Received> {
  const store = storeOf(database as Store<unknown>) as Store<Tx>;
  return store.transaction(async (_q, tx) => ({
    commit: true,
    value: await receive(tx as Tx & TxLike, source, messageId, work, options),
  }));
}

/** Deletes inbox records past the retention; resolves to how many. The app's own rows are never touched. */
export async function sweepInbox(database: Pool | PGlite | Store<unknown>, options: InboxOptions = {}): Promise<number> {
  const cutoff = core.expiredBefore(nowSecs(), options.retentionSecs ?? core.constants.defaultRetentionSecs);
  return (await storeOf(database).query(core.constants.inbox.sweep, [cutoff])).affected;
}
