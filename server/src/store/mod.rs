//! Persistence of idempotency keys and orders, and the protocol step and the order phases that tie them
//! together.
//!
//! [`Store`] is an enum over the backends (embedded SQLite by default; PostgreSQL for several server
//! instances). The key rows and the outbox are the library's (`idempotent_endpoint`); the shop's own
//! table is `orders`. The protocol step is the library's `run` (`sqlite::run_in`, `postgres::run`): in
//! ONE transaction it inserts the key row (the primary key `(scope, key)` settles races), and if it was
//! inserted runs the work (the caller's, inserting the order, so the store knows nothing of the business)
//! and stores its answer on the row, then commits. If the row already exists the stored answer is
//! replayed, or the request is refused (422 for a different payload, 409 while in flight, 410 for a
//! fence: see [`Store::settle`]). A crash anywhere before the commit leaves neither the key row nor the
//! order behind, so a retry with the same key simply does the work once.
//!
//! The order phases ([`Store::begin`] to [`Store::finish`], and [`Store::unfinished`] for the completer)
//! are the library's atomic phases with the shop's rows as each step's work ([`phases`]); the sweep is the
//! library's too. The store's own SQL reads and writes `orders`, and moves an earlier version's tables into
//! the library's (`legacy`).
//!
//! This module is only the face over the backends: the step's knobs (`step`), the rows both backends read
//! alike (`rows`), the migration of older databases (`legacy`) and the errors (`error`) are submodules the
//! backends name directly, so no submodule names its parent and the store's modules form no cycle
//! (`tests/layers.rs`).

use std::time::Duration;

use idempotent_endpoint::outbox::Message;
use idempotent_endpoint::phases::Begun;
use idempotent_endpoint::KeyStatus;

