// The public types of `operation.send`: its options and its definite answer. Their own module so
// that the client state (core.ts) and the send loop (send.ts) both use them without importing each other.
import type { AttemptEvent, RetryEvent } from "./events.js";

/** Options of `operation.send`. */
export interface SendOptions {
  /** Aborts the current attempt or wait; the intent keeps its key (`ABORTED`). */
  signal?: AbortSignal;
  /** Called before each attempt of this send. */
  onAttempt?: (event: AttemptEvent) => void;
  /** Called when an attempt got no definite answer and the next one is scheduled (for a countdown). */
  onRetry?: (event: RetryEvent) => void;
}

/** The definite answer of a `send`. */
export interface SendResult {
  /** The server's answer (its body not yet read). */
  response: Response;
  /** `response.status`. */
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
  /** Requests sent with the key by this `send` (a question about the key is not one): at most
   *  `retry.maxAttempts`, and one more when the key's status allowed it. */
  attempts: number;
  /** The intent's idempotency key. */
  key: string;
  /** The intent's id. */
  intentId: string;
}
