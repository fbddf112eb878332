//! The request identity: which account, which idempotency key, and which request (its hash).

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};

use crate::problem::Problem;

/// The header carrying the idempotency key.
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";

/// An account id: 1 to 64 characters of `[A-Za-z0-9_-]`.
///
/// The account of a request comes from its signed session ([`crate::session`]). Keys are scoped per
/// account, so two customers who happen to pick the same key never see each other's responses.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AccountId(String);

impl AccountId {
    /// Validates an account id.
    pub fn parse(raw: &str) -> Result<Self, Problem> {
        let ok =
            (1..=64).contains(&raw.len()) && raw.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if ok {
            Ok(AccountId(raw.to_owned()))
        } else {
            Err(Problem::bad_request(
                "invalid-account-id",
                "An account id is 1 to 64 characters of A-Z, a-z, 0-9, '_' or '-'.",
            ))
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An idempotency key: 1 to 255 printable ASCII characters, no spaces.
///
/// The header may carry it as a raw token (`Idempotency-Key: 8e03978e-...`, Stripe style) or as the IETF
/// draft's structured-field string (`Idempotency-Key: "8e03978e-..."`); the quotes are not part of the key,
/// so both forms name the same key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Parses a header value in either form.
    pub fn parse(raw: &str) -> Result<Self, Problem> {
        let inner = match raw.strip_prefix('"') {
            Some(rest) => match rest.strip_suffix('"') {
                Some(inner) => inner,
                None => return Err(malformed("the quoted form must end with '\"'")),
            },
            None => raw,
        };
        if inner.is_empty() {
            return Err(malformed("the key is empty"));
        }
        if inner.len() > 255 {
            return Err(malformed("the key is longer than 255 characters"));
        }
        // Printable ASCII without space; '"' and '\' are excluded too, so the sf-string form never needs escapes.
        if !inner.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\') {
            return Err(malformed("the key must be printable ASCII without spaces, quotes or backslashes"));
        }
        Ok(IdempotencyKey(inner.to_owned()))
    }

    /// Reads the key from the `Idempotency-Key` header; missing or malformed is a 400.
    pub fn from_headers(headers: &HeaderMap) -> Result<Self, Problem> {
        let mut values = headers.get_all(IDEMPOTENCY_KEY_HEADER).iter();
        let Some(value) = values.next() else {
            return Err(Problem::bad_request(
                "missing-idempotency-key",
                "POST /api/orders requires an Idempotency-Key header (a UUID per user intent).",
            ));
        };
        if values.next().is_some() {
            return Err(malformed("the header appears more than once"));
        }
        match value.to_str() {
            Ok(text) => IdempotencyKey::parse(text.trim()),
            Err(_) => Err(malformed("the key must be printable ASCII")),
        }
    }

    /// The key as text (without quotes).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn malformed(why: &str) -> Problem {
    Problem::bad_request("malformed-idempotency-key", format!("Malformed Idempotency-Key: {why}."))
}

/// The fingerprint of a request: lowercase hex SHA-256 of `METHOD \n path \n body`.
///
/// A key reused with a different fingerprint is a client bug and gets 422.
pub fn request_hash(method: &str, path: &str, body: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(method.as_bytes());
    hasher.update(b"\n");
    hasher.update(path.as_bytes());
    hasher.update(b"\n");
    hasher.update(body);
    format!("{:x}", hasher.finalize())
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
    fn accounts_are_validated() {
        assert!(AccountId::parse("acct_42-x").is_ok());
        assert!(AccountId::parse("").is_err());
        assert!(AccountId::parse(&"a".repeat(65)).is_err());
        assert!(AccountId::parse("a/b").is_err());
    }

    #[test]
    fn hash_covers_method_path_and_body() {
        let h = request_hash("POST", "/api/orders", b"{}");
        assert_eq!(h.len(), 64);
        assert_ne!(h, request_hash("POST", "/api/orders", b"{ }"));
        assert_ne!(h, request_hash("PUT", "/api/orders", b"{}"));
        assert_ne!(h, request_hash("POST", "/api/other", b"{}"));
    }
}
