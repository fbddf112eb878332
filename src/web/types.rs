//! TypeScript types of the JavaScript API, and the extern types that make wasm-bindgen use them in
//! the generated `.d.ts` instead of `any`.

use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const TS_TYPES: &'static str = r#"
/** Stable error codes carried by `IdempotentFetchError.code`. */
export type ErrorCode =
  | "RETRIES_EXHAUSTED" | "ABORTED" | "KEY_MISMATCH" | "INTENT_MISMATCH" | "EXPIRED"
  | "BODY_NOT_REPLAYABLE" | "INVALID_OPTIONS" | "INVALID_REQUEST" | "STORAGE" | "NOT_FOUND";

/** Every error thrown or rejected by this library: an `Error` with `name === "IdempotentFetchError"`. */
export interface IdempotentFetchError extends Error {
  name: "IdempotentFetchError";
  code: ErrorCode;
  /** The intent's key, when there is one. Kept for the next `send` unless the intent ended. */
  key: string | null;
  /** Attempts made by the failed `send`. */
  attempts: number;
  /** HTTP status of the last answer, if any. */
  lastStatus: number | null;
  /** For `RETRIES_EXHAUSTED`: which limit was reached. */
  reason: "maxAttempts" | "deadline" | "budget" | null;
}

/** `true` when `error` was thrown by this library. */
export function isIdempotentFetchError(error: unknown): error is IdempotentFetchError;

/** Retry policy. Defaults: see the README ("Options"). */
export interface RetryOptions {
  /** Attempts per `send`, including the first. Default 8, 1..1000. */
  maxAttempts?: number;
  /** First backoff step in ms. Default 250. */
  baseDelayMs?: number;
  /** Longest single wait in ms. Default 20000. */
  maxDelayMs?: number;
  /** A `send` gives up (keeping the key) after this many ms. Default 120000. */
  totalTimeoutMs?: number;
  /** One attempt is abandoned after this many ms. Default 15000. */
  attemptTimeoutMs?: number;
  /** `Retry-After` is honoured up to this many ms. Default 60000. */
  maxRetryAfterMs?: number;
  /** Backoff randomisation. Default "full". */
  jitter?: "full" | "equal" | "decorrelated" | "none";
}

/** Options of `new IdempotentClient(options)`. Unknown fields are rejected. */
export interface ClientOptions {
  /** Keeps one account's intents apart from another's (e.g. the account id). Default "default". */
  namespace?: string;
  /**
   * Where intents are kept. Default "local" in a page, "indexeddb" in a worker (no localStorage there),
   * "memory" where there is neither (Node). Blocked, absent or full storage falls back to "memory"
   * (see `storageFallback`); for "indexeddb" that is known once the first operation has settled.
   */
  storage?: "local" | "session" | "indexeddb" | "memory";
  retry?: RetryOptions;
  /** Keys older than this are reported as expired rather than re-sent. Default 86400000 (24 h). */
  keyTtlMs?: number;
  /** Header carrying the key. Default "Idempotency-Key". */
  headerName?: string;
  /** "raw" (Stripe: `Idempotency-Key: <uuid>`) or "sf-string" (IETF draft: `"<uuid>"`). Default "raw". */
  headerForm?: "raw" | "sf-string";
  /** Retry budget (token bucket) capacity shared by the client's intents. Default 500. */
  retryBudget?: number;
  /** Also persist the request (headers and body) so `resume` can re-send it after a reload. Default false. */
  persistRequest?: boolean;
  /** Overrides the built-in classification: true = retry, false = definite, undefined = default. */
  shouldRetry?: (status: number) => boolean | undefined;
}

/** Body types that can be buffered and re-sent. A `ReadableStream` is refused (`BODY_NOT_REPLAYABLE`). */
export type ReplayableBody = string | ArrayBuffer | ArrayBufferView | Blob | URLSearchParams | FormData;

/** The request of an intent. */
export interface IntentRequest {
  url: string | URL;
  /** Default "POST". */
  method?: string;
  headers?: HeadersInit;
  body?: ReplayableBody | null;
}

/** Options of `client.begin`. */
export interface BeginOptions {
  /** Replace a stored intent of the same id that has a different request (a new key is made). */
  replace?: boolean;
}

/** Where an intent stands. */
export type IntentState = "pending" | "succeeded" | "failed" | "expired";

/** Options of `operation.send`. */
export interface SendOptions {
  /** Aborts the current attempt or wait; the intent keeps its key (`ABORTED`). */
  signal?: AbortSignal;
  onAttempt?: (event: AttemptEvent) => void;
  onRetry?: (event: RetryEvent) => void;
}

/** The definite answer of a `send`. */
export interface SendResult {
  response: Response;
  status: number;
  /** `true` for 2xx; a definite 4xx resolves with `ok: false`. */
  ok: boolean;
  /** The server replayed a stored answer (`Idempotent-Replayed: true`). */
  replayed: boolean;
  /** Attempts made by this `send`. */
  attempts: number;
  key: string;
  intentId: string;
}

