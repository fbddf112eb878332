//! Work that leaves the database, for the Node half: the outbox's retry schedule (the client crate's
//! backoff, through [`idempotent_endpoint::retry_schedule`]) fed with random bytes from JavaScript, and the
//! answers of inbox records.

use std::cell::Cell;
use std::time::Duration;

use idempotent_fetch::machine::{RandomFailed, RandomSource};

/// Random bytes handed over by JavaScript (`crypto.getRandomValues`), drawn front to back; running out is
/// a failed source, which the schedule answers with its cap, never with a zero delay.
pub(crate) struct GivenBytes {
    bytes: Vec<u8>,
    next: Cell<usize>,
}

impl GivenBytes {
    /// The bytes, none drawn yet.
    pub(crate) fn new(bytes: Vec<u8>) -> Self {
        GivenBytes { bytes, next: Cell::new(0) }
    }
}

impl RandomSource for GivenBytes {
    fn fill(&self, out: &mut [u8]) -> Result<(), RandomFailed> {
        let start = self.next.get();
        let end = start.checked_add(out.len()).ok_or(RandomFailed)?;
        let taken = self.bytes.get(start..end).ok_or(RandomFailed)?;
        out.copy_from_slice(taken);
        self.next.set(end);
        Ok(())
    }
}

/// Bytes of randomness the schedule can draw for one delay: one `u64` per step, at most
/// [`idempotent_endpoint::retry_schedule::MAX_STEPS`] steps.
pub(crate) const RANDOM_BYTES: usize = 8 * idempotent_endpoint::retry_schedule::MAX_STEPS as usize;

/// [`idempotent_endpoint::retry_schedule::retry_delay`] in milliseconds, from JavaScript numbers.
pub(crate) fn retry_delay_ms(base_ms: f64, max_ms: f64, attempts: f64, random: Vec<u8>) -> f64 {
    let ms = |x: f64| Duration::from_millis(if x.is_finite() && x > 0.0 { x.floor() as u64 } else { 0 });
    let attempts = if attempts.is_finite() { attempts.floor() as i64 } else { 1 };
    let delay =
        idempotent_endpoint::retry_schedule::retry_delay(ms(base_ms), ms(max_ms), attempts, &GivenBytes::new(random));
    delay.as_millis() as f64
}
