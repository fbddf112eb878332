// The intent store of one client: the requested backend, and memory when it cannot be used. When
// storage is blocked (SecurityError; IndexedDB absent or failing to open) or full
// (QuotaExceededError), the store continues in memory for the rest of the page's life, carrying
// what it could read, and says why (`fallbackReason`, and the `storagefallback` event). It never
// throws because storage is unusable; one failed read or delete is a STORAGE error. The backend is
// opened on first use, not by the constructor: the first read of `localStorage` (and the probe
// write) is a round trip to the browser's storage process that a page's start-up need not wait for.
//
// Two shelves (backend.ts): a pending (or expired) record under its intent id, a retired one under
// RETIRED + its intent id, so that what a page needs at start-up (`pending()`) is read without
// reading the retired records. A write that changes shelf drops the other slot after it (in one
// transaction in IndexedDB); a read looks at both and takes the pending one when both are there (a
// move cut short: that record is the newer one, or one whose key the server already answered).
//
// A persisted request's large body has a slot of its own (BODY + intent id, stored-request.ts), on
// neither shelf. It lives only while its intent's pending record names it: a record written without
// it drops it in the same write, and deleting a record deletes it.

import { warn } from "../mode.js";
import type { StorageKind } from "../options.js";
import { describe } from "../describe.js";
import { customStoragePart, indexedDbPart } from "../lazy.js";
import type { AsyncStorage } from "./async-storage.js";
import { type Backend, BODY, isStorageFailure, RETIRED, StorageFailure } from "./backend.js";
import { idbFactory, KEPT_IN_MEMORY } from "./idb.js";
import { MemoryBackend } from "./memory.js";
import { WebStorageBackend } from "./web.js";

/** The slot of the namespace's fingerprint secret: a control character, which no intent id can hold
 *  (the machine refuses them), so it never collides with an intent. */
export const SECRET_ID = "\u0001secret";

export class Store {
  private opened: Backend | undefined;
  private inMemory: boolean;
  private reason: string | null = null;
  /** Told (once, in a microtask) when the store falls back: on opening, or on a later operation. */
  onFallback: ((reason: string) => void) | undefined;
  /** Asked to free space when a write is refused, before the store gives up on its storage: resolves
   *  whether it deleted anything (then the write is tried once more). */
  onFull: (() => Promise<boolean>) | undefined;

  private readonly requested: StorageKind;
  private readonly custom: AsyncStorage | undefined;

  constructor(
    storage: StorageKind | AsyncStorage,
    private readonly namespace: string,
  ) {
    this.requested = typeof storage === "string" ? storage : "custom";
    this.custom = typeof storage === "string" ? undefined : storage;
    this.inMemory = this.requested === "memory";
    // The part holding this storage's backend starts loading now: the first operation need not wait.
    if (this.custom) customStoragePart().catch(() => {});
    else if (this.requested === "indexeddb") indexedDbPart().catch(() => {});
  }

  /** The backend, opened on first use (blocked or absent storage: memory, reported once). */
  private get backend(): Backend {
    if (this.opened) return this.opened;
    const { requested, namespace, custom } = this;
    // Absent or blocked IndexedDB is known at once (no part needed to say so).
    const factory = requested === "indexeddb" ? idbFactory() : undefined;
    const opened = custom
      ? deferred(false, customStoragePart().then((part) => part.customBackend(custom, namespace)))
      : requested === "memory"
        ? new MemoryBackend()
        : factory !== undefined
          ? typeof factory === "string"
            ? factory
            : deferred(true, indexedDbPart().then((part) => part.IndexedDbBackend.open(namespace, factory)))
          : WebStorageBackend.open(requested === "session" ? "sessionStorage" : "localStorage", namespace);
    if (typeof opened !== "string") return (this.opened = opened);
    this.fell(opened);
    return (this.opened = new MemoryBackend());
  }

  private set backend(backend: Backend) {
    this.opened = backend;
  }

  /** In memory from now on, because of `reason`; the listener hears it after the current call. */
  private fell(reason: string): void {
    this.inMemory = true;
    this.reason = reason;
    // Loud, once per client: from now on no key survives a reload, and an event may have no listener.
    warn(__DEV__ && `intents of namespace "${this.namespace}" are kept in memory from now on: ${reason}`, "storagefallback");
    queueMicrotask(() => this.onFallback?.(reason));
  }

  /** Why the store fell back to memory, if it did (opens the storage to know). */
  get fallbackReason(): string | null {
    void this.backend;
    return this.reason;
  }

  /** Whether a saved record survives a reload (false in memory: asked for, or after a fallback). */
  get durable(): boolean {
    void this.backend;
    return !this.inMemory;
  }

  /** What is in use now: the requested storage, or "memory" after a fallback. */
  get kind(): StorageKind {
    void this.backend;
    return this.inMemory ? "memory" : this.requested;
  }

  /** The record text of `intentId`. Rejects with a StorageFailure when it cannot be read. */
  async get(intentId: string): Promise<string | undefined> {
    return this.attempt(async (backend) => {
      // The secret's and bodies' slots (below RETIRED) are on no shelf.
      if (!backend.shelves || intentId < RETIRED) return backend.get(intentId);
      const [pending, retired] = await Promise.all([backend.get(intentId), backend.get(RETIRED + intentId)]);
      return pending ?? retired;
    });
  }

