// The messages, keyed by code and detail. The wasm machine throws numbers (`code * 256 + detail`,
// docs/WASM-BOUNDARY.md) and carries no text; everything a user reads is written here, once (in the
// development build: the production build keeps the codes, src/js/mode.ts).

import { describe, IdempotentFetchError, type ErrorCode, type ErrorDetails, type ExhaustedReason } from "./errors.js";
import {
  E_ABORTED,
  E_EXPIRED,
  E_INTENT_MISMATCH,
  E_INVALID_REQUEST,
  E_KEY_STATUS,
  E_KEY_MISMATCH,
  E_NOT_FOUND,
  E_RETRIES_EXHAUSTED,
  E_STORAGE,
  ErrorCodeName,
  EXHAUSTED_MAX_ATTEMPTS,
  EXPIRED_UNKNOWN_TO_SERVER,
  EXHAUSTED_REASONS,
  FIELD_CSPRNG,
  FIELD_VERSION,
  REASON_NETWORK,
  REASON_IN_FLIGHT,
  REASON_TIMEOUT,
  RECORD_FIELDS,
  REQUEST_INTENT_ID,
  REQUEST_KEY,
} from "./machine.js";

/** `RETRIES_EXHAUSTED` details, from EXHAUSTED_MAX_ATTEMPTS on (the type names every one). */
const EXHAUSTED: readonly ExhaustedReason[] = EXHAUSTED_REASONS;

// Every text below is written `__DEV__ && ...`: the production build drops it (src/js/mode.ts).
const KEPT = "; the key is kept, send again to resume";
const CHECK = "check the outcome with your server, then discard the intent";
const EXHAUSTED_MESSAGES: Record<ExhaustedReason, string> | false = __DEV__ && {
  maxAttempts: `no definite answer after retry.maxAttempts attempts${KEPT}`,
  deadline: `no definite answer within retry.totalTimeoutMs${KEPT}`,
  budget: `the client's retryBudget is spent (many failures at once): wait${KEPT}`,
  maxTotalAttempts: `retry.maxTotalAttempts reached across the intent's sends; the key is kept: ${CHECK}`,
};

const EXPIRED_MESSAGE = __DEV__ && `the key is older than keyTtlMs (the server may have forgotten it): not re-sent; ${CHECK}`;
/** EXPIRED detail 1: asked, the server has no record of the key, and past its retention that proves nothing. */
const UNKNOWN_TO_SERVER = __DEV__ && `the key is older than keyTtlMs and the server has no record of it: whether it was done cannot be known any more; ${CHECK}`;

/** ABORTED, also while waiting for another call or tab that was sending the intent. */
export const ABORTED_MESSAGE = __DEV__ && `aborted by the caller${KEPT}`;
/** A non-string intent id, or one the machine refuses (INVALID_REQUEST detail 1). */
export const INTENT_ID_MESSAGE = __DEV__ && "the intent id must be a string of 1 to 256 characters without control characters";

/** The codes with one message (or one per detail), by machine code; the others are built below.
 *  Every name a machine code gets here is the contract's (`ErrorCodeName`, by the code's name). */
const SIMPLE: Record<number, [ErrorCode, string | false | ((detail: number) => string | false)]> = {
  [E_ABORTED]: [ErrorCodeName.ABORTED, ABORTED_MESSAGE],
  [E_KEY_MISMATCH]: [ErrorCodeName.KEY_MISMATCH, __DEV__ && "the server answered 422: this key was already used with a different request"],
  [E_INVALID_REQUEST]: [
    ErrorCodeName.INVALID_REQUEST,
    (detail) =>
      __DEV__ &&
      (detail === REQUEST_INTENT_ID
        ? INTENT_ID_MESSAGE
        : detail === REQUEST_KEY
          ? "a key you bring must be 16 to 255 characters of A-Z a-z 0-9 - . _ ~"
          : "the request fingerprint is malformed"),
  ],
};

/** What the driver knows when a machine call throws, to complete the error. */
export interface ErrorContext extends ErrorDetails {
  intentId: string;
}

/** `intent "<id>": stored intent is corrupt: <problem>` (the message names the intent). */
export function corruptRecord(intentId: string, problem: string | false): IdempotentFetchError {
  return new IdempotentFetchError("STORAGE", __DEV__ && `intent "${intentId}": stored intent is corrupt: ${problem}`);
}

