// One run of the harness: the servers, the fault phase, the resume phase with every fault off, the checks.
import { spawn } from "node:child_process";
import { capabilities, engineName } from "../support/browsers.mjs";
import { importPackage } from "../support/paths.mjs";
import { started, SEED, PG, CHECKOUT, KEY_LEASE_MS, sleep, SERVER_FAULTS, SERVER_FAULTS_OFF, RETRY_RESUME, CPU_LOAD } from "./options.mjs";
import { figures, progress, problem, bump, printFigures } from "./report.mjs";
import { startServer, startDownstream, putFaults, startPgBackend, putDownstreamFaults } from "./backend.mjs";
import { startProxy } from "./proxy.mjs";
import { makeIntents, seeKey, record } from "./intents.mjs";
import { runNode } from "./node-clients.mjs";
import { openBrowser, reloadUntilReady, specOf, outcomesOf, absorb, runBrowser } from "./browser.mjs";
import { compare, countEffects } from "./checks.mjs";

/** The harness against the reference server; resolves to the exit code (0: no duplicate, nothing lost). */
export async function runCampaign() {
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
    cleanups.push(() => clearInterval(ticker)); // the process goes on to the next pass
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
  return exitCode;
}

