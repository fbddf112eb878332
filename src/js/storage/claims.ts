// Claims: the key of every named intent whose storage other tabs can see, in one
// IndexedDB object store, so that create-or-resume is ONE read-write transaction. IndexedDB runs
// read-write transactions of one store one after another, across tabs and workers of the origin, and
// each sees the commits before it: two tabs beginning one intent at once cannot both find nothing and
// mint two keys, however late localStorage's own writes reach the other tab's renderer process.
//
// Database `idempotent-fetch-claims`, store `claims`, key `<namespace>\0<intent id>` (namespaces hold
// no control characters, so a namespace's claims are the range [`<ns>\0`, `<ns>\x01`)), value: the
// record text of the key as the claiming `begin` wrote it (never the persisted request). A claim is
// written only when `begin` mints a key; `discard`, `clear` and the sweep delete it with the record.
// A claim whose record was written to memory only (the storage fell back) may be all that a reload
// finds of that intent: `saveRecord` then marks it lost (`lostSlot`, the range [`<ns>\x02`,
// `<ns>\x03`)), and `pending()` reads the claims of the marked intents only, never every claim.
//
// The database is opened once per page (or worker) by `openDatabase`, shared with the IndexedDB
// storage. When IndexedDB is absent, blocked or does not open within OPEN_TIMEOUT_MS, `claimsDb`
// resolves `undefined` and `begin` takes the Web Lock path for the page's life; a transaction that
// fails later (the database closed, storage cleared, quota) rejects `undefined`: that call takes the
// lock path too, and the next call opens the database again.

import { openDatabase } from "./idb.js";

const STORE = "claims";

let opened: Promise<IDBDatabase | undefined> | undefined;
/** What `opened` resolved to, once it has: a transaction asked for in the same task as its cause. */
let openNow: IDBDatabase | undefined;

/** The claims database of this page, opened on first use; `undefined` where it cannot be used. */
export function claimsDb(): Promise<IDBDatabase | undefined> {
  return (opened ??= (async () => {
    try {
      // Reading `indexedDB` throws where storage is blocked; `open` throws in opaque origins.
      return (openNow = await openDatabase(indexedDB, "idempotent-fetch-claims", STORE));
    } catch {
      return undefined;
    }
  })());
}

/** The claims database if this page has it open now (no waiting), else `undefined`. */
export const claimsDbOpen = (): IDBDatabase | undefined => openNow;

/** No flush to disk before `complete`: what a claim gives, the order of begins across tabs, does not
 *  depend on it (IndexedDB runs the read-write transactions of a store one after another either way),
 *  and the record it guards lives in storage that flushes no sooner (localStorage). */
const RELAXED: IDBTransactionOptions = { durability: "relaxed" };

/** The slot of a namespace's fingerprint secret: just past the range of its intents' slots, so
 *  listing or counting a namespace's claims never meets it. */
export const secretSlot = (namespace: string): string => `${namespace}\x01secret`;

/** The claim slot of an intent. */
export const claimSlot = (namespace: string, intentId: string): string => `${namespace}\0${intentId}`;

/**
 * One read-write transaction on `slot` (a key range: every claim in it): `decide` gets the claim's
 * value (`undefined`: none) and runs synchronously while the transaction is active; it returns its
 * result and what to write in the same transaction: a new claim text, `null` to delete, `undefined`
 * for nothing. Resolves with the result once committed. Rejects with what `decide` threw (always an
 * error object; the transaction is aborted), or with `undefined` when the database failed (`undo` is
 * then given the result, if `decide` had returned one, to release it). `alsoDelete`: slots deleted in
 * the same transaction when `decide` deletes the claim.
 */
export function claim<T>(
  db: IDBDatabase,
  slot: string | IDBKeyRange,
  decide: (value: unknown) => [T, string | null | undefined],
  undo?: (result: T) => void,
  alsoDelete?: string | IDBKeyRange,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let decided: [T] | undefined;
    let thrown: unknown;
    try {
      const transaction = db.transaction(STORE, "readwrite", RELAXED);
      const store = transaction.objectStore(STORE);
      const read = store.get(slot);
      read.onsuccess = () => {
        try {
          const [result, text] = decide(read.result);
          decided = [result];
          if (text === null) {
            store.delete(slot);
            // What goes with the claim (its lost mark), in the same transaction.
            if (alsoDelete !== undefined) store.delete(alsoDelete);
          }
          else if (text !== undefined) store.put(text, slot as string);
        } catch (error) {
          thrown = error;
          transaction.abort();
        }
      };
      transaction.oncomplete = () => (decided ? resolve(decided[0]) : reject());
      transaction.onabort = () => {
        if (decided) undo?.(decided[0]);
        reject(thrown);
      };
    } catch {
      reopenNextTime(db);
      reject();
    }
  });
}

