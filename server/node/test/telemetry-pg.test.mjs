// Spans and metrics through the app's @opentelemetry/api on a real PostgreSQL (a throwaway cluster this test
// starts) over real HTTP: the SDK's in-memory exporter and a metric reader registered as an app would, a
// scripted run of keyed requests under one incoming traceparent, atomic phases, outbox deliveries and inbox
// re-deliveries, a message carrying its request's trace through the outbox to the receiver's inbox over real
// HTTP; then the package without @opentelemetry/api installed.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";

import { context, metrics, propagation, trace, SpanKind } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import pg from "pg";
import {
  atomicPhases,
  deliveryTraceparent,
  enqueue,
  MESSAGE_ID_HEADER,
  FINISHED,
  handleKeyed,
  idempotentEndpoint,
  installInbox,
  installOutbox,
  newMessage,
  outboxWorker,
  pgStore,
  phasedHandler,
  phasesCompleter,
  receiveMessage,
  sendAnswer,
} from "idempotent-endpoint";
import { idempotentRoute } from "idempotent-endpoint/next";

import { startCluster } from "../../../tests/fault/pg-cluster.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID = "00f067aa0ba902b7";
const TRACEPARENT = `00-${TRACE_ID}-${PARENT_ID}-01`;
/** The key table as versions before its `traceparent` column made it: install adds the column. */
const OLD_KEY_TABLE = `CREATE TABLE idempotency_records (
  scope TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL, status_code INTEGER NULL,
  response_headers TEXT NULL, response_body TEXT NULL, created_at BIGINT NOT NULL,
  recovery_point TEXT NOT NULL DEFAULT 'finished', row_id TEXT NULL, lock_token TEXT NULL,
  locked_until BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (scope, key))`;
/** The hash a span shows of a key, computed here independently of the package (SHA-256, 16 hex digits). */
const hashOf = (key) => createHash("sha256").update(key).digest("hex").slice(0, 16);

/** A reader the test collects from when it wants. */
class Reader extends MetricReader {
  async onForceFlush() {}
  async onShutdown() {}
}

const exporter = new InMemorySpanExporter();
const reader = new Reader();
let cluster;
let pool;
let server;
let base;
let release = () => undefined;
/** Resolves once a waiting handler holds its key row. */
let holding;
let held = () => undefined;

/** The counter `name`'s points as `{ attributes-json: value }`. */
async function counter(name) {
  const { resourceMetrics } = await reader.collect();
  const found = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).find((m) => m.descriptor.name === name);
  return Object.fromEntries((found?.dataPoints ?? []).map((p) => [JSON.stringify(p.attributes), p.value]));
}

/** The gauge `name`'s value (its one point, without attributes), or undefined when nothing was observed. */
async function gauge(name) {
  const { resourceMetrics } = await reader.collect();
  const found = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).find((m) => m.descriptor.name === name);
  return found?.dataPoints.find((p) => Object.keys(p.attributes).length === 0)?.value;
}

/** Every attribute value of every finished span, to check no key is among them. */
const everyValue = () => exporter.getFinishedSpans().flatMap((s) => Object.values(s.attributes).map(String));

