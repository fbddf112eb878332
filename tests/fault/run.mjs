// Fault harness: many payment intents through the REAL package (Node: pkg/ by `import`; a real browser:
// pkg/index.js in a page, in the engine IF_BROWSER names: chromium (default), firefox, webkit) to the
// REAL reference server, with faults on every path, then a count of the
// server's orders against the intents. Exits non-zero on any duplicate or lost intent.
//
//   node tests/fault/run.mjs [--ci | --full] [--intents N] [--browser-share 0.3] [--seed S]
//                            [--pg [--instances 3]] [--browser-only] [--two-tabs P] [--at-once] [--cpu-load]
//                            [--at-deadline P]
//                            [--no-checkout]
//
// By default the server runs the order flow in atomic phases through a payment provider and a mail
// receiver (both real processes, with their own faults), with crash faults that end the server process
// (after the provider charged, after `finished` committed, after a confirmation was delivered); a
// supervisor restarts a crashed instance on the same port (and the same SQLite file). After the resume
// phase the outbox is drained and every effect is counted per intent: charges at the provider and
// confirmations at the receiver, next to the orders. --no-checkout: the one-transaction flow, no crashes.
//
// --browser-only (the xtask's Firefox and WebKit passes): only the browser share of --ci (60
// intents, all in the page), no PostgreSQL pass; the bad-input matrix still runs (its browser
// rows, in the same engine). WebKit has no offline switch over WebDriver: no offline spells there.
//
// --ci (default): ~180 intents, a few minutes at most. --full: 1,200 intents. After the run it
// also runs tests/fault/*.test.mjs (the bad-input matrix) with `node --test` when --ci is given, so
// `cargo xtask test` (layer i) covers both; --no-matrix skips that.
//
// --two-tabs P: the share of browser intents also begun in the second tab (default 0.3), right after
// the first tab's begins returned, or with --at-once at the same moment as the first tab's.
// --cpu-load: one busy-loop child process per core for the whole run (cross-tab
// begin must stay exact when the renderers are starved and localStorage propagation is slowest).
//
// --at-deadline P: the share of order answers the proxy holds until the client's attempt deadline
// (default 0.1; see PROXY_FAULTS).
//
// --pg: multi-instance mode. A throwaway PostgreSQL cluster (tests/fault/pg-cluster.mjs), N server
// instances (default 3) on one database, and the proxy spreads requests round-robin over them, so
// one key's retries land on different instances. `--ci` without --pg also runs a small --pg pass
// (90 intents) when env IF_PG_TESTS=1 (the xtask sets it after installing PostgreSQL), else says
// it skipped it.
//
// Pieces (see FAULTS.md for what each fault proves):
//   provider/receiver payment-provider and mail-receiver next to the server binary: 503 before charging,
//                     charge then drop, latency; mail outages (503)
//   reference server  IF_SERVER_BIN or target/server/idempotent-fetch-server, temp SQLite db,
//                     probabilistic faults: 503 before work, commit then drop, 429 + Retry-After,
//                     latency past the client's attempt timeout (-> 409 for the retry)
//   fault proxy       Node HTTP proxy in front of it: connection resets before forwarding and
//                     after the server answered; answers held until the client's attempt deadline
//                     (headers, then the body a moment later); counts every attempt and what it got
//   Node clients      memory storage; double sends; aborts mid-retry then re-begin (same key);
//                     a raw "twin" with the same key sent at once (server holds it: 409)
//   browser           two tabs over one localStorage sending the same intents at once; aborts
//                     then a new client over the same storage; offline spells; real page.reload()s
// Then: faults off, every intent still pending is resumed with its key; the orders per account
// (GET /api/orders, with keys) must map one to one onto the intents.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import { fileURLToPath } from "node:url";
import http from "node:http";
import path from "node:path";
import { startCluster } from "./pg-cluster.mjs";
import { capabilities, collectPageErrors, engineName, launchBrowser, waitForLibPage } from "../support/browsers.mjs";
import { importPackage, pkgDir, pkgMissing, root } from "../support/paths.mjs";
import { startService, startSupervisedServer } from "../support/reference-server.mjs";

const here = path.join(root, "tests/fault");
const started = Date.now();

// ---------------------------------------------------------------------------------------------
// Arguments

const argv = process.argv.slice(2);
const flag = (name) => argv.includes(name);
const value = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1] : fallback;
};
const FULL = flag("--full");
const BROWSER_ONLY = flag("--browser-only");
const TOTAL = Number(value("--intents", FULL ? 1200 : BROWSER_ONLY ? 60 : 180));
const BROWSER_SHARE = BROWSER_ONLY ? 1 : Number(value("--browser-share", 0.33));
const NO_BROWSER = flag("--no-browser");
const SEED = Number(value("--seed", Date.now() % 1_000_000));
const RUN_MATRIX = flag("--ci") && !flag("--no-matrix");
const INTENTS_PER_ACCOUNT = 40; // GET /api/orders lists at most 100: keep well below
const NODE_CONCURRENCY = 12;
const BROWSER_BATCH = 10;
const BATCH_DEADLINE_MS = Number(value("--batch-deadline", 90000));
const PG = flag("--pg");
const INSTANCES = PG ? Number(value("--instances", 3)) : 1;
const PG_CI_INTENTS = 90; // the --pg pass that --ci adds when IF_PG_TESTS=1
const CHECKOUT = !flag("--no-checkout");
// Longer than the latency fault (a held key is not taken over while its request sleeps), short enough that a
// key left by a crash is taken over well within a client's total timeout.
const KEY_LEASE_MS = 3000;
if (!Number.isInteger(INSTANCES) || INSTANCES < 1) throw new Error(`--instances must be a whole number >= 1, got ${value("--instances")}`);

