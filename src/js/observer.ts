// The hook surface for tracing (`ClientOptions.observer`): what a send tells an observer, and what an
// observer may give back (headers for an attempt, a trace context kept with the intent). Types only:
// the core calls these at a few points of `send` and costs nothing when no observer is given.
// `idempotent-fetch-client/otel` (otel.ts) is the observer that makes OpenTelemetry spans of them.

import type { AttemptEvent, OfflineEvent, ReconcileEvent, RetryEvent } from "./events.js";
import type { SendResult } from "./results.js";

/**
 * Watches the sends of a client's intents (`new IdempotentClient({ observer })`). Called once per
 * `send` (also `reconcile()`, `client.fetch`), under the intent's send lock, before anything is sent;
 * returns the watcher of that send, or `undefined` to watch nothing. `otelObserver(tracer)` from
 * `idempotent-fetch-client/otel` is one. A throwing observer fails the send: keep it simple.
 */
export type IntentObserver = (send: ObservedSend) => SendWatcher | undefined;

/** What an observer is told when a send starts. */
export interface ObservedSend {
  /** The intent's id (the first argument of `begin`). */
  intentId: string;
  /** The intent's idempotency key (a secret of the intent: hash it before it leaves the page). */
  key: string;
  /** The request's method. */
  method: string;
  /** The request's absolute URL. */
  url: string;
  /** When the intent was begun (milliseconds since the epoch): a reload's send has the first page's. */
  createdAt: number;
  /** The W3C `traceparent` kept with the intent by an earlier send (this page's, another page's or
   *  tab's, or the service worker's), or `undefined`. As read from storage, which any script of the
   *  origin can write: check its form before using it (`otelObserver` drops one that is not a valid
   *  `traceparent` and starts a new trace). */
  trace: string | undefined;
}

/** How an attempt ended without an answer: no response (`"network"`), the attempt timeout
 *  (`"timeout"`), or the caller's signal (`"abort"`). */
export type AttemptFailure = "network" | "timeout" | "abort";

/** The watcher of one send (what an {@link IntentObserver} returns). */
export interface SendWatcher {
  /** A W3C `traceparent` to keep in the intent's record: written with the record before the first
   *  attempt, and given back as {@link ObservedSend.trace} to every later send of the intent, after a
   *  reload, in another tab or in the service worker. `undefined` keeps what is stored. */
  readonly trace?: string | undefined;
  /** An attempt is about to be sent: the headers to add to it (the key header is set after them). */
  attempt(event: AttemptEvent): Record<string, string> | undefined;
  /** The attempt ended: its answer's HTTP status, or why there was no answer. */
  attempted(outcome: number | AttemptFailure): void;
  /** The send's other events, as the client emits them: a retry scheduled, a question about the key,
   *  a wait for the network. */
  event(event: RetryEvent | ReconcileEvent | OfflineEvent): void;
  /** The send is over: its definite answer, or (`result` undefined) the error it rejects with. */
  end(result: SendResult | undefined, error?: unknown): void;
}
