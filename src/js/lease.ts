// The lease in localStorage that stands in for a Web Lock where the browser has no `navigator.locks`
// (lock.ts): a part loaded on first use (lazy.ts), so browsers with Web Locks never download it. The
// tab that holds the lease sends; a closed tab's lease expires after LEASE_TTL_MS.

import { hex } from "./hex.js";
import type { Release } from "./lock.js";
import { abortable, INTERRUPTED, sleep } from "./wait.js";

/** How long a storage lease lives without renewal: a closed tab blocks others at most this long. */
export const LEASE_TTL_MS = 5_000;
/** Lease slots: `idempotent-fetch:lease:<lock name>`, value `<owner>:<expires ms>`. */
const LEASE_PREFIX = "idempotent-fetch:lease:";
/** After writing a free lease, wait this long and see whose write stuck (two tabs may write at once). */
const LEASE_SETTLE_MS = 30;
/** A waiting tab re-checks the lease this often (or on a `storage` event). */
const LEASE_POLL_MS = 250;

/** A lease in localStorage, renewed every third of its TTL while held. */
export async function lease(storage: Storage, name: string, signal?: AbortSignal): Promise<Release> {
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
