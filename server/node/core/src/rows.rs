//! A key row as the Node side read it (the columns of `SELECT_ROW`, as JSON).

use idempotent_endpoint::StoredResponse;
use serde::Deserialize;

/// The columns as node-postgres and PGlite return them.
#[derive(Deserialize)]
struct Columns {
    fingerprint: String,
    #[serde(default)]
    status_code: Option<f64>,
    #[serde(default)]
    response_headers: Option<String>,
    #[serde(default)]
    response_body: Option<String>,
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
        let status = match columns.status_code {
            None => None,
            Some(code) if (0.0..=f64::from(u16::MAX)).contains(&code) && code.fract() == 0.0 => Some(code as u16),
            Some(code) => return Err(format!("corrupt stored data: status_code {code}")),
        };
        let stored = StoredResponse::from_columns(status, columns.response_headers.as_deref(), columns.response_body)
            .map_err(|e| format!("corrupt stored data: response_headers: {e}"))?;
        Ok(Row { fingerprint: columns.fingerprint, stored })
    }

    /// [`Row::from_json`] of a row that may be absent.
    pub(crate) fn maybe(text: Option<&str>) -> Result<Option<Row>, String> {
        text.map(Row::from_json).transpose()
    }
}
