//! The client-wide retry budget: a token bucket, so an outage cannot turn a page of requests into a
//! retry storm (anchor: the AWS SDKs' "standard" retry mode).

use super::classify::RetryReason;
#[cfg(doc)]
use super::classify::THROTTLING_STATUSES;

/// A token bucket shared by every intent of one client (one `Engine`).
///
/// # Default
///
/// | number | value | AWS standard mode |
/// |---|---|---|
/// | capacity (and initial tokens) | 500 | 500 |
/// | a retry after throttling ([`THROTTLING_STATUSES`]: 409, 423, 429, 503; a key in flight) | 5 | 5 |
/// | a retry after a transient error (5xx, network, timeout) | 10 | 10 (timeouts) |
/// | a success on the first attempt | +1 | +1 |
/// | a success after retries | refunds what its last retry cost | same |
///
/// So from full, a client can spend 50 transient retries (or 100 throttled ones) before it stops
/// retrying and fails fast with `RETRIES_EXHAUSTED` (detail budget); successes refill it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryBudget {
    capacity: u32,
    tokens: u32,
}

/// Cost of a retry after the server pushed back.
pub const THROTTLING_RETRY_COST: u32 = 5;
/// Cost of a retry after a transient error.
pub const TRANSIENT_RETRY_COST: u32 = 10;
/// Refill on a first-attempt success.
pub const SUCCESS_INCREMENT: u32 = 1;
/// Default capacity.
pub const DEFAULT_CAPACITY: u32 = crate::contract::OPTIONS[crate::contract::Opt::RetryBudget as usize].default as u32;

impl Default for RetryBudget {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY)
    }
}

impl RetryBudget {
    /// A full bucket of `capacity` tokens. Capacity 0 disables retries altogether.
    pub fn new(capacity: u32) -> Self {
        Self { capacity, tokens: capacity }
    }

    /// Tokens left.
    pub fn tokens(&self) -> u32 {
        self.tokens
    }

    /// What a retry for `reason` costs.
    pub fn cost(reason: RetryReason) -> u32 {
        if reason.is_throttling() {
            THROTTLING_RETRY_COST
        } else {
            TRANSIENT_RETRY_COST
        }
    }

    /// Takes the cost of one retry; `None` (and nothing taken) when the bucket cannot pay.
    pub fn try_acquire(&mut self, reason: RetryReason) -> Option<u32> {
        let cost = Self::cost(reason);
        self.tokens = self.tokens.checked_sub(cost)?;
        Some(cost)
    }

    /// Records a success; `last_retry_cost` is what the retry that led to it cost, if any.
    pub fn on_success(&mut self, last_retry_cost: Option<u32>) {
        let refill = last_retry_cost.unwrap_or(SUCCESS_INCREMENT);
        self.tokens = self.tokens.saturating_add(refill).min(self.capacity);
    }
}
