// `IdempotentClient`: the entry point. Makes state-changing requests safe to retry: one idempotency
// key per intent, kept in storage across reloads, re-sent until the server gives a definite answer.

import { registerBackgroundSync } from "./background.js";
import {
  claimsInUse,
  type ClientCore,
  dropClaim,
  intentLock,
  loadRecord,
  offerSendLock,
  readOrCreateSecret,
  recordText,
  saveRecord,
  storedEntries,
} from "./core.js";
import { describe, IdempotentFetchError, invalidOptions } from "./errors.js";
import { type IdempotentRequestInit, readFetchArgs } from "./fetch-args.js";
import { Listeners, type ClientEventMap } from "./events.js";
import { Fields } from "./fields.js";
import { fingerprint } from "./fingerprint.js";
import { InFlight } from "./inflight.js";
import type { SweepKit } from "./sweep.js";
import type { ResumeKit } from "./resume.js";
import { sweepPart, leasePart, placementPart, reconcilePart, resumePart, sha256Part, storedRequestPart } from "./lazy.js";
import { needsLease } from "./lock.js";
import { E_INVALID_OPTIONS, type Engine, F_DIRTY, F_RESUMED, type Machine, MISMATCH_CLAIMED, MISMATCH_KEY_CLAIMED, MISMATCH_KEY_STORED, OPT_RETRY_BUDGET, OPTIONS, RESUMED_CLAIMED, RESUMED_NEW, RESUMED_STORED } from "./machine.js";
import { corruptRecord, fromThrown, intentMismatch, notFound, storageUnavailable } from "./messages.js";
import {
  type BeginOptions,
  type ClientOptions,
  type Config,
  parseBeginOptions,
  parseClientOptions,
  type StorageKind,
} from "./options.js";
import {
  discardIntent,
  IdempotentOperation,
  intentIdArg,
  type IntentState,
  type ReconcileResult,
  type SettleResult,
  type RecordView,
  viewOf,
} from "./operation.js";
import { decodeRecord, encodeRecord, INLINE_BODY_MAX, type LoadedRecord, type PersistedRequest, type RecordIds, retiredStamp } from "./record.js";
import { type IntentRequest, pageLocation, prepareParts, prepareRequest, type PreparedRequest } from "./request.js";
import type { SendResult } from "./results.js";
import { claim, claimNew, claimsDb, claimSlot, dropClaimsOf, lostClaims } from "./storage/claims.js";
import { RetiredRecords } from "./storage/retired.js";
import { Store } from "./storage/store.js";
import { loadMachine, machineIfLoaded, type MachineModule, refused } from "./wasm.js";

/** A stored intent, as listed by `client.pending()`. */
export interface IntentInfo {
  /** The intent's id (the first argument of `begin`). */
  intentId: string;
  /** Its idempotency key. */
  key: string;
  /** Where it stands. */
  state: IntentState;
  /** Attempts across every send of the intent, earlier page loads included. */
  attempts: number;
  /** When it was begun (milliseconds since the epoch, `Date.now()`). */
  createdAt: number;
  /** When its record was last written (milliseconds since the epoch). */
  updatedAt: number;
  /** The HTTP status of its last answer, if any. */
  lastStatus: number | null;
  /** Whether the request was persisted (`persistRequest`) so `client.resume` can re-send it. */
  resumable: boolean;
}

/** Makes state-changing requests safe to retry: one idempotency key per intent, kept in storage
 *  across reloads, re-sent until the server gives a definite answer. */
export class IdempotentClient {
  private readonly core: ClientCore;
  private engineReady: Promise<Engine> | undefined;
  /** The Engine once made (the wasm module is ready). */
  private engineMade: Engine | undefined;
  private freed = false;
  /** The background sweep was asked for (once per client, after its first send). */
  private swept = false;
  /** When this client was made: the background sweep leaves records written since to `sweep()`. */
  private readonly madeAt = Date.now();

