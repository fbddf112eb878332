//! Timeouts and limits around the router, from tower and tower-http, and the problem+json bodies for the
//! bare answers those layers give.
//!
//! The header-read timeout, the header buffer, the time to the first byte and the connection caps live in
//! the accept loop ([`crate::server`]), since they act before a request exists; reading the body before a
//! slot is taken is [`crate::upload`], and the per-address limits are [`crate::address`].

use std::any::Any;
use std::sync::Arc;

use axum::error_handling::HandleErrorLayer;
use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tokio::sync::Semaphore;
use tower::layer::util::{Identity, Stack};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::load_shed::LoadShedLayer;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::timeout::{RequestBodyTimeoutLayer, TimeoutLayer};

use crate::config::Limits;
use crate::problem::{Problem, PROBLEM_JSON};

/// `Retry-After` seconds sent with 503 when the server is at its concurrency limit.
pub const OVERLOADED_RETRY_AFTER_SECS: u64 = 1;

/// Wraps the whole application: a panic is a 500 (the process keeps serving), a request is cut off with
/// 408 after `request_timeout`, a body pausing longer than `body_timeout` fails, a body over
/// `max_body_bytes` is 413; bare error answers of those layers get a problem+json body.
pub fn apply(app: Router, limits: &Limits) -> Router {
    app.layer(
        ServiceBuilder::new()
            .layer(CatchPanicLayer::custom(panicked))
            .layer(axum::middleware::map_response(problem_for_bare_errors))
            .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, limits.request_timeout))
            .layer(RequestBodyTimeoutLayer::new(limits.body_timeout))
            .layer(DefaultBodyLimit::max(limits.max_body_bytes)),
    )
}

/// The API's concurrency slots (`max_concurrent_requests`), shared by every API route; the readiness check
/// reads how many are in use.
#[derive(Debug, Clone)]
pub struct ApiSlots {
    semaphore: Arc<Semaphore>,
    max: usize,
}

impl ApiSlots {
    /// `limits.max_concurrent_requests` slots.
    pub fn new(limits: &Limits) -> Self {
        let max = usize::try_from(limits.max_concurrent_requests).unwrap_or(usize::MAX).min(Semaphore::MAX_PERMITS);
        ApiSlots { semaphore: Arc::new(Semaphore::new(max)), max }
    }

    /// How many slots there are.
    pub fn max(&self) -> usize {
        self.max
    }

    /// How many are held by requests running now.
    pub fn in_use(&self) -> usize {
        self.max.saturating_sub(self.semaphore.available_permits())
    }

    /// Whether every slot is held: a new API request would be refused with 503.
    pub fn saturated(&self) -> bool {
        self.semaphore.available_permits() == 0
    }
}

/// The concurrency limit of the API routes: at most the slots' count at once, shared by every route; over
/// it a request is refused at once with 503 and `Retry-After` instead of queueing.
pub fn concurrency(slots: &ApiSlots) -> ConcurrencyLayer {
    let overloaded: OverloadedFn = |_| std::future::ready(Overloaded);
    ServiceBuilder::new()
        .layer(HandleErrorLayer::new(overloaded))
        .load_shed()
        .layer(GlobalConcurrencyLimitLayer::with_semaphore(Arc::clone(&slots.semaphore)))
}

/// The layers of [`concurrency`]: answer [`Overloaded`] for the error of shedding when the shared semaphore
/// has no permit left.
pub type ConcurrencyLayer = ServiceBuilder<
    Stack<GlobalConcurrencyLimitLayer, Stack<LoadShedLayer, Stack<HandleErrorLayer<OverloadedFn, ()>, Identity>>>,
>;

/// Maps the load-shedding error to [`Overloaded`].
pub type OverloadedFn = fn(tower::BoxError) -> std::future::Ready<Overloaded>;

/// The answer when the concurrency limit is reached: 503 with `Retry-After`.
#[derive(Debug, Clone, Copy)]
pub struct Overloaded;

impl IntoResponse for Overloaded {
    fn into_response(self) -> Response {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            "Service unavailable",
            "The server is at its concurrency limit; nothing was done. Retry with the same Idempotency-Key.",
        )
        .with_retry_after(OVERLOADED_RETRY_AFTER_SECS)
        .into_response()
    }
}

fn panicked(panic: Box<dyn Any + Send + 'static>) -> Response {
    let message = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)");
    tracing::error!(panic = message, "a handler panicked; answered 500");
    Problem::internal().into_response()
}

/// An error answer without a problem body (a layer's 408, an extractor's plain-text 413 or 400, a 404 of the
/// static files) gets the problem+json body of its status; everything else passes through.
async fn problem_for_bare_errors(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let content_type = response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    if content_type.is_some_and(|t| !t.starts_with("text/plain")) {
        return response;
    }
    let (code, title, detail) = match status {
        StatusCode::REQUEST_TIMEOUT => ("request-timeout", "Request timeout", "The request took too long; retry."),
        StatusCode::PAYLOAD_TOO_LARGE => {
            ("body-too-large", "Body too large", "The request body is larger than the server accepts.")
        }
        StatusCode::NOT_FOUND => ("not-found", "Not found", "No such resource."),
        StatusCode::METHOD_NOT_ALLOWED => ("method-not-allowed", "Method not allowed", "Not allowed on this path."),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            ("unsupported-media-type", "Unsupported media type", "The body's content type is not accepted.")
        }
        s if s.is_server_error() => ("internal-error", "Internal server error", "The server failed; retry later."),
        _ => ("bad-request", "Bad request", "The request could not be read."),
    };
    let mut answer = Problem::new(status, code, title, detail).into_response();
    // Keep the layer's other headers (Allow on 405, Retry-After), but with the problem's content type.
    let (mut parts, _) = response.into_parts();
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    parts.headers.remove(header::CONTENT_LENGTH);
    *answer.headers_mut() = parts.headers;
    answer
}
