//! The outbox's retry schedule: the client crate's capped exponential backoff with full jitter, the same
//! code the browser package retries with. The `outbox` worker draws its randomness from the OS;
//! the Node half (server/node, through its wasm core) passes random bytes in.

use std::time::Duration;

use idempotent_fetch::machine::{Backoff, Jitter, Policy, RandomSource};

/// Past this many steps the cap has long been reached; the schedule stays the same.
pub const MAX_STEPS: i64 = 32;

/// The wait before the next attempt of a message that failed `attempts` times: the `attempts`-th delay of
/// the client crate's full-jitter schedule (uniform in `[0, min(max, base * 2^(attempts - 1))]`). A failed
/// random source waits the cap rather than retrying at once.
pub fn retry_delay(base: Duration, max: Duration, attempts: i64, random: &dyn RandomSource) -> Duration {
    let max_ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
    let policy = Policy {
        base_delay_ms: u64::try_from(base.as_millis()).unwrap_or(u64::MAX),
        max_delay_ms: max_ms,
        jitter: Jitter::Full,
        max_attempts: 64,
        ..Policy::default()
    };
    let mut backoff = Backoff::new(&policy);
    let mut delay = max_ms;
    for _ in 0..attempts.clamp(1, MAX_STEPS) {
        delay = backoff.next_delay(random).unwrap_or(max_ms);
    }
    Duration::from_millis(delay)
}
