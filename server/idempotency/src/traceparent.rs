//! The W3C `traceparent` value (`00-{trace id}-{span id}-{flags}`): read and written in one place, for the
//! Rust library's spans and, compiled to wasm, for the Node half's (server/node). Pure text, no I/O: the
//! protocol layer. A key row and an outbox message keep only a value [`TraceParent::parse`] accepts.

/// The header that carries the trace context of a request or a delivery (W3C Trace Context).
pub const TRACEPARENT_HEADER: &str = "traceparent";

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

/// `value` in the W3C form when [`TraceParent::parse`] accepts it, else `None`: what a key row or an outbox
/// message may keep (never other header text).
pub fn valid(value: &str) -> Option<String> {
    TraceParent::parse(value).map(|parsed| parsed.to_string())
}

#[cfg(test)]
mod tests {
    use super::{valid, TraceParent};

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
            assert_eq!(valid(invalid), None, "{invalid:?}");
        }
        assert_eq!(valid(&format!(" {value} ")).as_deref(), Some(value));
    }
}
