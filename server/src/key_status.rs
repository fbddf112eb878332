//! `GET /api/idempotency-keys/{key}`: what the server knows of one of the session account's keys, so a
//! client whose answers were all lost can reconcile its intent instead of guessing (the contract is in the
//! README, "Key status").
//!
//! The answer comes from the key row while it exists (its stored answer, or in flight), then from the
//! business record: an order keeps its key, so after the sweep the order still answers for it, rebuilt as
//! the 201 that created it. Another account's key is simply not found in this account: "unknown".

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::auth::Authenticated;
use crate::clock::unix_now;
use crate::idempotency::{created_response, IN_FLIGHT_RETRY_AFTER_SECS};
use crate::keys::IdempotencyKey;
use crate::problem::Problem;
use crate::protocol::{StoredResponse, REPLAYED_HEADER};
use crate::state::AppState;
use crate::store::KeyRecord;

/// The body of a key-status answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum KeyStatus {
    /// The key's request was done: `response` is its stored answer, exactly as a replay sends it.
    Done {
        /// The replay.
        response: Replay,
    },
    /// A request with the key is being processed: ask again after `Retry-After`.
    InFlight,
    /// No record of the key in this account.
    Unknown,
}

/// A stored answer as the key-status body carries it: what a replay of the key would send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Replay {
    /// HTTP status code.
    pub status: u16,
    /// Header names in lowercase; a name stored twice has its values joined with `", "`. Includes
    /// `idempotent-replayed: true`, as a replay does.
    pub headers: Map<String, Value>,
    /// The body, byte for byte (every stored body is text).
    pub body: String,
}

impl Replay {
    /// The replay of `stored`.
    pub fn of(stored: StoredResponse) -> Self {
        let mut headers = Map::new();
        for (name, value) in stored.headers {
            let name = name.to_ascii_lowercase();
            let joined = match headers.get(&name).and_then(Value::as_str) {
                Some(earlier) => format!("{earlier}, {value}"),
                None => value,
            };
            headers.insert(name, Value::String(joined));
        }
        headers.insert(REPLAYED_HEADER.to_owned(), Value::String("true".to_owned()));
        Replay { status: stored.status, headers, body: stored.body }
    }
}

impl KeyStatus {
    /// The status for what the store holds.
    pub fn of(record: KeyRecord) -> Self {
        match record {
            KeyRecord::Answered(stored) => KeyStatus::Done { response: Replay::of(stored) },
            KeyRecord::Order(order) => KeyStatus::Done { response: Replay::of(created_response(&order)) },
            KeyRecord::InFlight => KeyStatus::InFlight,
            KeyRecord::Absent => KeyStatus::Unknown,
        }
    }
}

impl IntoResponse for KeyStatus {
    /// 200 with the JSON body for every status (so any other answer means the question went unanswered),
    /// never cached, with `Retry-After` when in flight.
    fn into_response(self) -> Response {
        let in_flight = self == KeyStatus::InFlight;
        let mut response = Json(self).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if in_flight {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(IN_FLIGHT_RETRY_AFTER_SECS));
        }
        response
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
        Ok(record @ KeyRecord::Answered(_)) => Ok(KeyStatus::of(record)),
        Ok(_) if claimed => Ok(KeyStatus::InFlight),
        Ok(record) => Ok(KeyStatus::of(record)),
        Err(error) => {
            tracing::error!(%error, "key status failed");
            Err(Problem::internal())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_answers_have_the_documented_shape() {
        let stored = StoredResponse {
            status: 201,
            headers: vec![("Content-Type".to_owned(), "application/json".to_owned())],
            body: r#"{"id":"ord_1"}"#.to_owned(),
        };
        let done = serde_json::to_value(KeyStatus::of(KeyRecord::Answered(stored))).expect("json");
        assert_eq!(
            done,
            serde_json::json!({"status": "done", "response": {"status": 201,
                "headers": {"content-type": "application/json", "idempotent-replayed": "true"},
                "body": "{\"id\":\"ord_1\"}"}})
        );
        let in_flight = serde_json::to_value(KeyStatus::of(KeyRecord::InFlight)).expect("json");
        assert_eq!(in_flight, serde_json::json!({"status": "in_flight"}));
        let unknown = serde_json::to_value(KeyStatus::of(KeyRecord::Absent)).expect("json");
        assert_eq!(unknown, serde_json::json!({"status": "unknown"}));
    }

    #[test]
    fn a_header_stored_twice_is_joined() {
        let stored = StoredResponse {
            status: 200,
            headers: vec![("vary".to_owned(), "a".to_owned()), ("vary".to_owned(), "b".to_owned())],
            body: String::new(),
        };
        assert_eq!(Replay::of(stored).headers["vary"], "a, b");
    }
}
