//! The machine's exports in headless Chromium (`wasm-pack test --headless --chrome
//! --no-default-features`): the shared cases of `wasm/support.rs`, plus what is particular to a page.
#![cfg(target_arch = "wasm32")]

#[path = "wasm/support.rs"]
mod support;

use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
fn runs_in_a_page_with_web_crypto() {
    let global = js_sys::global();
    let window = js_sys::Reflect::get(&global, &"window".into()).expect("read window");
    assert!(window.is_object(), "this suite must run in a browser page");
    let crypto = js_sys::Reflect::get(&global, &"crypto".into()).expect("read crypto");
    assert!(crypto.is_object(), "getrandom's JS backend needs crypto.getRandomValues");
}
