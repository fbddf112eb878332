//! `POST /api/orders`: the server half of the Idempotency-Key protocol over HTTP.
//!
//! The handler authenticates the account, parses the key, applies the account's rate and any injected fault, enters the
//! key in this process's in-flight set (the library's `inflight::InFlightKeys`), and hands the store the work to do for a fresh key
//! ([`place_order`]) in a task of its own, which holds the in-flight entry until the work is done. The store runs the
//! protocol step in one transaction ([`crate::store::Store::process`]), or, with a payment provider configured, the
//! order phases run ([`crate::checkout::place`]); the handler turns the [`Outcome`] into the HTTP answer.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use tracing::Instrument;

use crate::auth::Authenticated;
use crate::checkout::{self, FlowError};
use crate::clock::unix_now;
use crate::faults::{dropped_connection, FaultPlan};
use crate::keys::{fingerprint, AccountId, IdempotencyKey};
use crate::metrics::Decision;
use crate::orders;
use crate::problem::Problem;
use crate::protocol::{created_response, KeyedRequest, Outcome, StoredResponse, Work};
use crate::state::AppState;
use crate::store::{ProcessOptions, StoreError};

pub use idempotent_endpoint::IN_FLIGHT_RETRY_AFTER_SECS;

/// The handler of `POST /api/orders`.
pub async fn create_order(
    State(app): State<AppState>,
    Authenticated(account): Authenticated,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match handle(app, account, method, uri, headers, body).await {
        Ok(response) => response,
        Err(problem) => problem.into_response(),
    }
}

/// The work for a fresh key: validate and price the body, and answer 201 with the order to insert, or the
/// 400 that refuses it (stored too, so a retry of the same bad request gets the same answer).
pub fn place_order(request: &KeyedRequest) -> Work {
    match orders::prepare(&request.body) {
        Ok(new) => {
            let order = orders::build(new, &request.account, &request.key, request.now);
            Work { response: created_response(&order), order: Some(order) }
        }
        Err(problem) => Work { order: None, response: StoredResponse::from_problem(&problem) },
    }
}

/// The failure the `store-500` fault stores as the key's answer, like a server that records its first
/// outcome whatever it was (Stripe does, 500s included).
fn stored_failure() -> Work {
    let problem = Problem::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "stored-failure",
        "Internal server error",
        "Injected fault: this failure is the key's stored outcome; every retry with this key replays it.",
    );
    Work { order: None, response: StoredResponse::from_problem(&problem) }
}

