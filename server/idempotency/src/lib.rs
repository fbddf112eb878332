//! The server half of the Idempotency-Key protocol, for your own endpoints.
//!
//! A client (such as the [idempotent-fetch] browser package) sends one `Idempotency-Key` per user intent and
//! re-sends the same request with the same key until it gets a definite answer. This crate makes an endpoint
//! honour that:
//!
//! - the protocol without I/O: [`IdempotencyKey`] (raw and IETF sf-string forms), the request
//!   [`fingerprint()`], the [`Outcome`] for a stored row (fresh, replay with `Idempotent-Replayed: true`, 422
//!   for another request, 409 with `Retry-After` in flight), [`StoredResponse`], retention;
//! - **the key row and your business change in one transaction**: [`sqlite::SqliteKeys::run`] (rusqlite)
//!   and [`postgres::run`] (tokio-postgres) hand your work the open transaction and commit its answer on the
//!   key row in the same commit, so a crash leaves either both or neither;
//! - work that leaves the database: the transactional [`outbox`] and its delivery [`outbox::Worker`], and
//!   atomic [`phases`] (named recovery points on the key row under a lease, a derived downstream key per
//!   external call, take-over of keys a crash left and a completer's query; SQLite and PostgreSQL);
//! - **the [`inbox`]**, the receiving half of the outbox: [`inbox::receive_sqlite`] and
//!   [`inbox::receive_postgres`] record a delivered message's id in the receiver's own transaction with the
//!   work it does, so a re-delivery does nothing and gets the first delivery's answer ([`inbox::Received`]);
//!   [`inbox::SqliteInbox`] is the same from async code; records expire with a retention and a sweep;
//! - **key status and the fence**, for a client whose answers were all lost: [`sqlite::SqliteKeys::status`] and
//!   [`postgres::status`] answer the [`KeyStatus`] of a key (`done` with its stored answer, `in_flight` from
//!   the moment its request is accepted until its work has committed or rolled back, whoever hung up,
//!   `fenced`, `unknown`); [`sqlite::SqliteKeys::settle`] and [`postgres::settle`] settle it: a key never seen
//!   gets a fence row, and a request that arrives with it later is answered [`Outcome::Fenced`] (410
//!   `key-fenced`) and does no work. `status_response` / `settle_response` (and [`status::respond`] for
//!   another store) are the whole `GET` / `POST` answer of the contract in server/README.md, "Key status";
//! - the retention sweep (fences expire with it like any key row);
//! - axum: the [`Idempotent`] extractor (and [`BoundedBody`] for an endpoint without a key), each reading
//!   the body within a [`BodyDeadline`], and [`Outcome`], [`Problem`] and [`RunError`] are responses;
//!   [`serve::serve`] (feature `serve`, on by default) serves a router with a deadline on every request head.
//!
//! ```no_run
//! use axum::{http::StatusCode, routing::post, Router};
//! use idempotent_endpoint::{outbox, sqlite::SqliteKeys, Idempotent, Outcome, Problem, RunError, StoredResponse};
//!
//! #[derive(serde::Deserialize)]
//! struct Invite { email: String }
//!
//! async fn invite(
//!     axum::extract::State(keys): axum::extract::State<SqliteKeys>,
//!     request: Idempotent,
//! ) -> Result<Outcome, RunError<Problem>> {
//!     let invite: Invite = request.json().map_err(RunError::Work)?;
//!     keys.run(request.scoped("public"), move |tx| {
//!         let internal = |e: idempotent_endpoint::StoreError| { tracing::error!(%e); Problem::internal() };
//!         tx.execute("INSERT INTO invites (email) VALUES (?1)", [&invite.email])
//!             .map_err(|e| internal(e.into()))?;
//!         let mail = outbox::Message::new("invite-email", &serde_json::json!({ "to": invite.email }))
//!             .map_err(internal)?;
//!         outbox::enqueue_sqlite(tx, &mail).map_err(internal)?;
//!         Ok(StoredResponse::json(StatusCode::CREATED, &serde_json::json!({ "email": invite.email })))
//!     })
//!     .await
//! }
//!
//! // Key status (GET) and the fence (POST) for the same keys.
//! async fn key_status(
//!     axum::extract::State(keys): axum::extract::State<SqliteKeys>,
//!     axum::extract::Path(raw): axum::extract::Path<String>,
//! ) -> axum::response::Response {
//!     keys.status_response("public".to_owned(), &raw).await
//! }
//! async fn settle(
//!     axum::extract::State(keys): axum::extract::State<SqliteKeys>,
//!     axum::extract::Path(raw): axum::extract::Path<String>,
//! ) -> axum::response::Response {
//!     keys.settle_response("public".to_owned(), &raw).await
//! }
//!
//! fn app(keys: SqliteKeys) -> Router {
//!     Router::new()
//!         .route("/invites", post(invite))
//!         .route("/idempotency-keys/{key}", axum::routing::get(key_status).post(settle))
//!         .with_state(keys)
//! }
//! ```
//!
//! Feature `runtime` (on by default, and implied by `sqlite` and `postgres`) is everything with I/O: axum, tokio,
//! the stores, the outbox, inbox and phases. Without it the crate is the protocol layer alone (with the phases'
//! decisions: the downstream key, the take-over of a row, the points `advance` may reach), which compiles to
//! `wasm32-unknown-unknown`: the Node half (server/node) runs these very decisions, and the PostgreSQL
//! statements of [`postgres_sql`], from that build.
//!
//! The modules form layers, lowest first; a module names only modules of its own layer or a lower one, and
//! no modules name each other in a cycle (`tests/layers.rs` reads every path in the source and checks it
//! against this table):
//!
//! | layer | modules |
//! |---|---|
//! | protocol (no I/O) | [`defaults`], [`problem`], [`error`], [`key`], [`fingerprint`](mod@fingerprint), [`response`], [`outcome`], [`status`], [`retention`], [`postgres_sql`], [`outbox_sql`], [`inbox_sql`], [`phases_sql`], [`retry_schedule`], [`traceparent`], `random` |
//! | runtime | [`request`] (the axum extractor), [`periodic`] (the loop of every background task), [`serve`] (the HTTP server loop), [`trace_context`] (the trace context a message carries) |
//! | store | [`inflight`], `sqlite_columns`, [`outbox_table`], [`sqlite`], [`postgres`] |
//! | work | [`outbox`], [`inbox`], [`phases`], `phases::sqlite`, [`phases::postgres`] |
//!
//! [idempotent-fetch]: https://github.com/idempotent-fetch/idempotent-fetch
#![deny(missing_docs)]

