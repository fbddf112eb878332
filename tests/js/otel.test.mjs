// idempotent-fetch-client/otel (pkg/otel.cjs) in Node, with the OpenTelemetry SDK's tracer and its
// InMemorySpanExporter, against the scripted test server on 127.0.0.1: the spans of an intent, the
// traceparent each attempt carries, the trace context kept in the record and continued by a later
// client (as after a reload), a tampered one dropped, and nothing sent or stored without the observer.
// The same in real browsers, with a real reload: tests/js/otel-browser.test.mjs.
// Needs the package (cargo xtask build) and tools/node_modules (@opentelemetry/*). Run: node --test tests/js/otel.test.mjs
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { createRequire } from "node:module";
import path from "node:path";

import { pkgDir, requirePackage, root } from "../support/paths.mjs";
import { startTestServer } from "../support/test-server.mjs";

const tools = createRequire(path.join(process.env.IF_TOOLS_DIR ?? path.join(root, "tools"), "package.json"));
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = tools("@opentelemetry/sdk-trace-base");
const { SpanKind, SpanStatusCode } = tools("@opentelemetry/api");
// The entry as `require` gets it; it finds @opentelemetry/api through NODE_PATH (the tools' modules),
// as an app's node_modules would hold it.
const { otelObserver, INTENT_SPAN_NAME, EVENT, keyHash } = createRequire(import.meta.url)(path.join(pkgDir, "otel.cjs"));
const { IdempotentClient } = requirePackage();

let server;
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer("otel.test");

before(async () => {
  server = await startTestServer();
});
after(async () => {
  await server?.close();
  await provider.shutdown();
});

/** An AsyncStorage over one Map: two clients over it are two page loads of one origin. */
function sharedStorage() {
  const map = new Map();
  const slot = (ns, id) => `${ns}:${id}`;
  return {
    map,
    get: async (ns, id) => map.get(slot(ns, id)),
    put: async (ns, id, text) => void map.set(slot(ns, id), text),
    delete: async (ns, id) => void map.delete(slot(ns, id)),
    all: async (ns) => [...map].filter(([k]) => k.startsWith(`${ns}:`)).map(([k, v]) => [k.slice(ns.length + 1), v]),
  };
}

let scenarios = 0;
function scenario(script) {
  const name = `otel${Date.now().toString(36)}${(scenarios += 1)}`;
  return { name, url: `${server.url}/s/${name}?script=${encodeURIComponent(script)}` };
}

const FAST = { baseDelayMs: 1, maxDelayMs: 5, jitter: "none" };
const spansOf = (traceId) => exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
const intentSpans = (spans) => spans.filter((s) => s.name === INTENT_SPAN_NAME);
const attemptSpans = (spans) => spans.filter((s) => s.kind === SpanKind.CLIENT);
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/;

test("503, 503, 201: one intent span and three attempt spans, its children, with the HTTP conventions' attributes; each attempt's traceparent is its span's", async () => {
  const { name, url } = scenario("503,503,201");
  const client = new IdempotentClient({ namespace: "otel-a", storage: "memory", retry: FAST, observer: otelObserver(tracer) });
  const op = await client.begin("pay", { url, body: '{"cart":1}' });
  const result = await op.send();
  assert.equal(result.status, 201);
  const log = await server.log(name);
  assert.equal(log.length, 3);
  const [traceId] = TRACEPARENT.exec(log[0].headers.traceparent)?.slice(1) ?? [];
  assert.ok(traceId, `no traceparent on the first attempt: ${JSON.stringify(log[0].headers)}`);
  const spans = spansOf(traceId);
  const [intent, ...rest] = intentSpans(spans);
  assert.equal(rest.length, 0, "one intent span");
  const attempts = attemptSpans(spans);
  assert.equal(attempts.length, 3);
  assert.equal(intent.startTime[0] * 1000 + Math.round(intent.startTime[1] / 1e6), op.createdAt, "the intent span starts at begin");
  assert.deepEqual(intent.attributes["http.response.status_code"], 201);
  assert.equal(intent.attributes["idempotent_fetch.replayed"], false);
  assert.equal(intent.attributes["idempotent_fetch.intent_id"], "pay");
  assert.equal(intent.status.code, SpanStatusCode.UNSET);
  const expectedHash = createHash("sha256").update(op.key).digest("hex").slice(0, 16);
  assert.equal(keyHash(op.key), expectedHash);
  for (const [i, span] of attempts.entries()) {
    assert.equal(span.parentSpanContext?.spanId, intent.spanContext().spanId, `attempt ${i + 1} is the intent span's child`);
    assert.equal(span.name, "POST");
    assert.equal(span.attributes["http.request.method"], "POST");
    assert.equal(span.attributes["url.full"], url);
    assert.equal(span.attributes["server.address"], "127.0.0.1");
    assert.equal(span.attributes["server.port"], Number(new URL(url).port));
    assert.equal(span.attributes["idempotent_fetch.key_hash"], expectedHash);
    assert.ok(!Object.values(span.attributes).includes(op.key), "the key itself is never an attribute");
    // Absent on the first attempt, 1..N-1 on the re-sends (the conventions).
    assert.equal(span.attributes["http.request.resend_count"], i === 0 ? undefined : i);
    assert.equal(span.attributes["http.response.status_code"], [503, 503, 201][i]);
    assert.equal(span.attributes["error.type"], i < 2 ? "503" : undefined);
    assert.equal(span.status.code, i < 2 ? SpanStatusCode.ERROR : SpanStatusCode.UNSET);
    // The header the server saw is this attempt span's context.
    assert.equal(log[i].headers.traceparent, `00-${traceId}-${span.spanContext().spanId}-01`);
    const retries = span.events.filter((e) => e.name === EVENT.retry);
    if (i < 2) {
      assert.equal(retries.length, 1, `attempt ${i + 1}'s retry is its event`);
      assert.equal(retries[0].attributes.status, 503);
      assert.match(String(retries[0].attributes.reason), /503/);
      assert.equal(typeof retries[0].attributes.delay_ms, "number");
    } else assert.equal(retries.length, 0);
  }
  assert.equal(attempts[2].attributes["idempotent_fetch.replayed"], false);
});

