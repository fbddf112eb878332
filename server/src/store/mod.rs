//! Persistence of idempotency keys and orders.
//!
//! [`Store`] is an enum over the backends (embedded SQLite by default; PostgreSQL for several server
//! instances). Every backend implements the same protocol step, [`Store::process`]: in ONE transaction,
//! insert the key row (the primary key `(account_id, key)` settles races), and if it was inserted do the
//! work (create the order) and store the response on the row, then commit. If the row already exists the
//! stored response is replayed, or the request is refused (422 for a different payload, 409 while in
//! flight). A crash anywhere before the commit leaves neither the key row nor the order behind, so a retry
//! with the same key simply does the work once.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;

use crate::keys::{AccountId, IdempotencyKey};
use crate::orders::Order;
use crate::problem::{Problem, PROBLEM_JSON};

pub mod postgres;
pub mod sqlite;

pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

/// The header set on replayed responses.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

/// A response as stored on the key row and replayed byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// HTTP status code.
    pub status: u16,
    /// Headers (lowercase names) that are part of the response, such as `content-type`.
    pub headers: Vec<(String, String)>,
    /// The body, exactly as first sent.
    pub body: String,
}

impl StoredResponse {
    /// Stores a problem (for example a body that failed validation) as the key's response.
    pub fn from_problem(problem: &Problem) -> Self {
        StoredResponse {
            status: problem.status,
            headers: vec![("content-type".to_owned(), PROBLEM_JSON.to_owned())],
            body: problem.to_json(),
        }
    }

    /// Encodes the headers for the `response_headers` column.
    pub fn encode_headers(&self) -> String {
        serde_json::to_string(&self.headers).unwrap_or_else(|_| String::from("[]"))
    }

    /// Decodes the `response_headers` column.
    pub fn decode_headers(text: &str) -> Result<Vec<(String, String)>, StoreError> {
        serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("response_headers: {e}")))
    }

    /// The stored response from the key row's `status_code`, `response_headers` and `response_body`
    /// columns; `None` while the row has no response yet (its request is in flight).
    pub fn from_columns(
        status: Option<u16>,
        headers: Option<&str>,
        body: Option<String>,
    ) -> Result<Option<Self>, StoreError> {
        let Some(status) = status else {
            return Ok(None);
        };
        Ok(Some(StoredResponse {
            status,
            headers: StoredResponse::decode_headers(headers.unwrap_or("[]"))?,
            body: body.unwrap_or_default(),
        }))
    }

    /// The HTTP response; `replayed` adds `Idempotent-Replayed: true`.
    pub fn into_http(self, replayed: bool) -> Response {
        let mut response = Response::new(Body::from(self.body));
        *response.status_mut() = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let headers = response.headers_mut();
        for (name, value) in &self.headers {
            if let (Ok(name), Ok(value)) = (HeaderName::try_from(name.as_str()), HeaderValue::try_from(value.as_str()))
            {
                headers.append(name, value);
            }
        }
        if replayed {
            headers.insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
        }
        response
    }
}

/// One keyed request, as the protocol step sees it.
#[derive(Debug, Clone)]
pub struct KeyedRequest {
    /// The account that scopes the key.
    pub account: AccountId,
    /// The idempotency key.
    pub key: IdempotencyKey,
    /// [`crate::keys::request_hash`] of the request.
    pub request_hash: String,
    /// The raw body (validated inside the transaction).
    pub body: Bytes,
    /// Unix time (seconds) used as `created_at`.
    pub now: i64,
    /// Key rows created before this unix time are expired: the request treats them as absent
    /// (and replaces them), even if the sweep has not deleted them yet.
    pub expired_before: i64,
}

/// Knobs for one protocol step, for fault injection and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessOptions {
    /// Simulated slow work. SQLite sleeps while the key is claimed but before its (single-writer)
    /// transaction; PostgreSQL sleeps inside the transaction, with the key row locked.
    pub work_delay: Option<Duration>,
    /// Simulates a crash after the order and the response were written but before the commit:
    /// the transaction is rolled back and [`StoreError::InjectedCrash`] returned.
    pub fail_before_commit: bool,
}

