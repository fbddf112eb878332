//! The idempotency key as a request carries it.

use http::HeaderMap;

use crate::problem::Problem;

/// The header carrying the idempotency key (lowercase, as `http` names headers).
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";
/// The longest key accepted, in characters.
pub const MAX_KEY_CHARS: usize = 255;

/// An idempotency key: 1 to [`MAX_KEY_CHARS`] printable ASCII characters, no spaces, quotes or backslashes.
///
/// The header may carry it as a raw token (`Idempotency-Key: 8e03978e-...`, Stripe style) or as the IETF
/// draft's structured-field string (`Idempotency-Key: "8e03978e-..."`); the quotes are not part of the key,
/// so both forms name the same key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

/// Why a key was refused (each is a 400; [`KeyError::problem`] says so to the client).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The request has no `Idempotency-Key` header.
    #[error("the request has no Idempotency-Key header")]
    Missing,
    /// The header appears more than once.
    #[error("the Idempotency-Key header appears more than once")]
    Repeated,
    /// The value is not a key in either form.
    #[error("malformed Idempotency-Key: {0}")]
    Malformed(&'static str),
}

impl KeyError {
    /// The 400 answer: `missing-idempotency-key` or `malformed-idempotency-key`.
    pub fn problem(&self) -> Problem {
        match self {
            KeyError::Missing => Problem::bad_request(
                "missing-idempotency-key",
                "This endpoint requires an Idempotency-Key header (a random key per user intent).",
            ),
            KeyError::Repeated | KeyError::Malformed(_) => {
                Problem::bad_request("malformed-idempotency-key", format!("{self}."))
            }
        }
    }
}

impl From<KeyError> for Problem {
    fn from(error: KeyError) -> Self {
        error.problem()
    }
}

impl IdempotencyKey {
    /// Parses a header value in either form.
    pub fn parse(raw: &str) -> Result<Self, KeyError> {
        let inner = match raw.strip_prefix('"') {
            Some(rest) => match rest.strip_suffix('"') {
                Some(inner) => inner,
                None => return Err(KeyError::Malformed("the quoted form must end with '\"'")),
            },
            None => raw,
        };
        if inner.is_empty() {
            return Err(KeyError::Malformed("the key is empty"));
        }
        if inner.len() > MAX_KEY_CHARS {
            return Err(KeyError::Malformed("the key is longer than 255 characters"));
        }
        // '"' and '\' are excluded too, so the sf-string form never needs escapes.
        if !inner.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\') {
            return Err(KeyError::Malformed("the key must be printable ASCII without spaces, quotes or backslashes"));
        }
        Ok(IdempotencyKey(inner.to_owned()))
    }

    /// Reads the key from the `Idempotency-Key` header.
    pub fn from_headers(headers: &HeaderMap) -> Result<Self, KeyError> {
        IdempotencyKey::from_header_values(headers.get_all(IDEMPOTENCY_KEY_HEADER).iter().map(|v| v.to_str().ok()))
    }

    /// Reads the key from every value of the `Idempotency-Key` header a request carries, in order (`None` for
    /// a value that is not visible ASCII text): none is [`KeyError::Missing`], more than one
    /// [`KeyError::Repeated`].
    pub fn from_header_values<'a>(values: impl IntoIterator<Item = Option<&'a str>>) -> Result<Self, KeyError> {
        let mut values = values.into_iter();
        let Some(value) = values.next() else {
            return Err(KeyError::Missing);
        };
        if values.next().is_some() {
            return Err(KeyError::Repeated);
        }
        match value {
            Some(text) => IdempotencyKey::parse(text.trim()),
            None => Err(KeyError::Malformed("the key must be printable ASCII")),
        }
    }

    /// The key as text (without quotes).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_in_both_forms_are_the_same_key() {
        let raw = IdempotencyKey::parse("abc-123").ok();
        let quoted = IdempotencyKey::parse("\"abc-123\"").ok();
        assert!(raw.is_some());
        assert_eq!(raw, quoted);
    }

    #[test]
    fn malformed_keys_are_rejected() {
        for bad in ["", "\"\"", "a b", "\"abc", "caf\u{e9}", "tab\tkey", "a\"b", "a\\b"] {
            assert!(IdempotencyKey::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(IdempotencyKey::parse(&"k".repeat(255)).is_ok());
        assert!(IdempotencyKey::parse(&"k".repeat(256)).is_err());
    }

    #[test]
    fn missing_and_repeated_headers_are_refused() {
        let mut headers = HeaderMap::new();
        assert_eq!(IdempotencyKey::from_headers(&headers), Err(KeyError::Missing));
        headers.append(IDEMPOTENCY_KEY_HEADER, "a-key".parse().unwrap());
        assert_eq!(IdempotencyKey::from_headers(&headers).map(|k| k.0), Ok("a-key".to_owned()));
        headers.append(IDEMPOTENCY_KEY_HEADER, "b-key".parse().unwrap());
        assert_eq!(IdempotencyKey::from_headers(&headers), Err(KeyError::Repeated));
        assert_eq!(KeyError::Missing.problem().status, 400);
    }
}
