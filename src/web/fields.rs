//! Strict readers for fields of JavaScript objects: the type is checked and a wrong one is reported
//! with the field's path (`retry.maxAttempts must be a number, got string`).
//!
//! Hand-written on purpose instead of serde: serde plus serde-wasm-bindgen cost more wasm than
//! everything here, and the browser already parses JSON.

use js_sys::{Object, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// Why a field is unusable: `(path, problem)` turned into a message by the caller.
pub type FieldError = String;

/// A view of one object, with the path prefix used in messages (`""` or `"retry."`).
pub struct Fields<'a> {
    object: &'a JsValue,
    path: &'a str,
}

impl<'a> Fields<'a> {
    /// Reads `object`, which must be a plain object (not null, not an array).
    pub fn of(object: &'a JsValue, path: &'a str, what: &str) -> Result<Self, FieldError> {
        if !object.is_object() || js_sys::Array::is_array(object) {
            return Err(format!("{what} must be an object, got {}", type_name(object)));
        }
        Ok(Self { object, path })
    }

    /// Rejects any field not in `allowed` (a typo such as `maxAttemps` must not pass silently).
    pub fn only(&self, allowed: &[&str]) -> Result<(), FieldError> {
        for name in Object::keys(self.object.unchecked_ref::<Object>()).iter() {
            let name = name.as_string().unwrap_or_default();
            if !allowed.contains(&name.as_str()) {
                return Err(format!("unknown field {}{name} (expected one of: {})", self.path, allowed.join(", ")));
            }
        }
        Ok(())
    }

    /// The raw value; `None` for `undefined` (absent). A throwing getter is an error.
    pub fn value(&self, name: &str) -> Result<Option<JsValue>, FieldError> {
        let value = Reflect::get(self.object, &JsValue::from_str(name))
            .map_err(|_| format!("{}{name} cannot be read", self.path))?;
        Ok((!value.is_undefined()).then_some(value))
    }

    /// A number (any, including NaN: range checks are the caller's).
    pub fn number(&self, name: &str) -> Result<Option<f64>, FieldError> {
        match self.value(name)? {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| self.wrong(name, "a number", &v)),
        }
    }

    /// A string.
    pub fn string(&self, name: &str) -> Result<Option<String>, FieldError> {
        match self.value(name)? {
            None => Ok(None),
            Some(v) => v.as_string().map(Some).ok_or_else(|| self.wrong(name, "a string", &v)),
        }
    }

    /// A boolean.
    pub fn boolean(&self, name: &str) -> Result<Option<bool>, FieldError> {
        match self.value(name)? {
            None => Ok(None),
            Some(v) => v.as_bool().map(Some).ok_or_else(|| self.wrong(name, "a boolean", &v)),
        }
    }

    /// A function.
    pub fn function(&self, name: &str) -> Result<Option<js_sys::Function>, FieldError> {
        match self.value(name)? {
            None => Ok(None),
            Some(v) => v.clone().dyn_into().map(Some).map_err(|_| self.wrong(name, "a function", &v)),
        }
    }

    /// The full path of a field, for messages.
    pub fn path_of(&self, name: &str) -> String {
        format!("{}{name}", self.path)
    }

    fn wrong(&self, name: &str, expected: &str, got: &JsValue) -> FieldError {
        format!("{}{name} must be {expected}, got {}", self.path, type_name(got))
    }
}

/// `typeof value`, with `null` and arrays named as such.
pub fn type_name(value: &JsValue) -> String {
    if value.is_null() {
        return "null".into();
    }
    if js_sys::Array::is_array(value) {
        return "array".into();
    }
    value.js_typeof().as_string().unwrap_or_else(|| "unknown".into())
}

/// A number as JavaScript prints it (`NaN`, `Infinity`, `1.5`), without Rust's float formatting
/// (which would add kilobytes to the wasm).
pub fn js_number_text(value: f64) -> String {
    String::from(js_sys::Number::from(value).to_string_with_radix(10).unwrap_or_else(|_| js_sys::JsString::from("?")))
}
