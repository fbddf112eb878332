//! `IdempotentFetchError`: a JavaScript `Error` with a stable `code`, built from the core's errors.

use js_sys::{Error, Reflect};
use wasm_bindgen::prelude::*;

use crate::legacy::{ErrorCode, SendError};

/// The `name` every error from this library carries.
pub const ERROR_NAME: &str = "IdempotentFetchError";

/// Turns a core error into an `Error` with `name`, `code`, `key`, `attempts`, `lastStatus` and
/// `reason` properties (see the TypeScript type `IdempotentFetchError`).
pub fn to_js_error(error: &SendError) -> JsValue {
    let js_error = Error::new(&error.message);
    js_error.set_name(ERROR_NAME);
    let object: &JsValue = js_error.as_ref();
    set(object, "code", &JsValue::from_str(error.code.as_str()));
    set(object, "key", &error.key.as_deref().map_or(JsValue::NULL, JsValue::from_str));
    set(object, "attempts", &JsValue::from(error.attempts));
    set(object, "lastStatus", &error.last_status.map_or(JsValue::NULL, JsValue::from));
    set(object, "reason", &error.exhausted.map_or(JsValue::NULL, |r| JsValue::from_str(r.as_str())));
    js_error.into()
}

/// An error with only a code and a message.
pub fn js_error(code: ErrorCode, message: impl Into<String>) -> JsValue {
    to_js_error(&SendError::new(code, message))
}

/// Sets a property; setting a property on a fresh `Error` cannot fail, and if it did the error
/// would still be thrown, only without that detail.
fn set(target: &JsValue, name: &str, value: &JsValue) {
    let _ = Reflect::set(target, &JsValue::from_str(name), value);
}

/// `true` when `value` is an error thrown by this library (`name === "IdempotentFetchError"`).
#[wasm_bindgen(js_name = isIdempotentFetchError, skip_typescript)]
pub fn is_idempotent_fetch_error(value: &JsValue) -> bool {
    Reflect::get(value, &JsValue::from_str("name"))
        .ok()
        .and_then(|name| name.as_string())
        .is_some_and(|name| name == ERROR_NAME)
}

/// Describes whatever JavaScript threw, for messages.
pub fn describe_js(value: &JsValue) -> String {
    if let Some(error) = value.dyn_ref::<Error>() {
        return String::from(error.message());
    }
    value.as_string().unwrap_or_else(|| "unknown JavaScript error".into())
}

/// The `name` of a thrown `DOMException`/`Error` (`"QuotaExceededError"`, `"SecurityError"`, ...).
pub fn js_error_name(value: &JsValue) -> Option<String> {
    Reflect::get(value, &JsValue::from_str("name")).ok()?.as_string()
}
