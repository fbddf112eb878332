//! idempotent-fetch: state-changing fetches that are safe to retry.
//!
//! One idempotency key per user intent, kept in browser storage across reloads, sent in an
//! `Idempotency-Key` header and re-sent with capped exponential backoff and full jitter until the
//! server gives a definite answer. The retry logic is in [`core`] (pure Rust, tested natively); the
//! browser adapters and the JavaScript API are compiled only for `wasm32`.
#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

pub mod core;
#[cfg(target_arch = "wasm32")]
mod web;

/// The JavaScript API's classes, also usable from Rust on `wasm32` (the wasm-bindgen-test suites in
/// `tests/wasm_*.rs` drive them directly). Their option and result types are JavaScript objects.
#[cfg(target_arch = "wasm32")]
pub use web::{IdempotentClient, IdempotentOperation};
