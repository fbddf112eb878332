//! idempotent-fetch: state-changing fetches that are safe to retry.
//!
//! One idempotency key per user intent, kept in browser storage across reloads, sent in an
//! `Idempotency-Key` header and re-sent with capped exponential backoff and full jitter until the
//! server gives a definite answer. Every decision is made by the sans-IO [`machine`] (pure Rust,
//! tested natively); `wasm` (built for wasm32 only) exports it to the TypeScript driver, which does the I/O.
#![cfg_attr(target_arch = "wasm32", no_std)]
#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

extern crate alloc;

pub mod contract;
pub mod machine;
#[cfg(all(target_arch = "wasm32", not(feature = "embedded")))]
pub mod wasm;

// The wasm is `no_std` (shipped and tested alike): lol_alloc's free list instead of dlmalloc, and a panic
// handler that only traps (std's would pull in core::fmt). A panic is a bug: every input from JavaScript is validated.
// Not with the feature `embedded`: the module the crate is linked into brings its own.
#[cfg(all(target_arch = "wasm32", not(feature = "embedded")))]
#[global_allocator]
// SAFETY: wasm32-unknown-unknown without the atomics feature has one thread.
static ALLOCATOR: Allocator =
    Allocator(unsafe { lol_alloc::AssumeSingleThreaded::new(lol_alloc::FreeListAllocator::new()) });

/// The allocator, its two calls kept out of line.
#[cfg(all(target_arch = "wasm32", not(feature = "embedded")))]
struct Allocator(lol_alloc::AssumeSingleThreaded<lol_alloc::FreeListAllocator>);

// SAFETY: forwards to the inner `GlobalAlloc`, whose contract is the same; `realloc` is the trait's
// default, built on these two.
#[cfg(all(target_arch = "wasm32", not(feature = "embedded")))]
unsafe impl core::alloc::GlobalAlloc for Allocator {
    #[inline(never)]
    unsafe fn alloc(&self, layout: core::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, passed on unchanged.
        unsafe { self.0.alloc(layout) }
    }

    #[inline(never)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: core::alloc::Layout) {
        // SAFETY: `ptr` came from `alloc` above with `layout`: the caller's contract.
        unsafe { self.0.dealloc(ptr, layout) }
    }
}

// Not with the feature `harness`: the wasm-bindgen-test runtime brings its own, which reports the message.
#[cfg(all(target_arch = "wasm32", not(feature = "harness"), not(feature = "embedded")))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    core::arch::wasm32::unreachable()
}
