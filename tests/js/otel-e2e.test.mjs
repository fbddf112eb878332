// One checkout traced end to end in a real browser (IF_BROWSER; `cargo xtask test` runs this file once
// per engine) against the REAL reference server (its `otel` feature is a default one), its
// spans exported over OTLP/HTTP (JSON) to a collector this test runs on 127.0.0.1, and a real
// payment-provider: the page begins an order while the server answers 503 (its fault switch), the page
// is reloaded mid-retry, the resumed send meets one more 503, then the server recovers and answers 201.
// One trace holds the page's intent span, its three attempt spans (`http.request.resend_count` 1..2 on
// the re-sends, absent on the first), the server's request span of each attempt (a child of that
// attempt's span) and the server's provider call, with the hash of the key it derived.
//
// The server serves the page (otel.html and the harness bundle, tests/support/otel.mjs) at / and the
// package at /pkg/, so the page and POST /api/orders share one origin. The page's spans are kept in
// localStorage (tests/browser/otel-harness.mjs); the server's are read from the collector after the
// server stopped (its exporter sends the last batch on the way out).
// Needs: the server binary (IF_SERVER_BIN or target/server; payment-provider beside it), the package
// (cargo xtask build), tools/node_modules, the browser.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { rmSync } from "node:fs";
import http from "node:http";

import { collectPageErrors, engineName, launchBrowser, openLibPage, timeoutScale, waitForLibPage } from "../support/browsers.mjs";
import { INTENT_SPAN_NAME, SPAN_KIND_CLIENT, TRACEPARENT, writeOtelPage } from "../support/otel.mjs";
import { pkgDir, pkgMissing } from "../support/paths.mjs";
import { startReferenceServer, startService } from "../support/reference-server.mjs";
import { waitFor as poll } from "../support/timing.mjs";

/** OTLP's span kinds, as the collector receives them (the JS API numbers them differently). */
const OTLP_SERVER = 2;
const OTLP_CLIENT = 3;
/** The server's request span of an order (server/src/telemetry.rs) and its provider call (checkout.rs). */
const ORDER_SPAN = "POST /api/orders";
const PROVIDER_CALL = "POST";
const NAMESPACE = "shop";
const INTENT = "checkout";
const ORDER = JSON.stringify({ items: [{ sku: "mug", qty: 2 }] });

let browser;
let collector;
let provider;
let server;
let page;
let dir;
const pageErrors = [];

