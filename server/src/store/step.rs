//! The protocol step's knobs and work, and how its outcome comes back from the library: both backends run
//! the step as the library's `run` (`idempotent_endpoint::sqlite::run_in`, `postgres::run`), with the order
//! insert as the work inside the key's transaction.

use std::time::Duration;

use idempotent_endpoint::RunError;

use crate::protocol::{KeyedRequest, Work};

use super::error::StoreError;

/// Knobs for one protocol step, for fault injection and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessOptions {
    /// Simulated slow work. SQLite sleeps while the key is in the in-flight set but before its (single-writer)
    /// transaction; PostgreSQL sleeps inside the transaction, with the key locked.
    pub work_delay: Option<Duration>,
    /// Simulates a crash after the order was written but before the commit: the work fails, the
    /// transaction is rolled back and [`StoreError::InjectedCrash`] returned.
    pub fail_before_commit: bool,
}

/// The work of a fresh key: builds the order (or the refusal) from the request, inside the transaction.
pub type WorkFn = Box<dyn FnOnce(&KeyedRequest) -> Work + Send>;

/// The store's answer for the library's: the work's own error as it is, any failure of the library's as
/// [`library_error`] maps it.
pub(crate) fn outcome<T>(result: Result<T, RunError<StoreError>>) -> Result<T, StoreError> {
    result.map_err(|error| match error {
        RunError::Work(error) => error,
        RunError::Store(error) => library_error(error),
    })
}

/// A failure of the library's as the store's: a busy key (another transaction held its row past the
/// library's wait) as [`StoreError::KeyBusy`], a lease taken over as [`StoreError::LeaseLost`] and an answer
/// too large to store as [`StoreError::ResponseTooLarge`] (the handlers answer those), anything else as
/// [`StoreError::Keys`].
pub(crate) fn library_error(error: idempotent_endpoint::StoreError) -> StoreError {
    match error {
        idempotent_endpoint::StoreError::KeyBusy => StoreError::KeyBusy,
        idempotent_endpoint::StoreError::LeaseLost => StoreError::LeaseLost,
        idempotent_endpoint::StoreError::ResponseTooLarge(bytes) => StoreError::ResponseTooLarge(bytes),
        error => StoreError::Keys(error),
    }
}

/// The answer a `finish` stored: the library's fresh outcome (a finished step never replays).
pub(crate) fn stored(outcome: crate::protocol::Outcome) -> Result<crate::protocol::StoredResponse, StoreError> {
    match outcome {
        crate::protocol::Outcome::Fresh(response) => Ok(response),
        other => Err(StoreError::Corrupt(format!("a finished step answered {other:?}"))),
    }
}
