//! `application/problem+json` error responses (RFC 9457).
//!
//! Every error the protocol answers with is a [`Problem`]: a small JSON object with a stable
//! machine-readable `code`, a human `title` and `detail`, and the HTTP `status`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// The media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";
/// Longest `detail`, in bytes: details may quote the client's input (a serde error names the bad value), and
/// a problem can be stored as a key's answer for the whole retention, so one request must not be able to
/// store more than this.
pub const MAX_DETAIL_BYTES: usize = 300;

/// An RFC 9457 problem document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// A URI naming the kind of problem (`about:blank`-style; not dereferenced).
    #[serde(rename = "type")]
    pub kind: String,
    /// A short, stable, human-readable summary of the kind of problem.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// What went wrong with this request.
    pub detail: String,
    /// A stable machine-readable code (kebab-case), also the last segment of `type`.
    pub code: String,
    /// `Retry-After` seconds sent along with the problem, when the client should retry later.
    #[serde(skip)]
    pub retry_after: Option<u64>,
}

impl Problem {
    /// Builds a problem; `code` is kebab-case and stable (clients may match on it).
    pub fn new(status: StatusCode, code: &str, title: &str, detail: impl Into<String>) -> Self {
        Problem {
            kind: format!("https://idempotent-fetch.dev/problems/{code}"),
            title: title.to_owned(),
            status: status.as_u16(),
            detail: truncate(detail.into(), MAX_DETAIL_BYTES),
            code: code.to_owned(),
            retry_after: None,
        }
    }

    /// A 400 Bad Request.
    pub fn bad_request(code: &str, detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::BAD_REQUEST, code, "Bad request", detail)
    }

    /// A 500 for failures of the store (the detail is deliberately generic; the cause is logged).
    pub fn internal() -> Self {
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal-error",
            "Internal server error",
            "The server could not complete the request; it is safe to retry with the same Idempotency-Key.",
        )
    }

    /// Adds a `Retry-After` header (seconds) to the response.
    pub fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    /// The JSON body, as text.
    pub fn to_json(&self) -> String {
        // Serializing a struct of strings and integers cannot fail.
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }

    /// The status as a [`StatusCode`] (500 if somehow invalid).
    pub fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

/// `text` cut to at most `max` bytes on a character boundary, with `…` marking the cut.
pub fn truncate(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let ellipsis = "…";
    let mut end = max.saturating_sub(ellipsis.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(ellipsis);
    text
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut response =
            (self.status_code(), [(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON))], self.to_json())
                .into_response();
        if let Some(secs) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_are_bounded() {
        let long = Problem::bad_request("x", "é".repeat(1000));
        assert!(long.detail.len() <= MAX_DETAIL_BYTES, "{}", long.detail.len());
        assert!(long.detail.ends_with('…'));
        assert_eq!(Problem::bad_request("x", "short").detail, "short");
    }
}
