// Waiting, cut short by the caller's AbortSignal: the one place a signal interrupts a wait (a
// backoff sleep, the network coming back, another call's or tab's turn, a lock). Without state.

/** Thrown (rejected) when the caller's signal aborted a wait. A registered symbol: the same in the
 *  parts loaded on first use, which carry their own copy of this module (lazy.ts). */
export const INTERRUPTED: unique symbol = Symbol.for("idempotent-fetch:interrupted");

/** Runs `start(settle)` until it settles, or rejects with INTERRUPTED once `signal` aborts (an
 *  already aborted signal, which fires no more events, interrupts at once). `cleanup` always runs. */
export function abortable<T>(
  signal: AbortSignal | undefined,
  start: (resolve: (value: T) => void, reject: (reason: unknown) => void) => () => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal?.aborted) return reject(INTERRUPTED);
    let cleanup: (() => void) | undefined;
    let settled = false;
    /** `settle`, after the abort listener and `cleanup` are undone. */
    const finish =
      <V>(settle: (value: V) => void) =>
      (value: V) => {
        settled = true;
        signal?.removeEventListener("abort", onAbort);
        cleanup?.();
        settle(value);
      };
    const onAbort = finish(() => reject(INTERRUPTED));
    signal?.addEventListener("abort", onAbort);
    cleanup = start(finish(resolve), finish(reject));
    if (settled) cleanup(); // settled synchronously, before `cleanup` was known
  });
}

/** `promise`, or INTERRUPTED when `signal` aborts first. */
export function untilAborted<T>(signal: AbortSignal | undefined, promise: Promise<T>): Promise<T> {
  if (!signal) return promise;
  return abortable<T>(signal, (resolve, reject) => {
    promise.then(resolve, reject);
    return () => {};
  });
}

/** setTimeout takes a 32-bit signed delay; longer ones fire at once, so clamp. */
export const clampMs = (ms: number): number => Math.min(Math.max(ms, 0), 0x7fffffff);

/** Sleeps `ms`, or rejects INTERRUPTED when `signal` aborts. The timer is cleared either way. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return abortable<void>(signal, (resolve) => {
    const timer = setTimeout(resolve, clampMs(ms));
    return () => clearTimeout(timer);
  });
}
