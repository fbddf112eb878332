//! Capped exponential backoff with jitter, as an iterator of delays (after backon and AWS's
//! "Exponential Backoff And Jitter").

use super::policy::RetryPolicy;
use super::ports::RandomSource;

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
    /// Parses the JavaScript spelling: `"full" | "equal" | "decorrelated" | "none"`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "full" => Some(Self::Full),
            "equal" => Some(Self::Equal),
            "decorrelated" => Some(Self::Decorrelated),
            "none" => Some(Self::None),
            _ => None,
        }
    }
}

/// The delays (milliseconds) before each retry; yields `max_attempts - 1` values.
///
/// Every delay lies in `[0, max_delay_ms]`. The total deadline is enforced by the engine, which
/// knows the clock.
pub struct Backoff<'r> {
    jitter: Jitter,
    base: u64,
    cap: u64,
    retry: u32,
    remaining: u32,
    previous: u64,
    random: &'r mut dyn RandomSource,
}

impl<'r> Backoff<'r> {
    /// A backoff over `policy`, drawing jitter from `random`.
    pub fn new(policy: &RetryPolicy, random: &'r mut dyn RandomSource) -> Self {
        Self {
            jitter: policy.jitter,
            base: policy.base_delay_ms,
            cap: policy.max_delay_ms,
            retry: 0,
            remaining: policy.max_attempts.saturating_sub(1),
            previous: policy.base_delay_ms,
            random,
        }
    }

    /// `min(cap, base * 2^n)` without overflow.
    fn exponential(&self, n: u32) -> u64 {
        let factor = 1u64.checked_shl(n.min(63)).unwrap_or(u64::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// Uniform in `[low, high]` (inclusive); `low` when the range is empty.
    fn uniform(&mut self, low: u64, high: u64) -> u64 {
        if high <= low {
            return low;
        }
        let span = high - low;
        match span.checked_add(1) {
            Some(n) => low + self.random.next_u64() % n,
            None => self.random.next_u64(),
        }
    }
}

impl Iterator for Backoff<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let exp = self.exponential(self.retry);
        self.retry = self.retry.saturating_add(1);
        let delay = match self.jitter {
            Jitter::Full => self.uniform(0, exp),
            Jitter::Equal => exp / 2 + self.uniform(0, exp - exp / 2),
            Jitter::Decorrelated => {
                let high = self.previous.saturating_mul(3).max(self.base);
                let next = self.uniform(self.base, high).min(self.cap);
                self.previous = next;
                next
            }
            Jitter::None => exp,
        };
        Some(delay.min(self.cap))
    }
}
