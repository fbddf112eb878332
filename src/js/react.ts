// `idempotent-fetch/react`: one hook for a button whose click must happen once (Pay, Place order,
// Send). It holds what every such component would otherwise write again: the phase of the send, a live
// "retrying in N s" countdown, resume on mount of an intent a reload interrupted, "already answered"
// after a reload, "Try again" with the same key, abort on unmount, StrictMode's double mount.
//
// Type imports only from the core: this entry's bundle holds no copy of the client (the app passes its
// own), so the hook and the app share one package instance and apps that never import this file pay
// nothing for it. Nothing runs at import (safe where there is no `window`, as in server rendering).
/**
 * `idempotent-fetch/react`: {@link useIdempotentAction}, one hook for a button whose click must
 * happen once. React 18 or later (an optional peer dependency); the app passes its own client.
 *
 * @module idempotent-fetch/react
 */

import { useCallback, useEffect, useRef, useState } from "react";
import type { IdempotentClient, IntentInfo } from "./client.js";
import type { ErrorCode, IdempotentFetchError } from "./errors.js";
import type { IntentRequest } from "./request.js";
import type { SendResult } from "./results.js";

/**
 * Where the action is:
 * - `checking`: on mount, looking the intent up in storage
 * - `idle`: nothing to resume; `run()` starts it
 * - `sending`: an attempt is in flight
 * - `retrying`: waiting `retryInMs` before the next attempt (`retryReason` says why)
 * - `offline`: waiting for the network to come back
 * - `succeeded` / `failed`: the definite answer, 2xx / not (`result` and `data`; after a reload,
 *   `alreadyAnswered` with `result` null: the answer was received before)
 * - `error`: the send ended without a definite answer (`error`); `run()` again is "Try again" with the
 *   same key
 */
export type ActionPhase = "checking" | "idle" | "sending" | "retrying" | "offline" | "succeeded" | "failed" | "error";

/** Options of `useIdempotentAction`. */
export interface ActionOptions<T> {
  /** The client whose storage holds the intent (made once, outside the component). */
  client: IdempotentClient;
  /** On mount, resume an intent a reload interrupted (same key) and report one answered before. Default true. */
  resume?: boolean;
  /** Reads the answer's body into `data` (a clone of the response). Default: JSON, or null. */
  read?: (response: Response) => Promise<T>;
}

/** What `useIdempotentAction` returns. */
export interface ActionState<T> {
  /** Where the action is (see {@link ActionPhase}). */
  phase: ActionPhase;
  /** Attempts so far across every send of the intent (earlier page loads included). */
  attempt: number;
  /** Milliseconds until the next attempt while `retrying` (updated live), else null. */
  retryInMs: number | null;
  /** Why the last attempt is retried ("server busy (503)", "network error", ...), while `retrying`. */
  retryReason: string | null;
  /** The intent's key, once known. */
  key: string | null;
  /** The definite answer of this page's send. */
  result: SendResult | null;
  /** `read(result.response)`. */
  data: T | null;
  /** The answer came from before: the server replayed it, or it was received before a reload. */
  alreadyAnswered: boolean;
  /** Why the send ended without a definite answer: an `IdempotentFetchError` (see `errorCode`), or
   *  what `read` threw. */
  error: IdempotentFetchError | Error | null;
  /** `error.code` for an `IdempotentFetchError`; `RETRIES_EXHAUSTED` means "Try again" (`run()`). */
  errorCode: ErrorCode | null;
  /** Begins (or resumes) the intent and sends it; a no-op while a send runs. */
  run: () => void;
  /** Aborts the running send (`error` becomes `ABORTED`; the key is kept). */
  abort: () => void;
}

interface Snapshot<T> {
  phase: ActionPhase;
  attempt: number;
  retryUntil: number | null;
  retryReason: string | null;
  key: string | null;
  result: SendResult | null;
  data: T | null;
  alreadyAnswered: boolean;
  error: IdempotentFetchError | Error | null;
}

const readJson = (response: Response): Promise<never> => response.json().catch(() => null) as Promise<never>;

/** The thrown value as an Error (an IdempotentFetchError stays one). */
function asError(thrown: unknown): IdempotentFetchError | Error {
  return thrown instanceof Error ? thrown : new Error(String(thrown));
}

const isOurs = (error: unknown): error is IdempotentFetchError =>
  error instanceof Error && error.name === "IdempotentFetchError";

