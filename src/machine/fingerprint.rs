//! The request fingerprint. The driver computes it (HMAC-SHA-256 hex of method, URL, content type and
//! body under the namespace's secret; an unkeyed SHA-256 in version-1 records); the machine only
//! checks its form and compares it.

/// Length of a hex SHA-256 (or HMAC-SHA-256) digest.
pub const FINGERPRINT_LEN: usize = 64;

/// Whether `text` is exactly 64 lowercase hex characters.
#[inline(never)] // one copy for begin and load
pub fn is_valid(text: &str) -> bool {
    text.len() == FINGERPRINT_LEN && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
