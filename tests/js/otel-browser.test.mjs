// idempotent-fetch-client/otel in a real browser (IF_BROWSER; `cargo xtask test` runs this file once
// per engine) against the scripted test server (another origin: the traceparent header passes CORS):
// an intent begun while the server answers 503, the page reloaded mid-retry, then answered 201 is one
// trace with one intent span and an attempt span per attempt, and every attempt the server saw carried
// that trace; a second tab continues the trace the same way. The page's tracer is the OpenTelemetry
// SDK's, its finished spans kept in localStorage (tests/browser/otel-harness.mjs) so that the spans of
// a page load that went away are still read.
// Needs: the package (cargo xtask build), tools/node_modules (esbuild, @opentelemetry/*), the engine's browser.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";

import { collectPageErrors, engineName, launchBrowser, openLibPage, waitForLibPage } from "../support/browsers.mjs";
import { INTENT_SPAN_NAME, SPAN_KIND_CLIENT, TRACEPARENT, writeOtelPage } from "../support/otel.mjs";
import { pkgMissing } from "../support/paths.mjs";
import { startStaticServer } from "../support/static-server.mjs";
import { startTestServer } from "../support/test-server.mjs";
import { waitFor } from "../support/timing.mjs";

const PAGE = "/otel.html";

let browser;
let server;
let statics;
let page;
let dir;
const pageErrors = [];

/** The test page and its harness bundle (tests/support/otel.mjs), in a directory of their own; /pkg/
 *  is the built package (static-server.mjs). */
async function writePage() {
  dir = await writeOtelPage("otel.html", "idempotent-fetch-client/otel");
}

before(async () => {
  browser = await launchBrowser({ what: `the ${engineName} otel tests`, also: [pkgMissing()] });
  server = await startTestServer();
  await writePage();
  statics = await startStaticServer({ dir });
  page = await (await browser.newContext()).newPage();
  collectPageErrors(page, pageErrors);
  await openLibPage(page, `${statics.url}${PAGE}`);
});

