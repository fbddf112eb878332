// `idempotent-fetch-client/watch`: one intent as an external store (subscribe / getSnapshot / run / abort),
// the part every framework binding shares: the phases of a send, the live countdown, resume of an
// intent a reload interrupted, "already answered" after a reload, "Try again" with the same key, and
// what to do when a reload rebuilt a different request (`onMismatch`), and an answer the service
// worker got (idempotent-fetch-client/sw) while the page was watching. React, Vue and Svelte are thin layers
// over it (react.ts, vue.ts, svelte.ts).
//
// Type imports only from the core (the app passes its own client; background.ts holds only names): the store is bundled into each
// binding's entry, never into the core entry, so a page that uses no binding pays nothing for it.
// Nothing runs until the first subscriber (safe in server rendering, and StrictMode's throw-away
// renders start nothing).
/**
 * `idempotent-fetch-client/watch`: {@link watchIntent}, one intent as a store any UI framework can
 * subscribe to. The React, Vue and Svelte bindings are built on it.
 *
 * @module idempotent-fetch-client/watch
 */

import { BACKGROUND_CHANNEL, BACKGROUND_MESSAGE_TYPE } from "./background.js";
import type { IdempotentClient, IntentInfo } from "./client.js";
import type { ErrorCode, IdempotentFetchError } from "./errors.js";
import type { IdempotentOperation } from "./operation.js";
import type { IntentRequest } from "./request.js";
import type { SendResult } from "./results.js";

/**
 * Where the intent is:
 * - `checking`: looking the intent up in storage (on the first subscriber)
 * - `idle`: nothing to resume; `run()` starts it
 * - `sending`: an attempt is in flight
 * - `retrying`: waiting `retryInMs` before the next attempt (`retryReason` says why)
 * - `offline`: waiting for the network to come back
 * - `succeeded` / `failed`: the definite answer, 2xx / not (`result` and `data`; after a reload,
 *   `alreadyAnswered` with `result` null: the answer was received before)
 * - `error`: the send ended without a definite answer (`error`); `run()` again is "Try again" with
 *   the same key
 * - `changed`: the request given now differs from the one the intent was begun with (a reload
 *   rebuilt the cart); `changed` describes the earlier one, and the store waits for the person to
 *   choose `replace()`, `resume()` or `discard()` (the default `onMismatch: "ask"`)
 */
export type IntentPhase = "checking" | "idle" | "sending" | "retrying" | "offline" | "succeeded" | "failed" | "error" | "changed";

/**
 * What to do when the request given now differs from the one the intent was begun with (a reload
 * rebuilt the cart from fresh prices, say), where `begin` alone rejects with `INTENT_MISMATCH`:
 * - `"ask"` (default): the phase `changed`, nothing sent: the page offers the person the three ways
 *   out, `replace()`, `resume()` and `discard()` (each as below).
 * - `"error"`: the `INTENT_MISMATCH` error; nothing is sent.
 * - `"replace"`: the old key is given up for the new request under a new key. With the client's
 *   `statusUrl` the server is asked to settle the old key first (`settle()`): if it holds an answer,
 *   that answer is the intent's (nothing new is sent: the order exists); if a request with it is
 *   still running, the store waits for it; only a key the server fenced (never saw, and now refuses)
 *   is replaced. A server without the settle request (or only a `reconcile` callback) is asked what
 *   it knows, and a key it has no record of is replaced with a console warning: a request with the
 *   old key still on its way would make a second order. Without a way to ask, the key is replaced
 *   unasked: an old request that reached the server stays an order.
 * - `"resume"`: the stored request is sent again instead, with the headers of the request given now
 *   (credentials are never stored). Needs the client's `persistRequest`; otherwise `run()` ends in
 *   `INVALID_REQUEST`.
 */
export type MismatchPolicy = "ask" | "error" | "replace" | "resume";

/** @internal How `beginWith` meets a changed request: a policy, or `"discard"` (the store's `discard()`:
 *  settle the old key like `"replace"`, then forget the intent instead of sending the new request). */
export type MismatchAction = Exclude<MismatchPolicy, "ask"> | "discard";

/** Which request an answer is for: the one the intent was begun with before it changed (`resume()`,
 *  or the server had already done it), or the one given now. */
