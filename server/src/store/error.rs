//! The store's errors.

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL failed.
    #[error("postgres: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// The library's key rows failed (its schema, or a statement of its own).
    #[error("idempotency records: {0}")]
    Keys(#[from] idempotent_endpoint::StoreError),
    /// No pooled PostgreSQL connection could be had.
    #[error("postgres pool: {0}")]
    Pool(String),
    /// TLS to PostgreSQL could not be set up.
    #[error("postgres tls: {0}")]
    Tls(String),
    /// A stored value could not be decoded.
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
    /// The blocking or background task running the transaction failed.
    #[error("store task failed: {0}")]
    Task(String),
    /// [`crate::store::ProcessOptions::fail_before_commit`] rolled the transaction back.
    #[error("injected crash before commit")]
    InjectedCrash,
    /// The key is busy elsewhere and nothing was done: another transaction held its row past the library's
    /// wait (`idempotent_endpoint::StoreError::KeyBusy`), or the provider is still making its charge.
    /// Answered as 409, like a key in flight.
    #[error("the key is busy elsewhere")]
    KeyBusy,
    /// The caller's lease on a key row was taken over (it ran out): the phase was rolled back.
    #[error("the key's lease was taken over by another request")]
    LeaseLost,
    /// The answer is larger than [`crate::protocol::MAX_STORED_BODY_BYTES`]: not stored, rolled back.
    #[error("response of {0} bytes is too large to store")]
    ResponseTooLarge(usize),
}
