//! The Idempotency-Key protocol's vocabulary as this server uses it: the library's decision ([`Outcome`])
//! and stored answer ([`StoredResponse`]), and this server's keyed request and the work of a fresh key.
//!
//! The step itself (one transaction: insert the key row, do the work, store the answer) is
//! [`crate::store::Store::process`]; the handler that drives it over HTTP is [`crate::idempotency`].

pub use idempotent_endpoint::{Outcome, StoredResponse, FENCED_FINGERPRINT, MAX_STORED_BODY_BYTES, REPLAYED_HEADER};

use bytes::Bytes;

use crate::keys::{AccountId, IdempotencyKey};
use crate::orders::Order;

/// One keyed request, as the protocol step sees it.
#[derive(Debug, Clone)]
pub struct KeyedRequest {
    /// The account that scopes the key.
    pub account: AccountId,
    /// The idempotency key.
    pub key: IdempotencyKey,
    /// [`crate::keys::fingerprint`] of the request (the key row's `fingerprint`).
    pub request_hash: String,
    /// The raw body (validated inside the transaction).
    pub body: Bytes,
    /// Unix time (seconds): the new order's `created_at` (the key row is the library's, which takes the
    /// clock's time and judges expiry by its retention).
    pub now: i64,
}

impl KeyedRequest {
    /// The library's keyed request: the account as the scope.
    pub fn keyed(&self) -> idempotent_endpoint::KeyedRequest {
        idempotent_endpoint::KeyedRequest {
            scope: self.account.as_str().to_owned(),
            key: self.key.clone(),
            fingerprint: self.request_hash.clone(),
        }
    }
}

/// What the work did for a fresh key: the order to insert (none when the request was refused) and the
/// answer to store on the key row, both committed in the key's transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Work {
    /// The order to insert, if the request was valid.
    pub order: Option<Order>,
    /// The answer: a 201 with the order, or the problem that refused it.
    pub response: StoredResponse,
}

/// The `201 Created` response for a new order (what is stored and replayed).
pub fn created_response(order: &Order) -> StoredResponse {
    StoredResponse {
        status: axum::http::StatusCode::CREATED.as_u16(),
        headers: vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("location".to_owned(), format!("/api/orders/{}", order.id)),
        ],
        body: serde_json::to_string(order).unwrap_or_else(|_| String::from("{}")),
    }
}