export type AnswerFor = "earlier" | "current";

/** Options of {@link watchIntent} (and of the framework bindings). */
export interface WatchOptions<T> {
  /** The client whose storage holds the intent (made once, outside components). */
  client: IdempotentClient;
  /** On the first subscriber, resume an intent a reload interrupted (same key) and report one
   *  answered before. Default true. */
  resume?: boolean;
  /** Reads the answer's body into `data` (a clone of the response). Default: JSON, or null. */
  read?: (response: Response) => Promise<T>;
  /** When the request differs from the stored intent's (see {@link MismatchPolicy}). Default `"ask"`. */
  onMismatch?: MismatchPolicy;
  /** A key the app brings instead of a minted one (`begin`'s `key`: a server-issued key, the
   *  resource's own id). */
  key?: string;
}

/** What a snapshot of the intent holds in every phase (see {@link IntentSnapshot}). */
export interface IntentSnapshotFields<T> {
  /** Where the intent is (see {@link IntentPhase}). */
  readonly phase: IntentPhase;
  /** Attempts so far across every send of the intent (earlier page loads included). */
  readonly attempt: number;
  /** Milliseconds until the next attempt while `retrying` (updated live), else null. */
  readonly retryInMs: number | null;
  /** Why the last attempt is retried ("server busy (503)", "network error", ...), while `retrying`. */
  readonly retryReason: string | null;
  /** The intent's key, once known. */
  readonly key: string | null;
  /** The definite answer of this page's send. */
  readonly result: SendResult | null;
  /** `read(result.response)`. */
  readonly data: T | null;
  /** The answer came from before: the server replayed it, or it was received before a reload. */
  readonly alreadyAnswered: boolean;
  /** Why the send ended without a definite answer: an `IdempotentFetchError` (see `errorCode`), or
   *  what `read` threw. */
  readonly error: IdempotentFetchError | Error | null;
  /** `error.code` for an `IdempotentFetchError`; `RETRIES_EXHAUSTED` means "Try again" (`run()`). */
  readonly errorCode: ErrorCode | null;
  /** While `changed`: the intent as begun with the earlier request (its key, attempts, when it was
   *  begun, its last status, whether `resume()` can send it). Kept with the answer that follows. */
  readonly changed: IntentInfo | null;
  /** Which request `result` answers: `"earlier"` after `resume()`, or when the server had already done
   *  the earlier request; `"current"` for the request given now. Null without an answer of this page. */
  readonly answerFor: AnswerFor | null;
}

/** The snapshot while `retrying`: the countdown and its reason are there. */
export interface RetryingSnapshot<T> extends IntentSnapshotFields<T> {
  /** Waiting before the next attempt. */
  readonly phase: "retrying";
  /** Milliseconds until the next attempt (updated live). */
  readonly retryInMs: number;
  /** Why the last attempt is retried ("server busy (503)", "network error", ...). */
  readonly retryReason: string;
}

/** The snapshot in every phase but `retrying`: no countdown. */
export interface NotRetryingSnapshot<T> extends IntentSnapshotFields<T> {
  /** Where the intent is (any phase but `retrying`). */
  readonly phase: Exclude<IntentPhase, "retrying">;
  /** No countdown outside `retrying`. */
  readonly retryInMs: null;
}

/**
 * One immutable view of the intent: a new object on every change (and every 250 ms of a countdown).
 * `phase === "retrying"` narrows it to a {@link RetryingSnapshot} (`retryInMs` a number).
 */
export type IntentSnapshot<T> = RetryingSnapshot<T> | NotRetryingSnapshot<T>;

/** One intent as an external store: `useSyncExternalStore`-shaped (`subscribe`, `getSnapshot`). */
export interface IntentStore<T> extends ChangeControls {
  /** Calls `listener` after each change of the snapshot; returns the unsubscribe. The first
   *  subscriber starts the lookup (and the resume of an interrupted send); when the last one leaves,
   *  a running send is aborted (its key is kept for the next subscriber or page). */
  subscribe(listener: () => void): () => void;
  /** The current snapshot (the same object until something changes). */
  getSnapshot(): IntentSnapshot<T>;
  /** Begins (or resumes) the intent and sends it; a no-op while a send runs or while nobody
   *  subscribes. */
  run(): void;
  /** Aborts the running send (`error` becomes `ABORTED`; the key is kept). */
  abort(): void;
}

