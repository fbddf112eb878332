//! The PostgreSQL schema and statements of the key rows, once: the [`crate::postgres`] store runs them, and
//! the Node half (server/node, through its wasm core) runs the very same text on the very same table, so a
//! Rust and a Node service can share one database. Parameters are positional (`$1`...), as both
//! tokio-postgres and node-postgres take them.

/// The key table and its indexes (`CREATE ... IF NOT EXISTS`: safe to run at every start; the `ALTER` adds
/// the column a later version brought to a table made before it). `traceparent` is the W3C trace context of
/// the request that claimed a phased row ([`crate::phases::Held::traceparent`]), NULL when it had none.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS idempotency_records (
    scope            TEXT    NOT NULL,
    key              TEXT    NOT NULL,
    fingerprint      TEXT    NOT NULL,
    status_code      INTEGER NULL,
    response_headers TEXT    NULL,
    response_body    TEXT    NULL,
    created_at       BIGINT  NOT NULL,
    recovery_point   TEXT    NOT NULL DEFAULT 'finished',
    row_id           TEXT    NULL,
    lock_token       TEXT    NULL,
    locked_until     BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (scope, key)
);
ALTER TABLE idempotency_records ADD COLUMN IF NOT EXISTS traceparent TEXT NULL;
CREATE INDEX IF NOT EXISTS idempotency_records_unfinished ON idempotency_records (locked_until)
    WHERE recovery_point <> 'finished';
CREATE INDEX IF NOT EXISTS idempotency_records_created_at ON idempotency_records (created_at);
";

/// Whether any session of this database holds the key's in-flight mark, looked up without taking it: one
/// boolean. A bigint advisory lock shows in `pg_locks` as classid (high 32 bits), objid (low 32), objsubid 1.
/// `$1`: [`lock_name`].
pub const LOCK_HELD: &str = "SELECT EXISTS (SELECT 1 FROM pg_locks
   WHERE locktype = 'advisory' AND objsubid = 1 AND granted
     AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
     AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0))";

/// Deletes the key's row if it expired (a request with an expired key is new again, even before a sweep).
/// `$1` scope, `$2` key, `$3` the retention cutoff ([`crate::expired_before`]).
pub const FORGET_EXPIRED: &str = "DELETE FROM idempotency_records WHERE scope = $1 AND key = $2 AND created_at < $3";

/// Takes the key's in-flight mark (a transaction-scoped advisory lock, without waiting) and, holding it,
/// claims the key row, in one statement: inserts the row, or replaces an expired one in place (a request
/// with an expired key is new again, even before a sweep). One row, `(held, claimed)`: `held` false while
/// another transaction holds the mark (nothing was written); `claimed` false when a live row is there
/// (read it with [`SELECT_ROW`], in a statement of its own).
///
/// Why it is correct in one statement:
/// - The `mark` CTE is materialized (volatile, and said so) and is the insert's only source, so the lock is
///   taken before the insert looks for a conflicting row; without the mark no row is inserted.
/// - The conflict check and the `DO UPDATE ... WHERE` see the row's latest committed version, not the
///   statement's snapshot (taken before the lock), so a row committed by the mark's previous holder just
///   before the lock is found, and is replaced only if it expired. A live row (a fence too) is never
///   replaced; it is locked until the transaction ends, so no sweep removes it before [`SELECT_ROW`].
/// - The claimed row is read from `RETURNING`, never from the snapshot.
///
/// `$1` [`lock_name`], `$2` scope, `$3` key, `$4` fingerprint (or [`crate::FENCED_FINGERPRINT`] for a fence),
/// `$5` now (unix s), `$6` the retention cutoff ([`crate::expired_before`]).
pub const CLAIM_KEY: &str =
    "WITH mark AS MATERIALIZED (SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS held),
