// The package entry (browsers, bundlers, workers and Node alike: package/build.mjs bundles it once
// per platform): classes, the error guard, `ready`, and the TypeScript types (the package's .d.ts
// is generated from these sources).
/**
 * One idempotency key per user intent, kept in storage across reloads and re-sent with the same
 * request until the server gives a definite answer: {@link IdempotentClient} begins an intent
 * (`begin`, or the fetch-shaped `fetch`), {@link IdempotentOperation} sends it. Errors are
 * {@link IdempotentFetchError}s with a stable `code`. The wasm module loads when the package is
 * imported ({@link ready}).
 *
 * @module idempotent-fetch
 */
import { loadMachine } from "./wasm.js";

export { IdempotentClient, type IntentInfo, type ResumeOptions } from "./client.js";
export type { IdempotentRequestInit } from "./fetch-args.js";
export { IdempotentOperation, type IntentState, type ReconcileResult, type SettleResult } from "./operation.js";
export type { KeyStatusAnswer, KeyStatusQuestion } from "./reconcile.js";
export { IdempotentFetchError, isIdempotentFetchError, type ErrorCode, type ExhaustedReason } from "./errors.js";
export type {
  AttemptEvent,
  ClientEventMap,
  CorsEvent,
  ExpiredEvent,
  FailureEvent,
  OfflineEvent,
  ReconcileEvent,
  RetryEvent,
  StorageFallbackEvent,
  SuccessEvent,
} from "./events.js";
export type { BeginOptions, ClientOptions, HeaderForm, Jitter, RetryOptions, StorageKind } from "./options.js";
export type { KeyIn } from "./placement.js";
export type { AttemptFailure, IntentObserver, ObservedIntent, ObservedRequest, SendStep, SendWatcher } from "./observer.js";
export type { IntentRequest } from "./request.js";
export type { ReplayableBody } from "./body.js";
export type { AsyncStorage } from "./storage/async-storage.js";
export type { SendOptions, SendResult } from "./results.js";

/**
 * Resolves once the wasm module is compiled and initialised. Optional: the first `begin`/`fetch`
 * waits for it by itself; await it (or just import the package early) to warm up before the user
 * clicks. Loading starts when the package is imported.
 */
// In browsers the .wasm was requested already, by the bundle's first statement (package/build.mjs,
// WASM_REQUEST); the instantiation waits for it from a microtask, after the module has run.
export const ready: Promise<void> = Promise.resolve().then(loadMachine).then(() => undefined);
// Observed here so a failed load is never an unhandled rejection; `begin` reports it (and retries).
ready.catch(() => {});
