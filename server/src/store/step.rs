//! The protocol step, written once for both backends over the small [`KeyTransaction`] trait that each
//! implements with SQL only (see [`crate::store`]'s docs for what one step does).

use std::time::Duration;

use crate::orders::Order;
use crate::protocol::{KeyedRequest, Outcome, StoredResponse, Work, MAX_STORED_BODY_BYTES};

use super::error::StoreError;

/// Knobs for one protocol step, for fault injection and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessOptions {
    /// Simulated slow work. SQLite sleeps while the key is in the in-flight set but before its (single-writer)
    /// transaction; PostgreSQL sleeps inside the transaction, with the key locked.
    pub work_delay: Option<Duration>,
    /// Simulates a crash after the order and the response were written but before the commit:
    /// the transaction is rolled back and [`StoreError::InjectedCrash`] returned.
    pub fail_before_commit: bool,
}

/// What [`KeyTransaction::insert_key`] found.
#[derive(Debug)]
pub(crate) enum KeyInsert {
    /// The key row was inserted (no answer yet): the key is this transaction's.
    Inserted,
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
    async fn insert_key(&mut self, request: &KeyedRequest) -> Result<KeyInsert, StoreError>;
    /// Inserts a new order, made by the key row with `key_row_id` (the order phases' rows have one).
    async fn insert_order(&mut self, order: &Order, key_row_id: Option<&str>) -> Result<(), StoreError>;
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

/// The protocol step, once for every backend. `pause` (a fault) is slept after the key row was inserted.
pub(crate) async fn step<T: KeyTransaction>(
    mut tx: T,
    request: &KeyedRequest,
    options: ProcessOptions,
    pause: Option<Duration>,
    work: WorkFn,
) -> Result<Outcome, StoreError> {
    match tx.insert_key(request).await? {
        KeyInsert::Inserted => {}
        KeyInsert::Busy => {
            tx.rollback().await?;
            return Ok(Outcome::InFlight);
        }
        KeyInsert::Existing { request_hash, stored } => {
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
        tx.insert_order(order, None).await?;
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
