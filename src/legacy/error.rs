//! Errors with a stable, machine-readable code.

use std::fmt;

/// The stable error codes, as JavaScript sees them in `IdempotentFetchError.code`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// No definite answer within the attempts, the deadline or the retry budget; the key is kept.
    RetriesExhausted,
    /// The caller aborted; the key is kept.
    Aborted,
    /// The server answered 422: this key was used with a different request.
    KeyMismatch,
    /// The intent id was begun before with a different request.
    IntentMismatch,
    /// The stored key is older than `keyTtlMs`; the server may have forgotten it.
    Expired,
    /// The body is a stream and cannot be sent twice.
    BodyNotReplayable,
    /// An option is missing, of the wrong type, or out of range.
    InvalidOptions,
    /// The request (URL, method, headers, body) is not usable.
    InvalidRequest,
    /// Storage failed, or a stored record is corrupt or tampered.
    Storage,
    /// The intent is not in storage any more (discarded meanwhile).
    NotFound,
}

impl ErrorCode {
    /// The `SCREAMING_SNAKE_CASE` code string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RetriesExhausted => "RETRIES_EXHAUSTED",
            Self::Aborted => "ABORTED",
            Self::KeyMismatch => "KEY_MISMATCH",
            Self::IntentMismatch => "INTENT_MISMATCH",
            Self::Expired => "EXPIRED",
            Self::BodyNotReplayable => "BODY_NOT_REPLAYABLE",
            Self::InvalidOptions => "INVALID_OPTIONS",
            Self::InvalidRequest => "INVALID_REQUEST",
            Self::Storage => "STORAGE",
            Self::NotFound => "NOT_FOUND",
        }
    }
}

/// Which limit ended a `send` without a definite answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExhaustedReason {
    /// `maxAttempts` attempts were made.
    MaxAttempts,
    /// `totalTimeoutMs` passed, or the next wait would pass it.
    Deadline,
    /// The client's retry budget is empty.
    Budget,
}

impl ExhaustedReason {
    /// `"maxAttempts" | "deadline" | "budget"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MaxAttempts => "maxAttempts",
            Self::Deadline => "deadline",
            Self::Budget => "budget",
        }
    }
}

/// An error from `begin` or `send`, carrying what the app needs to show and to resume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendError {
    /// The stable code.
    pub code: ErrorCode,
    /// A human-readable message.
    pub message: String,
    /// The intent's key, when there is one (kept for a later `send` unless the code says otherwise).
    pub key: Option<String>,
    /// Attempts made by this `send`.
    pub attempts: u32,
    /// Status of the last answer, if any.
    pub last_status: Option<u16>,
    /// For `RETRIES_EXHAUSTED`: which limit.
    pub exhausted: Option<ExhaustedReason>,
}

impl SendError {
    /// An error with just a code and a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), key: None, attempts: 0, last_status: None, exhausted: None }
    }

    /// Adds the key.
    pub fn with_key(mut self, key: &str) -> Self {
        self.key = Some(key.to_owned());
        self
    }
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for SendError {}