  /**
   * Creates a client. Throws `IdempotentFetchError` (`INVALID_OPTIONS`, naming the field) for a bad
   * option. Never throws because storage is blocked or full: it falls back to memory and says so in
   * `storageFallback` and a `storagefallback` event.
   */
  constructor(options?: ClientOptions) {
    const config = parseClientOptions(options);
    const store = new Store(config.storage, config.namespace);
    const listeners = new Listeners();
    store.onFallback = (reason) => listeners.emit({ type: "storagefallback", reason });
    const inFlight = new InFlight<SendResult>(shareResult);
    const create = (module: MachineModule) => (this.engineMade = makeEngine(module, config));
    const loaded = machineIfLoaded();
    if (loaded) this.engineReady = Promise.resolve(create(loaded)); // a refused option throws here
    const engine = () => {
      if (this.freed) return Promise.reject(new TypeError("this IdempotentClient was freed"));
      // A failed load is not remembered (the next call loads again); a refused option is.
      return (this.engineReady ??= loadMachine().then(create, (error: unknown) => {
        this.engineReady = undefined;
        throw error;
      }));
    };
    let secret: Promise<Uint8Array<ArrayBuffer>> | undefined;
    const secretOnce = () =>
      (secret ??= readOrCreateSecret({ config, store }).catch((error: unknown) => {
        secret = undefined; // not remembered: the next begin tries again
        throw error;
      }));
    const forgetSecret = () => {
      secret = undefined;
    };
    const retired = new RetiredRecords(store, config.namespace, config.maxRetiredRecords, retiredStamp, claimsInUse({ config }), KIT);
    const sent = () => this.sweepLater();
    this.core = { config, store, retired, listeners, inFlight, engine, secret: secretOnce, forgetSecret, corsWarned: new Set(), sent };
    // A client that stores requests (persistRequest, or `background`, which needs IndexedDB) loads
    // their part now, while the page is surely online: a begin made offline must not need it then.
    if (config.persistRequest || config.storage === "indexeddb") storedRequestPart().catch(() => {});
    // `resume` needs persisted requests: its part comes with them, so a page resumes offline too.
    if (config.persistRequest) resumePart().catch(() => {});
    // Bound, so `client.fetch` can be handed to an HTTP client as its fetch (`ky.create({ fetch })`).
    this.fetch = this.fetch.bind(this);
    // No storage is touched here: the warm-up runs when the page is idle, the sweep after the first
    // send, in slices (`sweepLater`), so a page's start-up, its `pending()` and its first click wait
    // neither for the browser's first use of storage nor for the history. The warm-up waits for the
    // module too: the storage's first use holds the main thread, and on a first visit the page is
    // idle before the `.wasm` has arrived, whose compile (and `ready`) would then wait for it.
    void loadMachine().then(idle, idle).then(() => this.warm());
  }

  /** Opens what every `begin` needs besides the module (the claims database, the storage and its
   *  secret, the browser's lock service) once the module is loaded and the page is idle: a page's
   *  first use of each costs more than the rest of a begin (docs/ARCHITECTURE.md, data flow step
   *  10), and a click should not wait for it. Failures are left to the begin that meets them again. */
  private warm(): void {
    if (this.freed) return;
    const { core } = this;
    // The module is loaded by now, or failed to: the first begin loads it again.
    core.secret().catch(() => {});
    // Neither of these rejects: a claims database that cannot open is `undefined`, a refused lock too.
    if (claimsInUse(core)) void claimsDb();
    // A part the options will use is loaded now, not when the click needs it.
    if (core.config.reconciler.statusUrl || core.config.reconciler.reconcile) {
      reconcilePart().catch(() => {});
      resumePart().catch(() => {}); // `reconcile(id)`, `settle(id)`
    }
    if (core.config.keyIn) placementPart().catch(() => {});
    // Plain http pages have no crypto.subtle: their fingerprints take the plain-JS SHA-256.
    if (!globalThis.crypto?.subtle) sha256Part().catch(() => {});
    if (core.config.storage !== "memory" && needsLease()) leasePart().catch(() => {});
    // A lock no intent can have (ids hold no control character), given back at once.
    void offerSendLock(core, "\u0001warm-up").then((release) => release?.());
  }

