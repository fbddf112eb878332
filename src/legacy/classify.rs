//! Classification of an answer: definite success, definite failure, or retry with the same key.

use super::ports::HttpResponse;
use super::retry_after::parse_retry_after;

/// What to do with an attempt's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Classification {
    /// 2xx: the work is done (or was replayed); retire the key.
    Success,
    /// A definite answer that is not success; retire the key.
    Failure(FailureReason),
    /// Not definite: send again with the same key.
    Retry {
        /// Why.
        reason: RetryReason,
        /// The server's `Retry-After`, already capped, in milliseconds.
        after_ms: Option<u64>,
    },
}

/// Why a definite answer is a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureReason {
    /// 422: the server saw this key with a different request (`KEY_MISMATCH`).
    KeyMismatch,
    /// Any other non-retried status (a 4xx the user must fix, a 501, ...).
    Status(u16),
}

/// Why an attempt is retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryReason {
    /// A retried status (408, 409, 425, 429, 500, 502, 503, 504, or a server hint).
    Status(u16),
    /// The connection failed or was reset.
    Network,
    /// The attempt timed out.
    Timeout,
}

impl RetryReason {
    /// Whether this is the server pushing back (429, 409 in flight, 503), which costs the retry
    /// budget less than a transient error (AWS standard mode's throttling cost).
    pub fn is_throttling(self) -> bool {
        matches!(self, Self::Status(429 | 409 | 503))
    }

    /// A short human-readable reason for the UI, e.g. `"server busy (503)"`.
    pub fn describe(self) -> String {
        match self {
            Self::Status(408) => "request timeout (408)".into(),
            Self::Status(409) => "same payment still in progress (409)".into(),
            Self::Status(425) => "too early (425)".into(),
            Self::Status(429) => "rate limited (429)".into(),
            Self::Status(503) => "server busy (503)".into(),
            Self::Status(status) => format!("server error ({status})"),
            Self::Network => "network error".into(),
            Self::Timeout => "timed out".into(),
        }
    }
}

/// A caller's override of the built-in table: `Some(true)` retry, `Some(false)` definite, `None`
/// keep the default.
pub type ShouldRetryOverride<'a> = &'a dyn Fn(u16) -> Option<bool>;

/// Statuses retried with the same key.
pub const RETRIED_STATUSES: [u16; 8] = [408, 409, 425, 429, 500, 502, 503, 504];

/// Classifies a response. Precedence: 2xx is always success; then the caller's override; then the
/// server's `Stripe-Should-Retry` hint; then the status table.
pub fn classify(
    response: &dyn HttpResponse,
    now_ms: u64,
    max_retry_after_ms: u64,
    caller_override: Option<ShouldRetryOverride<'_>>,
) -> Classification {
    let status = response.status();
    if (200..=299).contains(&status) {
        return Classification::Success;
    }
    let retry = caller_override
        .and_then(|decide| decide(status))
        .or_else(|| should_retry_hint(response))
        .unwrap_or(RETRIED_STATUSES.contains(&status));
    if retry {
        let after_ms =
            response.header("retry-after").and_then(|value| parse_retry_after(&value, now_ms, max_retry_after_ms));
        return Classification::Retry { reason: RetryReason::Status(status), after_ms };
    }
    if status == 422 {
        Classification::Failure(FailureReason::KeyMismatch)
    } else {
        Classification::Failure(FailureReason::Status(status))
    }
}

/// `Stripe-Should-Retry: true|false`, when present and well-formed.
fn should_retry_hint(response: &dyn HttpResponse) -> Option<bool> {
    match response.header("stripe-should-retry")?.trim() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}
