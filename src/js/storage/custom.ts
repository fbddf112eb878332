// A storage of the app's own (`storage: { get, put, delete, all }`): React Native's AsyncStorage,
// Electron, a server's Redis, or idempotent-fetch/file in Node. What it returns is checked here (text
// only); the records themselves are decoded and validated by the client, as from any backend.

import { describe } from "../errors.js";
import { StorageFailure, type Backend } from "./backend.js";

/**
 * A storage of your own for intent records: four async methods over text, by namespace and intent id.
 * Store texts exactly as given. A rejected `put` is taken as "this storage cannot be used": the
 * client continues in memory and says so (`storageFallback`, the `storagefallback` event;
 * `NOT_DURABLE` with `requireDurable`), carrying what `all` can still read. A rejected `get`,
 * `delete` or `all` is a `STORAGE` error of that operation. Intent ids may hold any character but
 * control characters; the namespace's fingerprint secret is stored under the id `"\u0001secret"`,
 * and a persisted request's body over 1 KiB (base64) under `"\u0001:"` + its intent id.
 */
export interface AsyncStorage {
  /** The text stored for `intentId` in `namespace`, or undefined. */
  get(namespace: string, intentId: string): Promise<string | undefined>;
  /** Stores (creates or replaces) it; resolves once it is durable. */
  put(namespace: string, intentId: string, text: string): Promise<void>;
  /** Deletes it (missing is fine). */
  delete(namespace: string, intentId: string): Promise<void>;
  /** Every `[intentId, text]` of `namespace` (skip what cannot be read). */
  all(namespace: string): Promise<[string, string][]>;
  /**
   * Optional, for a storage that several processes share (a folder, a database): waits for the lock
   * `name` of `namespace` across them and resolves with the function that releases it. Given, `begin`
   * reads, decides and writes an intent's key under it (and a new namespace's secret), so two
   * processes beginning one intent at once agree on one key; without it they may each mint one. Held
   * for one storage read and write: a lock its holder never releases (the process died) should be
   * taken over after a while. A rejection is taken as the storage failing: that `begin` goes on
   * without the lock, and its write meets the failure (the fallback to memory, or `NOT_DURABLE`).
   */
  lock?(namespace: string, name: string): Promise<() => void | Promise<void>>;
}

/** Whether `value` has the four methods of an AsyncStorage. */
export const isAsyncStorage = (value: unknown): value is AsyncStorage =>
  ["get", "put", "delete", "all"].every((m) => typeof (value as Record<string, unknown> | null)?.[m] === "function");

/** An AsyncStorage as the store's Backend for one namespace: each rejection a StorageFailure
 *  (`unusable` for writes), and only text taken from it. One shelf: a retired record keeps its
 *  intent's slot (the app's storage decides what listing costs). */
export function customBackend(storage: AsyncStorage, namespace: string): Backend {
  const call = async (method: keyof AsyncStorage, unusable: boolean, ...args: string[]): Promise<unknown> => {
    try {
      return await (storage[method] as (...a: string[]) => Promise<unknown>).call(storage, namespace, ...args);
    } catch (thrown) {
      throw new StorageFailure(`storage.${method} failed: ${describe(thrown)}`, unusable);
    }
  };
  const text = (value: unknown) => typeof value === "string";
  return {
    shelves: false,
    async get(intentId) {
      const value = await call("get", false, intentId);
      if (value == null) return undefined;
      if (!text(value)) throw new StorageFailure("storage.get gave no text", false);
      return value as string;
    },
    async put(intentId, value, ...drop) {
      await call("put", true, intentId, value);
      // No transaction: a slot left behind (this delete failing) is deleted with its record.
      for (const id of drop) await call("delete", false, id).catch(() => {});
    },
    async delete(...ids) {
      for (const id of ids) await call("delete", false, id);
    },
    // An AsyncStorage has no transactions: read, then delete (another process may write in between).
    async deleteIf(intentId, test) {
      const value = await call("get", false, intentId);
      if (!text(value) || !test(value as string)) return false;
      await call("delete", false, intentId);
      return true;
    },
    async all(shelf) {
      if (shelf === "retired") return [];
      const entries = await call("all", false);
      return Array.isArray(entries) ? entries.filter((e): e is [string, string] => text(e?.[0]) && text(e?.[1])) : [];
    },
  };
}
