// `idempotent-fetch-client/svelte`: the store of watch.ts as a Svelte store (the store contract: `subscribe`
// calls the subscriber at once and returns the unsubscribe), so `$pay.phase` works in Svelte 4 and 5
// components, runes mode included. The first subscriber starts the lookup and the resume; the last
// one leaving aborts a running send (the key is kept).
//
// Type imports only from the core and nothing from `svelte` (the contract needs no import).
/**
 * `idempotent-fetch-client/svelte`: {@link idempotentAction}, a readable store for a button whose click
 * must happen once. Svelte 4 or 5; the app passes its own client.
 *
 * @module idempotent-fetch-client/svelte
 */

import type { IntentRequest } from "./request.js";
import { type ChangeControls, type IntentSnapshot, type WatchOptions, watchIntent } from "./watch.js";

export type { AnswerFor, ChangeControls, IntentPhase, IntentSnapshot, IntentSnapshotFields, MismatchPolicy, NotRetryingSnapshot, RetryingSnapshot, WatchOptions } from "./watch.js";

/** A Svelte readable store of the intent's snapshot, with `run` and `abort` (and `replace`, `resume`
 *  and `discard` for the phase `changed`). */
export interface IdempotentActionStore<T> extends ChangeControls {
  /** The store contract: `subscriber` is called now and after each change; returns the unsubscribe. */
  subscribe(subscriber: (snapshot: IntentSnapshot<T>) => void): () => void;
  /** Begins (or resumes) the intent and sends it; a no-op while a send runs or while nothing is
   *  subscribed (a component using `$store` is). */
  run: () => void;
  /** Aborts the running send (`error` becomes `ABORTED`; the key is kept). */
  abort: () => void;
}

/**
 * A state-changing request sent once per intent: `run()` begins `intentId` with `request` (a value, or
 * a function read when the send starts: e.g. `() => ({ ..., body: JSON.stringify(cart) })`) or
 * resumes it (same key), and sends it until a definite answer.
 */
export function idempotentAction<T = unknown>(
  intentId: string,
  request: IntentRequest | (() => IntentRequest),
  options: WatchOptions<T>,
): IdempotentActionStore<T> {
  const store = watchIntent<T>(intentId, request, options);
  return {
    subscribe(subscriber) {
      subscriber(store.getSnapshot());
      return store.subscribe(() => subscriber(store.getSnapshot()));
    },
    run: store.run,
    abort: store.abort,
    replace: store.replace,
    resume: store.resume,
    discard: store.discard,
  };
}
