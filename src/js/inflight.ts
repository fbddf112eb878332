// One `send` per intent at a time within a client, its result shared with the calls that waited: a
// double click calls `send` twice; the second call gets the first call's answer (with its own clone
// of the Response) and sends nothing. Across tabs the lock (lock.ts) does the same job; this also
// covers Node and pages without Web Locks.

import { untilAborted } from "./wait.js";

/** Either this call sends (and must `finish`), or another call's result is already here. */
export type Turn<T> = { mine: true; finish: (result: T | undefined) => void } | { mine: false; result: T };

export class InFlight<T> {
  /** Calls waiting for the sender of each intent; present while one sends. */
  private readonly waiting = new Map<string, Set<(handoff: T | undefined) => void>>();

  /** @param share makes each waiter's copy of a result (a Response body can be read once per clone). */
  constructor(private readonly share: (result: T) => T) {}

  /** Waits until no other call of this client is sending `intentId`; rejects INTERRUPTED on abort. */
  async enter(intentId: string, signal?: AbortSignal): Promise<Turn<T>> {
    for (;;) {
      const queue = this.waiting.get(intentId);
      if (!queue) {
        this.waiting.set(intentId, new Set());
        return { mine: true, finish: (result) => this.finish(intentId, result) };
      }
      let waiter!: (handoff: T | undefined) => void;
      const handoff = new Promise<T | undefined>((resolve) => (waiter = resolve));
      queue.add(waiter);
      try {
        const result = await untilAborted(signal, handoff);
        // No definite answer (the sender gave up): take a turn and send, same key.
        if (result !== undefined) return { mine: false, result };
      } finally {
        queue.delete(waiter);
      }
    }
  }

  /** Hands the sender's definite result (or `undefined`: none) to the waiters, and frees the turn. */
  private finish(intentId: string, result: T | undefined): void {
    const waiters = this.waiting.get(intentId);
    this.waiting.delete(intentId);
    for (const waiter of waiters ?? []) {
      let copy: T | undefined;
      try {
        copy = result === undefined ? undefined : this.share(result);
      } catch {
        copy = undefined; // cannot be copied (body already read): the waiter sends itself
      }
      waiter(copy);
    }
  }
}
