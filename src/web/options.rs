//! Client options from JavaScript: parsed strictly (unknown fields, wrong types, NaN, negatives and
//! absurd values are `INVALID_OPTIONS` naming the field) and defaulted in one place
//! ([`crate::legacy::RetryPolicy`]'s `# Default` table).

use js_sys::{Function, Object};
use wasm_bindgen::prelude::*;

use crate::legacy::engine::KeyHeaderForm;
use crate::legacy::policy::{DEFAULT_KEY_TTL_MS, MAX_ATTEMPTS_LIMIT, MAX_DURATION_MS};
use crate::legacy::{ErrorCode, Jitter, RetryPolicy};

use super::errors::js_error;
use super::fields::{js_number_text, Fields};

/// Where intents are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageKind {
    /// `localStorage` (default in a window): survives reloads, shared by tabs.
    Local,
    /// `sessionStorage`: survives reloads of this tab only.
    Session,
    /// IndexedDB (default in a worker, which has no Web Storage): survives reloads and worker
    /// restarts, shared by the tabs and workers of the origin.
    IndexedDb,
    /// In memory: lost on reload (Node's default, and the fallback).
    Memory,
}

impl StorageKind {
    /// The JavaScript spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Session => "session",
            Self::IndexedDb => "indexeddb",
            Self::Memory => "memory",
        }
    }
}

/// The parsed, validated options of one client.
pub struct ClientConfig {
    /// Prefix that keeps one account's intents apart from another's.
    pub namespace: String,
    /// Requested storage.
    pub storage: StorageKind,
    /// Retry policy.
    pub policy: RetryPolicy,
    /// Keys older than this are not re-sent.
    pub key_ttl_ms: u64,
    /// Header carrying the key.
    pub header_name: String,
    /// Raw token or sf-string.
    pub header_form: KeyHeaderForm,
    /// Retry budget capacity.
    pub retry_budget: u32,
    /// Persist the request (body and headers) with the intent.
    pub persist_request: bool,
    /// The caller's `shouldRetry(status)` override.
    pub should_retry: Option<Function>,
}

const ROOT_FIELDS: &[&str] = &[
    "namespace",
    "storage",
    "retry",
    "keyTtlMs",
    "headerName",
    "headerForm",
    "retryBudget",
    "persistRequest",
    "shouldRetry",
];
const RETRY_FIELDS: &[&str] =
    &["maxAttempts", "baseDelayMs", "maxDelayMs", "totalTimeoutMs", "attemptTimeoutMs", "maxRetryAfterMs", "jitter"];

