//! The rows both backends read alike: an order with its confirmation.

use crate::orders::Order;

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
