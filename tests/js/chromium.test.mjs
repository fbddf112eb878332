// Runs every case of cases.mjs in headless Chromium (real localStorage/sessionStorage) against the
// built package pkg/web, plus real `page.reload()` cases. One node:test test per case.
//
// Needs: pkg/web (wasm-pack build --release --target web --out-dir pkg/web), playwright-core in
// tools/node_modules (cd tools && npm ci) and Chromium (CHROMIUM_PATH or /usr/bin/chromium; the
// xtask installs it). A missing prerequisite fails every test with a message saying what to do.
import { test, before, after } from "node:test";
import { createRequire } from "node:module";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import http from "node:http";
import path from "node:path";

import { startTestServer } from "../support/test-server.mjs";
import { cases } from "./cases.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const chromiumPath = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const CHROMIUM_ARGS = [
  "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
];
const CASE_TIMEOUT_MS = 20_000;

let server; // scripted test server (another origin than the page, as in production: CORS included)
let statics; // serves the repository root to the page
let browser;
let page;
const pageErrors = [];

function prerequisites() {
  const missing = [];
  if (!existsSync(path.join(root, "pkg/web/idempotent_fetch.js"))) {
    missing.push("pkg/web is not built: run `wasm-pack build --release --target web --out-dir pkg/web` (cargo xtask test does)");
  }
  if (!existsSync(path.join(root, "tools/node_modules/playwright-core"))) {
    missing.push("playwright-core is not installed: run `cd tools && npm ci`");
  }
  if (!existsSync(chromiumPath)) {
    missing.push(`Chromium not found at ${chromiumPath}: install it (\`cargo xtask install\`, or apt-get install -y chromium) or set CHROMIUM_PATH`);
  }
  return missing;
}

const MIME = {
  ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".mjs": "text/javascript; charset=utf-8",
  ".wasm": "application/wasm", ".json": "application/json", ".css": "text/css", ".ts": "text/plain; charset=utf-8",
};

function startStaticServer() {
  const httpServer = http.createServer(async (req, res) => {
    const pathname = decodeURIComponent(new URL(req.url, "http://127.0.0.1").pathname);
    const file = path.resolve(root, "." + pathname);
    if (!file.startsWith(root + path.sep)) {
      res.writeHead(403).end();
      return;
    }
    try {
      const body = await readFile(file);
      res.writeHead(200, { "content-type": MIME[path.extname(file)] ?? "application/octet-stream", "cache-control": "no-store" });
      res.end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  return new Promise((resolve) => {
    httpServer.listen(0, "127.0.0.1", () => {
      resolve({
        url: `http://127.0.0.1:${httpServer.address().port}`,
        close: () => new Promise((done) => { httpServer.closeAllConnections(); httpServer.close(() => done()); }),
      });
    });
  });
}

async function openPage() {
  await page.goto(`${statics.url}/tests/browser/cases.html`);
  await page.waitForFunction(() => window.__ready || window.__initError, null, { timeout: 15_000 });
  const initError = await page.evaluate(() => window.__initError);
  if (initError) throw new Error(`the page could not load pkg/web: ${initError}`);
}

before(async () => {
  const missing = prerequisites();
  if (missing.length) throw new Error(`cannot run the Chromium tests:\n  - ${missing.join("\n  - ")}`);
  const { chromium } = createRequire(path.join(root, "tools/package.json"))("playwright-core");
  server = await startTestServer();
  statics = await startStaticServer();
  browser = await chromium.launch({ executablePath: chromiumPath, args: CHROMIUM_ARGS });
  page = await (await browser.newContext()).newPage(); // a context can hold a second tab
  page.on("pageerror", (error) => pageErrors.push(String(error?.stack ?? error)));
  await openPage();
});

after(async () => {
  await browser?.close();
  await statics?.close();
  await server?.close();
});

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms); });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

for (const testCase of cases) {
  test(testCase.name, async () => {
    const outcome = await withTimeout(
      page.evaluate(([name, serverUrl]) => window.__runCase(name, serverUrl), [testCase.name, server.url]),
      CASE_TIMEOUT_MS,
      testCase.name,
    );
    if (!outcome.ok) {
      const error = new Error(`${outcome.message}${outcome.code ? ` [${outcome.code}]` : ""}\n--- in the page:\n${outcome.stack ?? ""}`);
      error.name = "BrowserCaseFailure";
      throw error;
    }
  });
}

// --- real reloads: the page goes away mid-send and a new page load resumes the intent ------------

async function serverLog(scenario) {
  return (await fetch(`${server.url}/log/${scenario}`)).json();
}

async function waitFor(predicate, what, timeoutMs = 10_000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (await predicate()) return;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

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
  await page.waitForFunction(() => window.__ready, null, { timeout: 15_000 });
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

test("two tabs sending the same intent: same key, one at a time", async () => {
  const namespace = `tabs${Date.now().toString(36)}`;
  const scenario = `${namespace}-pay`;
  const url = `${server.url}/s/${scenario}?script=${encodeURIComponent("delay400,201")}`;
  const second = await page.context().newPage();
  try {
    second.on("pageerror", (error) => pageErrors.push(String(error?.stack ?? error)));
    await second.goto(`${statics.url}/tests/browser/cases.html`);
    await second.waitForFunction(() => window.__ready, null, { timeout: 15_000 });
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

test("no uncaught errors in the page", () => {
  if (pageErrors.length) throw new Error(`uncaught errors in the page:\n${pageErrors.join("\n")}`);
});
