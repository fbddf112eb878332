//! The retry policy: every tunable number in one place, with the defaults, their limits, and the
//! jitter modes beside them.

/// How a backoff delay is randomised. `exp = min(cap, base * 2^n)` for the n-th retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Jitter {
    /// `uniform(0, exp)`: the default; fewest calls under contention.
    #[default]
    Full,
    /// `exp/2 + uniform(0, exp/2)`: never retries immediately.
    Equal,
    /// `min(cap, uniform(base, previous * 3))`: spreads out without a fixed schedule.
    Decorrelated,
    /// `exp` exactly: plain capped exponential backoff (every client retries in lockstep).
    None,
}

impl Jitter {
    /// The boundary's number: 0 full, 1 equal, 2 decorrelated, 3 none.
    pub fn from_index(index: u32) -> Option<Self> {
        match index {
            0 => Some(Self::Full),
            1 => Some(Self::Equal),
            2 => Some(Self::Decorrelated),
            3 => Some(Self::None),
            _ => None,
        }
    }
}

/// How an intent is retried, and how long its key lives.
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
/// | `key_ttl_ms` | 24 h | Stripe keeps keys for 24 hours |
/// | `retry_budget` | 500 | AWS standard mode's bucket (see [`crate::machine::budget`]) |
/// | `sf_header` | false | the raw key (Stripe); true sends the IETF draft's sf-string |
/// | `max_total_attempts` | 0 (none) | an app may bound an intent's attempts across sends and reloads |
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Attempts per `send`, including the first (`1..=MAX_ATTEMPTS_LIMIT`).
    pub max_attempts: u32,
    /// The first backoff step in milliseconds.
    pub base_delay_ms: u64,
    /// No single backoff wait is longer than this (`>= base_delay_ms`).
    pub max_delay_ms: u64,
    /// A `send` never waits past this many milliseconds from its start.
    pub total_timeout_ms: u64,
    /// One attempt is abandoned after this many milliseconds (`> 0`).
    pub attempt_timeout_ms: u64,
    /// `Retry-After` values are capped at this many milliseconds.
    pub max_retry_after_ms: u64,
    /// How backoff delays are randomised.
    pub jitter: Jitter,
    /// Keys older than this are never re-sent (`EXPIRED`), and the sweep retires them (`> 0`).
    pub key_ttl_ms: u64,
    /// Capacity of the client-wide retry budget (`0..=MAX_RETRY_BUDGET`; 0 disables retries).
    pub retry_budget: u32,
    /// Whether the key header is the sf-string form (`"<key>"`).
    pub sf_header: bool,
    /// Attempts of one intent across every send and page load (0: no limit; `..=MAX_TOTAL_ATTEMPTS`).
    pub max_total_attempts: u32,
    /// Whether the app configured how to ask the server about a key (`statusUrl` or `reconcile`):
    /// then the machine asks where it would give up with a key it cannot explain.
    pub reconcile: bool,
}

/// Upper bound for any duration option (about 30 days), so arithmetic never overflows.
pub const MAX_DURATION_MS: u64 = 30 * 24 * 60 * 60 * 1000;
/// Upper bound for `max_attempts`.
pub const MAX_ATTEMPTS_LIMIT: u32 = 1_000;
/// Upper bound for `retry_budget`.
pub const MAX_RETRY_BUDGET: u32 = 1_000_000;
/// Upper bound for `max_total_attempts`.
pub const MAX_TOTAL_ATTEMPTS: u32 = 1_000_000;
/// The default key lifetime: Stripe keeps keys for 24 hours.
pub const DEFAULT_KEY_TTL_MS: u64 = 24 * 60 * 60 * 1000;

impl Default for Policy {
    fn default() -> Self {
        Self {
            max_attempts: 8,
            base_delay_ms: 250,
            max_delay_ms: 20_000,
            total_timeout_ms: 120_000,
            attempt_timeout_ms: 15_000,
            max_retry_after_ms: 60_000,
            jitter: Jitter::Full,
            key_ttl_ms: DEFAULT_KEY_TTL_MS,
            retry_budget: super::budget::DEFAULT_CAPACITY,
            sf_header: false,
            max_total_attempts: 0,
            reconcile: false,
        }
    }
}

/// Argument indexes of `Engine::new` (the detail of `INVALID_OPTIONS`).
pub mod option {
    /// `maxAttempts`.
    pub const MAX_ATTEMPTS: u8 = 0;
    /// `baseDelayMs`.
    pub const BASE_DELAY_MS: u8 = 1;
    /// `maxDelayMs`.
    pub const MAX_DELAY_MS: u8 = 2;
    /// `totalTimeoutMs`.
    pub const TOTAL_TIMEOUT_MS: u8 = 3;
    /// `attemptTimeoutMs`.
    pub const ATTEMPT_TIMEOUT_MS: u8 = 4;
    /// `maxRetryAfterMs`.
    pub const MAX_RETRY_AFTER_MS: u8 = 5;
    /// `jitter`.
    pub const JITTER: u8 = 6;
    /// `keyTtlMs`.
    pub const KEY_TTL_MS: u8 = 7;
    /// `retryBudget`.
    pub const RETRY_BUDGET: u8 = 8;
    /// `sfHeader` (a boolean: never out of range).
    pub const SF_HEADER: u8 = 9;
    /// `maxTotalAttempts`.
    pub const MAX_TOTAL_ATTEMPTS: u8 = 10;
}

impl Policy {
    /// Checks every range; `Err` is the argument index of the first option out of range.
    pub fn validate(&self) -> Result<(), u8> {
        if self.max_attempts == 0 || self.max_attempts > MAX_ATTEMPTS_LIMIT {
            return Err(option::MAX_ATTEMPTS);
        }
        let durations = [
            (option::BASE_DELAY_MS, self.base_delay_ms),
            (option::MAX_DELAY_MS, self.max_delay_ms),
            (option::TOTAL_TIMEOUT_MS, self.total_timeout_ms),
            (option::ATTEMPT_TIMEOUT_MS, self.attempt_timeout_ms),
            (option::MAX_RETRY_AFTER_MS, self.max_retry_after_ms),
            (option::KEY_TTL_MS, self.key_ttl_ms),
        ];
        if let Some((index, _)) = durations.iter().find(|(_, value)| *value > MAX_DURATION_MS) {
            return Err(*index);
        }
        if self.max_delay_ms < self.base_delay_ms {
            return Err(option::MAX_DELAY_MS);
        }
        if self.attempt_timeout_ms == 0 {
            return Err(option::ATTEMPT_TIMEOUT_MS);
        }
        if self.key_ttl_ms == 0 {
            return Err(option::KEY_TTL_MS);
        }
        if self.retry_budget > MAX_RETRY_BUDGET {
            return Err(option::RETRY_BUDGET);
        }
        if self.max_total_attempts > MAX_TOTAL_ATTEMPTS {
            return Err(option::MAX_TOTAL_ATTEMPTS);
        }
        Ok(())
    }
}
