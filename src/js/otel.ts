// `idempotent-fetch-client/otel`: an observer (observer.ts) that makes OpenTelemetry spans of an
// intent's sends with the app's tracer. `@opentelemetry/api` is the app's (an optional peer
// dependency: only this entry imports it), so a page that does not trace loads none of it.
//
// The spans (docs/ARCHITECTURE.md, "Tracing"): one intent span from `begin` (the record's createdAt) to
// the definite answer or the give-up of the first send that traced the intent, and one client span
// per attempt, its child, after the HTTP client semantic conventions. The intent span's context is
// kept in the intent's record (`ObservedIntent.trace`), so a send after a reload, in another tab or in
// the service worker makes its attempt spans children of the same intent span, in the same trace.
// A span cannot outlive the page that started it: when the page goes away (`pagehide`) before the
// answer, the intent span and an attempt in flight end then, marked `idempotent_fetch.outcome: "page_left"`.
/**
 * `idempotent-fetch-client/otel`: {@link otelObserver}, which traces a client's intents with an
 * OpenTelemetry tracer (one span per intent, one child span per attempt) and sends the W3C
 * `traceparent` of the intent's trace with every attempt.
 *
 * @module idempotent-fetch-client/otel
 */

import {
  context,
  type Attributes,
  type Context,
  isSpanContextValid,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  trace,
  type Tracer,
} from "@opentelemetry/api";
import type { AttemptEvent, OfflineEvent, ReconcileEvent, RetryEvent } from "./events.js";
import { EV_ABORT, EV_TIMEOUT } from "./generated/contract.js";
import type { AttemptFailure, IntentObserver } from "./observer.js";
import type { SendResult } from "./results.js";
import { hex, sha256 } from "./sha256.js";

/** The names of the attributes and events this entry writes besides the semantic conventions'. */
export const ATTR = {
  /** The intent's id. */
  intentId: "idempotent_fetch.intent_id",
  /** The first 16 hex digits of the SHA-256 of the key (the key itself never leaves the page). */
  keyHash: "idempotent_fetch.key_hash",
  /** The definite answer was a replay of a stored one. */
  replayed: "idempotent_fetch.replayed",
  /** Why an intent span, or an attempt span, ended without an answer: `"page_left"` (the page went first). */
  outcome: "idempotent_fetch.outcome",
} as const;

/** The names of the span events. */
export const EVENT = {
  /** On the attempt that got no definite answer: `reason` (the `retry` event's), `delay_ms`, and
   *  `status` when there was an answer. */
  retry: "idempotent_fetch.retry",
  /** The client asks the server what became of the key (on the last attempt span, else the intent span). */
  reconcile: "idempotent_fetch.reconcile",
  /** The send waits for the network (on the last attempt span, else the intent span). */
  offline: "idempotent_fetch.offline",
  /** The send gave up: `code` (the error's) and `message`; on the intent span, or on the last attempt
   *  span of a send that continues another page's trace. */
  giveUp: "idempotent_fetch.give_up",
} as const;

/** The intent span's name (attempt spans are named by their method, as the conventions say). */
export const INTENT_SPAN_NAME = "idempotent-fetch intent";

/** The first 16 hex digits of the SHA-256 of `key`: tells keys apart in a trace without being one
 *  (the server library writes the same). */
export const keyHash = (key: string): string => hex(sha256(new TextEncoder().encode(key))).slice(0, 16);

/**
 * The observer for `new IdempotentClient({ observer: otelObserver(tracer) })`: each intent gets a
 * span (`idempotent-fetch intent`, started at `begin`, ended with the definite answer or the give-up),
 * each attempt a `SpanKind.CLIENT` child span named by its method with `http.request.method`,
 * `url.full`, `server.address`, `server.port`, `http.response.status_code`, `error.type` and, on
 * re-sends only, `http.request.resend_count` (attempts before it, earlier page loads included), plus
 * `idempotent_fetch.intent_id`, `idempotent_fetch.key_hash` and `idempotent_fetch.replayed`. Retries,
 * questions about the key, waits for the network and give-ups are span events ({@link EVENT}).
 *
 * Every attempt carries the W3C `traceparent` header of its span; the intent span's context is kept in
 * the intent's record, so a later send (after a reload, in another tab, in a service worker with its own
 * `otelObserver`) continues the same trace. A cross-origin API must allow the `traceparent` request
 * header (CORS). The intent span's parent is the context active at the first send (e.g. the click's span).
 */
