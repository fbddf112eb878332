//! Retry policy: every tunable number in one place, with the defaults and why.

use super::backoff::Jitter;

/// How an intent is retried.
///
/// # Default
///
/// | field | default | why |
/// |---|---|---|
/// | `max_attempts` | 8 | with a 250 ms base the 8th attempt is ~30 s in: long enough to ride out a deploy or a brief outage, short enough that the shopper is still there |
/// | `base_delay_ms` | 250 | between AWS's 100 ms (machine clients) and Stripe's 500 ms (human-facing) |
/// | `max_delay_ms` | 20 000 | AWS's cap: one wait is never longer than 20 s |
/// | `total_timeout_ms` | 120 000 | a `send` gives up (keeping the key) after 2 minutes; "Try again" resumes |
/// | `attempt_timeout_ms` | 15 000 | one attempt that hangs is abandoned and retried with the same key |
/// | `max_retry_after_ms` | 60 000 | a server's `Retry-After` is honoured up to one minute |
/// | `jitter` | full | AWS's analysis: full jitter needs the fewest calls and completes about as fast as any |
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Attempts per `send` call, including the first (>= 1).
    pub max_attempts: u32,
    /// The first backoff step in milliseconds.
    pub base_delay_ms: u64,
    /// No single backoff wait is longer than this.
    pub max_delay_ms: u64,
    /// A `send` never waits past this many milliseconds from its start.
    pub total_timeout_ms: u64,
    /// One attempt is abandoned after this many milliseconds.
    pub attempt_timeout_ms: u64,
    /// `Retry-After` values are capped at this many milliseconds.
    pub max_retry_after_ms: u64,
    /// How backoff delays are randomised.
    pub jitter: Jitter,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 8,
            base_delay_ms: 250,
            max_delay_ms: 20_000,
            total_timeout_ms: 120_000,
            attempt_timeout_ms: 15_000,
            max_retry_after_ms: 60_000,
            jitter: Jitter::Full,
        }
    }
}

/// How long a key stays usable by default: Stripe keeps keys for 24 hours.
pub const DEFAULT_KEY_TTL_MS: u64 = 24 * 60 * 60 * 1000;

/// Upper bound accepted for any duration option (about 30 days), so arithmetic never overflows.
pub const MAX_DURATION_MS: u64 = 30 * 24 * 60 * 60 * 1000;

/// Upper bound accepted for `max_attempts`.
pub const MAX_ATTEMPTS_LIMIT: u32 = 1_000;

impl RetryPolicy {
    /// Checks the policy; the error names the offending field (in its JavaScript spelling).
    pub fn validate(&self) -> Result<(), String> {
        if self.max_attempts == 0 || self.max_attempts > MAX_ATTEMPTS_LIMIT {
            return Err(format!("retry.maxAttempts must be between 1 and {MAX_ATTEMPTS_LIMIT}"));
        }
        let durations = [
            ("retry.baseDelayMs", self.base_delay_ms),
            ("retry.maxDelayMs", self.max_delay_ms),
            ("retry.totalTimeoutMs", self.total_timeout_ms),
            ("retry.attemptTimeoutMs", self.attempt_timeout_ms),
            ("retry.maxRetryAfterMs", self.max_retry_after_ms),
        ];
        for (name, value) in durations {
            if value > MAX_DURATION_MS {
                return Err(format!("{name} must be at most {MAX_DURATION_MS} ms"));
            }
        }
        if self.attempt_timeout_ms == 0 {
            return Err("retry.attemptTimeoutMs must be greater than 0".into());
        }
        if self.max_delay_ms < self.base_delay_ms {
            return Err("retry.maxDelayMs must be at least retry.baseDelayMs".into());
        }
        Ok(())
    }
}
