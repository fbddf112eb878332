//! Persistence of idempotency keys and orders, and the protocol step that ties them together.
//!
//! [`Store`] is an enum over the backends (embedded SQLite by default; PostgreSQL for several server
//! instances). The protocol step is written once, in `step`, over the small `KeyTransaction` trait
//! that each backend implements with SQL only: in ONE transaction, insert the key row (the primary key
//! `(account_id, key)` settles races), and if it was inserted do the work (passed in by the caller, so
//! the store knows nothing of the business) and store its answer on the row, then commit. If the row
//! already exists the stored answer is replayed, or the request is refused (422 for a different payload,
//! 409 while in flight, 410 for a fence: see [`Store::settle`]). A crash anywhere before the commit leaves
//! neither the key row nor the order behind, so a retry with the same key simply does the work once.

use std::time::Duration;

use crate::keys::{AccountId, IdempotencyKey};
use crate::orders::Order;
use crate::protocol::{KeyedRequest, Outcome, StoredResponse, Work, FENCED_FINGERPRINT, MAX_STORED_BODY_BYTES};

pub mod phases;
pub mod postgres;
pub mod sqlite;

pub use postgres::{PgOptions, PgTls, PostgresStore};
pub use sqlite::{SqliteStore, Synchronous};

/// Knobs for one protocol step, for fault injection and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessOptions {
    /// Simulated slow work. SQLite sleeps while the key is claimed but before its (single-writer)
    /// transaction; PostgreSQL sleeps inside the transaction, with the key locked.
    pub work_delay: Option<Duration>,
    /// Simulates a crash after the order and the response were written but before the commit:
    /// the transaction is rolled back and [`StoreError::InjectedCrash`] returned.
    pub fail_before_commit: bool,
}

/// What [`KeyTransaction::claim`] found.
#[derive(Debug)]
pub(crate) enum Claim {
    /// The key row was inserted (no answer yet): the key is this transaction's.
    Claimed,
    /// The key row exists: the hash of its request and its answer (`None` while in flight).
    Existing { request_hash: String, stored: Option<StoredResponse> },
    /// Another transaction holds the key (PostgreSQL's advisory lock): in flight elsewhere.
    Busy,
}

/// The SQL of one protocol step, over one open transaction. Dropping it without [`commit`] rolls back.
///
/// [`commit`]: KeyTransaction::commit
pub(crate) trait KeyTransaction {
    /// Deletes the key's row if it expired, then inserts it without an answer unless it exists.
    async fn claim(&mut self, request: &KeyedRequest) -> Result<Claim, StoreError>;
    /// Inserts a new order.
    async fn insert_order(&mut self, order: &Order) -> Result<(), StoreError>;
    /// Stores the answer on the key row.
    async fn save_response(&mut self, request: &KeyedRequest, response: &StoredResponse) -> Result<(), StoreError>;
    /// Commits.
    async fn commit(self) -> Result<(), StoreError>;
    /// Rolls back and waits for it: PostgreSQL releases the key's advisory lock only then, so a retry
    /// arriving right after the answer must not find it still held (merely dropping the transaction
    /// rolls back too, but in the background).
    async fn rollback(self) -> Result<(), StoreError>;
}

/// The work of a fresh key: builds the order (or the refusal) from the request, inside the transaction.
pub type WorkFn = Box<dyn FnOnce(&KeyedRequest) -> Work + Send>;

/// The protocol step, once for every backend. `pause` (a fault) is slept after the key was claimed.
pub(crate) async fn step<T: KeyTransaction>(
    mut tx: T,
    request: &KeyedRequest,
    options: ProcessOptions,
    pause: Option<Duration>,
    work: WorkFn,
) -> Result<Outcome, StoreError> {
    match tx.claim(request).await? {
        Claim::Claimed => {}
        Claim::Busy => {
            tx.rollback().await?;
            return Ok(Outcome::InFlight);
        }
        Claim::Existing { request_hash, stored } => {
            tx.commit().await?;
            return Ok(Outcome::for_existing(&request.request_hash, &request_hash, stored));
        }
    }
    if let Some(pause) = pause {
        tokio::time::sleep(pause).await;
    }
    let Work { order, response } = work(request);
    if response.body.len() > MAX_STORED_BODY_BYTES {
        return Err(StoreError::ResponseTooLarge(response.body.len()));
    }
    if let Some(order) = &order {
        tx.insert_order(order).await?;
    }
    tx.save_response(request, &response).await?;
    if options.fail_before_commit {
        // Neither the key row nor the order survives.
        tx.rollback().await?;
        return Err(StoreError::InjectedCrash);
    }
    tx.commit().await?;
    Ok(Outcome::Fresh(response))
}

