//! The pure retry core: everything that decides *what* to do, nothing that talks to JavaScript.
//!
//! The core is plain Rust over small traits ([`ports`]) for the transport, the intent store, the clock,
//! sleeping, randomness and connectivity. The browser adapters live in `crate::web`; the native tests
//! drive the same code with a fake transport and a virtual clock.

pub mod backoff;
pub mod budget;
pub mod classify;
pub mod engine;
pub mod error;
pub mod fingerprint;
pub mod intent;
pub mod key;
pub mod memory;
pub mod policy;
pub mod ports;
pub mod retry_after;

pub use backoff::{Backoff, Jitter};
pub use budget::RetryBudget;
pub use classify::{classify, Classification, FailureReason, RetryReason, ShouldRetryOverride};
pub use engine::{begin, send, sweep, sweep_reporting, BeginOptions, Definite, KeyHeaderForm, SendContext};
pub use error::{ErrorCode, ExhaustedReason, SendError};
pub use fingerprint::Fingerprint;
pub use intent::{IntentRecord, IntentState, RecordError};
pub use key::IdempotencyKey;
pub use memory::MemoryStore;
pub use policy::RetryPolicy;
