// The messages, keyed by code and detail. The wasm machine throws numbers (`code * 256 + detail`,
// docs/WASM-BOUNDARY.md) and carries no text; everything a user reads is written here, once.

import { IdempotentFetchError, type ErrorCode, type ErrorDetails, type ExhaustedReason } from "./errors.js";

/** Machine error codes (the index) as `IdempotentFetchError.code`. */
const CODES: readonly (ErrorCode | undefined)[] = [
  undefined,
  "RETRIES_EXHAUSTED",
  "ABORTED",
  "KEY_MISMATCH",
  "INTENT_MISMATCH",
  "EXPIRED",
  "BODY_NOT_REPLAYABLE",
  "INVALID_OPTIONS",
  "INVALID_REQUEST",
  "STORAGE",
  "NOT_FOUND",
];

/** `RETRIES_EXHAUSTED` details. */
const EXHAUSTED: readonly (ExhaustedReason | undefined)[] = [undefined, "maxAttempts", "deadline", "budget", "maxTotalAttempts"];

const EXHAUSTED_MESSAGES: Record<ExhaustedReason, string> = {
  maxAttempts: "no definite answer after maxAttempts attempts; the key is kept, send again to resume",
  deadline: "no definite answer before totalTimeoutMs; the key is kept, send again to resume",
  budget: "the client's retry budget is spent (many failures at once); the key is kept, send again later",
  maxTotalAttempts:
    "the intent reached retry.maxTotalAttempts attempts across its sends; the key is kept: check the outcome " +
    "with your server, then discard the intent",
};

export const ABORTED_MESSAGE = "aborted by the caller; the key is kept, send again to resume";
export const ABORTED_WAITING_MESSAGE = "aborted while another call or tab was sending this intent; the key is kept";
const KEY_MISMATCH_MESSAGE =
  "the server answered 422: this idempotency key was already used with a different request";
const EXPIRED_MESSAGE =
  "the idempotency key is older than keyTtlMs; the server may have forgotten it, so it is not re-sent: " +
  "check the outcome with your server, then discard the intent";
export const INTENT_ID_MESSAGE = "intent id must be 1 to 256 characters without control characters";

/** `STORAGE` details from the machine's record validation: the field that failed. */
const RECORD_FIELD_MESSAGES: readonly string[] = [
  "record is invalid",
  "record version is not supported (expected 1)",
  "record id is invalid or does not match its storage slot",
  "record key is not a valid UUID v4",
  "record fingerprint is malformed",
  "record timestamps are inconsistent",
  "record timestamps are inconsistent",
  "record attempts are out of range",
  "record state is unknown",
  "record status is not an HTTP status",
];
/** `STORAGE` detail: the CSPRNG (crypto.getRandomValues) failed. */
const CSPRNG_DETAIL = 32;

/** What the driver knows when a machine call throws, to complete the error. */
export interface ErrorContext extends ErrorDetails {
  intentId: string;
}

/** `intent "<id>": stored intent is corrupt: <problem>` (the message names the intent). */
export function corruptRecord(intentId: string, problem: string): IdempotentFetchError {
  return new IdempotentFetchError("STORAGE", `intent "${intentId}": stored intent is corrupt: ${problem}`);
}

/** `intent "<id>": storage unavailable: <problem>`. */
export function storageUnavailable(intentId: string, problem: string): IdempotentFetchError {
  return new IdempotentFetchError("STORAGE", `intent "${intentId}": storage unavailable: ${problem}`);
}

export function notFound(intentId: string): IdempotentFetchError {
  return new IdempotentFetchError("NOT_FOUND", `intent "${intentId}" is not stored (discarded?); begin it again`);
}

export function intentMismatch(intentId: string, oldKey: string): IdempotentFetchError {
  return new IdempotentFetchError(
    "INTENT_MISMATCH",
    `intent "${intentId}" was begun with a different request (key ${oldKey}); ` +
      "discard it or begin with { replace: true } to start a new intent",
    { key: oldKey },
  );
}

/** The error for a machine outcome (`code`, `detail`) of the intent in `context`. */
export function errorFor(code: number, detail: number, context: ErrorContext): IdempotentFetchError {
  const name = CODES[code];
  switch (name) {
    case "RETRIES_EXHAUSTED": {
      const reason = EXHAUSTED[detail] ?? "maxAttempts";
      return new IdempotentFetchError(name, EXHAUSTED_MESSAGES[reason], { ...context, reason });
    }
    case "ABORTED":
      return new IdempotentFetchError(name, ABORTED_MESSAGE, context);
    case "KEY_MISMATCH":
      return new IdempotentFetchError(name, KEY_MISMATCH_MESSAGE, context);
    case "INTENT_MISMATCH":
      return intentMismatch(context.intentId, context.key ?? "unknown");
    case "EXPIRED":
      return new IdempotentFetchError(name, EXPIRED_MESSAGE, context);
    case "INVALID_REQUEST":
      return new IdempotentFetchError(
        name,
        detail === 1 ? INTENT_ID_MESSAGE : "the request fingerprint is malformed",
        context,
      );
    case "STORAGE":
      if (detail === CSPRNG_DETAIL) {
        return new IdempotentFetchError(name, "the CSPRNG (crypto.getRandomValues) failed", context);
      }
      return corruptRecord(context.intentId, RECORD_FIELD_MESSAGES[detail] ?? RECORD_FIELD_MESSAGES[0]!);
    case "NOT_FOUND":
      return notFound(context.intentId);
    default:
      return new IdempotentFetchError("STORAGE", `internal error ${code}:${detail} (a bug: please report it)`, context);
  }
}

/** A machine call's thrown value as an `IdempotentFetchError`; anything else is rethrown as it is. */
export function fromThrown(thrown: unknown, context: ErrorContext): IdempotentFetchError {
  if (typeof thrown === "number" && Number.isInteger(thrown) && thrown >= 0) {
    return errorFor(Math.floor(thrown / 256), thrown % 256, context);
  }
  throw thrown;
}

/** UI texts of the retried statuses with a name of their own (others are "server error (<status>)"). */
const STATUS_TEXTS: Record<number, string> = {
  408: "request timeout",
  409: "same payment still in progress",
  425: "too early",
  429: "rate limited",
  503: "server busy",
};

/** The UI text of a retry reason (the `reason` of the `retry` event): "server busy (503)". */
export function retryReasonText(reason: number, status: number): string {
  if (reason === 1) return "network error";
  if (reason === 2) return "timed out";
  return `${STATUS_TEXTS[status] ?? "server error"} (${status})`;
}
