// idempotent-fetch-client/otel with background completion, in a real browser (IF_BROWSER; once per
// engine) with a real service worker against the REAL reference server: the page begins an intent
// with `background: true` and its tracer while the server answers 503, the page is left mid-retry, and
// the service worker (with an `otelObserver` of its own) finishes it on the next page load: its attempt
// spans are in the page's trace, children of the page's intent span, re-sends counted on. The app is
// tests/background's (the same page, token store and worker options, served from a directory of its
// own with the tracer added: tests/support/otel.mjs); the flow is tests/js/background.test.mjs's
// "next page load" case.
// Needs: the reference server (IF_SERVER_BIN or target/server), the package, tools/node_modules, the engine's browser.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { collectPageErrors, engineName, launchBrowser, openLibPage, timeoutScale } from "../support/browsers.mjs";
import { bundleOtelHarness, INTENT_SPAN_NAME, SPAN_KIND_CLIENT, TRACEPARENT } from "../support/otel.mjs";
import { pkgDir, pkgMissing, root } from "../support/paths.mjs";
import { startReferenceServer } from "../support/reference-server.mjs";
import { waitFor as poll } from "../support/timing.mjs";

const APP = path.join(root, "tests/background");
const TEST_TIMEOUT_MS = 40_000 * timeoutScale;
const NAMESPACE = "shop";
const INTENT = "checkout:cart-1";

let server;
let browser;
let dir;
const pageErrors = [];

/** tests/background with the tracer: the page imports the harness, the worker's client takes its observer. */
async function writeApp() {
  dir = mkdtempSync(path.join(os.tmpdir(), "if-otel-background-"));
  await bundleOtelHarness(path.join(dir, "otel-harness.js"));
  copyFileSync(path.join(APP, "token.js"), path.join(dir, "token.js"));
  const page = readFileSync(path.join(APP, "index.html"), "utf8");
  const importLine = `  import * as lib from "/pkg/index.development.js";\n`;
  assert.ok(page.includes(importLine), "tests/background/index.html imports the package as expected");
  writeFileSync(path.join(dir, "index.html"), page.replace(importLine, `${importLine}  import "/otel-harness.js";\n`));
  const worker = readFileSync(path.join(APP, "sw.js"), "utf8");
  const options = `  namespace: "shop",\n`;
  assert.ok(worker.includes(options), "tests/background/sw.js makes its client as expected");
  writeFileSync(
    path.join(dir, "sw.js"),
    `import "/otel-harness.js";\n${worker.replace(options, `${options}  observer: globalThis.__otel.observer,\n`)}`,
  );
}

before(async () => {
  browser = await launchBrowser({ what: `the ${engineName} otel background tests`, also: [pkgMissing(pkgDir)] });
  await writeApp();
  server = await startReferenceServer({ www: dir, pkg: pkgDir, label: "otel-background" });
});

