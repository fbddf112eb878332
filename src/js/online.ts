// Online/offline: `navigator.onLine` where it exists (windows, workers); Node has no notion: online.

import { abortable, clampMs } from "./wait.js";

/** How often `waitOnline` re-reads `navigator.onLine`: Chromium flips a worker's flag without firing
 *  `online` on the worker scope, so the flag is polled too. */
export const ONLINE_POLL_MS = 1_000;

/** `navigator.onLine`; true where there is no such flag (Node). */
export function isOnline(): boolean {
  return (globalThis as { navigator?: { onLine?: unknown } }).navigator?.onLine !== false;
}

/** Resolves `true` once online (the `online` event, or the flag seen by polling), `false` after
 *  `maxMs`; rejects INTERRUPTED when `signal` aborts. Every listener and timer is removed after. */
export function waitOnline(maxMs: number, signal?: AbortSignal): Promise<boolean> {
  return abortable<boolean>(signal, (resolve) => {
    const scope = globalThis as Partial<EventTarget>;
    const onOnline = () => resolve(true);
    scope.addEventListener?.("online", onOnline);
    const deadline = Date.now() + maxMs;
    let timer: ReturnType<typeof setTimeout>;
    const poll = () => {
      if (isOnline()) return resolve(true);
      const left = deadline - Date.now();
      if (left <= 0) return resolve(false);
      timer = setTimeout(poll, clampMs(Math.min(left, ONLINE_POLL_MS)));
    };
    timer = setTimeout(poll, clampMs(Math.min(maxMs, ONLINE_POLL_MS)));
    return () => {
      clearTimeout(timer);
      scope.removeEventListener?.("online", onOnline);
    };
  });
}