/** The database cannot run a transaction (InvalidStateError: closed by a versionchange or by storage
 *  being cleared): the next call opens it again, and this connection is closed, never left behind. */
function reopenNextTime(db: IDBDatabase): void {
  opened = openNow = undefined;
  db.close();
}

/** The slot marking the claim of `intentId` as perhaps the only copy of its key (lost records). */
export const lostSlot = (namespace: string, intentId: string): string => `${namespace}\x02${intentId}`;

/** The range of a namespace's lost marks. */
export const lostRange = (namespace: string): IDBKeyRange => IDBKeyRange.bound(`${namespace}\x02`, `${namespace}\x03`, false, true);

/** The claims of `namespace`'s intents marked lost, as `[intent id, claim value]`, in one read-only
 *  transaction (what it costs is what the marked ones cost). Rejects `undefined` when the database
 *  failed. */
export function lostClaims(db: IDBDatabase, namespace: string): Promise<[string, unknown][]> {
  return new Promise<[string, unknown][]>((resolve, reject) => {
    try {
      const transaction = db.transaction(STORE, "readonly");
      const store = transaction.objectStore(STORE);
      const keys = store.getAllKeys(lostRange(namespace));
      const out: [string, unknown][] = [];
      keys.onsuccess = () => {
        for (const slot of keys.result) {
          const id = String(slot).slice(namespace.length + 1);
          const value = store.get(claimSlot(namespace, id));
          value.onsuccess = () => out.push([id, value.result]);
        }
      };
      transaction.oncomplete = () => resolve(out);
      transaction.onabort = () => reject();
    } catch {
      reopenNextTime(db);
      reject();
    }
  });
}

/**
 * The fast path of a new intent (nothing stored in this tab): `add` the claim `text` to the free
 * `slot` and commit at once, one round trip instead of a read and then a write. Resolves `true` once
 * committed, `false` when the slot was already claimed (another tab began the intent first: the caller
 * then reads that claim with `claim`), and rejects `undefined` when the database failed.
 */
export function claimNew(db: IDBDatabase, slot: string, text: string): Promise<boolean> {
  return new Promise<boolean>((resolve, reject) => {
    let taken = false;
    try {
      const transaction = db.transaction(STORE, "readwrite", RELAXED);
      const request = transaction.objectStore(STORE).add(text, slot);
      // ConstraintError: the slot is claimed. Handled where the engine lets the transaction go on;
      // an engine that aborts it anyway (the commit was already asked for) says so in `error`.
      request.onerror = (event) => {
        taken = request.error?.name === "ConstraintError";
        if (taken) event.preventDefault();
      };
      transaction.commit?.();
      transaction.oncomplete = () => resolve(!taken);
      transaction.onabort = () => (taken || transaction.error?.name === "ConstraintError" ? resolve(false) : reject());
    } catch {
      reopenNextTime(db);
      reject();
    }
  });
}

/** Deletes, in one read-write transaction, the claims of `records` (`[intent id, key]`) that still
 *  hold that key (a newer key claimed meanwhile by another tab is kept). Never rejects: a claim left
 *  behind only means that a later begin resumes its key, and the server replays its answer. */
export function dropClaimsOf(db: IDBDatabase, namespace: string, records: [string, string][]): Promise<void> {
  return new Promise<void>((resolve) => {
    try {
      const transaction = db.transaction(STORE, "readwrite", RELAXED);
      const store = transaction.objectStore(STORE);
      for (const [intentId, key] of records) {
        const slot = claimSlot(namespace, intentId);
        const read = store.get(slot);
        // The claim's text is its record's JSON: `"key":"<key>"` appears there only as its key field.
        read.onsuccess = () => {
          if (typeof read.result === "string" && read.result.includes(`"key":"${key}"`)) {
            store.delete(slot);
            store.delete(lostSlot(namespace, intentId));
          }
        };
      }
      transaction.oncomplete = () => resolve();
      transaction.onabort = () => resolve();
    } catch {
      reopenNextTime(db);
      resolve();
    }
  });
}