/**
 * A state-changing request sent once per intent: `run()` begins `intentId` with `request` (or resumes
 * it: same key) and sends it until a definite answer. Pass the same `request` for the same intent (a
 * different one is `INTENT_MISMATCH`). No provider needed: the client comes in `options`.
 */
export function useIdempotentAction<T = unknown>(intentId: string, request: IntentRequest, options: ActionOptions<T>): ActionState<T> {
  const [state, setState] = useState<Snapshot<T>>(() => ({
    phase: options.resume === false ? "idle" : "checking",
    attempt: 0,
    retryUntil: null,
    retryReason: null,
    key: null,
    result: null,
    data: null,
    alreadyAnswered: false,
    error: null,
  }));
  // The latest arguments, read when a send starts (a new object literal each render is fine).
  const latest = useRef({ intentId, request, options });
  latest.current = { intentId, request, options };
  // The running send. Only it may update the state: a send of an earlier mount (StrictMode) may not.
  const running = useRef<AbortController | null>(null);
  // A send started since this mount: the lookup on mount no longer decides the phase.
  const started = useRef(false);

  const run = useCallback(() => {
    if (running.current) return;
    started.current = true;
    const controller = new AbortController();
    running.current = controller;
    const { intentId, request, options } = latest.current;
    const { client } = options;
    const set = (patch: Partial<Snapshot<T>>) => {
      if (running.current === controller) setState((s) => ({ ...s, ...patch }));
    };
    const offline = (event: { intentId: string }) => {
      if (event.intentId === intentId) set({ phase: "offline", retryUntil: null });
    };
    set({ phase: "sending", error: null, retryUntil: null, retryReason: null });
    client.addEventListener("offline", offline);
    void (async () => {
      try {
        const operation = await client.begin(intentId, request);
        set({ key: operation.key, attempt: operation.attempts });
        const result = await operation.send({
          signal: controller.signal,
          onAttempt: (event) => set({ phase: "sending", attempt: event.totalAttempts, retryUntil: null }),
          onRetry: (event) => set({ phase: "retrying", retryUntil: Date.now() + event.delayMs, retryReason: event.reason }),
        });
        const data = await (options.read ?? readJson)(result.response.clone());
        set({ phase: result.ok ? "succeeded" : "failed", result, data, alreadyAnswered: result.replayed, retryUntil: null });
      } catch (thrown) {
        set({ phase: "error", error: asError(thrown), retryUntil: null });
      } finally {
        client.removeEventListener("offline", offline);
        if (running.current === controller) running.current = null;
      }
    })();
  }, []);

  const abort = useCallback(() => running.current?.abort(), []);

  // On mount: resume a pending intent, or report one answered before (a reload lost its response).
  const { client, resume = true } = options;
  useEffect(() => {
    let live = true;
    if (resume) {
      client.intent(intentId).then(
        (info: IntentInfo | null) => {
          if (!live || started.current) return;
          // The key is known from the lookup: shown from the first render of the resumed send.
          if (info?.state === "pending") {
            setState((s) => ({ ...s, key: info.key, attempt: info.attempts }));
            return run();
          }
          const answered = info?.state === "succeeded" || info?.state === "failed";
          // Everything from the lookup (an earlier intent id's result and error included are gone).
          setState((s) => ({
            ...s,
            phase: answered ? (info.state as "succeeded" | "failed") : "idle",
            key: info?.key ?? null,
            attempt: info?.attempts ?? 0,
            alreadyAnswered: answered,
            result: null,
            data: null,
            error: null,
            retryUntil: null,
          }));
        },
        (thrown: unknown) => live && setState((s) => ({ ...s, phase: "error", error: asError(thrown) })),
      );
    }
    return () => {
      live = false;
      // Unmounted: the send stops (the key is kept for the next mount or page) and may no longer
      // update this component.
      const controller = running.current;
      running.current = null;
      started.current = false;
      controller?.abort();
    };
  }, [client, intentId, resume, run]);

  // The live countdown while retrying.
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (state.retryUntil === null) return;
    setNow(Date.now());
    const timer = setInterval(() => setNow(Date.now()), 250);
    return () => clearInterval(timer);
  }, [state.retryUntil]);

  const { retryUntil, ...rest } = state;
  return {
    ...rest,
    retryInMs: retryUntil === null ? null : Math.max(0, retryUntil - now),
    retryReason: state.phase === "retrying" ? state.retryReason : null,
    errorCode: isOurs(state.error) ? state.error.code : null,
    run,
    abort,
  };
}
