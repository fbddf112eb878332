// The browser share of the intents (the engine IF_BROWSER names): two tabs over one storage, aborts, reloads
// and offline spells.
import { capabilities, collectPageErrors, engineName, launchBrowser, waitForLibPage } from "../support/browsers.mjs";
import { pkgMissing } from "../support/paths.mjs";
import { BROWSER_BATCH, BATCH_DEADLINE_MS, chance, between, sleep, P_ABORT, P_FETCH, P_TWO_TABS, AT_ONCE, P_RELOAD, P_OFFLINE } from "./options.mjs";
import { figures, progress, problem, bump } from "./report.mjs";
import { seeKey } from "./intents.mjs";

export async function openBrowser(proxyUrl) {
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

export const ready = (page) => waitForLibPage(page, { timeout: 20_000 });
/**
 * page.reload() until the page loads the package: a reload while a crashed server restarts fails (no
 * answer for the page, or the package does not load), as it would for a shopper, who reloads again; counted.
 */
export async function reloadUntilReady(page) {
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
export const specOf = (intent, retry = intent.retry) => ({ id: intent.id, ns: intent.ns, token: intent.token, body: intent.body, retry, expectedKey: intent.key ?? undefined });

export async function outcomesOf(page) {
  try {
    return await page.evaluate(() => window.__outcomes());
  } catch {
    return {}; // mid-reload
  }
}

/** Reads a page load's outcomes into the intents; returns the ids with a final outcome there. */
export function absorb(intentsById, outcomes, reasons) {
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

export async function runBrowser(browserParts, intents) {
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
