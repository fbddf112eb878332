//! Capped exponential backoff with jitter (after backon and AWS's "Exponential Backoff And Jitter").

use super::policy::{Jitter, Policy};
use super::random::RandomSource;

/// The delays (milliseconds) before each retry of one `send`: `max_attempts - 1` of them.
///
/// Every delay lies in `[0, max_delay_ms]`. The total deadline is enforced by the machine, which
/// knows the clock. The randomness is passed to each [`Backoff::next_delay`] call, so the state
/// holds no borrow and lives inside the machine between events.
#[derive(Clone, Debug)]
pub struct Backoff {
    jitter: Jitter,
    base: u64,
    cap: u64,
    retry: u32,
    remaining: u32,
    previous: u64,
    last_exp: u64,
}

/// Why no delay came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoDelay {
    /// Every retry of this send is used up (`max_attempts` reached).
    Exhausted,
    /// The random source failed: never a silent zero delay.
    RandomFailed,
}

impl Backoff {
    /// A fresh schedule for one `send` under `policy`.
    pub fn new(policy: &Policy) -> Self {
        Self {
            jitter: policy.jitter,
            base: policy.base_delay_ms,
            cap: policy.max_delay_ms,
            retry: 0,
            remaining: policy.max_attempts.saturating_sub(1),
            previous: policy.base_delay_ms,
            last_exp: 0,
        }
    }

    /// The jitter mode.
    pub fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// The un-jittered step `min(cap, base * 2^n)` of the last delay handed out: the width of the
    /// window a `Retry-After` wait is spread over.
    pub fn last_exp(&self) -> u64 {
        self.last_exp
    }

    /// The next delay, drawing jitter from `random`.
    pub fn next_delay(&mut self, random: &dyn RandomSource) -> Result<u64, NoDelay> {
        if self.remaining == 0 {
            return Err(NoDelay::Exhausted);
        }
        self.remaining -= 1;
        let exp = self.exponential(self.retry);
        self.last_exp = exp;
        self.retry = self.retry.saturating_add(1);
        let delay = match self.jitter {
            Jitter::Full => uniform(random, 0, exp)?,
            Jitter::Equal => exp / 2 + uniform(random, 0, exp - exp / 2)?,
            Jitter::Decorrelated => {
                let high = saturating_triple(self.previous).max(self.base);
                let next = uniform(random, self.base, high)?.min(self.cap);
                self.previous = next;
                next
            }
            Jitter::None => exp,
        };
        Ok(delay.min(self.cap))
    }

    /// `min(cap, base * 2^n)` without overflow.
    fn exponential(&self, n: u32) -> u64 {
        // base * 2^n, saturating: it fits while the shift stays within the leading zeros (a shift,
        // not a multiply with an overflow check, which is a 128-bit multiply on wasm32).
        let n = n.min(63);
        let exp = if n <= self.base.leading_zeros() { self.base << n } else { u64::MAX };
        exp.min(self.cap)
    }
}

/// Uniform in `[low, high]` (inclusive); `low` when the range is empty (no draw then).
pub fn uniform(random: &dyn RandomSource, low: u64, high: u64) -> Result<u64, NoDelay> {
    if high <= low {
        return Ok(low);
    }
    let draw = random.next_u64().map_err(|_| NoDelay::RandomFailed)?;
    Ok(match (high - low).checked_add(1) {
        Some(n) => low + draw % n,
        None => draw,
    })
}

/// `3 * x`, saturating (compared, not multiplied with an overflow check: see `exponential`).
fn saturating_triple(x: u64) -> u64 {
    if x > u64::MAX / 3 {
        u64::MAX
    } else {
        x * 3
    }
}
