// Generated from src/contract.rs by `IF_BLESS=1 cargo test --test contract`: do not edit.
// The numbers the wasm machine and the driver exchange (docs/WASM-BOUNDARY.md).

// Action: What the driver does next: the number every call of the send loop returns.
/** Send an attempt with the key header, abandoning it after field `TimeoutMs`. */
export const SEND = 1;
/** Wait field `DelayMs`, then event `Wake`. */
export const WAIT = 2;
/** Offline: wait for the network at most field `TimeoutMs`, then event `Online` or `OnlineTimeout`. */
export const WAIT_ONLINE = 3;
/** A definite answer: resolve with the response (fields `Status`, `Ok`, `Replayed`). */
export const DONE = 4;
/** Give up with fields `ErrorCode` and `ErrorDetail` (the key is kept unless the error says otherwise). */
export const FAIL = 5;
/** Ask the server what became of the key (its key-status answer, within field `TimeoutMs`), then `onKeyStatus`. */
export const RECONCILE = 6;

// Event: The send loop's events other than an answer (`Machine.on`).
/** Begins a send (deadline = now + totalTimeoutMs); reads `online`. */
export const EV_START = 0;
/** The attempt failed below HTTP. */
export const EV_NETWORK_ERROR = 1;
/** The attempt's timeout fired. */
export const EV_TIMEOUT = 2;
/** The caller aborted. */
export const EV_ABORT = 3;
/** A WAIT elapsed; reads `online`. */
export const EV_WAKE = 4;
/** The network came back during WAIT_ONLINE. */
export const EV_ONLINE = 5;
/** WAIT_ONLINE reached the deadline. */
export const EV_ONLINE_TIMEOUT = 6;
/** The app asks the server about the key (`reconcile()`, between sends). */
export const EV_ASK = 7;

// Field: The numbers `Machine.get` reads (booleans as 1/0; NaN for an unknown field).
/** SEND: the attempt's timeout; WAIT_ONLINE: ms left until the deadline. */
export const F_TIMEOUT_MS = 0;
/** WAIT: the delay. */
export const F_DELAY_MS = 1;
/** WAIT: why, a `Reason`. */
export const F_REASON = 2;
/** Attempts of this send, including the one in flight. */
export const F_ATTEMPT = 3;
/** Attempts across every send of the intent (the record's `attempts`). */
export const F_TOTAL_ATTEMPTS = 4;
/** DONE: the answer's status. */
export const F_STATUS = 5;
/** DONE: whether the status is 2xx. */
export const F_OK = 6;
/** DONE: whether the server replayed a stored answer. */
export const F_REPLAYED = 7;
/** FAIL: the error code. */
export const F_ERROR_CODE = 8;
/** FAIL: the error's detail. */
export const F_ERROR_DETAIL = 9;
/** The record: when the intent began (ms since the epoch). */
export const F_CREATED_AT = 10;
/** The record: its last change (ms since the epoch). */
export const F_UPDATED_AT = 11;
/** The record: the last answer's status (0: none, stored as JSON null). */
export const F_LAST_STATUS = 12;
/** The record: whether an attempt may have reached the server without a known outcome. */
export const F_UNCERTAIN = 13;
/** The record changed since the last `markSaved()`: save it before anything else. */
export const F_DIRTY = 14;
/** The record's state, a `State`. */
export const F_STATE = 15;
/** Which record the `begin` that made this machine resumed, a `Resumed` (0: a new key). */
export const F_RESUMED = 16;
/** The record: its key was brought by the app (`begin`'s `key`), not minted here. */
export const F_BROUGHT = 17;

// Resumed: Which record `begin` resumed (field `Resumed`): whether the intent's key existed before, and where.
/** None: a new key. */
export const RESUMED_NEW = 0;
/** The record this tab's storage holds (also every machine `Engine.load` makes). */
export const RESUMED_STORED = 1;
/** The record of the key claimed across tabs (this storage lacks it: the machine is dirty). */
export const RESUMED_CLAIMED = 2;

// Reason: Why a WAIT retries (field `Reason`).
/** No retry yet. */
export const REASON_NONE = 0;
/** A network error. */
export const REASON_NETWORK = 1;
/** The attempt timed out. */
export const REASON_TIMEOUT = 2;
/** A retried status (field `LastStatus`). */
export const REASON_STATUS = 3;
/** The server, asked about the key, said a request with it is still being processed. */
export const REASON_IN_FLIGHT = 4;

