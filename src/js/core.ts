// What one client shares between its operations, and the record I/O every operation does:
// read + decode + validate (STORAGE errors name the intent), encode + write.

import type { Listeners } from "./events.js";
import { acquire, type Release, tryAcquire } from "./lock.js";
import type { InFlight } from "./inflight.js";
import { type Engine, F_STATE, type Machine, STATE_FAILED, STATE_PENDING, STATE_SUCCEEDED } from "./machine.js";
import { describe, IdempotentFetchError } from "./errors.js";
import { storageUnavailable } from "./messages.js";
import type { Config } from "./options.js";
import { decodeRecord, encodeRecord, type LoadedRecord, outOfLine, type PersistedRequest, type RecordIds } from "./record.js";
import type { SendResult } from "./results.js";
import { isStorageFailure } from "./storage/backend.js";
import { claim, claimsDbOpen, claimsDb, claimSlot, lostRange, lostSlot, secretSlot } from "./storage/claims.js";
import type { RetiredRecords } from "./storage/retired.js";
import { SECRET_ID, type Store } from "./storage/store.js";
import { hex } from "./fingerprint.js";

export interface ClientCore {
  readonly config: Config;
  readonly store: Store;
  /** The namespace's retired records, bounded (storage/retired.ts). */
  readonly retired: RetiredRecords;
  readonly listeners: Listeners;
  /** Sends in flight in this client, by intent. */
  readonly inFlight: InFlight<SendResult>;
  /** The client's Engine, once the wasm module is ready. */
  engine(): Promise<Engine>;
  /** The namespace's fingerprint secret (read or created once per client). */
  secret(): Promise<Uint8Array<ArrayBuffer>>;
  /** Forgets the remembered secret (after `clear()` deleted it): the next `secret()` reads or makes it anew. */
  forgetSecret(): void;
  /** The origins this client warned about (cors.ts: once per origin). */
  readonly corsWarned: Set<string>;
  /** Told when a send of this client ended (answered or not): the background sweep starts then. */
  sent(): void;
}

const SECRET_HEX = /^[0-9a-f]{64}$/;

/** Reads the namespace's fingerprint secret, or creates it (32 bytes of `crypto.getRandomValues`)
 *  under a cross-tab lock so that two tabs opening a new namespace at once agree on one secret. */
export async function readOrCreateSecret(core: Pick<ClientCore, "config" | "store">): Promise<Uint8Array<ArrayBuffer>> {
  const read = async () => {
    let text: string | undefined;
    try {
      text = await core.store.get(SECRET_ID);
    } catch (thrown) {
      throw storageUnavailable("(fingerprint secret)", isStorageFailure(thrown) ? thrown.reason : String(thrown));
    }
    return text !== undefined && SECRET_HEX.test(text) ? Uint8Array.from(text.match(/../g) ?? [], (h) => parseInt(h, 16)) : undefined;
  };
  const found = await read();
  if (found) return found;
  const release = await decisionLock(core, `idempotent-fetch:secret:${core.config.namespace}`);
  try {
    const again = await read();
    if (again) return again;
    // A CSPRNG failure throws here (a typed error from the caller's begin), never a weak secret.
    const fresh = hex(crypto.getRandomValues(new Uint8Array(32)));
    // Where other tabs see the storage, the first secret is decided in one IndexedDB transaction
    // (the claims store, in a slot outside the namespace's intents): the lock alone does not make another tab's
    // localStorage write visible here in time, and two secrets would fingerprint one request two
    // ways (INTENT_MISMATCH). Without the claims database, the lock's answer stands.
    const db = claimsInUse(core) ? await claimsDb() : undefined;
    const decide = (value: unknown): [string, string | undefined] =>
      typeof value === "string" && SECRET_HEX.test(value) ? [value, undefined] : [fresh, fresh];
    const chosen = db ? await claim(db, secretSlot(core.config.namespace), decide).catch(() => fresh) : fresh;
    await core.store.put(SECRET_ID, chosen);
    return Uint8Array.from(chosen.match(/../g) ?? [], (h) => parseInt(h, 16));
  } finally {
    release();
  }
}

/** The stored record of `intentId`, validated; `undefined` when there is none. Throws STORAGE. */
export async function loadRecord(core: ClientCore, engine: Engine, intentId: string): Promise<LoadedRecord | undefined> {
  let text: string | undefined;
  try {
    text = await core.store.get(intentId);
  } catch (thrown) {
    if (isStorageFailure(thrown)) throw storageUnavailable(intentId, thrown.reason);
    throw thrown;
  }
  return text === undefined ? undefined : decodeRecord(engine, intentId, text);
}

/** The machine's record as stored. The persisted request (it may hold card data) is kept only while
 *  the intent is pending; once retired (succeeded, failed) or expired it is deleted with the write of
 *  this text. */
export const recordText = (machine: Machine, ids: RecordIds, request: PersistedRequest | undefined): string =>
  encodeRecord(machine, ids, machine.get(F_STATE) === STATE_PENDING ? request : undefined);

/** Writes the machine's record (with the persisted request, if any) and marks it saved. A body
 *  stored out of line stays while the record names it (pending), and goes with the write that
 *  retires or expires it. */
export async function saveRecord(
  core: ClientCore,
  machine: Machine,
  ids: RecordIds,
  request: PersistedRequest | undefined,
): Promise<void> {
  const { intentId } = ids;
  const state = machine.get(F_STATE);
  const retired = state === STATE_SUCCEEDED || state === STATE_FAILED;
  try {
    await core.store.put(intentId, recordText(machine, ids, request), retired, outOfLine(request?.body) ? state === STATE_PENDING : undefined);
  } catch (thrown) {
    throw storageUnavailable(intentId, isStorageFailure(thrown) ? thrown.reason : String(thrown));
  }
  machine.markSaved();
  core.retired.written(intentId, retired ? ids.key : undefined);
  // Written to memory only (a fallback): after a reload the claim may be all that is left of this
  // key, and `pending()` reads the claims of marked intents only.
  if (!retired && !core.store.durable && claimsInUse(core)) {
    const db = await claimsDb();
    if (db) await claim(db, lostSlot(core.config.namespace, intentId), () => [0, "1"]).catch(() => 0);
  }
}

