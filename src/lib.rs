//! idempotent-fetch: state-changing fetches that are safe to retry.
//!
//! One idempotency key per user intent, kept in browser storage across reloads, sent in an
//! `Idempotency-Key` header and re-sent with capped exponential backoff and full jitter until the
//! server gives a definite answer. Every decision is made by the sans-IO [`machine`] (pure Rust,
//! tested natively); `wasm` (built for wasm32 only) exports it to the TypeScript driver, which does the I/O.
#![cfg_attr(all(target_arch = "wasm32", not(feature = "std")), no_std)]
#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

extern crate alloc;

pub mod machine;
#[cfg(target_arch = "wasm32")]
pub mod wasm;

// The shipped wasm is `no_std`: talc instead of dlmalloc, and a panic handler that only traps
// (std's would pull in core::fmt). A panic is a bug: every input from JavaScript is validated.
#[cfg(all(target_arch = "wasm32", not(feature = "std")))]
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

#[cfg(all(target_arch = "wasm32", not(feature = "std")))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    core::arch::wasm32::unreachable()
}