// State: Where an intent stands.
/** Not yet definitely answered: the key is kept and the next `send` reuses it. */
export const STATE_PENDING = 0;
/** A 2xx answer; the key is retired. */
export const STATE_SUCCEEDED = 1;
/** A definite failure (a 4xx other than the retried ones); the key is retired. */
export const STATE_FAILED = 2;
/** Pending for longer than the key TTL: the server may have forgotten the key, so it is not re-sent. */
export const STATE_EXPIRED = 3;
/** Where an intent stands. */
export type IntentState = "pending" | "succeeded" | "failed" | "expired";
/** The names of `State` from STATE_PENDING on. */
export const STATES = ["pending", "succeeded", "failed", "expired"] as const;

// Jitter: How a backoff delay is randomised. `exp = min(cap, base * 2^n)` for the n-th retry.
/** `uniform(0, exp)`: the default; fewest calls under contention. */
export const JITTER_FULL = 0;
/** `exp/2 + uniform(0, exp/2)`: never retries immediately. */
export const JITTER_EQUAL = 1;
/** `min(cap, uniform(base, previous * 3))`: spreads out without a fixed schedule. */
export const JITTER_DECORRELATED = 2;
/** `exp` exactly: plain capped exponential backoff (every client retries in lockstep). */
export const JITTER_NONE = 3;
/** How a backoff delay is randomised. `exp = min(cap, base * 2^n)` for the n-th retry. */
export type Jitter = "full" | "equal" | "decorrelated" | "none";
/** The names of `Jitter` from JITTER_FULL on. */
export const JITTERS = ["full", "equal", "decorrelated", "none"] as const;

// HeaderForm: The key header's form (option `HeaderForm`).
/** The raw key (Stripe: `Idempotency-Key: <uuid>`). */
export const HEADER_RAW = 0;
/** The IETF draft's sf-string (`"<uuid>"`). */
export const HEADER_SF_STRING = 1;
/** The key header's form (option `HeaderForm`). */
export type HeaderForm = "raw" | "sf-string";
/** The names of `HeaderForm` from HEADER_RAW on. */
export const HEADER_FORMS = ["raw", "sf-string"] as const;

// Override: The caller's `shouldRetry(status)` verdict (`onResponse`'s last argument).
/** Keep the built-in classification (`undefined`). */
export const OVERRIDE_NONE = 0;
/** Retry with the same key (`true`). */
export const OVERRIDE_RETRY = 1;
/** A definite answer (`false`). */
export const OVERRIDE_DEFINITE = 2;

// KeyStatus: What the server said of the key (`onKeyStatus`), and the detail of `E_KEY_STATUS` (never `Done` there).
/** No usable answer (a network error, a timeout, a 5xx, HTML, a body not of the protocol's shape): never taken for "unknown". */
export const KEY_COULD_NOT_ASK = 0;
/** The key's request was done; its stored answer comes with it. */
export const KEY_DONE = 1;
/** A request with the key is being processed. */
export const KEY_IN_FLIGHT = 2;
/** The server has no record of the key. */
export const KEY_UNKNOWN = 3;

// Sweep: What the sweep decided for one stored record.
/** Not older than the TTL, or already expired: leave it. */
export const SWEEP_KEEP = 0;
/** A retired key (succeeded or failed) older than the TTL: delete the record. */
export const SWEEP_REMOVE = 1;
/** A pending intent older than the TTL, now marked expired: save it (and tell the app). */
export const SWEEP_EXPIRED = 2;

