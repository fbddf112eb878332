//! The order flow's recovery points, on the library's atomic phases (`idempotent_endpoint::phases`).
//!
//! The key row, its lease, the take-over of a row whose holder is gone and the completer's query are the
//! library's (`SqliteKeys::begin`/`advance`/`finish`/`release`/`abandon`/`unfinished`, and the functions of
//! `idempotent_endpoint::phases::postgres`); every arrow `started -> charge_started -> charged -> finished`
//! is one of its steps, whose work is the shop's rows for that step (`PhaseWork`). What happens between
//! two phases (the provider call) is the driver's ([`crate::checkout`]). The order a key row made is the
//! shop's: it is read from `orders.key_row_id` whenever a key is taken, so a holder carries it from
//! `charge_started` on.

use idempotent_endpoint::outbox::Message;
pub use idempotent_endpoint::phases::Held;
use idempotent_endpoint::phases::{FINISHED, STARTED};

use super::error::StoreError;
use crate::orders::Order;
use crate::protocol::Outcome;

/// Where an unfinished key resumes: the library's recovery point, by the names the order flow gives it.
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
    /// The stored name (the library's [`STARTED`] and [`FINISHED`] at either end).
    pub fn as_str(self) -> &'static str {
        match self {
            RecoveryPoint::Started => STARTED,
            RecoveryPoint::ChargeStarted => "charge_started",
            RecoveryPoint::Charged => "charged",
            RecoveryPoint::Finished => FINISHED,
        }
    }

    /// The point from its stored name; anything else is corrupt data.
    pub fn parse(text: &str) -> Result<Self, StoreError> {
        [RecoveryPoint::Started, RecoveryPoint::ChargeStarted, RecoveryPoint::Charged, RecoveryPoint::Finished]
            .into_iter()
            .find(|point| point.as_str() == text)
            .ok_or_else(|| StoreError::Corrupt(format!("recovery_point {text:?}")))
    }
}

/// A key row whose lease the caller holds, with the order it made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldKey {
    /// The library's hold on the row (scope = the account, the key, the row id, the point, the lease).
    pub held: Held,
    /// Where the key stands ([`Held::point`], parsed).
    pub point: RecoveryPoint,
    /// The order, from `charge_started` on (boxed: a held key is moved through every phase).
    pub order: Option<Box<Order>>,
}

/// What beginning a key found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BeginDecision {
    /// The caller holds the key and resumes at its point.
    Held(HeldKey),
    /// The key is finished (replay or 422), fenced (410) or held by another live request (409).
    Done(Outcome),
}

/// The shop's rows of one step, written in the library's step transaction.
#[derive(Debug)]
pub(crate) enum PhaseWork {
    /// `started -> charge_started`: the order, made by the key row with this id.
    InsertOrder(Order, String),
    /// `charge_started -> charged`: the provider's charge on the order.
    SetCharge {
        /// The order.
        order_id: String,
        /// The provider's charge id.
        charge_id: String,
    },
}

/// The shop's rows of the `finished` step: the confirmation to enqueue in the library's outbox, if any.
pub(crate) type FinishWork = Option<Message>;

/// The held key of a row the library handed over: its point parsed and, past `started`, its order read by
/// `order_of_row` (an order is required there: the row's `charge_started` step inserted it).
pub(crate) async fn held_key<F, Fut>(held: Held, order_of_row: F) -> Result<HeldKey, StoreError>
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = Result<Option<Order>, StoreError>>,
{
    let point = RecoveryPoint::parse(&held.point)?;
    if point == RecoveryPoint::Started {
        return Ok(HeldKey { held, point, order: None });
    }
    let Some(order) = order_of_row(held.row_id.clone()).await? else {
        return Err(StoreError::Corrupt(format!("key row {} at {} without an order", held.key.as_str(), held.point)));
    };
    Ok(HeldKey { held, point, order: Some(Box::new(order)) })
}