  /** Starts the background sweep once, when the page is idle (after the first send). */
  private sweepLater(): void {
    if (this.swept) return;
    this.swept = true;
    void idle().then(async () => (await sweepPart()).sweepIntents(KIT, this.core, true, this.madeAt)).catch(() => {});
  }

  /**
   * Begins the intent `intentId`, or resumes it after a reload (same key). `request` is
   * `{ url, method, headers, body }` or a `Request` (its body read once, within `maxBodyBytes`). Rejects with
   * `INVALID_REQUEST`, `BODY_NOT_REPLAYABLE`, `INTENT_MISMATCH` (the id was begun with another
   * request; the message names the old key) or `STORAGE` (the stored record is corrupt: discard it
   * after checking with your server).
   */
  async begin(intentId: string, request: IntentRequest | Request, options?: BeginOptions): Promise<IdempotentOperation> {
    const id = intentIdArg(intentId);
    const { replace, key, background } = parseBeginOptions(options);
    // The service worker reads the page's intents from the same IndexedDB database; localStorage,
    // sessionStorage and memory do not exist there.
    if (background && this.core.config.storage !== "indexeddb") {
      throw invalidOptions(__DEV__ && 'begin option background needs storage "indexeddb": a service worker cannot read the storage this client uses');
    }
    const operation = await this.beginPrepared(
      id,
      () => prepareRequest(request, this.core.config.headerName, this.core.config.maxBodyBytes),
      { replace, key, background },
    );
    if (background) registerBackgroundSync();
    return operation;
  }

  /**
   * Resumes a stored intent whose request was persisted (`persistRequest: true`), e.g. one listed by
   * `pending()` after a reload. The stored request is checked again like a new one (method, URL,
   * headers), its URL must have the page's origin (or one listed in `resumeOrigins`), and it must
   * match the intent's keyed fingerprint. Credentials are never stored: pass them again in
   * `options.headers` (they replace stored headers of the same name). Rejects with `NOT_FOUND` if there is no such intent,
   * `INVALID_REQUEST` if its request was not persisted, is invalid or goes to another origin, and
   * `STORAGE` if it was altered.
   */
  async resume(intentId: string, options?: ResumeOptions): Promise<IdempotentOperation> {
    return (await resumePart()).resumeIntent(KIT, this.core, intentId, options);
  }

  /**
   * Asks the server what became of a stored intent's key (see `IdempotentOperation.reconcile`), e.g.
   * one listed by `pending()` after a reload. `options.headers`: credentials for the status request
   * (never stored). Rejects `NOT_FOUND` when there is no such intent.
   */
  async reconcile(intentId: string, options?: ResumeOptions & { signal?: AbortSignal }): Promise<ReconcileResult> {
    return (await this.stored(intentId, options)).reconcile(options?.signal ? { signal: options.signal } : undefined);
  }

  /**
   * Settles a stored intent's key at the server (see `IdempotentOperation.settle`): done, in flight,
   * fenced, or no fence. Settle before `begin(..., { replace: true })` gives the intent a new key.
   * `options.headers`: credentials for the request (never stored). Rejects `NOT_FOUND` when there is no
   * such intent.
   */
  async settle(intentId: string, options?: ResumeOptions & { signal?: AbortSignal }): Promise<SettleResult> {
    return (await this.stored(intentId, options)).settle(options?.signal ? { signal: options.signal } : undefined);
  }

  /** A stored intent's operation for a question about its key, with `options.headers` (credentials). */
  private async stored(intentId: string, options: ResumeOptions & { signal?: AbortSignal } | undefined): Promise<IdempotentOperation> {
    return (await resumePart()).storedOperation(KIT, this.core, intentId, options);
  }

