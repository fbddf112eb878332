// The run's settings: the command-line flags, the harness's seeded PRNG, every fault probability and the
// clients' retry options (FAULTS.md names these constants).
import os from "node:os";
import path from "node:path";
import { root } from "../support/paths.mjs";

export const here = path.join(root, "tests/fault");
export const started = Date.now();

// ---------------------------------------------------------------------------------------------
// Arguments

export const argv = process.argv.slice(2);
export const flag = (name) => argv.includes(name);
export const value = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1] : fallback;
};
export const FULL = flag("--full");
export const BROWSER_ONLY = flag("--browser-only");
export const TOTAL = Number(value("--intents", FULL ? 1200 : BROWSER_ONLY ? 60 : 180));
export const BROWSER_SHARE = BROWSER_ONLY ? 1 : Number(value("--browser-share", 0.33));
export const NO_BROWSER = flag("--no-browser");
export const SEED = Number(value("--seed", Date.now() % 1_000_000));
export const RUN_MATRIX = flag("--ci") && !flag("--no-matrix");
export const INTENTS_PER_ACCOUNT = 40; // GET /api/orders lists at most 100: keep well below
export const NODE_CONCURRENCY = 12;
export const BROWSER_BATCH = 10;
export const BATCH_DEADLINE_MS = Number(value("--batch-deadline", 90000));
export const PG = flag("--pg");
export const PG_INSTANCES = Number(value("--instances", 3)); // server instances on one PostgreSQL database
export const INSTANCES = PG ? PG_INSTANCES : 1;
export const PG_CI_INTENTS = 90; // the --pg pass that --ci adds when IF_PG_TESTS=1
export const CHECKOUT = !flag("--no-checkout");
export const INVITE_ONLY = flag("--invite-only"); // only the examples/invite kill runs (invite-kills.mjs)
export const INVITES = Number(value("--invites", 2000)); // keys per examples/invite kill run
export const INBOX_ONLY = flag("--inbox-only"); // only the inbox kill run (inbox-kills.mjs)
export const MESSAGES = Number(value("--messages", FULL ? 10_000 : 1000)); // messages per inbox kill run, each delivered 3 times
// Longer than the latency fault (a held key is not taken over while its request sleeps), short enough that a
// key left by a crash is taken over well within a client's total timeout.
export const KEY_LEASE_MS = 3000;
if (!Number.isInteger(INVITES) || INVITES < 1) throw new Error(`--invites must be a whole number >= 1, got ${value("--invites")}`);
if (!Number.isInteger(MESSAGES) || MESSAGES < 1) throw new Error(`--messages must be a whole number >= 1, got ${value("--messages")}`);
if (!Number.isInteger(PG_INSTANCES) || PG_INSTANCES < 1) throw new Error(`--instances must be a whole number >= 1, got ${value("--instances")}`);

// A small seeded PRNG (mulberry32) for the harness's own choices, so a failing run can be replayed
// with --seed. The library's keys and jitter come from its CSPRNG regardless.
let seedState = SEED >>> 0;
export function random() {
  seedState = (seedState + 0x6d2b79f5) >>> 0;
  let t = seedState;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
export const chance = (p) => random() < p;
export const between = (lo, hi) => Math.floor(lo + random() * (hi - lo + 1));
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// Fault settings

export const SERVER_FAULTS = {
  failBeforeWork: 0.12, dropAfterCommit: 0.08, status429: 0.06, retryAfterSecs: 1,
  latencyMs: 1500, latencyProbability: Number(process.env.FAULT_LATENCY_P ?? 0.05),
};
if (CHECKOUT) Object.assign(SERVER_FAULTS, { crashAfterCharge: 0.02, crashAfterFinish: 0.02, crashAfterDelivery: 0.01 });
export const SERVER_FAULTS_OFF = { retryAfterSecs: 1 }; // every fault off: setFaults() fills in NO_FAULTS
// `atDeadline`: the proxy holds an answer until about the client's attempt deadline (RETRY's
// attemptTimeoutMs after the request arrived, -20..+5 ms), then sends its headers and, 0..20 ms later,
// its body: answers that race the attempt timer (a Response handed over after the abort, a body cut
// by it), the case where an engine can hand over a Response with a dead body.
export const PROVIDER_FAULTS = { failBeforeCharge: 0.05, dropAfterCharge: 0.05, latencyMs: 150, latencyProbability: 0.1 };
export const MAILBOX_FAULTS = { fail: 0.2 };
export const PROXY_FAULTS = { resetBefore: 0.04, resetAfter: 0.03, atDeadline: Number(value("--at-deadline", 0.1)) };
// Generous attempts, small delays, an attempt timeout below the latency fault.
export const RETRY = { maxAttempts: 25, baseDelayMs: 30, maxDelayMs: 400, attemptTimeoutMs: 800, maxRetryAfterMs: 150, totalTimeoutMs: 20000 };
// A share of intents gives up early, so some are left pending for the resume phase.
export const RETRY_SHORT = { ...RETRY, maxAttempts: 2 };
export const RETRY_RESUME = { ...RETRY, maxAttempts: 50, attemptTimeoutMs: 5000, totalTimeoutMs: 60000 };
export const P_SHORT = 0.12;
export const P_TWIN = 0.08; // Node: a raw request with the same key at the same time (held by a latency fault)
export const P_DOUBLE = 0.06; // Node: send() twice at once (double click)
export const P_ABORT = 0.1; // abort mid-send, then re-begin ("reload")
export const P_FETCH = 0.25; // client.fetch(url, { intent }) instead of begin + send (its begin leaves the first write to send)
export const P_TWO_TABS = Number(value("--two-tabs", 0.3)); // browser: the same intent started in both tabs
export const CPU_LOAD = flag("--cpu-load") ? os.availableParallelism() : 0; // busy-loop children
export const AT_ONCE = flag("--at-once"); // both tabs begin their twins at the same moment
export const P_RELOAD = 0.25; // browser: page.reload() during a batch
export const P_OFFLINE = 0.3; // browser: an offline spell during a batch
