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
//!
//! This module is only the face over the backends: the step (`step`), the rows both backends read alike
//! (`rows`) and the errors (`error`) are submodules the backends name directly, so no submodule names its
//! parent and the store's modules form no cycle (`tests/layers.rs`).

use crate::keys::{AccountId, IdempotencyKey};
use crate::orders::Order;
use crate::protocol::{KeyedRequest, Outcome, Work};

mod error;
mod legacy;
pub mod phases;
pub mod postgres;
mod rows;
pub mod sqlite;
mod step;

pub use postgres::{PgOptions, PgTls, PostgresStore};
pub use sqlite::{SqliteStore, Synchronous};

pub use error::StoreError;
pub use rows::KeyRecord;
pub use step::{ProcessOptions, WorkFn};

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
    pub async fn flow_op(&self, op: phases::FlowOp) -> Result<phases::FlowResult, StoreError> {
        backend!(self, store => store.flow_op(op).await)
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
    /// [`crate::protocol::FENCED_FINGERPRINT`], no answer, `created_at` = `now`) and the key is [`KeyRecord::Fenced`], so a
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
