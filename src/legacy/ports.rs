//! The traits through which the core meets the outside world.
//!
//! Each has a browser implementation in `crate::web` and a memory or fake twin for tests. None of them
//! is `Send`: in the browser everything runs on one thread, and requiring `Send` would rule out
//! holding JavaScript values.

use std::future::Future;

use super::intent::{IntentRecord, RecordError};

/// Milliseconds since the Unix epoch (`Date.now()` in the browser, a virtual clock in tests).
pub trait Clock {
    /// The current time in milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// Randomness for keys and jitter. Production implementations must be a CSPRNG.
pub trait RandomSource {
    /// Fills `bytes` with random bytes.
    fn fill(&mut self, bytes: &mut [u8]) -> Result<(), getrandom::Error>;

    /// A uniform `u64`; a failing source yields 0, which only shortens a jittered delay.
    fn next_u64(&mut self) -> u64 {
        let mut bytes = [0u8; 8];
        match self.fill(&mut bytes) {
            Ok(()) => u64::from_le_bytes(bytes),
            Err(_) => 0,
        }
    }
}

/// The operating system's (or the browser's `crypto.getRandomValues`) CSPRNG through getrandom.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsRandom;

impl RandomSource for OsRandom {
    fn fill(&mut self, bytes: &mut [u8]) -> Result<(), getrandom::Error> {
        getrandom::fill(bytes)
    }
}

/// Why waiting stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupted;

/// Waiting: backoff sleeps and waiting for the network to come back.
///
/// Implementations return [`Interrupted`] as soon as the caller aborts (the caller's `AbortSignal`).
pub trait Waiter {
    /// Sleeps for `ms` milliseconds, or until aborted.
    fn sleep(&self, ms: u64) -> impl Future<Output = Result<(), Interrupted>>;

    /// Whether the platform believes it is online (`navigator.onLine`). Defaults to `true`.
    fn is_online(&self) -> bool {
        true
    }

    /// Waits until the platform reports it is online, at most `max_ms`, or until aborted.
    /// Returns `Ok(true)` when online, `Ok(false)` when `max_ms` passed first.
    fn wait_online(&self, max_ms: u64) -> impl Future<Output = Result<bool, Interrupted>> {
        async move {
            self.sleep(max_ms).await?;
            Ok(self.is_online())
        }
    }
}

/// The request as the transport sends it on one attempt.
#[derive(Debug, Clone, Copy)]
pub struct AttemptRequest<'a> {
    /// The header value of the key (raw token or sf-string, as configured).
    pub key_header_value: &'a str,
    /// Which attempt this is within the current `send` (1-based).
    pub attempt: u32,
    /// How long this attempt may take before it is abandoned.
    pub timeout_ms: u64,
}

/// What went wrong below HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportError {
    /// The connection failed, was reset, or the response could not be read.
    Network(String),
    /// The attempt exceeded its timeout.
    Timeout,
    /// The caller aborted.
    Aborted,
}

/// A response as far as the core needs to see it.
pub trait HttpResponse {
    /// The HTTP status code.
    fn status(&self) -> u16;
    /// A response header, by case-insensitive name.
    fn header(&self, name: &str) -> Option<String>;
    /// Called when the response will not be handed to the caller (it is retried), so its body can
    /// be released. Defaults to doing nothing.
    fn release(&self) {}
}

/// Sends the (already buffered) request of one intent with its key.
pub trait Transport {
    /// The response type handed back to the caller on a definite answer.
    type Response: HttpResponse;

    /// Sends one attempt.
    fn send(&self, attempt: AttemptRequest<'_>) -> impl Future<Output = Result<Self::Response, TransportError>>;
}

/// Why the store could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The stored value exists but is not a valid record; it was not used.
    #[error("stored intent is corrupt: {0}")]
    Corrupt(#[from] RecordError),
    /// The storage refused the operation (blocked, full, closed).
    #[error("storage unavailable: {0}")]
    Unavailable(String),
}

/// Where intent records live between page loads.
pub trait IntentStore {
    /// The record for `intent_id`, if there is one. A corrupt record is an error, never a silent `None`.
    fn load(&self, intent_id: &str) -> impl Future<Output = Result<Option<IntentRecord>, StoreError>>;
    /// Writes (creates or replaces) a record.
    fn save(&self, record: &IntentRecord) -> impl Future<Output = Result<(), StoreError>>;
    /// Deletes a record; deleting a missing one is not an error.
    fn remove(&self, intent_id: &str) -> impl Future<Output = Result<(), StoreError>>;
    /// Every valid record; corrupt entries are skipped (and may be reported by the implementation).
    fn list(&self) -> impl Future<Output = Result<Vec<IntentRecord>, StoreError>>;
}

/// Progress reports for the UI. Every method has an empty default.
pub trait Observer {
    /// An attempt is about to be sent.
    fn on_attempt(&self, _event: &AttemptEvent<'_>) {}
    /// An attempt failed in a retryable way; the next one starts after `delay_ms`.
    fn on_retry(&self, _event: &RetryEvent<'_>) {}
    /// The browser is offline; waiting for it to come back.
    fn on_offline(&self, _key: &str) {}
}

/// Reported before each attempt.
#[derive(Debug, Clone, Copy)]
pub struct AttemptEvent<'a> {
    /// The intent's key.
    pub key: &'a str,
    /// Attempt number within this `send`, 1-based.
    pub attempt: u32,
    /// Attempts across every `send` of this intent, including earlier page loads.
    pub total_attempts: u32,
}

/// Reported after a retryable outcome, before sleeping.
#[derive(Debug, Clone, Copy)]
pub struct RetryEvent<'a> {
    /// The intent's key (unchanged on every retry).
    pub key: &'a str,
    /// The attempt that just failed, 1-based.
    pub attempt: u32,
    /// How long until the next attempt.
    pub delay_ms: u64,
    /// Why it is retried, e.g. `"status 503"`, `"network error"`, `"timeout"`.
    pub reason: &'a str,
    /// The HTTP status of the failed attempt, if there was a response.
    pub status: Option<u16>,
}
