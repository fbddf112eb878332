// Runs every case of cases.mjs in a real browser (real localStorage/sessionStorage) against the
// built package (pkg/index.js), plus real `page.reload()` cases. One node:test test per case. The engine is
// IF_BROWSER (chromium, firefox, webkit; tests/support/browsers.mjs); `cargo xtask test` runs this
// file once per engine.
//
// Needs: the package (cargo xtask build) and the engine's browser
// and driver (the xtask installs them; tests/support/browsers.mjs says what is missing). A missing
// prerequisite fails every test with a message saying what to do.
import { test, before, after } from "node:test";

import { capabilities, collectPageErrors, engineName, launchBrowser, openLibPage, throwPageFailure, waitForLibPage } from "../support/browsers.mjs";
import { knownFailure } from "../support/known-failures.mjs";
import { pkgMissing } from "../support/paths.mjs";
import { startStaticServer } from "../support/static-server.mjs";
import { startTestServer } from "../support/test-server.mjs";
import { waitFor, withTimeout } from "../support/timing.mjs";
import { cases } from "./cases.mjs";

const PAGE = "/tests/browser/cases.html";
const CASE_TIMEOUT_MS = 20_000;

let server; // scripted test server (another origin than the page, as in production: CORS included)
let statics; // serves the repository root to the page
let browser;
let page;
const pageErrors = [];

before(async () => {
  browser = await launchBrowser({ what: `the ${engineName} tests`, also: [pkgMissing()] });
  server = await startTestServer();
  statics = await startStaticServer();
  page = await (await browser.newContext()).newPage(); // a context can hold a second tab
  collectPageErrors(page, pageErrors);
  await openLibPage(page, `${statics.url}${PAGE}`);
});

after(async () => {
  await browser?.close();
  await statics?.close();
  await server?.close();
});

for (const testCase of cases) {
  test(testCase.name, { todo: knownFailure(testCase.name) }, async () => {
    if (testCase.freshPage) await freshPage();
    const outcome = await withTimeout(
      page.evaluate(([name, serverUrl]) => window.__runCase(name, serverUrl), [testCase.name, server.url]),
      CASE_TIMEOUT_MS,
      testCase.name,
    );
    throwPageFailure(outcome, "BrowserCaseFailure");
  });
}

/** A case that redefines what the browser gives a page from its start (e.g. `localStorage` throwing,
 *  as when storage is blocked) runs on a freshly loaded page: after earlier cases have run the
 *  package's code many times, WebKitGTK's JIT keeps reading the original `localStorage` accessor
 *  through a redefinition made mid-page (seen with 2.50), which no real page with blocked storage
 *  ever does. */
async function freshPage() {
  await page.reload();
  await waitForLibPage(page);
}

// --- real reloads: the page goes away mid-send and a new page load resumes the intent ------------

const serverLog = (scenario) => server.log(scenario);

/** begin + send (not awaited), reload once `ready` holds, begin again: the key must be the same. */
async function reloadMidSend(label, script, ready) {
  const namespace = `reload${label}${Date.now().toString(36)}`;
  const scenario = `${namespace}-pay`;
  const url = `${server.url}/s/${scenario}?script=${encodeURIComponent(script)}`;
  const before = await page.evaluate(async ([namespace, url]) => {
    const client = new window.__lib.IdempotentClient({
      namespace, storage: "local", retry: { baseDelayMs: 20000, maxDelayMs: 20000, jitter: "none" },
    });
    const op = await client.begin("checkout:cart-42", { url, body: '{"cart":42}' });
    window.__inflight = op.send().catch((e) => e); // never settles before the reload
    return { key: op.key };
  }, [namespace, url]);
  await ready({ scenario, namespace });
  await page.reload();
  await waitForLibPage(page);
  const afterReload = await page.evaluate(async ([namespace, url]) => {
    const client = new window.__lib.IdempotentClient({ namespace, storage: "local", retry: { baseDelayMs: 1, maxDelayMs: 5 } });
    const pending = (await client.pending()).map((p) => ({ intentId: p.intentId, key: p.key, state: p.state }));
    const op = await client.begin("checkout:cart-42", { url, body: '{"cart":42}' });
    const resumed = { key: op.key, resumed: op.resumed, attempts: op.attempts };
    const result = await op.send();
    return { pending, resumed, status: result.status, resultKey: result.key };
  }, [namespace, url]);
  const message = JSON.stringify({ before, afterReload });
  if (afterReload.resumed.key !== before.key) throw new Error(`a new key after the reload: ${message}`);
  if (!afterReload.resumed.resumed || afterReload.resumed.attempts < 1) throw new Error(`not marked resumed: ${message}`);
  if (afterReload.pending.length !== 1 || afterReload.pending[0].key !== before.key) throw new Error(`pending() after reload: ${message}`);
  if (afterReload.status !== 201 || afterReload.resultKey !== before.key) throw new Error(`send after reload: ${message}`);
  const log = await serverLog(scenario);
  const keys = log.map((entry) => entry.key);
  if (keys.length !== 2 || keys.some((k) => k !== before.key)) throw new Error(`server saw keys ${JSON.stringify(keys)}, expected twice ${before.key}`);
}