// A small seeded PRNG (mulberry32) for the harness's own choices, so a failing run can be replayed
// with --seed. The library's keys and jitter come from its CSPRNG regardless.
let seedState = SEED >>> 0;
function random() {
  seedState = (seedState + 0x6d2b79f5) >>> 0;
  let t = seedState;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const chance = (p) => random() < p;
const between = (lo, hi) => Math.floor(lo + random() * (hi - lo + 1));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// Fault settings

const SERVER_FAULTS = {
  failBeforeWork: 0.12, dropAfterCommit: 0.08, status429: 0.06, retryAfterSecs: 1,
  latencyMs: 1500, latencyProbability: Number(process.env.FAULT_LATENCY_P ?? 0.05),
};
if (CHECKOUT) Object.assign(SERVER_FAULTS, { crashAfterCharge: 0.02, crashAfterFinish: 0.02, crashAfterDelivery: 0.01 });
const SERVER_FAULTS_OFF = { retryAfterSecs: 1 }; // every fault off: setFaults() fills in NO_FAULTS
// `atDeadline`: the proxy holds an answer until about the client's attempt deadline (RETRY's
// attemptTimeoutMs after the request arrived, -20..+5 ms), then sends its headers and, 0..20 ms later,
// its body: answers that race the attempt timer (a Response handed over after the abort, a body cut
// by it), the case where an engine can hand over a Response with a dead body.
const PROVIDER_FAULTS = { failBeforeCharge: 0.05, dropAfterCharge: 0.05, latencyMs: 150, latencyProbability: 0.1 };
const MAILBOX_FAULTS = { fail: 0.2 };
const PROXY_FAULTS = { resetBefore: 0.04, resetAfter: 0.03, atDeadline: Number(value("--at-deadline", 0.1)) };
// Generous attempts, small delays, an attempt timeout below the latency fault.
const RETRY = { maxAttempts: 25, baseDelayMs: 30, maxDelayMs: 400, attemptTimeoutMs: 800, maxRetryAfterMs: 150, totalTimeoutMs: 20000 };
// A share of intents gives up early, so some are left pending for the resume phase.
const RETRY_SHORT = { ...RETRY, maxAttempts: 2 };
const RETRY_RESUME = { ...RETRY, maxAttempts: 50, attemptTimeoutMs: 5000, totalTimeoutMs: 60000 };
const P_SHORT = 0.12;
const P_TWIN = 0.08; // Node: a raw request with the same key at the same time (held by a latency fault)
const P_DOUBLE = 0.06; // Node: send() twice at once (double click)
const P_ABORT = 0.1; // abort mid-send, then re-begin ("reload")
const P_FETCH = 0.25; // client.fetch(url, { intent }) instead of begin + send (its begin leaves the first write to send)
const P_TWO_TABS = Number(value("--two-tabs", 0.3)); // browser: the same intent started in both tabs
const CPU_LOAD = flag("--cpu-load") ? os.availableParallelism() : 0; // busy-loop children
const AT_ONCE = flag("--at-once"); // both tabs begin their twins at the same moment
const P_RELOAD = 0.25; // browser: page.reload() during a batch
const P_OFFLINE = 0.3; // browser: an offline spell during a batch

// ---------------------------------------------------------------------------------------------
// Figures

const figures = {
  intents: 0, nodeIntents: 0, browserIntents: 0,
  proxy: {
    attempts: 0, answered201: 0, replayed201: 0, status503: 0, status429: 0, status409: 0, otherStatus: {},
    dropAfterCommit: 0, resetBefore: 0, resetAfter: 0, atDeadline: 0, slowAnswers: 0, clientGaveUp: 0,
  },
  node: { reconciled: 0, aborts: 0, reBegins: 0, twins: 0, twin409: 0, doubleSends: 0, viaFetch: 0, retryReasons: {} },
  browser: { twoTabs: 0, viaFetch: 0, aborts: 0, reloads: 0, reloadsAgain: 0, offlineSpells: 0, resumedAfterReload: 0, retryReasons: {} },
  outcomes: { succeeded: 0, pendingAfterRun: 0, pendingCodes: {} },
  resumed: 0, resumedSucceeded: 0, serverLatencies: [],
  checks: { duplicates: 0, lost: 0, keyChanged: 0, orphanOrders: 0, duplicateCharges: 0, duplicateConfirmations: 0, missingConfirmations: 0, missingCharges: 0, orphanEffects: 0, problems: [] },
  crashes: { crashes: 0, restarts: 0, signals: {}, charges: 0, confirmations: 0, refusedDuplicates: 0, drainSeconds: 0 },
  store: PG ? `PostgreSQL, ${INSTANCES} instances (round-robin)` : "SQLite, 1 instance",
  spread: { perInstance: Array(INSTANCES).fill(0), keys: new Map() }, // order attempts per instance; key -> instances
};
const progress = { nodeDone: 0, nodeActive: new Set(), browserDone: 0, phase: "faults" };
const problem = (text) => {
  figures.checks.problems.push(text);
  if (figures.checks.problems.length <= 30) console.error(`PROBLEM: ${text}`);
};
const bump = (map, k) => (map[k] = (map[k] ?? 0) + 1);

// ---------------------------------------------------------------------------------------------
// The reference server

/**
 * One server instance (tests/support/reference-server.mjs: IF_SERVER_BIN or target/release, built
 * when missing; killed at process exit if still running) serving the fault page and the package (pkg/), on a
 * temp SQLite db, or on PostgreSQL when `databaseUrl` is given.
 */
function startServer({ databaseUrl, downstream } = {}) {
  const args = downstream ? ["--provider-url", downstream.provider.url, "--mail-url", downstream.mailbox.url, "--key-lease-ms", String(KEY_LEASE_MS)] : [];
  const dbDir = databaseUrl ? null : mkdtempSync(path.join(os.tmpdir(), "if-fault-"));
  const options = { www: path.join(here, "www"), pkg: pkgDir, label: "fault", databaseUrl, args, startTimeoutMs: 20_000 };
  if (dbDir) options.dbFile = path.join(dbDir, "fault.sqlite");
  return startSupervisedServer(options, {
    onCrash: ({ code, signal }) => { figures.crashes.crashes += 1; bump(figures.crashes.signals, signal ?? `exit ${code}`); },
    onRestart: () => { figures.crashes.restarts += 1; },
    onGiveUp: (error) => problem(`restarting the crashed server failed: ${error.message}`),
    cleanup: () => { if (dbDir) rmSync(dbDir, { recursive: true, force: true }); },
  });
}

/** The payment provider and the mail receiver (real processes), or none with --no-checkout. */
async function startDownstream(cleanups) {
  if (!CHECKOUT) return null;
  const provider = await startService("payment-provider", { label: "fault-provider" });
  cleanups.push(() => provider.stop());
  const mailbox = await startService("mail-receiver", { label: "fault-mail" });
  cleanups.push(() => mailbox.stop());
  console.log(`payment provider ${provider.url}, mail receiver ${mailbox.url}, key lease ${KEY_LEASE_MS} ms`);
  return { provider, mailbox };
}

/** The fault configuration is per instance: set it on every one. */
async function putFaults(servers, faults) {
  for (const server of servers) await server.setFaults(faults);
}

/** Every instance answers GET /api/health with the expected store. */
async function checkHealth(servers, store) {
  for (const server of servers) {
    const response = await fetch(`${server.url}/api/health`);
    const health = await response.json().catch(() => ({}));
    if (!response.ok || health.store !== store) throw new Error(`${server.url}/api/health: ${response.status} ${JSON.stringify(health)}, expected store ${store}`);
  }
}

/** The multi-instance back end: a PostgreSQL cluster, a database, INSTANCES servers on it. */
async function startPgBackend(cleanups, downstream) {
  const cluster = await startCluster();
  cleanups.push(() => cluster.stop());
  cluster.createDatabase("fault");
  const databaseUrl = cluster.url("fault");
  console.log(`PostgreSQL cluster on port ${cluster.port} (${cluster.bin}), database ${databaseUrl}`);
  const servers = [];
  const started = await Promise.allSettled(Array.from({ length: INSTANCES }, () => startServer({ databaseUrl, downstream })));
  for (const s of started) if (s.status === "fulfilled") { servers.push(s.value); cleanups.push(() => s.value.stop()); }
  const failed = started.find((s) => s.status === "rejected");
  if (failed) throw failed.reason;
  await checkHealth(servers, "postgres");
  return servers;
}

/** Every probabilistic fault of the provider and the receiver, or none. */
async function putDownstreamFaults(downstream, on) {
  if (!downstream) return;
  await downstream.provider.setFaults(on ? PROVIDER_FAULTS : {});
  await downstream.mailbox.setFaults(on ? MAILBOX_FAULTS : {});
}

// ---------------------------------------------------------------------------------------------
// The fault proxy: resets, and the observation point for every attempt

/** Forwards to the upstreams round-robin (every request, so one key's retries hop between them). */
function startProxy(upstreams) {
  const targets = upstreams.map((u) => new URL(u));
  let next = 0;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 128 });
  const state = { on: true };
  const p = figures.proxy;
  const latencies = figures.serverLatencies;
  const server = http.createServer((req, res) => {
    const isOrder = req.method === "POST" && req.url.startsWith("/api/orders");
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      let finished = false;
      let destroyedByUs = false;
      const kill = () => { destroyedByUs = true; req.socket.destroy(); };
      if (isOrder) {
        p.attempts += 1;
        res.on("close", () => { if (!finished && !destroyedByUs) p.clientGaveUp += 1; });
        if (state.on && random() < PROXY_FAULTS.resetBefore) {
          p.resetBefore += 1;
          kill();
          return;
        }
      }
      const t0 = Date.now();
      const headers = { ...req.headers };
      delete headers.connection;
      const instance = next;
      next = (next + 1) % targets.length;
      const target = targets[instance];
      if (isOrder) noteInstance(instance, req.headers["idempotency-key"]);
      const up = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers, agent }, (upRes) => {
        const parts = [];
        upRes.on("data", (c) => parts.push(c));
        upRes.on("end", () => {
          const answer = Buffer.concat(parts);
          const status = upRes.statusCode;
          if (isOrder) {
            const took = Date.now() - t0;
            if (took >= SERVER_FAULTS.latencyMs) p.slowAnswers += 1;
            latencies.push(took);
            if (status === 201 && upRes.headers["idempotent-replayed"] === "true") p.replayed201 += 1;
            else if (status === 201) p.answered201 += 1;
            else if (status === 503) p.status503 += 1;
            else if (status === 429) p.status429 += 1;
            else if (status === 409) p.status409 += 1;
            else bump(p.otherStatus, status);
            if (state.on && random() < PROXY_FAULTS.resetAfter) {
              p.resetAfter += 1;
              kill();
              return;
            }
          }
          const out = { ...upRes.headers, "content-length": String(answer.length) };
          delete out["transfer-encoding"];
          delete out.connection;
          delete out["keep-alive"];
          const deliver = () => {
            if (res.destroyed) return;
            finished = true;
            res.writeHead(status, out);
            res.end(answer);
          };
          if (!(isOrder && state.on && random() < PROXY_FAULTS.atDeadline)) return deliver();
          p.atDeadline += 1;
          const headersAt = t0 + RETRY.attemptTimeoutMs + between(-20, 5);
          const bodyAfter = between(0, 20);
          setTimeout(() => {
            if (res.destroyed) return;
            res.writeHead(status, out);
            res.flushHeaders();
            setTimeout(() => {
              if (res.destroyed) return;
              finished = true;
              res.end(answer);
            }, bodyAfter);
          }, Math.max(0, headersAt - Date.now()));
        });
      });
      up.on("error", () => {
        // the server closed without answering: its drop-after-commit fault
        if (isOrder) p.dropAfterCommit += 1;
        kill();
      });
      up.end(body);
    });
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      resolve({
        url: `http://127.0.0.1:${server.address().port}`,
        state,
        close: () => new Promise((done) => { server.closeAllConnections(); server.close(() => done()); agent.destroy(); }),
      });
    });
  });
}