before(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
  cluster = await startCluster();
  cluster.createDatabase("node_telemetry");
  pool = new pg.Pool({ connectionString: cluster.url("node_telemetry"), max: 10 });
  const endpoint = idempotentEndpoint({ database: pool });
  await endpoint.install();
  await installOutbox(pool);
  await installInbox(pool);
  server = http.createServer(async (req, res) => {
    const result = await handleKeyed(endpoint, req, async ({ json }) => {
      if (json.wait === true) {
        held();
        await new Promise((resolve) => (release = resolve));
      }
      return { status: 201, body: { sku: json.sku } };
    });
    sendAnswer(res, result.answer);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${server.address().port}/api/orders`;
});

after(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await pool?.end();
  cluster?.stop();
});

const post = (key, body) =>
  fetch(base, { method: "POST", headers: { "idempotency-key": key, traceparent: TRACEPARENT, "content-type": "application/json" }, body: JSON.stringify(body) });

describe("tracing and metrics on PostgreSQL", () => {
  it("a scripted run: 4 replays, 2 422s, 1 409 counted by decision, each request a span of the incoming trace", async () => {
    const [a, b] = ["telemetry-key-a", "telemetry-key-b"];
    assert.equal((await post(a, { sku: "x" })).status, 201);
    for (let i = 0; i < 4; i += 1) assert.equal((await post(a, { sku: "x" })).headers.get("idempotent-replayed"), "true");
    for (let i = 0; i < 2; i += 1) assert.equal((await post(a, { sku: "other" })).status, 422);
    holding = new Promise((resolve) => (held = resolve));
    const waiting = post(b, { sku: "y", wait: true });
    // The first request with b holds its key row until released: the second is answered 409 meanwhile.
    await holding;
    assert.equal((await post(b, { sku: "y", wait: true })).status, 409);
    release();
    assert.equal((await waiting).status, 201);

    assert.deepEqual(await counter("idempotency_decisions"), {
      '{"decision":"fresh"}': 2,
      '{"decision":"replay"}': 4,
      '{"decision":"mismatch"}': 2,
      '{"decision":"in_flight"}': 1,
    });

    const spans = exporter.getFinishedSpans();
    const requests = spans.filter((s) => s.kind === SpanKind.SERVER);
    assert.equal(requests.length, 9);
    for (const span of requests) {
      assert.equal(span.name, "POST");
      assert.equal(span.spanContext().traceId, TRACE_ID);
      assert.equal(span.parentSpanContext?.spanId, PARENT_ID);
      assert.equal(span.attributes["http.request.method"], "POST");
      assert.equal(span.attributes["url.path"], "/api/orders");
    }
    const decisions = (key) => requests.filter((s) => s.attributes["idempotency.key_hash"] === hashOf(key)).map((s) => s.attributes["idempotency.decision"]);
    assert.deepEqual(decisions(a), ["fresh", "replay", "replay", "replay", "replay", "mismatch", "mismatch"]);
    assert.deepEqual(decisions(b).sort(), ["fresh", "in_flight"]);
    assert.deepEqual(requests.filter((s) => s.attributes["idempotency.decision"] === "mismatch").map((s) => s.attributes["http.response.status_code"]), [422, 422]);

    const transactions = spans.filter((s) => s.name === "idempotency.transaction");
    assert.equal(transactions.length, 9);
    const requestIds = new Set(requests.map((s) => s.spanContext().spanId));
    for (const span of transactions) {
      assert.equal(span.spanContext().traceId, TRACE_ID);
      assert.ok(requestIds.has(span.parentSpanContext?.spanId), "the transaction's span is a child of its request's");
      assert.equal(span.attributes["db.system.name"], "postgresql");
      assert.ok([hashOf(a), hashOf(b)].includes(span.attributes["idempotency.key_hash"]));
    }
    assert.ok(!everyValue().some((v) => v.includes(a) || v.includes(b)), "no attribute holds a key");
  });

  it("keys in flight and the oldest one's age while a handler holds its key, none once it answered", async () => {
    const key = "telemetry-in-flight";
    holding = new Promise((resolve) => (held = resolve));
    const waiting = post(key, { sku: "z", wait: true });
    await holding;
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(await gauge("idempotency_keys_in_flight"), 1);
    const age = await gauge("idempotency_oldest_in_flight_age_seconds");
    assert.ok(age >= 0.05 && age < 5, `oldest in-flight age ${age} s`);
    release();
    assert.equal((await waiting).status, 201);
    assert.equal(await gauge("idempotency_keys_in_flight"), 0);
    assert.equal(await gauge("idempotency_oldest_in_flight_age_seconds"), 0);
  });

  it("phasedHandler: its request's span continues the traceparent, with the key's hash and the decision; the phases its children", async () => {
    exporter.reset();
    const phases = atomicPhases({ database: pool });
    await phases.install();
    const before = await counter("idempotency_decisions");
    const phasedServer = http.createServer(
      phasedHandler(phases, async ({ held }) => {
        await phases.advance(held, "charged");
        return phases.finish(held, async () => ({ status: 201, body: {} }));
      }),
    );
    await new Promise((resolve) => phasedServer.listen(0, "127.0.0.1", resolve));
    const key = "telemetry-phased-http";
    try {
      const url = `http://127.0.0.1:${phasedServer.address().port}/api/pay`;
      const headers = { "idempotency-key": key, traceparent: TRACEPARENT, "content-type": "application/json" };
      assert.equal((await fetch(url, { method: "POST", headers, body: "{}" })).status, 201);
      assert.equal((await fetch(url, { method: "POST", headers, body: "{}" })).headers.get("idempotent-replayed"), "true");
      assert.equal((await fetch(url, { method: "POST", headers, body: '{"other":1}' })).status, 422);
    } finally {
      await new Promise((resolve) => phasedServer.close(resolve));
    }
    const spans = exporter.getFinishedSpans();
    const requests = spans.filter((s) => s.kind === SpanKind.SERVER);
    assert.deepEqual(
      requests.map((s) => [s.name, s.spanContext().traceId, s.parentSpanContext?.spanId, s.attributes["url.path"], s.attributes["idempotency.key_hash"], s.attributes["idempotency.decision"], s.attributes["http.response.status_code"]]),
      [
        ["POST", TRACE_ID, PARENT_ID, "/api/pay", hashOf(key), "fresh", 201],
        ["POST", TRACE_ID, PARENT_ID, "/api/pay", hashOf(key), "replay", 201],
        ["POST", TRACE_ID, PARENT_ID, "/api/pay", hashOf(key), "mismatch", 422],
      ],
    );
    const phased = spans.filter((s) => s.name === "idempotency.phase");
    assert.deepEqual(phased.slice(0, 3).map((s) => s.attributes["idempotency.phase"]), ["begin", "charged", FINISHED]);
    for (const span of phased.slice(0, 3)) assert.equal(span.parentSpanContext?.spanId, requests[0].spanContext().spanId);
    const after = await counter("idempotency_decisions");
    const delta = (d) => (after[`{"decision":"${d}"}`] ?? 0) - (before[`{"decision":"${d}"}`] ?? 0);
    assert.deepEqual([delta("fresh"), delta("replay"), delta("mismatch")], [1, 1, 1]);
    assert.ok(!everyValue().some((v) => v.includes(key)));
  });

  it("a web-standard route (Next.js, Hono): its request's span continues the traceparent too", async () => {
    exporter.reset();
    const endpoint = idempotentEndpoint({ database: pool });
    const POST = idempotentRoute(endpoint, async () => Response.json({}, { status: 201 }));
    const key = "telemetry-web";
    const headers = { "idempotency-key": key, traceparent: TRACEPARENT, "content-type": "application/json" };
    assert.equal((await POST(new Request("http://localhost/api/web", { method: "POST", headers, body: "{}" }))).status, 201);
    const [span] = exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.SERVER);
    assert.equal(span?.spanContext().traceId, TRACE_ID);
    assert.equal(span?.parentSpanContext?.spanId, PARENT_ID);
    assert.equal(span?.attributes["idempotency.key_hash"], hashOf(key));
    assert.equal(span?.attributes["idempotency.decision"], "fresh");
  });

  it("atomic phases: one span per phase, named by its point, under the caller's span", async () => {
    exporter.reset();
    const phases = atomicPhases({ database: pool });
    const key = "telemetry-phased";
    const tracer = trace.getTracer("test");
    const parent = await tracer.startActiveSpan("checkout", async (span) => {
      const begun = await phases.begin({ method: "POST", path: "/api/pay", keyHeader: [key], body: new Uint8Array() });
      assert.ok(begun.held);
      await phases.advance(begun.held, "charged");
      await phases.finish(begun.held, async () => ({ status: 201, body: {} }));
      span.end();
      return span.spanContext();
    });
    const phased = exporter.getFinishedSpans().filter((s) => s.name === "idempotency.phase");
    assert.deepEqual(phased.map((s) => s.attributes["idempotency.phase"]), ["begin", "charged", FINISHED]);
    for (const span of phased) assert.equal(span.parentSpanContext?.spanId, parent.spanId);
    assert.ok(!everyValue().some((v) => v.includes(key)));
  });

  it("outbox deliveries: one producer span per attempt, attempts counted by result; inbox re-deliveries refused counted", async () => {
    exporter.reset();
    const message = newMessage("invite-email", { to: "a@example.test" });
    await pgStore(pool).transaction(async (_q, tx) => {
      await enqueue(tx, message);
      return { commit: true, value: undefined };
    });
    let calls = 0;
    const worker = outboxWorker(
      pool,
      async () => {
        calls += 1;
        if (calls === 1) throw new Error("the receiver is down");
      },
      { baseDelayMs: 1, maxDelayMs: 1 },
    );
    await worker.deliverOnce();
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal((await worker.deliverOnce()).delivered, 1);
    const deliveries = exporter.getFinishedSpans().filter((s) => s.name === "outbox.deliver");
    assert.deepEqual(
      deliveries.map((s) => [s.kind, s.attributes["messaging.message.id"], s.attributes["messaging.destination.name"], s.attributes["messaging.operation.type"], s.attributes["outbox.attempt"]]),
      [
        [SpanKind.PRODUCER, message.id, "invite-email", "send", 1],
        [SpanKind.PRODUCER, message.id, "invite-email", "send", 2],
      ],
    );
    assert.deepEqual(await counter("outbox_delivery_attempts"), { '{"result":"failed"}': 1, '{"result":"delivered"}': 1 });

    for (let i = 0; i < 3; i += 1) await receiveMessage(pool, "invites", message.id, async () => ({ status: 200 }));
    assert.deepEqual(await counter("inbox_redeliveries_refused"), { "{}": 2 });
  });

  it("an outbox message carries its request's trace: the delivery and the receiver's receipt are in it", async () => {
    exporter.reset();
    const endpoint = idempotentEndpoint({ database: pool });
    const listen = async (handler) => {
      const server = http.createServer(handler);
      await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
      return server;
    };
    // The sender: a keyed request enqueues a confirmation in its transaction.
    const sender = await listen(async (req, res) => {
      const result = await handleKeyed(endpoint, req, async ({ tx }) => {
        await enqueue(tx, newMessage("confirmation", { order: 1 }));
        return { status: 201, body: {} };
      });
      sendAnswer(res, result.answer);
    });
    // The receiver: its inbox continues the delivery's traceparent.
    const receiver = await listen(async (req, res) => {
      for await (const _ of req);
      const id = String(req.headers[MESSAGE_ID_HEADER] ?? "");
      const { answer } = await receiveMessage(pool, "confirmations", id, async () => ({ status: 201 }), { traceparent: req.headers.traceparent });
      sendAnswer(res, answer);
    });
    try {
      const headers = { "idempotency-key": "telemetry-outbox-trace", traceparent: TRACEPARENT, "content-type": "application/json" };
      const created = await fetch(`http://127.0.0.1:${sender.address().port}/api/orders`, { method: "POST", headers, body: "{}" });
      assert.equal(created.status, 201);
      const { rows } = await pool.query("SELECT id, traceparent FROM outbox_messages WHERE topic = 'confirmation'");
      assert.equal(rows.length, 1);
      const [, storedTrace, creation] = rows[0].traceparent.split("-");
      assert.equal(storedTrace, TRACE_ID, "the message keeps the request's trace");
      const worker = outboxWorker(pool, async (message) => {
        const traceparent = deliveryTraceparent(message);
        const sent = { [MESSAGE_ID_HEADER]: message.id, ...(traceparent === undefined ? {} : { traceparent }) };
        const r = await fetch(`http://127.0.0.1:${receiver.address().port}/messages`, { method: "POST", headers: sent, body: message.payload });
        if (!r.ok) throw new Error(`the receiver answered ${r.status}`);
      });
      assert.equal((await worker.deliverOnce()).delivered, 1);

      const spans = exporter.getFinishedSpans();
      assert.ok(spans.some((s) => s.spanContext().spanId === creation && s.spanContext().traceId === TRACE_ID), "the enqueuing span is in the trace");
      const [delivery] = spans.filter((s) => s.name === "outbox.deliver");
      assert.equal(delivery?.kind, SpanKind.PRODUCER);
      assert.equal(delivery.spanContext().traceId, TRACE_ID);
      assert.equal(delivery.parentSpanContext?.spanId, creation, "a child of the span that enqueued the message");
      assert.deepEqual(delivery.links.map((l) => [l.context.traceId, l.context.spanId]), [[TRACE_ID, creation]], "linked to the creation context");
      const [receipt] = spans.filter((s) => s.name === "inbox.receive");
      assert.equal(receipt?.kind, SpanKind.CONSUMER);
      assert.equal(receipt.spanContext().traceId, TRACE_ID);
      assert.equal(receipt.parentSpanContext?.spanId, delivery.spanContext().spanId, "a child of the delivery");
      assert.equal(receipt.attributes["messaging.message.id"], rows[0].id);
    } finally {
      await new Promise((resolve) => sender.close(resolve));
      await new Promise((resolve) => receiver.close(resolve));
    }
  });

  it("the completer continues the trace of the request that claimed the key (on a key table install upgraded)", async () => {
    exporter.reset();
    cluster.createDatabase("node_old_keys");
    const oldPool = new pg.Pool({ connectionString: cluster.url("node_old_keys"), max: 2 });
    try {
      await oldPool.query(OLD_KEY_TABLE);
      const phases = atomicPhases({ database: oldPool, leaseMs: 1 });
      await phases.install();
      await phases.install();
      // The request claims the key under its own span (continuing the client's traceparent), then "crashes".
      const claim = { method: "POST", path: "/pay", keyHeader: ["telemetry-completer-trace"], body: new TextEncoder().encode("{}") };
      const requestContext = propagation.extract(context.active(), { traceparent: TRACEPARENT });
      const tracer = trace.getTracer("telemetry-test");
      const { begun, requestSpanId } = await tracer.startActiveSpan("request", { kind: SpanKind.SERVER }, requestContext, async (span) => {
        try {
          return { begun: await phases.begin(claim), requestSpanId: span.spanContext().spanId };
        } finally {
          span.end();
        }
      });
      assert.ok(begun.held, "the key is held");
      const { rows } = await oldPool.query("SELECT traceparent FROM idempotency_records WHERE key = $1", [claim.keyHeader[0]]);
      assert.equal(rows[0].traceparent, `00-${TRACE_ID}-${requestSpanId}-01`, "the row keeps the request's traceparent");
      await new Promise((resolve) => setTimeout(resolve, 20));

      // The completer, outside any request.
      const completed = [];
      const completer = phasesCompleter(phases, async (held) => {
        completed.push(held.traceparent);
        await phases.finish(held, async () => ({ status: 201, body: {} }));
      });
      assert.equal(await completer.pass(), 1);
      assert.deepEqual(completed, [rows[0].traceparent]);
      const spans = exporter.getFinishedSpans();
      const [complete] = spans.filter((s) => s.name === "idempotency.complete");
      assert.equal(complete?.spanContext().traceId, TRACE_ID, "the completion is in the request's trace");
      assert.equal(complete.parentSpanContext?.spanId, requestSpanId, "a child of the request's span");
      assert.deepEqual(complete.links.map((l) => [l.context.traceId, l.context.spanId]), [[TRACE_ID, requestSpanId]], "linked to it");
      assert.equal(complete.attributes["idempotency.recovery_point"], "started");
      assert.equal(complete.attributes["idempotency.key_hash"], hashOf(claim.keyHeader[0]));
      const finish = spans.find((s) => s.name === "idempotency.phase" && s.attributes["idempotency.phase"] === FINISHED);
      assert.equal(finish?.parentSpanContext?.spanId, complete.spanContext().spanId, "the finish step is the completion's child");
    } finally {
      await oldPool.end();
    }
  });

  it("the outbox backlog and its oldest message's age while a worker runs, read from the table", async () => {
    assert.equal(await gauge("outbox_backlog_messages"), undefined, "no worker runs: nothing observed");
    await pgStore(pool).transaction(async (_q, tx) => {
      await enqueue(tx, newMessage("invite-email", { to: "b@example.test" }));
      await enqueue(tx, newMessage("invite-email", { to: "c@example.test" }));
      return { commit: true, value: undefined };
    });
    const stop = new AbortController();
    const worker = outboxWorker(
      pool,
      async () => {
        throw new Error("the receiver is down");
      },
      { pollMs: 60_000, baseDelayMs: 60_000, maxDelayMs: 60_000 },
    );
    const running = worker.run(stop.signal);
    try {
      // Enqueued in whole seconds: past the next second the oldest message has waited at least one.
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      assert.equal(await gauge("outbox_backlog_messages"), 2);
      const age = await gauge("outbox_oldest_message_age_seconds");
      assert.ok(age >= 1 && age < 10, `oldest message age ${age} s`);
    } finally {
      stop.abort();
      await running;
    }
  });

  it("without @opentelemetry/api installed, a keyed request is answered as ever", () => {
    const out = execFileSync(process.execPath, [path.join(HERE, "support/without-otel.mjs")], { encoding: "utf8", env: { ...process.env } });
    assert.deepEqual(JSON.parse(out), { asked: true, outcomes: ["fresh", "replay"] });
  });
});