after(async () => {
  await browser?.close();
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const waitFor = (predicate, what) => poll(predicate, what, 15_000 * timeoutScale, 50);

async function openTab(context) {
  const page = await context.newPage();
  collectPageErrors(page, pageErrors);
  await openLibPage(page, `${server.url}/`, { timeout: 30_000 * timeoutScale });
  return page;
}

/** The pending intent's record as the library stored it (its IndexedDB database). */
function storedRecord(page) {
  return page.evaluate(async (slot) => {
    const db = await new Promise((resolve, reject) => {
      const open = indexedDB.open("idempotent-fetch");
      open.onsuccess = () => resolve(open.result);
      open.onerror = () => reject(open.error);
    });
    const request = db.transaction("intents").objectStore("intents").get(slot);
    const text = await new Promise((resolve) => (request.onsuccess = () => resolve(request.result)));
    db.close();
    return text === undefined ? null : JSON.parse(text);
  }, `${NAMESPACE}:${INTENT}`);
}

test("the page begins a traced intent while the server answers 503 and is left mid-retry; the service worker finishes it in the same trace, its attempts children of the page's intent span", { timeout: TEST_TIMEOUT_MS }, async () => {
  const account = `otelbg_${process.pid}_${Date.now().toString(36)}`;
  const token = await server.session(account);
  const context = await browser.newContext();
  try {
    await server.setFaults({ failBeforeWork: 1 });
    const payer = await openTab(context);
    const key = await payer.evaluate(async ([namespace, intent, token]) => {
      await window.__saveToken(token);
      const client = new window.__lib.IdempotentClient({
        namespace, storage: "indexeddb", retry: { baseDelayMs: 400, maxDelayMs: 400, jitter: "none" }, observer: window.__otel.observer,
      });
      window.__retries = 0;
      client.addEventListener("retry", () => (window.__retries += 1));
      const request = { url: "/api/orders", method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body: '{"items":[{"sku":"mug","qty":1}]}' };
      const op = await client.begin(intent, request, { background: true });
      window.__send = op.send().catch((error) => error);
      return op.key;
    }, [NAMESPACE, INTENT, token]);
    await waitFor(async () => (await payer.evaluate(() => window.__retries)) >= 1, "a 503 retried by the page");
    const stored = (await storedRecord(payer))?.trace;
    assert.match(stored ?? "", TRACEPARENT, "the record keeps the trace");
    const [, traceId, intentSpanId] = TRACEPARENT.exec(stored);
    // The page goes mid-retry (its pagehide ends its spans). Navigated away rather than closed: a
    // window Firefox closes may drop the localStorage write of the test's span sink made in pagehide.
    // The navigation wakes the worker, which gets 503s too and leaves the intent pending.
    await payer.goto(`${server.url}/token.js`);
    await server.setFaults({});
    const reopened = await openTab(context); // its navigation wakes the worker
    const intentOf = () =>
      reopened.evaluate(([namespace, intent]) => new window.__lib.IdempotentClient({ namespace, storage: "indexeddb" }).intent(intent), [NAMESPACE, INTENT]);
    await waitFor(async () => (await intentOf())?.state === "succeeded", "the worker to finish the intent");
    assert.equal((await intentOf()).key, key);
    const pageSpans = (await reopened.evaluate(() => window.__otel.spans())).filter((s) => s.traceId === traceId);
    await waitFor(async () => (await reopened.evaluate(() => window.__otel.workerSpans())).some((s) => s.attributes["http.response.status_code"] === 201), "the worker's answered attempt span");
    const workerSpans = await reopened.evaluate(() => window.__otel.workerSpans());
    const intents = pageSpans.filter((s) => s.name === INTENT_SPAN_NAME);
    assert.equal(intents.length, 1, "the page's intent span");
    assert.equal(intents[0].spanId, intentSpanId);
    assert.equal(intents[0].attributes["idempotent_fetch.outcome"], "page_left");
    assert.equal(workerSpans.filter((s) => s.name === INTENT_SPAN_NAME).length, 0, "the worker starts no intent span of its own");
    const pageAttempts = pageSpans.filter((s) => s.kind === SPAN_KIND_CLIENT);
    const workerAttempts = workerSpans.filter((s) => s.kind === SPAN_KIND_CLIENT);
    assert.ok(pageAttempts.length >= 1 && workerAttempts.length >= 1, JSON.stringify({ pageAttempts, workerAttempts }));
    for (const span of [...pageAttempts, ...workerAttempts]) {
      assert.equal(span.traceId, traceId, "every attempt in the page's trace");
      assert.equal(span.parentSpanId, intentSpanId, "every attempt the intent span's child");
    }
    const resends = [...pageAttempts, ...workerAttempts].map((s) => s.attributes["http.request.resend_count"] ?? 0).sort((a, b) => a - b);
    assert.deepEqual(resends, resends.map((_, i) => i), "resend_count 0 (absent), 1, 2, ... across the page and the worker");
    assert.equal(workerAttempts.at(-1).attributes["http.response.status_code"], 201);
  } finally {
    await context.close().catch(() => {});
    await server.setFaults({});
  }
});

test("no uncaught errors in the pages", () => {
  assert.deepEqual(pageErrors, []);
});
