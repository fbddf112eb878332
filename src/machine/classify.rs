//! Classification of an answer: definite success, definite failure, or retry with the same key.

use super::retry_after::parse_retry_after;
use crate::contract::Reason;

/// What the driver read from one HTTP answer (header values as the `Headers` object gives them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Answer<'a> {
    /// The HTTP status (0 for an opaque response).
    pub status: u16,
    /// `Retry-After`, if present.
    pub retry_after: Option<&'a str>,
    /// `Stripe-Should-Retry`, if present.
    pub should_retry: Option<&'a str>,
    /// `Idempotent-Replayed`, if present.
    pub replayed: Option<&'a str>,
    /// The caller's `shouldRetry(status)` verdict.
    pub caller: Override,
}

pub use crate::contract::Override;

// Not derived: the enum is declared by the contract table's macro.
#[allow(clippy::derivable_impls)]
impl Default for Override {
    fn default() -> Self {
        Self::None
    }
}

impl Override {
    /// The boundary's number: 1 retry, 2 definite, anything else none.
    pub fn from_index(index: u32) -> Self {
        u8::try_from(index).ok().and_then(Self::from_u8).unwrap_or_default()
    }
}

/// What to do with an attempt's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    /// A retried status (one of [`RETRIED_STATUSES`], or by a hint or the caller's override).
    Status(u16),
    /// The connection failed or was reset.
    Network,
    /// The attempt timed out.
    Timeout,
    /// The server, asked about the key, said a request with it is still being processed.
    InFlight,
}

impl RetryReason {
    /// Whether this is the server pushing back ([`THROTTLING_STATUSES`], or a key the server said is
    /// in flight), which costs the retry budget less than a transient error (AWS standard mode's
    /// throttling cost).
    pub fn is_throttling(self) -> bool {
        match self {
            Self::Status(status) => is_throttling_status(status),
            Self::InFlight => true,
            Self::Network | Self::Timeout => false,
        }
    }

    /// The boundary's number (`Machine.reason()`, the contract's `Reason`).
    pub fn index(self) -> u32 {
        let reason = match self {
            Self::Network => Reason::Network,
            Self::Timeout => Reason::Timeout,
            Self::Status(_) => Reason::Status,
            Self::InFlight => Reason::InFlight,
        };
        reason as u32
    }
}

pub use crate::contract::{is_throttling_status, RETRIED_STATUSES, THROTTLING_STATUSES};

/// Classifies an answer. Precedence: 2xx is always success; then a replayed answer is definite
/// (the server stored that outcome for this key: retrying can never change it); then the caller's
/// override; then the server's `Stripe-Should-Retry` hint; then the status table. A retried
/// answer's `Retry-After` (seconds or HTTP-date) is read relative to `now_ms` and capped at
/// `max_retry_after_ms`.
pub fn classify(answer: &Answer<'_>, now_ms: u64, max_retry_after_ms: u64) -> Classification {
    let status = answer.status;
    if (200..=299).contains(&status) {
        return Classification::Success;
    }
    let retry = !is_replayed(answer.replayed)
        && match answer.caller {
            Override::Retry => true,
            Override::Definite => false,
            Override::None => {
                answer.should_retry.and_then(should_retry_hint).unwrap_or(RETRIED_STATUSES.contains(&status))
            }
        };
    if retry {
        let after_ms = answer.retry_after.and_then(|value| parse_retry_after(value, now_ms, max_retry_after_ms));
        return Classification::Retry { reason: RetryReason::Status(status), after_ms };
    }
    if status == 422 {
        Classification::Failure(FailureReason::KeyMismatch)
    } else {
        Classification::Failure(FailureReason::Status(status))
    }
}

/// `Stripe-Should-Retry: true|false`, when well-formed.
fn should_retry_hint(value: &str) -> Option<bool> {
    match value.trim_ascii() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// Whether a replay header's value says the server replayed a stored answer (`true`, any case, with
/// surrounding whitespace). Which header names count is the driver's list (`Idempotent-Replayed`,
/// `Idempotency-Replayed`, ... and the app's own); it hands over the first one present.
pub fn is_replayed(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.trim_ascii().eq_ignore_ascii_case("true"))
}