function noteInstance(instance, key) {
  const { spread } = figures;
  spread.perInstance[instance] += 1;
  if (!key) return;
  if (!spread.keys.has(key)) spread.keys.set(key, new Set());
  spread.keys.get(key).add(instance);
}

// ---------------------------------------------------------------------------------------------
// Intents

const SKUS = ["coffee-beans", "grinder", "mug", "filter-papers", "kettle"];

/** Intent number n of an account -> a cart whose lines encode n, so an order maps back to it. */
function cart(n, id) {
  return JSON.stringify({
    items: [{ sku: "mug", qty: (n % 99) + 1 }, { sku: "kettle", qty: Math.floor(n / 99) + 1 }, { sku: SKUS[n % SKUS.length] === "mug" ? "grinder" : SKUS[n % SKUS.length], qty: 1 }],
    intent: id,
  });
}
function intentNumberOf(order) {
  const mug = order.items.find((l) => l.sku === "mug");
  const kettle = order.items.find((l) => l.sku === "kettle");
  if (!mug || !kettle) return null;
  return (kettle.qty - 1) * 99 + (mug.qty - 1);
}

function makeIntents(runId) {
  const intents = [];
  const browserCount = NO_BROWSER ? 0 : Math.round(TOTAL * BROWSER_SHARE);
  for (let i = 0; i < TOTAL; i++) {
    const where = i < TOTAL - browserCount ? "node" : "browser";
    const accountIndex = Math.floor(i / INTENTS_PER_ACCOUNT);
    const n = i % INTENTS_PER_ACCOUNT;
    const account = `f${runId}-${accountIndex}`;
    const id = `checkout:${account}:${n}`;
    intents.push({
      index: i, where, account, n, id, ns: `fault-${account}`, body: cart(n, id),
      retry: chance(P_SHORT) ? RETRY_SHORT : RETRY,
      key: null, keysSeen: new Set(), outcome: null, orderIds: new Set(),
    });
  }
  return intents;
}

function seeKey(intent, key, where) {
  if (!key) return;
  if (intent.key === null) intent.key = key;
  if (key !== intent.key) {
    figures.checks.keyChanged += 1;
    problem(`${intent.id}: ${where} saw key ${key}, first key ${intent.key}`);
  }
  intent.keysSeen.add(key);
}

