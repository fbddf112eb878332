// The transactional outbox: work that leaves the database (an email, a partner's API), written as a message
// in the handler's own transaction and delivered at least once after the commit by a worker. The table and
// statements are the Rust library's (`outbox_sql`), the retry schedule is the client crate's backoff, both
// through the wasm core; a Rust and a Node service can share one outbox.
//
// Traces: enqueue records the W3C `traceparent` of the active span (the request's, with @opentelemetry/api
// installed) with the message, so each delivery's span joins the trace of the request that enqueued it; the
// delivery function sends `deliveryTraceparent(message)` as the `traceparent` header, and the receiver's inbox
// (`receive`'s `traceparent` option) continues it. OpenTelemetry's messaging conventions require a link from
// the sending and the processing span to the message's creation context and leave the parent open: each
// delivery span is both a child of that context and linked to it. The child makes request, delivery and
// receipt one trace, which is what an operator follows from one intent (a message has one creation context
// and one receiver, so the batch case the conventions link for instead does not arise); the link keeps the
// conventions, for tools that follow links.
import { getRandomValues, randomBytes } from "node:crypto";

import type { PGlite } from "@electric-sql/pglite";
import type { Pool } from "pg";

import * as core from "./core.js";
import { storeOf } from "./endpoint.js";
import type { Store } from "./store.js";
import { sleep } from "./sleep.js";
import { activeTraceparent, countDeliveryAttempt, observeBacklog, traced, validTraceparent } from "./telemetry.js";
import { runIn, type TxLike } from "./tx.js";

/** The header a delivery carries the message id in, so the receiver deduplicates (see {@link receive}). */
export const MESSAGE_ID_HEADER = core.IDEMPOTENCY_KEY_HEADER;

/** A message to deliver after the commit. */
export interface Message {
  /** Its id: 32 hex digits from the CSPRNG, what the receiver deduplicates by. */
  id: string;
  /** What kind of message it is (the delivery function dispatches on it), e.g. `"invite-email"`. */
  topic: string;
  /** The message (JSON text). */
  payload: string;
  /**
   * The W3C `traceparent` of the span that enqueued it: {@link enqueue} records the active span's when this is
   * absent (or not a valid W3C value: no other text is stored) and keeps it when set; the worker reads it back
   * with the claim.
   */
  traceparent?: string;
}

/** A message with a fresh id and `payload` as JSON. */
export function newMessage(topic: string, payload: unknown): Message {
  return { id: randomBytes(16).toString("hex"), topic, payload: JSON.stringify(payload) };
}

const nowSecs = (): number => Math.floor(Date.now() / 1000);

/**
 * Writes `message` into the outbox inside the caller's transaction (the `tx` a handler gets: a pg
 * `PoolClient` inside `BEGIN`, or PGlite's transaction), so it exists exactly when the handler's rows do.
 * With `orderingKey`, it is delivered only after every message enqueued before it with the same key; without,
 * in any order, several at once.
 */
export async function enqueue(tx: TxLike, message: Message, orderingKey?: string): Promise<void> {
  const traceparent = validTraceparent(message.traceparent) ?? activeTraceparent() ?? null;
  await runIn(tx, core.constants.outbox.enqueue, [message.id, message.topic, message.payload, nowSecs(), orderingKey ?? null, traceparent]);
}

/**
 * The `traceparent` header to send with a delivery of `message`: the delivery span's when @opentelemetry/api
 * traces it (the receiver's span is then its child), else the one the message was enqueued with (the
 * receiver still joins the request's trace). Call it in the delivery function, where the delivery span is
 * the active one.
 */
export function deliveryTraceparent(message: Message): string | undefined {
  return activeTraceparent() ?? message.traceparent;
}

/** Creates the outbox table (`outbox_messages`, the Rust library's schema) if missing. */
export async function installOutbox(database: Pool | PGlite | Store<unknown>): Promise<void> {
  await storeOf(database).exec(core.constants.outbox.schema);
}

/** How far the outbox is behind, for metrics. */
export interface Backlog {
  /** Messages not delivered yet (due, claimed, or waiting for a retry). */
  undelivered: number;
  /** How long the oldest undelivered message has waited since it was enqueued, in whole seconds; undefined when nothing waits. */
  oldestAgeSecs: number | undefined;
}

