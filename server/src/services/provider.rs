//! The payment provider: `POST /charges` with an `Idempotency-Key` makes a charge at most once per key and
//! replays its answer after, the same protocol as the reference server's orders (the request hash, the
//! stored answer replayed byte for byte with `Idempotent-Replayed: true`, 422 for a key reused with another
//! body, 409 while the key's first request is running).
//!
//! `GET /charges` lists every charge (the fault suite counts them per order). With `--enable-faults`,
//! `PUT /faults` switches on, with probabilities: a 503 before charging, a dropped connection after the
//! charge committed, and latency while the key is held.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use rusqlite::{params, OptionalExtension, TransactionBehavior};
use serde::{Deserialize, Serialize};

use super::{hit, probability, Db, RunningService};
use crate::faults::{dropped_connection, MAX_LATENCY_MS};
use crate::keys::{fingerprint, AccountId, IdempotencyKey};
use crate::problem::Problem;
use crate::protocol::{Outcome, StoredResponse};
use crate::store::StoreError;
use idempotent_endpoint::inflight::InFlightKeys;

/// The path of the charge endpoint.
pub const CHARGES_PATH: &str = "/charges";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS charges (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    key           TEXT    NOT NULL UNIQUE,
    request_hash  TEXT    NOT NULL,
    id            TEXT    NOT NULL UNIQUE,
    amount_cents  INTEGER NOT NULL,
    currency      TEXT    NOT NULL,
    reference     TEXT    NOT NULL,
    response_body TEXT    NOT NULL,
    created_at    INTEGER NOT NULL
);
";

/// The body of `POST /charges`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChargeRequest {
    /// The amount, in cents of `currency`.
    pub amount_cents: i64,
    /// ISO 4217 code.
    pub currency: String,
    /// The caller's reference (the reference server sends the order id).
    pub reference: String,
}

/// A charge, as `POST /charges` answers it and `GET /charges` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Charge {
    /// `ch_` followed by 16 hex digits.
    pub id: String,
    /// The Idempotency-Key that made it.
    pub idempotency_key: String,
    /// The amount, in cents.
    pub amount_cents: i64,
    /// ISO 4217 code.
    pub currency: String,
    /// The caller's reference.
    pub reference: String,
    /// Unix time (seconds).
    pub created_at: i64,
}

/// The provider's probabilistic faults (`GET/PUT /faults`, only with `--enable-faults`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ProviderFaults {
    /// Probability of answering 503 before charging.
    pub fail_before_charge: f64,
    /// Probability of committing the charge and then closing the connection without an answer.
    pub drop_after_charge: f64,
    /// Latency added while the key is held, in milliseconds.
    pub latency_ms: u64,
    /// Probability of adding `latencyMs`.
    pub latency_probability: f64,
}

impl ProviderFaults {
    fn validate(self) -> Result<Self, Problem> {
        probability("failBeforeCharge", self.fail_before_charge)?;
        probability("dropAfterCharge", self.drop_after_charge)?;
        probability("latencyProbability", self.latency_probability)?;
        if self.latency_ms > MAX_LATENCY_MS {
            return Err(Problem::bad_request(
                "invalid-fault-config",
                format!("latencyMs must be at most {MAX_LATENCY_MS}."),
            ));
        }
        Ok(self)
    }
}

#[derive(Debug, Clone)]
struct Provider {
    db: Db,
    in_flight: InFlightKeys,
    /// The one merchant every caller charges for (the in-flight set is keyed per account).
    merchant: AccountId,
    faults: Option<Arc<RwLock<ProviderFaults>>>,
}

/// Opens the provider's database at `db` and serves it on `addr`; faults only when `enable_faults`.
pub async fn start(addr: SocketAddr, db: &str, enable_faults: bool) -> Result<RunningService, crate::ServeError> {
    let db = db.to_owned();
    let db = tokio::task::spawn_blocking(move || Db::open(db, SCHEMA))
        .await
        .map_err(|e| StoreError::Task(e.to_string()))??;
    let merchant = AccountId::parse("merchant").map_err(|p| crate::ServeError::Config(p.detail))?;
    let faults = enable_faults.then(|| Arc::new(RwLock::new(ProviderFaults::default())));
    let state = Provider { db, in_flight: InFlightKeys::default(), merchant, faults };
    let mut app = Router::new()
        .route(CHARGES_PATH, get(list).post(charge))
        .route("/health", get(|| async { Json(serde_json::json!({ "status": "ok" })) }));
    if state.faults.is_some() {
        app = app.route("/faults", get(get_faults).put(put_faults));
    }
    // The reference server's server span on each request, continuing the caller's `traceparent` (a
    // binary that exports: `payment-provider --otlp-endpoint`), so a charge shows on the provider's side
    // of the order's trace.
    let app = app.route_layer(axum::middleware::from_fn(crate::telemetry::http_span));
    Ok(RunningService::start(addr, app.with_state(state)).await?)
}

async fn charge(State(provider): State<Provider>, headers: HeaderMap, body: Bytes) -> Response {
    match charge_inner(provider, headers, body).await {
        Ok(response) => response,
        Err(problem) => problem.into_response(),
    }
}

