//! The router: API endpoints, CORS, and the static demo files.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use serde_json::json;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::services::ServeDir;

use crate::config::Config;
use crate::faults::{FaultConfig, Faults, FAULT_HEADER};
use crate::idempotency::{create_order, InFlight};
use crate::keys::{AccountId, ACCOUNT_HEADER, IDEMPOTENCY_KEY_HEADER};
use crate::orders::{Order, CATALOGUE};
use crate::problem::Problem;
use crate::store::{Store, REPLAYED_HEADER};

/// Most orders `GET /api/orders` returns.
pub const ORDER_LIST_LIMIT: u32 = 100;

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The database.
    pub store: Store,
    /// The fault switchboard.
    pub faults: Faults,
    /// Keys this process is working on.
    pub in_flight: InFlight,
    /// Key retention.
    pub retention: Duration,
}

/// Builds the whole application.
pub fn router(state: AppState, config: &Config) -> Result<Router, crate::ServeError> {
    let api = Router::new()
        .route("/api/orders", get(list_orders).post(create_order))
        .route("/api/orders/{id}", get(get_order))
        .route("/api/products", get(products))
        .route("/api/health", get(health))
        .route("/api/faults", get(get_faults).put(put_faults))
        .route("/api", get(api_not_found))
        .route("/api/{*rest}", get(api_not_found).post(api_not_found).put(api_not_found))
        .with_state(state);

    let mut app = api;
    if let Some(pkg) = &config.pkg {
        app = app.nest_service("/pkg", ServeDir::new(pkg));
    }
    if let Some(www) = &config.www {
        app = app.fallback_service(ServeDir::new(www));
    }
    if !config.cors_origins.is_empty() {
        app = app.layer(cors(&config.cors_origins)?);
    }
    Ok(app)
}

fn cors(origins: &[String]) -> Result<CorsLayer, crate::ServeError> {
    let allow_origin = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        let values = origins
            .iter()
            .map(|o| {
                HeaderValue::from_str(o).map_err(|_| crate::ServeError::Config(format!("bad --cors-origin {o:?}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        AllowOrigin::list(values)
    };
    Ok(CorsLayer::new()
        .allow_origin(allow_origin)
        .allow_methods([Method::GET, Method::POST, Method::PUT])
        .allow_headers([
            header::CONTENT_TYPE,
            HeaderName::from_static(IDEMPOTENCY_KEY_HEADER),
            HeaderName::from_static(ACCOUNT_HEADER),
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

/// `GET /api/orders`: the account's orders, newest first.
async fn list_orders(State(app): State<AppState>, headers: HeaderMap) -> Result<Response, Problem> {
    let account = AccountId::from_headers(&headers)?;
    let orders = app.store.list_orders(&account, ORDER_LIST_LIMIT).await.map_err(store_failed)?;
    Ok(Json(OrderList { account_id: account.as_str(), orders }).into_response())
}

/// `GET /api/orders/{id}`: one of the account's orders.
async fn get_order(
    State(app): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let account = AccountId::from_headers(&headers)?;
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

/// `GET /api/health`.
async fn health(State(app): State<AppState>) -> Result<Response, Problem> {
    app.store.health().await.map_err(store_failed)?;
    Ok(Json(json!({ "status": "ok", "store": app.store.kind() })).into_response())
}

/// `GET /api/faults`: the current probabilistic fault configuration.
async fn get_faults(State(app): State<AppState>) -> Response {
    Json(app.faults.get()).into_response()
}

/// `PUT /api/faults`: replaces the configuration (missing fields take their defaults); 400 on bad values.
async fn put_faults(State(app): State<AppState>, body: Bytes) -> Result<Response, Problem> {
    let config = FaultConfig::from_json(&body)?;
    app.faults.set(config.clone());
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