// ---------------------------------------------------------------------------------------------
// Node part

async function runNode(lib, intents, proxyUrl, serverUrl) {
  const clients = new Map();
  const clientFor = (intent) => {
    const id = `${intent.ns}|${intent.retry.maxAttempts}`;
    if (!clients.has(id)) {
      // Asks the server about keys it would give up on (the key-status endpoint, through the proxy).
      const client = new lib.IdempotentClient({
        namespace: intent.ns, storage: "memory", retry: intent.retry, retryBudget: 100000,
        statusUrl: `${proxyUrl}/api/idempotency-keys/{key}`,
      });
      client.addEventListener("reconcile", () => (figures.node.reconciled += 1));
      clients.set(id, client);
    }
    return clients.get(id);
  };
  const request = (intent) => ({
    url: `${proxyUrl}/api/orders`, method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${intent.token}` }, body: intent.body,
  });
  const queue = [...intents];
  // client.fetch with the intent's id: begin and send in one call. The key comes from the first
  // "attempt" event (the record is stored by then, before the request goes) or from the error.
  async function viaFetch(intent) {
    figures.node.viaFetch += 1;
    const client = clientFor(intent);
    const onAttempt = (e) => e.intentId === intent.id && seeKey(intent, e.key, "fetch attempt");
    const onRetry = (e) => e.intentId === intent.id && bump(figures.node.retryReasons, e.reason.replace(/\d+ ?ms/g, "").trim());
    client.addEventListener("attempt", onAttempt);
    client.addEventListener("retry", onRetry);
    try {
      const { url, ...init } = request(intent);
      const response = await client.fetch(url, { ...init, intent: intent.id });
      return { result: { key: intent.key, ok: response.ok, status: response.status, response } };
    } catch (error) {
      return { error };
    } finally {
      client.removeEventListener("attempt", onAttempt);
      client.removeEventListener("retry", onRetry);
    }
  }
  async function one(intent) {
    if (chance(P_FETCH)) {
      await record(intent, await viaFetch(intent));
      return;
    }
    const client = clientFor(intent);
    const op = await client.begin(intent.id, request(intent));
    seeKey(intent, op.key, "begin");
    const reasons = [];
    const onRetry = (e) => { reasons.push(e.reason); bump(figures.node.retryReasons, e.reason.replace(/\d+ ?ms/g, "").trim()); };
    let twin;
    if (chance(P_TWIN)) {
      // Another sender with the same key at the same moment (a second device whose storage was
      // copied): held in flight by the server for 1.2 s, so the library's attempts get 409.
      figures.node.twins += 1;
      twin = fetch(`${serverUrl}/api/orders`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${intent.token}`, "idempotency-key": op.key, "x-fault": "latency=1200" },
        body: intent.body,
      }).then(async (r) => { if (r.status === 409) figures.node.twin409 += 1; await r.arrayBuffer(); }, () => {});
      await sleep(between(0, 20));
    }
    const settle = (promise) => promise.then((result) => ({ result }), (error) => ({ error }));
    let outcome;
    if (chance(P_ABORT)) {
      figures.node.aborts += 1;
      const controller = new AbortController();
      setTimeout(() => controller.abort(), between(0, 400));
      outcome = await settle(op.send({ signal: controller.signal, onRetry }));
      if (outcome.error?.code === "ABORTED") {
        // the "reload": the page's client is gone mid-retry; the intent is begun again
        figures.node.reBegins += 1;
        const again = await client.begin(intent.id, request(intent));
        seeKey(intent, again.key, "re-begin");
        if (!again.resumed) problem(`${intent.id}: re-begin after abort not marked resumed`);
        outcome = await settle(again.send({ onRetry }));
      }
    } else if (chance(P_DOUBLE)) {
      figures.node.doubleSends += 1;
      const [a, b] = await Promise.all([settle(op.send({ onRetry })), settle(op.send({ onRetry }))]);
      if (a.result && b.result && a.result.key !== b.result.key) problem(`${intent.id}: double send, two keys`);
      outcome = a.result ? a : b;
      if (b.result) seeKey(intent, b.result.key, "double send");
    } else {
      outcome = await settle(op.send({ onRetry }));
    }
    await twin;
    await record(intent, outcome);
  }
  async function worker() {
    for (;;) {
      const intent = queue.shift();
      if (!intent) return;
      progress.nodeActive.add(intent.id);
      try {
        await one(intent);
      } catch (error) {
        problem(`${intent.id}: harness error ${error?.stack ?? error}`);
      }
      progress.nodeActive.delete(intent.id);
      progress.nodeDone += 1;
    }
  }
  await Promise.all(Array.from({ length: NODE_CONCURRENCY }, worker));
  return { clientFor, request };
}

