//! The rows both backends read alike: an order with its confirmation.

use std::collections::HashMap;

use idempotent_endpoint::outbox::Delivery;

use crate::orders::Order;

use super::error::StoreError;

/// `SELECT` of an order's columns (as [`OrderColumns`]) from `orders o`; both backends append their `WHERE`.
macro_rules! select_orders {
    () => {
        "SELECT o.id, o.account_id, o.idempotency_key, o.items, o.total_cents, o.currency, o.created_at, o.charge_id
         FROM orders o "
    };
}
pub(crate) use select_orders;

/// The columns of an `orders` row, in the order [`select_orders`] selects them:
/// `id, account_id, idempotency_key, items, total_cents, currency, created_at, charge_id`.
pub(crate) type OrderColumns = (String, String, String, String, i64, String, i64, Option<String>);

/// An order from its row (without its confirmation: see [`confirm`]); `items` is decoded from its JSON text.
pub(crate) fn decode_order(
    (id, account_id, idempotency_key, items, total_cents, currency, created_at, charge_id): OrderColumns,
) -> Result<Order, StoreError> {
    let items =
        crate::orders::decode_items(&items).map_err(|e| StoreError::Corrupt(format!("order {id} items: {e}")))?;
    Ok(Order {
        id,
        account_id,
        idempotency_key,
        items,
        total_cents,
        currency,
        created_at,
        charge_id,
        confirmation: None,
    })
}

/// The ids of the orders' confirmations in the library's outbox ([`crate::orders::confirmation_id`]).
pub(crate) fn confirmation_ids(orders: &[Order]) -> Vec<String> {
    orders.iter().map(|order| crate::orders::confirmation_id(&order.id)).collect()
}

/// Sets each order's confirmation from where its message stands in the library's outbox (none without a
/// message: the server sends confirmations only with a mail receiver).
pub(crate) fn confirm(orders: &mut [Order], deliveries: &HashMap<String, Delivery>) {
    for order in orders {
        let id = crate::orders::confirmation_id(&order.id);
        order.confirmation = deliveries.get(&id).map(|delivery| crate::orders::Confirmation {
            delivered_at: match delivery {
                Delivery::Waiting => None,
                Delivery::Delivered(at) => Some(*at),
            },
            id,
        });
    }
}