/// Parses `new IdempotentClient(options)`'s argument (`undefined`/`null` mean all defaults).
pub fn parse_client_options(value: &JsValue) -> Result<ClientConfig, JsValue> {
    let empty: JsValue = Object::new().into();
    let value = if value.is_undefined() || value.is_null() { &empty } else { value };
    let root = Fields::of(value, "", "options").map_err(invalid)?;
    root.only(ROOT_FIELDS).map_err(invalid)?;
    let defaults = RetryPolicy::default();
    let retry_value = root.value("retry").map_err(invalid)?.unwrap_or_else(|| Object::new().into());
    let retry = Fields::of(&retry_value, "retry.", "retry").map_err(invalid)?;
    retry.only(RETRY_FIELDS).map_err(invalid)?;
    let policy = RetryPolicy {
        max_attempts: integer(&retry, "maxAttempts", defaults.max_attempts.into(), 1, MAX_ATTEMPTS_LIMIT.into())?
            as u32,
        base_delay_ms: duration(&retry, "baseDelayMs", defaults.base_delay_ms)?,
        max_delay_ms: duration(&retry, "maxDelayMs", defaults.max_delay_ms)?,
        total_timeout_ms: duration(&retry, "totalTimeoutMs", defaults.total_timeout_ms)?,
        attempt_timeout_ms: duration(&retry, "attemptTimeoutMs", defaults.attempt_timeout_ms)?,
        max_retry_after_ms: duration(&retry, "maxRetryAfterMs", defaults.max_retry_after_ms)?,
        jitter: match retry.string("jitter").map_err(invalid)? {
            None => defaults.jitter,
            Some(text) => Jitter::parse(&text).ok_or_else(|| {
                invalid(format!(
                    "retry.jitter must be \"full\", \"equal\", \"decorrelated\" or \"none\", got \"{text}\""
                ))
            })?,
        },
    };
    policy.validate().map_err(invalid)?;
    let namespace = root.string("namespace").map_err(invalid)?.unwrap_or_else(|| "default".into());
    if namespace.is_empty() || namespace.len() > 128 || namespace.chars().any(|c| c.is_control() || c == ':') {
        return Err(invalid("namespace must be 1 to 128 characters, without ':' or control characters"));
    }
    let storage = match root.string("storage").map_err(invalid)?.as_deref() {
        None => default_storage(),
        Some("local") => StorageKind::Local,
        Some("session") => StorageKind::Session,
        Some("indexeddb") => StorageKind::IndexedDb,
        Some("memory") => StorageKind::Memory,
        Some(other) => {
            return Err(invalid(format!(
                "storage must be \"local\", \"session\", \"indexeddb\" or \"memory\", got \"{other}\""
            )))
        }
    };
    let header_name = root.string("headerName").map_err(invalid)?.unwrap_or_else(|| "Idempotency-Key".into());
    if header_name.is_empty() || header_name.len() > 64 || !header_name.bytes().all(is_token_byte) {
        return Err(invalid("headerName must be an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)"));
    }
    let header_form = match root.string("headerForm").map_err(invalid)?.as_deref() {
        None | Some("raw") => KeyHeaderForm::Raw,
        Some("sf-string") => KeyHeaderForm::SfString,
        Some(other) => return Err(invalid(format!("headerForm must be \"raw\" or \"sf-string\", got \"{other}\""))),
    };
    let key_ttl_ms = integer(&root, "keyTtlMs", DEFAULT_KEY_TTL_MS, 1, MAX_DURATION_MS)?;
    Ok(ClientConfig {
        namespace,
        storage,
        policy,
        key_ttl_ms,
        header_name,
        header_form,
        retry_budget: integer(&root, "retryBudget", crate::legacy::budget::DEFAULT_CAPACITY.into(), 0, 1_000_000)?
            as u32,
        persist_request: root.boolean("persistRequest").map_err(invalid)?.unwrap_or(false),
        should_retry: root.function("shouldRetry").map_err(invalid)?,
    })
}

/// localStorage in a window; IndexedDB in a worker (no Web Storage there); memory in Node.
fn default_storage() -> StorageKind {
    if super::js::global_property("localStorage").is_some() || super::js::global_property("window").is_some() {
        StorageKind::Local
    } else if super::js::global_property("indexedDB").is_some() {
        StorageKind::IndexedDb
    } else {
        StorageKind::Memory
    }
}

fn invalid(message: impl Into<String>) -> JsValue {
    js_error(ErrorCode::InvalidOptions, message)
}

/// A non-negative whole number of milliseconds, at most [`MAX_DURATION_MS`].
fn duration(fields: &Fields<'_>, name: &str, default: u64) -> Result<u64, JsValue> {
    integer(fields, name, default, 0, MAX_DURATION_MS)
}

/// A finite whole number in `[min, max]`; the message names the field and the rule broken.
fn integer(fields: &Fields<'_>, name: &str, default: u64, min: u64, max: u64) -> Result<u64, JsValue> {
    let Some(value) = fields.number(name).map_err(invalid)? else { return Ok(default) };
    let field = fields.path_of(name);
    let shown = js_number_text(value);
    if !value.is_finite() {
        return Err(invalid(format!("{field} must be a finite number, got {shown}")));
    }
    if value.fract() != 0.0 {
        return Err(invalid(format!("{field} must be a whole number, got {shown}")));
    }
    if value < min as f64 || value > max as f64 {
        return Err(invalid(format!("{field} must be between {min} and {max}, got {shown}")));
    }
    Ok(value as u64)
}

/// RFC 9110 `tchar`.
pub fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}
