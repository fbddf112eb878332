// One sender per intent across tabs (and within a page): a Web Lock where the browser has
// `navigator.locks`, a lease in localStorage where it does not (lease.ts, a part loaded on first use),
// nothing where neither exists (Node).
//
// The tab that holds the lock sends; another tab's `send` of the same intent waits for the lock,
// then finds the record updated. If the first tab got a definite answer, the waiting tab re-sends
// with the same key and the server replays the stored answer (`replayed: true`). If the first tab
// closed mid-retry, its Web Lock is released by the browser (a lease expires after LEASE_TTL_MS)
// and the second tab takes over with the same key.

import { leasePart } from "./lazy.js";
import { abortable, INTERRUPTED } from "./wait.js";


/** How long a Web Lock is kept after its holder is done, before the next tab gets it. localStorage
 *  writes reach other tabs' renderer processes asynchronously, and nothing orders them with the lock
 *  manager's grant: without this pause the next tab could read the intent's record before the
 *  previous holder's last write arrives. The caller is not delayed: the release is scheduled. (The
 *  lease needs no pause: its release is itself a storage write, ordered after the record writes.) */
export const WEB_LOCK_SETTLE_MS = 250;


/** Releases a held lock (idempotent). */
export type Release = () => void;

interface LockManagerLike {
  request(
    name: string,
    options: { signal?: AbortSignal; ifAvailable?: boolean },
    callback: (lock: unknown) => Promise<void> | undefined,
  ): Promise<void>;
}

/** Waits for the lock `name`; rejects INTERRUPTED when `signal` aborts first. */
export async function acquire(name: string, signal?: AbortSignal): Promise<Release> {
  if (signal?.aborted) throw INTERRUPTED;
  const locks = webLocks();
  if (locks) {
    const release = await webLock(locks, name, signal);
    if (release) return release;
  }
  const storage = localStorageOrNull();
  if (!storage) return () => {};
  // Without Web Locks (older browsers), the lease: a part loaded then. If it cannot load (offline
  // before the first send), coordination is impossible, as with unreadable storage: proceed.
  const part = await leasePart().catch(() => undefined);
  return part ? part.lease(storage, name, signal) : () => {};
}

/** Whether this browser has no Web Locks and the lease will be needed (its part is then loaded when
 *  the page is idle, before a click needs it). */
export const needsLease = (): boolean => !webLocks() && localStorageOrNull() !== null;

function webLocks(): LockManagerLike | undefined {
  try {
    const locks = (globalThis as { navigator?: { locks?: LockManagerLike } }).navigator?.locks;
    return typeof locks?.request === "function" ? locks : undefined;
  } catch {
    return undefined;
  }
}

function localStorageOrNull(): Storage | null {
  try {
    return (globalThis as { localStorage?: Storage }).localStorage ?? null;
  } catch {
    return null; // blocked: coordination is impossible, proceed rather than block forever
  }
}

/** `navigator.locks.request(name, { signal }, callback)`, or with `ifAvailable` (then `undefined`
 *  when another holds it); `undefined` when the API refuses outright (a SecurityError in opaque
 *  origins: sandboxed frames, data: workers), so the caller falls back. */
function webLock(locks: LockManagerLike, name: string, signal?: AbortSignal, ifAvailable?: boolean): Promise<Release | undefined> {
  const { held, release } = holder();
  return abortable<Release | undefined>(signal, (resolve) => {
    let granted = false;
    const callback = (lock: unknown) => {
      granted = true;
      // Only `ifAvailable` is granted null: held elsewhere.
      if (lock === null) {
        resolve(undefined);
        return undefined;
      }
      resolve(release);
      return held;
    };
    try {
      // Rejects when aborted (the request is withdrawn), and at once where Web Locks are refused (the
      // callback never runs): observed, so it is never an unhandled rejection and a refusal does not hang.
      locks.request(name, ifAvailable ? { ifAvailable } : signal ? { signal } : {}, callback).catch(() => {
        if (!granted) resolve(undefined);
      });
    } catch {
      resolve(undefined);
    }
    return () => {};
  }).catch((thrown: unknown) => {
    release(); // a grant racing the abort is given back, not leaked
    throw thrown;
  });
}

/** What a Web Lock callback returns to keep the lock (`held`), and the release that ends it after
 *  WEB_LOCK_SETTLE_MS. */
function holder(): { held: Promise<void>; release: Release } {
  let releaseHeld!: () => void;
  const held = new Promise<void>((resolve) => (releaseHeld = resolve));
  let released = false;
  const release: Release = () => {
    if (released) return;
    released = true;
    setTimeout(releaseHeld, WEB_LOCK_SETTLE_MS);
  };
  return { held, release };
}

/** Takes the Web Lock `name` only if it is free at once (`ifAvailable`); `undefined` when it is
 *  held elsewhere or there are no Web Locks. Never waits for another holder. */
export function tryAcquire(name: string): Promise<Release | undefined> {
  const locks = webLocks();
  return locks ? webLock(locks, name, undefined, true) : Promise.resolve(undefined);
}