pub mod defaults;
pub mod error;
pub mod fingerprint;
#[cfg(feature = "runtime")]
pub mod inbox;
pub mod inbox_sql;
#[cfg(feature = "sqlite")]
pub mod inflight;
pub mod key;
#[cfg(feature = "runtime")]
pub mod outbox;
pub mod outbox_sql;
#[cfg(feature = "runtime")]
pub mod outbox_table;
pub mod outcome;
#[cfg(feature = "runtime")]
pub mod periodic;
pub mod phases;
pub mod phases_sql;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod postgres_sql;
pub mod problem;
#[cfg(feature = "runtime")]
mod random;
#[cfg(feature = "runtime")]
pub mod request;
pub mod response;
pub mod retention;
pub mod retry_schedule;
#[cfg(feature = "serve")]
pub mod serve;
#[cfg(feature = "sqlite")]
pub mod sqlite;
#[cfg(feature = "sqlite")]
mod sqlite_columns;
pub mod status;
#[cfg(feature = "runtime")]
pub mod trace_context;
pub mod traceparent;

pub use error::{RunError, StoreError};
pub use fingerprint::{fingerprint, key_hash};
pub use key::{IdempotencyKey, KeyError, IDEMPOTENCY_KEY_HEADER};
pub use outcome::{Outcome, FENCED_FINGERPRINT, IN_FLIGHT_RETRY_AFTER_SECS};
pub use problem::Problem;
#[cfg(feature = "runtime")]
pub use request::{BodyDeadline, BoundedBody, Idempotent, KeyedRequest};
pub use response::{StoredResponse, MAX_STORED_BODY_BYTES, REPLAYED_HEADER};
pub use retention::{expired_before, DEFAULT_RETENTION};
pub use status::{KeyStatus, Replay};