/** `intent "<id>": storage unavailable: <problem>` (a text, or what a backend threw: a StorageFailure's
 *  message is its reason). */
export function storageUnavailable(intentId: string, problem: unknown): IdempotentFetchError {
  return new IdempotentFetchError("STORAGE", __DEV__ && `intent "${intentId}": storage unavailable: ${describe(problem)}`);
}

export function notFound(intentId: string): IdempotentFetchError {
  return new IdempotentFetchError("NOT_FOUND", __DEV__ && `intent "${intentId}" is not stored (discarded?); begin it again`);
}

export function intentMismatch(intentId: string, oldKey: string, otherKey = false): IdempotentFetchError {
  return new IdempotentFetchError(
    "INTENT_MISMATCH",
    __DEV__ && `intent "${intentId}" was begun ${otherKey ? "with another key" : "with a different request"} (key ${oldKey}); discard it or begin with { replace: true }`,
    { key: oldKey },
  );
}

/** The error for a machine outcome (`code`, `detail`) of the intent in `context`; `hint` (for an
 *  exhausted send, in the development build) says what the attempts showed, e.g. a CORS set-up that
 *  hides the answers. */
export function errorFor(code: number, detail: number, context: ErrorContext, hint?: string): IdempotentFetchError {
  const { intentId } = context;
  const also = hint ? `; ${hint}` : "";
  if (code === E_RETRIES_EXHAUSTED) {
    const reason = EXHAUSTED[detail - EXHAUSTED_MAX_ATTEMPTS] ?? "maxAttempts";
    return new IdempotentFetchError(ErrorCodeName.RETRIES_EXHAUSTED, EXHAUSTED_MESSAGES && EXHAUSTED_MESSAGES[reason] + also, { ...context, reason });
  }
  if (code === E_EXPIRED) {
    return new IdempotentFetchError(ErrorCodeName.EXPIRED, __DEV__ && (detail === EXPIRED_UNKNOWN_TO_SERVER ? UNKNOWN_TO_SERVER : EXPIRED_MESSAGE) + also, context);
  }
  if (code === E_KEY_STATUS) return new IdempotentFetchError(ErrorCodeName.KEY_STATUS, __DEV__ && `the server could not be asked about the key${also}`, context);
  if (code === E_INTENT_MISMATCH) return intentMismatch(intentId, context.key ?? "unknown");
  if (code === E_STORAGE) {
    return detail === FIELD_CSPRNG
      ? new IdempotentFetchError(ErrorCodeName.STORAGE, __DEV__ && "the CSPRNG (crypto.getRandomValues) failed", context)
      : corruptRecord(intentId, __DEV__ && `record field ${RECORD_FIELDS[detail - FIELD_VERSION] ?? "?"} is invalid`);
  }
  if (code === E_NOT_FOUND) return notFound(intentId);
  const simple = SIMPLE[code];
  // INTERNAL, or a code the driver does not know: a bug in this library, never the caller's.
  return simple
    ? new IdempotentFetchError(simple[0], typeof simple[1] === "function" ? simple[1](detail) : simple[1], context)
    : new IdempotentFetchError("INTERNAL", __DEV__ && `internal error ${code}:${detail} in idempotent-fetch (a bug: please report it)`, context);
}

/** A machine call's thrown value as an `IdempotentFetchError`; anything else is rethrown as it is. */
export function fromThrown(thrown: unknown, context: ErrorContext): IdempotentFetchError {
  if (typeof thrown === "number" && Number.isInteger(thrown) && thrown >= 0) {
    return errorFor(thrown >> 8, thrown & 255, context);
  }
  throw thrown;
}

/** UI texts of the retried statuses with a name of their own (others are "server error (<status>)"). */
const STATUS_TEXTS: Record<number, string> = {
  408: "request timeout",
  409: "same payment still in progress",
  423: "same payment still in progress (locked)",
  425: "too early",
  429: "rate limited",
  503: "server busy",
};

/** The UI text of a retry reason (the `reason` of the `retry` event): "server busy (503)". */
export function retryReasonText(reason: number, status: number): string {
  if (reason === REASON_NETWORK) return "network error";
  if (reason === REASON_TIMEOUT) return "timed out";
  if (reason === REASON_IN_FLIGHT) return "same payment still in progress";
  return `${STATUS_TEXTS[status] ?? "server error"} (${status})`;
}
