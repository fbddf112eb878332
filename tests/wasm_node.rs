//! The machine's exports in Node (`wasm-pack test --node --no-default-features`): the shared cases
//! of `wasm/support.rs`, plus what is particular to Node.
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
#[wasm_bindgen_test]
fn runs_in_node() {
    let global = js_sys::global();
    let process = js_sys::Reflect::get(&global, &"process".into()).expect("read process");
    assert!(process.is_object(), "this suite must run in Node");
    let window = js_sys::Reflect::get(&global, &"window".into()).expect("read window");
    assert!(window.is_undefined());
}
