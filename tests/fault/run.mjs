// Fault harness: many payment intents through the REAL package (Node: pkg/ by `import`; a real browser:
// pkg/index.js in a page, in the engine IF_BROWSER names: chromium (default), firefox, webkit) to the
// REAL reference server, with faults on every path, then a count of the
// server's orders against the intents. Exits non-zero on any duplicate or lost intent.
//
//   node tests/fault/run.mjs [--ci | --full] [--intents N] [--browser-share 0.3] [--seed S]
//                            [--pg [--instances 3]] [--browser-only] [--two-tabs P] [--at-once] [--cpu-load]
//                            [--at-deadline P]
//                            [--no-checkout]
//   node tests/fault/run.mjs --invite-only [--invites N] [--pg [--instances 3]]
//   node tests/fault/run.mjs --inbox-only [--messages N]
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
// --invite-only: only examples/invite (the app on the server library alone) under external kill -9
// (invite-kills.mjs): --invites keys (default 2,000) on SQLite, or with --pg on --instances instances
// sharing a PostgreSQL database. `--ci` without --pg runs it after the order-flow passes on SQLite, and
// on PostgreSQL (3 instances) when IF_PG_TESTS=1.
//
// --inbox-only: only the library's inbox under external kill -9 (inbox-kills.mjs): --messages messages
// (default 1,000; 10,000 with --full) each delivered 3 times to mail-receiver (SQLite; it has no PostgreSQL store) while it is
// killed and restarted. `--ci` without --pg runs it after the examples/invite runs.
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
//
// Files, one concept each: options.mjs (flags, PRNG, fault settings), backend.mjs (the servers, the
// PostgreSQL cluster's instances), proxy.mjs (the network faults), intents.mjs, node-clients.mjs,
// browser.mjs, checks.mjs (orders and effects against the intents), campaign.mjs (one run), report.mjs
// (figures and the printed table), killable.mjs (a service process a kill run restarts), invite-kills.mjs
// (examples/invite under external kill -9), inbox-kills.mjs (the inbox under external kill -9).
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { root } from "../support/paths.mjs";
import { runCampaign } from "./campaign.mjs";
import { runInboxKills } from "./inbox-kills.mjs";
import { runInviteKills } from "./invite-kills.mjs";
import { BROWSER_ONLY, CHECKOUT, INBOX_ONLY, INVITE_ONLY, NO_BROWSER, PG, PG_CI_INTENTS, RUN_MATRIX, SEED, flag, here } from "./options.mjs";

async function main() {
  if (INVITE_ONLY) return runInviteKills({ pg: PG });
  if (INBOX_ONLY) return runInboxKills();
  const mainPass = flag("--ci") && !PG && !BROWSER_ONLY;
  let exitCode = await runCampaign();
  if (exitCode === 0 && mainPass) exitCode = runPgPass();
  if (exitCode === 0 && mainPass) exitCode = await runInviteKills({ pg: false });
  if (exitCode === 0 && mainPass && pgTests()) exitCode = await runInviteKills({ pg: true });
  if (exitCode === 0 && mainPass) exitCode = await runInboxKills();
  if (exitCode === 0 && RUN_MATRIX) exitCode = runMatrix();
  return exitCode;
}

/** The PostgreSQL passes of --ci run only when IF_PG_TESTS=1 (the xtask sets it after installing PostgreSQL). */
const pgTests = () => process.env.IF_PG_TESTS === "1";

/** `--ci`: a small multi-instance PostgreSQL pass as well, only when IF_PG_TESTS=1. */
function runPgPass() {
  if (!pgTests()) {
    console.log("\n==== multi-instance PostgreSQL passes SKIPPED: IF_PG_TESTS is not 1 (the xtask sets it after installing PostgreSQL); run `node tests/fault/run.mjs --pg --ci` and `node tests/fault/run.mjs --pg --invite-only` by hand");
    return 0;
  }
  const args = [fileURLToPath(import.meta.url), "--pg", "--no-matrix", "--intents", String(PG_CI_INTENTS), "--seed", String(SEED)];
  if (NO_BROWSER) args.push("--no-browser");
  if (!CHECKOUT) args.push("--no-checkout");
  console.log(`\n==== multi-instance PostgreSQL pass (IF_PG_TESTS=1): node ${path.relative(root, args[0])} ${args.slice(1).join(" ")}`);
  const run = spawnSync(process.execPath, args, { cwd: root, stdio: "inherit" });
  return run.status ?? 1;
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
