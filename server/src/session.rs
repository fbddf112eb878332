//! Signed sessions: which account a request acts for.
//!
//! A session token is `v1.ACCOUNT.EXPIRES.MAC`: the account id, its expiry (unix seconds) and the
//! HMAC-SHA256 of `v1.ACCOUNT.EXPIRES` under the server's secret, in hex. Nothing is stored server side:
//! any instance holding the same secret verifies any token. The browser keeps it in an `HttpOnly`,
//! `SameSite=Strict` cookie ([`SESSION_COOKIE`]); other clients send `Authorization: Bearer TOKEN`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderMap};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::keys::AccountId;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "if_session";
/// How long a session is valid.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(30 * 86_400);
/// Shortest accepted `--session-secret`, in bytes.
pub const MIN_SECRET_BYTES: usize = 32;
const VERSION: &str = "v1";

type HmacSha256 = Hmac<Sha256>;

/// The secret that signs and verifies sessions. Its `Debug` output does not show it.
#[derive(Clone)]
pub struct SessionKey {
    secret: Arc<[u8]>,
}

impl fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionKey(..)")
    }
}

/// A freshly issued session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The account it acts for.
    pub account: AccountId,
    /// The token (cookie value or bearer token).
    pub token: String,
    /// Unix seconds after which it is refused.
    pub expires_at: i64,
}

/// Why a secret was refused.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// Shorter than [`MIN_SECRET_BYTES`].
    #[error("the session secret must be at least {MIN_SECRET_BYTES} bytes")]
    TooShort,
    /// The operating system's random source failed.
    #[error("no random source for a session secret: {0}")]
    Random(getrandom::Error),
}

impl SessionKey {
    /// A key from a configured secret (at least [`MIN_SECRET_BYTES`] bytes).
    pub fn from_secret(secret: &[u8]) -> Result<Self, SecretError> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(SecretError::TooShort);
        }
        Ok(SessionKey { secret: Arc::from(secret) })
    }

    /// A random key: sessions then end when the process stops, and instances do not share them.
    pub fn random() -> Result<Self, SecretError> {
        let mut secret = [0_u8; 32];
        getrandom::fill(&mut secret).map_err(SecretError::Random)?;
        Ok(SessionKey { secret: Arc::from(&secret[..]) })
    }

    fn mac(&self, payload: &str) -> HmacSha256 {
        // HMAC takes a key of any length, so this cannot fail.
        let mut mac = <HmacSha256 as Mac>::new_from_slice(&self.secret).unwrap_or_else(|_| unreachable!());
        mac.update(payload.as_bytes());
        mac
    }

    /// Issues a session for `account`, valid for [`SESSION_LIFETIME`] from `now`.
    pub fn issue(&self, account: AccountId, now: i64) -> Session {
        let lifetime = i64::try_from(SESSION_LIFETIME.as_secs()).unwrap_or(i64::MAX);
        let expires_at = now.saturating_add(lifetime);
        let payload = format!("{VERSION}.{}.{expires_at}", account.as_str());
        let tag = self.mac(&payload).finalize().into_bytes();
        let token = format!("{payload}.{}", hex(&tag));
        Session { account, token, expires_at }
    }

    /// The account of a token that this key signed and that has not expired at `now`.
    pub fn verify(&self, token: &str, now: i64) -> Option<AccountId> {
        let (payload, tag) = token.rsplit_once('.')?;
        let mut parts = payload.split('.');
        let (Some(VERSION), Some(account), Some(expires), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let tag = unhex(tag)?;
        // Constant-time comparison.
        self.mac(payload).verify_slice(&tag).ok()?;
        let expires: i64 = expires.parse().ok()?;
        if now >= expires {
            return None;
        }
        AccountId::parse(account).ok()
    }
}

/// The session token a request carries: `Authorization: Bearer TOKEN` first, else the cookie.
pub fn token_from_headers(headers: &HeaderMap) -> Option<&str> {
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        return value.to_str().ok()?.strip_prefix("Bearer ").map(str::trim);
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|cookies| cookies.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value)
}

/// The `Set-Cookie` value for a session; `secure` adds `Secure` (for a server behind HTTPS).
pub fn set_cookie(session: &Session, now: i64, secure: bool) -> String {
    let max_age = session.expires_at.saturating_sub(now).max(0);
    let secure = if secure { "; Secure" } else { "" };
    format!("{SESSION_COOKIE}={}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}", session.token)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok()).collect()
}

/// A fresh, unguessable account id: `acct_` and 16 random hex digits.
pub fn fresh_account() -> Result<AccountId, getrandom::Error> {
    let mut bytes = [0_u8; 8];
    getrandom::fill(&mut bytes)?;
    // `acct_` + hex is always a valid account id.
    AccountId::parse(&format!("acct_{}", hex(&bytes))).map_err(|_| getrandom::Error::UNSUPPORTED)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> SessionKey {
        SessionKey::from_secret(&[byte; 32]).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn tokens_verify_only_with_their_key_and_before_expiry() {
        let account = AccountId::parse("acct_1").unwrap_or_else(|p| panic!("{p:?}"));
        let session = key(1).issue(account.clone(), 1_000);
        assert_eq!(key(1).verify(&session.token, 1_001), Some(account));
        assert_eq!(key(2).verify(&session.token, 1_001), None);
        assert_eq!(key(1).verify(&session.token, session.expires_at), None);
        let forged = session.token.replace("acct_1", "acct_2");
        assert_eq!(key(1).verify(&forged, 1_001), None);
        for junk in ["", "v1", "v1.a.b", "v1.acct_1.9999999999.zz", "v2.acct_1.9999999999.00"] {
            assert_eq!(key(1).verify(junk, 1_001), None, "{junk}");
        }
        assert!(SessionKey::from_secret(b"short").is_err());
    }

    #[test]
    fn token_comes_from_bearer_or_cookie() {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, "a=b; if_session=tok; c=d".parse().unwrap_or_else(|_| unreachable!()));
        assert_eq!(token_from_headers(&headers), Some("tok"));
        headers.insert(header::AUTHORIZATION, "Bearer other".parse().unwrap_or_else(|_| unreachable!()));
        assert_eq!(token_from_headers(&headers), Some("other"));
    }
}
