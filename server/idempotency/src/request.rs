//! A keyed request as the store sees it, and the axum extractor that reads one.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::fingerprint::fingerprint;
use crate::key::IdempotencyKey;
use crate::problem::Problem;

/// One keyed request: the scope the key lives in, the key and the request's fingerprint.
///
/// The scope is whoever the key belongs to: the authenticated account or API client. Keys are scoped so
/// that two callers who pick the same key never see each other's answers; an endpoint without
/// authentication uses one scope for everyone and relies on keys being random (128 bits from a CSPRNG).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyedRequest {
    /// The scope (account, API client), at most 255 bytes.
    pub scope: String,
    /// The idempotency key.
    pub key: IdempotencyKey,
    /// [`fingerprint`] of the request.
    pub fingerprint: String,
}

/// How long the [`Idempotent`] and [`BoundedBody`] extractors wait for a whole request body, counted from when it starts
/// reading (the request head has arrived by then).
///
/// A client that sends its headers and then trickles the body would otherwise hold a socket and a task for
/// as long as it likes; past the deadline the extractors answer 408 `body-timeout` and drops the body, and
/// hyper closes the connection since the body was not read to its end. Nothing was done for the key, so a
/// retry with the same key is safe.
///
/// Set it for a router (or one route) as an extension:
///
/// ```
/// use std::time::Duration;
/// use idempotent_endpoint::BodyDeadline;
///
/// let app: axum::Router = axum::Router::new().layer(axum::Extension(BodyDeadline(Duration::from_secs(5))));
/// ```
///
/// # Default
///
/// [`BodyDeadline::DEFAULT`], 10 seconds, when the request has no `BodyDeadline` extension: enough for a
/// body of axum's default limit over a slow mobile link, short enough that slow uploads cannot pile up.
/// The deadline covers the body only; the time to read the request head is the HTTP server's setting
/// (hyper's `header_read_timeout`, see this crate's README, "Serving").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyDeadline(pub Duration);

impl BodyDeadline {
    /// The deadline when none is configured.
    pub const DEFAULT: BodyDeadline = BodyDeadline(crate::defaults::BODY_DEADLINE);
}

impl Default for BodyDeadline {
    fn default() -> Self {
        BodyDeadline::DEFAULT
    }
}

/// The axum extractor for a keyed endpoint: the key from `Idempotency-Key`, the body and its fingerprint.
///
/// A missing or malformed key is refused with a 400 problem before the body is read; a body the server
/// cannot read (too large for axum's body limit, cut off) with 413 or 400, and a body that does not arrive
/// within the [`BodyDeadline`] with 408 `body-timeout`. Put it last among the handler's arguments (it reads
/// the body).
#[derive(Debug, Clone)]
pub struct Idempotent {
    /// The key.
    pub key: IdempotencyKey,
    /// The fingerprint of method, path and body.
    pub fingerprint: String,
    /// The body, as received.
    pub body: Bytes,
}

impl Idempotent {
    /// The keyed request in `scope` (see [`KeyedRequest::scope`]).
    pub fn scoped(&self, scope: impl Into<String>) -> KeyedRequest {
        KeyedRequest { scope: scope.into(), key: self.key.clone(), fingerprint: self.fingerprint.clone() }
    }

    /// The body as JSON; a body that is not the expected JSON is a 400 problem (`invalid-body`), which the
    /// handler may store as the key's answer so that a retry of the same bad request gets the same one.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, Problem> {
        serde_json::from_slice(&self.body).map_err(|e| Problem::invalid_body(e.to_string()))
    }
}

impl<S: Send + Sync> FromRequest<S> for Idempotent {
    type Rejection = Problem;

    async fn from_request(request: Request, state: &S) -> Result<Self, Problem> {
        let key = IdempotencyKey::from_headers(request.headers())?;
        let method = request.method().as_str().to_owned();
        let path = request.uri().path().to_owned();
        let BoundedBody(body) = BoundedBody::from_request(request, state).await?;
        Ok(Idempotent { fingerprint: fingerprint(&method, &path, &body), key, body })
    }
}

/// The axum extractor for a request body read within the [`BodyDeadline`] and axum's body limit, for an
/// endpoint without an idempotency key (an inbox receiver: the message id is in the body). [`Idempotent`]
/// reads its body through it.
///
/// A body larger than the limit is refused with 413 `body-too-large`, one that is cut off with 400
/// `unreadable-body`, and one that does not arrive within the deadline with 408 `body-timeout`.
#[derive(Debug, Clone)]
pub struct BoundedBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for BoundedBody {
    type Rejection = Problem;

    async fn from_request(request: Request, state: &S) -> Result<Self, Problem> {
        let deadline = request.extensions().get::<BodyDeadline>().copied().unwrap_or_default();
        let read = tokio::time::timeout(deadline.0, Bytes::from_request(request, state));
        let body = read.await.map_err(|_| Problem::body_timeout())?.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                Problem::body_too_large()
            } else {
                Problem::unreadable_body()
            }
        })?;
        Ok(BoundedBody(body))
    }
}
