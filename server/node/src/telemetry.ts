// Spans and metrics through the app's own `@opentelemetry/api`, named and attributed as the Rust reference
// server's (server/src/telemetry.rs, metrics.rs and the library's span macros), so a trace or a dashboard
// reads the same whichever server answered. The API is an optional peer: it is loaded on the first keyed
// request, and without it (or without a provider registered, when the API itself is a no-op) every hook
// here runs the work and nothing else. No attribute holds a key: only its hash, from the wasm core.
import type * as Api from "@opentelemetry/api";

import * as core from "./core.js";

/** The instrumentation scope of every span and metric (the package's name). */
export const INSTRUMENTATION_NAME = "idempotent-endpoint";

/** A span attribute value the hooks set. */
export type AttributeValue = string | number | boolean;

/** What a traced piece of work may add to its span. */
export interface SpanHandle {
  /** Whether the span records what is set on it (false without the API or without a tracer provider registered): an attribute that costs work to compute is computed only then. */
  readonly recording: boolean;
  /** Sets attributes on the span (nothing without the API). */
  set(attributes: Record<string, AttributeValue>): void;
  /** Marks the span an error. */
  fail(): void;
}

/**
 * The headers of an incoming request as a trace context is read from them: Node's record (lowercase names)
 * or a web `Headers`, read through a getter, so nothing is copied unless a propagator reads a field.
 */
export type Carrier = Record<string, string | string[] | undefined> | Headers;

/** How the app's propagator reads either form of {@link Carrier}. */
const CARRIER_GETTER: Api.TextMapGetter<Carrier> = {
  get: (carrier, key) => (carrier instanceof Headers ? (carrier.get(key) ?? undefined) : carrier[key]),
  keys: (carrier) => (carrier instanceof Headers ? [...carrier.keys()] : Object.keys(carrier)),
};

type OtelApi = typeof Api;

let loaded: OtelApi | null | undefined;

/** The app's `@opentelemetry/api`, or null when it is not installed (looked up once). */
function otel(): OtelApi | null {
  if (loaded === undefined) {
    try {
      loaded = require("@opentelemetry/api") as OtelApi;
    } catch {
      loaded = null;
    }
  }
  return loaded;
}

const NOOP: SpanHandle = { recording: false, set: () => undefined, fail: () => undefined };

/** Where a span sits: a server span may continue the trace of the request's headers, a message's span the message's trace. */
export interface SpanOptions {
  /** `server` for the request's span, `producer` for an outbox delivery, `consumer` for an inbox receipt; else internal. */
  kind?: "server" | "producer" | "consumer";
  /** The request's headers: the app's propagator reads the incoming trace context (`traceparent`) from them. */
  carrier?: Carrier;
  /**
   * A message's W3C `traceparent`: the span is its child and linked to it (OpenTelemetry's messaging
   * conventions ask for the link; the parent puts the span in the trace of the request that enqueued the
   * message, see outbox.ts). An invalid or absent value is ignored.
   */
  traceparent?: string | undefined;
}

// The W3C form read and written directly, not through the app's global propagator: the outbox column and the
// delivery header hold a W3C `traceparent` whatever propagator the app registered (the API's default writes
// nothing). It is read by the Rust library's `TraceParent::parse`, through the wasm core.

/** The remote span context of a `traceparent`, or undefined when it is not a valid version 00 value. */
function parseTraceparent(traceparent: string): Api.SpanContext | undefined {
  const parsed = core.traceparent(traceparent);
  return parsed === undefined ? undefined : { traceId: parsed.traceId, spanId: parsed.spanId, traceFlags: parsed.traceFlags, isRemote: true };
}

/** The remote span context of a `traceparent`, or undefined when it is not a valid version 00 value. */
function remoteSpanContext(api: OtelApi, traceparent: string): Api.SpanContext | undefined {
  const remote = parseTraceparent(traceparent);
  return remote !== undefined && api.trace.isSpanContextValid(remote) ? remote : undefined;
}