after(async () => {
  await browser?.close();
  await statics?.close();
  await server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Begins the intent in `tab` with the observer and starts its send (not awaited: a 20 s backoff). */
const beginAndSend = (tab, namespace, url) =>
  tab.evaluate(async ([namespace, url]) => {
    const client = new window.__lib.IdempotentClient({
      namespace, storage: "local", retry: { baseDelayMs: 20000, maxDelayMs: 20000, jitter: "none" }, observer: window.__otel.observer,
    });
    const op = await client.begin("checkout", { url, body: '{"cart":42}' });
    window.__inflight = op.send().catch((e) => e);
    return op.key;
  }, [namespace, url]);

/** Begins the same intent again in `tab` (resumed) and sends it to its answer. */
const resumeAndSend = (tab, namespace, url) =>
  tab.evaluate(async ([namespace, url]) => {
    const client = new window.__lib.IdempotentClient({ namespace, storage: "local", retry: { baseDelayMs: 1, maxDelayMs: 5 }, observer: window.__otel.observer });
    const op = await client.begin("checkout", { url, body: '{"cart":42}' });
    const result = await op.send();
    return { key: op.key, resumed: op.resumed, status: result.status };
  }, [namespace, url]);

const storedRecord = (tab, namespace) =>
  tab.evaluate((slot) => JSON.parse(localStorage.getItem(slot) ?? "null"), `idempotent-fetch:v1:${namespace}:checkout`);

/** The trace the server saw: one trace id on every attempt; returns it. */
async function traceSeenByServer(scenario, attempts) {
  const log = await server.log(scenario);
  assert.equal(log.length, attempts, "attempts the server saw");
  const ids = log.map((entry) => TRACEPARENT.exec(entry.headers.traceparent ?? "")?.[1]);
  assert.ok(ids[0], `no traceparent on the first attempt: ${JSON.stringify(log[0].headers)}`);
  assert.deepEqual(ids, log.map(() => ids[0]), "every attempt carries the intent's trace id");
  return { traceId: ids[0], log };
}

/** One intent span and `attempts` attempt spans in the trace, each attempt the intent span's child,
 *  `http.request.resend_count` 1..N-1 on the re-sends and absent on the first; each attempt's
 *  traceparent (as the server saw it) is its span's. Returns the intent span. */
function assertOneIntent(spans, traceId, log, attempts) {
  const inTrace = spans.filter((s) => s.traceId === traceId);
  const intents = inTrace.filter((s) => s.name === INTENT_SPAN_NAME);
  assert.equal(intents.length, 1, `one intent span: ${JSON.stringify(inTrace.map((s) => s.name))}`);
  const [intent] = intents;
  const sent = inTrace.filter((s) => s.kind === SPAN_KIND_CLIENT);
  assert.equal(sent.length, attempts, "an attempt span per attempt");
  const byResend = (s) => s.attributes["http.request.resend_count"] ?? 0;
  sent.sort((a, b) => byResend(a) - byResend(b));
  assert.deepEqual(sent.map((s) => s.attributes["http.request.resend_count"]), [undefined, ...Array.from({ length: attempts - 1 }, (_, i) => i + 1)]);
  for (const span of sent) assert.equal(span.parentSpanId, intent.spanId, "an attempt is the intent span's child");
  assert.deepEqual(log.map((entry) => TRACEPARENT.exec(entry.headers.traceparent)[2]), sent.map((s) => s.spanId), "each attempt's traceparent is its span's");
  assert.deepEqual(sent.map((s) => s.attributes["http.response.status_code"]), [...Array(attempts - 1).fill(503), 201]);
  return intent;
}

test("503, a reload mid-retry, 503, 201: one trace, one intent span, an attempt span per attempt (resend_count 1..N-1 on the re-sends), the trace on every attempt", async () => {
  const namespace = `otelreload${Date.now().toString(36)}`;
  const scenario = `${namespace}-pay`;
  const url = `${server.url}/s/${scenario}?script=${encodeURIComponent("503,503,201")}`;
  await page.evaluate(() => localStorage.removeItem("otel-test-spans"));
  const key = await beginAndSend(page, namespace, url);
  await waitFor(async () => (await server.log(scenario)).length === 1, "the first attempt");
  await waitFor(async () => (await storedRecord(page, namespace))?.lastStatus === 503, "the 503 to be recorded");
  const stored = (await storedRecord(page, namespace)).trace;
  assert.match(stored, TRACEPARENT, "the record keeps the trace");
  await page.reload();
  await waitForLibPage(page);
  const after = await resumeAndSend(page, namespace, url);
  assert.deepEqual(after, { key, resumed: true, status: 201 });
  const { traceId, log } = await traceSeenByServer(scenario, 3);
  const spans = await page.evaluate(() => window.__otel.spans());
  const intent = assertOneIntent(spans, traceId, log, 3);
  // The first page load went away mid-retry: its intent span ended then, and said so.
  assert.equal(intent.attributes["idempotent_fetch.outcome"], "page_left");
  assert.equal(intent.attributes["idempotent_fetch.intent_id"], "checkout");
  assert.equal(TRACEPARENT.exec(stored)[2], intent.spanId, "the stored context is the intent span's");
});

test("a reload while an attempt is in flight: that attempt's span ends with the page, without an answer; the next page load's attempt is the re-send", async () => {
  const namespace = `otelflight${Date.now().toString(36)}`;
  const scenario = `${namespace}-pay`;
  const url = `${server.url}/s/${scenario}?script=${encodeURIComponent("delay5000,201")}`;
  await page.evaluate(() => localStorage.removeItem("otel-test-spans"));
  await beginAndSend(page, namespace, url);
  await waitFor(async () => (await server.log(scenario)).length === 1, "the first attempt to reach the server");
  await page.reload();
  await waitForLibPage(page);
  assert.equal((await resumeAndSend(page, namespace, url)).status, 201);
  const { traceId } = await traceSeenByServer(scenario, 2);
  const inTrace = (await page.evaluate(() => window.__otel.spans())).filter((s) => s.traceId === traceId);
  const [intent, ...more] = inTrace.filter((s) => s.name === INTENT_SPAN_NAME);
  assert.equal(more.length, 0, "one intent span");
  const sent = inTrace.filter((s) => s.kind === SPAN_KIND_CLIENT).sort((a, b) => (a.attributes["http.request.resend_count"] ?? 0) - (b.attributes["http.request.resend_count"] ?? 0));
  assert.deepEqual(
    sent.map((s) => [s.attributes["http.request.resend_count"], s.attributes["http.response.status_code"], s.parentSpanId]),
    [[undefined, undefined, intent.spanId], [1, 201, intent.spanId]],
  );
  // Chromium runs pagehide with the fetch still pending; Firefox and WebKit fail the fetch first
  // (a network error, as the client saw it): either way the attempt is told without an answer.
  const [left] = sent;
  assert.ok(left.attributes["idempotent_fetch.outcome"] === "page_left" || left.attributes["error.type"] === "network", JSON.stringify(left.attributes));
});

test("a second tab continues the trace of the intent the first tab began", async () => {
  const namespace = `oteltab${Date.now().toString(36)}`;
  const scenario = `${namespace}-pay`;
  const url = `${server.url}/s/${scenario}?script=${encodeURIComponent("503,201")}`;
  await page.evaluate(() => localStorage.removeItem("otel-test-spans"));
  const first = await page.context().newPage();
  collectPageErrors(first, pageErrors);
  await openLibPage(first, `${statics.url}${PAGE}`);
  const key = await beginAndSend(first, namespace, url);
  await waitFor(async () => (await storedRecord(page, namespace))?.lastStatus === 503, "the first tab's 503 to be recorded");
  // Left mid-retry (navigated away rather than closed: a window Firefox closes may drop the
  // localStorage write of the test's span sink made in pagehide): the send lock goes with the page,
  // and the intent is the other tab's to finish.
  await first.goto(`${statics.url}/otel-harness.js`);
  const second = await resumeAndSend(page, namespace, url);
  assert.deepEqual(second, { key, resumed: true, status: 201 });
  const { traceId, log } = await traceSeenByServer(scenario, 2);
  assertOneIntent(await page.evaluate(() => window.__otel.spans()), traceId, log, 2);
  await first.close();
});

test("no uncaught errors in the pages", () => {
  assert.deepEqual(pageErrors, []);
});