async function record(intent, { result, error }) {
  if (result) {
    seeKey(intent, result.key, "result");
    if (result.ok) {
      const order = await result.response.json();
      intent.outcome = "succeeded";
      intent.orderIds.add(order.id);
      if (order.idempotencyKey !== intent.key) problem(`${intent.id}: answer's order has key ${order.idempotencyKey}`);
    } else {
      intent.outcome = `http${result.status}`;
      problem(`${intent.id}: definite non-2xx answer ${result.status}`);
    }
  } else {
    seeKey(intent, error?.key, "error");
    intent.outcome = "pending";
    intent.pendingCode = `${error?.code ?? "?"}${error?.reason ? `/${error.reason}` : ""}`;
    if (!["RETRIES_EXHAUSTED", "ABORTED"].includes(error?.code)) problem(`${intent.id}: unexpected error ${error?.code}: ${error?.message ?? error}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Browser part (the engine IF_BROWSER names)

async function openBrowser(proxyUrl) {
  const browser = await launchBrowser({ what: `the ${engineName} part`, also: [pkgMissing()] });
  const context = await browser.newContext();
  const pageErrors = [];
  const open = async () => {
    const page = await context.newPage();
    collectPageErrors(page, pageErrors);
    await page.goto(`${proxyUrl}/`);
    await ready(page);
    return page;
  };
  const tabs = [await open(), await open()];
  return { browser, context, tabs, pageErrors };
}

const ready = (page) => waitForLibPage(page, { timeout: 20_000 });
/**
 * page.reload() until the page loads the package: a reload while a crashed server restarts fails (no
 * answer for the page, or the package does not load), as it would for a shopper, who reloads again; counted.
 */
async function reloadUntilReady(page) {
  for (let attempt = 1; ; attempt++) {
    try {
      await page.reload();
      return await ready(page);
    } catch (error) {
      const restarting = /could not load the package|ERR_EMPTY_RESPONSE|ERR_CONNECTION|Load failed|NetworkError|net::/.test(String(error?.message));
      if (attempt >= 20 || !restarting) throw error;
      figures.browser.reloadsAgain += 1;
      await sleep(300);
    }
  }
}
const specOf = (intent, retry = intent.retry) => ({ id: intent.id, ns: intent.ns, token: intent.token, body: intent.body, retry, expectedKey: intent.key ?? undefined });

async function outcomesOf(page) {
  try {
    return await page.evaluate(() => window.__outcomes());
  } catch {
    return {}; // mid-reload
  }
}

/** Reads a page load's outcomes into the intents; returns the ids with a final outcome there. */
function absorb(intentsById, outcomes, reasons) {
  const finished = new Set();
  for (const [id, list] of Object.entries(outcomes)) {
    const intent = intentsById.get(id);
    for (const o of list) {
      seeKey(intent, o.key, "page outcome");
      seeKey(intent, o.firstKey, "page begin");
      if (o.expectedKey && o.firstKey && o.expectedKey !== o.firstKey) problem(`${id}: page began with ${o.firstKey}, expected ${o.expectedKey} (${o.beginDiagnosis})`);
      if (o.code === "HARNESS_NEW_KEY") problem(`${id}: ${o.message}`);
      for (const r of o.retryReasons ?? []) bump(reasons, r.replace(/\d+ ?ms/g, "").trim());
      figures.browser.aborts += o.softReloads ?? 0;
      if (o.done && o.ok) {
        intent.outcome = "succeeded";
        if (o.orderId) intent.orderIds.add(o.orderId);
      } else if (o.done) {
        intent.outcome = `http${o.status}`;
        problem(`${id}: definite non-2xx answer ${o.status} in the page`);
      } else if (intent.outcome !== "succeeded") {
        intent.outcome = "pending";
        intent.pendingCode = `${o.code}${o.reason ? `/${o.reason}` : ""}`;
        if (!["RETRIES_EXHAUSTED", "ABORTED"].includes(o.code)) problem(`${id}: page error ${o.code}: ${o.message}`);
      }
      finished.add(id);
    }
  }
  return finished;
}

async function runBrowser(browserParts, intents) {
  const { context, tabs } = browserParts;
  const byId = new Map(intents.map((i) => [i.id, i]));
  for (let start = 0; start < intents.length; start += BROWSER_BATCH) {
    const batch = intents.slice(start, start + BROWSER_BATCH);
    const specs = batch.map((intent) => {
      const viaFetch = chance(P_FETCH);
      if (viaFetch) figures.browser.viaFetch += 1;
      return { ...specOf(intent), viaFetch, abortAfterMs: !viaFetch && chance(P_ABORT) ? between(0, 300) : undefined };
    });
    const twins = batch.filter(() => chance(P_TWO_TABS));
    // the same intents in the second tab: same storage, so the same keys. By default right after
    // the first tab's begins returned; with --at-once both tabs begin at the same moment.
    const startTwins = () => tabs[1].evaluate((s) => window.__start(s), twins.map((i) => specOf(i)));
    const twinsAtOnce = AT_ONCE && twins.length ? startTwins() : undefined;
    const keys = await tabs[0].evaluate((s) => window.__start(s), specs);
    for (const intent of batch) if (keys[intent.id]) seeKey(intent, keys[intent.id], "tab 1 begin");
    if (twins.length) {
      figures.browser.twoTabs += twins.length;
      const twinKeys = await (twinsAtOnce ?? startTwins());
      for (const intent of twins) if (twinKeys[intent.id]) seeKey(intent, twinKeys[intent.id], "tab 2 begin");
    }
    // every few batches a reload and an offline spell for sure, so even --ci sees both
    const batchNo = start / BROWSER_BATCH;
    const reload = batchNo % 3 === 1 || chance(P_RELOAD);
    const offline = capabilities.offline && (batchNo % 3 === 2 || chance(P_OFFLINE));
    const events = [];
    let offlineSpell = Promise.resolve();
    if (offline) {
      figures.browser.offlineSpells += 1;
      offlineSpell = (async () => {
        await sleep(between(0, 300));
        await context.setOffline(true);
        await sleep(between(200, 900));
        await context.setOffline(false);
      })();
      events.push(offlineSpell);
    }
    let finishedBeforeReload = new Set();
    if (reload) {
      events.push((async () => {
        await sleep(between(20, 500));
        await offlineSpell; // a reload needs the network to load the page again
        const before = absorb(byId, await outcomesOf(tabs[0]), figures.browser.retryReasons);
        finishedBeforeReload = before;
        await reloadUntilReady(tabs[0]);
        figures.browser.reloads += 1;
        // the new page load resumes what had not finished: begin must find the stored key
        const unfinished = batch.filter((i) => !before.has(i.id));
        figures.browser.resumedAfterReload += unfinished.length;
        const resumed = await tabs[0].evaluate((s) => window.__resume(s), unfinished.map((i) => specOf(i)));
        for (const intent of unfinished) {
          const r = resumed[intent.id];
          if (!r) continue;
          seeKey(intent, r.key, "begin after reload");
        }
      })());
    }
    await Promise.all(events);
    // wait for every intent of the batch to have an outcome in the current page load of tab 1,
    // and every two-tab twin in tab 2
    const deadline = Date.now() + BATCH_DEADLINE_MS;
    const twinIds = new Set(twins.map((i) => i.id));
    for (;;) {
      const o1 = await outcomesOf(tabs[0]);
      const o2 = await outcomesOf(tabs[1]);
      const done1 = batch.every((i) => finishedBeforeReload.has(i.id) || o1[i.id]?.length);
      const done2 = [...twinIds].every((id) => o2[id]?.length);
      if (done1 && done2) {
        absorb(byId, o1, figures.browser.retryReasons);
        absorb(byId, o2, figures.browser.retryReasons);
        break;
      }
      if (Date.now() > deadline) {
        absorb(byId, o1, figures.browser.retryReasons);
        absorb(byId, o2, figures.browser.retryReasons);
        const missing = batch.filter((i) => !finishedBeforeReload.has(i.id) && !o1[i.id]?.length).map((i) => i.id);
        for (const i of batch) if (missing.includes(i.id) && i.outcome !== "succeeded") { i.outcome = "pending"; i.pendingCode = "NO_OUTCOME"; }
        const missing2 = [...twinIds].filter((id) => !o2[id]?.length);
        problem(`browser batch at ${start}: no outcome after ${BATCH_DEADLINE_MS / 1000} s for ${missing.join(" ")} (tab 1) ${missing2.join(" ")} (tab 2); reload ${reload} offline ${offline}; twins ${[...twinIds].join(" ")}`);
        break;
      }
      await sleep(50);
    }
    // a fresh page load per batch keeps each load's outcome table small
    await reloadUntilReady(tabs[0]);
    await reloadUntilReady(tabs[1]);
    progress.browserDone += batch.length;
  }
}

// ---------------------------------------------------------------------------------------------
// Checks against the server

async function ordersOf(server, account) {
  const orders = await server.orders(account);
  if (orders.length >= 100) problem(`${account}: 100 orders listed, the list may be truncated`);
  return orders;
}

/** Maps the server's orders onto the intents. Returns { duplicates, lost, orphans }. */
async function compare(server, intents, { final }) {
  const byAccount = new Map();
  for (const intent of intents) {
    if (!byAccount.has(intent.account)) byAccount.set(intent.account, []);
    byAccount.get(intent.account)[intent.n] = intent;
  }
  let duplicates = 0;
  let lost = 0;
  let orphans = 0;
  for (const [account, list] of byAccount) {
    const orders = await ordersOf(server, account);
    const byIntent = new Map();
    const byKey = new Map();
    for (const order of orders) {
      const n = intentNumberOf(order);
      const intent = n === null ? undefined : list[n];
      if (!intent) {
        orphans += 1;
        problem(`${account}: order ${order.id} maps to no intent`);
        continue;
      }
      if (!byIntent.has(intent)) byIntent.set(intent, []);
      byIntent.get(intent).push(order);
      byKey.set(order.idempotencyKey, (byKey.get(order.idempotencyKey) ?? 0) + 1);
    }
    for (const [key, count] of byKey) if (count > 1) problem(`${account}: ${count} orders with key ${key}`);
    for (const intent of list) {
      if (!intent) continue;
      const got = byIntent.get(intent) ?? [];
      const keys = new Set(got.map((o) => o.idempotencyKey));
      if (got.length > 1) {
        duplicates += got.length - 1;
        problem(`${intent.id}: ${got.length} orders (keys ${[...keys].join(", ")})`);
      }
      for (const o of got) {
        if (o.idempotencyKey !== intent.key) problem(`${intent.id}: order ${o.id} under key ${o.idempotencyKey}, intent key ${intent.key}`);
      }
      if (intent.outcome === "succeeded") {
        if (got.length === 0) {
          lost += 1;
          problem(`${intent.id}: succeeded in the client but the server has no order`);
        }
        for (const id of intent.orderIds) {
          if (!got.some((o) => o.id === id)) problem(`${intent.id}: the client's answer named order ${id}, not on the server`);
        }
      } else if (final) {
        lost += 1;
        problem(`${intent.id}: still ${intent.outcome} (${intent.pendingCode}) after the resume phase`);
      }
    }
  }
  return { duplicates, lost, orphans };
}

