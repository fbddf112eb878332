// The store's backend over an app's own storage (async-storage.ts): what it returns is checked here
// (text only); the records themselves are decoded and validated by the client, as from any backend. A
// part loaded on first use (lazy.ts).

import { describe } from "../describe.js";
import type { AsyncStorage } from "./async-storage.js";
import { StorageFailure, type Backend } from "./backend.js";

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