/** The outbox's backlog. */
export async function backlog(database: Pool | PGlite | Store<unknown>): Promise<Backlog> {
  const { rows } = await storeOf(database).query(core.constants.outbox.backlog);
  const [count, oldest] = Object.values(rows[0] ?? {});
  return {
    undelivered: Number(count ?? 0),
    oldestAgeSecs: oldest === null || oldest === undefined ? undefined : Math.max(0, nowSecs() - Number(oldest)),
  };
}

/** The delivery worker's settings (each optional; the Rust library's defaults). */
export interface WorkerOptions {
  /** How long a claim lasts; every delivery of a pass ends within a third of it. @defaultValue 30000 */
  leaseMs?: number;
  /** How long the worker sleeps after a pass that claimed less than a full batch. @defaultValue 200 */
  pollMs?: number;
  /** The first retry's backoff step. @defaultValue 200 */
  baseDelayMs?: number;
  /** No retry waits longer than this. @defaultValue 10000 */
  maxDelayMs?: number;
  /** Messages claimed per pass. @defaultValue 64 */
  batch?: number;
  /** Deliveries in flight at once, at most (at least one). @defaultValue 16 */
  concurrency?: number;
  /** Where the worker reports a failed delivery, claim or mark (they are retried). @defaultValue nothing */
  onError?: (error: unknown, message?: Message) => void;
}

/** What one pass did. */
export interface Pass {
  /** Messages claimed. */
  claimed: number;
  /** Messages delivered and marked so. */
  delivered: number;
  /** Messages whose delivery failed or timed out (scheduled for a retry). */
  failed: number;
}

/**
 * Delivers one message: resolves when the receiver took it, throws (or rejects) to have it retried. Send
 * `message.id` with it ({@link MESSAGE_ID_HEADER}): a message may be delivered more than once.
 */
export type Deliver = (message: Message, attempts: number) => Promise<void>;

/** The delivery worker over one database. */
export interface OutboxWorker {
  /** The settings in force. */
  readonly settings: Required<Omit<WorkerOptions, "onError">>;
  /**
   * One pass: claims up to `batch` due messages, delivers them at most `concurrency` at a time, then writes
   * every mark of the pass in one statement: delivered for each success, a retry (the backoff) for each
   * failure and each delivery not done within a third of the lease. Rejects only when the claim failed;
   * marks that cannot be written are reported, and the claims run out and the messages are sent again.
   */
  deliverOnce(): Promise<Pass>;
  /** The wait before the next attempt of a message that failed `attempts` times, in ms (full jitter). */
  retryDelayMs(attempts: number): number;
  /**
   * Delivers due messages until `signal` aborts: passes back to back while each claims a full batch, a
   * poll sleep after one that claims less (or whose claim failed). A pass in progress finishes first.
   * While it runs, the outbox's backlog is reported to the app's OpenTelemetry metric reader
   * (`outbox_backlog_messages`, `outbox_oldest_message_age_seconds`), read from the table at each collection.
   */
  run(signal: AbortSignal): Promise<void>;
}

/** One delivery's span attributes: OpenTelemetry's messaging conventions and the attempt, as the Rust library's. */
function deliveryAttributes(message: Message, attempts: number): Record<string, string | number> {
  return {
    "messaging.operation.type": "send",
    "messaging.message.id": message.id,
    "messaging.destination.name": message.topic,
    "outbox.attempt": attempts,
  };
}

/** Rejects with `why` once `deadline` (epoch ms) passes. */
function timeoutAt(deadline: number, why: string): { promise: Promise<never>; cancel: () => void } {
  let timer: NodeJS.Timeout | undefined;
  const promise = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(why)), Math.max(0, deadline - Date.now()));
  });
  return { promise, cancel: () => clearTimeout(timer) };
}