  /** Intents not yet definitely answered (`pending` and `expired`), e.g. to offer "resume" after a
   *  reload: every one whose key is known, from the storage or, where storage lost its record (a
   *  fallback to memory in an earlier page), from the claim that `begin` would resume. Corrupt
   *  entries are skipped. */
  async pending(): Promise<IntentInfo[]> {
    const engine = await this.core.engine();
    const out: IntentInfo[] = [];
    const entries = await storedEntries(this.core);
    const db = claimsInUse(this.core) && (await claimsDb());
    if (db) {
      // The claims of intents whose record went to memory only (marked lost), if not stored since.
      const lost = await lostClaims(db, this.core.config.namespace).catch((): [string, unknown][] => []);
      for (const [id, value] of lost) {
        if (typeof value === "string" && (await this.core.store.get(id).catch(() => undefined)) === undefined) entries.push([id, value]);
      }
    }
    for (const [id, text] of entries) {
      // A retired record (on the pending shelf when an earlier version wrote it) is not listed:
      // known without making its machine.
      if (retiredStamp(text)) continue;
      let loaded;
      try {
        loaded = decodeRecord(engine, id, text);
      } catch {
        continue;
      }
      const view = viewOf(loaded.machine, loaded.ids);
      loaded.machine.free();
      if (view.state !== "succeeded" && view.state !== "failed") out.push({ ...view, resumable: loaded.request !== undefined });
    }
    return out;
  }

  /** The stored intent `intentId` in any state (an answered one too, until `keyTtlMs`: "already
   *  paid" after a reload), or null. Rejects with `STORAGE` if its record is corrupt. */
  async intent(intentId: string): Promise<IntentInfo | null> {
    const loaded = await loadRecord(this.core, await this.core.engine(), intentIdArg(intentId));
    if (!loaded) return null;
    const view = viewOf(loaded.machine, loaded.ids);
    loaded.machine.free();
    return { ...view, resumable: loaded.request !== undefined };
  }

  /** Forgets an intent and its key (after the app settled it with its server, or to start over).
   *  Resolves to whether there was one. */
  async discard(intentId: string): Promise<boolean> {
    return discardIntent(this.core, intentId);
  }

  /** Removes the whole namespace: every stored intent, key and persisted request, and the
   *  namespace's fingerprint secret (call it at logout). Resolves to how many intents were removed. */
  async clear(): Promise<number> {
    try {
      const removed = await this.core.store.clear();
      await dropClaim(this.core);
      // The secret is gone from storage: a later begin must not fingerprint with the old one, or a
      // reload (which reads or makes a new secret) would no longer recognise that intent's request.
      this.core.forgetSecret();
      return removed;
    } catch (thrown) {
      throw new IdempotentFetchError("STORAGE", __DEV__ && `clearing the namespace failed: ${describe(thrown)}`);
    }
  }

  /** Deletes terminal intents older than `keyTtlMs` and marks stale pending ones `expired`. Runs by
   *  itself once per client, in slices when the page is idle after the first send; call it again on
   *  long-lived pages. */
  async sweep(): Promise<{
    /** Records deleted (answered or expired intents past `keyTtlMs`). */
    removed: number;
    /** Pending intents newly marked `expired`. */
    expired: number;
  }> {
    return (await sweepPart()).sweepIntents(KIT, this.core, false, this.madeAt);
  }

