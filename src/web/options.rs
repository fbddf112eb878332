//! Client options from JavaScript: parsed strictly (unknown fields, wrong types, NaN, negatives and
//! absurd values are `INVALID_OPTIONS` naming the field) and defaulted in one place
//! ([`crate::core::RetryPolicy`]'s `# Default` table).

use js_sys::{Function, Object, Reflect};
use serde::Deserialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::core::engine::KeyHeaderForm;
use crate::core::policy::{DEFAULT_KEY_TTL_MS, MAX_ATTEMPTS_LIMIT, MAX_DURATION_MS};
use crate::core::{ErrorCode, Jitter, RetryPolicy};

use super::errors::js_error;

/// Where intents are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageKind {
    /// `localStorage` (default in a window): survives reloads, shared by tabs.
    Local,
    /// `sessionStorage`: survives reloads of this tab only.
    Session,
    /// In memory: lost on reload (Node's default, and the fallback).
    Memory,
}

impl StorageKind {
    /// The JavaScript spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Session => "session",
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

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawOptions {
    namespace: Option<String>,
    storage: Option<String>,
    retry: Option<RawRetry>,
    key_ttl_ms: Option<f64>,
    header_name: Option<String>,
    header_form: Option<String>,
    retry_budget: Option<f64>,
    persist_request: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawRetry {
    max_attempts: Option<f64>,
    base_delay_ms: Option<f64>,
    max_delay_ms: Option<f64>,
    total_timeout_ms: Option<f64>,
    attempt_timeout_ms: Option<f64>,
    max_retry_after_ms: Option<f64>,
    jitter: Option<String>,
}

const ROOT_FIELDS: &[&str] =
    &["namespace", "storage", "retry", "keyTtlMs", "headerName", "headerForm", "retryBudget", "persistRequest", "shouldRetry"];
const RETRY_FIELDS: &[&str] =
    &["maxAttempts", "baseDelayMs", "maxDelayMs", "totalTimeoutMs", "attemptTimeoutMs", "maxRetryAfterMs", "jitter"];

/// Rejects fields not in `allowed` (serde-wasm-bindgen only looks up known fields, so
/// `deny_unknown_fields` alone would let a typo such as `maxAttemps` pass silently).
pub fn reject_unknown_fields(value: &JsValue, path: &str, allowed: &[&str]) -> Result<(), JsValue> {
    if !value.is_object() {
        return Ok(()); // the type error is reported by serde with the field's path
    }
    for name in Object::keys(value.unchecked_ref::<Object>()).iter() {
        let name = name.as_string().unwrap_or_default();
        if !allowed.contains(&name.as_str()) {
            return Err(invalid(format!("unknown option {path}{name} (expected one of: {})", allowed.join(", "))));
        }
    }
    Ok(())
}

/// Parses `new IdempotentClient(options)`'s argument.
pub fn parse_client_options(value: &JsValue) -> Result<ClientConfig, JsValue> {
    let (data, should_retry) = split_functions(value, "shouldRetry")?;
    reject_unknown_fields(&data, "", ROOT_FIELDS)?;
    if let Some(retry) = super::js::property(&data, "retry") {
        reject_unknown_fields(&retry, "retry.", RETRY_FIELDS)?;
    }
    let raw: RawOptions = deserialize_strict(&data, "options")?;
    let retry = raw.retry.unwrap_or_default();
    let defaults = RetryPolicy::default();
    let policy = RetryPolicy {
        max_attempts: integer("retry.maxAttempts", retry.max_attempts, defaults.max_attempts.into(), 1, MAX_ATTEMPTS_LIMIT.into())? as u32,
        base_delay_ms: duration("retry.baseDelayMs", retry.base_delay_ms, defaults.base_delay_ms)?,
        max_delay_ms: duration("retry.maxDelayMs", retry.max_delay_ms, defaults.max_delay_ms)?,
        total_timeout_ms: duration("retry.totalTimeoutMs", retry.total_timeout_ms, defaults.total_timeout_ms)?,
        attempt_timeout_ms: duration("retry.attemptTimeoutMs", retry.attempt_timeout_ms, defaults.attempt_timeout_ms)?,
        max_retry_after_ms: duration("retry.maxRetryAfterMs", retry.max_retry_after_ms, defaults.max_retry_after_ms)?,
        jitter: match retry.jitter.as_deref() {
            None => defaults.jitter,
            Some(text) => Jitter::parse(text).ok_or_else(|| {
                invalid(format!("retry.jitter must be \"full\", \"equal\", \"decorrelated\" or \"none\", got {text:?}"))
            })?,
        },
    };
    policy.validate().map_err(invalid)?;
    let namespace = raw.namespace.unwrap_or_else(|| "default".into());
    if namespace.is_empty() || namespace.len() > 128 || namespace.chars().any(|c| c.is_control() || c == ':') {
        return Err(invalid("namespace must be 1 to 128 characters, without ':' or control characters"));
    }
    let storage = match raw.storage.as_deref() {
        None => default_storage(),
        Some("local") => StorageKind::Local,
        Some("session") => StorageKind::Session,
        Some("memory") => StorageKind::Memory,
        Some(other) => return Err(invalid(format!("storage must be \"local\", \"session\" or \"memory\", got {other:?}"))),
    };
    let header_name = raw.header_name.unwrap_or_else(|| "Idempotency-Key".into());
    if header_name.is_empty() || header_name.len() > 64 || !header_name.bytes().all(is_token_byte) {
        return Err(invalid("headerName must be an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)"));
    }
    let header_form = match raw.header_form.as_deref() {
        None | Some("raw") => KeyHeaderForm::Raw,
        Some("sf-string") => KeyHeaderForm::SfString,
        Some(other) => return Err(invalid(format!("headerForm must be \"raw\" or \"sf-string\", got {other:?}"))),
    };
    Ok(ClientConfig {
        namespace,
        storage,
        policy,
        key_ttl_ms: match raw.key_ttl_ms {
            None => DEFAULT_KEY_TTL_MS,
            Some(_) => {
                let ttl = duration("keyTtlMs", raw.key_ttl_ms, DEFAULT_KEY_TTL_MS)?;
                if ttl == 0 {
                    return Err(invalid("keyTtlMs must be greater than 0"));
                }
                ttl
            }
        },
        header_name,
        header_form,
        retry_budget: integer("retryBudget", raw.retry_budget, crate::core::budget::DEFAULT_CAPACITY.into(), 0, 1_000_000)? as u32,
        persist_request: raw.persist_request.unwrap_or(false),
        should_retry,
    })
}

/// localStorage in a window; memory where there is none (Node, workers).
fn default_storage() -> StorageKind {
    if super::js::global_property("localStorage").is_some() || super::js::global_property("window").is_some() {
        StorageKind::Local
    } else {
        StorageKind::Memory
    }
}

/// Copies a plain options object without the function-valued field `function_field` (serde cannot
/// read functions), returning that function separately. `undefined`/`null` mean "no options".
pub fn split_functions(value: &JsValue, function_field: &str) -> Result<(JsValue, Option<Function>), JsValue> {
    if value.is_undefined() || value.is_null() {
        return Ok((Object::new().into(), None));
    }
    if !value.is_object() || js_sys::Array::is_array(value) {
        return Err(invalid("options must be an object"));
    }
    let copy = Object::assign(&Object::new(), value.unchecked_ref::<Object>());
    let name = JsValue::from_str(function_field);
    let function = match Reflect::get(&copy, &name) {
        Ok(f) if f.is_undefined() => None,
        Ok(f) => match f.dyn_into::<Function>() {
            Ok(f) => Some(f),
            Err(_) => return Err(invalid(format!("{function_field} must be a function"))),
        },
        Err(_) => None,
    };
    let _ = Reflect::delete_property(&copy, &name);
    Ok((copy.into(), function))
}

/// serde over a JS value, with the path of the bad field in the message.
pub fn deserialize_strict<T: serde::de::DeserializeOwned>(value: &JsValue, what: &str) -> Result<T, JsValue> {
    let deserializer = serde_wasm_bindgen::Deserializer::from(value.clone());
    serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let path = error.path().to_string();
        let field = if path == "." { what.to_owned() } else { path };
        let inner = error.inner().to_string();
        let inner = inner.strip_prefix("Error: ").unwrap_or(&inner).replace("expected f64", "expected a number");
        invalid(format!("invalid {field}: {inner}"))
    })
}

fn invalid(message: impl Into<String>) -> JsValue {
    js_error(ErrorCode::InvalidOptions, message)
}

/// A non-negative whole number of milliseconds, at most [`MAX_DURATION_MS`].
fn duration(field: &str, value: Option<f64>, default: u64) -> Result<u64, JsValue> {
    integer(field, value, default, 0, MAX_DURATION_MS)
}

/// A finite whole number in `[min, max]`; the message names the field and the rule broken.
fn integer(field: &str, value: Option<f64>, default: u64, min: u64, max: u64) -> Result<u64, JsValue> {
    let Some(value) = value else { return Ok(default) };
    if !value.is_finite() {
        return Err(invalid(format!("{field} must be a finite number, got {value}")));
    }
    if value.fract() != 0.0 {
        return Err(invalid(format!("{field} must be a whole number, got {value}")));
    }
    if value < min as f64 || value > max as f64 {
        return Err(invalid(format!("{field} must be between {min} and {max}, got {value}")));
    }
    Ok(value as u64)
}

/// RFC 9110 `tchar`.
pub fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}
