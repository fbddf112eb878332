// Page half of tests/js/tabs.test.mjs: loads the package (pkg/, served at /pkg/ by the reference server) and
// exposes `window.__tabs`, which the test drives with page.evaluate. Every event is logged with a
// Date.now() timestamp so the test can compare what two tabs did and when.
import * as lib from "/pkg/index.js";

const tabs = {
  client: null,
  op: null,
  log: [],
  sending: null,

  create(options) {
    this.client = new lib.IdempotentClient(options);
    return { storage: this.client.storage, fallback: this.client.storageFallback };
  },

  async begin(intentId, request) {
    this.op = await this.client.begin(intentId, request);
    this.log.push({ type: "begin", key: this.op.key, at: Date.now() });
    return this.op.key;
  },

  /** Starts a send (not awaited here: `wait()` gives its outcome). */
  send() {
    const log = this.log;
    log.push({ type: "send", at: Date.now() });
    this.sending = this.op.send({
      onAttempt: (e) => log.push({ type: "attempt", attempt: e.attempt, key: e.key, at: Date.now() }),
      onRetry: (e) => log.push({ type: "retry", attempt: e.attempt, reason: e.reason, status: e.status, delayMs: e.delayMs, at: Date.now() }),
    }).then(
      (r) => {
        const out = { ok: true, status: r.status, replayed: r.replayed, key: r.key, attempts: r.attempts, at: Date.now() };
        log.push({ type: "done", ...out });
        return out;
      },
      (e) => {
        const out = { ok: false, code: e?.code ?? null, message: String(e?.message ?? e), key: e?.key ?? null, attempts: e?.attempts ?? null, at: Date.now() };
        log.push({ type: "error", ...out });
        return out;
      },
    );
  },

  wait() {
    return this.sending;
  },

  storageEntries(kind) {
    const storage = kind === "session" ? sessionStorage : localStorage;
    const entries = [];
    for (let i = 0; i < storage.length; i++) {
      const name = storage.key(i);
      entries.push([name, storage.getItem(name)]);
    }
    return entries;
  },

  writeEntries(kind, entries) {
    const storage = kind === "session" ? sessionStorage : localStorage;
    for (const [name, value] of entries) storage.setItem(name, value);
  },

  /** `client.fetch` of `request` with the body of `round` (no intent: named by the request); the
   *  response's status and whether it was replayed. */
  async fetchRound(request, round) {
    const response = await this.client.fetch(request.url, { ...request, body: JSON.stringify({ items: [{ sku: "mug", qty: round + 1 }] }) });
    return { status: response.status, replayed: response.headers.get("idempotent-replayed") };
  },

  /** Answers, in this tab, every round another tab announces on BroadcastChannel `name` by sending the
   *  identical `client.fetch` at once, and announces its own answer back; the outcomes in order
   *  (`following`), the codes of the client's failure events (`failures`). */
  followRounds(name, request, rounds) {
    const channel = new BroadcastChannel(name);
    const outcomes = [];
    this.failures = [];
    this.client.addEventListener("failure", (e) => this.failures.push(e.code));
    this.following = new Promise((resolve) => {
      channel.onmessage = async ({ data }) => {
        outcomes.push(await this.fetchRound(request, data).catch((e) => ({ error: String(e?.code ?? e) })));
        channel.postMessage(data);
        if (outcomes.length === rounds) resolve(outcomes);
      };
    });
  },

  /** Leads `rounds` rounds on BroadcastChannel `name`: its `client.fetch`, then the word to the other
   *  tab the moment it is answered, then waits for that tab's answer. */
  async leadRounds(name, request, rounds) {
    const channel = new BroadcastChannel(name);
    const outcomes = [];
    // The leader's rounds are sequential: each waits for the follower's answer before the next.
    for (let round = 0; round < rounds; round++) {
      outcomes.push(await this.fetchRound(request, round));
      const echoed = new Promise((resolve) => (channel.onmessage = resolve));
      channel.postMessage(round);
      await echoed;
    }
    return outcomes;
  },

  /** Begins every id at once (one client); their keys in order. */
  async beginMany(ids, request) {
    return Promise.all(ids.map(async (id) => (await this.client.begin(id, request)).key));
  },

  /** How many claims (src/js/storage/claims.ts) `namespace` has; null without IndexedDB. */
  async claims(namespace) {
    if (!globalThis.indexedDB) return null;
    const db = await new Promise((resolve, reject) => {
      const request = indexedDB.open("idempotent-fetch-claims");
      request.onupgradeneeded = () => request.result.createObjectStore("claims");
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
    try {
      const range = IDBKeyRange.bound(`${namespace}\0`, `${namespace}\x01`);
      return await new Promise((resolve, reject) => {
        const request = db.transaction("claims").objectStore("claims").count(range);
        request.onsuccess = () => resolve(request.result);
        request.onerror = () => reject(request.error);
      });
    } finally {
      db.close();
    }
  },

  async locks() {
    if (!navigator.locks) return null;
    const { held, pending } = await navigator.locks.query();
    return { held: held.map((l) => l.name), pending: pending.map((l) => l.name) };
  },
};

window.__tabs = tabs;
lib.ready.then(
  () => { window.__ready = true; },
  (error) => { window.__initError = String(error?.stack ?? error); },
);