export function otelObserver(tracer: Tracer): IntentObserver {
  return (intent, request, createdAt) => {
    const { intentId, key, trace } = intent;
    const watch = watchSend(tracer, { intentId, key, method: request.method, url: request.url, createdAt, trace });
    if (watch.trace) intent.trace = watch.trace;
    // The core tells one function every step (observer.ts `SendStep`): sorted out here, where only
    // pages that trace pay for it.
    return (step, error) => {
      if (step === undefined) return watch.end(undefined, error);
      if (typeof step === "number") return watch.attempted(step === EV_TIMEOUT ? "timeout" : step === EV_ABORT ? "abort" : "network");
      if ("response" in step) return watch.end(step);
      if (!("intentId" in step)) return watch.attempted(step.status);
      if (step.type === "attempt") return watch.attempt(step);
      watch.event(step);
    };
  };
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A stored `traceparent` as a remote span context (the record's reader checked its form). */
function parseTraceparent(value: string | undefined): SpanContext | undefined {
  const found = value === undefined ? null : TRACEPARENT.exec(value);
  if (!found) return undefined;
  const context: SpanContext = { traceId: found[1]!, spanId: found[2]!, traceFlags: parseInt(found[3]!, 16), isRemote: true };
  return isSpanContextValid(context) ? context : undefined;
}

/** A span context as a W3C `traceparent` (version 00); `undefined` for an invalid one (a tracer that
 *  records nothing). */
function traceparent(context: SpanContext): string | undefined {
  if (!isSpanContextValid(context)) return undefined;
  return `00-${context.traceId}-${context.spanId}-${(context.traceFlags & 0xff).toString(16).padStart(2, "0")}`;
}

/** The request's URL attributes: `url.full` without credentials, the server's address and port. */
function urlAttributes(url: string): Attributes {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { "url.full": url };
  }
  parsed.username = "";
  parsed.password = "";
  const port = parsed.port ? Number(parsed.port) : parsed.protocol === "https:" ? 443 : parsed.protocol === "http:" ? 80 : undefined;
  return { "url.full": parsed.href, "server.address": parsed.hostname, ...(port === undefined ? {} : { "server.port": port }) };
}

/** How each send under way ends the spans it holds open (its intent span, an attempt in flight)
 *  when the page goes away. */
const leaving = new Set<() => void>();
let pagehideListening = false;

/** Ends the open spans on `pagehide` (a page, not a worker): a span the page never ends is never
 *  exported, and the attempts of later page loads are the intent span's children. */
function endOnPagehide(): void {
  const scope = globalThis as { addEventListener?: (type: string, listener: () => void) => void; onpagehide?: unknown };
  if (pagehideListening || typeof scope.addEventListener !== "function" || !("onpagehide" in scope)) return;
  pagehideListening = true;
  scope.addEventListener("pagehide", () => {
    for (const leave of leaving) leave();
    leaving.clear();
  });
}

/** An attempt span awaiting its end: kept open until the send's next step, so a retry's event lands
 *  on the attempt that caused it; ended at the time its outcome was known. `at` is a `performance.now()`
 *  time, the clock the SDK measures a span started without a start time by (a wall-clock end could
 *  come before its start when the two clocks drift apart). */
interface PendingAttempt {
  span: Span;
  at: number | undefined;
}

/** What a send starts from: the intent, its request, and when it was begun. */
interface ObservedSend {
  intentId: string;
  key: string;
  method: string;
  url: string;
  createdAt: number;
  trace: string | undefined;
}

/** What a send's spans do at each step (the steps of observer.ts `SendStep`, sorted out). */
interface Watch {
  /** The `traceparent` to keep with the intent (`ObservedIntent.trace`), when this send started its trace. */
  trace: string | undefined;
  attempt(event: AttemptEvent): [string, string] | undefined;
  attempted(outcome: number | AttemptFailure): void;
  event(event: RetryEvent | ReconcileEvent | OfflineEvent): void;
  end(result: SendResult | undefined, error?: unknown): void;
}

function watchSend(tracer: Tracer, send: ObservedSend): Watch {
  const common: Attributes = { [ATTR.intentId]: send.intentId, [ATTR.keyHash]: keyHash(send.key) };
  const request: Attributes = { "http.request.method": send.method, ...urlAttributes(send.url) };
  const stored = parseTraceparent(send.trace);
  let intent: Span | undefined;
  let parent: Context;
  if (stored) parent = trace.setSpanContext(ROOT_CONTEXT, stored);
  else {
    intent = tracer.startSpan(INTENT_SPAN_NAME, { kind: SpanKind.INTERNAL, startTime: new Date(send.createdAt), attributes: { ...common, ...request } }, context.active());
    parent = trace.setSpan(context.active(), intent);
  }
  const kept = intent ? traceparent(intent.spanContext()) : undefined;
  let last: PendingAttempt | undefined;
  const finishLast = () => {
    last?.span.end(last.at);
    last = undefined;
  };
  const eventTarget = () => last?.span ?? intent;
  // The page goes before the send ends: an attempt in flight and the intent span end now, saying so.
  const leave = () => {
    if (last && last.at === undefined) last.span.setAttribute(ATTR.outcome, "page_left");
    finishLast();
    intent?.setAttribute(ATTR.outcome, "page_left");
    intent?.end();
    intent = undefined;
  };
  leaving.add(leave);
  endOnPagehide();
  return {
    trace: kept,
    attempt(event: AttemptEvent) {
      finishLast();
      const resends = event.totalAttempts - 1;
      const span = tracer.startSpan(
        send.method,
        { kind: SpanKind.CLIENT, attributes: { ...common, ...request, ...(resends > 0 ? { "http.request.resend_count": resends } : {}) } },
        parent,
      );
      last = { span, at: undefined };
      const header = traceparent(span.spanContext());
      return header ? ["traceparent", header] : undefined;
    },
    attempted(outcome: number | AttemptFailure) {
      if (!last) return;
      last.at = performance.now();
      if (typeof outcome === "number") {
        last.span.setAttribute("http.response.status_code", outcome);
        // The conventions: a client span is an error from status 400 on, its type the status code.
        if (outcome >= 400) failed(last.span, String(outcome));
      } else failed(last.span, outcome);
    },
    event(event: RetryEvent | ReconcileEvent | OfflineEvent) {
      const span = eventTarget();
      if (event.type === "retry") {
        span?.addEvent(EVENT.retry, { reason: event.reason, delay_ms: event.delayMs, ...(event.status === null ? {} : { status: event.status }) }, last?.at);
        finishLast();
      } else span?.addEvent(event.type === "reconcile" ? EVENT.reconcile : EVENT.offline);
    },
    end(result: SendResult | undefined, error?: unknown) {
      const code = (error as { code?: unknown } | undefined)?.code;
      const gaveUp = result === undefined && typeof code === "string";
      if (result) last?.span.setAttribute(ATTR.replayed, result.replayed);
      // Without the intent span (a later page's send), the give-up is told on its last attempt.
      if (gaveUp && !intent) last?.span.addEvent(EVENT.giveUp, giveUpAttributes(code, error));
      finishLast();
      leaving.delete(leave);
      if (!intent) return;
      if (result) {
        intent.setAttributes({ "http.response.status_code": result.status, [ATTR.replayed]: result.replayed });
        if (!result.ok) failed(intent, String(result.status));
      } else if (gaveUp) {
        intent.addEvent(EVENT.giveUp, giveUpAttributes(code, error));
        failed(intent, code);
      }
      intent.end();
    },
  };
}

function giveUpAttributes(code: string, error: unknown): Attributes {
  const message = (error as { message?: unknown }).message;
  return { code, ...(typeof message === "string" ? { message } : {}) };
}

/** Marks `span` as an error of `type` (`error.type` and the span's status). */
function failed(span: Span, type: string): void {
  span.setAttribute("error.type", type);
  span.setStatus({ code: SpanStatusCode.ERROR });
}
