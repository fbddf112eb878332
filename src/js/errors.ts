// `IdempotentFetchError`: every error this library throws or rejects with. A JavaScript `Error` with a
// stable `code` (never match on messages), the intent's key and what the failed `send` got to.

import type { ErrorCode, ExhaustedReason } from "./generated/contract.js";
import { brief } from "./mode.js";

export { describe, errorName } from "./describe.js";

// The codes and reasons are the contract table's names (src/contract.rs), generated.
export type { ErrorCode, ExhaustedReason };

/** The `name` of every error from this library (also how `isIdempotentFetchError` recognises one). */
const ERROR_NAME = "IdempotentFetchError";

/** What an error knows beyond its code and message. */
export interface ErrorDetails {
  key?: string | null;
  attempts?: number;
  lastStatus?: number | null;
  reason?: ExhaustedReason | null;
}

/** Every error thrown or rejected by this library: an `Error` with `name === "IdempotentFetchError"`. */
export class IdempotentFetchError extends Error {
  /** Always `"IdempotentFetchError"`: check it (or use `isIdempotentFetchError`) where `instanceof`
   *  fails, as across two copies of the package. */
  override name: "IdempotentFetchError" = ERROR_NAME;
  /** The stable code. */
  readonly code: ErrorCode;
  /** The intent's key, when there is one. Kept for the next `send` unless the intent ended. */
  readonly key: string | null;
  /** Requests sent with the key by the failed `send` (a question about the key is not one). */
  readonly attempts: number;
  /** HTTP status of the last answer, if any. */
  readonly lastStatus: number | null;
  /** For `RETRIES_EXHAUSTED`: which limit was reached. */
  readonly reason: ExhaustedReason | null;

  /** @internal Made by the library only. `message`: the development build's text (`__DEV__ && "..."`),
   *  `false` in the production build, whose message is the code and its docs page. */
  constructor(code: ErrorCode, message: string | false, details: ErrorDetails = {}) {
    super(message || brief(code));
    this.code = code;
    this.key = details.key ?? null;
    this.attempts = details.attempts ?? 0;
    this.lastStatus = details.lastStatus ?? null;
    this.reason = details.reason ?? null;
  }
}

/** `true` when `error` was thrown by this library (also by another copy of it: the name decides). */
export function isIdempotentFetchError(error: unknown): error is IdempotentFetchError {
  try {
    return typeof error === "object" && error !== null && (error as { name?: unknown }).name === ERROR_NAME;
  } catch {
    return false; // a hostile getter
  }
}

/** Shorthands for the codes without details. */
export const invalidOptions = (message: string | false): IdempotentFetchError =>
  new IdempotentFetchError("INVALID_OPTIONS", message);
export const invalidRequest = (message: string | false): IdempotentFetchError =>
  new IdempotentFetchError("INVALID_REQUEST", message);
