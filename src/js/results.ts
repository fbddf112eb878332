// The public types of `operation.send`: its options and its definite answer. Their own module so
// that the client state (core.ts) and the send loop (send.ts) both use them without importing each other.
import type { AttemptEvent, RetryEvent } from "./events.js";

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
  /** The server replayed a stored answer (`Idempotent-Replayed: true`): definite, 2xx or not. */
  replayed: boolean;
  /** A definite 4xx came after an attempt that may have reached the server: the work may have been
   *  done. Ask your server for the outcome of this key before letting the user try again. */
  uncertain: boolean;
  /** The intent's record is in durable storage: its key survives a reload (false in memory, also
   *  after a `storagefallback`). */
  durable: boolean;
  /** Attempts made by this `send`. */
  attempts: number;
  key: string;
  intentId: string;
}
