//! The rows both backends read and write alike: an order with its confirmation, a key row's phase.

use crate::orders::Order;
use crate::protocol::StoredResponse;

use super::error::StoreError;

/// `SELECT` of an order's columns (as [`OrderColumns`]) from `orders o` joined with its confirmation in the
/// library's outbox, `outbox_messages m` (its id is [`crate::orders::confirmation_id`]); both backends
/// append their `WHERE`.
macro_rules! select_orders {
    () => {
        concat!(
            "SELECT o.id, o.account_id, o.idempotency_key, o.items, o.total_cents, o.currency, o.created_at,
                    o.charge_id, m.id, m.delivered_at
             FROM orders o LEFT JOIN outbox_messages m ON m.id = '",
            crate::orders::confirmation_prefix!(),
            "' || o.id "
        )
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

/// The key row's columns the phases read, in the order both backends select them: `fingerprint,
/// status_code, response_headers, response_body, recovery_point, row_id, locked_until`.
pub(crate) type KeyRowColumns = (String, Option<u16>, Option<String>, Option<String>, String, Option<String>, i64);

/// A key row from its columns, validated.
pub(crate) fn key_row(
    (request_hash, status, headers, body, point, row_id, locked_until_ms): KeyRowColumns,
) -> Result<super::phases::KeyRow, StoreError> {
    Ok(super::phases::KeyRow {
        request_hash,
        stored: stored_from_columns(status, headers.as_deref(), body)?,
        point: super::phases::RecoveryPoint::parse(&point)?,
        row_id,
        locked_until_ms,
    })
}
