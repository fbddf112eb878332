// The figures a run collects, its problems, and the table printed at the end.
import { capabilities, engineName } from "../support/browsers.mjs";
import { PG, INSTANCES, CHECKOUT, CPU_LOAD, AT_ONCE } from "./options.mjs";

export const figures = {
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
export const progress = { nodeDone: 0, nodeActive: new Set(), browserDone: 0, phase: "faults" };
export const problem = (text) => {
  figures.checks.problems.push(text);
  if (figures.checks.problems.length <= 30) console.error(`PROBLEM: ${text}`);
};
export const bump = (map, k) => (map[k] = (map[k] ?? 0) + 1);

export function percentiles(list) {
  const sorted = [...list].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  return `${at(0.5)} / ${at(0.9)} / ${at(0.99)} / ${sorted.at(-1) ?? 0}`;
}

export function printFigures() {
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

