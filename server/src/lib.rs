//! The reference server of [idempotent-fetch]: the server half of the Idempotency-Key protocol.
//!
//! `POST /api/orders` with an `Idempotency-Key` creates an order at most once per `(account, key)`:
//! the key row, the order and the stored response are committed in one transaction, and a retry with the
//! same key replays the stored response byte for byte (`Idempotent-Replayed: true`). The account comes
//! from a signed session. See the README for the endpoints, sessions, limits, fault injection, retention
//! and CORS.
//!
//! Start it in-process (as the tests do) with [`serve`]:
//!
//! ```no_run
//! # async fn demo() -> Result<(), idempotent_fetch_server::ServeError> {
//! use idempotent_fetch_server::{serve, Config};
//! let server = serve(Config::sqlite(":memory:")).await?;
//! println!("listening on {}", server.url());
//! server.shutdown().await?;
//! # Ok(()) }
//! ```
//!
//! With `--provider-url` and `--mail-url` an order charges a payment provider and sends a confirmation, in
//! atomic phases on the key row with a transactional outbox ([`checkout`], [`outbox`],
//! [`store::phases`]); the provider and the mail receiver are binaries of this package too ([`services`]).
//!
//! The protocol itself (keys, fingerprints, decisions, stored answers, problems, key status) is the library
//! [`idempotent_endpoint`]; this crate is a shop on it. Its modules form layers, lowest first, and a module
//! names only modules of its own layer or a lower one, and no modules name each other in a cycle (`tests/layers.rs` reads
//! every path in the source, inline paths and `impl` targets too, and checks it against this table):
//!
//! | layer | modules |
//! |---|---|
//! | util | [`clock`], [`problem`], [`address`], [`telemetry`] (the request's server span) |
//! | domain | [`keys`], [`orders`], [`protocol`], [`session`], [`faults`], [`metrics`] (the counters of GET /metrics) |
//! | store | `store::error`, `store::rows`, `store::legacy` (old databases brought up to date), `store::step` (the protocol step's knobs and outcome, over the library's run), [`store::phases`] (the order flow's recovery points over the library's phases), [`store::sqlite`], [`store::postgres`], [`store`] (the backend enum), [`sweep`] |
//! | flow | [`services`], [`services::provider`], [`services::mailbox`], [`services::traces`] (the demo's OTLP/HTTP trace receiver), [`config`], [`checkout`], [`outbox`], [`error`] |
//! | http | [`limits`], [`state`], [`auth`], [`upload`], [`idempotency`], [`key_status`], [`static_files`], [`routes`], [`scrape`] (GET /metrics on its own address) |
//! | app | [`server`], [`binary`], `otel` (feature `otel`: the OTLP export) |
//!
//! [idempotent-fetch]: https://github.com/idempotent-fetch/idempotent-fetch
#![deny(missing_docs)]

pub mod address;
pub mod auth;
pub mod binary;
pub mod checkout;
pub mod clock;
pub mod config;
pub mod error;
pub mod faults;
pub mod idempotency;
pub mod key_status;
pub mod keys;
pub mod limits;
pub mod metrics;
pub mod orders;
#[cfg(feature = "otel")]
pub mod otel;
pub mod outbox;
pub mod problem;
pub mod protocol;
pub mod routes;
pub mod scrape;
pub mod server;
pub mod services;
pub mod session;
pub mod state;
pub mod static_files;
pub mod store;
pub mod sweep;
pub mod telemetry;
pub mod upload;

pub use clock::unix_now;
pub use config::{Cli, Config, Database, Limits};
pub use error::ServeError;
pub use faults::{FaultConfig, Faults};
pub use server::{open_store, serve, serve_with_store, RunningServer, SHUTDOWN_GRACE};
pub use store::Store;