async function storedRecord(namespace) {
  return page.evaluate((slot) => JSON.parse(localStorage.getItem(slot) ?? "null"), `idempotent-fetch:v1:${namespace}:checkout:cart-42`);
}

test("page.reload() during a backoff sleep: the next page load resumes the same key", async () => {
  await reloadMidSend("sleep", "503,201", async ({ scenario, namespace }) => {
    await waitFor(async () => (await serverLog(scenario)).length === 1, "the first attempt");
    await waitFor(async () => (await storedRecord(namespace))?.lastStatus === 503, "the 503 to be recorded");
  });
});

test("page.reload() during an in-flight attempt: the next page load resumes the same key", async () => {
  await reloadMidSend("flight", "delay5000,201", async ({ scenario }) => {
    await waitFor(async () => (await serverLog(scenario)).length === 1, "the first attempt to reach the server");
  });
});

test("page.reload() after begin, before the first attempt: the next begin is resumed with the same key", async () => {
  const namespace = `reloadbegun${Date.now().toString(36)}`;
  const url = `${server.url}/s/${namespace}-pay?script=201`;
  const begin = () =>
    page.evaluate(async ([namespace, url]) => {
      const client = new window.__lib.IdempotentClient({ namespace, storage: "local" });
      const op = await client.begin("checkout:cart-42", { url, body: '{"cart":42}' });
      return { key: op.key, resumed: op.resumed, attempts: op.attempts };
    }, [namespace, url]);
  const before = await begin();
  await page.reload();
  await waitForLibPage(page);
  const after = await begin();
  const message = JSON.stringify({ before, after });
  if (before.resumed) throw new Error(`a new intent reported resumed: ${message}`);
  if (after.key !== before.key || after.attempts !== 0) throw new Error(`not the same unsent key: ${message}`);
  if (!after.resumed) throw new Error(`the key existed before this begin, yet resumed is false: ${message}`);
  if ((await serverLog(`${namespace}-pay`)).length !== 0) throw new Error("begin sent something");
});

test("two tabs sending the same intent: same key, one at a time", async () => {
  const namespace = `tabs${Date.now().toString(36)}`;
  const scenario = `${namespace}-pay`;
  const url = `${server.url}/s/${scenario}?script=${encodeURIComponent("delay400,201")}`;
  const second = await page.context().newPage();
  try {
    collectPageErrors(second, pageErrors);
    await openLibPage(second, `${statics.url}${PAGE}`);
    const run = (tab) => tab.evaluate(async ([namespace, url]) => {
      const client = new window.__lib.IdempotentClient({ namespace, storage: "local", retry: { baseDelayMs: 1, maxDelayMs: 5 } });
      const op = await client.begin("checkout:cart-42", { url, body: '{"cart":42}' });
      const result = await op.send();
      return { key: op.key, status: result.status };
    }, [namespace, url]);
    const [a, b] = await Promise.all([run(page), run(second)]);
    if (a.key !== b.key) throw new Error(`two tabs, two keys: ${a.key} ${b.key}`);
    if (a.status !== 201 || b.status !== 201) throw new Error(`statuses ${a.status} ${b.status}`);
    const log = await serverLog(scenario);
    if (log.some((entry) => entry.key !== a.key)) throw new Error(`server saw other keys: ${JSON.stringify(log.map((e) => e.key))}`);
    if (log.length !== 2 || log[1].at - log[0].at < 350) {
      throw new Error(`not one at a time: ${JSON.stringify(log.map((e) => e.at - log[0].at))}`);
    }
  } finally {
    await second.close();
  }
});

// --- what the quick start downloads: the parts loaded on first use stay on the server -------------

/** The package's files a page fetched (resource timing), as paths under /pkg/. */
const pkgFilesFetched = (page) =>
  page.evaluate(() => performance.getEntriesByType("resource").map((e) => new URL(e.name).pathname).filter((p) => p.startsWith("/pkg/")));