/** `value` in the W3C form when it is a valid `traceparent`, else undefined: what a key row or an outbox message may keep. */
export function validTraceparent(value: string | undefined): string | undefined {
  return value === undefined ? undefined : core.traceparent(value)?.traceparent;
}

/** The W3C `traceparent` of the active span, or undefined without the API or a valid active span. */
export function activeTraceparent(): string | undefined {
  const api = otel();
  if (api === null) return undefined;
  const active = api.trace.getSpanContext(api.context.active());
  if (active === undefined || !api.trace.isSpanContextValid(active)) return undefined;
  return `00-${active.traceId}-${active.spanId}-${(active.traceFlags & 0xff).toString(16).padStart(2, "0")}`;
}

/**
 * Runs `work` inside a span named `name` (a child of the active span, or of the trace in
 * `options.carrier`), ended when `work` settles; a rejection marks it an error and is rethrown.
 */
export async function traced<T>(
  name: string,
  attributes: Record<string, AttributeValue>,
  work: (span: SpanHandle) => Promise<T>,
  options: SpanOptions = {},
): Promise<T> {
  const api = otel();
  if (api === null) return work(NOOP);
  let parent = api.context.active();
  if (options.carrier !== undefined) parent = api.propagation.extract(parent, options.carrier, CARRIER_GETTER);
  let links: Api.Link[] | undefined;
  const remote = options.traceparent === undefined ? undefined : remoteSpanContext(api, options.traceparent);
  if (remote !== undefined) {
    parent = api.trace.setSpanContext(parent, remote);
    links = [{ context: remote }];
  }
  const kinds = { server: api.SpanKind.SERVER, producer: api.SpanKind.PRODUCER, consumer: api.SpanKind.CONSUMER };
  const kind = options.kind === undefined ? api.SpanKind.INTERNAL : kinds[options.kind];
  const tracer = api.trace.getTracer(INSTRUMENTATION_NAME);
  return tracer.startActiveSpan(name, { kind, attributes, ...(links === undefined ? {} : { links }) }, parent, async (span) => {
    try {
      return await work({ recording: span.isRecording(), set: (more) => span.setAttributes(more), fail: () => span.setStatus({ code: api.SpanStatusCode.ERROR }) });
    } catch (error) {
      span.recordException(error instanceof Error ? error : String(error));
      span.setStatus({ code: api.SpanStatusCode.ERROR });
      throw error;
    } finally {
      span.end();
    }
  });
}

/** The request span's attributes once answered: its status, and a 5xx marked an error (a 4xx is the client's, as the conventions say). */
export function answered(span: SpanHandle, status: number): void {
  span.set({ "http.response.status_code": status });
  if (status >= 500) span.fail();
}

/**
 * What a span shows of a key: its hash (the Rust library's `key_hash`), never the key; nothing (and no
 * hashing on the request's path) when `span` records nothing (no API installed, or no tracer provider).
 */
export function keyHashAttribute(span: SpanHandle, key: string): Record<string, string> {
  return span.recording ? { "idempotency.key_hash": core.keyHash(key) } : {};
}

interface Counters {
  provider: Api.MeterProvider;
  decisions: Api.Counter;
  deliveryAttempts: Api.Counter;
  redeliveriesRefused: Api.Counter;
}

/** When each key this process is working on was entered (`performance.now()` ms), one entry per key. */
const inFlight = new Set<{ since: number }>();

/** The outbox backlogs of the running delivery workers, read when the app's metric reader collects. */
const backlogs = new Set<() => Promise<{ undelivered: number; oldestAgeSecs: number | undefined }>>();

/** The gauges read at collection time, named as the Rust server's `/metrics`: the keys in flight and
 *  the oldest one's age, the outbox backlog and its oldest message's age. */
