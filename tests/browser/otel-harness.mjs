// Bundled by tests/js/otel-browser.test.mjs and otel-background.test.mjs (esbuild, with the package's
// idempotent-fetch-client/otel and the OpenTelemetry SDK from tools/node_modules) for their pages and
// service worker: a tracer whose finished spans are kept in localStorage in a page, so the spans of a page
// load that went away (a reload, a closed tab) are still there for the next one to read, and in the
// IndexedDB database "otel-test" in a service worker (no localStorage there), which a page reads.
// Exposes globalThis.__otel = { observer, spans() } (spans(): this context's kind of sink).
import { BasicTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { otelObserver } from "idempotent-fetch-client/otel";

const SLOT = "otel-test-spans";
const inPage = typeof localStorage !== "undefined";
const read = () => JSON.parse(localStorage.getItem(SLOT) ?? "[]");

/** The IndexedDB database of a service worker's spans (object store "spans"). */
function spansDb() {
  return new Promise((resolve, reject) => {
    const open = indexedDB.open("otel-test", 1);
    open.onupgradeneeded = () => open.result.createObjectStore("spans", { autoIncrement: true });
    open.onsuccess = () => resolve(open.result);
    open.onerror = () => reject(open.error);
  });
}

/** The spans a service worker kept. */
async function readDb() {
  const db = await spansDb();
  const request = db.transaction("spans").objectStore("spans").getAll();
  const spans = await new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
  db.close();
  return spans;
}

/** A SpanExporter that appends each span, as plain JSON, to localStorage (synchronously: a span
 *  ended on `pagehide` is written before the page goes) or, in a worker, to IndexedDB. */
const exporter = {
  export(spans, done) {
    const kept = [];
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
    if (inPage) {
      localStorage.setItem(SLOT, JSON.stringify([...read(), ...kept]));
      done({ code: 0 });
      return;
    }
    spansDb().then((db) => {
      const transaction = db.transaction("spans", "readwrite");
      for (const span of kept) transaction.objectStore("spans").add(span);
      transaction.oncomplete = () => (db.close(), done({ code: 0 }));
      transaction.onerror = () => (db.close(), done({ code: 1, error: transaction.error }));
    }, (error) => done({ code: 1, error }));
  },
  shutdown: async () => {},
  forceFlush: async () => {},
};

const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
globalThis.__otel = { observer: otelObserver(provider.getTracer("otel-browser-test")), spans: inPage ? read : readDb, workerSpans: readDb };
