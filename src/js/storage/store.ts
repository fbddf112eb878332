// The intent store of one client: the requested backend, and memory when it cannot be used. When
// storage is blocked (SecurityError; IndexedDB absent or failing to open) or full
// (QuotaExceededError), the store continues in memory for the rest of the page's life, carrying
// what it could read, and says why (`fallbackReason`, and the `storagefallback` event). It never
// throws because storage is unusable; one failed read or delete is a STORAGE error.

import type { StorageKind } from "../options.js";
import { StorageFailure, type Backend } from "./backend.js";
import { type AsyncStorage, customBackend } from "./custom.js";
import { IndexedDbBackend } from "./indexeddb.js";
import { MemoryBackend } from "./memory.js";
import { WebStorageBackend } from "./web.js";

/** The slot of the namespace's fingerprint secret: a control character, which no intent id can hold
 *  (the machine refuses them), so it never collides with an intent. */
export const SECRET_ID = "\u0001secret";

export class Store {
  private backend: Backend;
  private inMemory: boolean;
  /** Why the store fell back to memory, if it did. */
  fallbackReason: string | null = null;
  /** Told (once) when a later operation makes the store fall back. */
  onFallback: ((reason: string) => void) | undefined;

  private readonly requested: StorageKind;

  constructor(storage: StorageKind | AsyncStorage, namespace: string) {
    const requested = typeof storage === "string" ? storage : "custom";
    this.requested = requested;
    let opened: Backend | string;
    switch (requested) {
      case "custom":
        opened = customBackend(storage as AsyncStorage, namespace);
        break;
      case "memory":
        opened = new MemoryBackend();
        break;
      case "indexeddb":
        opened = IndexedDbBackend.open(namespace);
        break;
      default:
        opened = WebStorageBackend.open(requested === "session" ? "sessionStorage" : "localStorage", namespace);
    }
    this.inMemory = typeof opened === "string" || requested === "memory";
    if (typeof opened === "string") this.fallbackReason = opened;
    this.backend = typeof opened === "string" ? new MemoryBackend() : opened;
  }

  /** Whether a saved record survives a reload (false in memory: asked for, or after a fallback). */
  get durable(): boolean {
    return !this.inMemory;
  }

  /** What is in use now: the requested storage, or "memory" after a fallback. */
  get kind(): StorageKind {
    return this.inMemory ? "memory" : this.requested;
  }

  /** The record text of `intentId`. Rejects with a StorageFailure when it cannot be read. */
  async get(intentId: string): Promise<string | undefined> {
    return this.attempt((backend) => backend.get(intentId));
  }

  /** Writes a record text. Never fails for a full or blocked storage: it falls back to memory. */
  async put(intentId: string, text: string): Promise<void> {
    const backend = this.backend;
    try {
      await backend.put(intentId, text);
    } catch (thrown) {
      if (!(thrown instanceof StorageFailure)) throw thrown;
      // Reads may still work after a refused write (quota): keep what is stored.
      await this.fallBack(thrown.reason, backend);
      await this.backend.put(intentId, text);
    }
  }

  async delete(intentId: string): Promise<void> {
    return this.attempt((backend) => backend.delete(intentId));
  }

  /** Every readable `(intent id, record text)` (not the namespace's secret). */
  async all(): Promise<[string, string][]> {
    return (await this.attempt((backend) => backend.all())).filter(([id]) => id !== SECRET_ID);
  }

  /** Deletes every record of the namespace and its fingerprint secret (logout). Returns how many
   *  intents were removed. */
  async clear(): Promise<number> {
    const entries = await this.attempt((backend) => backend.all());
    for (const [id] of entries) await this.delete(id);
    return entries.filter(([id]) => id !== SECRET_ID).length;
  }

  /** Runs `operation`; an unusable backend is replaced by memory and the operation runs there. */
  private async attempt<T>(operation: (backend: Backend) => Promise<T>): Promise<T> {
    const backend = this.backend;
    try {
      return await operation(backend);
    } catch (thrown) {
      if (!(thrown instanceof StorageFailure) || !thrown.unusable) throw thrown;
      await this.fallBack(thrown.reason, backend);
      return operation(this.backend);
    }
  }

  /** Continues in memory with what `failed` can still give, reporting `reason` (once). */
  private async fallBack(reason: string, failed: Backend): Promise<void> {
    const carried = await failed.all().catch((): [string, string][] => []);
    if (this.inMemory) return; // another operation fell back meanwhile
    this.inMemory = true;
    this.backend = new MemoryBackend(carried);
    this.fallbackReason = reason;
    this.onFallback?.(reason);
  }
}
