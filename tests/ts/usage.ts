// Uses every public API of idempotent-fetch with strict types. It is only type-checked (never run):
//   tools/node_modules/.bin/tsc -p tests/ts/tsconfig.json --noEmit
// The @ts-expect-error lines prove the check can fail: if a wrong type were accepted, tsc would
// report the unused directive.
import {
  IdempotentClient,
  IdempotentOperation,
  isIdempotentFetchError,
  ready,
  type AttemptEvent,
  type BeginOptions,
  type ClientEventMap,
  type ClientOptions,
  type ErrorCode,
  type FailureEvent,
  type IdempotentFetchError,
  type IdempotentRequestInit,
  type IntentInfo,
  type IntentRequest,
  type IntentState,
  type KeyStatusAnswer,
  type KeyStatusQuestion,
  type ReconcileResult,
  type SettleResult,
  type ReplayableBody,
  type RetryEvent,
  type RetryOptions,
  type SendOptions,
  type SendResult,
  type StorageFallbackEvent,
} from "idempotent-fetch-client";
import {
  BACKGROUND_CHANNEL,
  BACKGROUND_SYNC_TAG,
  backgroundSync,
  type BackgroundMessage,
  type BackgroundRun,
  type BackgroundSync,
  type BackgroundSyncOptions,
} from "idempotent-fetch-client/sw";
import { watchIntent, type IntentSnapshot } from "idempotent-fetch-client/watch";
import { otelObserver } from "idempotent-fetch-client/otel";
import type { IntentObserver } from "idempotent-fetch-client";
import type { Tracer } from "@opentelemetry/api";

const retry: RetryOptions = {
  maxAttempts: 8,
  baseDelayMs: 250,
  maxDelayMs: 20_000,
  totalTimeoutMs: 120_000,
  attemptTimeoutMs: 15_000,
  maxRetryAfterMs: 60_000,
  jitter: "full",
};

const options: ClientOptions = {
  namespace: "acct_42",
  storage: "local",
  retry,
  keyTtlMs: 86_400_000,
  headerName: "Idempotency-Key",
  headerForm: "sf-string",
  retryBudget: 500,
  persistRequest: false,
  shouldRetry: (status: number): boolean | undefined => (status === 418 ? false : undefined),
};

// @ts-expect-error maxAttempts is a number, not a string
const wrongType: ClientOptions = { retry: { maxAttempts: "8" } };
// @ts-expect-error storage is "local" | "session" | "indexeddb" | "memory"
const wrongStorage: ClientOptions = { storage: "cookies" };
// @ts-expect-error jitter is one of four names
const wrongJitter: RetryOptions = { jitter: "random" };
// @ts-expect-error unknown option (a typo)
const typo: ClientOptions = { retries: {} };

async function checkout(cart: { id: string; amount: number }, signal: AbortSignal): Promise<string> {
  // No init: optional warm-up, the first begin/fetch waits for the wasm anyway.
  const warm: Promise<void> = ready;
  await warm;
  const client = new IdempotentClient(options);
  const storage: "local" | "session" | "indexeddb" | "memory" | "custom" = client.storage; // "custom": an AsyncStorage
  const fallback: string | null = client.storageFallback;
  const budget: number = client.retryBudget;
  const namespace: string = client.namespace;
  console.log(storage, fallback, budget, namespace);

  client.addEventListener("retry", (event) => {
    if (event.type === "retry") {
      const retryEvent: RetryEvent = event;
      console.log(retryEvent.delayMs, retryEvent.attempt, retryEvent.reason, retryEvent.status);
    }
  });
  const onFailure = (event: ClientEventMap[keyof ClientEventMap]): void => {
    if (event.type === "failure") {
      const failure: FailureEvent = event;
      const code: ErrorCode | "HTTP_STATUS" = failure.code;
      console.log(code, failure.key, failure.status, failure.message);
    } else if (event.type === "storagefallback") {
      const fellBack: StorageFallbackEvent = event;
      console.log(fellBack.reason);
    }
  };
  client.addEventListener("failure", onFailure);
  client.addEventListener("storagefallback", onFailure);
  client.removeEventListener("failure", onFailure);
  // A listener typed for its event (the generic overload), and one that is not: rejected.
  const onRetry = (event: RetryEvent): void => console.log(event.delayMs);
  client.addEventListener("retry", onRetry);
  client.addEventListener("attempt", (event: AttemptEvent) => console.log(event.totalAttempts));
  client.removeEventListener("retry", onRetry);
  // @ts-expect-error a retry listener does not take success events
  client.addEventListener("success", onRetry);
  // @ts-expect-error not an event type
  client.addEventListener("progress", onFailure);

  const body: ReplayableBody = JSON.stringify(cart);
  const request: IntentRequest = {
    url: "/api/orders",
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
  };
  const begin: BeginOptions = { replace: false };
  const op: IdempotentOperation = await client.begin(`checkout:${cart.id}`, request, begin);
  const key: string = op.key;
  const intentId: string = op.intentId;
  const state: IntentState = op.state;
  const attempts: number = op.attempts;
  const lastStatus: number | null = op.lastStatus;
  const createdAt: number = op.createdAt;
  const resumed: boolean = op.resumed;
  console.log(key, intentId, state, attempts, lastStatus, createdAt, resumed);
  // @ts-expect-error the key is read-only
  op.key = "mine";

  const sendOptions: SendOptions = {
    signal,
    onAttempt: (event: AttemptEvent) => console.log(event.attempt, event.totalAttempts),
    onRetry: (event: RetryEvent) => console.log(`retrying in ${event.delayMs} ms (${event.reason})`),
  };
  try {
    const result: SendResult = await op.send(sendOptions);
    const response: Response = result.response;
    const fields: [number, boolean, boolean, boolean, number, string, string] =
      [result.status, result.ok, result.replayed, result.uncertain, result.attempts, result.key, result.intentId];
    console.log(fields, response.headers.get("content-type"));
    return result.ok ? "paid" : `declined (${result.status})`;
  } catch (error: unknown) {
    if (isIdempotentFetchError(error)) {
      const typed: IdempotentFetchError = error;
      const code: ErrorCode = typed.code;
      const reason: "maxAttempts" | "deadline" | "budget" | "maxTotalAttempts" | null = typed.reason;
      const details: [string, string | null, number, number | null] = [typed.name, typed.key, typed.attempts, typed.lastStatus];
      console.log(details, reason);
      switch (code) {
        case "RETRIES_EXHAUSTED":
        case "ABORTED":
          return "try again";
        case "KEY_MISMATCH":
        case "INTENT_MISMATCH":
        case "EXPIRED":
        case "BODY_NOT_REPLAYABLE":
        case "INVALID_OPTIONS":
        case "INVALID_REQUEST":
        case "STORAGE":
        case "NOT_FOUND":
          return "contact support";
      }
    }
    throw error;
  } finally {
    await op.discard();
  }
}