/** The three ways out of the phase `changed` (every binding has them; each a no-op in other phases). */
export interface ChangeControls {
  /** The request given now, under a new key, once the server settled the old one: the old key's
   *  answer instead if the server had done it (`answerFor: "earlier"`), a wait while it runs. See
   *  {@link MismatchPolicy} `"replace"`. */
  replace(): void;
  /** The earlier request sent again with its key (`answerFor: "earlier"`); needs the client's
   *  `persistRequest` (`changed.resumable`). */
  resume(): void;
  /** The old key settled, then the intent forgotten (phase `idle`: the next `run()` begins the
   *  request given now). If the server had done the earlier request, its answer is shown instead
   *  (`answerFor: "earlier"`): it cannot be undone from here. */
  discard(): void;
}

/** How often the countdown's snapshot is renewed while retrying. */
const TICK_MS = 250;
/** `"replace"` asks about an old request the server still runs this many times, this far apart. */
const IN_FLIGHT_ASKS = 30;
const IN_FLIGHT_WAIT_MS = 1000;

const readJson = (response: Response): Promise<never> => response.json().catch(() => null) as Promise<never>;

/** The thrown value as an Error (an IdempotentFetchError stays one). */
const asError = (thrown: unknown): IdempotentFetchError | Error => (thrown instanceof Error ? thrown : new Error(String(thrown)));

/** @internal An error's code when it is the client's, told by its name (the bindings hold no copy
 *  of the class). */
export const codeOf = (error: unknown): ErrorCode | null =>
  error instanceof Error && error.name === "IdempotentFetchError" ? (error as IdempotentFetchError).code : null;

const wait = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });

/** @internal What `beginWith` found: the operation to send or the answer already there (null: the
 *  intent was discarded), and which request it is for. */
export interface BeginFound {
  begun: IdempotentOperation | SendResult | null;
  answerFor: AnswerFor;
}

/**
 * @internal
 * `client.begin(intentId, request, { key })`, meeting a changed request with `action`: resolves the
 * operation to send, or, for `"replace"` and `"discard"`, the answer the server already holds for the
 * old key. `onWait` is called before each wait for an old request the server still runs.
 */
export async function beginWith(
  client: IdempotentClient,
  intentId: string,
  request: IntentRequest,
  action: MismatchAction,
  signal: AbortSignal,
  onWait: () => void,
  key?: string,
): Promise<BeginFound> {
  try {
    return { begun: await client.begin(intentId, request, key === undefined ? undefined : { key }), answerFor: "current" };
  } catch (thrown) {
    if (codeOf(thrown) !== "INTENT_MISMATCH" || action === "error") throw thrown;
    // The request given now carries the credentials (a stored request never holds them), for the
    // resumed request and for the settle and status questions alike.
    if (action === "resume") return { begun: await client.resume(intentId, { headers: request.headers }), answerFor: "earlier" };
    const earlierAnswer = (result: SendResult): BeginFound => ({ begun: result, answerFor: "earlier" });
    const goOn = async (): Promise<BeginFound> => {
      if (action === "discard") {
        await client.discard(intentId);
        return { begun: null, answerFor: "current" };
      }
      return { begun: await client.begin(intentId, request, { replace: true, ...(key === undefined ? {} : { key }) }), answerFor: "current" };
    };
    for (let ask = 0; ; ask++) {
      let settled;
      try {
        settled = await client.settle(intentId, { signal, headers: request.headers });
      } catch (error) {
        // No statusUrl or reconcile: nothing to ask.
        if (codeOf(error) !== "INVALID_OPTIONS") throw error;
        return await goOn();
      }
      if (settled.status === "done") return earlierAnswer(settled.result);
      if (settled.status === "fenced") return await goOn();
      if (settled.status === "no_fence") {
        // The server cannot settle: ask what it knows, and let go only of a key it has no record of.
        const answer = await client.reconcile(intentId, { signal, headers: request.headers });
        if (answer.status === "done") return earlierAnswer(answer.result);
        if (answer.status === "unknown") {
          console.warn(
            `idempotent-fetch: intent ${intentId} let go of its key for a changed request, but the server cannot fence it ` +
              `(${settled.reason}): a request with that key still on its way would make a second order. ` +
              `Give the status URL the settle request (POST; server/README.md, "Key status").`,
          );
          return await goOn();
        }
      }
      if (ask + 1 >= IN_FLIGHT_ASKS || signal.aborted) throw thrown;
      onWait();
      await wait(IN_FLIGHT_WAIT_MS, signal);
    }
  }
}

