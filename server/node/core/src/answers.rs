//! Answers as they cross to JavaScript: `{status, headers: [[name, value], ...], body}`.

use idempotent_endpoint::{StoredResponse, MAX_STORED_BODY_BYTES};
use serde::Serialize;
use serde_json::{json, Value};

/// A response as the JSON the TypeScript side sends.
pub(crate) fn answer_json(response: &StoredResponse) -> Value {
    json!(AnswerRef::of(response))
}

/// A response as the JSON the TypeScript side sends, borrowed: an answer on a request's path is written
/// straight to its text, without building a `Value` (and copying the body into it) first.
#[derive(Serialize)]
pub(crate) struct AnswerRef<'a> {
    status: u16,
    headers: &'a [(String, String)],
    body: &'a str,
}

impl<'a> AnswerRef<'a> {
    /// `response` as it crosses.
    pub(crate) fn of(response: &'a StoredResponse) -> Self {
        AnswerRef { status: response.status, headers: &response.headers, body: &response.body }
    }
}

/// `value` as JSON text; `{"error": ...}` if it cannot be written (a value of plain strings and numbers
/// always can).
pub(crate) fn text(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|e| error_json(&e.to_string()))
}

/// `{"error": message}`: a value from JavaScript or the database that cannot be used.
pub(crate) fn error_json(message: &str) -> String {
    json!({ "error": message }).to_string()
}

/// The work's answer, checked: a whole status in 100..=599, `[name, value]` string pairs (names kept in
/// lowercase, as the library stores them), a body the library stores.
pub(crate) fn fresh(status: f64, headers_json: &str, body: String) -> Result<StoredResponse, String> {
    if !(100.0..=599.0).contains(&status) || status.fract() != 0.0 {
        return Err(format!("the answer's status {status} is not an HTTP status (100 to 599)"));
    }
    let pairs: Vec<(String, String)> = serde_json::from_str(headers_json)
        .map_err(|e| format!("the answer's headers are not [name, value] pairs of strings: {e}"))?;
    if body.len() > MAX_STORED_BODY_BYTES {
        return Err(format!(
            "the answer's body of {} bytes is larger than the {MAX_STORED_BODY_BYTES} bytes a key row stores",
            body.len()
        ));
    }
    let response = StoredResponse { status: status as u16, headers: Vec::new(), body };
    Ok(pairs.into_iter().fold(response, |response, (name, value)| response.with_header(&name, value)))
}