async function afterReload(): Promise<void> {
  const client = new IdempotentClient({ namespace: "acct_42", storage: "session", persistRequest: true });
  const pending: IntentInfo[] = await client.pending();
  for (const info of pending) {
    const fields: [string, string, IntentState, number, number, number, number | null, boolean] =
      [info.intentId, info.key, info.state, info.attempts, info.createdAt, info.updatedAt, info.lastStatus, info.resumable];
    console.log(fields);
    if (info.resumable) {
      const op: IdempotentOperation = await client.resume(info.intentId);
      await op.send();
    } else {
      const existed: boolean = await client.discard(info.intentId);
      console.log(existed);
    }
  }
  const swept: { removed: number; expired: number } = await client.sweep();
  console.log(swept.removed, swept.expired);

  const init: IdempotentRequestInit = { method: "POST", body: new URLSearchParams({ a: "1" }), intent: "checkout:cart-42" };
  const response: Response = await client.fetch("/api/orders", init);
  const fromUrl: Response = await client.fetch(new URL("https://shop.example/api/orders"), { method: "POST", body: new Blob(["x"]) });
  console.log(response.status, fromUrl.status);
  // A stream is buffered once (within maxBodyBytes); so is a Request's body.
  await client.fetch("/api/orders", { method: "POST", body: new ReadableStream<Uint8Array>() });
  await client.fetch(new Request("/api/orders", { method: "POST", body: "{}" }), { intent: "checkout:cart-42" });
  await client.begin("checkout:cart-43", new Request("/api/orders", { method: "POST", body: "{}" }));
  // Bound to its client: an HTTP client can take it as its fetch.
  const asFetch: (input: Request | string | URL, init?: RequestInit) => Promise<Response> = client.fetch;
  void asFetch;
  // @ts-expect-error a stream of strings is not a body fetch can send
  await client.fetch("/api/orders", { method: "POST", body: new ReadableStream<string>() });
  // @ts-expect-error a plain object is not a body
  await client.begin("x", { url: "/api/orders", body: { amount: 1 } });
  // @ts-expect-error the intent id is a string
  await client.begin(42, { url: "/api/orders" });
  // @ts-expect-error `using` a client frees it; operations are not constructible
  new IdempotentOperation();
  client.free();
}

/** Reconciliation: a status URL, the app's own lookup, and asking on request. */
async function reconciliation(): Promise<void> {
  const byUrl = new IdempotentClient({ statusUrl: "/api/idempotency-keys/{key}", replayStatus: 409 });
  const byFunction = new IdempotentClient({ statusUrl: (key) => `/api/keys/${key}` });
  const own: KeyStatusAnswer = { status: "in_flight", retryAfterMs: 1000 };
  const byLookup = new IdempotentClient({
    reconcile: async (question: KeyStatusQuestion) => (question.key ? own : { status: "unknown" }),
  });
  const op = await byUrl.begin("pay", { url: "/api/orders", body: "{}" });
  const answer: ReconcileResult = await op.reconcile({ signal: new AbortController().signal });
  if (answer.status === "done") console.log(answer.result.replayed, answer.result.response.status);
  const again: ReconcileResult = await byLookup.reconcile("pay", { headers: { authorization: "Bearer t" } });
  console.log(again.status, byFunction);
  byUrl.addEventListener("reconcile", (e) => console.log(e.intentId, e.key));
  byUrl.addEventListener("cors", (e) => console.log(e.origin, e.fix));
  // @ts-expect-error the answer's status is one of three
  const bad: KeyStatusAnswer = { status: "maybe" };
  void bad;
}

