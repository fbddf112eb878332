//! The protocol decisions of `idempotent-endpoint`, exported to JavaScript for its Node half (server/node).
//!
//! Every decision the Node package makes about a keyed request is made here, by the Rust library's own
//! code: the key grammar, the fingerprint, the decision for a stored key row, the RFC 9457 problems, the
//! key-status answers, the retention cutoff, the atomic phases' decisions, and the PostgreSQL statements it
//! runs. The TypeScript side does the I/O (HTTP, the database) and nothing else.
//!
//! Values cross the boundary as strings and numbers; every structured answer is one JSON text, read back
//! by exactly one function in server/node/src/core.ts, next to its TypeScript type. Nothing here panics
//! on input from JavaScript: a value that cannot be read is an `{"error": ...}` answer.
#![deny(missing_docs)]

mod answers;
mod messages;
mod phases;
mod rows;

use idempotent_endpoint::{
    expired_before, fingerprint as request_fingerprint, inbox_sql, outbox_sql, postgres_sql, IdempotencyKey, KeyStatus,
    Outcome, Problem, StoredResponse, DEFAULT_RETENTION, FENCED_FINGERPRINT, MAX_STORED_BODY_BYTES, REPLAYED_HEADER,
};
use serde_json::{json, Value};
use wasm_bindgen::prelude::wasm_bindgen;

use crate::answers::{answer_json, error_json};
use crate::rows::Row;

/// The key of a request from every value of its `Idempotency-Key` header, in order: `{"key": "..."}`, or
/// `{"answer": ...}`, the 400 problem for a missing, repeated or malformed key.
#[wasm_bindgen(js_name = keyFromHeader)]
pub fn key_from_header(values: Vec<String>) -> String {
    match IdempotencyKey::from_header_values(values.iter().map(|v| Some(v.as_str()))) {
        Ok(key) => json!({ "key": key.as_str() }).to_string(),
        Err(error) => json!({ "answer": answer_json(&StoredResponse::from_problem(&error.problem())) }).to_string(),
    }
}

/// A key from a URL (the key-status endpoint): as [`key_from_header`] for one value.
#[wasm_bindgen(js_name = parseKey)]
pub fn parse_key(raw: &str) -> String {
    match IdempotencyKey::parse(raw) {
        Ok(key) => json!({ "key": key.as_str() }).to_string(),
        Err(error) => json!({ "answer": answer_json(&StoredResponse::from_problem(&error.problem())) }).to_string(),
    }
}

/// The request's fingerprint: lowercase hex SHA-256 of method, path and body.
#[wasm_bindgen]
pub fn fingerprint(method: &str, path: &str, body: &[u8]) -> String {
    request_fingerprint(method, path, body)
}

/// The answer for a request whose key row exists (`row_json`: the row of `SELECT_ROW` as JSON): the replay
/// with `Idempotent-Replayed: true`, 422, 409 with `Retry-After`, or 410 for a fence, as
/// `{"outcome": "replay" | "mismatch" | "in_flight" | "fenced", "answer": ...}`; `{"error": ...}` for a
/// row that cannot be read.
#[wasm_bindgen]
pub fn decide(fingerprint: &str, row_json: &str) -> String {
    let row = match Row::from_json(row_json) {
        Ok(row) => row,
        Err(error) => return error_json(&error),
    };
    let outcome = Outcome::for_existing(fingerprint, &row.fingerprint, row.stored);
    let name = match outcome {
        Outcome::Fresh(_) | Outcome::Replay(_) => "replay",
        Outcome::Mismatch => "mismatch",
        Outcome::InFlight => "in_flight",
        Outcome::Fenced => "fenced",
    };
    json!({ "outcome": name, "answer": answer_json(&outcome.answer()) }).to_string()
}

/// The 409 (with `Retry-After`) for a request whose key is in flight in another transaction.
#[wasm_bindgen(js_name = inFlightAnswer)]
pub fn in_flight_answer() -> String {
    answer_json(&Outcome::InFlight.answer()).to_string()
}

