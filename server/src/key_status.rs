//! `GET /api/idempotency-keys/{key}`: what the server knows of one of the session account's keys, so a
//! client whose answers were all lost can reconcile its intent instead of guessing; and `POST` on the same
//! URL: settle the key (the fence), so a client can turn "never arrived" into "can never happen" before it
//! gives the intent a new key. The contract is in the README, "Key status".
//!
//! The answer comes from the library's key status while the key row exists (its stored answer, in flight, or
//! a fence; on PostgreSQL also the key's advisory lock held in any instance), then from the business
//! record: an order keeps its key, so after the sweep the order still answers for it, rebuilt as the 201
//! that created it. Another account's key is simply not found in this account: "unknown" (and
//! settling it fences it in this account only).

use axum::extract::{Path, State};

use crate::auth::Authenticated;
use crate::keys::IdempotencyKey;
use crate::problem::Problem;
use crate::state::AppState;

pub use idempotent_endpoint::{KeyStatus, Replay};

/// The handler of `GET /api/idempotency-keys/{key}`: 401 without a session, 400 for a malformed key.
pub async fn key_status(
    State(app): State<AppState>,
    Authenticated(account): Authenticated,
    Path(raw): Path<String>,
) -> Result<KeyStatus, Problem> {
    let key = IdempotencyKey::parse(&raw)?;
    // This process's in-flight set first, then the store: a request that finishes in between has committed
    // by the time its in-flight entry is dropped, so the store sees it. A committed answer or fence wins over
    // an in-flight entry (a request replaying it, or being refused by the fence, holds one too).
    let working = app.in_flight.holds(account.as_str(), key.as_str());
    let status = match app.store.key_status(&account, &key, app.retention).await {
        Ok(status @ (KeyStatus::Done { .. } | KeyStatus::Fenced)) => Ok(status),
        Ok(_) if working => Ok(KeyStatus::InFlight),
        Ok(KeyStatus::Unknown) => app.store.order_status(&account, &key).await.map(|s| s.unwrap_or(KeyStatus::Unknown)),
        Ok(status) => Ok(status),
        Err(error) => Err(error),
    };
    match status {
        Ok(status) => Ok(status),
        Err(error) => {
            tracing::error!(%error, "key status failed");
            Err(Problem::internal())
        }
    }
}

/// The handler of `POST /api/idempotency-keys/{key}`: settles the key ([`crate::store::Store::settle`]) and
/// answers done, in flight or fenced, never unknown; 401 without a session, 400 for a malformed key.
///
/// A key this process is working on is in flight at once: its in-flight entry is held by the task doing the work
/// until that work has committed or rolled back, so the key is never fenced under a request that may
/// still commit.
pub async fn settle_key(
    State(app): State<AppState>,
    Authenticated(account): Authenticated,
    Path(raw): Path<String>,
) -> Result<KeyStatus, Problem> {
    let key = IdempotencyKey::parse(&raw)?;
    if app.in_flight.holds(account.as_str(), key.as_str()) {
        return Ok(KeyStatus::InFlight);
    }
    match app.store.settle(&account, &key, app.retention).await {
        Ok(status) => {
            if matches!(status, KeyStatus::Fenced) {
                app.metrics.fenced();
            }
            Ok(status)
        }
        Err(error) => {
            tracing::error!(%error, "settling a key failed");
            Err(Problem::internal())
        }
    }
}
