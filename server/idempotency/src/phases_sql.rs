//! The PostgreSQL statements of the atomic phases, once: `phases::postgres` runs them, and the Node
//! half (server/node, through its wasm core) runs the very same text on the very same table
//! ([`crate::postgres_sql::SCHEMA`]), so a Rust and a Node service can share one database's phased key rows.
//! Parameters are positional (`$1`...), as both tokio-postgres and node-postgres take them. Times are unix
//! milliseconds (`locked_until`) except `created_at` (unix seconds, as every key row's).

/// Inserts a new key row at the first recovery point, held: `$1` scope, `$2` key, `$3` fingerprint, `$4` now
/// (unix s), `$5` the first point ([`crate::phases::STARTED`]), `$6` the row id, `$7` the lease token, `$8` the
/// lease's end, `$9` the claiming request's `traceparent` or NULL. Inserts nothing when the key has a row.
pub const INSERT_STARTED: &str = "INSERT INTO idempotency_records
                 (scope, key, fingerprint, created_at, recovery_point, row_id, lock_token, locked_until, traceparent)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (scope, key) DO NOTHING";

/// The existing key row, locked for the decision ([`crate::phases::existing_row`]): `fingerprint,
/// status_code, response_headers, response_body, recovery_point, row_id, locked_until, traceparent`. `$1`
/// scope, `$2` key.
pub const SELECT_FOR_BEGIN: &str =
    "SELECT fingerprint, status_code, response_headers, response_body, recovery_point, row_id, locked_until, traceparent
             FROM idempotency_records WHERE scope = $1 AND key = $2 FOR UPDATE";

/// Takes a row over with a new lease: `$1` the new token, `$2` the lease's end, `$3` scope, `$4` key.
pub const TAKE_OVER: &str =
    "UPDATE idempotency_records SET lock_token = $1, locked_until = $2 WHERE scope = $3 AND key = $4";

/// The lease token of an unfinished row, locked for the step: `lock_token`, no row once finished. `$1`
/// scope, `$2` key, `$3` [`crate::phases::FINISHED`].
pub const CHECK_LEASE: &str =
    "SELECT lock_token FROM idempotency_records WHERE scope = $1 AND key = $2 AND recovery_point <> $3
             FOR UPDATE";

/// Moves the row to the step's point and renews the lease: `$1` the point, `$2` the lease's end, `$3` scope,
/// `$4` key.
pub const ADVANCE: &str =
    "UPDATE idempotency_records SET recovery_point = $1, locked_until = $2 WHERE scope = $3 AND key = $4";

/// Stores the answer and ends the lease: `$1` status, `$2` headers
/// ([`crate::StoredResponse::encode_headers`]), `$3` body, `$4` [`crate::phases::FINISHED`], `$5` scope,
/// `$6` key.
pub const FINISH: &str = "UPDATE idempotency_records SET status_code = $1, response_headers = $2, response_body = $3,
             recovery_point = $4, lock_token = NULL, locked_until = 0
         WHERE scope = $5 AND key = $6";

/// Ends a lease at once, the row kept at its point: `$1` scope, `$2` key, `$3` the holder's token.
pub const RELEASE: &str =
    "UPDATE idempotency_records SET locked_until = 0 WHERE scope = $1 AND key = $2 AND lock_token = $3";

/// Deletes a held row still at the first point: `$1` scope, `$2` key, `$3` the holder's token, `$4`
/// [`crate::phases::STARTED`]. One row deleted, or none when the lease is gone or the row moved on.
pub const ABANDON: &str = "DELETE FROM idempotency_records
             WHERE scope = $1 AND key = $2 AND lock_token = $3 AND recovery_point = $4";

/// The completer's query: up to `$3` unfinished rows whose lease ran out (`$1` [`crate::phases::FINISHED`],
/// `$2` now in unix ms), oldest lease first, `FOR UPDATE SKIP LOCKED` (instances never take one row
/// together): `scope, key, recovery_point, row_id, traceparent`. Each is then taken over with [`TAKE_OVER`].
pub const UNFINISHED: &str = "SELECT scope, key, recovery_point, row_id, traceparent FROM idempotency_records
             WHERE recovery_point <> $1 AND locked_until <= $2 ORDER BY locked_until LIMIT $3
             FOR UPDATE SKIP LOCKED";
