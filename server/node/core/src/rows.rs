//! Rows as the Node side read them (columns as JSON): a key row (the columns of `SELECT_ROW`) and the
//! answer columns it shares with an inbox record (`inbox_sql::SELECT_ANSWER`).

use idempotent_endpoint::StoredResponse;
use serde::Deserialize;

/// The answer columns as node-postgres and PGlite return them.
#[derive(Deserialize)]
struct AnswerColumns {
    #[serde(default)]
    status_code: Option<f64>,
    #[serde(default)]
    response_headers: Option<String>,
    #[serde(default)]
    response_body: Option<String>,
}

impl AnswerColumns {
    /// The stored answer, checked as the Rust stores check it; none when the columns are empty.
    fn decode(self) -> Result<Option<StoredResponse>, String> {
        let status = match self.status_code {
            None => None,
            Some(code) if (0.0..=f64::from(u16::MAX)).contains(&code) && code.fract() == 0.0 => Some(code as u16),
            Some(code) => return Err(format!("corrupt stored data: status_code {code}")),
        };
        StoredResponse::from_columns(status, self.response_headers.as_deref(), self.response_body)
            .map_err(|e| format!("corrupt stored data: response_headers: {e}"))
    }
}

/// A key row's columns.
#[derive(Deserialize)]
struct Columns {
    fingerprint: String,
    #[serde(flatten)]
    answer: AnswerColumns,
}

/// A key row: its fingerprint and its stored answer (none while its request is in flight).
pub(crate) struct Row {
    /// The fingerprint column.
    pub(crate) fingerprint: String,
    /// The answer columns, decoded.
    pub(crate) stored: Option<StoredResponse>,
}

impl Row {
    /// The row from its JSON, checked as the Rust stores check it.
    pub(crate) fn from_json(text: &str) -> Result<Row, String> {
        let columns: Columns = serde_json::from_str(text).map_err(|e| format!("corrupt key row: {e}"))?;
        Ok(Row { fingerprint: columns.fingerprint, stored: columns.answer.decode()? })
    }

    /// [`Row::from_json`] of a row that may be absent.
    pub(crate) fn maybe(text: Option<&str>) -> Result<Option<Row>, String> {
        text.map(Row::from_json).transpose()
    }
}

/// An inbox record's answer from its JSON; a record without one is corrupt (a commit cannot leave one).
pub(crate) fn inbox_answer(text: &str) -> Result<StoredResponse, String> {
    let columns: AnswerColumns = serde_json::from_str(text).map_err(|e| format!("corrupt inbox record: {e}"))?;
    columns.decode()?.ok_or_else(|| "corrupt stored data: an inbox record without an answer".to_owned())
}
