//! The protocol step's knobs and work, and how its outcome comes back from the library: both backends run
//! the step as the library's `run` (`idempotent_endpoint::sqlite::run_in`, `postgres::run`), with the order
//! insert as the work inside the key's transaction.

use std::time::Duration;

use idempotent_endpoint::RunError;

use crate::protocol::{KeyedRequest, Outcome, Work};

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

/// The store's answer for the library's: the work's own error as it is, an answer too large to store as
/// [`StoreError::ResponseTooLarge`], any other failure of the library's as [`StoreError::Keys`].
pub(crate) fn outcome(result: Result<Outcome, RunError<StoreError>>) -> Result<Outcome, StoreError> {
    match result {
        Ok(outcome) => Ok(outcome),
        Err(RunError::Work(error)) => Err(error),
        Err(RunError::Store(idempotent_endpoint::StoreError::ResponseTooLarge(bytes))) => {
            Err(StoreError::ResponseTooLarge(bytes))
        }
        Err(RunError::Store(error)) => Err(StoreError::Keys(error)),
    }
}
