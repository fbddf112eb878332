//! The W3C trace context an outbox message carries from the request that enqueued it to the receiver's
//! inbox, as one `traceparent` value (`00-{trace id}-{span id}-{flags}`).
//!
//! With the feature `otel`, [`current`] reads the OpenTelemetry context of the current `tracing` span (the
//! app's `tracing-opentelemetry` layer makes it), and [`continue_from`] makes a span a child of a received
//! `traceparent`. The value is written and read in the W3C form directly rather than through the app's
//! global propagator: the outbox column and the delivery header hold a W3C `traceparent` whatever propagator
//! the app installed (OpenTelemetry's default global propagator writes nothing). Without the feature there
//! is no OpenTelemetry context: [`current`] is `None` and [`continue_from`] leaves the span as it is.

pub use crate::traceparent::{TraceParent, TRACEPARENT_HEADER};

/// The `traceparent` header of a request, if it has one as text (for the inbox's `receive` functions).
pub fn header(headers: &http::HeaderMap) -> Option<&str> {
    headers.get(TRACEPARENT_HEADER).and_then(|value| value.to_str().ok())
}

/// The `traceparent` of the current `tracing` span, when it has a valid OpenTelemetry context.
#[cfg(feature = "otel")]
pub fn current() -> Option<String> {
    of(&tracing::Span::current())
}

/// The `traceparent` of the current span: none without the feature `otel`.
#[cfg(not(feature = "otel"))]
pub fn current() -> Option<String> {
    None
}

/// The `traceparent` of `span`, when it has a valid OpenTelemetry context. Reading it starts the
/// OpenTelemetry span: set its parent first.
#[cfg(feature = "otel")]
pub fn of(span: &tracing::Span) -> Option<String> {
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context.is_valid().then(|| {
        TraceParent {
            trace_id: u128::from_be_bytes(span_context.trace_id().to_bytes()),
            span_id: u64::from_be_bytes(span_context.span_id().to_bytes()),
            flags: span_context.trace_flags().to_u8(),
        }
        .to_string()
    })
}

/// The `traceparent` of `span`: none without the feature `otel`.
#[cfg(not(feature = "otel"))]
pub fn of(_span: &tracing::Span) -> Option<String> {
    None
}

/// Makes `span` (not started yet) a child of the remote span in `traceparent`, and links it there too, as
/// OpenTelemetry's messaging conventions ask of a span that sends or processes a message (see
/// [`crate::outbox`], "Traces"). An invalid `traceparent` leaves the span as it is.
#[cfg(feature = "otel")]
pub fn continue_from(span: &tracing::Span, traceparent: &str) {
    use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let Some(parent) = TraceParent::parse(traceparent) else {
        tracing::debug!(traceparent, "not a W3C traceparent; the span starts its own trace");
        return;
    };
    let remote = SpanContext::new(
        TraceId::from_bytes(parent.trace_id.to_be_bytes()),
        SpanId::from_bytes(parent.span_id.to_be_bytes()),
        TraceFlags::new(parent.flags),
        true,
        TraceState::NONE,
    );
    span.add_link(remote.clone());
    if let Err(error) = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote)) {
        tracing::debug!(%error, "the message's traceparent was not continued");
    }
}

/// Makes `span` continue `traceparent`: without the feature `otel` there is no OpenTelemetry context, and
/// the span stays where it is.
#[cfg(not(feature = "otel"))]
pub fn continue_from(_span: &tracing::Span, _traceparent: &str) {}