/**
 * After the resume phase (every fault off): waits for the outbox to drain (every order's confirmation
 * delivered), then counts every effect per order: exactly one charge at the provider (the one the order
 * names) and exactly one confirmation at the receiver for every order, and nothing naming no order.
 */
async function countEffects(server, intents, downstream) {
  const accounts = [...new Set(intents.map((i) => i.account))];
  const drainStart = Date.now();
  let orders = [];
  for (;;) {
    orders = (await Promise.all(accounts.map((a) => ordersOf(server, a)))).flat();
    const waiting = orders.filter((o) => !o.confirmation?.deliveredAt);
    if (!waiting.length) break;
    if (Date.now() - drainStart > 60_000) {
      problem(`the outbox did not drain in 60 s: ${waiting.length} confirmations undelivered (${waiting.slice(0, 3).map((o) => o.id).join(", ")})`);
      break;
    }
    await sleep(250);
  }
  figures.crashes.drainSeconds = Number(((Date.now() - drainStart) / 1000).toFixed(1));
  const charges = (await downstream.provider.get("/charges")).charges;
  const mail = await downstream.mailbox.get("/messages");
  figures.crashes.charges = charges.length;
  figures.crashes.confirmations = mail.messages.length;
  figures.crashes.refusedDuplicates = mail.duplicatesRefused;
  const byId = new Map(orders.map((o) => [o.id, o]));
  const chargesOf = new Map();
  for (const charge of charges) {
    if (!byId.has(charge.reference)) { figures.checks.orphanEffects += 1; problem(`charge ${charge.id} names no order of this run (${charge.reference})`); continue; }
    chargesOf.set(charge.reference, [...(chargesOf.get(charge.reference) ?? []), charge]);
  }
  const messagesOf = new Map();
  for (const message of mail.messages) {
    const order = [...byId.keys()].find((id) => message.subject.includes(id));
    if (!order) { figures.checks.orphanEffects += 1; problem(`confirmation ${message.id} names no order of this run`); continue; }
    messagesOf.set(order, [...(messagesOf.get(order) ?? []), message]);
  }
  for (const order of orders) {
    const got = chargesOf.get(order.id) ?? [];
    if (got.length > 1) { figures.checks.duplicateCharges += got.length - 1; problem(`order ${order.id}: ${got.length} charges`); }
    if (got.length === 0) { figures.checks.missingCharges += 1; problem(`order ${order.id}: no charge at the provider`); }
    if (got.length && order.chargeId !== got[0].id) problem(`order ${order.id} names charge ${order.chargeId}, the provider has ${got[0].id}`);
    const sent = messagesOf.get(order.id) ?? [];
    if (sent.length > 1) { figures.checks.duplicateConfirmations += sent.length - 1; problem(`order ${order.id}: ${sent.length} confirmations`); }
    if (sent.length === 0) { figures.checks.missingConfirmations += 1; problem(`order ${order.id}: no confirmation at the receiver`); }
    if (sent.length && sent[0].id !== order.confirmation?.id) problem(`order ${order.id} names confirmation ${order.confirmation?.id}, the receiver has ${sent[0].id}`);
  }
  // Every intent that succeeded has its one order; the per-order counts above cover its effects.
  for (const intent of intents) if (intent.outcome === "succeeded" && ![...byId.values()].some((o) => o.idempotencyKey === intent.key && o.accountId === intent.account)) problem(`${intent.id}: succeeded but no order to count effects of`);
}

// ---------------------------------------------------------------------------------------------
// Main

