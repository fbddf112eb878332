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
static ALLOCATOR: Allocator = Allocator(talc::wasm::new_wasm_dynamic_allocator());

/// talc, without its in-place `realloc`: the trait's default (allocate, copy, free) is enough for a
/// machine that reallocates only when a string crosses the boundary, and talc's own is 0.6 KB of
/// wasm (docs/WASM-BOUNDARY.md, "Size").
#[cfg(all(target_arch = "wasm32", not(feature = "std")))]
struct Allocator(talc::wasm::WasmDynamicTalc);

// SAFETY: forwards to talc's `GlobalAlloc`, whose contract is the same; `realloc` is the trait's
// default, built on these two.
#[cfg(all(target_arch = "wasm32", not(feature = "std")))]
unsafe impl core::alloc::GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: core::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, passed on unchanged.
        unsafe { self.0.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: core::alloc::Layout) {
        // SAFETY: `ptr` came from `alloc` above (i.e. from talc) with `layout`: the caller's contract.
        unsafe { self.0.dealloc(ptr, layout) }
    }
}

#[cfg(all(target_arch = "wasm32", not(feature = "std")))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    core::arch::wasm32::unreachable()
}