// code: The stable error codes, each with its name in `IdempotentFetchError.code` (never match on messages; README, "Errors"). Some are decided by the driver alone, never by the machine.
/** No definite answer within the attempts, the deadline or the retry budget; the key is kept. */
export const E_RETRIES_EXHAUSTED = 1;
/** The caller aborted; the key is kept. */
export const E_ABORTED = 2;
/** The server answered 422: this key was used with a different request. */
export const E_KEY_MISMATCH = 3;
/** The intent id was begun before with a different request. */
export const E_INTENT_MISMATCH = 4;
/** The stored key is older than `keyTtlMs`; the server may have forgotten it. */
export const E_EXPIRED = 5;
/** The body is a stream and cannot be sent twice (decided by the driver). */
export const E_BODY_NOT_REPLAYABLE = 6;
/** An option is out of range; the detail is its `OPT_*` index. */
export const E_INVALID_OPTIONS = 7;
/** The intent id or the fingerprint is not usable. */
export const E_INVALID_REQUEST = 8;
/** A stored record is corrupt (the detail names the field), or the CSPRNG failed. */
export const E_STORAGE = 9;
/** The intent is not in storage any more (decided by the driver). */
export const E_NOT_FOUND = 10;
/** The server's key-status answer, when it is not "done" (the app's `reconcile()`): the detail is the `KeyStatus` it gave. Users see `RECONCILE_FAILED`. */
export const E_KEY_STATUS = 11;
/** The body is larger than `maxBodyBytes` (decided by the driver). */
export const E_BODY_TOO_LARGE = 12;
/** `requireDurable`, and storage fell back to memory (decided by the driver). */
export const E_NOT_DURABLE = 13;
/** A bug: the driver called the machine out of order (the detail says how), or met an action it does not know. Never the user's fault. */
export const E_INTERNAL = 15;
/** The stable error codes, each with its name in `IdempotentFetchError.code` (never match on messages; README, "Errors"). Some are decided by the driver alone, never by the machine. */
export type ErrorCode = "RETRIES_EXHAUSTED" | "ABORTED" | "KEY_MISMATCH" | "INTENT_MISMATCH" | "EXPIRED" | "BODY_NOT_REPLAYABLE" | "INVALID_OPTIONS" | "INVALID_REQUEST" | "STORAGE" | "NOT_FOUND" | "RECONCILE_FAILED" | "BODY_TOO_LARGE" | "NOT_DURABLE" | "INTERNAL";
/** The `ErrorCode` of each `E_*` item, by the item's name (the driver's machine-code -> name map; inlined, no table ships). */
export const enum ErrorCodeName {
  /** `E_RETRIES_EXHAUSTED`'s name. */
  RETRIES_EXHAUSTED = "RETRIES_EXHAUSTED",
  /** `E_ABORTED`'s name. */
  ABORTED = "ABORTED",
  /** `E_KEY_MISMATCH`'s name. */
  KEY_MISMATCH = "KEY_MISMATCH",
  /** `E_INTENT_MISMATCH`'s name. */
  INTENT_MISMATCH = "INTENT_MISMATCH",
  /** `E_EXPIRED`'s name. */
  EXPIRED = "EXPIRED",
  /** `E_BODY_NOT_REPLAYABLE`'s name. */
  BODY_NOT_REPLAYABLE = "BODY_NOT_REPLAYABLE",
  /** `E_INVALID_OPTIONS`'s name. */
  INVALID_OPTIONS = "INVALID_OPTIONS",
  /** `E_INVALID_REQUEST`'s name. */
  INVALID_REQUEST = "INVALID_REQUEST",
  /** `E_STORAGE`'s name. */
  STORAGE = "STORAGE",
  /** `E_NOT_FOUND`'s name. */
  NOT_FOUND = "NOT_FOUND",
  /** `E_KEY_STATUS`'s name. */
  KEY_STATUS = "RECONCILE_FAILED",
  /** `E_BODY_TOO_LARGE`'s name. */
  BODY_TOO_LARGE = "BODY_TOO_LARGE",
  /** `E_NOT_DURABLE`'s name. */
  NOT_DURABLE = "NOT_DURABLE",
  /** `E_INTERNAL`'s name. */
  INTERNAL = "INTERNAL",
}

// exhausted: Details of `E_RETRIES_EXHAUSTED`: which limit ended the send.
/** `maxAttempts` attempts were made. */
export const EXHAUSTED_MAX_ATTEMPTS = 1;
/** `totalTimeoutMs` passed, or the next wait would pass it. */
export const EXHAUSTED_DEADLINE = 2;
/** The client's retry budget is empty. */
export const EXHAUSTED_BUDGET = 3;
/** The intent reached `maxTotalAttempts` across all its sends. */
export const EXHAUSTED_MAX_TOTAL_ATTEMPTS = 4;
/** Details of `E_RETRIES_EXHAUSTED`: which limit ended the send. */
export type ExhaustedReason = "maxAttempts" | "deadline" | "budget" | "maxTotalAttempts";
/** The names of `exhausted` from EXHAUSTED_MAX_ATTEMPTS on. */
export const EXHAUSTED_REASONS = ["maxAttempts", "deadline", "budget", "maxTotalAttempts"] as const;

// expired: Details of `E_EXPIRED`.
/** The server, asked, has no record of the key: past its retention that proves nothing. */
export const EXPIRED_UNKNOWN_TO_SERVER = 1;

// mismatch: Details of `E_INTENT_MISMATCH`: whose key the request does not match (`Engine.begin`).
/** The record this tab's storage holds. */
export const MISMATCH_STORED = 1;
/** The record of the key claimed across tabs. */
export const MISMATCH_CLAIMED = 2;
/** The record this tab's storage holds has another key than the one brought. */
export const MISMATCH_KEY_STORED = 3;
/** The record of the key claimed across tabs has another key than the one brought. */
export const MISMATCH_KEY_CLAIMED = 4;

