//! The order flow in atomic phases, over SQL: the key row carries a recovery point and a lease, and every
//! arrow `started -> charge_started -> charged -> finished` is one transaction that checks the caller
//! still holds the lease and advances the point. What happens between two phases (the provider call) is
//! the driver's ([`crate::checkout`]); the decisions here are written once, over the `FlowSql` trait, for both
//! backends.
//!
//! The key row is the lock: a caller holds a key while `lock_token` is its token and `locked_until` is in
//! the future. A request (or the background completer) takes a key that is new, or unfinished with its
//! lease run out; every later phase updates the row only `WHERE lock_token = <its token>`, so a caller
//! whose lease was taken over can never advance the row again.

use idempotent_endpoint::outbox::Message;

use super::error::StoreError;
use crate::keys::{AccountId, IdempotencyKey};
use crate::orders::Order;
use crate::protocol::{KeyedRequest, Outcome, StoredResponse, MAX_STORED_BODY_BYTES};

/// Where an unfinished key resumes. Stored in `idempotency_records.recovery_point`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryPoint {
    /// The key row exists; nothing else was done (no order, no charge).
    Started,
    /// The order is stored; the provider may or may not have charged it (the call is repeated with the
    /// same derived key, and the provider replays an earlier charge).
    ChargeStarted,
    /// The charge is recorded on the order.
    Charged,
    /// The answer is stored (and the confirmation is in the outbox): replayed from now on.
    Finished,
}

impl RecoveryPoint {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            RecoveryPoint::Started => "started",
            RecoveryPoint::ChargeStarted => "charge_started",
            RecoveryPoint::Charged => "charged",
            RecoveryPoint::Finished => "finished",
        }
    }

    /// The point from its stored name; anything else is corrupt data.
    pub fn parse(text: &str) -> Result<Self, StoreError> {
        Ok(match text {
            "started" => RecoveryPoint::Started,
            "charge_started" => RecoveryPoint::ChargeStarted,
            "charged" => RecoveryPoint::Charged,
            "finished" => RecoveryPoint::Finished,
            other => return Err(StoreError::Corrupt(format!("recovery_point {other:?}"))),
        })
    }
}

/// A key row the caller holds the lease of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldKey {
    /// The account.
    pub account: AccountId,
    /// The client's key.
    pub key: IdempotencyKey,
    /// The row's own random id (128 bits from the CSPRNG): what downstream keys are derived from.
    pub row_id: String,
    /// This holder's lease token.
    pub token: String,
    /// Where the key stands.
    pub point: RecoveryPoint,
    /// The order, from `charge_started` on (boxed: a held key is moved through every phase).
    pub order: Option<Box<Order>>,
}

/// What [`FlowOp::Begin`] found: the order flow's decision on a key (the library's phased work has its
/// own, `idempotent_endpoint::phases::Begun`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BeginDecision {
    /// The caller holds the key and resumes at its point.
    Held(HeldKey),
    /// The key is finished (replay or 422) or held by another live request (409).
    Done(Outcome),
}

/// The columns of a key row the phases read.
#[derive(Debug)]
pub(crate) struct KeyRow {
    pub request_hash: String,
    pub stored: Option<StoredResponse>,
    pub point: RecoveryPoint,
    pub row_id: Option<String>,
    pub locked_until_ms: i64,
}

/// The SQL of the phases over one open transaction (on PostgreSQL every read of a key row locks it,
/// `FOR UPDATE`; SQLite's `BEGIN IMMEDIATE` transaction already excludes every other writer).
pub(crate) trait FlowSql {
    /// Inserts a new order, made by the key row with `key_row_id`.
    async fn insert_order(&mut self, order: &Order, key_row_id: Option<&str>) -> Result<(), StoreError>;
    /// Commits.
    async fn commit(self) -> Result<(), StoreError>;
    /// Rolls back and waits for it.
    async fn rollback(self) -> Result<(), StoreError>;
    /// The key row, locked.
    async fn key_row(&mut self, account: &str, key: &str) -> Result<Option<KeyRow>, StoreError>;
    /// Deletes the key's row if it was created before `before` (unix seconds): expired keys are new.
    async fn delete_expired(&mut self, account: &str, key: &str, before: i64) -> Result<(), StoreError>;
    /// Inserts a `started` key row held by `token`; false if a row appeared meanwhile.
    async fn insert_started(
        &mut self,
        request: &KeyedRequest,
        row_id: &str,
        token: &str,
        until_ms: i64,
    ) -> Result<bool, StoreError>;
    /// Gives the row to `token` until `until_ms` (the caller checked the old lease ran out).
    async fn lease(&mut self, account: &str, key: &str, token: &str, until_ms: i64) -> Result<(), StoreError>;
    /// Moves a row held by `held.token` at `held.point` to `to`, ending the lease if `release`; false if the
    /// caller no longer holds the row there.
    async fn advance(&mut self, held: &HeldKey, to: RecoveryPoint, release: bool) -> Result<bool, StoreError>;
    /// Ends the lease of a row held by `token` (the next retry resumes at once); false if not held.
    async fn release(&mut self, account: &str, key: &str, token: &str) -> Result<bool, StoreError>;
    /// Deletes a `started` row held by `token`; false if not held.
    async fn delete_started(&mut self, account: &str, key: &str, token: &str) -> Result<bool, StoreError>;
    /// The order the key row with `row_id` made (`orders.key_row_id`), if it made one yet.
    async fn order_of_row(&mut self, row_id: &str) -> Result<Option<Order>, StoreError>;
    /// Records the provider's charge on an order.
    async fn set_charge(&mut self, order_id: &str, charge_id: &str) -> Result<(), StoreError>;
    /// Enqueues a confirmation in the library's outbox (once per order: its id is the order's).
    async fn insert_outbox(&mut self, message: &Message) -> Result<(), StoreError>;
    /// Up to `limit` unfinished keys whose lease ran out by `now_ms`, skipping rows other transactions hold
    /// locked (PostgreSQL's `SKIP LOCKED`).
    async fn stale_keys(&mut self, now_ms: i64, limit: i64) -> Result<Vec<(String, String)>, StoreError>;
    /// Stores the answer on the key row.
    async fn save_answer(&mut self, account: &str, key: &str, response: &StoredResponse) -> Result<(), StoreError>;
}

