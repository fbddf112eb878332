//! The router: API endpoints, CORS, and the static demo files; [`crate::limits`] wraps it.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{middleware, Json, Router};
use serde::Serialize;
use serde_json::json;
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::address::{self, AddressSlots};
use crate::auth::{create_session, current_session, Authenticated};
use crate::config::Config;
use crate::error::ServeError;
use crate::faults::{FaultConfig, FAULT_HEADER};
use crate::idempotency::create_order;
use crate::key_status::{key_status, settle_key};
use crate::keys::IDEMPOTENCY_KEY_HEADER;
use crate::limits;
use crate::orders::{Order, CATALOGUE};
use crate::problem::Problem;
use crate::protocol::REPLAYED_HEADER;
use crate::state::AppState;
use crate::static_files::ConfinedDir;
use crate::upload::{self, BodyBudget};

/// Most orders `GET /api/orders` returns.
pub const ORDER_LIST_LIMIT: u32 = 100;

/// Builds the whole application.
pub fn router(state: AppState, config: &Config) -> Result<Router, ServeError> {
    let mut api = Router::new()
        .route("/api/orders", get(list_orders).post(create_order))
        .route("/api/orders/{id}", get(get_order))
        .route("/api/idempotency-keys/{key}", get(key_status).post(settle_key))
        .route("/api/products", get(products));
    if state.faults.is_some() {
        api = api.route("/api/faults", get(get_faults).put(put_faults));
    }
    let api = api
        .route("/api", get(api_not_found))
        .route("/api/{*rest}", get(api_not_found).post(api_not_found).put(api_not_found));
    // Minting a session needs no session, so its body gets a smaller and shorter budget.
    let session = Router::new().route("/api/session", get(current_session).post(create_session));
    let requests_per_address = AddressSlots::new(config.limits.max_requests_per_ip);
    let api = guarded(api, &state, &requests_per_address, BodyBudget::api(&config.limits))
        .merge(guarded(session, &state, &requests_per_address, BodyBudget::session(&config.limits)))
        // Outermost, so a request refused by a limit has its span too.
        .route_layer(middleware::from_fn(crate::telemetry::http_span))
        // Not counted against the limits, so they keep answering while the API is saturated.
        .route("/api/health", get(health))
        .route("/api/ready", get(ready))
        .with_state(state);

    let mut app = api;
    if let Some(pkg) = &config.pkg {
        app = app.nest_service("/pkg", ConfinedDir::new(pkg)?);
    }
    if let Some(www) = &config.www {
        app = app.fallback_service(ConfinedDir::new(www)?);
    }
    let mut app = limits::apply(app, &config.limits);
    if !config.cors_origins.is_empty() {
        app = app.layer(cors(&config.cors_origins)?);
    }
    Ok(app)
}

/// `routes` behind the API's limits, from the outside in: the body is read in full under `budget` (no slot
/// is held while it arrives), then the request takes one of its address's slots, then one of the API's.
fn guarded(
    routes: Router<AppState>,
    state: &AppState,
    per_address: &AddressSlots,
    budget: BodyBudget,
) -> Router<AppState> {
    routes
        .route_layer(limits::concurrency(&state.api_slots))
        .route_layer(middleware::from_fn_with_state(per_address.clone(), address::limit_requests))
        .route_layer(middleware::from_fn_with_state(budget, upload::read_body_first))
}

fn cors(origins: &[String]) -> Result<CorsLayer, ServeError> {
    let allow_origin = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        let values = origins
            .iter()
            .map(|o| HeaderValue::from_str(o).map_err(|_| ServeError::Config(format!("bad --cors-origin {o:?}"))))
            .collect::<Result<Vec<_>, _>>()?;
        AllowOrigin::list(values)
    };
    Ok(CorsLayer::new()
        .allow_origin(allow_origin)
        .allow_methods([Method::GET, Method::POST, Method::PUT])
        .allow_headers([
            header::CONTENT_TYPE,
            header::AUTHORIZATION,
            HeaderName::from_static(IDEMPOTENCY_KEY_HEADER),
            HeaderName::from_static(FAULT_HEADER),
        ])
        .expose_headers([HeaderName::from_static(REPLAYED_HEADER), header::RETRY_AFTER])
        .max_age(Duration::from_secs(600)))
}

