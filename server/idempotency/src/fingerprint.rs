//! The request fingerprint: what "the same request" means for a key; and the key's hash, what traces and
//! logs show of a key instead of the key.

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

/// Hex digits of [`key_hash`]: 64 bits, enough to tell keys apart in a trace, too few to stand for a key.
pub const KEY_HASH_HEX_DIGITS: usize = 16;

/// What a trace shows of an idempotency key (or of a key derived from one): the first
/// [`KEY_HASH_HEX_DIGITS`] lowercase hex digits of its SHA-256. A key is a bearer of the intent (whoever has
/// it can read its stored answer with the account's session), so spans carry this hash, never the key.
pub fn key_hash(key: &str) -> String {
    let mut hex = format!("{:x}", Sha256::digest(key.as_bytes()));
    hex.truncate(KEY_HASH_HEX_DIGITS);
    hex
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

    #[test]
    fn a_key_hash_is_the_start_of_its_sha256() {
        // SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
        assert_eq!(key_hash("abc"), "ba7816bf8f01cfea");
        assert_ne!(key_hash("abd"), key_hash("abc"));
    }
}
