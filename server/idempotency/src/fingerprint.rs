//! The request fingerprint: what "the same request" means for a key.

use sha2::{Digest, Sha256};

/// The fingerprint of a request: lowercase hex SHA-256 of `METHOD \n path \n body`.
///
/// A key sent again with another fingerprint is a client bug (one key, two intents) and is answered 422
/// ([`crate::Outcome::Mismatch`]). Headers are left out on purpose: a retry may carry a refreshed token.
pub fn fingerprint(method: &str, path: &str, body: &[u8]) -> String {
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
    fn covers_method_path_and_body() {
        let h = fingerprint("POST", "/api/orders", b"{}");
        assert_eq!(h.len(), 64);
        assert_ne!(h, fingerprint("POST", "/api/orders", b"{ }"));
        assert_ne!(h, fingerprint("PUT", "/api/orders", b"{}"));
        assert_ne!(h, fingerprint("POST", "/api/other", b"{}"));
    }
}
