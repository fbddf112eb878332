// The trace of one payment as a timeline: the spans the trace receiver kept (`GET /traces/{traceId}`,
// server/src/services/traces.rs), one row each, nested under their parent, with a bar from the span's start
// to its end on one time axis. Loaded by app.js only with `?traces=URL`.
//
// Test hooks: each row is `.tl-row` with `data-role` (see `role`), `data-trace-id`, `data-span-id`,
// `data-parent-span-id` (empty for a root) and, for HTTP spans, `data-status`;
// `#trace-summary` counts the roles.

/** The intent span's name (idempotent-fetch-client/otel's INTENT_SPAN_NAME). */
const INTENT_SPAN_NAME = "idempotent-fetch intent";
/** OTLP's span kinds. */
const SERVER = 2;
const CLIENT = 3;

/** What a span is in the payment's story: intent, attempt, request, transaction, phase, completion,
 *  provider-call, provider, delivery, receipt or other. */
export function role(span) {
  if (span.name === INTENT_SPAN_NAME) return "intent";
  if (span.name === "idempotency.transaction") return "transaction";
  if (span.name === "idempotency.phase") return "phase";
  if (span.name === "idempotency.complete") return "completion";
  if (span.name === "outbox.deliver") return "delivery";
  if (span.name === "inbox.receive") return "receipt";
  if (span.service === "payment-provider" && span.kind === SERVER) return "provider";
  if (span.attributes["idempotency.derived_key_hash"] !== undefined) return "provider-call";
  if (span.kind === CLIENT && span.attributes["idempotent_fetch.intent_id"] !== undefined) return "attempt";
  if (span.kind === SERVER) return "request";
  return "other";
}

/** The row's text: what the span did, in a few words. */
function label(span, kind) {
  const a = span.attributes;
  const status = a["http.response.status_code"];
  const arrow = status === undefined ? "" : ` → ${status}`;
  switch (kind) {
    case "intent":
      return `intent ${a["idempotent_fetch.intent_id"] ?? ""} · key #${a["idempotent_fetch.key_hash"] ?? "?"}` +
        (a["idempotent_fetch.outcome"] ? ` · ${a["idempotent_fetch.outcome"]}` : "");
    case "attempt": {
      const resend = a["http.request.resend_count"];
      const retry = span.events.find((e) => e.name === "idempotent_fetch.retry");
      const why = retry ? ` · retry: ${retry.attributes.reason ?? "?"} in ${retry.attributes.delay_ms ?? "?"} ms` : "";
      const error = a["error.type"] !== undefined && status === undefined ? ` → ${a["error.type"]}` : "";
      return `attempt ${resend === undefined ? 1 : resend + 1}${resend === undefined ? "" : ` (resend_count ${resend})`}` +
        `${arrow}${error}${why}${a["idempotent_fetch.replayed"] ? " · replayed" : ""}`;
    }
    case "request":
      return `server ${span.name}${arrow}${a["idempotency.decision"] ? ` · ${a["idempotency.decision"]}` : ""}`;
    case "transaction":
      return `transaction${a["db.system.name"] ? ` (${a["db.system.name"]})` : ""}`;
    case "phase":
      return `phase ${a["idempotency.phase"] ?? "?"}`;
    case "provider-call":
      return `provider call ${span.name} ${a["url.full"] ? new URL(a["url.full"]).pathname : ""}${arrow} · derived key #${a["idempotency.derived_key_hash"]}`;
    case "provider":
      return `provider ${span.name}${arrow}`;
    case "completion":
      return `completer resumes the key at ${a["idempotency.recovery_point"] ?? "?"} · key #${a["idempotency.key_hash"] ?? "?"}`;
    case "delivery":
      return `outbox delivery ${a["messaging.message.id"] ?? ""}`;
    case "receipt":
      return `${span.service} receives ${a["messaging.message.id"] ?? ""}`;
    default:
      return `${span.service}: ${span.name}`;
  }
}

/** The spans in tree order (each after its parent, siblings by start), with their depth. */
function treeOrder(spans) {
  const ids = new Set(spans.map((s) => s.spanId));
  const children = new Map();
  for (const span of spans) {
    const parent = span.parentSpanId && ids.has(span.parentSpanId) ? span.parentSpanId : null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(span);
  }
  const ordered = [];
  const visit = (parent, depth) => {
    for (const span of (children.get(parent) ?? []).sort((a, b) => a.startMs - b.startMs)) {
      ordered.push({ span, depth });
      visit(span.spanId, depth + 1);
    }
  };
  visit(null, 0);
  return ordered;
}

/** Draws `trace` (`{ traceId, spans }`) into `container`; returns the count of each role. */
export function drawTimeline(container, trace) {
  const spans = trace.spans;
  const start = Math.min(...spans.map((s) => s.startMs));
  const end = Math.max(...spans.map((s) => s.endMs));
  const range = Math.max(end - start, 1);
  const counts = {};
  const rows = treeOrder(spans).map(({ span, depth }) => {
    const kind = role(span);
    counts[kind] = (counts[kind] ?? 0) + 1;
    const row = document.createElement("div");
    row.className = `tl-row tl-${kind}`;
    Object.assign(row.dataset, { role: kind, traceId: span.traceId, spanId: span.spanId, parentSpanId: span.parentSpanId ?? "" });
    const status = span.attributes["http.response.status_code"];
    if (status !== undefined) row.dataset.status = String(status);
    const name = document.createElement("span");
    name.className = "tl-label";
    name.style.paddingLeft = `${depth * 0.9}em`;
    name.textContent = label(span, kind);
    name.title = `${span.service}: ${span.name}\n${JSON.stringify(span.attributes, null, 1)}`;
    const lane = document.createElement("span");
    lane.className = "tl-lane";
    const bar = document.createElement("span");
    bar.className = `tl-bar${span.statusCode === 2 ? " tl-error" : ""}`;
    bar.style.left = `${((span.startMs - start) / range) * 100}%`;
    bar.style.width = `max(2px, ${((span.endMs - span.startMs) / range) * 100}%)`;
    bar.title = `${Math.round(span.endMs - span.startMs)} ms, at +${Math.round(span.startMs - start)} ms`;
    lane.append(bar);
    row.append(name, lane);
    return row;
  });
  container.replaceChildren(...rows);
  return { counts, durationMs: range };
}