// Background completion: the page's option and the service worker's entry.
async function background(): Promise<void> {
  const client = new IdempotentClient({ namespace: "acct_42", storage: "indexeddb" });
  const options: BeginOptions = { background: true };
  const op = await client.begin("checkout:cart-42", { url: "/api/orders", method: "POST", body: "{}" }, options);
  const resumed = await client.resume(op.intentId, { headers: { authorization: "Bearer t" }, pendingOnly: true });
  console.log(resumed.key);
  const handle: BackgroundSync = backgroundSync({
    client,
    headers: async (intent: IntentInfo) => (intent.resumable ? { authorization: "Bearer t" } : null),
    tag: BACKGROUND_SYNC_TAG,
  });
  const run: BackgroundRun = await handle.run();
  for (const message of run.intents) {
    const state: IntentState = message.state;
    const code: ErrorCode | undefined = message.error?.code;
    console.log(message.type, message.key, message.attempts, state, code);
  }
  new BroadcastChannel(BACKGROUND_CHANNEL).onmessage = (event: MessageEvent<BackgroundMessage>) => console.log(event.data.intentId);
  handle.stop();
  // @ts-expect-error headers() answers headers, null or undefined
  const wrong: BackgroundSyncOptions = { client, headers: () => 42 };
  void wrong;
}

/** What a button shows while the intent is retrying: `phase` narrows the snapshot. */
function countdown(snapshot: IntentSnapshot<{ id: string }>): string {
  if (snapshot.phase === "retrying") return `Retrying in ${Math.ceil(snapshot.retryInMs / 1000)} s (${snapshot.retryReason})`;
  // @ts-expect-error no countdown outside `retrying`
  const seconds: number = snapshot.retryInMs;
  void seconds;
  return snapshot.data?.id ?? snapshot.phase;
}

/** A changed cart: the earlier intent described, the three ways out on the store, `answerFor` on the answer. */
function changedCart(store: ReturnType<typeof watchIntent<{ id: string }>>): string {
  const snapshot = store.getSnapshot();
  if (snapshot.phase === "changed" && snapshot.changed) {
    const { key, attempts, createdAt, lastStatus, resumable } = snapshot.changed;
    if (resumable) store.resume();
    else store.replace();
    return `${key} ${attempts} ${createdAt} ${lastStatus ?? ""}`;
  }
  store.discard();
  const which: "earlier" | "current" | null = snapshot.answerFor;
  // @ts-expect-error answerFor is one of two requests, not a free string
  const wrong: typeof snapshot.answerFor = "other";
  void wrong;
  return which ?? "";
}
const settled: SettleResult = { status: "no_fence", reason: "HTTP 405 to POST" };
void settled;

void changedCart(watchIntent<{ id: string }>("checkout:cart-42", { url: "/api/orders", method: "POST", body: "{}" }, { client: new IdempotentClient(), onMismatch: "ask" }));
void countdown(watchIntent<{ id: string }>("checkout:cart-42", { url: "/api/orders", method: "POST", body: "{}" }, { client: new IdempotentClient() }).getSnapshot());
void background;
void reconciliation;
void wrongType;
void wrongStorage;
void wrongJitter;
void typo;
void checkout({ id: "cart-42", amount: 1000 }, new AbortController().signal);
void afterReload();

/** Tracing: the otel entry's observer over the app's tracer, or an observer of one's own. */
function traced(tracer: Tracer): IdempotentClient[] {
  const own: IntentObserver = (intent, request, createdAt) => {
    intent.trace = `${intent.trace ?? ""}${request.method}${createdAt}`;
    // @ts-expect-error the key is the client's: an observer reads it, and sets only the trace
    intent.key = "";
    return (step, error): [string, string] | undefined => {
      if (step === undefined) return void error;
      if (typeof step === "number") return void step;
      if ("response" in step) return void step.status;
      if (!("intentId" in step)) return void step.headers;
      return step.type === "attempt" ? ["x-attempt", String(step.totalAttempts)] : void (step.type === "retry" ? step.delayMs : step.key);
    };
  };
  // @ts-expect-error an observer is a function of the send, not an object
  const wrong: IntentObserver = { attempt: () => undefined };
  void wrong;
  return [new IdempotentClient({ observer: otelObserver(tracer) }), new IdempotentClient({ observer: own })];
}
void traced;
