//! The Idempotency-Key protocol's vocabulary: the keyed request, what one step decided, and the stored
//! answer that is replayed byte for byte (and how it becomes an HTTP response).
//!
//! The step itself (one transaction: claim the key, do the work, store the answer) is
//! [`crate::store::Store::process`]; the handler that drives it over HTTP is [`crate::idempotency`].

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;

use crate::keys::{AccountId, IdempotencyKey};
use crate::orders::Order;
use crate::problem::{Problem, PROBLEM_JSON};

/// The header set on replayed responses.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";
/// Largest stored response body, in bytes. Every answer the server stores is far smaller (an order has at
/// most [`crate::orders::MAX_LINES`] lines; problem details are truncated), so a bigger one is a bug: the
/// step refuses to store it and rolls back ([`crate::store::StoreError::ResponseTooLarge`]).
pub const MAX_STORED_BODY_BYTES: usize = 16 * 1024;

/// A response as stored on the key row and replayed byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// HTTP status code.
    pub status: u16,
    /// Headers (lowercase names) that are part of the response, such as `content-type`.
    pub headers: Vec<(String, String)>,
    /// The body, exactly as first sent.
    pub body: String,
}

impl StoredResponse {
    /// Stores a problem (for example a body that failed validation) as the key's response.
    pub fn from_problem(problem: &Problem) -> Self {
        let mut headers = vec![("content-type".to_owned(), PROBLEM_JSON.to_owned())];
        if let Some(secs) = problem.retry_after {
            headers.push(("retry-after".to_owned(), secs.to_string()));
        }
        StoredResponse { status: problem.status, headers, body: problem.to_json() }
    }

    /// Encodes the headers for the `response_headers` column.
    pub fn encode_headers(&self) -> String {
        serde_json::to_string(&self.headers).unwrap_or_else(|_| String::from("[]"))
    }

    /// The stored response from the key row's `status_code`, `response_headers` and `response_body`
    /// columns; `None` while the row has no response yet (its request is in flight).
    pub fn from_columns(
        status: Option<u16>,
        headers: Option<&str>,
        body: Option<String>,
    ) -> Result<Option<Self>, serde_json::Error> {
        let Some(status) = status else {
            return Ok(None);
        };
        Ok(Some(StoredResponse {
            status,
            headers: serde_json::from_str(headers.unwrap_or("[]"))?,
            body: body.unwrap_or_default(),
        }))
    }

    /// The HTTP response; `replayed` adds `Idempotent-Replayed: true`.
    pub fn into_http(self, replayed: bool) -> Response {
        let mut response = Response::new(Body::from(self.body));
        *response.status_mut() = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let headers = response.headers_mut();
        for (name, value) in &self.headers {
            if let (Ok(name), Ok(value)) = (HeaderName::try_from(name.as_str()), HeaderValue::try_from(value.as_str()))
            {
                headers.append(name, value);
            }
        }
        if replayed {
            headers.insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
        }
        response
    }
}

/// One keyed request, as the protocol step sees it.
#[derive(Debug, Clone)]
pub struct KeyedRequest {
    /// The account that scopes the key.
    pub account: AccountId,
    /// The idempotency key.
    pub key: IdempotencyKey,
    /// [`crate::keys::request_hash`] of the request.
    pub request_hash: String,
    /// The raw body (validated inside the transaction).
    pub body: Bytes,
    /// Unix time (seconds) used as `created_at`.
    pub now: i64,
    /// Key rows created before this unix time are expired: the request treats them as absent
    /// (and replaces them), even if the sweep has not deleted them yet.
    pub expired_before: i64,
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

/// What one protocol step decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The key was new: the work was done (or the body was rejected) and the response committed with it.
    Fresh(StoredResponse),
    /// The key was used before for the same request: its stored response, to replay.
    Replay(StoredResponse),
    /// The key was used before for a different request (422).
    Mismatch,
    /// The key's first request is still being processed (409 with `Retry-After`).
    InFlight,
}

impl Outcome {
    /// Decides the outcome for an existing key row.
    pub fn for_existing(request_hash: &str, stored_hash: &str, stored: Option<StoredResponse>) -> Outcome {
        match stored {
            None => Outcome::InFlight,
            Some(_) if stored_hash != request_hash => Outcome::Mismatch,
            Some(response) => Outcome::Replay(response),
        }
    }
}