test("the trace is kept in the record: a later client (a reload) continues it, its attempts children of the first intent span, resend_count counting on", async () => {
  const { name, url } = scenario("503,503,201");
  const storage = sharedStorage();
  const first = new IdempotentClient({ namespace: "otel-b", storage, retry: { ...FAST, baseDelayMs: 60_000, maxDelayMs: 60_000 }, observer: otelObserver(tracer) });
  const op = await first.begin("pay", { url, body: '{"cart":2}' });
  const abort = new AbortController();
  const sending = op.send({ signal: abort.signal, onRetry: () => abort.abort() }).catch((error) => error);
  assert.equal((await sending).code, "ABORTED");
  const stored = JSON.parse(storage.map.get("otel-b:pay"));
  assert.match(stored.trace, TRACEPARENT, "the record keeps the intent's traceparent");
  const [, traceId, intentSpanId] = TRACEPARENT.exec(stored.trace);
  const intent = spansOf(traceId).find((s) => s.name === INTENT_SPAN_NAME);
  assert.equal(intent.spanContext().spanId, intentSpanId, "the stored context is the intent span's");
  assert.ok(intent.events.some((e) => e.name === EVENT.giveUp && e.attributes.code === "ABORTED"), "the give-up is the intent span's event");
  assert.equal(intent.attributes["error.type"], "ABORTED");

  const second = new IdempotentClient({ namespace: "otel-b", storage, retry: FAST, observer: otelObserver(tracer) });
  const again = await second.begin("pay", { url, body: '{"cart":2}' });
  assert.equal((await again.send()).status, 201);
  const spans = spansOf(traceId);
  assert.equal(intentSpans(spans).length, 1, "no second intent span");
  const attempts = attemptSpans(spans);
  assert.equal(attempts.length, 3);
  assert.deepEqual(attempts.map((s) => s.attributes["http.request.resend_count"]), [undefined, 1, 2]);
  assert.ok(attempts.every((s) => s.parentSpanContext?.spanId === intentSpanId));
  const log = await server.log(name);
  assert.deepEqual(log.map((e) => TRACEPARENT.exec(e.headers.traceparent)?.[1]), [traceId, traceId, traceId]);
  assert.equal(JSON.parse(storage.map.get("otel-b:pay")).trace, stored.trace, "the retired record keeps it");
});

test("a tampered trace in the record is dropped: never sent, a new trace begins and replaces it; a record without one (as stored before) is read", async () => {
  const { name, url } = scenario("201");
  const storage = sharedStorage();
  // Begun by a client without the observer: its record is as the current version writes it.
  const plain = new IdempotentClient({ namespace: "otel-c", storage });
  await plain.begin("pay", { url, body: "{}" });
  const record = JSON.parse(storage.map.get("otel-c:pay"));
  assert.equal(record.trace, undefined, "no trace stored without the observer");
  for (const tampered of ["00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01\r\nx-evil: 1", 42, "00-00000000000000000000000000000000-0000000000000000-01"]) {
    storage.map.set("otel-c:pay", JSON.stringify({ ...record, trace: tampered }));
    const client = new IdempotentClient({ namespace: "otel-c", storage, observer: otelObserver(tracer) });
    // begin reads it back (validated) and keeps the intent: the key is the same.
    const op = await client.begin("pay", { url, body: "{}" });
    assert.equal(op.key, record.key);
    await op.send();
    const sent = (await server.log(name)).at(-1).headers;
    assert.match(sent.traceparent, TRACEPARENT, `a valid traceparent was sent, not ${JSON.stringify(tampered)}`);
    assert.equal(sent["x-evil"], undefined);
    const [, traceId] = TRACEPARENT.exec(sent.traceparent);
    assert.notEqual(traceId, "ffffffffffffffffffffffffffffffff");
    assert.equal(intentSpans(spansOf(traceId)).length, 1, "a new intent span");
    const kept = JSON.parse(storage.map.get("otel-c:pay")).trace;
    assert.equal(TRACEPARENT.exec(kept)?.[1], traceId, "the record now keeps the new trace");
  }
});