test("the quick start (begin + send, fetch) requests no lazy part; once idle after its first send, the sweep part alone; a Request body and resuming a stored intent load their parts on use", async () => {
  const context = await browser.newContext();
  try {
    const fresh = await context.newPage();
    collectPageErrors(fresh, pageErrors);
    await openLibPage(fresh, `${statics.url}${PAGE}`);
    const namespace = `quick${Date.now().toString(36)}`;
    // Before the first send nothing asks for the sweep: the warm-up runs when the page is idle, and
    // begin needs no part.
    await fresh.evaluate(async ([namespace, base]) => {
      const client = new window.__lib.IdempotentClient({ namespace });
      window.__quick = { client, op: await client.begin("checkout", {
        url: `${base}/s/${namespace}-pay?script=201`,
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ cart: 42 }),
      }) };
      await new Promise((resolve) => setTimeout(resolve, 1500));
    }, [namespace, server.url]);
    const begun = (await pkgFilesFetched(fresh)).filter((p) => p.startsWith("/pkg/lazy/"));
    if (begun.length) throw new Error(`the quick start's begin and an idle page after it fetched ${begun.join(", ")}`);
    const answered = await fresh.evaluate(async ([namespace, base]) => {
      const { client, op } = window.__quick;
      const sent = await op.send();
      const fetched = await client.fetch(`${base}/s/${namespace}-fetch?script=201`, { method: "POST", body: "{}" });
      // The sweep after the first send runs when the page is idle.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      return [sent.status, fetched.status];
    }, [namespace, server.url]);
    if (answered.join() !== "201,201") throw new Error(`the quick start got ${answered.join()}, not 201,201`);
    const quick = await pkgFilesFetched(fresh);
    const lazy = quick.filter((p) => p.startsWith("/pkg/lazy/"));
    // The page runs the development build (tests/browser/cases.html), whose parts are its own.
    if (lazy.join() !== "/pkg/lazy/sweep.development.js") throw new Error(`the quick start and an idle page after its first send fetched ${lazy.join(", ") || "no part"}, not /pkg/lazy/sweep.development.js`);
    if (!quick.includes("/pkg/idempotent_fetch_bg.wasm")) throw new Error(`no .wasm among the fetched files (${quick.join(", ")}): resource timing saw nothing?`);
    // A Request object as the request: its part is fetched then, once, and the send works.
    const status = await fresh.evaluate(async ([namespace, base]) => {
      const client = new window.__lib.IdempotentClient({ namespace });
      const response = await client.fetch(new Request(`${base}/s/${namespace}-request?script=201`, { method: "POST", body: "{}" }));
      return response.status;
    }, [namespace, server.url]);
    if (status !== 201) throw new Error(`a Request object got ${status}`);
    const after = (await pkgFilesFetched(fresh)).filter((p) => p.startsWith("/pkg/lazy/") && !lazy.includes(p));
    if (after.join() !== "/pkg/lazy/body-objects.development.js") throw new Error(`a Request object fetched ${after.join(", ") || "no part"}, not /pkg/lazy/body-objects.development.js`);
    // Resuming a stored intent by id: its part is fetched then, and reads what the quick start stored (no request: not persisted).
    const code = await fresh.evaluate((namespace) => new window.__lib.IdempotentClient({ namespace }).resume("checkout").then(() => "resumed", (e) => e.code), namespace);
    if (code !== "INVALID_REQUEST") throw new Error(`resume("checkout") gave ${code}, not INVALID_REQUEST`);
    const parts = (await pkgFilesFetched(fresh)).filter((p) => p.startsWith("/pkg/lazy/") && !lazy.includes(p));
    if (parts.join() !== "/pkg/lazy/body-objects.development.js,/pkg/lazy/resume.development.js") throw new Error(`resuming an intent fetched ${parts.join(", ")}`);
  } finally {
    await context.close();
  }
});

test("a client made offline before its parts ever loaded: the IndexedDB storage it asks for cannot load, so it keeps intents in memory and says so (the documented limit of loading on use)", { skip: capabilities.network ? false : "Chromium only: Firefox's offline mode still serves 127.0.0.1 (the part loads), and WebKit's driver has no offline switch" }, async () => {
  const context = await browser.newContext();
  try {
    const fresh = await context.newPage();
    await openLibPage(fresh, `${statics.url}${PAGE}`);
    await context.setOffline(true);
    const seen = await fresh.evaluate(async (namespace) => {
      const client = new window.__lib.IdempotentClient({ namespace, storage: "indexeddb" });
      const events = [];
      client.addEventListener("storagefallback", (event) => events.push(event.reason));
      const op = await client.begin("checkout", { url: "/nowhere", body: "{}" });
      return { key: op.key, storage: client.storage, reason: client.storageFallback, events };
    }, `offline${Date.now().toString(36)}`);
    if (seen.storage !== "memory" || !/part did not load/.test(seen.reason ?? "") || seen.events.join() !== seen.reason) {
      throw new Error(`expected a loud fallback to memory, got ${JSON.stringify(seen)}`);
    }
    if (!/^[0-9a-f-]{36}$/.test(seen.key)) throw new Error(`begin gave no key: ${JSON.stringify(seen)}`);
  } finally {
    await context.close();
  }
});

test("no uncaught errors in the page", () => {
  if (pageErrors.length) throw new Error(`uncaught errors in the page:\n${pageErrors.join("\n")}`);
});