  /**
   * A `fetch`-shaped drop-in: `await client.fetch(url, { method: "POST", body, intent })` resolves to
   * the `Response` of the definite answer (a 4xx included) and rejects with `IdempotentFetchError`
   * otherwise. Without `intent`, the intent is the request itself (its method, URL, content type
   * and body): calling again with the same request while it has no definite answer (a retry loop
   * around it, a click after a reload) resumes the same key; once answered it is forgotten, so a
   * later identical request is a new intent. `input` may be a `Request` (its body is read once,
   * within `maxBodyBytes`, unless `init.body` replaces it; its signal is used unless `init.signal`
   * replaces it). Bound to its client: pass `client.fetch` to an HTTP client as is.
   */
  async fetch(input: RequestInfo | URL, init?: IdempotentRequestInit): Promise<Response> {
    const args = await readFetchArgs(input, init);
    const { headerName, maxBodyBytes, requireDurable } = this.core.config;
    let prepare = () => prepareParts(args.url, args.method, args.headers, args.body, headerName, maxBodyBytes);
    let intentId = args.intent;
    let known: string | undefined;
    if (intentId === undefined) {
      // Named by its keyed fingerprint: the request read and hashed once, then handed to begin as it is.
      const prepared = await prepare();
      known = await fingerprint(prepared, await this.core.secret());
      intentId = `fetch:${known}`;
      prepare = async () => prepared;
    }
    // begin writes the record itself with requireDurable (it must see that write land) and with a
    // signal (the send can be aborted before its first attempt, and ABORTED says the key is kept).
    const deferSave = !args.signal && !requireDurable;
    // An intent named by its request is deleted once answered (not kept retired for keyTtlMs): an
    // identical request after a definite answer is a new order the user asked for.
    const named = args.intent !== undefined;
    const plan: BeginPlan = {
      replace: false,
      key: args.key,
      background: false,
      fingerprint: known,
      sendNow: { deferSave, deleteWhenAnswered: !named },
    };
    const send = async () => (await (await this.beginPrepared(intentId, prepare, plan)).send(args.signal ? { signal: args.signal } : undefined)).response;
    // NOT_FOUND: resumed from a record that another tab answered and deleted before this send held
    // the intent (its deletion reaches this tab's storage later than the claim's): nothing was sent,
    // and the request, forgotten once answered, is a new intent now.
    return send().catch((error: unknown) => (named || (error as IdempotentFetchError | undefined)?.code !== "NOT_FOUND" ? Promise.reject(error) : send()));
  }

  /** Adds a listener for `"attempt" | "retry" | "offline" | "success" | "failure" | "expired" |
   *  "storagefallback" | "cors" | "reconcile"`. Throws `INVALID_OPTIONS` for another type. */
  addEventListener<K extends keyof ClientEventMap>(type: K, listener: (event: ClientEventMap[K]) => void): void {
    this.core.listeners.add(type, listener);
  }

  /** Removes a listener added with `addEventListener`. */
  removeEventListener<K extends keyof ClientEventMap>(type: K, listener: (event: ClientEventMap[K]) => void): void {
    this.core.listeners.remove(type, listener);
  }

  /** Releases the client's wasm memory (its retry policy and budget). The client cannot be used
   *  afterwards; intents stay stored. Optional (garbage collection does it too); kept from the
   *  wasm-bindgen API. */
  free(): void {
    this.freed = true;
    this.engineMade?.free();
    this.engineMade = undefined;
  }

  /** The namespace (account) this client's intents live under. */
  get namespace(): string {
    return this.core.config.namespace;
  }

  /** The storage in use now: the requested one, or `"memory"` after a fallback. */
  get storage(): StorageKind {
    return this.core.store.kind;
  }

  /** Why storage fell back to memory (blocked, full, absent), or `null`. */
  get storageFallback(): string | null {
    return this.core.store.fallbackReason;
  }

  /** Tokens left in the retry budget. */
  get retryBudget(): number {
    // Before the wasm module is ready nothing was spent: the bucket is full.
    return this.engineMade?.budget() ?? this.core.config.engine[OPT_RETRY_BUDGET]!;
  }

