//! `GET /api/idempotency-keys/{key}`: what the server knows of one of the session account's keys, so a
//! client whose answers were all lost can reconcile its intent instead of guessing (the contract is in the
//! README, "Key status").
//!
//! The answer comes from the key row while it exists (its stored answer, or in flight), then from the
//! business record: an order keeps its key, so after the sweep the order still answers for it, rebuilt as
//! the 201 that created it. Another account's key is simply not found in this account: "unknown".

use axum::extract::{Path, State};

use crate::auth::Authenticated;
use crate::clock::unix_now;
use crate::idempotency::created_response;
use crate::keys::IdempotencyKey;
use crate::problem::Problem;
use crate::state::AppState;
use crate::store::KeyRecord;

pub use idempotent_endpoint::{KeyStatus, Replay};

/// The status for what the store holds: the key row's answer, or the order rebuilt as the 201 that
/// created it once the row was swept.
pub fn status_of(record: KeyRecord) -> KeyStatus {
    match record {
        KeyRecord::Answered(stored) => KeyStatus::done(stored),
        KeyRecord::Order(order) => KeyStatus::done(created_response(&order)),
        KeyRecord::InFlight => KeyStatus::InFlight,
        KeyRecord::Absent => KeyStatus::Unknown,
    }
}

/// The handler of `GET /api/idempotency-keys/{key}`: 401 without a session, 400 for a malformed key.
pub async fn key_status(
    State(app): State<AppState>,
    Authenticated(account): Authenticated,
    Path(raw): Path<String>,
) -> Result<KeyStatus, Problem> {
    let key = IdempotencyKey::parse(&raw)?;
    // This process's claim first, then the store: a request that finishes in between has committed by the
    // time its claim is released, so the store sees it. A committed answer wins over a claim (a request
    // replaying it holds one too).
    let claimed = app.in_flight.contains(&account, &key);
    let expired_before = crate::sweep::expired_before(unix_now(), app.retention);
    match app.store.key_record(&account, &key, expired_before).await {
        Ok(record @ KeyRecord::Answered(_)) => Ok(status_of(record)),
        Ok(_) if claimed => Ok(KeyStatus::InFlight),
        Ok(record) => Ok(status_of(record)),
        Err(error) => {
            tracing::error!(%error, "key status failed");
            Err(Problem::internal())
        }
    }
}
