//! The answer stored on a key row and replayed byte for byte.

#[cfg(feature = "runtime")]
use axum::body::Body;
#[cfg(feature = "runtime")]
use axum::response::Response;
use http::StatusCode;
#[cfg(feature = "runtime")]
use http::{HeaderName, HeaderValue};

use crate::problem::{Problem, PROBLEM_JSON};

/// The header set on replayed responses (lowercase).
pub const REPLAYED_HEADER: &str = "idempotent-replayed";
/// Largest stored response body, in bytes: an answer is a small confirmation, not a document; a bigger one
/// is refused before anything is committed, so one request cannot make the server keep megabytes for the
/// whole retention.
pub const MAX_STORED_BODY_BYTES: usize = 16 * 1024;

/// A response as stored on the key row and replayed byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// HTTP status code.
    pub status: u16,
    /// Headers (lowercase names) that are part of the response, such as `content-type` and `location`.
    pub headers: Vec<(String, String)>,
    /// The body, exactly as first sent.
    pub body: String,
}

impl StoredResponse {
    /// A JSON answer with `status` (for example 201 with the created record).
    pub fn json(status: StatusCode, value: &impl serde::Serialize) -> Self {
        StoredResponse {
            status: status.as_u16(),
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body: serde_json::to_string(value).unwrap_or_else(|_| String::from("null")),
        }
    }

    /// Adds a header (name in lowercase).
    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
    }

    /// A problem (for example a body that failed validation) as the key's answer: a retry of the same bad
    /// request gets the same answer.
    pub fn from_problem(problem: &Problem) -> Self {
        let mut headers = vec![("content-type".to_owned(), PROBLEM_JSON.to_owned())];
        if let Some(secs) = problem.retry_after {
            headers.push(("retry-after".to_owned(), secs.to_string()));
        }
        StoredResponse { status: problem.status, headers, body: problem.to_json() }
    }

    /// The headers as the text kept in a `response_headers` column (a JSON array of pairs).
    pub fn encode_headers(&self) -> String {
        serde_json::to_string(&self.headers).unwrap_or_else(|_| String::from("[]"))
    }

    /// The stored response from a key row's `status_code`, `response_headers` and `response_body` columns;
    /// `None` while the row has no response yet (its request is in flight).
    pub fn from_columns(
        status: Option<u16>,
        headers: Option<&str>,
        body: Option<String>,
    ) -> Result<Option<Self>, serde_json::Error> {
        let Some(status) = status else {
            return Ok(None);
        };
        Ok(Some(StoredResponse {
            status,
            headers: serde_json::from_str(headers.unwrap_or("[]"))?,
            body: body.unwrap_or_default(),
        }))
    }

    /// The HTTP response; `replayed` adds `Idempotent-Replayed: true`.
    #[cfg(feature = "runtime")]
    pub fn into_http(self, replayed: bool) -> Response {
        let mut response = Response::new(Body::from(self.body));
        *response.status_mut() = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let headers = response.headers_mut();
        for (name, value) in &self.headers {
            if let (Ok(name), Ok(value)) = (HeaderName::try_from(name.as_str()), HeaderValue::try_from(value.as_str()))
            {
                headers.append(name, value);
            }
        }
        if replayed {
            headers.insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
        }
        response
    }
}
