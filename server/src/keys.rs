//! The request identity: which account (this server's), which idempotency key and which request (the
//! library's key and fingerprint).

pub use idempotent_endpoint::fingerprint::fingerprint;
pub use idempotent_endpoint::{IdempotencyKey, KeyError, IDEMPOTENCY_KEY_HEADER};

use crate::problem::Problem;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_are_validated() {
        assert!(AccountId::parse("acct_42-x").is_ok());
        assert!(AccountId::parse("").is_err());
        assert!(AccountId::parse(&"a".repeat(65)).is_err());
        assert!(AccountId::parse("a/b").is_err());
    }
}
