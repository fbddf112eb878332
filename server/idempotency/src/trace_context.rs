//! The W3C trace context an outbox message carries from the request that enqueued it to the receiver's
//! inbox, as one `traceparent` value (`00-{trace id}-{span id}-{flags}`).
//!
//! With the feature `otel`, [`current`] reads the OpenTelemetry context of the current `tracing` span (the
//! app's `tracing-opentelemetry` layer makes it), and [`continue_from`] makes a span a child of a received
//! `traceparent`. The value is written and read in the W3C form directly rather than through the app's
//! global propagator: the outbox column and the delivery header hold a W3C `traceparent` whatever propagator
//! the app installed (OpenTelemetry's default global propagator writes nothing). Without the feature there
//! is no OpenTelemetry context: [`current`] is `None` and [`continue_from`] leaves the span as it is.

/// The header that carries the trace context of a request or a delivery (W3C Trace Context).
pub const TRACEPARENT_HEADER: &str = "traceparent";

/// The `traceparent` header of a request, if it has one as text (for the inbox's `receive` functions).
pub fn header(headers: &http::HeaderMap) -> Option<&str> {
    headers.get(TRACEPARENT_HEADER).and_then(|value| value.to_str().ok())
}

/// A parsed `traceparent` (version `00`): the trace, the parent span and the trace flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    /// The trace id (never zero).
    pub trace_id: u128,
    /// The parent span's id (never zero).
    pub span_id: u64,
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
}

impl TraceParent {
    /// Parses a `traceparent` header value; `None` when it is not a valid version `00` value (the W3C rules:
    /// lowercase hex fields of 2, 32, 16 and 2 digits, ids not all zero).
    pub fn parse(value: &str) -> Option<TraceParent> {
        let mut fields = value.trim().split('-');
        let (version, trace, span, flags) = (fields.next()?, fields.next()?, fields.next()?, fields.next()?);
        let hex = |field: &str, len: usize| {
            field.len() == len && field.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if fields.next().is_some() || version != "00" || !hex(trace, 32) || !hex(span, 16) || !hex(flags, 2) {
            return None;
        }
        let parsed = TraceParent {
            trace_id: u128::from_str_radix(trace, 16).ok()?,
            span_id: u64::from_str_radix(span, 16).ok()?,
            flags: u8::from_str_radix(flags, 16).ok()?,
        };
        (parsed.trace_id != 0 && parsed.span_id != 0).then_some(parsed)
    }

    /// The trace id as 32 lowercase hex digits, as OTLP exporters show it.
    pub fn trace_id_hex(&self) -> String {
        format!("{:032x}", self.trace_id)
    }
}

impl std::fmt::Display for TraceParent {
    /// The header value: `00-{trace id}-{span id}-{flags}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "00-{:032x}-{:016x}-{:02x}", self.trace_id, self.span_id, self.flags)
    }
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

#[cfg(test)]
mod tests {
    use super::TraceParent;

    #[test]
    fn a_traceparent_is_read_and_written_in_the_w3c_form_and_nothing_else_is_read() {
        let value = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let parsed = TraceParent::parse(value).expect("valid");
        assert_eq!(parsed.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!((parsed.span_id, parsed.flags), (0x00f0_67aa_0ba9_02b7, 1));
        assert_eq!(parsed.to_string(), value);
        for invalid in [
            "",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(invalid), None, "{invalid:?}");
        }
    }
}
