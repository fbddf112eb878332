// Bundled by tests/js/otel-browser.test.mjs (esbuild, with the package's idempotent-fetch-client/otel and
// the OpenTelemetry SDK from tools/node_modules) for its test page: a tracer whose finished spans are kept
// in localStorage, so the spans of a page load that went away (a reload, a closed tab) are still there
// for the next one to read. Exposes window.__otel = { observer, spans() }.
import { BasicTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { otelObserver } from "idempotent-fetch-client/otel";

const SLOT = "otel-test-spans";
const read = () => JSON.parse(localStorage.getItem(SLOT) ?? "[]");

/** A SpanExporter that appends each span, as plain JSON, to localStorage (synchronously: a span
 *  ended on `pagehide` is written before the page goes). */
const exporter = {
  export(spans, done) {
    const kept = read();
    for (const span of spans) {
      kept.push({
        name: span.name,
        kind: span.kind,
        traceId: span.spanContext().traceId,
        spanId: span.spanContext().spanId,
        parentSpanId: span.parentSpanContext?.spanId ?? null,
        attributes: span.attributes,
        events: span.events.map((event) => ({ name: event.name, attributes: event.attributes ?? {} })),
      });
    }
    localStorage.setItem(SLOT, JSON.stringify(kept));
    done({ code: 0 });
  },
  shutdown: async () => {},
  forceFlush: async () => {},
};

const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
window.__otel = { observer: otelObserver(provider.getTracer("otel-browser-test")), spans: read };