/// The work's answer checked and encoded for the key row: `{"answer": ..., "headers": "<the
/// response_headers column>"}`, or `{"error": ...}` for a status outside 100..=599, a header that is not
/// a `[name, value]` pair of strings, or a body larger than the library stores (nothing may be
/// committed then). `headers_json` is a JSON array of `[name, value]` pairs.
#[wasm_bindgen(js_name = freshAnswer)]
pub fn fresh_answer(status: f64, headers_json: &str, body: String) -> String {
    match answers::fresh(status, headers_json, body) {
        Ok(response) => json!({ "answer": answer_json(&response), "headers": response.encode_headers() }).to_string(),
        Err(error) => error_json(&error),
    }
}

/// A problem answer for input refused before any key row is written: `kind` is one of `body-too-large`,
/// `unreadable-body`, `body-timeout`, `invalid-body` (with `detail`), `internal`; any other kind is
/// `internal`.
#[wasm_bindgen(js_name = problemAnswer)]
pub fn problem_answer(kind: &str, detail: Option<String>) -> String {
    let problem = match kind {
        "body-too-large" => Problem::body_too_large(),
        "unreadable-body" => Problem::unreadable_body(),
        "body-timeout" => Problem::body_timeout(),
        "invalid-body" => Problem::invalid_body(detail.unwrap_or_else(|| "The body is not valid JSON.".to_owned())),
        _ => Problem::internal(),
    };
    answer_json(&StoredResponse::from_problem(&problem)).to_string()
}

/// The key-status answer (GET): `held` says whether a transaction holds the key's in-flight mark, and
/// `row_json` is the row of `SELECT_LIVE_ROW` as JSON, or none.
#[wasm_bindgen(js_name = statusAnswer)]
pub fn status_answer(held: bool, row_json: Option<String>) -> String {
    match Row::maybe(row_json.as_deref()) {
        Ok(row) => {
            let status = KeyStatus::looked_up(held, row.as_ref().map(|r| (r.fingerprint.as_str(), r.stored.clone())));
            answer_json(&status.answer()).to_string()
        }
        Err(error) => error_json(&error),
    }
}

/// The settle answer (POST, the fence): `inserted` says whether the fence row was inserted, and `row_json`
/// is the row found otherwise, or none. `{"commit": bool, "answer": ...}`: commit unless nothing was
/// inserted and no row was found.
#[wasm_bindgen(js_name = settleAnswer)]
pub fn settle_answer(inserted: bool, row_json: Option<String>) -> String {
    match Row::maybe(row_json.as_deref()) {
        Ok(row) => {
            let commit = inserted || row.is_some();
            let status = KeyStatus::settled(inserted, row.as_ref().map(|r| (r.fingerprint.as_str(), r.stored.clone())));
            json!({ "commit": commit, "answer": answer_json(&status.answer()) }).to_string()
        }
        Err(error) => error_json(&error),
    }
}

/// The `in_flight` key-status answer (a settle that waited too long for the key's row).
#[wasm_bindgen(js_name = inFlightStatusAnswer)]
pub fn in_flight_status_answer() -> String {
    answer_json(&KeyStatus::InFlight.answer()).to_string()
}

/// The retention cutoff at `now_secs` (unix seconds): key rows created before it are expired.
#[wasm_bindgen(js_name = expiredBefore)]
pub fn expired_before_secs(now_secs: f64, retention_secs: f64) -> f64 {
    let retention = std::time::Duration::from_secs(whole_secs(retention_secs));
    expired_before(whole_secs(now_secs).try_into().unwrap_or(i64::MAX), retention) as f64
}

/// A non-negative whole number of seconds from a JavaScript number (NaN and negatives are 0).
fn whole_secs(secs: f64) -> u64 {
    if secs.is_finite() && secs > 0.0 {
        secs.floor() as u64
    } else {
        0
    }
}

/// Why `scope` cannot own keys (longer than the key columns take), or none.
#[wasm_bindgen(js_name = scopeError)]
pub fn scope_error(scope: &str) -> Option<String> {
    idempotent_endpoint::error::check_scope(scope).err().map(|e| e.to_string())
}

/// The name of the key's in-flight mark, the first parameter of `claimKey` and the parameter of `lockHeld`.
#[wasm_bindgen(js_name = lockName)]
pub fn lock_name(scope: &str, key: &str) -> String {
    postgres_sql::lock_name(scope, key)
}

/// The outbox's wait (milliseconds) before the next attempt of a message that failed `attempts` times:
/// the client crate's capped exponential backoff with full jitter, from `base_ms` up to `max_ms`, drawing
/// from `random` (`randomBytes` bytes from `crypto.getRandomValues`; too few waits the cap).
#[wasm_bindgen(js_name = retryDelay)]
pub fn retry_delay(base_ms: f64, max_ms: f64, attempts: f64, random: Vec<u8>) -> f64 {
    messages::retry_delay_ms(base_ms, max_ms, attempts, random)
}