/// One transaction of the order flow (a phase, or releasing, abandoning or taking over a key): what to do,
/// with everything it needs owned (it may run on a blocking thread).
#[derive(Debug)]
pub enum FlowOp {
    /// Take the key: insert it `started`, or take over an unfinished one whose lease ran out; or decide it
    /// is finished (replay, 422) or held (409).
    Begin {
        /// The request.
        request: KeyedRequest,
        /// A fresh lease token.
        token: String,
        /// The lease's end (unix milliseconds).
        until_ms: i64,
        /// Now (unix milliseconds).
        now_ms: i64,
    },
    /// `started -> charge_started`: store the order.
    StoreOrder {
        /// The key.
        held: HeldKey,
        /// The order to insert.
        order: Order,
    },
    /// `started -> finished` without an order: the request was refused (400, or an injected stored 500).
    Refuse {
        /// The key.
        held: HeldKey,
        /// The answer to store.
        response: StoredResponse,
    },
    /// `charge_started -> charged`: record the provider's charge.
    RecordCharge {
        /// The key (its order set).
        held: HeldKey,
        /// The provider's charge id.
        charge_id: String,
    },
    /// `charged -> finished`: store the answer and the confirmation, end the lease.
    Finish {
        /// The key.
        held: HeldKey,
        /// The answer to store and replay.
        response: StoredResponse,
        /// The confirmation, if the server sends them.
        message: Option<Message>,
    },
    /// End the caller's lease without moving the point (a downstream call failed; a retry resumes).
    Release {
        /// The key.
        held: HeldKey,
    },
    /// Delete a `started` key (nothing was done): the completer, which lacks the request body to go on.
    Abandon {
        /// The key.
        held: HeldKey,
    },
    /// Take over up to `limit` unfinished keys whose lease ran out (the background completer).
    TakeStale {
        /// Now (unix milliseconds).
        now_ms: i64,
        /// The lease's end for the keys taken.
        until_ms: i64,
        /// Most keys.
        limit: i64,
    },
}

/// What a [`FlowOp`] did.
#[derive(Debug)]
pub enum FlowResult {
    /// [`FlowOp::Begin`]'s decision.
    Decided(BeginDecision),
    /// The key, advanced (or, for `Release` and `Abandon`, as it was).
    Held(HeldKey),
    /// The stored answer ([`FlowOp::Refuse`], [`FlowOp::Finish`]).
    Finished(StoredResponse),
    /// The keys taken over ([`FlowOp::TakeStale`]).
    Taken(Vec<HeldKey>),
}

