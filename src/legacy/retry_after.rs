//! `Retry-After` parsing: delay-seconds or an HTTP-date (RFC 9110 §10.2.3).

use std::time::{Duration, UNIX_EPOCH};

/// The wait a `Retry-After` value asks for, in milliseconds, capped at `cap_ms`.
///
/// `now_ms` is the current time (ms since the epoch) for the HTTP-date form. A date in the past
/// means "now" (0). Anything unparseable (negative numbers, fractions, junk, absurd lengths) yields
/// `None`, and the caller falls back to its own backoff.
pub fn parse_retry_after(value: &str, now_ms: u64, cap_ms: u64) -> Option<u64> {
    let value = value.trim();
    if value.is_empty() || value.len() > 64 {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        // Huge digit strings saturate rather than fail: "wait a very long time" is capped anyway.
        let seconds = value.parse::<u64>().unwrap_or(u64::MAX);
        return Some(seconds.saturating_mul(1000).min(cap_ms));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    let when_ms = when.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_millis();
    let when_ms = u64::try_from(when_ms).unwrap_or(u64::MAX);
    Some(when_ms.saturating_sub(now_ms).min(cap_ms))
}