/// `SELECT` of an order's columns (as [`OrderColumns`]) from `orders o` joined with its confirmation in
/// `outbox m`; both backends append their `WHERE`.
macro_rules! select_orders {
    () => {
        "SELECT o.id, o.account_id, o.idempotency_key, o.items, o.total_cents, o.currency, o.created_at,
                o.charge_id, m.id, m.delivered_at
         FROM orders o LEFT JOIN outbox m ON m.order_id = o.id "
    };
}
pub(crate) use select_orders;

/// The columns of an `orders` row with its confirmation, in the order [`select_orders`] selects them:
/// `id, account_id, idempotency_key, items, total_cents, currency, created_at, charge_id`, then the
/// outbox message's `id, delivered_at`.
pub(crate) type OrderColumns =
    (String, String, String, String, i64, String, i64, Option<String>, Option<String>, Option<i64>);

/// An order from its row; `items` is decoded from its JSON text.
pub(crate) fn decode_order(
    (id, account_id, idempotency_key, items, total_cents, currency, created_at, charge_id, message_id, delivered_at): OrderColumns,
) -> Result<Order, StoreError> {
    let items =
        crate::orders::decode_items(&items).map_err(|e| StoreError::Corrupt(format!("order {id} items: {e}")))?;
    let confirmation = message_id.map(|id| crate::orders::Confirmation { id, delivered_at });
    Ok(Order { id, account_id, idempotency_key, items, total_cents, currency, created_at, charge_id, confirmation })
}

/// The stored answer from the key row's columns (see [`StoredResponse::from_columns`]).
pub(crate) fn stored_from_columns(
    status: Option<u16>,
    headers: Option<&str>,
    body: Option<String>,
) -> Result<Option<StoredResponse>, StoreError> {
    StoredResponse::from_columns(status, headers, body)
        .map_err(|e| StoreError::Corrupt(format!("response_headers: {e}")))
}

/// What the store holds for one `(account, key)`, for the key-status endpoint ([`crate::key_status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyRecord {
    /// A key row within the retention window, with its stored answer.
    Answered(StoredResponse),
    /// A key row without an answer yet, or (PostgreSQL) a transaction holding the key: in flight.
    InFlight,
    /// No key row within the retention window, but an order made with the key (the newest, should an
    /// expired key have been used again): the business record outlives the key row.
    Order(Order),
    /// Nothing: the key was never used by this account, or only for an answer that has been swept.
    Absent,
    /// A fence: the key was settled before any request with it arrived, so none ever may do the work.
    Fenced,
}

impl KeyRecord {
    /// The record of a key row that exists, from its `request_hash` and stored answer: a fence (its hash is
    /// [`FENCED_FINGERPRINT`], which no request's fingerprint equals), its answer, or in flight.
    pub fn of_row(request_hash: &str, stored: Option<StoredResponse>) -> KeyRecord {
        match stored {
            _ if request_hash == FENCED_FINGERPRINT => KeyRecord::Fenced,
            Some(stored) => KeyRecord::Answered(stored),
            None => KeyRecord::InFlight,
        }
    }
}

/// The key row's columns the phases read, in the order both backends select them: `request_hash,
/// status_code, response_headers, response_body, recovery_point, row_id, locked_until, order_id`.
pub(crate) type KeyRowColumns =
    (String, Option<u16>, Option<String>, Option<String>, String, Option<String>, i64, Option<String>);

/// A key row from its columns, validated.
pub(crate) fn key_row(
    (request_hash, status, headers, body, point, row_id, locked_until_ms, order_id): KeyRowColumns,
) -> Result<phases::KeyRow, StoreError> {
    Ok(phases::KeyRow {
        request_hash,
        stored: stored_from_columns(status, headers.as_deref(), body)?,
        point: phases::RecoveryPoint::parse(&point)?,
        row_id,
        locked_until_ms,
        order_id,
    })
}

