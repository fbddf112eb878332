// Opening an IndexedDB database with its one object store, shared by the intent records' backend
// (indexeddb.ts, a part loaded on first use) and the claims database (claims.ts, used by every begin
// of a page's storage). Without state: the part carries its own copy (package/build.mjs, PURE_SOURCES).
//
// An open that fails, or hangs (an old Safari bug) for OPEN_TIMEOUT_MS, is an unusable StorageFailure:
// the store falls back to memory.

import { errorName, saying } from "../describe.js";
import { StorageFailure } from "./backend.js";

/** The schema version: bump it (and migrate in `upgradeneeded`) if the layout changes. */
const VERSION = 1;
/** How long the first operation waits for the database to open before falling back to memory. */
export const OPEN_TIMEOUT_MS = 5_000;

/** How every reason to fall back ends (the development build's words: src/js/mode.ts). */
export const KEPT_IN_MEMORY = __DEV__ ? "; intents are kept in memory" : "";

/** `request`'s result once it succeeds, or its error. */
export function settled<T>(request: IDBRequest<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

/** One `open` of `name` at `version`, creating
 *  `store` in the upgrade when it is missing. */
function openOnce(factory: IDBFactory, name: string, store: string, version: number): Promise<IDBDatabase> {
  const request = factory.open(name, version);
  request.onupgradeneeded = () => {
    const database = request.result;
    if (!database.objectStoreNames.contains(store)) database.createObjectStore(store);
  };
  // `success` fires after any upgrade transaction has finished.
  return settled(request);
}

/** `name` with its `store`, at schema VERSION (a newer schema, from a newer version of this library,
 *  is a VersionError: unusable here). A database that exists at VERSION without the store (deleted by
 *  hand or by a tool, or made by something else: nothing of ours is in it) is deleted and made anew,
 *  once: otherwise every transaction would fail and every call open it again. */
async function openWithStore(factory: IDBFactory, name: string, store: string): Promise<IDBDatabase> {
  const database = await openOnce(factory, name, store, VERSION);
  if (database.objectStoreNames.contains(store)) return database;
  database.close();
  await settled(factory.deleteDatabase(name));
  return openOnce(factory, name, store, VERSION);
}

/**
 * Opens `name` with its one object store `store` (created on first open, or repaired when missing).
 * Rejects with an unusable StorageFailure when the open fails or hangs (an old Safari bug) for
 * OPEN_TIMEOUT_MS; the connection closes when a newer version of this library asks to upgrade the
 * schema. `factory.open` itself may throw (SecurityError in opaque origins): the caller catches that.
 */
export function openDatabase(factory: IDBFactory, name: string, store: string): Promise<IDBDatabase> {
  const opening = openWithStore(factory, name, store);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new StorageFailure(`IndexedDB did not open within ${OPEN_TIMEOUT_MS} ms${KEPT_IN_MEMORY}`, true)),
      OPEN_TIMEOUT_MS,
    );
  });
  const opened = opening.then(
    (database) => {
      // Let a newer version of this library upgrade the schema instead of blocking it.
      database.onversionchange = () => database.close();
      return database;
    },
    (thrown: unknown) => {
      throw new StorageFailure(`${errorName(thrown)}: IndexedDB cannot be opened${saying(thrown)}${KEPT_IN_MEMORY}`, true);
    },
  );
  const result = Promise.race([opened, timeout]).finally(() => clearTimeout(timer));
  // An open that succeeds after the timeout holds a connection nobody will use: close it.
  result.catch(() => opened.then((database) => database.close(), () => {}));
  return result;
}

/** The global IndexedDB factory, or why there is none: absent, or blocked outright (reading
 *  `indexedDB` throws SecurityError where storage is blocked). */
export function idbFactory(): IDBFactory | string {
  try {
    return (globalThis as { indexedDB?: IDBFactory }).indexedDB ?? `indexedDB is not available here${KEPT_IN_MEMORY}`;
  } catch (thrown) {
    return `${errorName(thrown)}: indexedDB is blocked${saying(thrown)}${KEPT_IN_MEMORY}`;
  }
}