// request: Details of `E_INVALID_REQUEST`.
/** The intent id is empty, longer than 256 bytes, or holds control characters. */
export const REQUEST_INTENT_ID = 1;
/** The fingerprint is not 64 lowercase hex characters. */
export const REQUEST_FINGERPRINT = 2;
/** A brought key is not 16 to 255 URL-unreserved characters (`A-Z a-z 0-9 - . _ ~`). */
export const REQUEST_KEY = 3;

// field: Details of `E_STORAGE`: the stored record's fields, by the number `Engine.load` takes them at and the detail that names the one that failed validation; or the CSPRNG. The kinds are the JSON types the driver checks ("?": may be absent or null, and written only when it holds a value: 0 or false is left out). The last column is the `Field` the driver writes the field from (`Machine.get`; a `string` read so is a state name); the fields without one are the driver's own (the version, and the ids it keeps). A field added here is counted, checked for its type, given to `Engine.load` and written to storage with no other edit in the driver.
/** `v`: not a record version this build reads. */
export const FIELD_VERSION = 1;
/** `id`: invalid, or not the id the record is stored under. */
export const FIELD_ID = 2;
/** `key`: not a lowercase hyphenated UUID v4 (a brought key: not 16 to 255 URL-unreserved characters). */
export const FIELD_KEY = 3;
/** `fingerprint`: not 64 lowercase hex characters. */
export const FIELD_FINGERPRINT = 4;
/** `createdAt`: not a whole number of ms in range. */
export const FIELD_CREATED_AT = 5;
/** `updatedAt`: not a whole number of ms in range, or before `createdAt`. */
export const FIELD_UPDATED_AT = 6;
/** `attempts`: not a whole number in `0..=2^32-1`. */
export const FIELD_ATTEMPTS = 7;
/** `state`: not one of the four states. */
export const FIELD_STATE = 8;
/** `lastStatus`: not an HTTP status `100..=599` (null or absent: none). */
export const FIELD_LAST_STATUS = 9;
/** `uncertain`: not a boolean (absent: false). */
export const FIELD_UNCERTAIN = 10;
/** `brought`: not a boolean (absent: the key was minted here). */
export const FIELD_BROUGHT = 11;
/** The CSPRNG (`crypto.getRandomValues`) failed. */
export const FIELD_CSPRNG = 32;
/** The names of `field` from FIELD_VERSION on. */
export const RECORD_FIELDS = ["v", "id", "key", "fingerprint", "createdAt", "updatedAt", "attempts", "state", "lastStatus", "uncertain", "brought"] as const;
/** The JSON type of each of `RECORD_FIELDS`. */
export const RECORD_KINDS = ["number", "string", "string", "string", "number", "number", "number", "string", "number?", "boolean?", "boolean?"] as const;
/** The `F_*` field `Machine.get` reads each of `RECORD_FIELDS` by (-1: the driver's own). */
export const RECORD_READS = [-1, -1, -1, -1, 10, 11, 4, 15, 12, 13, 17] as const;

// protocol: Details of `E_INTERNAL`: the call that came out of order.
/** An answer, network error or timeout while no attempt was in flight. */
export const PROTOCOL_NOT_SENDING = 1;
/** Event `Wake` while no backoff wait was running. */
export const PROTOCOL_NOT_WAITING = 2;
/** Event `Online` / `OnlineTimeout` while not waiting for the network. */
export const PROTOCOL_NOT_OFFLINE = 3;
/** `start` or `ask` while a send is running. */
export const PROTOCOL_NOT_IDLE = 4;
/** `onKeyStatus` while the server was not being asked. */
export const PROTOCOL_NOT_RECONCILING = 5;
/** An event number the machine does not know. */
export const PROTOCOL_UNKNOWN_EVENT = 6;
/** An action number the driver does not know. */
export const PROTOCOL_UNKNOWN_ACTION = 7;