/** A stored intent, as listed by `client.pending()`. */
export interface IntentInfo {
  intentId: string;
  key: string;
  state: IntentState;
  attempts: number;
  createdAt: number;
  updatedAt: number;
  lastStatus: number | null;
  /** Whether the request was persisted (`persistRequest`) so `client.resume` can re-send it. */
  resumable: boolean;
}

export interface AttemptEvent { type: "attempt"; intentId: string; key: string; attempt: number; totalAttempts: number; }
export interface RetryEvent { type: "retry"; intentId: string; key: string; attempt: number; delayMs: number; reason: string; status: number | null; }
export interface OfflineEvent { type: "offline"; intentId: string; key: string; }
export interface SuccessEvent { type: "success"; intentId: string; key: string; status: number; attempts: number; replayed: boolean; }
export interface FailureEvent { type: "failure"; intentId: string; key: string | null; status: number | null; code: ErrorCode | "HTTP_STATUS"; message: string; }
export interface ExpiredEvent { type: "expired"; intentId: string; key: string; }
export interface StorageFallbackEvent { type: "storagefallback"; reason: string; }

/** Event types and their payloads, for `client.addEventListener`. */
export interface ClientEventMap {
  attempt: AttemptEvent;
  retry: RetryEvent;
  offline: OfflineEvent;
  success: SuccessEvent;
  failure: FailureEvent;
  expired: ExpiredEvent;
  storagefallback: StorageFallbackEvent;
}

/** Typed listeners: `client.addEventListener("retry", (event: RetryEvent) => ...)`. */
export interface IdempotentClient {
  addEventListener<K extends keyof ClientEventMap>(type: K, listener: (event: ClientEventMap[K]) => void): void;
  removeEventListener<K extends keyof ClientEventMap>(type: K, listener: (event: ClientEventMap[K]) => void): void;
}

/** `fetch`'s init plus the intent id (one is made per call when omitted). */
export interface IdempotentRequestInit extends Omit<RequestInit, "body" | "signal"> {
  body?: ReplayableBody | null;
  signal?: AbortSignal;
  intent?: string;
}
"#;

#[wasm_bindgen]
extern "C" {
    /// `ClientOptions | undefined`.
    #[wasm_bindgen(typescript_type = "ClientOptions | undefined")]
    pub type ClientOptionsArg;
    /// `IntentRequest`.
    #[wasm_bindgen(typescript_type = "IntentRequest")]
    pub type IntentRequestArg;
    /// `BeginOptions | undefined`.
    #[wasm_bindgen(typescript_type = "BeginOptions | undefined")]
    pub type BeginOptionsArg;
    /// `SendOptions | undefined`.
    #[wasm_bindgen(typescript_type = "SendOptions | undefined")]
    pub type SendOptionsArg;
    /// `RequestInfo | URL`.
    #[wasm_bindgen(typescript_type = "RequestInfo | URL")]
    pub type FetchInputArg;
    /// `IdempotentRequestInit | undefined`.
    #[wasm_bindgen(typescript_type = "IdempotentRequestInit | undefined")]
    pub type FetchInitArg;
    /// `keyof ClientEventMap`.
    #[wasm_bindgen(typescript_type = "keyof ClientEventMap")]
    pub type EventTypeArg;
    /// A listener of any client event.
    #[wasm_bindgen(typescript_type = "(event: ClientEventMap[keyof ClientEventMap]) => void")]
    pub type ListenerArg;
    /// `Promise<IdempotentOperation>`.
    #[wasm_bindgen(typescript_type = "Promise<IdempotentOperation>")]
    pub type PromiseOperation;
    /// `Promise<SendResult>`.
    #[wasm_bindgen(typescript_type = "Promise<SendResult>")]
    pub type PromiseSendResult;
    /// `Promise<IntentInfo[]>`.
    #[wasm_bindgen(typescript_type = "Promise<IntentInfo[]>")]
    pub type PromiseIntentInfos;
    /// `Promise<boolean>`.
    #[wasm_bindgen(typescript_type = "Promise<boolean>")]
    pub type PromiseBoolean;
    /// `Promise<Response>`.
    #[wasm_bindgen(typescript_type = "Promise<Response>")]
    pub type PromiseResponse;
    /// `Promise<{ removed: number; expired: number }>`.
    #[wasm_bindgen(typescript_type = "Promise<{ removed: number; expired: number }>")]
    pub type PromiseSweep;
    /// `string | null`.
    #[wasm_bindgen(typescript_type = "string | null")]
    pub type NullableString;
    /// `number | null`.
    #[wasm_bindgen(typescript_type = "number | null")]
    pub type NullableNumber;
    /// An intent id: `string` (checked at run time; anything else is `INVALID_REQUEST`).
    #[wasm_bindgen(typescript_type = "string")]
    pub type IntentIdArg;
    /// `IntentState`.
    #[wasm_bindgen(typescript_type = "IntentState")]
    pub type IntentStateValue;
    /// `"local" | "session" | "indexeddb" | "memory"`.
    #[wasm_bindgen(typescript_type = "\"local\" | \"session\" | \"indexeddb\" | \"memory\"")]
    pub type StorageKindValue;
}
