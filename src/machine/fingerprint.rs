//! The request fingerprint. The driver computes it (SHA-256 hex of method, URL, content type and
//! body, from `crypto.subtle` or its fallback); the machine only checks its form and compares it.

/// Length of a hex SHA-256 digest.
pub const FINGERPRINT_LEN: usize = 64;

/// Whether `text` is exactly 64 lowercase hex characters.
#[inline(never)] // one copy for begin and load
pub fn is_valid(text: &str) -> bool {
    text.len() == FINGERPRINT_LEN && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
