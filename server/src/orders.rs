//! The demo business: a fixed catalogue and orders placed against it.
//!
//! Everything here is pure (no I/O) and knows nothing of keys being stored: the order handler
//! ([`crate::idempotency`]) calls [`prepare`] and [`build`] in the work it hands to the store's transaction.

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};

use crate::keys::{AccountId, IdempotencyKey};
use crate::problem::Problem;

/// The currency of every price and total.
pub const CURRENCY: &str = "EUR";
/// Most lines one order may have.
pub const MAX_LINES: usize = 50;
/// Most units of one product per line.
pub const MAX_QTY: i64 = 99;

/// A product of the fixed catalogue.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Product {
    /// Stock keeping unit: the id an order line refers to.
    pub sku: &'static str,
    /// Display name.
    pub name: &'static str,
    /// Unit price in cents of [`CURRENCY`].
    pub price_cents: i64,
    /// The currency ([`CURRENCY`]).
    pub currency: &'static str,
}

/// The catalogue served by `GET /api/products`.
pub const CATALOGUE: &[Product] = &[
    Product { sku: "coffee-beans", name: "Coffee beans, 1 kg", price_cents: 2490, currency: CURRENCY },
    Product { sku: "grinder", name: "Hand grinder", price_cents: 6900, currency: CURRENCY },
    Product { sku: "mug", name: "Enamel mug", price_cents: 1200, currency: CURRENCY },
    Product { sku: "filter-papers", name: "Filter papers, 100", price_cents: 450, currency: CURRENCY },
    Product { sku: "kettle", name: "Gooseneck kettle", price_cents: 5400, currency: CURRENCY },
];

/// Looks a product up by sku.
pub fn product(sku: &str) -> Option<&'static Product> {
    CATALOGUE.iter().find(|p| p.sku == sku)
}

/// The body of `POST /api/orders`. Unknown fields (a cart id, a note) are accepted and ignored.
#[derive(Debug, Deserialize)]
struct OrderRequest {
    items: Vec<ItemRequest>,
}

#[derive(Debug, Deserialize)]
struct ItemRequest {
    sku: String,
    qty: i64,
}

/// One line of an order, priced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrderLine {
    /// The product.
    pub sku: String,
    /// The product's name at the time of the order.
    pub name: String,
    /// Units.
    pub qty: i64,
    /// Unit price in cents.
    pub unit_price_cents: i64,
    /// `qty * unit_price_cents`.
    pub line_total_cents: i64,
}

/// A validated order request, not yet stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOrder {
    /// The priced lines.
    pub items: Vec<OrderLine>,
    /// Sum of the line totals, in cents.
    pub total_cents: i64,
}

/// A stored order, as `POST /api/orders` and `GET /api/orders` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Order {
    /// `ord_` followed by 16 hex digits.
    pub id: String,
    /// The account that placed it.
    pub account_id: String,
    /// The idempotency key of the request that created it.
    pub idempotency_key: String,
    /// The priced lines.
    pub items: Vec<OrderLine>,
    /// Sum of the line totals, in cents.
    pub total_cents: i64,
    /// [`CURRENCY`].
    pub currency: String,
    /// Unix time (seconds) of creation.
    pub created_at: i64,
    /// The payment provider's charge, once the order was charged (only when the server charges through a
    /// provider, `--provider-url`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub charge_id: Option<String>,
    /// The confirmation message in the outbox (only when the server sends confirmations, `--mail-url`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<Confirmation>,
}

/// The outbox topic of an order's confirmation.
pub const CONFIRMATION_TOPIC: &str = "confirmation";

/// The message id of an order's confirmation (the receiver deduplicates by it).
pub fn confirmation_id(order_id: &str) -> String {
    format!("confirm-{order_id}")
}

/// An order's confirmation message, as the outbox holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Confirmation {
    /// The message id the mail receiver deduplicates by.
    pub id: String,
    /// Unix time (seconds) the receiver accepted it; `None` while it waits in the outbox.
    pub delivered_at: Option<i64>,
}

/// Validates and prices a request body: `{"items": [{"sku": "mug", "qty": 2}, ...], ...}`.
///
/// The error is a 400 problem; the caller stores it as the key's response, so a retry of the same bad
/// request gets the same answer.
pub fn prepare(body: &[u8]) -> Result<NewOrder, Problem> {
    let request: OrderRequest = serde_json::from_slice(body).map_err(|e| {
        invalid(format!("The body must be JSON like {{\"items\":[{{\"sku\":\"mug\",\"qty\":1}}]}}: {e}."))
    })?;
    if request.items.is_empty() {
        return Err(invalid("An order needs at least one item.".to_owned()));
    }
    if request.items.len() > MAX_LINES {
        return Err(invalid(format!("An order has at most {MAX_LINES} items.")));
    }
    let mut items = Vec::with_capacity(request.items.len());
    let mut total_cents = 0_i64;
    for item in request.items {
        let Some(product) = product(&item.sku) else {
            return Err(invalid(format!("Unknown sku {:?}; see GET /api/products.", item.sku)));
        };
        if !(1..=MAX_QTY).contains(&item.qty) {
            return Err(invalid(format!("qty of {:?} must be between 1 and {MAX_QTY}.", item.sku)));
        }
        let line_total_cents = product.price_cents * item.qty;
        total_cents += line_total_cents;
        items.push(OrderLine {
            sku: product.sku.to_owned(),
            name: product.name.to_owned(),
            qty: item.qty,
            unit_price_cents: product.price_cents,
            line_total_cents,
        });
    }
    Ok(NewOrder { items, total_cents })
}

fn invalid(detail: String) -> Problem {
    Problem::new(StatusCode::BAD_REQUEST, "invalid-order", "Invalid order", detail)
}

/// A fresh order id: `ord_` and 16 random hex digits.
pub fn new_order_id() -> String {
    format!("ord_{:016x}", fastrand::u64(..))
}

/// Turns a validated request into the order to insert.
pub fn build(new: NewOrder, account: &AccountId, key: &IdempotencyKey, now: i64) -> Order {
    Order {
        id: new_order_id(),
        account_id: account.as_str().to_owned(),
        idempotency_key: key.as_str().to_owned(),
        items: new.items,
        total_cents: new.total_cents,
        currency: CURRENCY.to_owned(),
        created_at: now,
        charge_id: None,
        confirmation: None,
    }
}

/// Encodes order lines for storage.
pub fn encode_items(items: &[OrderLine]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| String::from("[]"))
}

/// Decodes stored order lines.
pub fn decode_items(text: &str) -> Result<Vec<OrderLine>, serde_json::Error> {
    serde_json::from_str(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_an_order() {
        let new = prepare(br#"{"items":[{"sku":"mug","qty":2},{"sku":"grinder","qty":1}],"note":"x"}"#);
        let Ok(new) = new else { panic!("rejected: {new:?}") };
        assert_eq!(new.total_cents, 2 * 1200 + 6900);
        assert_eq!(new.items.len(), 2);
    }

    #[test]
    fn rejects_bad_orders() {
        for body in [
            &b"not json"[..],
            br#"{"items":[]}"#,
            br#"{"items":[{"sku":"nope","qty":1}]}"#,
            br#"{"items":[{"sku":"mug","qty":0}]}"#,
            br#"{"items":[{"sku":"mug","qty":100}]}"#,
            br#"{"items":[{"sku":"mug","qty":1.5}]}"#,
            br#"[]"#,
        ] {
            let result = prepare(body);
            assert!(matches!(&result, Err(p) if p.status == 400), "{result:?}");
        }
    }
}
