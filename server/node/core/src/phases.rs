//! Atomic phases, for the Node half: the library's decisions (`idempotent_endpoint::phases`) on values from
//! JavaScript (its statements reach the TypeScript through `crate::facts`).

use idempotent_endpoint::phases;
use idempotent_endpoint::Outcome;
use serde_json::json;
use wasm_bindgen::prelude::wasm_bindgen;

use crate::answers::{answer_json, error_json};
use crate::rows::Row;

/// The idempotency key for the external call made at `step` by the key row with id `row_id`
/// (`Held::downstream_key`).
#[wasm_bindgen(js_name = downstreamKey)]
pub fn downstream_key(row_id: &str, step: &str) -> String {
    phases::downstream_key(row_id, step)
}

/// Why `advance` may not move a row to `point` (only `finish` reaches the finished point), or none.
#[wasm_bindgen(js_name = advancePointError)]
pub fn advance_point_error(point: &str) -> Option<String> {
    phases::check_point(point).err().map(|e| e.to_string())
}

/// The decision of `begin` for a key row that exists (`row_json`: the row of `selectForBegin` as JSON, its
/// lease's end `locked_until_ms`, the time `now_ms`): `{"take_over": true}` when the caller takes the row over
/// at its point, else `{"outcome": "replay" | "mismatch" | "in_flight" | "fenced", "answer": ...}`;
/// `{"error": ...}` for a row that cannot be read.
#[wasm_bindgen(js_name = beginDecision)]
pub fn begin_decision(fingerprint: &str, row_json: &str, locked_until_ms: f64, now_ms: f64) -> String {
    let row = match Row::from_json(row_json) {
        Ok(row) => row,
        Err(error) => return error_json(&error),
    };
    match phases::existing_row(fingerprint, &row.fingerprint, row.stored, whole_ms(locked_until_ms), whole_ms(now_ms)) {
        None => json!({ "take_over": true }).to_string(),
        Some(outcome) => {
            let name = match outcome {
                Outcome::Fresh(_) | Outcome::Replay(_) => "replay",
                Outcome::Mismatch => "mismatch",
                Outcome::InFlight => "in_flight",
                Outcome::Fenced => "fenced",
            };
            json!({ "outcome": name, "answer": answer_json(&outcome.answer()) }).to_string()
        }
    }
}

/// A JavaScript number of milliseconds as the `BIGINT` columns hold it (NaN is 0; out of range saturates).
fn whole_ms(ms: f64) -> i64 {
    if ms.is_nan() {
        0
    } else {
        ms.floor() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use idempotent_endpoint::phases::FINISHED;
    use serde_json::Value;

    fn parsed(text: &str) -> Value {
        serde_json::from_str(text).unwrap_or(Value::Null)
    }

    #[test]
    fn the_downstream_key_is_the_librarys() {
        let key = downstream_key("row-1", "charge");
        assert_eq!(key.len(), 64);
        assert_eq!(key, phases::downstream_key("row-1", "charge"));
        assert_ne!(key, downstream_key("row-1", "email"));
        assert_ne!(key, downstream_key("row-2", "charge"));
    }

    #[test]
    fn only_finish_reaches_finished() {
        assert!(advance_point_error("charged").is_none());
        assert!(advance_point_error(FINISHED).is_some());
    }

    #[test]
    fn an_unfinished_row_is_taken_over_only_once_its_lease_ran_out() {
        let open = json!({"fingerprint": "fp", "status_code": null}).to_string();
        assert_eq!(parsed(&begin_decision("fp", &open, 1000.0, 1000.0))["take_over"], true);
        assert_eq!(parsed(&begin_decision("fp", &open, 1001.0, 1000.0))["outcome"], "in_flight");
        assert_eq!(parsed(&begin_decision("other", &open, 0.0, 1000.0))["outcome"], "mismatch");
        let done = json!({"fingerprint": "fp", "status_code": 201, "response_headers": "[]", "response_body": "{}"});
        assert_eq!(parsed(&begin_decision("fp", &done.to_string(), 0.0, 1000.0))["outcome"], "replay");
        assert!(parsed(&begin_decision("fp", "not json", 0.0, 0.0))["error"].is_string());
    }
}
