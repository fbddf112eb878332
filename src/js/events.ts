// Events for the UI: client-wide listeners (`client.addEventListener`) and a send's own callbacks
// (`onAttempt`, `onRetry`). A throwing listener is ignored: UI code must not break a payment in flight.

import { invalidOptions, type ErrorCode } from "./errors.js";

export interface AttemptEvent {
  type: "attempt";
  intentId: string;
  key: string;
  /** Attempt number within this `send`, 1-based. */
  attempt: number;
  /** Attempts across every `send` of this intent, including earlier page loads. */
  totalAttempts: number;
}
export interface RetryEvent {
  type: "retry";
  intentId: string;
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
export interface OfflineEvent {
  type: "offline";
  intentId: string;
  key: string;
}
export interface SuccessEvent {
  type: "success";
  intentId: string;
  key: string;
  status: number;
  attempts: number;
  replayed: boolean;
}
export interface FailureEvent {
  type: "failure";
  intentId: string;
  key: string | null;
  status: number | null;
  code: ErrorCode | "HTTP_STATUS";
  message: string;
}
export interface ExpiredEvent {
  type: "expired";
  intentId: string;
  key: string;
}
/** The client asks the server what became of the key (the key-status protocol). */
export interface ReconcileEvent {
  type: "reconcile";
  intentId: string;
  key: string;
}
/** A cross-origin API hides the headers this library reads (once per origin and page). */
export interface CorsEvent {
  type: "cors";
  intentId: string;
  key: string;
  /** The API's origin. */
  origin: string;
  /** The line to add to its CORS answers. */
  fix: string;
}
export interface StorageFallbackEvent {
  type: "storagefallback";
  reason: string;
}

/** Event types and their payloads, for `client.addEventListener`. */
export interface ClientEventMap {
  attempt: AttemptEvent;
  retry: RetryEvent;
  offline: OfflineEvent;
  success: SuccessEvent;
  failure: FailureEvent;
  expired: ExpiredEvent;
  storagefallback: StorageFallbackEvent;
  cors: CorsEvent;
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
    throw invalidOptions(`event type must be one of ${EVENT_TYPES.join(", ")}`);
  }
  if (typeof listener !== "function") throw invalidOptions("listener must be a function");
  return [type, listener as Listener];
}
