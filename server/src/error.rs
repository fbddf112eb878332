//! The error of starting or running the server.

use crate::store::StoreError;

/// Errors starting or running the server.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Binding or serving failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The database could not be opened or migrated.
    #[error("database: {0}")]
    Store(#[from] StoreError),
    /// A flag has an unusable value.
    #[error("configuration: {0}")]
    Config(String),
}