  /** Create-or-resume, decided by the machine. Two tabs beginning one intent at once must not each
   *  mint a key (the second would overwrite the first's record while its attempt is in flight): for
   *  storage other tabs see, the decision is one IndexedDB transaction on the intent's claim
   *  (storage/claims.ts); without IndexedDB, or when it fails, it is made under a short Web Lock,
   *  separate from the lock `send` holds for minutes. */
  private async beginPrepared(intentId: string, prepare: () => Promise<PreparedRequest>, plan: BeginPlan): Promise<IdempotentOperation> {
    const { core } = this;
    const claims = claimsInUse(core) ? claimsDb() : undefined;
    // The locks are asked for first, before the request is read and fingerprinted: their round trips
    // (the largest part of begin + send's cost) overlap that work.
    const sendLock = offerSendLock(core, intentId);
    const beginLock = claims ? undefined : intentLock(core, "begin", intentId);
    let operation: IdempotentOperation | undefined;
    try {
      let prepared: PreparedRequest;
      let fp: string;
      let engine: Engine;
      let db: IDBDatabase | undefined;
      try {
        prepared = await prepare();
        // A body that cannot carry the key is refused before anything is stored.
        if (core.config.keyIn) (await placementPart()).placeKey(prepared, "", core.config.keyIn);
        [fp, engine, db] = await Promise.all([plan.fingerprint ?? core.secret().then((secret) => fingerprint(prepared, secret)), core.engine(), claims]);
      } catch (error) {
        void beginLock?.then((release) => release());
        throw error;
      }
      // Under a lock (no claim), the record must be written before the lock is released, or the
      // next holder finds nothing and mints a second key: a deferred write is only for claims.
      const begin = (db?: IDBDatabase) =>
        beginOnce(core, engine, { intentId, prepared, fp, plan, db, deferSave: !!db && !!plan.sendNow?.deferSave });
      // A claims database that fails mid-way rejects `undefined` (storage/claims.ts): this call then
      // takes the lock path.
      const failed = (error: unknown) => (error ? Promise.reject(error) : CLAIMS_FAILED);
      let result = db ? await begin(db).catch(failed) : CLAIMS_FAILED;
      if (result === CLAIMS_FAILED) {
        const release = await (beginLock ?? intentLock(core, "begin", intentId));
        try {
          result = await begin();
        } finally {
          release?.();
        }
      }
      const { view, unsaved, resumed } = result;
      const { sendNow } = plan;
      const sentNow = sendNow ? { unsaved, deleteWhenAnswered: sendNow.deleteWhenAnswered } : undefined;
      operation = IdempotentOperation.create(core, view, resumed, prepared, await sendLock, sentNow);
      return operation;
    } finally {
      if (!operation) void sendLock.then((release) => release?.());
    }
  }
}

/** The entry's functions the resume and sweep parts (resume.ts, sweep.ts) work with: a
 *  part shares no module state with the entry. */
const KIT: ResumeKit & SweepKit = {
  loadRecord,
  viewOf,
  decodeRecord,
  retiredStamp,
  discardIntent,
  saveRecord,
  storedEntries,
  claimsDb,
  dropClaimsOf,
  whenIdle: idle,
  intentIdArg,
  notFound,
  corruptRecord,
  storageUnavailable,
  prepareParts,
  pageLocation,
  hashOf: fingerprint,
  operationOf: IdempotentOperation.create,
  fieldsOf: Fields.of,
  storedBody: async (store, intentId, length) => (await storedRequestPart()).readBody(store, intentId, length),
};

/** Resolves when the page is idle (`requestIdleCallback`, at most a second later), or on the next
 *  task where there is none (workers, Node: an unref'd timer never keeps Node alive). */
function idle(): Promise<void> {
  return new Promise<void>((resolve) => {
    const global = globalThis as { requestIdleCallback?: (callback: () => void, options: { timeout: number }) => number };
    if (typeof global.requestIdleCallback === "function") global.requestIdleCallback(() => resolve(), { timeout: 1000 });
    else (setTimeout(resolve, 0) as { unref?: () => void }).unref?.();
  });
}

/** Options of `client.resume`. */
export interface ResumeOptions {
  /** Headers for the resumed request besides the stored ones (which they replace by name): the
   *  credentials (`Authorization`…) that are never stored. Checked like `begin`'s. */
  headers?: HeadersInit;
  /** `resume` only: a `send` that finds the intent no longer pending once it holds the intent's
   *  send lock (another page or the service worker got its answer meanwhile) sends nothing and
   *  rejects `NOT_FOUND`. Default false (the server is asked again and replays its answer). */
  pendingOnly?: boolean;
}