/** Lock names: the namespace holds no ':', so `send:<ns>:<id>` and `begin:<ns>:<id>` never collide. */
export const lockName = (core: ClientCore, kind: "begin" | "send", intentId: string): string =>
  `idempotent-fetch:${kind}:${core.config.namespace}:${intentId}`;

/** The cross-tab lock of an intent (lock.ts). A client asked for memory storage keeps its intents
 *  where no other tab or worker can see them: the in-page turn (inflight.ts) is all it needs, so it
 *  takes no lock (a lock round trip costs about as much as a storage write). `begin`'s lock is a
 *  decision lock (below); `send`'s is held for minutes and stays the browser's. */
export function intentLock(core: ClientCore, kind: "begin" | "send", intentId: string, signal?: AbortSignal): Promise<Release> {
  if (kind === "begin") return decisionLock(core, lockName(core, kind, intentId));
  return core.config.storage === "memory" ? Promise.resolve(() => {}) : acquire(lockName(core, kind, intentId), signal);
}

/** The lock of a short create-or-read decision (an intent's key, the namespace's secret): the app's
 *  storage's own `lock` where it has one (processes sharing a folder or a database see no Web Lock),
 *  else the browser's. A `lock` that fails says the storage is failing: the decision goes on without
 *  it, and the write that follows meets the same failure (the loud fallback to memory, or
 *  NOT_DURABLE), rather than refusing a begin that memory could still serve. */
function decisionLock(core: Pick<ClientCore, "config">, name: string): Promise<Release> {
  const { storage, namespace } = core.config;
  if (storage === "memory") return Promise.resolve(() => {});
  const lock = typeof storage === "object" && storage.lock;
  if (!lock) return acquire(name);
  return (async () => {
    try {
      const release = await lock.call(storage, namespace, name);
      return () => void (async () => release())().catch(() => {});
    } catch {
      return () => {};
    }
  })();
}

/** `begin` also asks for the intent's send lock, without waiting (`ifAvailable`), in parallel with
 *  its own work: when it is free, the operation holds it for SEND_LOCK_OFFER_MS and a `send` made
 *  right after `begin` (the usual "click Pay") adopts it instead of a second lock round trip. Holding
 *  a lock a little longer never weakens it; another tab's send just starts that much later. */
export function offerSendLock(core: ClientCore, intentId: string): Promise<Release | undefined> {
  return core.config.storage === "memory" ? Promise.resolve(undefined) : tryAcquire(lockName(core, "send", intentId));
}
export const SEND_LOCK_OFFER_MS = 100;

/** Whether `begin` of a named intent claims its key in IndexedDB (storage/claims.ts): only where
 *  another tab or worker can see the intent (local and indexeddb storage). */
export const claimsInUse = (core: Pick<ClientCore, "config">): boolean => /^(local|indexeddb)$/.test(String(core.config.storage));

/** Deletes the claim of `intentId`, or every claim of the namespace (`clear`). With `key` (the
 *  sweep), only a claim of that key: resolves false when another tab claimed a new key meanwhile
 *  (this tab's view is stale). Never rejects: a claim the database cannot delete only means that a
 *  later begin resumes its key (the server replays its answer). When the claims database is open
 *  (every `begin` that claimed opened it), the deletion's transaction is asked for before this
 *  returns: IndexedDB runs any read-write transaction on the claim asked for later, in this tab or
 *  another, after it, so a caller need not wait for its commit to be ordered before them. */
export function dropClaim(core: ClientCore, intentId?: string, key?: string): Promise<boolean> {
  if (!claimsInUse(core)) return Promise.resolve(true);
  const db = claimsDbOpen();
  return db ? dropClaimIn(db, core.config.namespace, intentId, key) : claimsDb().then((db) => (db ? dropClaimIn(db, core.config.namespace, intentId, key) : true));
}

function dropClaimIn(db: IDBDatabase, ns: string, intentId?: string, key?: string): Promise<boolean> {
  // The whole namespace (`clear()`): its fingerprint secret's slot goes too.
  if (intentId === undefined) void claim(db, secretSlot(ns), () => [true, null]).catch(() => true);
  const slot = intentId === undefined ? IDBKeyRange.bound(`${ns}\0`, `${ns}\x01`) : claimSlot(ns, intentId);
  // The claim's text is its record's JSON: `"key":"<key>"` appears there only as its key field (in
  // any string field, a quote is escaped).
  const decide = (value: unknown): [boolean, null | undefined] => {
    const drop = value === undefined || key === undefined || String(value).includes(`"key":"${key}"`);
    return [drop, drop ? null : undefined];
  };
  // Its lost mark (all of the namespace's, for `clear()`) goes with the claim, in the same transaction.
  return claim(db, slot, decide, undefined, intentId === undefined ? lostRange(ns) : lostSlot(ns, intentId)).catch(() => true);
}

/** Every `(intent id, record text)` of a shelf of the namespace (store.ts `all`); `STORAGE` when the
 *  storage cannot list them. */
export async function storedEntries(core: ClientCore, shelf?: "pending" | "retired"): Promise<[string, string][]> {
  try {
    return await core.store.all(shelf);
  } catch (thrown) {
    throw new IdempotentFetchError("STORAGE", __DEV__ && `listing intents failed: ${describe(thrown)}`);
  }
}