test("without the observer: no traceparent sent, no trace stored", async () => {
  const { name, url } = scenario("503,201");
  const storage = sharedStorage();
  const client = new IdempotentClient({ namespace: "otel-d", storage, retry: FAST });
  const before = exporter.getFinishedSpans().length;
  const op = await client.begin("pay", { url, body: "{}" });
  assert.equal((await op.send()).status, 201);
  const log = await server.log(name);
  assert.equal(log.length, 2);
  assert.ok(log.every((e) => e.headers.traceparent === undefined));
  assert.equal(JSON.parse(storage.map.get("otel-d:pay")).trace, undefined);
  assert.equal(exporter.getFinishedSpans().length, before);
});

test("a send that gives up (retries exhausted): the intent span ends an error, with the give-up's code", async () => {
  const { url } = scenario("503");
  const client = new IdempotentClient({ namespace: "otel-e", storage: "memory", retry: { ...FAST, maxAttempts: 2 }, observer: otelObserver(tracer) });
  const op = await client.begin("pay", { url, body: "{}" });
  const error = await op.send().catch((e) => e);
  assert.equal(error.code, "RETRIES_EXHAUSTED");
  const intent = exporter.getFinishedSpans().filter((s) => s.name === INTENT_SPAN_NAME && s.attributes["idempotent_fetch.intent_id"] === "pay").at(-1);
  const attempts = attemptSpans(spansOf(intent.spanContext().traceId));
  assert.equal(attempts.length, 2);
  assert.equal(intent.status.code, SpanStatusCode.ERROR);
  assert.equal(intent.attributes["error.type"], "RETRIES_EXHAUSTED");
  assert.ok(intent.events.some((e) => e.name === EVENT.giveUp && e.attributes.code === "RETRIES_EXHAUSTED"));
});

test("a replayed answer: replayed on the answering attempt and on the intent span; a network error is the attempt's error.type", async () => {
  // A port nothing listens on first (network error), then the server's replay.
  const { url } = scenario("201r");
  const client = new IdempotentClient({ namespace: "otel-f", storage: "memory", retry: FAST, observer: otelObserver(tracer) });
  const op = await client.begin("pay", { url, body: "{}" });
  const result = await op.send();
  assert.equal(result.replayed, true);
  const intent = exporter.getFinishedSpans().filter((s) => s.name === INTENT_SPAN_NAME && s.attributes["url.full"] === url).at(-1);
  assert.equal(intent.attributes["idempotent_fetch.replayed"], true);
  const [attempt] = attemptSpans(spansOf(intent.spanContext().traceId));
  assert.equal(attempt.attributes["idempotent_fetch.replayed"], true);

  const closed = new IdempotentClient({ namespace: "otel-g", storage: "memory", retry: { ...FAST, maxAttempts: 1 }, observer: otelObserver(tracer) });
  const lost = await closed.begin("pay", { url: "http://127.0.0.1:9/nowhere", body: "{}" });
  assert.equal((await lost.send().catch((e) => e)).code, "RETRIES_EXHAUSTED");
  const lostIntent = exporter.getFinishedSpans().filter((s) => s.name === INTENT_SPAN_NAME && s.attributes["url.full"] === "http://127.0.0.1:9/nowhere").at(-1);
  const [failed] = attemptSpans(spansOf(lostIntent.spanContext().traceId));
  assert.equal(failed.attributes["error.type"], "network");
  assert.equal(failed.attributes["http.response.status_code"], undefined);
});

test("a begin that rewrites a stored record (an intent found expired) keeps its trace", async () => {
  const { url } = scenario("503");
  const storage = sharedStorage();
  const first = new IdempotentClient({ namespace: "otel-h", storage, retry: { ...FAST, maxAttempts: 1 }, observer: otelObserver(tracer) });
  const op = await first.begin("pay", { url, body: "{}" });
  assert.equal((await op.send().catch((e) => e)).code, "RETRIES_EXHAUSTED");
  const record = JSON.parse(storage.map.get("otel-h:pay"));
  assert.match(record.trace, TRACEPARENT);
  // Two days old: past the default keyTtlMs, so the next begin marks it expired and writes it.
  const old = Date.now() - 2 * 86_400_000;
  storage.map.set("otel-h:pay", JSON.stringify({ ...record, createdAt: old, updatedAt: old }));
  const later = new IdempotentClient({ namespace: "otel-h", storage });
  const again = await later.begin("pay", { url, body: "{}" });
  assert.equal(again.state, "expired");
  const rewritten = JSON.parse(storage.map.get("otel-h:pay"));
  assert.equal(rewritten.state, "expired", "begin wrote the record");
  assert.equal(rewritten.trace, record.trace);
});
