//! Reading a request's body in full before the request takes an API slot.
//!
//! A body that trickles in would otherwise hold a concurrency slot for as long as its sender likes, so a few
//! hundred slow senders (no session needed for `POST /api/session`) could starve every other caller. This
//! layer sits outside the per-address and global limits: it buffers the body under a [`BodyBudget`] (a size
//! cap, and a deadline that grows with what has arrived, i.e. a minimum upload rate, as Apache's
//! `mod_reqtimeout` `MinRate` does), then passes the request on with the body in memory.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use futures_util::StreamExt;
use tokio::time::Instant;

use crate::config::Limits;
use crate::problem::Problem;

/// Largest body of `POST /api/session`: `{"account": ID}` with a 64-character id needs under 100 bytes.
pub const SESSION_MAX_BODY_BYTES: usize = 1024;

/// What one request's body may be: at most `max_bytes`, arriving within `grace` plus one second per
/// `min_bytes_per_sec` bytes received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyBudget {
    /// Largest body (413 above).
    pub max_bytes: usize,
    /// Time allowed before the rate counts.
    pub grace: Duration,
    /// Slowest accepted upload rate.
    pub min_bytes_per_sec: u32,
}

impl BodyBudget {
    /// The budget of the API's requests: `max_body_bytes`, `body_timeout` of grace.
    pub fn api(limits: &Limits) -> Self {
        BodyBudget {
            max_bytes: limits.max_body_bytes,
            grace: limits.body_timeout,
            min_bytes_per_sec: limits.min_upload_bytes_per_sec,
        }
    }

    /// The budget of `POST /api/session`: [`SESSION_MAX_BODY_BYTES`], `session_body_timeout` of grace.
    pub fn session(limits: &Limits) -> Self {
        BodyBudget {
            max_bytes: SESSION_MAX_BODY_BYTES.min(limits.max_body_bytes),
            grace: limits.session_body_timeout,
            ..BodyBudget::api(limits)
        }
    }

    /// When a body that started at `started` and has delivered `received` bytes must be complete.
    fn deadline(&self, started: Instant, received: usize) -> Instant {
        let earned = Duration::from_secs_f64(received as f64 / f64::from(self.min_bytes_per_sec.max(1)));
        started + self.grace + earned
    }
}

/// Middleware: reads the body under `budget`, then runs the rest with it in memory; a body too large is
/// 413, too slow 408, broken 400, and none of them reaches the handler.
pub async fn read_body_first(State(budget): State<BodyBudget>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let declared = parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > budget.max_bytes as u64) {
        return too_large().into_response();
    }
    match read(body, budget).await {
        Ok(bytes) => next.run(Request::from_parts(parts, Body::from(bytes))).await,
        Err(problem) => problem.into_response(),
    }
}

/// The body's data (trailers carry nothing the API reads).
async fn read(body: Body, budget: BodyBudget) -> Result<Bytes, Problem> {
    let started = Instant::now();
    let mut chunks = body.into_data_stream();
    let mut buffer = BytesMut::new();
    loop {
        let chunk = match tokio::time::timeout_at(budget.deadline(started, buffer.len()), chunks.next()).await {
            Err(_) => return Err(too_slow()),
            Ok(None) => return Ok(buffer.freeze()),
            Ok(Some(Err(error))) => return Err(unreadable(&error)),
            Ok(Some(Ok(chunk))) => chunk,
        };
        if buffer.len() + chunk.len() > budget.max_bytes {
            return Err(too_large());
        }
        buffer.extend_from_slice(&chunk);
    }
}

fn too_large() -> Problem {
    Problem::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body-too-large",
        "Body too large",
        format!(
            "The request body is larger than this endpoint accepts (--max-body-bytes; {SESSION_MAX_BODY_BYTES} \
             bytes for /api/session)."
        ),
    )
}

fn too_slow() -> Problem {
    Problem::new(
        StatusCode::REQUEST_TIMEOUT,
        "body-timeout",
        "Request timeout",
        "The request body arrived too slowly (--min-upload-bytes-per-sec); nothing was done.",
    )
}

/// A body that failed: a pause longer than the body timeout (408), or a connection cut off (400).
fn unreadable(error: &axum::Error) -> Problem {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if cause.is::<tower_http::timeout::TimeoutError>() {
            return Problem::new(
                StatusCode::REQUEST_TIMEOUT,
                "body-timeout",
                "Request timeout",
                "The request body paused too long (--body-timeout-secs); nothing was done.",
            );
        }
        source = cause.source();
    }
    Problem::bad_request("unreadable-body", "The request body could not be read; nothing was done.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_grows_with_what_arrived() {
        let budget = BodyBudget { max_bytes: 100, grace: Duration::from_secs(2), min_bytes_per_sec: 1000 };
        let start = Instant::now();
        assert_eq!(budget.deadline(start, 0), start + Duration::from_secs(2));
        assert_eq!(budget.deadline(start, 500), start + Duration::from_millis(2500));
        assert_eq!(budget.deadline(start, 3000), start + Duration::from_secs(5));
    }

    #[test]
    fn the_session_budget_is_small_and_short() {
        let limits = Limits::default();
        let session = BodyBudget::session(&limits);
        assert_eq!(session.max_bytes, SESSION_MAX_BODY_BYTES);
        assert_eq!(session.grace, limits.session_body_timeout);
        assert_eq!(BodyBudget::api(&limits).max_bytes, limits.max_body_bytes);
    }
}
