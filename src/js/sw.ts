// `idempotent-fetch-client/sw`: finishes, from the app's service worker, the intents a page began with
// `background: true` (or `persistRequest`) and could not finish: the tab was closed while the server
// was down. Each goes through the client's public `resume` + `send`: the same key, the same rules
// (classification, backoff, retry budget, deadline, keyTtlMs, reconciliation when configured), one
// sender at a time per intent across pages and the worker (the send's Web Lock), and the stored
// request checked again like a new one (origin, size, keyed fingerprint) before anything is sent.
//
// Type imports only from the core (the app's service worker imports the client itself), plus the
// names the page shares (background.ts) and the error class (errors.ts).
/**
 * `idempotent-fetch-client/sw`: {@link backgroundSync}, which finishes pending intents from the app's
 * service worker with their own keys, and posts what became of each on a `BroadcastChannel`.
 *
 * @module idempotent-fetch-client/sw
 */

import { BACKGROUND_CHANNEL, BACKGROUND_MESSAGE_TYPE, BACKGROUND_SYNC_TAG } from "./background.js";
import type { IdempotentClient, IntentInfo } from "./client.js";
import { type ErrorCode, IdempotentFetchError, isIdempotentFetchError } from "./errors.js";
import type { IntentState } from "./operation.js";

export { BACKGROUND_CHANNEL, BACKGROUND_SYNC_TAG } from "./background.js";

/** Options of {@link backgroundSync}. */
export interface BackgroundSyncOptions {
  /** The worker's client: the same `namespace` and options as the pages' clients, and `storage:
   *  "indexeddb"` (the default in a worker), so it reads the intents the pages stored. */
  client: IdempotentClient;
  /** The credentials for an intent's request, asked for before each send (they are never stored):
   *  e.g. `{ authorization: "Bearer …" }` from the app's own IndexedDB. `null` leaves the intent
   *  pending for the page (no credentials now). Default: none (cookies go with same-origin requests). */
  headers?: (intent: IntentInfo) => HeadersInit | null | undefined | Promise<HeadersInit | null | undefined>;
  /** The Background Sync tag to answer. Default {@link BACKGROUND_SYNC_TAG}, the one pages register. */
  tag?: string;
}

/** What {@link backgroundSync} posts on the `BroadcastChannel` named {@link BACKGROUND_CHANNEL},
 *  once per intent it tried. */
export interface BackgroundMessage {
  /** Always "idempotent-fetch:background". */
  type: typeof BACKGROUND_MESSAGE_TYPE;
  /** The client's namespace. */
  namespace: string;
  /** The intent's id. */
  intentId: string;
  /** Its idempotency key (the page's: the worker never mints one). */
  key: string;
  /** Where the intent stands now: "succeeded"/"failed" when the worker got the definite answer
   *  (or another sender did), "pending" when it stays for a later try or the page. */
  state: IntentState;
  /** The HTTP status of its last answer, if any. */
  status: number | null;
  /** Attempts across every send of the intent, the pages' included. */
  attempts: number;
  /** Why it is not finished: the send's error (`RETRIES_EXHAUSTED`, a refused stored request:
   *  `INVALID_REQUEST`, `BODY_TOO_LARGE`, `STORAGE`...), or null. */
  error: {
    /** The error's code. */
    code: ErrorCode;
    /** The error's message. */
    message: string;
  } | null;
}

/** What one run did: the messages it posted. */
export interface BackgroundRun {
  /** One per intent tried (the same objects as posted). */
  intents: BackgroundMessage[];
}

/** The handle {@link backgroundSync} returns. */
export interface BackgroundSync {
  /** Runs once more now (after the current run, if one is under way). */
  run(): Promise<BackgroundRun>;
  /** Removes the event listeners. */
  stop(): void;
}

/** The service worker scope events used (a plain `EventTarget` keeps the types free of the WebWorker lib). */
interface WorkerScope {
  addEventListener(type: string, listener: (event: Event) => void): void;
  removeEventListener(type: string, listener: (event: Event) => void): void;
}
interface Extendable extends Event {
  waitUntil?(promise: Promise<unknown>): void;
  tag?: string;
  request?: { mode?: string };
}

/**
 * Call at the top level of the app's service worker. Finishes every pending intent whose request
 * was stored (`background: true` or `persistRequest`): on the `sync` event with `tag` (Background
 * Sync, Chromium), and where there is none on the worker's start, its `activate`, the `online`
 * event and each page load of the origin (a navigation's `fetch` event; no answer is given, the
 * page loads as usual). One run at a time; each intent is sent by one sender at a time across the
 * pages and the worker. A `sync` event's run rejects while an intent stays pending, so the browser
 * tries again later. Throws `INVALID_OPTIONS` for a bad option, or outside a service worker.
 */
