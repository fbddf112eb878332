//! The persisted intent record: what survives a page reload, and how it is checked when read back.

use serde::{Deserialize, Serialize};

use super::fingerprint::Fingerprint;
use super::key::IdempotencyKey;

/// The record format version written by this build. Records of another version are rejected.
pub const RECORD_VERSION: u32 = 1;

/// Longest intent id accepted (ids are app-chosen strings such as `"checkout:cart-42"`).
pub const MAX_INTENT_ID_LEN: usize = 256;

/// Where an intent stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IntentState {
    /// Not yet definitely answered: the key is kept and the next `send` reuses it.
    Pending,
    /// A 2xx answer; the key is retired.
    Succeeded,
    /// A definite failure (4xx other than the retried ones); the key is retired.
    Failed,
    /// Pending for longer than the key TTL: the server may have forgotten the key, so it is not re-sent.
    Expired,
}

impl IntentState {
    /// The lowercase name used in storage and in JavaScript.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Expired => "expired",
        }
    }

    /// Whether a definite answer ended the intent.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

/// A request saved with the intent, only when the caller opts in (`persistRequest`).
///
/// Bodies and headers may hold card data or tokens, so by default they are never persisted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PersistedRequest {
    /// HTTP method.
    pub method: String,
    /// Absolute or page-relative URL.
    pub url: String,
    /// Header name/value pairs, as given by the caller.
    pub headers: Vec<(String, String)>,
    /// Body bytes as buffered for sending.
    pub body: Option<Vec<u8>>,
}

/// One user intent and its idempotency key, as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IntentRecord {
    /// Format version ([`RECORD_VERSION`]).
    pub v: u32,
    /// The app's name for the intent, e.g. `"checkout:cart-42"`.
    pub id: String,
    /// The idempotency key (a UUID v4), stored as text and validated on every read.
    pub key: String,
    /// Hex SHA-256 of method, URL and body.
    pub fingerprint: String,
    /// When the intent began, ms since the epoch.
    pub created_at: u64,
    /// Last change, ms since the epoch.
    pub updated_at: u64,
    /// Attempts across every `send`, including earlier page loads.
    pub attempts: u32,
    /// Where it stands.
    pub state: IntentState,
    /// HTTP status of the last answer, if any.
    pub last_status: Option<u16>,
    /// The request itself, only when the caller opted in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<PersistedRequest>,
}

/// Why a stored record cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// Not parseable as a record at all.
    #[error("malformed record: {0}")]
    Malformed(String),
    /// Written by another version of the library.
    #[error("record version {0} is not supported (expected {RECORD_VERSION})")]
    UnsupportedVersion(u32),
    /// The key is not a well-formed UUID v4 (tampered storage).
    #[error("record key is not a valid UUID v4")]
    BadKey,
    /// The fingerprint is not 64 hex characters.
    #[error("record fingerprint is malformed")]
    BadFingerprint,
    /// The id is empty, too long, or differs from the id it was stored under.
    #[error("record id is invalid or does not match its storage slot")]
    BadId,
    /// Times or counters that cannot be true.
    #[error("record timestamps are inconsistent")]
    BadTimes,
    /// A status outside 100..=599.
    #[error("record status {0} is not an HTTP status")]
    BadStatus(u16),
}

impl IntentRecord {
    /// A fresh pending record.
    pub fn new(id: &str, key: &IdempotencyKey, fingerprint: &Fingerprint, now_ms: u64) -> Self {
        Self {
            v: RECORD_VERSION,
            id: id.to_owned(),
            key: key.as_str().to_owned(),
            fingerprint: fingerprint.as_str().to_owned(),
            created_at: now_ms,
            updated_at: now_ms,
            attempts: 0,
            state: IntentState::Pending,
            last_status: None,
            request: None,
        }
    }

    /// Checks every field of a record read back from storage. `expected_id` is the id it was
    /// stored under (a record copied into another slot is rejected).
    pub fn validate(&self, expected_id: Option<&str>) -> Result<IdempotencyKey, RecordError> {
        if self.v != RECORD_VERSION {
            return Err(RecordError::UnsupportedVersion(self.v));
        }
        if !is_valid_intent_id(&self.id) || expected_id.is_some_and(|id| id != self.id) {
            return Err(RecordError::BadId);
        }
        let key = IdempotencyKey::parse(&self.key).map_err(|_| RecordError::BadKey)?;
        if Fingerprint::parse(&self.fingerprint).is_none() {
            return Err(RecordError::BadFingerprint);
        }
        if self.updated_at < self.created_at {
            return Err(RecordError::BadTimes);
        }
        if let Some(status) = self.last_status {
            if !(100..=599).contains(&status) {
                return Err(RecordError::BadStatus(status));
            }
        }
        Ok(key)
    }

    /// Whether the key is older than `ttl_ms` at `now_ms`.
    pub fn is_older_than(&self, ttl_ms: u64, now_ms: u64) -> bool {
        now_ms.saturating_sub(self.created_at) > ttl_ms
    }
}

/// Intent ids are 1..=256 characters with no control characters.
pub fn is_valid_intent_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_INTENT_ID_LEN && !id.chars().any(char::is_control)
}