/**
 * The delivery worker (one per process; several processes may share the database: a claim takes rows
 * with `FOR UPDATE SKIP LOCKED` and lasts a lease, so two never send one message at the same moment, and a
 * claim left by a crashed process runs out and is taken again).
 *
 * ```ts
 * const worker = outboxWorker(pool, async (message) => {
 *   const traceparent = deliveryTraceparent(message);
 *   const headers = { [MESSAGE_ID_HEADER]: message.id, ...(traceparent === undefined ? {} : { traceparent }) };
 *   const r = await fetch(mailUrl, { method: "POST", headers, body: message.payload });
 *   if (!r.ok) throw new Error(`mail answered ${r.status}`);
 * });
 * const stop = new AbortController();
 * void worker.run(stop.signal);
 * ```
 */
export function outboxWorker(database: Pool | PGlite | Store<unknown>, deliver: Deliver, options: WorkerOptions = {}): OutboxWorker {
  const store = storeOf(database);
  const defaults = core.constants.outboxWorker;
  const settings = {
    leaseMs: options.leaseMs ?? defaults.leaseMs,
    pollMs: options.pollMs ?? defaults.pollMs,
    baseDelayMs: options.baseDelayMs ?? defaults.baseDelayMs,
    maxDelayMs: options.maxDelayMs ?? defaults.maxDelayMs,
    batch: options.batch ?? defaults.batch,
    concurrency: Math.max(1, options.concurrency ?? defaults.concurrency),
  };
  const onError = options.onError ?? (() => undefined);
  const { outbox } = core.constants;

  const retryDelayMs = (attempts: number): number =>
    core.retryDelay(settings.baseDelayMs, settings.maxDelayMs, attempts, getRandomValues(new Uint8Array(core.constants.retryRandomBytes)));

  async function deliverOnce(): Promise<Pass> {
    const now = Date.now();
    // Taken before the claim, so every delivery ends before the claim does.
    const deadline = now + settings.leaseMs / 3;
    const until = now + settings.leaseMs;
    const { rows } = await store.query(outbox.claim, [until, now, settings.batch]);
    const claimed = rows.map((row) => {
      const message: Message = { id: String(row["id"]), topic: String(row["topic"]), payload: String(row["payload"]) };
      const traceparent = row["traceparent"];
      if (typeof traceparent === "string") message.traceparent = traceparent;
      return { message, attempts: Number(row["attempts"]) };
    });
    const pass: Pass = { claimed: claimed.length, delivered: 0, failed: 0 };
    if (claimed.length === 0) return pass;
    const delivered: string[] = [];
    const retryIds: string[] = [];
    const retryAt: number[] = [];
    let next = 0;
    const lane = async (): Promise<void> => {
      for (let i = next++; i < claimed.length; i = next++) {
        const { message, attempts } = claimed[i]!;
        const limit = timeoutAt(deadline, "timed out");
        try {
          const delivery = () => Promise.race([deliver(message, attempts), limit.promise]);
          await traced("outbox.deliver", deliveryAttributes(message, attempts), delivery, { kind: "producer", traceparent: message.traceparent });
          delivered.push(message.id);
          countDeliveryAttempt(true);
        } catch (error) {
          countDeliveryAttempt(false);
          onError(error, message);
          retryIds.push(message.id);
          retryAt.push(Date.now() + retryDelayMs(attempts));
        } finally {
          limit.cancel();
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(settings.concurrency, claimed.length) }, lane));
    try {
      await store.query(outbox.mark, [nowSecs(), delivered, retryIds, retryAt, until]);
      pass.delivered = delivered.length;
      pass.failed = retryIds.length;
    } catch (error) {
      // The claims run out and the messages are sent again; the receiver refuses the duplicates.
      onError(error);
    }
    return pass;
  }

  async function run(signal: AbortSignal): Promise<void> {
    const unobserve = observeBacklog(() => backlog(store));
    try {
      await loop(signal);
    } finally {
      unobserve();
    }
  }

  async function loop(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      let busy = false;
      try {
        busy = (await deliverOnce()).claimed >= settings.batch;
      } catch (error) {
        onError(error);
      }
      if (busy) {
        // Lets the process's other work in between passes of a long backlog.
        await new Promise((resolve) => setImmediate(resolve));
        continue;
      }
      await sleep(settings.pollMs, signal);
    }
  }

  return { settings, deliverOnce, retryDelayMs, run };
}
