//! The key-status answer: what the server knows of one key, for a client whose answers were all lost
//! (`GET .../idempotency-keys/{key}`), and the answer to settling a key (`POST` on the same URL: the
//! fence). The contract is in server/README.md, "Key status".

#[cfg(feature = "runtime")]
use std::future::Future;

#[cfg(feature = "runtime")]
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value};

#[cfg(feature = "runtime")]
use crate::error::StoreError;
#[cfg(feature = "runtime")]
use crate::key::IdempotencyKey;
use crate::outcome::{FENCED_FINGERPRINT, IN_FLIGHT_RETRY_AFTER_SECS};
#[cfg(feature = "runtime")]
use crate::problem::Problem;
use crate::response::{StoredResponse, REPLAYED_HEADER};

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
    /// No record of the key in this scope. Settling never answers it: it fences the key instead.
    Unknown,
    /// The key was settled as never seen: no request with it will ever do the work (a late one gets 410).
    Fenced,
}

impl KeyStatus {
    /// `done` with the replay of `stored`.
    pub fn done(stored: StoredResponse) -> Self {
        KeyStatus::Done { response: Replay::of(stored) }
    }

    /// The status of a key row that exists: fenced when it is a fence, in flight while it has no answer,
    /// else done with its answer.
    pub fn of_row(stored_fingerprint: &str, stored: Option<StoredResponse>) -> Self {
        match stored {
            _ if stored_fingerprint == FENCED_FINGERPRINT => KeyStatus::Fenced,
            None => KeyStatus::InFlight,
            Some(stored) => KeyStatus::done(stored),
        }
    }

    /// The status a lookup finds: the key's row within the retention (its fingerprint and answer) decides;
    /// without one, `held` (a transaction holds the key's in-flight mark) is `in_flight`, else `unknown`.
    pub fn looked_up(held: bool, row: Option<(&str, Option<StoredResponse>)>) -> Self {
        match row {
            Some((stored_fingerprint, stored)) => KeyStatus::of_row(stored_fingerprint, stored),
            None if held => KeyStatus::InFlight,
            None => KeyStatus::Unknown,
        }
    }

    /// The status a settle finds after inserting a fence row if absent: `fenced` when it inserted one, else
    /// the existing row's; no row after a conflict (swept in between) is `in_flight`: settling again
    /// settles it.
    pub fn settled(inserted: bool, row: Option<(&str, Option<StoredResponse>)>) -> Self {
        match row {
            _ if inserted => KeyStatus::Fenced,
            Some((stored_fingerprint, stored)) => KeyStatus::of_row(stored_fingerprint, stored),
            None => KeyStatus::InFlight,
        }
    }

    /// The whole answer: 200 with the JSON body for every status (so any other answer means the question
    /// went unanswered), never cached, with `Retry-After` when in flight.
    pub fn answer(&self) -> StoredResponse {
        let mut headers = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("cache-control".to_owned(), "no-store".to_owned()),
        ];
        if *self == KeyStatus::InFlight {
            headers.push(("retry-after".to_owned(), IN_FLIGHT_RETRY_AFTER_SECS.to_string()));
        }
        // Serializing an enum of strings, integers and string maps cannot fail.
        let body = serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"));
        StoredResponse { status: 200, headers, body }
    }
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

#[cfg(feature = "runtime")]
impl IntoResponse for KeyStatus {
    /// [`KeyStatus::answer`] as a response.
    fn into_response(self) -> Response {
        self.answer().into_http(false)
    }
}

#[cfg(feature = "runtime")]
/// The whole answer to a key-status request (`GET`) or a settle request (`POST`) for a raw key from the URL:
/// 400 `malformed-idempotency-key` for a malformed key (`ask` is not called), the [`KeyStatus`] that `ask`
/// answers for the parsed key (200, `no-store`, `Retry-After` when in flight), or 500 when the store fails
/// (the cause is logged, not sent). The backends' `status_response` and `settle_response` are this over
/// their own `status` and `settle`; an app with another store uses it directly.
pub async fn respond<F, Fut>(raw_key: &str, ask: F) -> Response
where
    F: FnOnce(IdempotencyKey) -> Fut,
    Fut: Future<Output = Result<KeyStatus, StoreError>>,
{
    let key = match IdempotencyKey::parse(raw_key) {
        Ok(key) => key,
        Err(error) => return error.problem().into_response(),
    };
    match ask(key).await {
        Ok(status) => status.into_response(),
        Err(error) => {
            tracing::error!(%error, "key status failed");
            Problem::internal().into_response()
        }
    }
}

#[cfg(all(test, feature = "runtime"))]
mod tests {
    use super::*;
    use axum::http::header;

    #[test]
    fn the_three_answers_have_the_documented_shape() {
        let stored = StoredResponse {
            status: 201,
            headers: vec![("Content-Type".to_owned(), "application/json".to_owned())],
            body: r#"{"id":"ord_1"}"#.to_owned(),
        };
        let done = serde_json::to_value(KeyStatus::done(stored)).expect("json");
        assert_eq!(
            done,
            serde_json::json!({"status": "done", "response": {"status": 201,
                "headers": {"content-type": "application/json", "idempotent-replayed": "true"},
                "body": "{\"id\":\"ord_1\"}"}})
        );
        assert_eq!(
            serde_json::to_value(KeyStatus::InFlight).expect("json"),
            serde_json::json!({"status": "in_flight"})
        );
        assert_eq!(serde_json::to_value(KeyStatus::Unknown).expect("json"), serde_json::json!({"status": "unknown"}));
        assert_eq!(serde_json::to_value(KeyStatus::Fenced).expect("json"), serde_json::json!({"status": "fenced"}));
    }

    #[test]
    fn a_row_reads_fenced_in_flight_or_done() {
        let stored = StoredResponse { status: 201, headers: vec![], body: String::new() };
        assert_eq!(KeyStatus::of_row(FENCED_FINGERPRINT, None), KeyStatus::Fenced);
        assert_eq!(KeyStatus::of_row(&"a".repeat(64), None), KeyStatus::InFlight);
        assert_eq!(KeyStatus::of_row(&"a".repeat(64), Some(stored.clone())), KeyStatus::done(stored));
    }

    #[tokio::test]
    async fn respond_parses_the_key_and_answers_each_status() {
        let malformed = respond("", |_| async { Ok(KeyStatus::Unknown) }).await;
        assert_eq!(malformed.status(), 400);
        let fenced = respond("key-0000000000000001", |key| async move {
            assert_eq!(key.as_str(), "key-0000000000000001");
            Ok(KeyStatus::Fenced)
        })
        .await;
        assert_eq!(fenced.status(), 200);
        assert_eq!(fenced.headers()[header::CACHE_CONTROL], "no-store");
        assert!(fenced.headers().get(header::RETRY_AFTER).is_none());
        let busy = respond("key-0000000000000001", |_| async { Ok(KeyStatus::InFlight) }).await;
        assert_eq!(busy.headers()[header::RETRY_AFTER], "1");
        let failed = respond("key-0000000000000001", |_| async { Err(StoreError::Corrupt("x".to_owned())) }).await;
        assert_eq!(failed.status(), 500);
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
