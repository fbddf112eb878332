// The demo page's tracing, loaded only with `?traces=URL` (app.js): the package's
// `idempotent-fetch-client/otel` observer with the OpenTelemetry SDK's tracer, every finished span exported
// over OTLP/HTTP (JSON) to the trace receiver at URL (`trace-receiver`, which `cargo xtask demo` starts).
// Bundled with the SDK by www/build-tracing.mjs into www/tracing.js, as an app's bundler would.
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { ATTR, otelObserver } from "idempotent-fetch-client/otel";

/** The `service.name` of the page's spans. */
export const SERVICE_NAME = "demo-checkout-page";

/**
 * A tracer exporting to `receiverUrl`; `onTrace(intentId, traceId)` is called when an attempt of an intent
 * starts, so the page knows which trace to draw. Each span is exported as it ends (not batched): the
 * spans the observer ends on `pagehide` leave with the page (the exporter's fetch is `keepalive`).
 */
export function startTracing(receiverUrl, onTrace) {
  const exporter = new OTLPTraceExporter({ url: `${receiverUrl.replace(/\/$/, "")}/v1/traces` });
  const noteTrace = {
    onStart(span) {
      const intentId = span.attributes?.[ATTR.intentId];
      if (typeof intentId === "string") onTrace(intentId, span.spanContext().traceId);
    },
    onEnd() {},
    forceFlush: async () => {},
    shutdown: async () => {},
  };
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": SERVICE_NAME }),
    spanProcessors: [noteTrace, new SimpleSpanProcessor(exporter)],
  });
  return { observer: otelObserver(provider.getTracer("demo-checkout")), flush: () => provider.forceFlush() };
}
