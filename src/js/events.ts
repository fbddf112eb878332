// Events for the UI: client-wide listeners (`client.addEventListener`) and a send's own callbacks
// (`onAttempt`, `onRetry`). A throwing listener is ignored: UI code must not break a payment in flight.

import { invalidOptions, type ErrorCode } from "./errors.js";

/** An attempt is about to be sent (`attempt` listeners, `send({ onAttempt })`). */
export interface AttemptEvent {
  /** The event type. */
  type: "attempt";
  /** The intent's id (the first argument of `begin`). */
  intentId: string;
  /** The intent's idempotency key. */
  key: string;
  /** Attempt number within this `send`, 1-based. */
  attempt: number;
  /** Attempts across every `send` of this intent, including earlier page loads. */
  totalAttempts: number;
}
/** An attempt got no definite answer and the next one is scheduled (`retry` listeners, `send({ onRetry })`). */
export interface RetryEvent {
  /** The event type. */
  type: "retry";
  /** The intent's id (the first argument of `begin`). */
  intentId: string;
  /** The intent's idempotency key. */
  key: string;
  /** The attempt that just failed, 1-based. */
  attempt: number;
  /** How long until the next attempt. */
  delayMs: number;
  /** Why, for the UI: "server busy (503)", "network error", "timed out", ... */
  reason: string;
  /** The HTTP status of the failed attempt, if there was an answer. */
  status: number | null;
}
/** The send waits for the network (`navigator.onLine` is false) instead of spending attempts. */
export interface OfflineEvent {
  /** The event type. */
  type: "offline";
  /** The intent's id (the first argument of `begin`). */
  intentId: string;
  /** The intent's idempotency key. */
  key: string;
}
/** A 2xx answer: the intent succeeded and its key is retired. */
export interface SuccessEvent {
  /** The event type. */
  type: "success";
  /** The intent's id (the first argument of `begin`). */
  intentId: string;
  /** The intent's idempotency key. */
  key: string;
  /** The answer's HTTP status. */
  status: number;
  /** Attempts across every send of the intent. */
  attempts: number;
  /** The server replayed a stored answer (the work was done by an earlier attempt). */
  replayed: boolean;
}
/** A send ended without success: a definite non-2xx answer (`HTTP_STATUS`) or an error code. */
export interface FailureEvent {
  /** The event type. */
  type: "failure";
  /** The intent's id (the first argument of `begin`). */
  intentId: string;
  /** The intent's key, or null when it failed before one was known. */
  key: string | null;
  /** The HTTP status of the last answer, if there was one. */
  status: number | null;
  /** `HTTP_STATUS` for a definite non-2xx answer, else the error's code. */
  code: ErrorCode | "HTTP_STATUS";
  /** What happened, for logs. */
  message: string;
}
/** The sweep found the intent's key older than `keyTtlMs` and marked it expired: it is never re-sent
 *  (a send of it rejects `EXPIRED`). */
export interface ExpiredEvent {
  /** The event type. */
  type: "expired";
  /** The intent's id (the first argument of `begin`). */
  intentId: string;
  /** The intent's idempotency key. */
  key: string;
}
/** The client asks the server what became of the key (the key-status protocol). */
export interface ReconcileEvent {
  /** The event type. */
  type: "reconcile";
  /** The intent's id (the first argument of `begin`). */
  intentId: string;
  /** The intent's idempotency key. */
  key: string;
}
/** A cross-origin API hid a header this library reads: its key status says the answer carries it, and the
 *  page's answer with that status did not show it (once per origin and client). */
export interface CorsEvent {
  /** The event type. */
  type: "cors";
  /** The intent's id (the first argument of `begin`). */
  intentId: string;
  /** The intent's idempotency key. */
  key: string;
  /** The API's origin. */
  origin: string;
  /** The line to add to its CORS answers. */
  fix: string;
}
/** The client's storage cannot be used (blocked, full, failing): it continues in memory. */
export interface StorageFallbackEvent {
  /** The event type. */
  type: "storagefallback";
  /** Why (also in `client.storageFallback`). */
  reason: string;
}

/** Event types and their payloads, for `client.addEventListener`. */
export interface ClientEventMap {
  /** {@inheritDoc AttemptEvent} */
  attempt: AttemptEvent;
  /** {@inheritDoc RetryEvent} */
  retry: RetryEvent;
  /** {@inheritDoc OfflineEvent} */
  offline: OfflineEvent;
  /** {@inheritDoc SuccessEvent} */
  success: SuccessEvent;
  /** {@inheritDoc FailureEvent} */
  failure: FailureEvent;
  /** {@inheritDoc ExpiredEvent} */
  expired: ExpiredEvent;
  /** {@inheritDoc StorageFallbackEvent} */
  storagefallback: StorageFallbackEvent;
  /** {@inheritDoc CorsEvent} */
  cors: CorsEvent;
  /** {@inheritDoc ReconcileEvent} */
  reconcile: ReconcileEvent;
}

export type ClientEvent = ClientEventMap[keyof ClientEventMap];
export type Listener = (event: ClientEvent) => void;

const EVENT_TYPES: readonly (keyof ClientEventMap)[] = [
  "attempt",
  "retry",
  "offline",
  "success",
  "failure",
  "expired",
  "storagefallback",
  "cors",
  "reconcile",
];

/** Calls `listener(event)`, ignoring what it throws. */
export function call<E>(listener: ((event: E) => void) | undefined, event: E): void {
  try {
    listener?.(event);
  } catch {
    // a broken listener must not break a payment
  }
}

/** Client-wide listeners by event type (one function is kept once per type, like `EventTarget`). */
export class Listeners {
  private readonly byType = new Map<string, Set<Listener>>();

  add(type: unknown, listener: unknown): void {
    const [t, l] = checked(type, listener);
    let set = this.byType.get(t);
    if (!set) this.byType.set(t, (set = new Set()));
    set.add(l);
  }

  remove(type: unknown, listener: unknown): void {
    const [t, l] = checked(type, listener);
    this.byType.get(t)?.delete(l);
  }

  emit(event: ClientEvent): void {
    const set = this.byType.get(event.type);
    if (!set) return;
    for (const listener of [...set]) call(listener, event);
  }
}

function checked(type: unknown, listener: unknown): [string, Listener] {
  if (typeof type !== "string" || !(EVENT_TYPES as readonly string[]).includes(type)) {
    throw invalidOptions(__DEV__ && `event type must be one of ${EVENT_TYPES.join(", ")}`);
  }
  if (typeof listener !== "function") throw invalidOptions(__DEV__ && "listener must be a function");
  return [type, listener as Listener];
}