async fn charge_inner(provider: Provider, headers: HeaderMap, body: Bytes) -> Result<Response, Problem> {
    let key = IdempotencyKey::from_headers(&headers)?;
    let faults =
        provider.faults.as_ref().map(|f| f.read().map(|f| f.clone()).unwrap_or_else(|p| p.into_inner().clone()));
    let faults = faults.unwrap_or_default();
    if hit(faults.fail_before_charge) {
        return Err(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "Service unavailable",
            "Injected fault: nothing was charged; retry with the same Idempotency-Key.",
        )
        .with_retry_after(1));
    }
    let Some(entry) = provider.in_flight.enter(provider.merchant.as_str(), key.as_str()) else {
        return Err(Problem::new(
            StatusCode::CONFLICT,
            "request-in-flight",
            "Request in flight",
            "A charge with this Idempotency-Key is still being made; retry with the same key.",
        )
        .with_retry_after(1));
    };
    let request: ChargeRequest = serde_json::from_slice(&body)
        .map_err(|e| Problem::bad_request("invalid-charge", format!("Invalid charge: {e}.")))?;
    if request.amount_cents <= 0
        || request.currency.len() != 3
        || request.reference.is_empty()
        || request.reference.len() > 64
    {
        return Err(Problem::bad_request(
            "invalid-charge",
            "A charge needs a positive amountCents, a 3-letter currency and a reference of 1 to 64 characters.",
        ));
    }
    let latency =
        (faults.latency_ms > 0 && hit(faults.latency_probability)).then(|| Duration::from_millis(faults.latency_ms));
    let hash = fingerprint("POST", CHARGES_PATH, &body);
    // The charge runs in its own task: a caller that hangs up does not cancel a charge half way, as at a
    // real provider.
    let db = provider.db.clone();
    let outcome = tokio::spawn(async move {
        let _entry = entry;
        if let Some(latency) = latency {
            tokio::time::sleep(latency).await;
        }
        db.run(move |conn| make_charge(conn, key.as_str(), &hash, &request)).await
    })
    .await
    .map_err(|_| Problem::internal())?
    .map_err(|error| {
        tracing::error!(%error, "charge failed");
        Problem::internal()
    })?;
    Ok(match outcome {
        Outcome::Fresh(_) if hit(faults.drop_after_charge) => dropped_connection(),
        Outcome::Fresh(response) => response.into_http(false),
        Outcome::Replay(response) => response.into_http(true),
        Outcome::Mismatch => Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency-key-reused",
            "Idempotency-Key reused",
            "This Idempotency-Key was already used for a different charge.",
        )
        .into_response(),
        Outcome::Fenced => Outcome::fenced_problem().into_response(),
        Outcome::InFlight => return Err(Problem::internal()),
    })
}

/// One transaction: the charge and its answer once per key, or the stored answer.
fn make_charge(
    conn: &mut rusqlite::Connection,
    key: &str,
    hash: &str,
    request: &ChargeRequest,
) -> Result<Outcome, StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let existing: Option<(String, String)> = tx
        .query_row("SELECT request_hash, response_body FROM charges WHERE key = ?1", params![key], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .optional()?;
    if let Some((stored_hash, body)) = existing {
        tx.commit()?;
        return Ok(Outcome::for_existing(hash, &stored_hash, Some(charge_response(body))));
    }
    let charge = Charge {
        id: format!("ch_{:016x}", fastrand::u64(..)),
        idempotency_key: key.to_owned(),
        amount_cents: request.amount_cents,
        currency: request.currency.clone(),
        reference: request.reference.clone(),
        created_at: crate::unix_now(),
    };
    let body = serde_json::to_string(&charge).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    tx.execute(
        "INSERT INTO charges (key, request_hash, id, amount_cents, currency, reference, response_body, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![key, hash, charge.id, charge.amount_cents, charge.currency, charge.reference, body, charge.created_at],
    )?;
    tx.commit()?;
    Ok(Outcome::Fresh(charge_response(body)))
}

fn charge_response(body: String) -> StoredResponse {
    StoredResponse {
        status: StatusCode::CREATED.as_u16(),
        headers: vec![("content-type".to_owned(), "application/json".to_owned())],
        body,
    }
}

/// `GET /charges`: every charge, oldest first.
async fn list(State(provider): State<Provider>) -> Result<Response, Problem> {
    let charges = provider
        .db
        .run(|conn| {
            let mut stmt = conn
                .prepare("SELECT id, key, amount_cents, currency, reference, created_at FROM charges ORDER BY seq")?;
            let rows = stmt.query_map([], |row| {
                Ok(Charge {
                    id: row.get(0)?,
                    idempotency_key: row.get(1)?,
                    amount_cents: row.get(2)?,
                    currency: row.get(3)?,
                    reference: row.get(4)?,
                    created_at: row.get(5)?,
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .map_err(|error| {
            tracing::error!(%error, "listing charges failed");
            Problem::internal()
        })?;
    Ok(Json(serde_json::json!({ "count": charges.len(), "charges": charges })).into_response())
}

async fn get_faults(State(provider): State<Provider>) -> Response {
    match &provider.faults {
        Some(faults) => {
            Json(faults.read().map(|f| f.clone()).unwrap_or_else(|p| p.into_inner().clone())).into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn put_faults(State(provider): State<Provider>, body: Bytes) -> Result<Response, Problem> {
    let Some(faults) = &provider.faults else {
        return Ok(StatusCode::NOT_FOUND.into_response());
    };
    let config: ProviderFaults = serde_json::from_slice(&body)
        .map_err(|e| Problem::bad_request("invalid-fault-config", format!("Invalid fault config: {e}.")))?;
    let config = config.validate()?;
    match faults.write() {
        Ok(mut guard) => *guard = config.clone(),
        Err(poisoned) => *poisoned.into_inner() = config.clone(),
    }
    Ok(Json(config).into_response())
}