/// What one protocol step decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The key was new: the work was done (or the body was rejected) and the response committed with it.
    Fresh(StoredResponse),
    /// The key was used before for the same request: its stored response, to replay.
    Replay(StoredResponse),
    /// The key was used before for a different request (422).
    Mismatch,
    /// The key's first request is still being processed (409 with `Retry-After`).
    InFlight,
}

impl Outcome {
    /// Decides the outcome for an existing key row.
    pub(crate) fn for_existing(request_hash: &str, stored_hash: &str, stored: Option<StoredResponse>) -> Outcome {
        match stored {
            None => Outcome::InFlight,
            Some(_) if stored_hash != request_hash => Outcome::Mismatch,
            Some(response) => Outcome::Replay(response),
        }
    }
}

/// The columns of an `orders` row, in the order every backend selects them:
/// `id, account_id, idempotency_key, items, total_cents, currency, created_at`.
pub(crate) type OrderColumns = (String, String, String, String, i64, String, i64);

/// An order from its row; `items` is decoded from its JSON text.
pub(crate) fn decode_order(
    (id, account_id, idempotency_key, items, total_cents, currency, created_at): OrderColumns,
) -> Result<Order, StoreError> {
    let items =
        crate::orders::decode_items(&items).map_err(|e| StoreError::Corrupt(format!("order {id} items: {e}")))?;
    Ok(Order { id, account_id, idempotency_key, items, total_cents, currency, created_at })
}

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL failed.
    #[error("postgres: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// No pooled PostgreSQL connection could be had.
    #[error("postgres pool: {0}")]
    Pool(String),
    /// A stored value could not be decoded.
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
    /// The blocking or background task running the transaction failed.
    #[error("store task failed: {0}")]
    Task(String),
    /// [`ProcessOptions::fail_before_commit`] rolled the transaction back.
    #[error("injected crash before commit")]
    InjectedCrash,
    /// Another transaction holds the key (PostgreSQL lock timeout): answered as 409.
    #[error("key is locked by another transaction")]
    Locked,
}

/// The configured backend.
#[derive(Debug, Clone)]
pub enum Store {
    /// Embedded SQLite (one file, or `:memory:`).
    Sqlite(SqliteStore),
    /// PostgreSQL (several server instances may share it).
    Postgres(PostgresStore),
}

/// `$body` with `$store` bound to whichever backend `$self` holds: the backends share one API.
macro_rules! backend {
    ($self:expr, $store:ident => $body:expr) => {
        match $self {
            Store::Sqlite($store) => $body,
            Store::Postgres($store) => $body,
        }
    };
}

impl Store {
    /// The protocol step: see the module docs.
    pub async fn process(&self, request: KeyedRequest, options: ProcessOptions) -> Result<Outcome, StoreError> {
        backend!(self, store => store.process(request, options).await)
    }

    /// The account's orders, newest first, at most `limit`.
    pub async fn list_orders(&self, account: &AccountId, limit: u32) -> Result<Vec<Order>, StoreError> {
        backend!(self, store => store.list_orders(account, limit).await)
    }

    /// One of the account's orders.
    pub async fn get_order(&self, account: &AccountId, id: &str) -> Result<Option<Order>, StoreError> {
        backend!(self, store => store.get_order(account, id).await)
    }

    /// Deletes key rows created before `cutoff` (unix seconds); returns how many.
    pub async fn sweep(&self, cutoff: i64) -> Result<u64, StoreError> {
        backend!(self, store => store.sweep(cutoff).await)
    }

    /// Checks the database answers.
    pub async fn health(&self) -> Result<(), StoreError> {
        backend!(self, store => store.health().await)
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Store::Sqlite(_) => "sqlite",
            Store::Postgres(_) => "postgres",
        }
    }
}
