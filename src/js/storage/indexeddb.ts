// IndexedDB, for workers (which have no Web Storage) and on request in pages: database
// `idempotent-fetch`, object store `intents`, one record per intent under the key
// `<namespace>:<slot id>` (namespaces have no ':', so a namespace's records are the key range
// [`<namespace>:`, `<namespace>;`)). A retired record's slot id is RETIRED + its intent id
// (backend.ts): the retired shelf is the range [`<namespace>:\u0002`, `<namespace>:\u0003`), and the
// pending shelf the rest of the namespace above it. Values are the same JSON text as in localStorage.
//
// A part loaded on first use (lazy.ts). Opening starts at once and is awaited by the first operation;
// an open that fails, or hangs (an old Safari bug) for OPEN_TIMEOUT_MS (idb.ts), makes the backend
// unusable: the store falls back to memory.

import { describe, errorName, saying } from "../describe.js";
import { type Backend, RETIRED, type Shelf, StorageFailure } from "./backend.js";
import { KEPT_IN_MEMORY, openDatabase, settled } from "./idb.js";

/** The database every client of this library shares (one store; namespaces are key prefixes). */
export const DATABASE = "idempotent-fetch";
/** The object store of intent records. */
export const STORE = "intents";

/** Resolves when `transaction` commits; rejects with its error once it aborts (QuotaExceededError
 *  at commit, a failed request). */
function committed(transaction: IDBTransaction): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    transaction.oncomplete = () => resolve();
    transaction.onabort = () => reject(transaction.error ?? new Error("the transaction was aborted"));
  });
}

const unusable = (doing: string) => (thrown: unknown) =>
  new StorageFailure(`${errorName(thrown)}: ${doing} IndexedDB failed${saying(thrown)}${KEPT_IN_MEMORY}`, true);
const failed = (doing: string) => (thrown: unknown) =>
  new StorageFailure(__DEV__ ? `${doing} IndexedDB failed: ${describe(thrown)}` : "", false);

/** The intent records in the shared IndexedDB database. */
export class IndexedDbBackend implements Backend {
  readonly shelves = true;
  private readonly prefix: string;
  /** The open database, or why it cannot be used (settles once). */
  private readonly database: Promise<IDBDatabase>;

  private constructor(database: Promise<IDBDatabase>, namespace: string) {
    this.prefix = `${namespace}:`;
    this.database = database;
    this.database.catch(() => {}); // observed by the first operation; never an unhandled rejection
  }

  /** Starts opening the database (`factory`: idb.ts `idbFactory`); returns the reason when it is
   *  blocked outright. */
  static open(namespace: string, factory: IDBFactory): IndexedDbBackend | string {
    try {
      // `open` throws SecurityError in opaque origins (sandboxed frames, data: workers).
      return new IndexedDbBackend(openDatabase(factory, DATABASE, STORE), namespace);
    } catch (thrown) {
      return `${errorName(thrown)}: IndexedDB cannot be opened${saying(thrown)}${KEPT_IN_MEMORY}`;
    }
  }

  async get(id: string): Promise<string | undefined> {
    const store = (await this.transaction("readonly")).objectStore(STORE);
    const value: unknown = await settled(store.get(this.prefix + id)).catch((e: unknown) => {
      throw failed("reading")(e);
    });
    if (value === undefined) return undefined;
    if (typeof value !== "string") throw new StorageFailure(__DEV__ ? "reading IndexedDB failed: the value is not text" : "", false);
    return value;
  }

  async put(id: string, text: string, ...drop: string[]): Promise<void> {
    const transaction = await this.transaction("readwrite");
    try {
      const store = transaction.objectStore(STORE);
      store.put(text, this.prefix + id);
      for (const slot of drop) store.delete(this.prefix + slot);
      await committed(transaction);
    } catch (thrown) {
      throw unusable("writing")(thrown);
    }
  }

  async delete(...ids: string[]): Promise<void> {
    const transaction = await this.transaction("readwrite");
    try {
      for (const id of ids) transaction.objectStore(STORE).delete(this.prefix + id);
      await committed(transaction);
    } catch (thrown) {
      throw failed("removing from")(thrown);
    }
  }

  async deleteIf(id: string, test: (text: string) => boolean, moveTo?: string): Promise<boolean> {
    // One read-write transaction: the read and the delete see no other write in between.
    const transaction = await this.transaction("readwrite");
    let deleted = false;
    try {
      const store = transaction.objectStore(STORE);
      const read = store.get(this.prefix + id);
      read.onsuccess = () => {
        const value: unknown = read.result;
        if (typeof value === "string" && test(value)) {
          if (moveTo !== undefined) store.put(value, this.prefix + moveTo);
          store.delete(this.prefix + id);
          deleted = true;
        }
      };
      await committed(transaction);
      return deleted;
    } catch (thrown) {
      throw failed("removing from")(thrown);
    }
  }

  async all(shelf?: Shelf): Promise<[string, string][]> {
    const store = (await this.transaction("readonly")).objectStore(STORE);
    try {
      const { prefix } = this;
      const end = `${prefix.slice(0, -1)};`;
      const range =
        shelf === "retired"
          ? IDBKeyRange.bound(prefix + RETIRED, prefix + "\u0003", false, true)
          : IDBKeyRange.bound(shelf ? prefix + "\u0003" : prefix, end, false, true);
      // Both requests are made before awaiting, so the transaction stays active for both.
      const keys = settled(store.getAllKeys(range));
      const values = settled(store.getAll(range));
      const [k, v] = await Promise.all([keys, values]);
      const out: [string, string][] = [];
      k.forEach((key, i) => {
        const value: unknown = v[i];
        if (typeof key === "string" && key.startsWith(prefix) && typeof value === "string") {
          out.push([key.slice(prefix.length), value]);
        }
      });
      return out;
    } catch (thrown) {
      throw failed("reading")(thrown);
    }
  }

  /** A transaction on the intents store, once the database is open. */
  private async transaction(mode: IDBTransactionMode): Promise<IDBTransaction> {
    const database = await this.database;
    try {
      return database.transaction(STORE, mode);
    } catch (thrown) {
      // InvalidStateError once the database was closed (storage cleared, versionchange).
      throw unusable("opening a transaction on")(thrown);
    }
  }
}