/** How one create-or-resume is asked for. */
interface BeginPlan {
  /** `begin`'s `replace`: a stored intent with another request gets a new key. */
  replace: boolean;
  /** A key the app brings (`begin`'s `key`, `fetch`'s `init.key`). */
  key: string | undefined;
  /** Stored for the service worker to send (`begin`'s `background`): the request is kept. */
  background: boolean;
  /** The request's keyed fingerprint when the caller has it already (an unnamed `client.fetch` is
   *  named by it). */
  fingerprint?: string | undefined;
  /** `client.fetch`: `send` follows at once. `deferSave`: begin leaves the record's first write to it
   *  (the send writes the record before its first attempt anyway); `deleteWhenAnswered`: the send
   *  deletes the record once answered instead of keeping it retired. */
  sendNow?: { deferSave: boolean; deleteWhenAnswered: boolean };
}

/** What one create-or-resume produced. */
interface BeginResult {
  /** The record as begun. */
  view: RecordView;
  /** The record's text when its write was left to the send (`deferSave`). */
  unsaved: string | undefined;
  /** The key existed before this begin (stored or claimed). */
  resumed: boolean;
}

/** The claims database failed mid-way: the caller begins again under a lock. */
const CLAIMS_FAILED = Symbol("claims failed");

/** A begun intent, not yet saved. */
interface Begun {
  machine: Machine;
  ids: RecordIds;
  request: PersistedRequest | undefined;
  /** The key existed before this begin (stored or claimed). */
  resumed: boolean;
}

/** One create-or-resume. With `db` (the claims database), the stored record and the claim are
 *  weighed and the machine decides in one read-write transaction; a new key is claimed in it. The
 *  record is written after the transaction committed, or, with `deferSave`, returned unwritten for
 *  the `send` that follows at once. Rejects `undefined` when `db` failed (the caller turns that into
 *  `CLAIMS_FAILED` and begins again under a lock). */