// Opt: the Engine's options by index: the order of `Engine.create`'s array and the detail of `INVALID_OPTIONS`.
/** Attempts per `send`, including the first: requests sent with the key (a question about the key is not one). */
export const OPT_MAX_ATTEMPTS = 0;
/** The first backoff step, in ms. */
export const OPT_BASE_DELAY_MS = 1;
/** The longest single wait, in ms (at least `baseDelayMs`). */
export const OPT_MAX_DELAY_MS = 2;
/** A `send` gives up (keeping the key) after this many ms. */
export const OPT_TOTAL_TIMEOUT_MS = 3;
/** One attempt is abandoned after this many ms. */
export const OPT_ATTEMPT_TIMEOUT_MS = 4;
/** `Retry-After` is honoured up to this many ms. */
export const OPT_MAX_RETRY_AFTER_MS = 5;
/** How backoff delays are randomised: given by name (`JITTERS`), the engine takes its index. */
export const OPT_JITTER = 6;
/** Keys older than this many ms are reported expired rather than re-sent. */
export const OPT_KEY_TTL_MS = 7;
/** The retry budget's capacity (0: no retries). */
export const OPT_RETRY_BUDGET = 8;
/** The key header's form: given by name (`HEADER_FORMS`), the engine takes its index. */
export const OPT_HEADER_FORM = 9;
/** Attempts of one intent across every `send` and reload; reaching it rejects `RETRIES_EXHAUSTED` (reason `maxTotalAttempts`, the key kept). 0: no limit. */
export const OPT_MAX_TOTAL_ATTEMPTS = 10;
/** 1 when the app configured how to ask the server about a key (set by the driver from that configuration, not an option of its own): the machine then asks where it would give up. */
export const OPT_RECONCILE = 11;
/** The status a server answers replays with instead of its stored one (`replayStatus`, set by the driver after its own check; 0: none): such an answer is the stored outcome of the key. */
export const OPT_REPLAY_STATUS = 12;
/** Every option as `[name as users write it, min, max, default, names when given by name]`, by `OPT_*`. */
export const OPTIONS: readonly (readonly [string, number, number, number, (readonly string[])?])[] = [
  ["retry.maxAttempts", 1, 1000, 8],
  ["retry.baseDelayMs", 0, 2592000000, 250],
  ["retry.maxDelayMs", 0, 2592000000, 20000],
  ["retry.totalTimeoutMs", 0, 2592000000, 120000],
  ["retry.attemptTimeoutMs", 1, 2592000000, 15000],
  ["retry.maxRetryAfterMs", 0, 2592000000, 60000],
  ["retry.jitter", 0, 3, 0, JITTERS],
  ["keyTtlMs", 1, 2592000000, 86400000],
  ["retryBudget", 0, 1000000, 500],
  ["headerForm", 0, 1, 0, HEADER_FORMS],
  ["retry.maxTotalAttempts", 0, 1000000, 0],
  ["", 0, 1, 0],
  ["", 0, 599, 0],
];

/** How one `send` retries: attempts, backoff, jitter, timeouts (the `retry.` options). */
export interface RetryOptions {
  /**
   * Attempts per `send`, including the first: requests sent with the key (a question about the key is not one). A whole number from 1 to 1000.
   * @default 8
   */
  maxAttempts?: number;
  /**
   * The first backoff step, in ms. A whole number from 0 to 2592000000.
   * @default 250
   */
  baseDelayMs?: number;
  /**
   * The longest single wait, in ms (at least `baseDelayMs`). A whole number from 0 to 2592000000.
   * @default 20000
   */
  maxDelayMs?: number;
  /**
   * A `send` gives up (keeping the key) after this many ms. A whole number from 0 to 2592000000.
   * @default 120000
   */
  totalTimeoutMs?: number;
  /**
   * One attempt is abandoned after this many ms. A whole number from 1 to 2592000000.
   * @default 15000
   */
  attemptTimeoutMs?: number;
  /**
   * `Retry-After` is honoured up to this many ms. A whole number from 0 to 2592000000.
   * @default 60000
   */
  maxRetryAfterMs?: number;
  /**
   * How backoff delays are randomised: given by name (`JITTERS`), the engine takes its index.
   * @default "full"
   */
  jitter?: Jitter;
  /**
   * Attempts of one intent across every `send` and reload; reaching it rejects `RETRIES_EXHAUSTED` (reason `maxTotalAttempts`, the key kept). 0: no limit. A whole number from 0 to 1000000.
   * @default 0
   */
  maxTotalAttempts?: number;
}

/** The stored record's version this build writes (2: a fingerprint keyed with the namespace's secret). */
export const RECORD_VERSION = 2;
/** `Engine.load`'s number for a `lastStatus` that is null or absent. */
export const NO_STATUS = -1;
/** The retried statuses that say a request with the key is still being processed. */
export const IN_FLIGHT_STATUSES: readonly number[] = [409, 423];
/** The length of `Engine.load`'s array of numbers (one slot per `FIELD_*`). */
export const RECORD_SLOTS = 12;