  /** Writes a record text, on the retired shelf if `retired`, on the pending one if false (and the
   *  namespace's secret or a body, `undefined`, where it is). `body`: whether the intent's body slot
   *  stays (true: the text names it); otherwise it goes in the same write on the shelves, and in an
   *  app's storage, where it costs a call, only when false (the record named one). Never fails for a
   *  full or blocked storage: it falls back to memory. */
  async put(intentId: string, text: string, retired?: boolean, body?: boolean): Promise<void> {
    const backend = this.backend;
    const { shelves } = backend;
    const drop = retired === undefined || body || (!shelves && body === undefined) ? [] : [BODY + intentId];
    if (retired !== undefined && shelves) drop.push(retired ? intentId : RETIRED + intentId);
    const slot = retired && shelves ? RETIRED + intentId : intentId;
    try {
      await backend.put(slot, text, ...drop);
    } catch (thrown) {
      if (!isStorageFailure(thrown)) throw thrown;
      if (await this.retryAfterFreeing(() => backend.put(slot, text, ...drop))) return;
      // Reads may still work after a refused write (quota): keep what is stored.
      await this.fallBack(thrown.reason, backend);
      await this.backend.put(slot, text, ...drop);
    }
  }

  /** A refused write, once more after `onFull` freed space; resolves whether it then succeeded. */
  private async retryAfterFreeing(write: () => Promise<void>): Promise<boolean> {
    if (this.inMemory || !this.onFull) return false;
    try {
      if (!(await this.onFull())) return false;
      await write();
      return true;
    } catch {
      return false;
    }
  }

  /** Deletes the retired record of `intentId` if `test` holds for its text (atomically where the
   *  backend can), on either shelf (one written by an earlier version sits on the pending shelf);
   *  resolves whether it did. */
  async deleteIf(intentId: string, test: (text: string) => boolean): Promise<boolean> {
    return this.attempt(
      async (backend) => (backend.shelves && (await backend.deleteIf(RETIRED + intentId, test))) || backend.deleteIf(intentId, test),
    );
  }

  /** Moves a retired record found on the pending shelf (written by an earlier version of this
   *  library) to the retired shelf, if its slot still holds `text`: a record begun again meanwhile,
   *  in this tab or another, stays where it is. Resolves whether it moved. */
  async shelve(intentId: string, text: string): Promise<boolean> {
    return this.attempt(async (backend) => backend.shelves && backend.deleteIf(intentId, (now) => now === text, RETIRED + intentId));
  }

  /** Deletes the record of `intentId`, from both shelves, and its body. */
  async delete(intentId: string): Promise<void> {
    return this.attempt((backend) => backend.delete(intentId, BODY + intentId, ...(backend.shelves ? [RETIRED + intentId] : [])));
  }

  /** Every readable `(intent id, record text)` of the pending shelf (not the namespace's secret nor
   *  a body), or of the retired one. */
  async all(shelf: "pending" | "retired" = "pending"): Promise<[string, string][]> {
    const entries = await this.attempt((backend) => backend.all(shelf));
    return entries.flatMap(([id, text]) => (id < RETIRED ? [] : [[id[0] === RETIRED ? id.slice(1) : id, text]]));
  }

  /** Deletes every record of the namespace and its fingerprint secret (logout). Returns how many
   *  intents were removed. */
  async clear(): Promise<number> {
    const slots = (await this.attempt((backend) => backend.all())).map(([id]) => id);
    await this.attempt((backend) => backend.delete(...slots));
    return new Set(slots.filter((id) => id > RETIRED).map((id) => (id[0] === RETIRED ? id.slice(1) : id))).size;
  }

  /** Runs `operation`; an unusable backend is replaced by memory and the operation runs there. */
  private async attempt<T>(operation: (backend: Backend) => Promise<T>): Promise<T> {
    const backend = this.backend;
    try {
      return await operation(backend);
    } catch (thrown) {
      if (!isStorageFailure(thrown) || !thrown.unusable) throw thrown;
      await this.fallBack(thrown.reason, backend);
      return operation(this.backend);
    }
  }

  /** Continues in memory with what `failed` can still give, reporting `reason` (once). */
  private async fallBack(reason: string, failed: Backend): Promise<void> {
    const carried = await failed.all().catch((): [string, string][] => []);
    if (this.inMemory) return; // another operation fell back meanwhile
    this.backend = new MemoryBackend(carried);
    this.fell(reason);
  }
}

/** A backend whose code is a part loaded on first use (lazy.ts): each call waits for it. A part that
 *  does not load, or a backend that cannot open (its reason), is unusable: the store falls back to
 *  memory and says why. */
function deferred(shelves: boolean, loading: Promise<Backend | string>): Backend {
  const ready = loading.then(
    (backend) => {
      if (typeof backend === "string") throw new StorageFailure(backend, true);
      return backend;
    },
    (thrown: unknown) => {
      // What the load threw, in both builds: in a service worker it names the entry to use (lazy.ts).
      throw isStorageFailure(thrown) ? thrown : new StorageFailure(`the storage's part did not load (${describe(thrown)})${KEPT_IN_MEMORY}`, true);
    },
  );
  ready.catch(() => {}); // observed by the first operation; never an unhandled rejection
  return {
    shelves,
    get: async (id) => (await ready).get(id),
    put: async (id, text, ...drop) => (await ready).put(id, text, ...drop),
    delete: async (...ids) => (await ready).delete(...ids),
    deleteIf: async (id, test, moveTo) => (await ready).deleteIf(id, test, moveTo),
    all: async (shelf) => (await ready).all(shelf),
  };
}