async function main() {
  const lib = await importPackage();
  const cleanups = []; // run in reverse order in `finally`, also when the set-up fails half way
  let browserParts;
  let exitCode = 1;
  try {
    const downstream = await startDownstream(cleanups);
    let servers;
    if (PG) {
      servers = await startPgBackend(cleanups, downstream);
    } else {
      const sqlite = await startServer({ downstream });
      cleanups.push(() => sqlite.stop());
      servers = [sqlite];
    }
    for (let i = 0; i < CPU_LOAD; i++) {
      const busy = spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" });
      const stop = () => busy.kill("SIGKILL");
      process.on("exit", stop);
      cleanups.push(stop);
    }
    if (CPU_LOAD) console.log(`CPU load: ${CPU_LOAD} busy-loop processes (one per core)`);
    // raw twins go straight to the first instance; orders are read from the last (they share the store)
    const server = servers[0];
    const reader = servers.at(-1);
    const proxy = await startProxy(servers.map((s) => s.url));
    cleanups.push(() => proxy.close());
    const runId = `${SEED.toString(36)}${Date.now().toString(36).slice(-4)}`;
    const intents = makeIntents(runId);
    for (const intent of intents) intent.token = await server.session(intent.account); // the account's session
    const nodeIntents = intents.filter((i) => i.where === "node");
    const browserIntents = intents.filter((i) => i.where === "browser");
    Object.assign(figures, { intents: intents.length, nodeIntents: nodeIntents.length, browserIntents: browserIntents.length });
    console.log(`fault harness: ${intents.length} intents (${nodeIntents.length} Node, ${browserIntents.length} ${engineName}), seed ${SEED}`);
    console.log(`${figures.store}: ${servers.map((s) => s.url).join(" ")}; proxy ${proxy.url}`);
    await putFaults(servers, SERVER_FAULTS);
    await putDownstreamFaults(downstream, true);

    if (browserIntents.length) browserParts = await openBrowser(proxy.url);
    const ticker = setInterval(() => {
      const active = [...progress.nodeActive].slice(0, 3).join(" ");
      console.log(`  ${((Date.now() - started) / 1000).toFixed(0)} s: ${progress.phase}; Node ${progress.nodeDone}/${nodeIntents.length} (active ${progress.nodeActive.size}: ${active}), ${engineName} ${progress.browserDone}/${browserIntents.length}, attempts ${figures.proxy.attempts}`);
    }, 10000);
    ticker.unref();
    const nodeRun = runNode(lib, nodeIntents, proxy.url, server.url);
    const browserRun = browserIntents.length ? runBrowser(browserParts, browserIntents) : Promise.resolve();
    const [nodeTools] = await Promise.all([nodeRun, browserRun]);
    const phase1Ms = Date.now() - started;

    // every intent: succeeded exactly once, or pending with its original key (and at most one order)
    const first = await compare(reader, intents, { final: false });
    for (const i of intents) {
      if (i.outcome === "succeeded") figures.outcomes.succeeded += 1;
      else { figures.outcomes.pendingAfterRun += 1; bump(figures.outcomes.pendingCodes, i.pendingCode ?? i.outcome); }
    }

    // resume the pending ones with every fault off
    await putFaults(servers, SERVER_FAULTS_OFF);
    await putDownstreamFaults(downstream, false);
    proxy.state.on = false;
    if (browserParts && capabilities.offline) await browserParts.context.setOffline(false);
    // A key whose request died in a crash is held until its lease runs out (then the completer or a retry
    // finishes it); the resume phase is the shopper coming back later, after that, so that a Node intent
    // with its short retry policy (2 attempts) does not spend them on 409s.
    if (CHECKOUT) await sleep(KEY_LEASE_MS * 1.5);
    const pending = intents.filter((i) => i.outcome !== "succeeded");
    figures.resumed = pending.length;
    const nodePending = pending.filter((i) => i.where === "node");
    await Promise.all(nodePending.map(async (intent) => {
      const op = await nodeTools.clientFor(intent).begin(intent.id, nodeTools.request(intent));
      seeKey(intent, op.key, "resume begin");
      if (!op.resumed) problem(`${intent.id}: resume begin not marked resumed`);
      const outcome = await op.send().then((result) => ({ result }), (error) => ({ error }));
      await record(intent, outcome);
    }));
    const browserPending = pending.filter((i) => i.where === "browser");
    if (browserPending.length) {
      const page = browserParts.tabs[0];
      await reloadUntilReady(page);
      const resumed = await page.evaluate((s) => window.__resume(s), browserPending.map((i) => specOf(i, RETRY_RESUME)));
      for (const intent of browserPending) if (resumed[intent.id]) seeKey(intent, resumed[intent.id].key, "resume begin (page)");
      const byId = new Map(browserPending.map((i) => [i.id, i]));
      const deadline = Date.now() + 60000;
      for (;;) {
        const o = await outcomesOf(page);
        if (browserPending.every((i) => o[i.id]?.length) || Date.now() > deadline) {
          for (const i of browserPending) i.outcome = undefined;
          absorb(byId, o, figures.browser.retryReasons);
          break;
        }
        await sleep(50);
      }
    }
    figures.resumedSucceeded = pending.filter((i) => i.outcome === "succeeded").length;

    const final = await compare(reader, intents, { final: true });
    figures.checks.duplicates = Math.max(first.duplicates, final.duplicates);
    figures.checks.lost = first.lost + final.lost;
    figures.checks.orphanOrders = final.orphans;
    if (downstream) await countEffects(reader, intents, downstream);
    if (browserParts?.pageErrors.length) problem(`uncaught page errors:\n${browserParts.pageErrors.join("\n")}`);
    figures.runtimeSeconds = Number(((Date.now() - started) / 1000).toFixed(1));
    figures.faultPhaseSeconds = Number((phase1Ms / 1000).toFixed(1));

    printFigures();
    const c = figures.checks;
    const bad = c.duplicates > 0 || c.lost > 0 || c.keyChanged > 0 || c.orphanOrders > 0 || c.duplicateCharges > 0 || c.duplicateConfirmations > 0
      || c.missingConfirmations > 0 || c.missingCharges > 0 || c.orphanEffects > 0 || c.problems.length > 0;
    exitCode = bad ? 1 : 0;
    console.log(bad ? `FAIL: ${figures.checks.problems.length} problems` : "OK: no duplicates, nothing lost");
  } finally {
    await browserParts?.browser.close().catch(() => {});
    for (const cleanup of cleanups.reverse()) {
      try {
        const code = await cleanup();
        if (typeof code === "number" && code !== 0) console.error(`server exited with ${code}`);
      } catch (error) {
        console.error(`cleanup: ${error?.stack ?? error}`);
      }
    }
  }
  if (exitCode === 0 && flag("--ci") && !PG && !BROWSER_ONLY) exitCode = runPgPass();
  if (exitCode === 0 && RUN_MATRIX) exitCode = runMatrix();
  return exitCode;
}

