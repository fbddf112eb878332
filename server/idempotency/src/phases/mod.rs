//! Work that calls something outside the database (a payment provider, a partner's API) in atomic phases.
//!
//! Such work cannot sit inside one transaction: the call may succeed while the commit fails, or the reverse.
//! Instead the key row carries a **recovery point** (a name the app chooses: `"started"`, `"charged"`, ...)
//! and a **lease**. Each step from one point to the next is one transaction that first checks the caller
//! still holds the lease. Between two steps the app makes its external call with a
//! [`Held::downstream_key`], derived from the key row's own random id, so a call repeated after a crash is
//! the same call to a service that honours idempotency keys, and a key reused after its row expired gets a
//! new one. A request that finds an unfinished row whose lease ran out (its holder crashed) takes it over at
//! its recovery point; `unfinished` lets a background completer do the same without waiting for the client's
//! retry; `finish` stores the answer, replayed from then on; `abandon` deletes a row still at [`STARTED`]
//! (nothing done yet), so the key is new again. On SQLite these are methods of
//! [`crate::sqlite::SqliteKeys`] (`begin`, `advance`, `finish`, `release`, `abandon`, `unfinished`); on PostgreSQL the
//! functions of [`postgres`], over a `tokio_postgres::Client`, running the statements of [`crate::phases_sql`].
//!
//! The decisions ([`downstream_key`], [`existing_row`], [`check_point`]) need no I/O: without feature
//! `runtime` this module is those alone, which the Node half's wasm core runs.
//!
//! ```text
//! begin ──► Held { point: "started" } ──advance──► "charge_started" ── call(downstream_key) ──► advance ──► "charged" ──finish──► answer
//! ```

#[cfg(feature = "runtime")]
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::error::StoreError;
use crate::key::IdempotencyKey;
use crate::outcome::Outcome;
#[cfg(feature = "runtime")]
pub(crate) use crate::random::random_hex;
#[cfg(feature = "runtime")]
use crate::retention::unix_now_ms;

#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

/// The recovery point of a key row `begin` inserts.
pub const STARTED: &str = "started";
/// The recovery point of a row with its answer stored.
pub const FINISHED: &str = "finished";

/// A key row whose lease this caller holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The scope.
    pub scope: String,
    /// The client's key.
    pub key: IdempotencyKey,
    /// Where the work stands: [`STARTED`] or the last point an `advance` reached.
    pub point: String,
    /// The row's own random id (128 bits from the CSPRNG).
    pub row_id: String,
    /// The W3C `traceparent` of the request that claimed the row: the span `begin` was called in (feature
    /// `otel`), kept on the row from its insert; `None` when that span had no valid trace context. A
    /// completer's span continues it ([`completion_span`]), so work finished after a crash joins the trace of
    /// the request that started it.
    pub traceparent: Option<String>,
    pub(crate) token: String,
}

impl Held {
    /// The idempotency key for the external call made at `step`: lowercase hex SHA-256 of the row id and
    /// the step. The same step of the same row always gets the same key (a repeat after a crash is a replay
    /// at the other service); never the client's key, which another service must not see.
    pub fn downstream_key(&self, step: &str) -> String {
        downstream_key(&self.row_id, step)
    }
}

/// The idempotency key for the external call made at `step` by the key row with id `row_id`: lowercase hex
/// SHA-256 of the row id, a newline and the step ([`Held::downstream_key`]).
pub fn downstream_key(row_id: &str, step: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(row_id.as_bytes());
    hasher.update(b"\n");
    hasher.update(step.as_bytes());
    format!("{:x}", hasher.finalize())
}

/// Whether an `advance` may move a row to `point`: any name but [`FINISHED`], which only `finish` reaches
/// (with the answer stored).
pub fn check_point(point: &str) -> Result<(), StoreError> {
    if point == FINISHED {
        return Err(StoreError::Corrupt(format!("{FINISHED:?} is reached with finish, not advance")));
    }
    Ok(())
}

/// What `begin` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begun {
    /// The key is this caller's: new (at [`STARTED`]) or taken over from a holder whose lease ran out.
    Held(Held),
    /// The key needs no work: its answer to replay, a mismatch (422), another holder's live lease (409), or
    /// a fence (410: the key was settled before any request with it arrived).
    Answered(Outcome),
}

/// The `traceparent` a new key row keeps: the current span's, the request that calls `begin` (read before
/// `begin`'s own span is entered), and only a valid W3C value.
#[cfg(feature = "runtime")]
pub(crate) fn claiming_traceparent() -> Option<String> {
    crate::trace_context::current().and_then(|value| crate::traceparent::valid(&value))
}

/// The span of `begin` (`idempotency.phase`, as every step's).
#[cfg(feature = "runtime")]
pub(crate) fn begin_span() -> tracing::Span {
    tracing::info_span!("idempotency.phase", idempotency.phase = "begin")
}

/// The span a completer drives `held` in (`idempotency.complete`, with the key's hash and the recovery point it
/// resumes at): a child of the row's [`Held::traceparent`] and linked to it, as an outbox delivery continues
/// its message's (see [`crate::outbox`], "Traces"), so the completion reads in the trace of the request
/// that claimed the key. Without a `traceparent` (or without the feature `otel`) it stays where it is
/// created. Enter it (or instrument the completion with it) before the first step.
#[cfg(feature = "runtime")]
pub fn completion_span(held: &Held) -> tracing::Span {
    let span = tracing::info_span!(
        "idempotency.complete",
        idempotency.key_hash = %crate::fingerprint::key_hash(held.key.as_str()),
        idempotency.recovery_point = %held.point,
    );
    if let Some(traceparent) = &held.traceparent {
        crate::trace_context::continue_from(&span, traceparent);
    }
    span
}

#[cfg(feature = "runtime")]
pub(crate) fn lease_end(lease: Duration) -> i64 {
    unix_now_ms().saturating_add(i64::try_from(lease.as_millis()).unwrap_or(i64::MAX))
}

/// The decision for an existing row in `begin` at `now_ms` (unix ms): `None` when the caller may take it
/// over (unfinished, same request, its lease ran out), else the answer. A fence is [`Outcome::Fenced`]
/// whatever the request.
pub fn existing_row(
    fingerprint: &str,
    stored_fingerprint: &str,
    stored: Option<crate::StoredResponse>,
    locked_until_ms: i64,
    now_ms: i64,
) -> Option<Outcome> {
    match Outcome::for_existing(fingerprint, stored_fingerprint, stored) {
        Outcome::Fenced => Some(Outcome::Fenced),
        _ if stored_fingerprint != fingerprint => Some(Outcome::Mismatch),
        Outcome::InFlight if locked_until_ms <= now_ms => None,
        outcome => Some(outcome),
    }
}

/// The row id of an unfinished row, which every phased row has.
#[cfg(feature = "runtime")]
pub(crate) fn require_row_id(row_id: Option<String>, key: &str) -> Result<String, StoreError> {
    row_id.ok_or_else(|| StoreError::Corrupt(format!("unfinished key {key} has no row_id")))
}