export function backgroundSync(options: BackgroundSyncOptions): BackgroundSync {
  const { client, headers, tag = BACKGROUND_SYNC_TAG } = options ?? ({} as BackgroundSyncOptions);
  if (typeof client !== "object" || client === null || typeof client.pending !== "function" || typeof client.resume !== "function") {
    throw new IdempotentFetchError("INVALID_OPTIONS", "backgroundSync options.client must be an IdempotentClient");
  }
  if (headers !== undefined && typeof headers !== "function") {
    throw new IdempotentFetchError("INVALID_OPTIONS", "backgroundSync options.headers must be a function");
  }
  if (typeof tag !== "string" || tag.length === 0) throw new IdempotentFetchError("INVALID_OPTIONS", "backgroundSync options.tag must be a non-empty string");
  if (client.storage !== "indexeddb") {
    throw new IdempotentFetchError(
      "INVALID_OPTIONS",
      `backgroundSync needs a client with storage "indexeddb" (the pages' intents are there), not "${client.storage}"`,
    );
  }

  // In a page the worker's events never come, and a page finishes its own intents (`resume`).
  const workerScope = (globalThis as { ServiceWorkerGlobalScope?: abstract new () => unknown }).ServiceWorkerGlobalScope;
  if (typeof workerScope !== "function" || !(globalThis instanceof workerScope)) {
    throw new IdempotentFetchError("INVALID_OPTIONS", "backgroundSync runs in a service worker (call it at the top level of the worker's script)");
  }

  let current: Promise<BackgroundRun> | undefined;
  let again: Promise<BackgroundRun> | undefined;
  /** One run at a time; a call during a run gets one more run after it (it may have missed an intent). */
  const run = (): Promise<BackgroundRun> => {
    if (!current) {
      current = finishAll(client, headers).finally(() => (current = undefined));
      return current;
    }
    return (again ??= current.catch(() => undefined).then(() => {
      again = undefined;
      return run();
    }));
  };
  const quiet = (): Promise<unknown> => run().catch(() => undefined);

  const scope = globalThis as unknown as WorkerScope;
  const listeners: [string, (event: Event) => void][] = [
    [
      "sync",
      (event: Extendable) => {
        if (event.tag !== tag) return;
        // Rejected while an intent stays pending: Background Sync schedules another `sync` later.
        event.waitUntil?.(
          run().then((done) => {
            const left = done.intents.filter((intent) => intent.state === "pending");
            if (left.length) throw new Error(`${left.length} intent(s) still pending: ${left.map((intent) => intent.intentId).join(", ")}`);
          }),
        );
      },
    ],
    ["activate", (event: Extendable) => event.waitUntil?.(quiet())],
    ["online", () => void quiet()],
    ["fetch", (event: Extendable) => {
      if (event.request?.mode === "navigate") event.waitUntil?.(quiet());
    }],
  ];
  for (const [type, listener] of listeners) scope.addEventListener(type, listener);
  // The worker's start: it may have been stopped while intents were waiting.
  void quiet();
  return {
    run,
    stop: () => {
      for (const [type, listener] of listeners) scope.removeEventListener(type, listener);
    },
  };
}

/** Tries every pending intent with a stored request, concurrently (each waits for its own lock). */
async function finishAll(client: IdempotentClient, headers: BackgroundSyncOptions["headers"]): Promise<BackgroundRun> {
  const pending = (await client.pending()).filter((intent) => intent.resumable && intent.state === "pending");
  const tried = await Promise.all(pending.map((intent) => finishOne(client, intent, headers)));
  const intents = tried.filter((message): message is BackgroundMessage => message !== undefined);
  if (intents.length) {
    try {
      const channel = new BroadcastChannel(BACKGROUND_CHANNEL);
      for (const message of intents) channel.postMessage(message);
      channel.close();
    } catch {
      // no BroadcastChannel: pages still read the outcome from storage (`intent(id)`, `pending()`)
    }
  }
  return { intents };
}

/** Resumes and sends one intent; what became of it (undefined: discarded meanwhile). */
async function finishOne(
  client: IdempotentClient,
  intent: IntentInfo,
  headers: BackgroundSyncOptions["headers"],
): Promise<BackgroundMessage | undefined> {
  let error: BackgroundMessage["error"] = null;
  try {
    const given = headers ? await headers(intent) : undefined;
    if (given === null) {
      error = { code: "ABORTED", message: "headers() gave no credentials: left pending for the page" };
    } else {
      const operation = await client.resume(intent.intentId, { ...(given === undefined ? {} : { headers: given }), pendingOnly: true });
      await operation.send();
    }
  } catch (thrown) {
    // NOT_FOUND: answered (or discarded) meanwhile by another sender; the record says how.
    if (!isIdempotentFetchError(thrown)) error = { code: "ABORTED", message: `headers() threw (${String(thrown)}): left pending` };
    else if (thrown.code !== "NOT_FOUND") error = { code: thrown.code, message: thrown.message };
  }
  const now = await client.intent(intent.intentId).catch(() => undefined);
  if (now === null) return undefined;
  return {
    type: BACKGROUND_MESSAGE_TYPE,
    namespace: client.namespace,
    intentId: intent.intentId,
    key: now?.key ?? intent.key,
    state: now?.state ?? intent.state,
    status: now?.lastStatus ?? null,
    attempts: now?.attempts ?? intent.attempts,
    error,
  };
}
