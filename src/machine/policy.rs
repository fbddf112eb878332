//! The retry policy: every tunable number in one place, with the defaults, their limits, and the
//! jitter modes beside them.

pub use crate::contract::{Jitter, Opt, MAX_DURATION_MS, OPTIONS, OPTION_COUNT};

// Not derived: the enum is declared by the contract table's macro.
#[allow(clippy::derivable_impls)]
impl Default for Jitter {
    fn default() -> Self {
        Self::Full
    }
}

impl Jitter {
    /// The boundary's number: 0 full, 1 equal, 2 decorrelated, 3 none.
    pub fn from_index(index: u32) -> Option<Self> {
        u8::try_from(index).ok().and_then(Self::from_u8)
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
    /// The status a server answers replays with instead of the stored one (`replayStatus`; 0:
    /// none). Such servers (django-idempotency-key) store only the answers of requests they
    /// completed, so the answer is the key's success, its original status unseen.
    pub replay_status: u16,
}

/// Upper bound for `max_attempts`.
pub const MAX_ATTEMPTS_LIMIT: u32 = OPTIONS[Opt::MaxAttempts as usize].max as u32;
/// Upper bound for `retry_budget`.
pub const MAX_RETRY_BUDGET: u32 = OPTIONS[Opt::RetryBudget as usize].max as u32;
/// Upper bound for `max_total_attempts`.
pub const MAX_TOTAL_ATTEMPTS: u32 = OPTIONS[Opt::MaxTotalAttempts as usize].max as u32;
pub use crate::contract::DEFAULT_KEY_TTL_MS;

impl Default for Policy {
    /// The defaults of the contract table ([`OPTIONS`]): the ones that ship.
    fn default() -> Self {
        let mut values = [0; OPTION_COUNT];
        for (value, spec) in values.iter_mut().zip(OPTIONS) {
            *value = spec.default;
        }
        Self::from_values(&values)
    }
}

impl Policy {
    /// The policy of option values by [`Opt`] index, once they pass every range of the table and `maxDelayMs >= baseDelayMs` (`Err`: the
    /// index of the first option out of range).
    pub fn checked(values: &[u64; OPTION_COUNT]) -> Result<Self, u8> {
        Self::check(values)?;
        Ok(Self::from_values(values))
    }

    /// Every range of the contract table, then `maxDelayMs >= baseDelayMs`.
    fn check(values: &[u64; OPTION_COUNT]) -> Result<(), u8> {
        if let Some(index) = values.iter().zip(OPTIONS).position(|(&v, spec)| v < spec.min || v > spec.max) {
            return Err(index as u8);
        }
        if values[Opt::MaxDelayMs as usize] < values[Opt::BaseDelayMs as usize] {
            return Err(Opt::MaxDelayMs as u8);
        }
        Ok(())
    }

    /// The policy of option values by [`Opt`] index, each within its range (else truncated).
    fn from_values(values: &[u64; OPTION_COUNT]) -> Self {
        let value = |opt: Opt| values[opt as usize];
        Self {
            max_attempts: value(Opt::MaxAttempts) as u32,
            base_delay_ms: value(Opt::BaseDelayMs),
            max_delay_ms: value(Opt::MaxDelayMs),
            total_timeout_ms: value(Opt::TotalTimeoutMs),
            attempt_timeout_ms: value(Opt::AttemptTimeoutMs),
            max_retry_after_ms: value(Opt::MaxRetryAfterMs),
            jitter: u8::try_from(value(Opt::Jitter)).ok().and_then(Jitter::from_u8).unwrap_or_default(),
            key_ttl_ms: value(Opt::KeyTtlMs),
            retry_budget: value(Opt::RetryBudget) as u32,
            sf_header: value(Opt::HeaderForm) == 1,
            max_total_attempts: value(Opt::MaxTotalAttempts) as u32,
            reconcile: value(Opt::Reconcile) == 1,
            replay_status: value(Opt::ReplayStatus) as u16,
        }
    }

    /// The option values by [`Opt`] index.
    pub fn values(&self) -> [u64; OPTION_COUNT] {
        let mut values = [0; OPTION_COUNT];
        let mut set = |opt: Opt, value: u64| values[opt as usize] = value;
        set(Opt::MaxAttempts, self.max_attempts.into());
        set(Opt::BaseDelayMs, self.base_delay_ms);
        set(Opt::MaxDelayMs, self.max_delay_ms);
        set(Opt::TotalTimeoutMs, self.total_timeout_ms);
        set(Opt::AttemptTimeoutMs, self.attempt_timeout_ms);
        set(Opt::MaxRetryAfterMs, self.max_retry_after_ms);
        set(Opt::Jitter, self.jitter as u64);
        set(Opt::KeyTtlMs, self.key_ttl_ms);
        set(Opt::RetryBudget, self.retry_budget.into());
        set(Opt::HeaderForm, self.sf_header.into());
        set(Opt::MaxTotalAttempts, self.max_total_attempts.into());
        set(Opt::Reconcile, self.reconcile.into());
        set(Opt::ReplayStatus, self.replay_status.into());
        values
    }

    /// Checks every range of the contract table, then that `max_delay_ms >= base_delay_ms`; `Err` is
    /// the [`Opt`] index of the first option out of range.
    pub fn validate(&self) -> Result<(), u8> {
        Self::check(&self.values())
    }
}
