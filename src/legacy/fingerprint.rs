//! The request fingerprint: SHA-256 over method, URL and body, so a changed request is caught.

use sha2::{Digest, Sha256};

/// Hex SHA-256 of `METHOD \n URL \n body`, 64 lowercase hex characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint(String);

impl Fingerprint {
    /// Fingerprints a request. The method is upper-cased first (`post` and `POST` are one request).
    pub fn of(method: &str, url: &str, body: &[u8]) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(method.to_ascii_uppercase().as_bytes());
        hasher.update(b"\n");
        hasher.update(url.as_bytes());
        hasher.update(b"\n");
        hasher.update(body);
        let digest = hasher.finalize();
        let mut hex = String::with_capacity(64);
        for byte in digest {
            hex.push(char::from(HEX[usize::from(byte >> 4)]));
            hex.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
        Self(hex)
    }

    /// Accepts a stored fingerprint only if it is exactly 64 lowercase hex characters.
    pub fn parse(text: &str) -> Option<Self> {
        let well_formed = text.len() == 64 && text.bytes().all(|b| HEX.contains(&b));
        well_formed.then(|| Self(text.to_owned()))
    }

    /// The hex digest.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";
