//! Small helpers for reaching JavaScript globals that exist in windows, workers and Node alike.

use js_sys::{Object, Reflect};
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    /// The global `fetch` (bound rather than `window.fetch`, so workers and Node work too).
    #[wasm_bindgen(js_name = fetch, catch)]
    pub fn global_fetch(input: &web_sys::Request) -> Result<js_sys::Promise, JsValue>;
}

/// `globalThis[name]`, or `None` when absent or when reading it throws.
pub fn global_property(name: &str) -> Option<JsValue> {
    let value = Reflect::get(&js_sys::global(), &JsValue::from_str(name)).ok()?;
    (!value.is_undefined() && !value.is_null()).then_some(value)
}

/// `object[name]`, treating `undefined`, `null` and a throwing getter as absent.
pub fn property(object: &JsValue, name: &str) -> Option<JsValue> {
    if !object.is_object() && !object.is_function() {
        return None;
    }
    let value = Reflect::get(object, &JsValue::from_str(name)).ok()?;
    (!value.is_undefined() && !value.is_null()).then_some(value)
}

/// A new plain object.
pub fn object() -> Object {
    Object::new()
}

/// `target[name] = value`, ignoring failure (only used on fresh plain objects).
pub fn set(target: &JsValue, name: &str, value: impl Into<JsValue>) {
    let _ = Reflect::set(target, &JsValue::from_str(name), &value.into());
}