async fn handle(
    app: AppState,
    account: AccountId,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let body = body.map_err(body_problem)?;
    let key = IdempotencyKey::from_headers(&headers)?;
    let span = tracing::Span::current();
    span.record("idempotency.key_hash", idempotent_endpoint::key_hash(key.as_str()));
    let decided = |decision: Decision| {
        app.metrics.decided(decision);
        span.record("idempotency.decision", decision.as_str());
    };
    let plan = match &app.faults {
        Some(faults) => faults.plan(&headers)?,
        None => FaultPlan::default(),
    };
    if let Some(problem) = refused_before_work(&plan) {
        return Err(problem);
    }
    if let Err(not_until) = app.limiter.check_key(&account.as_str().to_owned()) {
        let wait = not_until.wait_time_from(governor::clock::Clock::now(app.limiter.clock()));
        return Err(Problem::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate-limited",
            "Too many requests",
            "This account sends orders faster than the server allows; retry with the same Idempotency-Key.",
        )
        .with_retry_after(wait.as_secs() + 1));
    }

    let Some(entry) = app.in_flight.enter(account.as_str(), key.as_str()) else {
        decided(Decision::InFlight);
        return Err(in_flight());
    };
    if plan.panic {
        // A bug in a handler, on purpose: the catch-panic layer answers 500; the in-flight entry is dropped by the
        // unwind and nothing was stored, so the key stays retryable.
        panic!("injected fault: panic while handling key {}", key.as_str());
    }

    let now = unix_now();
    let request = KeyedRequest {
        request_hash: fingerprint(method.as_str(), uri.path(), &body),
        account: account.clone(),
        key: key.clone(),
        body,
        now,
    };
    let options = ProcessOptions { work_delay: plan.latency, fail_before_commit: plan.crash_before_commit };
    let store_failure = plan.store_500;
    let work = move |r: &KeyedRequest| if store_failure { stored_failure() } else { place_order(r) };
    // The step runs in its own task so that a client hanging up cannot cancel it half way, and the task
    // owns the key's in-flight entry: the key reads in flight (to key status and to settling) until the work has
    // committed or rolled back, not merely until the client stops waiting for it.
    let store = app.store.clone();
    let outcome = match app.checkout.clone() {
        None => tokio::spawn(
            async move {
                let outcome = store.process(request, options, work).await;
                drop(entry);
                outcome
            }
            .in_current_span(),
        )
        .await
        .map_err(|e| StoreError::Task(e.to_string()))
        .and_then(|r| r),
        Some(checkout) => {
            let placed = tokio::spawn(
                async move {
                    let placed = checkout::place(&store, &checkout, request, plan, Box::new(work)).await;
                    drop(entry);
                    placed
                }
                .in_current_span(),
            )
            .await
            .map_err(|e| FlowError::Store(StoreError::Task(e.to_string())))
            .and_then(|r| r);
            match placed {
                Ok(outcome) => Ok(outcome),
                Err(FlowError::Store(error)) => Err(error),
                Err(FlowError::InjectedCrash) => Err(StoreError::InjectedCrash),
                Err(FlowError::ProviderBusy) => Err(StoreError::KeyBusy),
                Err(error @ (FlowError::ProviderUnavailable(_) | FlowError::ProviderRefused(_))) => {
                    tracing::warn!(%error, "POST /api/orders: the charge did not go through");
                    return Err(payment_unavailable());
                }
            }
        }
    };

    match &outcome {
        Ok(Outcome::Fresh(_)) => decided(Decision::Fresh),
        Ok(Outcome::Replay(_)) => decided(Decision::Replay),
        Ok(Outcome::Mismatch) => decided(Decision::Mismatch),
        Ok(Outcome::Fenced) => decided(Decision::Fenced),
        Ok(Outcome::InFlight) | Err(StoreError::KeyBusy | StoreError::LeaseLost) => decided(Decision::InFlight),
        Err(_) => {}
    }
    let (summary, answer) = match outcome {
        Ok(Outcome::Fresh(response)) if plan.drop_after_commit => {
            (format!("{} committed, connection dropped", response.status), Ok(dropped_connection()))
        }
        Ok(Outcome::Fresh(response)) => (format!("{} fresh", response.status), Ok(response.into_http(false))),
        Ok(Outcome::Replay(response)) => (format!("{} replayed", response.status), Ok(response.into_http(true))),
        Ok(Outcome::Mismatch) => ("422 key reused".to_owned(), Err(Outcome::mismatch_problem())),
        Ok(Outcome::Fenced) => ("410 key fenced".to_owned(), Err(Outcome::fenced_problem())),
        Ok(Outcome::InFlight) | Err(StoreError::KeyBusy | StoreError::LeaseLost) => {
            ("409 in flight".to_owned(), Err(in_flight()))
        }
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
    tracing::debug!(account = %account.as_str(), "POST /api/orders: {summary}");
    answer
}

/// The problem for a body that could not be read: too large (413), too slow (408), or cut off (400).
fn body_problem(rejection: BytesRejection) -> Problem {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body-too-large",
            "Body too large",
            "The request body is larger than the server accepts (--max-body-bytes).",
        );
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&rejection);
    while let Some(error) = source {
        if error.is::<tower_http::timeout::TimeoutError>() {
            return Problem::new(
                StatusCode::REQUEST_TIMEOUT,
                "body-timeout",
                "Request timeout",
                "The request body arrived too slowly; nothing was done.",
            );
        }
        source = error.source();
    }
    Problem::bad_request("unreadable-body", "The request body could not be read; nothing was done.")
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

/// The provider could not be reached or failed: nothing is lost, the key resumes at `charge_started` and
/// repeats the call with the same derived key.
fn payment_unavailable() -> Problem {
    Problem::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "payment-unavailable",
        "Payment provider unavailable",
        "The order is kept and the charge will be completed: retry with the same Idempotency-Key.",
    )
    .with_retry_after(1)
}

fn in_flight() -> Problem {
    Outcome::in_flight_problem()
}
