//! `application/problem+json` error responses (RFC 9457).
//!
//! Every error the protocol answers with is a [`Problem`]: a small JSON object with a stable
//! machine-readable `code`, a human `title` and `detail`, and the HTTP `status`.

#[cfg(feature = "runtime")]
use axum::response::{IntoResponse, Response};
use http::StatusCode;
#[cfg(feature = "runtime")]
use http::{header, HeaderValue};
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

    /// The 413 for a request body larger than the server accepts.
    pub fn body_too_large() -> Self {
        Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body-too-large",
            "Body too large",
            "The request body is larger than the server accepts; nothing was done.",
        )
    }

    /// The 400 for a request body that could not be read (cut off).
    pub fn unreadable_body() -> Self {
        Problem::bad_request("unreadable-body", "The request body could not be read; nothing was done.")
    }

    /// The 408 for a request body that did not arrive within the server's deadline.
    pub fn body_timeout() -> Self {
        Problem::new(
            StatusCode::REQUEST_TIMEOUT,
            "body-timeout",
            "Request timeout",
            "The request body did not arrive in time; nothing was done. Retry with the same Idempotency-Key.",
        )
    }

    /// The 400 for a body that is not the JSON the endpoint expects; `detail` says why.
    pub fn invalid_body(detail: impl Into<String>) -> Self {
        Problem::bad_request("invalid-body", detail)
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

    /// The headers the problem is answered with: its media type, and `Retry-After` when set.
    pub fn header_pairs(&self) -> Vec<(String, String)> {
        let mut headers = vec![("content-type".to_owned(), PROBLEM_JSON.to_owned())];
        if let Some(secs) = self.retry_after {
            headers.push(("retry-after".to_owned(), secs.to_string()));
        }
        headers
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

#[cfg(feature = "runtime")]
impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut response = (self.status_code(), self.to_json()).into_response();
        let headers = response.headers_mut();
        for (name, value) in self.header_pairs() {
            if let (Ok(name), Ok(value)) = (header::HeaderName::try_from(name), HeaderValue::try_from(value)) {
                headers.insert(name, value);
            }
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
