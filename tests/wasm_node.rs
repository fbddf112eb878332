//! The machine's exports in Node (`wasm-pack test --node --no-default-features`): the shared cases
//! of `wasm/support.rs`, plus what is particular to Node.
#![cfg(target_arch = "wasm32")]

#[path = "wasm/support.rs"]
mod support;

use wasm_bindgen_test::*;

#[wasm_bindgen_test]
fn runs_in_node() {
    let global = js_sys::global();
    let process = js_sys::Reflect::get(&global, &"process".into()).expect("read process");
    assert!(process.is_object(), "this suite must run in Node");
    let window = js_sys::Reflect::get(&global, &"window".into()).expect("read window");
    assert!(window.is_undefined());
}
