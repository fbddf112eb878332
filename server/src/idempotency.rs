//! `POST /api/orders`: the server half of the Idempotency-Key protocol.
//!
//! # Why an in-process "in flight" set as well as the key row
//!
//! The design asks for the key row, the work and the stored response to be committed in ONE transaction,
//! so a crash can never leave a key that claims work which was not done (or work without its key). The
//! price is that an "in flight" row (key inserted, no response yet) is never visible to other connections:
//! it is uncommitted. With SQLite (a single writer, `BEGIN IMMEDIATE`) a second request for the same key
//! would simply queue behind the first on the write lock and then replay its committed answer. That is
//! correct, but it hides the in-flight state and ties up a blocking thread per duplicate.
//!
//! So each server process also keeps the set of `(account, key)` pairs it is processing right now. A
//! second concurrent request for a key in that set is answered `409 Conflict` with `Retry-After: 1` at
//! once; the client retries with the same key and, once the first request committed, gets the replay.
//! Across processes (PostgreSQL, several instances) the database lock plays that role: the PostgreSQL
//! store answers [`Outcome::InFlight`] instead of blocking on a key another transaction holds.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures_util::stream;

use crate::faults::FaultPlan;
use crate::keys::{request_hash, AccountId, IdempotencyKey};
use crate::problem::Problem;
use crate::routes::AppState;
use crate::store::{KeyedRequest, Outcome, ProcessOptions, StoreError};

/// `Retry-After` seconds sent with 409 (same key still in flight).
pub const IN_FLIGHT_RETRY_AFTER_SECS: u64 = 1;

/// The `(account, key)` pairs this process is working on.
#[derive(Debug, Clone, Default)]
pub struct InFlight {
    keys: Arc<Mutex<HashSet<(String, String)>>>,
}

impl InFlight {
    /// Claims a key; `None` if it is already claimed. The claim ends when the guard is dropped.
    pub fn claim(&self, account: &AccountId, key: &IdempotencyKey) -> Option<InFlightGuard> {
        let entry = (account.as_str().to_owned(), key.as_str().to_owned());
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if !keys.insert(entry.clone()) {
            return None;
        }
        Some(InFlightGuard { keys: Arc::clone(&self.keys), entry })
    }
}

/// A claim on a key; releases it on drop (also when the client disconnects and the handler is dropped).
#[derive(Debug)]
pub struct InFlightGuard {
    keys: Arc<Mutex<HashSet<(String, String)>>>,
    entry: (String, String),
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        keys.remove(&self.entry);
    }
}

/// The handler of `POST /api/orders`.
pub async fn create_order(
    State(app): State<AppState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match handle(app, method, uri, headers, body).await {
        Ok(response) => response,
        Err(problem) => problem.into_response(),
    }
}

async fn handle(app: AppState, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Result<Response, Problem> {
    let account = AccountId::from_headers(&headers)?;
    let key = IdempotencyKey::from_headers(&headers)?;
    let plan = app.faults.plan(&headers)?;

    if let Some(problem) = refused_before_work(&plan) {
        return Err(problem);
    }

    let Some(_claim) = app.in_flight.claim(&account, &key) else {
        return Err(in_flight());
    };

    let now = crate::unix_now();
    let request = KeyedRequest {
        request_hash: request_hash(method.as_str(), uri.path(), &body),
        account: account.clone(),
        key: key.clone(),
        body,
        now,
        expired_before: crate::sweep::expired_before(now, app.retention),
    };
    let options = ProcessOptions { work_delay: plan.latency, fail_before_commit: plan.crash_before_commit };
    // The step runs in its own task so that a client hanging up cannot cancel it half way.
    let store = app.store.clone();
    let outcome = tokio::spawn(async move { store.process(request, options).await })
        .await
        .map_err(|e| StoreError::Task(e.to_string()))
        .and_then(|r| r);

    let (summary, answer) = match outcome {
        Ok(Outcome::Fresh(response)) if plan.drop_after_commit => {
            (format!("{} committed, connection dropped", response.status), Ok(dropped_connection()))
        }
        Ok(Outcome::Fresh(response)) => (format!("{} fresh", response.status), Ok(response.into_http(false))),
        Ok(Outcome::Replay(response)) => (format!("{} replayed", response.status), Ok(response.into_http(true))),
        Ok(Outcome::Mismatch) => (
            "422 key reused".to_owned(),
            Err(Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency-key-reused",
                "Idempotency-Key reused",
                "This Idempotency-Key was already used for a different request (method, path or body). \
                 Use a new key for a new intent.",
            )),
        ),
        Ok(Outcome::InFlight) | Err(StoreError::Locked) => ("409 in flight".to_owned(), Err(in_flight())),
        Err(error @ StoreError::InjectedCrash) => (
            format!("500 {error}"),
            Err(Problem::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "crashed-before-commit",
                "Internal server error",
                "Injected fault: the transaction was rolled back; nothing was done.",
            )),
        ),
        Err(error) => {
            tracing::error!(%error, "POST /api/orders failed");
            (format!("500 {error}"), Err(Problem::internal()))
        }
    };
    tracing::info!(account = %account.as_str(), key = %key.as_str(), "POST /api/orders: {summary}");
    answer
}

/// The injected refusal (429 before 503) that answers before any work, with the plan's `Retry-After`;
/// `None` if the plan lets the request through.
fn refused_before_work(plan: &FaultPlan) -> Option<Problem> {
    let (status, code, title, detail) = if plan.status429 {
        (
            StatusCode::TOO_MANY_REQUESTS,
            "rate-limited",
            "Too many requests",
            "Injected fault: slow down and retry with the same Idempotency-Key.",
        )
    } else if plan.fail_before_work {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "Service unavailable",
            "Injected fault: nothing was done; retry with the same Idempotency-Key.",
        )
    } else {
        return None;
    };
    Some(Problem::new(status, code, title, detail).with_retry_after(plan.retry_after_secs))
}

fn in_flight() -> Problem {
    Problem::new(
        StatusCode::CONFLICT,
        "request-in-flight",
        "Request in flight",
        "A request with this Idempotency-Key is still being processed; retry with the same key.",
    )
    .with_retry_after(IN_FLIGHT_RETRY_AFTER_SECS)
}

/// A response whose body fails at once: hyper then closes the connection without sending anything
/// (the status line is still buffered when the body errors), so the client sees a network error after
/// the order was committed: the case retries with the same key exist for.
fn dropped_connection() -> Response {
    let failing = stream::once(async { Err::<Bytes, std::io::Error>(std::io::Error::other("dropAfterCommit fault")) });
    Response::new(Body::from_stream(failing))
}
