//! Small helpers for reaching JavaScript globals that exist in windows, workers and Node alike.

use js_sys::{Function, Object, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

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

/// `value instanceof globalThis[class_name]`, false when the class does not exist here.
pub fn is_instance_of(value: &JsValue, class_name: &str) -> bool {
    match global_property(class_name).and_then(|c| c.dyn_into::<Function>().ok()) {
        Some(class) => value.is_object() && value.unchecked_ref::<Object>().is_instance_of_function(&class),
        None => false,
    }
}

/// A small extension so `Object::is_instance_of_function` reads naturally.
trait InstanceOf {
    fn is_instance_of_function(&self, class: &Function) -> bool;
}

impl InstanceOf for Object {
    fn is_instance_of_function(&self, class: &Function) -> bool {
        let prototype = match Reflect::get(class, &JsValue::from_str("prototype")) {
            Ok(p) if p.is_object() => p,
            _ => return false,
        };
        let mut current = Object::get_prototype_of(self);
        while !current.is_null() && !current.is_undefined() {
            if JsValue::from(current.clone()) == prototype {
                return true;
            }
            current = Object::get_prototype_of(&current);
        }
        false
    }
}