/// The body of `GET /api/orders`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OrderList<'a> {
    account_id: &'a str,
    orders: Vec<Order>,
}

/// `GET /api/orders`: the session account's orders, newest first.
async fn list_orders(State(app): State<AppState>, Authenticated(account): Authenticated) -> Result<Response, Problem> {
    let orders = app.store.list_orders(&account, ORDER_LIST_LIMIT).await.map_err(store_failed)?;
    Ok(Json(OrderList { account_id: account.as_str(), orders }).into_response())
}

/// `GET /api/orders/{id}`: one of the session account's orders.
async fn get_order(
    State(app): State<AppState>,
    Authenticated(account): Authenticated,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    match app.store.get_order(&account, &id).await.map_err(store_failed)? {
        Some(order) => Ok(Json(order).into_response()),
        None => {
            Err(Problem::new(StatusCode::NOT_FOUND, "order-not-found", "Not found", "No such order in this account."))
        }
    }
}

/// `GET /api/products`: the fixed catalogue.
async fn products() -> Response {
    Json(json!({ "products": CATALOGUE })).into_response()
}

/// `GET /api/health`: liveness (the process and its database answer), and whether the API is saturated.
async fn health(State(app): State<AppState>) -> Result<Response, Problem> {
    app.store.health().await.map_err(store_failed)?;
    let slots = &app.api_slots;
    Ok(Json(json!({
        "status": "ok",
        "store": app.store.kind(),
        "api": if slots.saturated() { "saturated" } else { "ok" },
        "apiInFlight": slots.in_use(),
        "apiLimit": slots.max(),
    }))
    .into_response())
}

/// `GET /api/ready`: readiness for a load balancer: 200 while the database answers and an API slot is
/// free, else 503 with `Retry-After` (send the traffic elsewhere for now).
async fn ready(State(app): State<AppState>) -> Response {
    if let Err(error) = app.store.health().await {
        tracing::warn!(%error, "not ready: the store does not answer");
        return Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store-unavailable",
            "Service unavailable",
            "The database does not answer.",
        )
        .with_retry_after(limits::OVERLOADED_RETRY_AFTER_SECS)
        .into_response();
    }
    let slots = &app.api_slots;
    if slots.saturated() {
        return Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "saturated",
            "Service unavailable",
            format!("All {} API slots are in use (--max-concurrent-requests).", slots.max()),
        )
        .with_retry_after(limits::OVERLOADED_RETRY_AFTER_SECS)
        .into_response();
    }
    Json(json!({ "status": "ready", "apiInFlight": slots.in_use(), "apiLimit": slots.max() })).into_response()
}

/// `GET /api/faults`: the current probabilistic fault configuration (only with `--enable-faults`).
async fn get_faults(State(app): State<AppState>) -> Response {
    match &app.faults {
        Some(faults) => Json(faults.get()).into_response(),
        None => api_not_found().await.into_response(),
    }
}

/// `PUT /api/faults`: replaces the configuration (missing fields take their defaults); 400 on bad values.
async fn put_faults(State(app): State<AppState>, body: Bytes) -> Result<Response, Problem> {
    let Some(faults) = &app.faults else {
        return Err(api_not_found().await);
    };
    let config = FaultConfig::from_json(&body)?;
    faults.set(config.clone());
    tracing::info!(?config, "fault configuration changed");
    Ok(Json(config).into_response())
}

async fn api_not_found() -> Problem {
    Problem::new(StatusCode::NOT_FOUND, "not-found", "Not found", "No such API endpoint.")
}

fn store_failed(error: crate::store::StoreError) -> Problem {
    tracing::error!(%error, "store failed");
    Problem::internal()
}
