//! The sans-IO machine: every decision and rule of idempotent-fetch, and no I/O.
//!
//! The model is matrix-sdk-crypto's `OlmMachine`, quinn-proto and rustls's unbuffered API: the
//! machine never awaits, never fetches, never touches storage, timers, locks or events. The driver
//! (TypeScript, `src/js/`) feeds it events with the current time and performs the actions it
//! returns; `crate::wasm` exports it to JavaScript (docs/WASM-BOUNDARY.md). The native tests drive
//! it directly with a virtual clock and a fake random source.

pub mod backoff;
pub mod budget;
pub mod classify;
pub mod engine;
pub mod error;
mod fields;
pub mod fingerprint;
pub mod key;
pub mod policy;
pub mod random;
pub mod reconcile;
pub mod record;
pub mod retry_after;
pub mod send;
mod shared;

pub use backoff::Backoff;
pub use budget::RetryBudget;
pub use classify::{classify, Answer, Classification, FailureReason, Override, RetryReason};
pub use engine::{Engine, Sweep};
pub use error::{code, Error};
pub use key::Key;
pub use policy::{Jitter, Policy};
#[cfg(not(target_arch = "wasm32"))]
pub use random::OsRandom;
pub use random::{RandomFailed, RandomSource};
pub use reconcile::KeyStatus;
pub use record::{Record, State, StoredFields};
pub use send::{Action, Machine};