/// A fresh random id (128 bits from the CSPRNG, hex): a key row's `row_id` or a lease token.
pub fn random_id() -> Result<String, StoreError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| StoreError::Task(format!("random: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Runs one phase in `tx` and commits it (or rolls it back on any error or a lost lease).
pub(crate) async fn run<T: FlowSql>(mut tx: T, op: FlowOp) -> Result<FlowResult, StoreError> {
    match op_in(&mut tx, op).await {
        Ok(result) => {
            tx.commit().await?;
            Ok(result)
        }
        Err(error) => {
            // The rollback's own failure is secondary: the first error says what went wrong.
            let _ = tx.rollback().await;
            Err(error)
        }
    }
}

async fn op_in<T: FlowSql>(tx: &mut T, op: FlowOp) -> Result<FlowResult, StoreError> {
    match op {
        FlowOp::Begin { request, token, until_ms, now_ms } => {
            Ok(FlowResult::Decided(begin(tx, &request, token, until_ms, now_ms).await?))
        }
        FlowOp::StoreOrder { mut held, order } => {
            tx.insert_order(&order, Some(&held.row_id)).await?;
            advance(tx, &held, RecoveryPoint::ChargeStarted, false).await?;
            held.point = RecoveryPoint::ChargeStarted;
            held.order = Some(Box::new(order));
            Ok(FlowResult::Held(held))
        }
        FlowOp::Refuse { held, response } => {
            finish(tx, &held, &response).await?;
            Ok(FlowResult::Finished(response))
        }
        FlowOp::RecordCharge { mut held, charge_id } => {
            let Some(order) = held.order.as_mut() else {
                return Err(StoreError::Corrupt("a charge_started key without an order".to_owned()));
            };
            tx.set_charge(&order.id, &charge_id).await?;
            order.charge_id = Some(charge_id);
            advance(tx, &held, RecoveryPoint::Charged, false).await?;
            held.point = RecoveryPoint::Charged;
            Ok(FlowResult::Held(held))
        }
        FlowOp::Finish { held, response, message } => {
            if let Some(message) = &message {
                tx.insert_outbox(message).await?;
            }
            finish(tx, &held, &response).await?;
            Ok(FlowResult::Finished(response))
        }
        FlowOp::Release { held } => {
            tx.release(held.account.as_str(), held.key.as_str(), &held.token).await?;
            Ok(FlowResult::Held(held))
        }
        FlowOp::Abandon { held } => {
            if !tx.delete_started(held.account.as_str(), held.key.as_str(), &held.token).await? {
                return Err(StoreError::LeaseLost);
            }
            Ok(FlowResult::Held(held))
        }
        FlowOp::TakeStale { now_ms, until_ms, limit } => {
            let mut taken = Vec::new();
            for (account, key) in tx.stale_keys(now_ms, limit).await? {
                let (Ok(account), Ok(key)) = (AccountId::parse(&account), IdempotencyKey::parse(&key)) else {
                    return Err(StoreError::Corrupt(format!("key row {account:?}/{key:?}")));
                };
                let Some(row) = tx.key_row(account.as_str(), key.as_str()).await? else { continue };
                if row.point == RecoveryPoint::Finished || row.locked_until_ms > now_ms {
                    continue;
                }
                let token = random_id()?;
                tx.lease(account.as_str(), key.as_str(), &token, until_ms).await?;
                taken.push(held_from(tx, account, key, row, token).await?);
            }
            Ok(FlowResult::Taken(taken))
        }
    }
}

async fn begin<T: FlowSql>(
    tx: &mut T,
    request: &KeyedRequest,
    token: String,
    until_ms: i64,
    now_ms: i64,
) -> Result<BeginDecision, StoreError> {
    let (account, key) = (request.account.as_str(), request.key.as_str());
    tx.delete_expired(account, key, request.expired_before).await?;
    let Some(row) = tx.key_row(account, key).await? else {
        let row_id = random_id()?;
        if !tx.insert_started(request, &row_id, &token, until_ms).await? {
            // Another instance inserted the key between our read and our insert: it holds it.
            return Ok(BeginDecision::Done(Outcome::InFlight));
        }
        return Ok(BeginDecision::Held(HeldKey {
            account: request.account.clone(),
            key: request.key.clone(),
            row_id,
            token,
            point: RecoveryPoint::Started,
            order: None,
        }));
    };
    if row.point == RecoveryPoint::Finished {
        return Ok(BeginDecision::Done(Outcome::for_existing(&request.request_hash, &row.request_hash, row.stored)));
    }
    if row.request_hash != request.request_hash {
        return Ok(BeginDecision::Done(Outcome::Mismatch));
    }
    if row.locked_until_ms > now_ms {
        return Ok(BeginDecision::Done(Outcome::InFlight));
    }
    tx.lease(account, key, &token, until_ms).await?;
    Ok(BeginDecision::Held(held_from(tx, request.account.clone(), request.key.clone(), row, token).await?))
}

async fn held_from<T: FlowSql>(
    tx: &mut T,
    account: AccountId,
    key: IdempotencyKey,
    row: KeyRow,
    token: String,
) -> Result<HeldKey, StoreError> {
    let Some(row_id) = row.row_id else {
        return Err(StoreError::Corrupt(format!("unfinished key row {} without row_id", key.as_str())));
    };
    let order = match row.point {
        RecoveryPoint::Started => None,
        _ => tx.order_of_row(&row_id).await?.map(Box::new),
    };
    if row.point != RecoveryPoint::Started && order.is_none() {
        return Err(StoreError::Corrupt(format!(
            "key row {} at {} without an order",
            key.as_str(),
            row.point.as_str()
        )));
    }
    Ok(HeldKey { account, key, row_id, token, point: row.point, order })
}

async fn advance<T: FlowSql>(tx: &mut T, held: &HeldKey, to: RecoveryPoint, release: bool) -> Result<(), StoreError> {
    if tx.advance(held, to, release).await? {
        Ok(())
    } else {
        Err(StoreError::LeaseLost)
    }
}

/// Stores the answer and moves the key to `finished`, ending the lease.
async fn finish<T: FlowSql>(tx: &mut T, held: &HeldKey, response: &StoredResponse) -> Result<(), StoreError> {
    if response.body.len() > MAX_STORED_BODY_BYTES {
        return Err(StoreError::ResponseTooLarge(response.body.len()));
    }
    advance(tx, held, RecoveryPoint::Finished, true).await?;
    tx.save_answer(held.account.as_str(), held.key.as_str(), response).await
}
