//! The machine's exports in headless Chromium (`wasm-pack test --headless --chrome
//! --no-default-features`): the shared cases of `wasm/support.rs`, plus what is particular to a page.
// The crate as it ships: `no_std` with its allocator and exports (no harness of the standard library:
// `harness = false` in Cargo.toml, wasm-bindgen-test without std brings the panic handler).
#![cfg_attr(target_arch = "wasm32", no_std, no_main)]

#[cfg(target_arch = "wasm32")]
extern crate alloc;

/// Natively there is nothing to run (the machine's rules are tests/core_*.rs).
#[cfg(not(target_arch = "wasm32"))]
fn main() {}

#[cfg(target_arch = "wasm32")]
#[path = "wasm/support.rs"]
mod support;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::*;

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test_configure!(run_in_browser);

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen_test]
fn runs_in_a_page_with_web_crypto() {
    let global = js_sys::global();
    let window = js_sys::Reflect::get(&global, &"window".into()).expect("read window");
    assert!(window.is_object(), "this suite must run in a browser page");
    let crypto = js_sys::Reflect::get(&global, &"crypto".into()).expect("read crypto");
    assert!(crypto.is_object(), "getrandom's JS backend needs crypto.getRandomValues");
}
