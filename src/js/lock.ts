// One sender per intent across tabs (and within a page): a Web Lock where the browser has
// `navigator.locks`, a lease in localStorage where it does not, nothing where neither exists (Node).
//
// The tab that holds the lock sends; another tab's `send` of the same intent waits for the lock,
// then finds the record updated. If the first tab got a definite answer, the waiting tab re-sends
// with the same key and the server replays the stored answer (`replayed: true`). If the first tab
// closed mid-retry, its Web Lock is released by the browser (a lease expires after LEASE_TTL_MS)
// and the second tab takes over with the same key.

import { hex } from "./fingerprint.js";
import { abortable, INTERRUPTED, sleep } from "./wait.js";

/** How long a storage lease lives without renewal: a closed tab blocks others at most this long. */
export const LEASE_TTL_MS = 5_000;

/** How long a Web Lock is kept after its holder is done, before the next tab gets it. localStorage
 *  writes reach other tabs' renderer processes asynchronously, and nothing orders them with the lock
 *  manager's grant: without this pause the next tab could read the intent's record before the
 *  previous holder's last write arrives. The caller is not delayed: the release is scheduled. (The
 *  lease needs no pause: its release is itself a storage write, ordered after the record writes.) */
export const WEB_LOCK_SETTLE_MS = 250;

/** Lease slots: `idempotent-fetch:lease:<lock name>`, value `<owner>:<expires ms>`. */
const LEASE_PREFIX = "idempotent-fetch:lease:";
/** After writing a free lease, wait this long and see whose write stuck (two tabs may write at once). */
const LEASE_SETTLE_MS = 30;
/** A waiting tab re-checks the lease this often (or on a `storage` event). */
const LEASE_POLL_MS = 250;

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
  return storage ? lease(storage, name, signal) : () => {};
}

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

/** `navigator.locks.request(name, { signal }, callback)`; `undefined` when the API refuses outright
 *  (a SecurityError in opaque origins: sandboxed frames, data: workers), so the caller falls back. */
function webLock(locks: LockManagerLike, name: string, signal?: AbortSignal): Promise<Release | undefined> {
  const { held, release } = holder();
  return abortable<Release | undefined>(signal, (resolve) => {
    let granted = false;
    const callback = () => {
      granted = true;
      resolve(release);
      return held;
    };
    try {
      // Rejects when aborted (the request is withdrawn), and at once where Web Locks are refused
      // (the callback never runs). Observed, so it is never an unhandled rejection and such a
      // refusal does not hang.
      locks.request(name, signal ? { signal } : {}, callback).catch(() => {
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
  if (!locks) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const { held, release } = holder();
    try {
      locks
        .request(name, { ifAvailable: true }, (lock) => {
          if (lock === null) {
            resolve(undefined);
            return undefined;
          }
          resolve(release);
          return held;
        })
        .catch(() => resolve(undefined));
    } catch {
      resolve(undefined);
    }
  });
}

/** A lease in localStorage, renewed every third of its TTL while held. */
async function lease(storage: Storage, name: string, signal?: AbortSignal): Promise<Release> {
  const slot = LEASE_PREFIX + name;
  const owner = hex(crypto.getRandomValues(new Uint8Array(8)));
  const heldByMe = () => {
    try {
      return storage.getItem(slot)?.split(":")[0] === owner;
    } catch {
      return false;
    }
  };
  const unowned: Release = () => {};
  for (;;) {
    if (signal?.aborted) throw INTERRUPTED;
    const now = Date.now();
    let value: string | null;
    try {
      value = storage.getItem(slot);
    } catch {
      return unowned; // storage unreadable: coordination is impossible; proceed
    }
    const expires = value === null ? NaN : Number(value.split(":")[1]);
    // A missing or malformed lease is free.
    if (value === null || !Number.isFinite(expires) || expires <= now) {
      try {
        storage.setItem(slot, `${owner}:${now + LEASE_TTL_MS}`);
      } catch {
        return unowned; // storage full or read-only: no lease can be written, waiting would never end
      }
      await sleep(LEASE_SETTLE_MS, signal);
      if (heldByMe()) return keepRenewed(storage, slot, owner, heldByMe);
    }
    // Wait for the holder to release (a `storage` event from its tab) or re-check soon.
    await abortable<void>(signal, (resolve) => {
      const scope = globalThis as Partial<EventTarget>;
      const timer = setTimeout(resolve, LEASE_POLL_MS);
      const onStorage = () => resolve();
      scope.addEventListener?.("storage", onStorage);
      return () => {
        clearTimeout(timer);
        scope.removeEventListener?.("storage", onStorage);
      };
    });
  }
}

function keepRenewed(storage: Storage, slot: string, owner: string, heldByMe: () => boolean): Release {
  const timer = setInterval(() => {
    // Renew only a lease still ours: if it lapsed (throttled timers) and another tab took it,
    // taking it back would let both tabs believe they hold it.
    if (!heldByMe()) return clearInterval(timer);
    try {
      storage.setItem(slot, `${owner}:${Date.now() + LEASE_TTL_MS}`);
    } catch {
      // full: the lease expires, another tab may take over after LEASE_TTL_MS
    }
  }, LEASE_TTL_MS / 3);
  return () => {
    clearInterval(timer);
    if (heldByMe()) {
      try {
        storage.removeItem(slot);
      } catch {
        // it expires by itself
      }
    }
  };
}