/** An OTLP/HTTP collector on 127.0.0.1: keeps every JSON body posted to /v1/traces. */
async function startCollector() {
  const exports = [];
  const listener = http.createServer((request, response) => {
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => {
      if (request.method === "POST" && request.url === "/v1/traces") {
        exports.push(JSON.parse(Buffer.concat(chunks).toString("utf8")));
        response.writeHead(200, { "content-type": "application/json" }).end("{}");
      } else {
        response.writeHead(404).end();
      }
    });
  });
  await new Promise((resolve) => listener.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${listener.address().port}`,
    /** Every span received, flattened out of its resource and scope. */
    spans: () => exports.flatMap((e) => e.resourceSpans ?? []).flatMap((r) => r.scopeSpans ?? []).flatMap((s) => s.spans ?? []),
    close: () => new Promise((resolve) => listener.close(resolve)),
  };
}

/** The value of an OTLP span's attribute `key` as text (string and integer values). */
function attribute(span, key) {
  const value = span.attributes?.find((a) => a.key === key)?.value;
  if (!value) return undefined;
  return value.stringValue ?? (value.intValue === undefined ? undefined : String(value.intValue));
}

/** What a trace shows of a key: the first 16 hex digits of its SHA-256 (idempotent_endpoint::key_hash). */
const keyHash = (key) => createHash("sha256").update(key).digest("hex").slice(0, 16);

async function writePage() {
  dir = await writeOtelPage("index.html", "idempotent-fetch-client/otel end to end");
}

before(async () => {
  browser = await launchBrowser({ what: `the ${engineName} end-to-end trace test`, also: [pkgMissing()] });
  collector = await startCollector();
  provider = await startService("payment-provider", { label: "otel-e2e-provider" });
  await writePage();
  server = await startReferenceServer({
    www: dir, pkg: pkgDir, label: "otel-e2e", args: ["--provider-url", provider.url, "--otlp-endpoint", collector.url],
  });
  page = await (await browser.newContext()).newPage();
  collectPageErrors(page, pageErrors);
  await openLibPage(page, `${server.url}/`);
});

after(async () => {
  await browser?.close();
  await server?.stop();
  await provider?.stop();
  await collector?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const waitFor = (predicate, what) => poll(predicate, what, 15_000 * timeoutScale, 50);

/** In the page: begins the order with the tracing observer and starts its send (not awaited). */
const beginAndSend = (token, delayMs) =>
  page.evaluate(async ([namespace, intent, body, token, delayMs]) => {
    const client = new window.__lib.IdempotentClient({
      namespace, storage: "local", retry: { baseDelayMs: delayMs, maxDelayMs: delayMs, jitter: "none" }, observer: window.__otel.observer,
    });
    const request = { url: "/api/orders", method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body };
    const op = await client.begin(intent, request);
    window.__inflight = op.send().then((r) => ({ status: r.status, resumed: op.resumed, key: op.key }), (e) => ({ error: String(e) }));
    return op.key;
  }, [NAMESPACE, INTENT, ORDER, token, delayMs]);

/** The attempt spans the page finished so far (in the page's span sink). */
const pageAttempts = async () => (await page.evaluate(() => window.__otel.spans())).filter((s) => s.kind === SPAN_KIND_CLIENT);

test("503, a reload mid-retry, 503, 201: the exporter holds one trace with the intent span, 3 attempt spans, the server's span of each attempt and the provider call with the derived key's hash", async () => {
  const token = await server.session(`otel_e2e_${process.pid}_${Date.now().toString(36)}`);
  await page.evaluate(() => localStorage.removeItem("otel-test-spans"));
  await server.setFaults({ failBeforeWork: 1, retryAfterSecs: 0 });

  // The first page load: one 503, then a 20 s backoff the reload cuts short.
  const key = await beginAndSend(token, 20_000);
  await waitFor(async () => (await pageAttempts()).length === 1, "the first attempt's 503");
  await page.reload();
  await waitForLibPage(page);

  // The next page load resumes the intent: one more 503, then (the server recovered) a 201.
  assert.equal(await beginAndSend(token, 3_000), key, "the reload resumes the same intent");
  await waitFor(async () => (await pageAttempts()).length === 2, "the resumed send's 503");
  await server.setFaults({});
  const answer = await page.evaluate(() => window.__inflight);
  assert.deepEqual(answer, { status: 201, resumed: true, key });

  // The page's side: one intent span, three attempt spans, resend_count absent then 1, 2.
  const pageSpans = await page.evaluate(() => window.__otel.spans());
  const intents = pageSpans.filter((s) => s.name === INTENT_SPAN_NAME);
  assert.equal(intents.length, 1, `one intent span: ${JSON.stringify(pageSpans.map((s) => s.name))}`);
  const [intent] = intents;
  const traceId = intent.traceId;
  const attempts = pageSpans.filter((s) => s.kind === SPAN_KIND_CLIENT)
    .sort((a, b) => (a.attributes["http.request.resend_count"] ?? 0) - (b.attributes["http.request.resend_count"] ?? 0));
  assert.deepEqual(
    attempts.map((s) => [s.traceId, s.parentSpanId, s.attributes["http.request.resend_count"], s.attributes["http.response.status_code"]]),
    [[traceId, intent.spanId, undefined, 503], [traceId, intent.spanId, 1, 503], [traceId, intent.spanId, 2, 201]],
  );

  // The server's side, read once it stopped (its exporter flushes on the way out).
  const [charge, ...moreCharges] = (await provider.get("/charges")).charges;
  assert.equal(moreCharges.length, 0, "one charge");
  assert.equal(await server.stop(), 0, "the server stopped cleanly");
  server = null;
  const exported = collector.spans();
  const inTrace = exported.filter((s) => s.traceId === traceId);
  const requests = inTrace.filter((s) => s.name === ORDER_SPAN && s.kind === OTLP_SERVER);
  assert.equal(requests.length, 3, `a server span per attempt in the intent's trace: ${JSON.stringify(exported.map((s) => [s.name, s.traceId]))}`);
  const byParent = new Map(requests.map((s) => [s.parentSpanId, s]));
  assert.deepEqual(
    attempts.map((a) => attribute(byParent.get(a.spanId) ?? {}, "http.response.status_code")),
    ["503", "503", "201"],
    "each attempt's server span is that attempt's child, with the status the page saw",
  );
  const answered = byParent.get(attempts[2].spanId);
  assert.deepEqual([attribute(answered, "idempotency.key_hash"), attribute(answered, "idempotency.decision")], [keyHash(key), "fresh"]);
  const calls = inTrace.filter((s) => s.name === PROVIDER_CALL && s.kind === OTLP_CLIENT);
  assert.equal(calls.length, 1, "one provider call in the trace");
  assert.equal(attribute(calls[0], "idempotency.derived_key_hash"), keyHash(charge.idempotencyKey));
  const byId = new Map(inTrace.map((s) => [s.spanId, s]));
  const ancestors = [];
  for (let s = byId.get(calls[0].parentSpanId); s; s = byId.get(s.parentSpanId)) ancestors.push(s.spanId);
  assert.ok(ancestors.includes(answered.spanId), "the provider call is under the answered attempt's server span");
  assert.notEqual(charge.idempotencyKey, key, "the provider got a derived key, not the client's");
  assert.ok(!JSON.stringify(exported).includes(key), "no span carries the key itself");
});

test("no uncaught errors in the page", () => {
  assert.deepEqual(pageErrors, []);
});