claim AS (
  INSERT INTO idempotency_records (scope, key, fingerprint, created_at)
  SELECT $2::text, $3::text, $4::text, $5::bigint FROM mark WHERE held
  ON CONFLICT (scope, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, created_at = EXCLUDED.created_at,
    status_code = NULL, response_headers = NULL, response_body = NULL, recovery_point = DEFAULT,
    row_id = NULL, lock_token = NULL, locked_until = DEFAULT, traceparent = NULL
  WHERE idempotency_records.created_at < $6::bigint
  RETURNING 1
)
SELECT held, EXISTS (SELECT 1 FROM claim) AS claimed FROM mark";

/// The key row's fingerprint and answer columns. `$1` scope, `$2` key.
pub const SELECT_ROW: &str = "SELECT fingerprint, status_code, response_headers, response_body FROM idempotency_records
 WHERE scope = $1 AND key = $2";

/// [`SELECT_ROW`] within the retention. `$1` scope, `$2` key, `$3` the retention cutoff.
pub const SELECT_LIVE_ROW: &str =
    "SELECT fingerprint, status_code, response_headers, response_body FROM idempotency_records
 WHERE scope = $1 AND key = $2 AND created_at >= $3";

/// Stores the work's answer on the key row, in the work's transaction. `$1` status, `$2` headers
/// ([`crate::StoredResponse::encode_headers`]), `$3` body, `$4` scope, `$5` key.
pub const STORE_ANSWER: &str =
    "UPDATE idempotency_records SET status_code = $1, response_headers = $2, response_body = $3
 WHERE scope = $4 AND key = $5";

/// How long the rest of the transaction waits for a row lock (settling waits for a transaction inserting
/// the same key, then answers `in_flight`). `$1`: a duration such as `5000ms`.
pub const SET_LOCK_TIMEOUT: &str = "SELECT set_config('lock_timeout', $1, true)";

/// How long settling waits for a transaction that holds the key's row (one inserting it and not yet
/// committed, or phased work deciding on it) before it answers `in_flight`, in milliseconds.
pub const SETTLE_LOCK_TIMEOUT_MS: u64 = 5_000;

/// [`SETTLE_LOCK_TIMEOUT_MS`] as [`SET_LOCK_TIMEOUT`] takes it.
pub fn settle_lock_timeout() -> String {
    format!("{SETTLE_LOCK_TIMEOUT_MS}ms")
}

/// The SQLSTATE of a statement that gave up waiting for [`SET_LOCK_TIMEOUT`] (`lock_not_available`).
pub const LOCK_NOT_AVAILABLE: &str = "55P03";

/// The SQLSTATE of a statement the session's `statement_timeout` (or a cancel) ended (`query_canceled`): a
/// wait for a key row that ends this way did nothing either.
pub const QUERY_CANCELED: &str = "57014";

/// How long a phase's statement waits for a key row another transaction holds (another phase's step, which
/// makes no call outside the database, or a request inserting the key) before it gives up, in
/// milliseconds: the default of [`SET_KEY_LOCK_TIMEOUT`].
pub const KEY_LOCK_TIMEOUT_MS: u64 = 2_000;

/// Bounds the rest of the transaction's waits for a row lock, keeping the session's own `lock_timeout` if it
/// has one (a connection opened with `options=-c lock_timeout=...`), else `$1` (a duration such as `2000ms`,
/// [`key_lock_timeout`]).
pub const SET_KEY_LOCK_TIMEOUT: &str = "SELECT set_config('lock_timeout',
  CASE current_setting('lock_timeout') WHEN '0' THEN $1 ELSE current_setting('lock_timeout') END, true)";

/// [`KEY_LOCK_TIMEOUT_MS`] as [`SET_KEY_LOCK_TIMEOUT`] takes it.
pub fn key_lock_timeout() -> String {
    format!("{KEY_LOCK_TIMEOUT_MS}ms")
}

/// Deletes every key row created before the cutoff `$1`; business rows are never touched.
pub const SWEEP: &str = "DELETE FROM idempotency_records WHERE created_at < $1";

/// The name of the key's in-flight mark (hashed to a bigint by PostgreSQL in [`CLAIM_KEY`] and [`LOCK_HELD`]):
/// scope and key on two lines, so that no two (scope, key) pairs share a name.
pub fn lock_name(scope: &str, key: &str) -> String {
    let mut name = String::with_capacity(scope.len() + 1 + key.len());
    name.push_str(scope);
    name.push('\n');
    name.push_str(key);
    name
}