/** `--ci`: a small multi-instance PostgreSQL pass as well, only when IF_PG_TESTS=1. */
function runPgPass() {
  if (process.env.IF_PG_TESTS !== "1") {
    console.log("\n==== multi-instance PostgreSQL pass SKIPPED: IF_PG_TESTS is not 1 (the xtask sets it after installing PostgreSQL); run `node tests/fault/run.mjs --pg --ci` by hand");
    return 0;
  }
  const args = [fileURLToPath(import.meta.url), "--pg", "--no-matrix", "--intents", String(PG_CI_INTENTS), "--seed", String(SEED)];
  if (NO_BROWSER) args.push("--no-browser");
  if (!CHECKOUT) args.push("--no-checkout");
  console.log(`\n==== multi-instance PostgreSQL pass (IF_PG_TESTS=1): node ${path.relative(root, args[0])} ${args.slice(1).join(" ")}`);
  const run = spawnSync(process.execPath, args, { cwd: root, stdio: "inherit" });
  return run.status ?? 1;
}

function percentiles(list) {
  const sorted = [...list].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  return `${at(0.5)} / ${at(0.9)} / ${at(0.99)} / ${sorted.at(-1) ?? 0}`;
}

function printFigures() {
  const p = figures.proxy;
  const keysOnSeveral = [...figures.spread.keys.values()].filter((set) => set.size > 1).length;
  const rows = [
    ["store", figures.store],
    ["CPU load (busy-loop processes)", CPU_LOAD],
    ["two-tab begins", AT_ONCE ? "at the same moment" : "tab 2 after tab 1's begins returned"],
    ["intents", `${figures.intents} (Node ${figures.nodeIntents}, ${engineName} ${figures.browserIntents})`],
    ["attempts seen by the proxy", p.attempts],
    ...(PG ? [["  forwarded per instance", figures.spread.perInstance.join(" / ")],
      ["  keys whose attempts reached 2+ instances", `${keysOnSeveral} of ${figures.spread.keys.size}`]] : []),
    ["  201 (work done)", p.answered201],
    ["  201 replayed", p.replayed201],
    ["  503 before work", p.status503],
    ["  429 + Retry-After", p.status429],
    ["  409 (twin in flight)", p.status409],
    ["  other statuses", JSON.stringify(p.otherStatus)],
    ["  commit then dropped (server)", p.dropAfterCommit],
    ["  reset before forwarding (proxy)", p.resetBefore],
    ["  reset after the answer (proxy)", p.resetAfter],
    ["  answers held until the attempt deadline (proxy)", p.atDeadline],
    ["  answers slower than the latency fault", p.slowAnswers],
    ["  server answer time p50 / p90 / p99 / max (ms)", percentiles(figures.serverLatencies)],
    ["  client gave up before the answer (timeout/abort/reload/offline)", p.clientGaveUp],
    ["Node: aborts / re-begins / raw twins (409) / double sends / client.fetch", `${figures.node.aborts} / ${figures.node.reBegins} / ${figures.node.twins} (${figures.node.twin409}) / ${figures.node.doubleSends} / ${figures.node.viaFetch}`],
    [`${engineName}: two-tab intents / client.fetch / aborts+new client / page.reload()s (intents resumed) / offline spells${capabilities.offline ? "" : " (none: no offline switch)"}`, `${figures.browser.twoTabs} / ${figures.browser.viaFetch} / ${figures.browser.aborts} / ${figures.browser.reloads} (${figures.browser.resumedAfterReload}) / ${figures.browser.offlineSpells}`],
    ...(CHECKOUT ? [[`${engineName}: reloads that found the server restarting and were reloaded again`, figures.browser.reloadsAgain]] : []),
    ["retry reasons (Node)", JSON.stringify(figures.node.retryReasons)],
    ["Node: keys asked about (reconciliation)", figures.node.reconciled],
    [`retry reasons (${engineName})`, JSON.stringify(figures.browser.retryReasons)],
    ["succeeded during the fault phase", figures.outcomes.succeeded],
    ["pending after the fault phase", `${figures.outcomes.pendingAfterRun} ${JSON.stringify(figures.outcomes.pendingCodes)}`],
    ["resumed with faults off / succeeded", `${figures.resumed} / ${figures.resumedSucceeded}`],
    ...(CHECKOUT ? [["server crashes (abort) / restarts", `${figures.crashes.crashes} / ${figures.crashes.restarts} ${JSON.stringify(figures.crashes.signals)}`],
      ["charges at the provider / confirmations at the receiver", `${figures.crashes.charges} / ${figures.crashes.confirmations}`],
      ["  confirmations sent again and refused by the receiver", figures.crashes.refusedDuplicates],
      ["  outbox drained after the resume phase in", `${figures.crashes.drainSeconds} s`]] : [["order flow", "one transaction (--no-checkout): no provider, no outbox, no crashes"]]),
    ["duplicates", figures.checks.duplicates],
    ["lost", figures.checks.lost],
    ["key changed", figures.checks.keyChanged],
    ...(CHECKOUT ? [["duplicate charges", figures.checks.duplicateCharges],
      ["missing charges", figures.checks.missingCharges],
      ["duplicate confirmations", figures.checks.duplicateConfirmations],
      ["missing confirmations", figures.checks.missingConfirmations],
      ["charges or confirmations naming no order", figures.checks.orphanEffects]] : []),
    ["orders mapping to no intent", figures.checks.orphanOrders],
    ["problems", figures.checks.problems.length],
    ["runtime", `${figures.runtimeSeconds} s (fault phase ${figures.faultPhaseSeconds} s)`],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  console.log("\n==== fault harness figures");
  for (const [k, v] of rows) console.log(`${k.padEnd(width)}  ${v}`);
}

/** The bad-input matrix (tests/fault/*.test.mjs): the xtask's layer f only looks in tests/js. */
function runMatrix() {
  const files = readdirSync(here).filter((f) => f.endsWith(".test.mjs")).map((f) => path.join(here, f));
  if (!files.length) return 0;
  console.log(`\n==== bad-input matrix: node --test ${files.map((f) => path.relative(root, f)).join(" ")}`);
  const run = spawnSync(process.execPath, ["--test", ...files], { cwd: root, stdio: "inherit" });
  return run.status ?? 1;
}

// Ctrl-C or a kill: exit through process.exit, so the "exit" handlers kill the server instances and
// stop the PostgreSQL cluster.
for (const [signal, code] of [["SIGINT", 130], ["SIGTERM", 143], ["SIGHUP", 129]]) {
  process.on(signal, () => {
    console.error(`\n${signal}: stopping the servers${PG ? " and the PostgreSQL cluster" : ""}`);
    process.exit(code);
  });
}

main().then((code) => process.exit(code), (error) => {
  console.error(error?.stack ?? error);
  process.exit(1);
});
