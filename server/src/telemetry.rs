//! The server span of every API request, named and attributed as OpenTelemetry's HTTP server semantic
//! conventions say (`{method} {route}`, `http.request.method`, `http.route`,
//! `http.response.status_code`), plus the protocol's own attributes, which `POST /api/orders` records:
//! `idempotency.key_hash` (never the key: [`idempotent_endpoint::key_hash`]) and `idempotency.decision`
//! (fresh, replay, mismatch, in_flight, fenced).
//!
//! With the `otel` feature, the span continues the trace of the request's W3C `traceparent` header, and
//! [`trace_headers`] gives an outgoing call the `traceparent` of the current span, so the payment
//! provider's spans join the same trace. Without it these are `tracing` spans only (in the log with
//! `RUST_LOG`), and [`trace_headers`] is empty.

use axum::extract::{MatchedPath, Request};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use tracing::field::Empty;
use tracing::Instrument;

/// The middleware: runs the request inside its server span and records the status it was answered.
pub async fn http_span(route: Option<MatchedPath>, request: Request, next: Next) -> Response {
    let route = route.as_ref().map_or("", MatchedPath::as_str).to_owned();
    let method = request.method().clone();
    let span = tracing::info_span!(
        "http.server",
        otel.name = %format_args!("{method} {route}"),
        otel.kind = "server",
        otel.status_code = Empty,
        http.request.method = %method,
        http.route = %route,
        http.response.status_code = Empty,
        idempotency.key_hash = Empty,
        idempotency.decision = Empty,
    );
    continue_trace(&span, request.headers());
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status();
    span.record("http.response.status_code", status.as_u16());
    if status.is_server_error() {
        // The conventions leave a 4xx unset on a server span: the client's mistake, not the server's.
        span.record("otel.status_code", "ERROR");
    }
    response
}

#[cfg(feature = "otel")]
struct Extract<'a>(&'a HeaderMap);

#[cfg(feature = "otel")]
impl opentelemetry::propagation::Extractor for Extract<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(axum::http::HeaderName::as_str).collect()
    }
}

/// Makes `span` a child of the request's `traceparent`, if it has a valid one.
#[cfg(feature = "otel")]
fn continue_trace(span: &tracing::Span, headers: &HeaderMap) {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| propagator.extract(&Extract(headers)));
    if let Err(error) = span.set_parent(parent) {
        tracing::debug!(%error, "the request's traceparent was not continued");
    }
}

#[cfg(not(feature = "otel"))]
fn continue_trace(_span: &tracing::Span, _headers: &HeaderMap) {}

/// The W3C trace headers (`traceparent`, `tracestate`) of the current span, for an outgoing request.
#[cfg(feature = "otel")]
pub fn trace_headers() -> Vec<(String, String)> {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let context = tracing::Span::current().context();
    let mut headers = std::collections::HashMap::new();
    opentelemetry::global::get_text_map_propagator(|propagator| propagator.inject_context(&context, &mut headers));
    headers.into_iter().collect()
}

/// The W3C trace headers of the current span: none without the `otel` feature.
#[cfg(not(feature = "otel"))]
pub fn trace_headers() -> Vec<(String, String)> {
    Vec::new()
}