/// Why an inbox source or message id cannot be recorded (empty, or longer than the library takes), or none.
#[wasm_bindgen(js_name = inboxIdsError)]
pub fn inbox_ids_error(source: &str, message_id: &str) -> Option<String> {
    inbox_sql::check_ids(source, message_id).err().map(|e| e.to_string())
}

/// The answer on an inbox record (`row_json`: the row of `inbox.selectAnswer` as JSON), with
/// `Idempotent-Replayed: true` for a re-delivery (`duplicate`); `{"error": ...}` for a record without a
/// readable answer.
#[wasm_bindgen(js_name = inboxAnswer)]
pub fn inbox_answer(row_json: &str, duplicate: bool) -> String {
    match rows::inbox_answer(row_json) {
        Ok(answer) if duplicate => answer_json(&answer.with_header(REPLAYED_HEADER, "true".to_owned())).to_string(),
        Ok(answer) => answer_json(&answer).to_string(),
        Err(error) => error_json(&error),
    }
}

/// The PostgreSQL statements and the protocol's numbers, as one JSON object (see `Constants` in
/// server/node/src/core.ts).
#[wasm_bindgen]
pub fn constants() -> String {
    let sql: Value = json!({
        "schema": postgres_sql::SCHEMA,
        "claimKey": postgres_sql::CLAIM_KEY,
        "lockHeld": postgres_sql::LOCK_HELD,
        "selectRow": postgres_sql::SELECT_ROW,
        "selectLiveRow": postgres_sql::SELECT_LIVE_ROW,
        "storeAnswer": postgres_sql::STORE_ANSWER,
        "setLockTimeout": postgres_sql::SET_LOCK_TIMEOUT,
        "sweep": postgres_sql::SWEEP,
    });
    let outbox: Value = json!({
        "schema": outbox_sql::SCHEMA,
        "enqueue": outbox_sql::ENQUEUE,
        "claim": outbox_sql::CLAIM,
        "retry": outbox_sql::RETRY,
        "mark": outbox_sql::MARK,
        "backlog": outbox_sql::BACKLOG,
    });
    let inbox: Value = json!({
        "schema": inbox_sql::SCHEMA,
        "forgetExpired": inbox_sql::FORGET_EXPIRED,
        "insert": inbox_sql::INSERT,
        "selectAnswer": inbox_sql::SELECT_ANSWER,
        "storeAnswer": inbox_sql::STORE_ANSWER,
        "sweep": inbox_sql::SWEEP,
        "savepoint": inbox_sql::SAVEPOINT,
    });
    json!({
        "sql": sql,
        "outbox": outbox,
        "inbox": inbox,
        "phases": phases::constants(),
        "retryRandomBytes": messages::RANDOM_BYTES,
        "settleLockTimeout": postgres_sql::settle_lock_timeout(),
        "lockNotAvailable": postgres_sql::LOCK_NOT_AVAILABLE,
        "fencedFingerprint": FENCED_FINGERPRINT,
        "defaultRetentionSecs": DEFAULT_RETENTION.as_secs(),
        "maxStoredBodyBytes": MAX_STORED_BODY_BYTES,
        "maxKeyChars": idempotent_endpoint::key::MAX_KEY_CHARS,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Value {
        serde_json::from_str(text).unwrap_or(Value::Null)
    }

    #[test]
    fn keys_in_both_forms_and_refusals() {
        assert_eq!(parsed(&key_from_header(vec!["\"k-1\"".to_owned()]))["key"], "k-1");
        assert_eq!(parsed(&key_from_header(vec![" k-1 ".to_owned()]))["key"], "k-1");
        assert_eq!(parsed(&key_from_header(vec![]))["answer"]["status"], 400);
        assert_eq!(parsed(&key_from_header(vec!["a".to_owned(), "b".to_owned()]))["answer"]["status"], 400);
        assert_eq!(parsed(&parse_key(&"k".repeat(256)))["answer"]["status"], 400);
    }

    #[test]
    fn decisions_for_a_stored_row() {
        let fp = fingerprint("POST", "/api/orders", b"{}");
        let done = json!({"fingerprint": fp, "status_code": 201, "response_headers": "[[\"content-type\",\"application/json\"]]", "response_body": "{}"}).to_string();
        let replay = parsed(&decide(&fp, &done));
        assert_eq!(replay["outcome"], "replay");
        assert_eq!(replay["answer"]["status"], 201);
        assert!(replay["answer"]["headers"].to_string().contains("idempotent-replayed"));
        assert_eq!(parsed(&decide("other", &done))["answer"]["status"], 422);
        let open = json!({"fingerprint": fp, "status_code": null, "response_headers": null, "response_body": null});
        assert_eq!(parsed(&decide(&fp, &open.to_string()))["answer"]["status"], 409);
        let fence = json!({"fingerprint": FENCED_FINGERPRINT, "status_code": null});
        assert_eq!(parsed(&decide(&fp, &fence.to_string()))["answer"]["status"], 410);
        assert!(parsed(&decide(&fp, "{\"status_code\": 1}"))["error"].is_string());
        assert!(parsed(&decide(&fp, "not json"))["error"].is_string());
    }

    #[test]
    fn fresh_answers_are_checked() {
        let ok = parsed(&fresh_answer(201.0, "[[\"Location\",\"/o/1\"]]", "{}".to_owned()));
        assert_eq!(ok["answer"]["status"], 201);
        assert_eq!(ok["headers"], "[[\"location\",\"/o/1\"]]");
        assert!(parsed(&fresh_answer(99.0, "[]", String::new()))["error"].is_string());
        assert!(parsed(&fresh_answer(201.5, "[]", String::new()))["error"].is_string());
        assert!(parsed(&fresh_answer(201.0, "[1]", String::new()))["error"].is_string());
        assert!(parsed(&fresh_answer(201.0, "[]", "x".repeat(MAX_STORED_BODY_BYTES + 1)))["error"].is_string());
    }

    #[test]
    fn key_status_and_settle() {
        assert!(parsed(&status_answer(false, None))["body"].as_str().is_some_and(|b| b.contains("unknown")));
        let busy = parsed(&status_answer(true, None));
        assert!(busy["headers"].to_string().contains("retry-after"));
        let fenced = parsed(&settle_answer(true, None));
        assert_eq!(fenced["commit"], true);
        assert!(fenced["answer"]["body"].as_str().is_some_and(|b| b.contains("fenced")));
        assert_eq!(parsed(&settle_answer(false, None))["commit"], false);
    }

    #[test]
    fn retry_delays_follow_the_full_jitter_schedule() {
        let random = |byte: u8| vec![byte; messages::RANDOM_BYTES];
        // Full jitter: uniform in [0, min(max, base * 2^(attempts - 1))]; all-ones bytes draw the top.
        assert!(retry_delay(200.0, 10_000.0, 1.0, random(0xff)) <= 200.0);
        assert!(retry_delay(200.0, 10_000.0, 3.0, random(0xff)) > 200.0);
        assert!(retry_delay(200.0, 10_000.0, 3.0, random(0xff)) <= 800.0);
        assert!(retry_delay(200.0, 10_000.0, 40.0, random(0xff)) <= 10_000.0);
        assert_eq!(retry_delay(200.0, 10_000.0, 1.0, random(0)), 0.0);
        // Too few random bytes: the cap, never zero.
        assert_eq!(retry_delay(200.0, 10_000.0, 3.0, vec![]), 10_000.0);
    }

    #[test]
    fn inbox_answers_and_ids() {
        let row = json!({"status_code": 202, "response_headers": "[]", "response_body": "sent"}).to_string();
        assert_eq!(parsed(&inbox_answer(&row, false))["status"], 202);
        assert!(parsed(&inbox_answer(&row, true))["headers"].to_string().contains("idempotent-replayed"));
        assert!(parsed(&inbox_answer("{\"status_code\": null}", false))["error"].is_string());
        assert!(inbox_ids_error("mail", "m-1").is_none());
        assert!(inbox_ids_error("", "m-1").is_some());
        assert!(inbox_ids_error("mail", &"x".repeat(256)).is_some());
    }

    #[test]
    fn retention_cutoff() {
        assert_eq!(expired_before_secs(1000.0, 100.0), 900.0);
        assert_eq!(expired_before_secs(f64::NAN, 100.0), -100.0);
    }
}