async function beginOnce(
  core: ClientCore,
  engine: Engine,
  input: { intentId: string; prepared: PreparedRequest; fp: string; plan: BeginPlan; db?: IDBDatabase; deferSave: boolean },
): Promise<BeginResult> {
  const { intentId, prepared, fp, db, deferSave } = input;
  const { replace, key: brought, background } = input.plan;
  const { config, store } = core;
  // Read before the transaction: only IndexedDB requests may be awaited inside one.
  const stored = await loadRecord(core, engine, intentId);
  // The request as stored (persistRequest, background), made before the decision for the same reason.
  const fresh = config.persistRequest || background ? (await storedRequestPart()).storedForm(prepared, config.persistHeaders) : undefined;
  let consumed = false;
  let begun: Begun;
  try {
    // Known here also for IndexedDB (whose fallback shows on the first operation): the read above.
    if (config.requireDurable && !store.durable) throw notDurable(store.fallbackReason);
    // A version-1 record holds the unkeyed SHA-256: it is matched (and kept) with that one.
    const plainFp = stored?.ids.plain ? await fingerprint(prepared) : undefined;
    // Runs inside the transaction (synchronous) with the claim's value, or without claims with none.
    // The machine weighs the stored record against the claim and decides.
    const decide = (value: unknown): [Begun, string | undefined] => {
      let claimed: LoadedRecord | undefined;
      let machine;
      try {
        // Validated like any stored record: a corrupt or altered claim is a STORAGE error.
        claimed = value === undefined ? undefined : decodeRecord(engine, intentId, typeof value === "string" ? value : "");
        // Consumes both machines (their JS objects are emptied by the call).
        consumed = true;
        machine =
          engine.begin(intentId, fp, plainFp ?? fp, Date.now(), replace, brought, stored?.machine, claimed?.machine) ?? refused();
      } catch (thrown) {
        const error = fromThrown(thrown, { intentId, key: stored?.ids.key ?? null });
        if (error.code !== "INTENT_MISMATCH") throw error;
        // The detail names whose key the request does not match.
        const detail = (thrown as number) & 255;
        const oldKey = detail === MISMATCH_CLAIMED || detail === MISMATCH_KEY_CLAIMED ? claimed?.ids.key : stored?.ids.key;
        throw intentMismatch(intentId, oldKey ?? "unknown", detail >= MISMATCH_KEY_STORED);
      }
      const key = machine.key(false);
      // Which record was resumed: the stored one keeps its request and its fingerprint's version.
      const from = machine.get(F_RESUMED);
      const resumed = from !== RESUMED_NEW;
      const chosen = from === RESUMED_STORED ? stored : from === RESUMED_CLAIMED ? claimed : undefined;
      const plain = chosen === stored ? plainFp : undefined;
      const ids: RecordIds = plain !== undefined ? { intentId, key, fingerprint: plain, plain: true } : { intentId, key, fingerprint: fp };
      // The resumed record's trace context goes on with its key.
      if (chosen?.ids.trace) ids.trace = chosen.ids.trace;
      const begun = {
        machine,
        // A claim holds no request (nor does a retired record): a resumed one takes the request just
        // checked against its fingerprint (saveRecord keeps it only while the intent is pending).
        request: resumed ? (chosen?.request ?? fresh) : fresh,
        ids,
        resumed,
      };
      // A new key is claimed in the same transaction (never with the request: it may hold card data).
      return [begun, resumed ? undefined : encodeRecord(machine, ids, undefined)];
    };
    const slot = claimSlot(config.namespace, intentId);
    const full = () => claim(db as IDBDatabase, slot, decide, (begun) => begun.machine.free());
    if (!db) begun = decide(undefined)[0];
    else if (stored) begun = await full();
    else {
      // Nothing stored here (a new intent, or another tab's write not arrived yet): claim a new key
      // with one `add`; when the slot is taken, read that claim and decide again.
      const [fresh, text] = decide(undefined);
      const added = await claimNew(db, slot, text as string).catch((error: unknown) => {
        fresh.machine.free();
        throw error;
      });
      if (added) begun = fresh;
      else {
        fresh.machine.free();
        begun = await full();
      }
    }
  } finally {
    if (!consumed) stored?.machine.free();
  }
  const { machine, ids, resumed } = begun;
  let { request } = begun;
  try {
    let unsaved: string | undefined;
    // Dirty also when resumed from the claim: this tab's storage lacks the record.
    if (machine.get(F_DIRTY) === 1) {
      // A large body goes to its own slot first, so that no record names a body not yet written (a
      // body stored out of line already is its length, a number).
      if (request && Array.isArray(request.body) && request.body.length > INLINE_BODY_MAX) {
        request = await (await storedRequestPart()).storeBody(store, intentId, request as PersistedRequest & { body: number[] });
      }
      if (deferSave) unsaved = recordText(machine, ids, request);
      else await saveRecord(core, machine, ids, request);
    }
    if (config.requireDurable && !store.durable) {
      // This very write fell back (storage full): the key lives in memory only. Nothing was sent,
      // and nothing of this refused intent stays (`pending()` would list its claim after a reload).
      if (!resumed) {
        await store.delete(intentId).catch(() => {});
        await dropClaim(core, intentId, ids.key);
      }
      throw notDurable(store.fallbackReason);
    }
    return { view: viewOf(machine, ids), unsaved, resumed };
  } finally {
    machine.free();
  }
}

/** The Engine of a client (the policy and the client-wide retry budget). */
function makeEngine(module: MachineModule, config: Config): Engine {
  try {
    return module.Engine.create(config.engine) ?? refused();
  } catch (thrown) {
    if (typeof thrown === "number" && thrown >> 8 === E_INVALID_OPTIONS) {
      throw invalidOptions(__DEV__ && `${OPTIONS[thrown & 255]?.[0] ?? "an option"} is out of range`);
    }
    throw thrown;
  }
}

/** `requireDurable` and the store is in memory. */
function notDurable(reason: string | null): IdempotentFetchError {
  return new IdempotentFetchError(
    "NOT_DURABLE",
    __DEV__ && `storage fell back to memory (${reason ?? "unknown"}): a key begun now would not survive a reload, and requireDurable is set`,
  );
}

/** A copy of a SendResult with its own Response clone (a body can be read once per clone). */
function shareResult(result: SendResult): SendResult {
  return { ...result, response: result.response.clone() };
}
