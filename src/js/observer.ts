// The hook surface for tracing (`ClientOptions.observer`): what a send tells an observer, and what an
// observer may give back (a header for an attempt, a trace context kept with the intent). Types only:
// the core tells one function each step of `send` and costs nothing when no observer is given.
// `idempotent-fetch-client/otel` (otel.ts) is the observer that makes OpenTelemetry spans of them.

import type { AttemptEvent, OfflineEvent, ReconcileEvent, RetryEvent } from "./events.js";
import type { SendResult } from "./results.js";

/**
 * Watches the sends of a client's intents (`new IdempotentClient({ observer })`). Called once per
 * `send` (also `reconcile()`, `client.fetch`), under the intent's send lock, before anything is sent,
 * with the intent, its request and when it was begun (milliseconds since the epoch: a reload's send
 * has the first page's); returns the watcher of that send, or `undefined` to watch nothing.
 * `otelObserver(tracer)` from `idempotent-fetch-client/otel` is one. A throwing observer fails the
 * send: keep it simple.
 */
export type IntentObserver = (intent: ObservedIntent, request: ObservedRequest, createdAt: number) => SendWatcher | undefined;

/** The intent an observer is told of when a send starts (the client's own object: read its fields, set only `trace`). */
export interface ObservedIntent {
  /** The intent's id (the first argument of `begin`). */
  readonly intentId: string;
  /** The intent's idempotency key (a secret of the intent: hash it before it leaves the page). */
  readonly key: string;
  /** The W3C `traceparent` kept with the intent by an earlier send (this page's, another page's or
   *  tab's, or the service worker's), or `undefined`. As read from storage, which any script of the
   *  origin can write: check its form before using it (`otelObserver` drops one that is not a valid
   *  `traceparent` and starts a new trace). The observer may set it to the `traceparent` to keep with
   *  the intent: written with the record before the first attempt, and given back here to every later
   *  send of the intent, after a reload, in another tab or in the service worker. */
  trace?: string | undefined;
}

/** The request an observer is told of when a send starts (the client's own object: read only). */
export interface ObservedRequest {
  /** The request's method. */
  readonly method: string;
  /** The request's absolute URL. */
  readonly url: string;
}

/** How an attempt ended without an answer: no response (`"network"`), the attempt timeout
 *  (`"timeout"`), or the caller's signal (`"abort"`). */
export type AttemptFailure = "network" | "timeout" | "abort";

/**
 * One step of a send, as a {@link SendWatcher} is told it, in order: for each attempt its `attempt`
 * event (before it is sent) and then its outcome: the attempt's `Response`, or for no answer a number,
 * `1` no response, `2` the attempt timeout, `3` the caller's signal (an {@link AttemptFailure}); the send's `retry`, `reconcile` and `offline` events as the
 * client emits them; and last the definite answer (a {@link SendResult}), or `undefined` with the
 * error the send rejects with.
 */
export type SendStep = AttemptEvent | RetryEvent | ReconcileEvent | OfflineEvent | Response | number | SendResult | undefined;

/**
 * The watcher of one send (what an {@link IntentObserver} returns): told each {@link SendStep} (one
 * function, so the core calls it the same way everywhere and pays nothing more per kind of step).
 * To an `attempt` event it may answer with one header (name and value) for that attempt, set before
 * the key header; its answers to other steps are ignored. `error` is given with the last step only,
 * when the send fails.
 */
export type SendWatcher = (step: SendStep, error?: unknown) => [name: string, value: string] | undefined | void;