function observeGauges(m: Api.Meter): void {
  const keys = m.createObservableGauge("idempotency_keys_in_flight", { description: "Keys this process is working on" });
  const oldestKey = m.createObservableGauge("idempotency_oldest_in_flight_age_seconds", {
    description: "How long the oldest key this process is working on has been in flight (0: none)",
    unit: "s",
  });
  m.addBatchObservableCallback(
    (result) => {
      let oldest: number | undefined;
      for (const entry of inFlight) oldest = oldest === undefined ? entry.since : Math.min(oldest, entry.since);
      result.observe(keys, inFlight.size);
      result.observe(oldestKey, oldest === undefined ? 0 : (performance.now() - oldest) / 1000);
    },
    [keys, oldestKey],
  );
  const backlog = m.createObservableGauge("outbox_backlog_messages", { description: "Outbox messages not delivered yet" });
  const oldestMessage = m.createObservableGauge("outbox_oldest_message_age_seconds", {
    description: "How long the oldest undelivered outbox message has waited (0: none)",
    unit: "s",
  });
  m.addBatchObservableCallback(
    async (result) => {
      // Each running worker reads its own database's table; a process with workers on several databases
      // reports the largest backlog and the oldest message. A table that cannot be read reports nothing.
      let undelivered: number | undefined;
      let oldestSecs = 0;
      for (const read of backlogs) {
        const got = await read().catch(() => undefined);
        if (got === undefined) continue;
        undelivered = Math.max(undelivered ?? 0, got.undelivered);
        oldestSecs = Math.max(oldestSecs, got.oldestAgeSecs ?? 0);
      }
      if (undelivered === undefined) return;
      result.observe(backlog, undelivered);
      result.observe(oldestMessage, oldestSecs);
    },
    [backlog, oldestMessage],
  );
}

let counters: Counters | undefined;

/** The counters on the app's current meter provider (made again when the app registers another). */
function meter(): Counters | undefined {
  const api = otel();
  if (api === null) return undefined;
  const provider = api.metrics.getMeterProvider();
  if (counters?.provider === provider) return counters;
  const m = provider.getMeter(INSTRUMENTATION_NAME);
  counters = {
    provider,
    decisions: m.createCounter("idempotency_decisions", {
      description: "Keyed requests with a well-formed key, by decision: fresh, replay, mismatch (422), in_flight (409), fenced (410)",
    }),
    deliveryAttempts: m.createCounter("outbox_delivery_attempts", { description: "Outbox delivery attempts by this process, by result: delivered or failed" }),
    redeliveriesRefused: m.createCounter("inbox_redeliveries_refused", {
      description: "Deliveries of a message id already received, refused (answered as duplicates, nothing stored)",
    }),
  };
  observeGauges(m);
  return counters;
}

/**
 * Runs `work` with one more key counted in flight (`idempotency_keys_in_flight`, and its start in the
 * oldest one's age) until it settles; just `work` when `@opentelemetry/api` is not installed.
 */
export async function keyInFlight<T>(work: () => Promise<T>): Promise<T> {
  if (meter() === undefined) return work();
  const entry = { since: performance.now() };
  inFlight.add(entry);
  try {
    return await work();
  } finally {
    inFlight.delete(entry);
  }
}

/**
 * Reports an outbox's backlog (`outbox_backlog_messages`, `outbox_oldest_message_age_seconds`), read with
 * `read` each time the app's metric reader collects, until the returned function is called.
 */
export function observeBacklog(read: () => Promise<{ undelivered: number; oldestAgeSecs: number | undefined }>): () => void {
  if (meter() === undefined) return () => undefined;
  backlogs.add(read);
  return () => backlogs.delete(read);
}

/** Counts one decision on a keyed request (`decision` attribute), as the Rust server's `idempotency_decisions`. */
export function countDecision(decision: "fresh" | core.Decision): void {
  meter()?.decisions.add(1, { decision });
}

/** Counts one outbox delivery attempt (`result`: delivered or failed), as the Rust server's `outbox_delivery_attempts`. */
export function countDeliveryAttempt(delivered: boolean): void {
  meter()?.deliveryAttempts.add(1, { result: delivered ? "delivered" : "failed" });
}

/** Counts one re-delivery the inbox refused, as the mail receiver's `inbox_redeliveries_refused`. */
export function countRedeliveryRefused(): void {
  meter()?.redeliveriesRefused.add(1);
}