/**
 * The intent `intentId` as a store. `request` is the request to begin it with: a value, or a
 * function read at each `run()` (so a binding can pass the latest render's). Pass the same request
 * for the same intent, or choose `onMismatch`.
 */
export function watchIntent<T = unknown>(
  intentId: string,
  request: IntentRequest | (() => IntentRequest),
  options: WatchOptions<T>,
): IntentStore<T> {
  const { client, resume = true, read = readJson, onMismatch = "ask", key } = options;
  const listeners = new Set<() => void>();
  let retryUntil: number | null = null;
  let snapshot: IntentSnapshot<T> = {
    phase: resume ? "checking" : "idle",
    attempt: 0,
    retryInMs: null,
    retryReason: null,
    key: null,
    result: null,
    data: null,
    alreadyAnswered: false,
    error: null,
    errorCode: null,
    changed: null,
    answerFor: null,
  };
  // The running send. Only it may change the snapshot: a send the last unsubscribe aborted may not.
  let running: AbortController | null = null;
  // Bumped when the last subscriber leaves: a lookup of an earlier subscription no longer decides.
  let generation = 0;
  // A send started in this subscription: the lookup no longer decides the phase.
  let started = false;
  let ticker: ReturnType<typeof setInterval> | undefined;
  // The service worker's reports (idempotent-fetch-client/sw), while somebody looks.
  let channel: BroadcastChannel | undefined;

  // `retrying` is only ever set with a deadline (`set`'s callers) and every other phase without one,
  // so the countdown is a number exactly while `retrying`: the two forms of IntentSnapshot.
  const publish = (patch: Partial<IntentSnapshotFields<T>>, until: number | null = retryUntil) => {
    retryUntil = until;
    const next = { ...snapshot, ...patch, retryInMs: until === null ? null : Math.max(0, until - Date.now()) };
    snapshot = { ...next, errorCode: codeOf(next.error) } as IntentSnapshot<T>;
    // The countdown renews the snapshot while somebody looks.
    if (until !== null && ticker === undefined && listeners.size) ticker = setInterval(() => publish({}), TICK_MS);
    if (until === null && ticker !== undefined) ticker = void clearInterval(ticker);
    for (const listener of [...listeners]) listener();
  };

  const run = () => start(onMismatch === "ask" ? "error" : onMismatch);

  /** Starts a send, meeting a changed request with `action` (the "ask" policy meets it with
   *  "error", turned into the phase `changed` below). */
  const start = (action: MismatchAction) => {
    if (running || !listeners.size) return;
    started = true;
    const controller = new AbortController();
    running = controller;
    const set = (patch: Partial<IntentSnapshotFields<T>>, until: number | null = null) => {
      if (running === controller) publish(patch, until);
    };
    const offline = (event: { intentId: string }) => {
      if (event.intentId === intentId) set({ phase: "offline" });
    };
    set({ phase: "sending", error: null, retryReason: null, ...(snapshot.phase === "changed" ? {} : { changed: null }) });
    client.addEventListener("offline", offline);
    void (async () => {
      try {
        const { begun, answerFor } = await beginWith(client, intentId, typeof request === "function" ? request() : request, action, controller.signal, () =>
          set({ phase: "retrying", retryReason: "the earlier request is still running on the server" }, Date.now() + IN_FLIGHT_WAIT_MS),
          key,
        );
        if (begun === null) {
          // Discarded: nothing of the earlier intent is left to show.
          set({ phase: "idle", key: null, attempt: 0, changed: null, answerFor: null, result: null, data: null, alreadyAnswered: false });
          return;
        }
        let result: SendResult;
        if ("send" in begun) {
          set({ key: begun.key, attempt: begun.attempts });
          result = await begun.send({
            signal: controller.signal,
            onAttempt: (event) => set({ phase: "sending", attempt: event.totalAttempts }),
            onRetry: (event) => set({ phase: "retrying", retryReason: event.reason }, Date.now() + event.delayMs),
          });
        } else result = begun;
        const data = await read(result.response.clone());
        set({ phase: result.ok ? "succeeded" : "failed", key: result.key, result, data, alreadyAnswered: result.replayed, answerFor });
      } catch (thrown) {
        if (onMismatch === "ask" && action === "error" && codeOf(thrown) === "INTENT_MISMATCH") {
          // The person chooses: the earlier intent as storage holds it, for the page to describe.
          const earlier = await client.intent(intentId).catch(() => null);
          if (earlier) return set({ phase: "changed", changed: earlier, key: earlier.key, attempt: earlier.attempts, error: null });
        }
        set({ phase: "error", error: asError(thrown) });
      } finally {
        client.removeEventListener("offline", offline);
        if (running === controller) running = null;
      }
    })();
  };

  /** On the first subscriber: resume a pending intent, or report one answered before (a reload lost
   *  its response). `fromWorker`: the service worker reported the intent while no send of this store
   *  runs: only an answer is shown (a pending intent waits for `run()`). */
  const lookUp = (fromWorker = false) => {
    const mine = generation;
    client.intent(intentId).then(
      (info: IntentInfo | null) => {
        if (mine !== generation || (fromWorker ? running : started)) return;
        const answered = info?.state === "succeeded" || info?.state === "failed";
        if (fromWorker && !answered) return;
        // The key is known from the lookup: shown from the first snapshot of the resumed send.
        if (info?.state === "pending") {
          publish({ key: info.key, attempt: info.attempts });
          return run();
        }
        publish(
          {
            phase: answered ? (info.state as "succeeded" | "failed") : "idle",
            key: info?.key ?? null,
            attempt: info?.attempts ?? 0,
            alreadyAnswered: answered,
            result: null,
            data: null,
            error: null,
            changed: null,
            answerFor: null,
          },
          null,
        );
      },
      (thrown: unknown) => mine === generation && !fromWorker && publish({ phase: "error", error: asError(thrown) }, null),
    );
  };

  /** Follows the service worker's reports: a message only says "look again" (any script of the
   *  origin can post one); what is shown is read from storage. */
  const listen = () => {
    try {
      channel = new BroadcastChannel(BACKGROUND_CHANNEL);
      channel.onmessage = ({ data }: MessageEvent) => {
        const message = data as { type?: unknown; namespace?: unknown; intentId?: unknown } | null;
        if (message?.type === BACKGROUND_MESSAGE_TYPE && message.namespace === client.namespace && message.intentId === intentId) lookUp(true);
      };
      // Node: an open channel would keep the process alive.
      (channel as { unref?: () => void }).unref?.();
    } catch {
      // no BroadcastChannel: the answer shows on the next lookup
    }
  };

  return {
    subscribe(listener) {
      listeners.add(listener);
      if (listeners.size === 1) listen();
      if (listeners.size === 1 && snapshot.phase === "checking") lookUp();
      return () => {
        if (!listeners.delete(listener) || listeners.size) return;
        // Nobody looks: the send stops (the key is kept for the next subscriber or page), and the
        // next subscriber looks the intent up again.
        generation++;
        started = false;
        channel?.close();
        channel = undefined;
        const controller = running;
        running = null;
        controller?.abort();
        if (ticker !== undefined) ticker = void clearInterval(ticker);
        retryUntil = null;
        const { phase } = snapshot;
        const cut = phase === "sending" || phase === "retrying" || phase === "offline";
        snapshot = { ...snapshot, phase: resume ? "checking" : cut ? "idle" : phase, retryInMs: null };
      };
    },
    getSnapshot: () => snapshot,
    run,
    abort: () => running?.abort(),
    replace: () => snapshot.phase === "changed" && start("replace"),
    resume: () => snapshot.phase === "changed" && start("resume"),
    discard: () => snapshot.phase === "changed" && start("discard"),
  };
}
