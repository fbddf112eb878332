//! Errors of the stores.

#[cfg(feature = "runtime")]
use axum::response::{IntoResponse, Response};

#[cfg(feature = "runtime")]
use crate::problem::Problem;

/// What went wrong in the key store (not in the app's work).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[cfg(feature = "sqlite")]
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL failed.
    #[cfg(feature = "postgres")]
    #[error("postgres: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// A stored value could not be decoded (the row was written by something else, or damaged).
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
    /// The answer is larger than [`crate::MAX_STORED_BODY_BYTES`]: nothing was committed.
    #[error("response of {0} bytes is too large to store")]
    ResponseTooLarge(usize),
    /// The scope is longer than 255 bytes.
    #[error("scope of {0} bytes is longer than 255")]
    ScopeTooLong(usize),
    /// An inbox source or message id is empty or longer than [`crate::inbox::MAX_INBOX_ID_BYTES`].
    #[error("inbox {0} of {1} bytes: it must be 1 to 255 bytes")]
    InboxId(&'static str, usize),
    /// The key could not be decided now: another transaction holds its row (PostgreSQL: the statement gave
    /// up after `lock_timeout` or the session's `statement_timeout`, see
    /// [`crate::postgres::KEY_LOCK_TIMEOUT`]) or the database's write lock (SQLite: busy after
    /// [`crate::sqlite::BUSY_TIMEOUT`]). Nothing was done: answer it as a key in flight (409 with
    /// `Retry-After`), and a retry with the same key decides it.
    #[error("the key is busy: another transaction holds its row and the wait for it ran out")]
    KeyBusy,
    /// The caller's lease on a key row was taken over (it ran out): nothing was written.
    #[error("the key's lease was taken over by another request")]
    LeaseLost,
    /// A store implemented outside this crate (an app's own [`crate::outbox::OutboxStore`]) failed.
    #[error("store: {0}")]
    Backend(Box<dyn std::error::Error + Send + Sync>),
    /// The blocking task running the transaction failed (it panicked or the runtime is shutting down).
    #[error("store task failed: {0}")]
    Task(String),
}

/// The failure of [`crate::sqlite::SqliteKeys::run`] or [`crate::postgres::run`] (and of the inbox's
/// `receive`): the store's, or the app's own work's. Either way it was rolled back: no key row (or inbox
/// record), no business change, so a retry with the same key (a re-delivery of the message) does the work.
#[derive(Debug, thiserror::Error)]
pub enum RunError<E> {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The app's work returned an error (and nothing it wrote was committed).
    #[error("the work failed: {0}")]
    Work(E),
}

#[cfg(feature = "runtime")]
impl<E: IntoResponse> IntoResponse for RunError<E> {
    /// The work's own error as it answers; a busy key ([`StoreError::KeyBusy`]) as a key in flight (409 with
    /// `Retry-After`); any other store failure as a 500 that says a retry with the same key is safe (the
    /// cause is logged, not sent).
    fn into_response(self) -> Response {
        match self {
            RunError::Work(error) => error.into_response(),
            RunError::Store(StoreError::KeyBusy) => crate::outcome::Outcome::in_flight_problem().into_response(),
            RunError::Store(error) => {
                tracing::error!(%error, "idempotency store failed");
                Problem::internal().into_response()
            }
        }
    }
}

/// A scope within the key columns' bound (at most 255 bytes), else [`StoreError::ScopeTooLong`].
pub fn check_scope(scope: &str) -> Result<(), StoreError> {
    if scope.len() > 255 {
        return Err(StoreError::ScopeTooLong(scope.len()));
    }
    Ok(())
}
