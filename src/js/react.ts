// `idempotent-fetch-client/react`: one hook for a button whose click must happen once (Pay, Place order,
// Send), over the store of watch.ts through `useSyncExternalStore`: the phases, the live countdown,
// resume on mount, "already answered" after a reload, "Try again" with the same key, abort on
// unmount, StrictMode's double mount, and `onMismatch`.
//
// Type imports only from the core: this entry's bundle holds no copy of the client (the app passes its
// own), so the hook and the app share one package instance and apps that never import this file pay
// nothing for it. Nothing runs at import (safe where there is no `window`, as in server rendering).
/**
 * `idempotent-fetch-client/react`: {@link useIdempotentAction}, one hook for a button whose click must
 * happen once. React 18 or later (an optional peer dependency); the app passes its own client.
 *
 * @module idempotent-fetch-client/react
 */

import { useMemo, useRef, useSyncExternalStore } from "react";
import type { IntentRequest } from "./request.js";
import { type ChangeControls, type IntentPhase, type IntentSnapshot, type WatchOptions, watchIntent } from "./watch.js";

export type { AnswerFor, ChangeControls, IntentPhase, IntentSnapshot, IntentSnapshotFields, MismatchPolicy, NotRetryingSnapshot, RetryingSnapshot, WatchOptions } from "./watch.js";

/** Where the action is: see {@link IntentPhase} (`checking` on mount). */
export type ActionPhase = IntentPhase;

/** Options of `useIdempotentAction` (`client`, `resume`, `read`, `onMismatch`). */
export type ActionOptions<T> = WatchOptions<T>;

/** What `useIdempotentAction` returns beside the snapshot (with `replace`, `resume` and `discard`
 *  for the phase `changed`). */
export interface ActionControls extends ChangeControls {
  /** Begins (or resumes) the intent and sends it; a no-op while a send runs. */
  run: () => void;
  /** Aborts the running send (`error` becomes `ABORTED`; the key is kept). */
  abort: () => void;
}

/** What `useIdempotentAction` returns: the intent's snapshot (`phase === "retrying"` narrows
 *  `retryInMs` to a number), `run` and `abort`. */
export type ActionState<T> = IntentSnapshot<T> & ActionControls;

/**
 * A state-changing request sent once per intent: `run()` begins `intentId` with `request` (or resumes
 * it: same key) and sends it until a definite answer. Pass the same `request` for the same intent, or
 * choose `options.onMismatch` for a request a reload rebuilt differently. No provider needed: the
 * client comes in `options`.
 */
export function useIdempotentAction<T = unknown>(intentId: string, request: IntentRequest, options: ActionOptions<T>): ActionState<T> {
  // The latest render's request and reader, read when a send starts (a new object literal each
  // render is fine).
  const latest = useRef({ request, read: options.read });
  latest.current = { request, read: options.read };
  const { client, resume, onMismatch, key } = options;
  const store = useMemo(
    () =>
      watchIntent<T>(intentId, () => latest.current.request, {
        client,
        resume,
        onMismatch,
        ...(key === undefined ? {} : { key }),
        read: (response) => (latest.current.read ?? ((r: Response) => r.json().catch(() => null) as Promise<T>))(response),
      }),
    [client, intentId, resume, onMismatch, key],
  );
  const snapshot = useSyncExternalStore(store.subscribe, store.getSnapshot, store.getSnapshot);
  return useMemo(
    () => ({ ...snapshot, run: store.run, abort: store.abort, replace: store.replace, resume: store.resume, discard: store.discard }),
    [snapshot, store],
  );
}