/// Columns added to tables that databases made before the order phases already have: each backend adds the
/// missing ones before applying its schema (`ALTER TABLE ... ADD COLUMN`), so an existing demo or production
/// database keeps its keys and orders. The types are valid in both SQLite and PostgreSQL.
pub(crate) const ADDED_COLUMNS: &[(&str, &str, &str)] = &[
    ("idempotency_keys", "recovery_point", "TEXT NOT NULL DEFAULT 'finished'"),
    ("idempotency_keys", "row_id", "TEXT NULL"),
    ("idempotency_keys", "lock_token", "TEXT NULL"),
    ("idempotency_keys", "locked_until", "BIGINT NOT NULL DEFAULT 0"),
    ("idempotency_keys", "order_id", "TEXT NULL"),
    ("orders", "charge_id", "TEXT NULL"),
];

/// An outbox message claimed for delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    /// The message id.
    pub id: String,
    /// The message (JSON).
    pub payload: String,
    /// Attempts so far, this one included.
    pub attempts: i64,
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
    /// TLS to PostgreSQL could not be set up.
    #[error("postgres tls: {0}")]
    Tls(String),
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
    /// The caller's lease on a key row was taken over (it ran out): the phase was rolled back.
    #[error("the key's lease was taken over by another request")]
    LeaseLost,
    /// The answer is larger than [`MAX_STORED_BODY_BYTES`]: not stored, rolled back.
    #[error("response of {0} bytes is too large to store")]
    ResponseTooLarge(usize),
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
    /// The protocol step (see the module docs); `work` runs only for a fresh key, inside its transaction.
    pub async fn process(
        &self,
        request: KeyedRequest,
        options: ProcessOptions,
        work: impl FnOnce(&KeyedRequest) -> Work + Send + 'static,
    ) -> Result<Outcome, StoreError> {
        let work: WorkFn = Box::new(work);
        backend!(self, store => store.process(request, options, work).await)
    }

    /// One transaction of the order phases (see [`phases`]).
    pub async fn phase(&self, op: phases::PhaseOp) -> Result<phases::PhaseResult, StoreError> {
        backend!(self, store => store.phase(op).await)
    }

    /// Claims up to `limit` outbox messages due by `now_ms` and not claimed by anyone (on PostgreSQL
    /// `FOR UPDATE SKIP LOCKED`, so instances never claim one message together) until `until_ms`, counting
    /// the attempt.
    pub async fn claim_outbox(&self, now_ms: i64, until_ms: i64, limit: i64) -> Result<Vec<Claimed>, StoreError> {
        backend!(self, store => store.claim_outbox(now_ms, until_ms, limit).await)
    }

    /// Marks a message delivered (unix seconds).
    pub async fn outbox_delivered(&self, id: &str, at: i64) -> Result<(), StoreError> {
        backend!(self, store => store.outbox_delivered(id, at).await)
    }

    /// Ends a message's claim and schedules its next attempt (unix milliseconds).
    pub async fn outbox_retry(&self, id: &str, at_ms: i64) -> Result<(), StoreError> {
        backend!(self, store => store.outbox_retry(id, at_ms).await)
    }

    /// The account's orders, newest first, at most `limit`.
    pub async fn list_orders(&self, account: &AccountId, limit: u32) -> Result<Vec<Order>, StoreError> {
        backend!(self, store => store.list_orders(account, limit).await)
    }

    /// One of the account's orders.
    pub async fn get_order(&self, account: &AccountId, id: &str) -> Result<Option<Order>, StoreError> {
        backend!(self, store => store.get_order(account, id).await)
    }

    /// What is known of `(account, key)`, ignoring key rows created before `expired_before` (unix seconds).
    pub async fn key_record(
        &self,
        account: &AccountId,
        key: &IdempotencyKey,
        expired_before: i64,
    ) -> Result<KeyRecord, StoreError> {
        backend!(self, store => store.key_record(account, key, expired_before).await)
    }

    /// Settles `(account, key)` (the fence), in one transaction: an expired key row is deleted first (as a
    /// request replaces it); a key row that exists answers for the key ([`KeyRecord::of_row`]); without one,
    /// the newest order made with the key does; otherwise a fence row is inserted (`request_hash` =
    /// [`FENCED_FINGERPRINT`], no answer, `created_at` = `now`) and the key is [`KeyRecord::Fenced`], so a
    /// request with it that arrives later is answered 410 and does nothing. A transaction inserting the key
    /// is waited for, briefly: if it is still at work the key is [`KeyRecord::InFlight`], never fenced.
    /// Never [`KeyRecord::Absent`].
    pub async fn settle(
        &self,
        account: &AccountId,
        key: &IdempotencyKey,
        now: i64,
        expired_before: i64,
    ) -> Result<KeyRecord, StoreError> {
        backend!(self, store => store.settle(account, key, now, expired_before).await)
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