use crate::keys::{AccountId, IdempotencyKey};
use crate::orders::Order;
use crate::protocol::{created_response, KeyedRequest, Outcome, StoredResponse, Work};
use phases::{BeginDecision, Held, HeldKey, PhaseWork, RecoveryPoint};

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

    /// Takes the key for the order phases (the library's `begin`): new (at `started`), or taken over at its
    /// point from a holder whose lease ran out, held for `lease`; else the answer (replay, 422, 409, 410).
    pub async fn begin(&self, request: &KeyedRequest, lease: Duration) -> Result<BeginDecision, StoreError> {
        match backend!(self, store => store.begin(request, lease).await)? {
            Begun::Held(held) => Ok(BeginDecision::Held(self.held_key(held).await?)),
            Begun::Answered(outcome) => Ok(BeginDecision::Done(outcome)),
        }
    }

    /// `started -> charge_started` (the library's `advance`): stores the order, made by the key's row.
    pub async fn store_order(&self, mut key: HeldKey, order: Order, lease: Duration) -> Result<HeldKey, StoreError> {
        let work = PhaseWork::InsertOrder(order.clone(), key.held.row_id.clone());
        backend!(self, store => store.advance(&mut key.held, RecoveryPoint::ChargeStarted, lease, work).await)?;
        Ok(HeldKey { point: RecoveryPoint::ChargeStarted, order: Some(Box::new(order)), ..key })
    }

    /// `charge_started -> charged` (the library's `advance`): records the provider's charge on the order.
    pub async fn record_charge(
        &self,
        mut key: HeldKey,
        charge_id: String,
        lease: Duration,
    ) -> Result<HeldKey, StoreError> {
        let Some(order) = key.order.as_mut() else {
            return Err(StoreError::Corrupt("a charge_started key without an order".to_owned()));
        };
        let work = PhaseWork::SetCharge { order_id: order.id.clone(), charge_id: charge_id.clone() };
        order.charge_id = Some(charge_id);
        backend!(self, store => store.advance(&mut key.held, RecoveryPoint::Charged, lease, work).await)?;
        Ok(HeldKey { point: RecoveryPoint::Charged, ..key })
    }

    /// `-> finished` (the library's `finish`): stores `response`, replayed from then on, and enqueues the
    /// confirmation `message` in the library's outbox in the same transaction.
    pub async fn finish(
        &self,
        key: HeldKey,
        response: StoredResponse,
        message: Option<Message>,
    ) -> Result<StoredResponse, StoreError> {
        backend!(self, store => store.finish(key.held, response, message).await)
    }

    /// Ends the caller's lease without moving the point (the library's `release`): a retry resumes at once.
    pub async fn release(&self, key: HeldKey) -> Result<(), StoreError> {
        backend!(self, store => store.release(key.held).await)
    }

    /// Deletes a key still at `started` (the library's `abandon`): nothing was done, the key is new again.
    pub async fn abandon(&self, key: HeldKey) -> Result<(), StoreError> {
        backend!(self, store => store.abandon(key.held).await)
    }

    /// For the completer: takes over up to `limit` unfinished keys whose lease ran out (the library's
    /// `unfinished`), each held for `lease`, with their orders.
    pub async fn unfinished(&self, limit: i64, lease: Duration) -> Result<Vec<HeldKey>, StoreError> {
        let taken = backend!(self, store => store.unfinished(limit, lease).await)?;
        let mut keys = Vec::with_capacity(taken.len());
        for held in taken {
            keys.push(self.held_key(held).await?);
        }
        Ok(keys)
    }

    async fn held_key(&self, held: Held) -> Result<HeldKey, StoreError> {
        phases::held_key(held, |row_id| async move { backend!(self, store => store.order_of_row(row_id).await) }).await
    }

    /// The account's orders, newest first, at most `limit`.
    pub async fn list_orders(&self, account: &AccountId, limit: u32) -> Result<Vec<Order>, StoreError> {
        backend!(self, store => store.list_orders(account, limit).await)
    }

    /// One of the account's orders.
    pub async fn get_order(&self, account: &AccountId, id: &str) -> Result<Option<Order>, StoreError> {
        backend!(self, store => store.get_order(account, id).await)
    }

    /// The library's key status of `(account, key)` (the account is the scope): the key row within
    /// `retention` (`done` with its answer, `in_flight` for unfinished phased work, `fenced`), on PostgreSQL
    /// `in_flight` while the key's advisory lock is held in any instance, else `unknown`. On SQLite a request
    /// still in its transaction is invisible here: the handler asks this process's in-flight set first.
    pub async fn key_status(
        &self,
        account: &AccountId,
        key: &IdempotencyKey,
        retention: Duration,
    ) -> Result<KeyStatus, StoreError> {
        backend!(self, store => store.key_status(account, key, retention).await)
    }

    /// The answer of the newest order the account made with the key, rebuilt as the 201 that created it: the
    /// order outlives its key row, so it answers for the key once the row was swept.
    pub async fn order_status(
        &self,
        account: &AccountId,
        key: &IdempotencyKey,
    ) -> Result<Option<KeyStatus>, StoreError> {
        let order = backend!(self, store => store.newest_order(account, key).await)?;
        Ok(order.map(|order| KeyStatus::done(created_response(&order))))
    }

    /// Settles `(account, key)` (the fence): a key with a live row, or in flight, answers as
    /// [`Store::key_status`]; without either, the newest order made with the key answers for it (`done`: a
    /// fence would deny a key that was done); otherwise the library settles it
    /// (`idempotent_endpoint::sqlite::settle_in`, `postgres::settle`): a fence row, so a request with the key
    /// that arrives later is answered 410 and does nothing; or the row a request committed meanwhile. Never
    /// `unknown`.
    pub async fn settle(
        &self,
        account: &AccountId,
        key: &IdempotencyKey,
        retention: Duration,
    ) -> Result<KeyStatus, StoreError> {
        match self.key_status(account, key, retention).await? {
            KeyStatus::Unknown => {}
            status => return Ok(status),
        }
        if let Some(status) = self.order_status(account, key).await? {
            return Ok(status);
        }
        backend!(self, store => store.settle(account, key, retention).await)
    }

    /// Deletes key rows created more than `retention` ago (the library's sweep); returns how many.
    pub async fn sweep(&self, retention: Duration) -> Result<u64, StoreError> {
        backend!(self, store => store.sweep(retention).await)
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
