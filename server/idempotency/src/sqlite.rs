//! The key row in a rusqlite transaction.
//!
//! [`run_in`] does one keyed request in ONE `BEGIN IMMEDIATE` transaction: it deletes the key's row if it
//! expired, inserts it (the primary key `(scope, key)` settles races), and if it was inserted hands the
//! transaction to the app's work, stores the work's answer on the row and commits. The app's own rows
//! (an order, an invitation, an outbox message) commit with the key row or not at all, so a crash anywhere
//! before the commit leaves nothing behind and a retry simply does the work once. SQLite has one writer, so
//! a second request with the same key waits for the first one's commit and then replays its answer.
//!
//! [`SqliteKeys`] is the same over a shared connection, from async code (the transaction runs on the
//! blocking pool).

/// The rusqlite this module is built on: use its `Transaction` and `params!` from here so the versions agree.
pub use rusqlite;

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use crate::error::{check_scope, RunError, StoreError};
use crate::key::IdempotencyKey;
use crate::outcome::Outcome;
use crate::request::KeyedRequest;
use crate::response::{StoredResponse, MAX_STORED_BODY_BYTES};
use crate::retention::{expired_before, unix_now};
use crate::status::KeyStatus;

/// The key table (created by [`install`]).
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS idempotency_records (
    scope            TEXT    NOT NULL,
    key              TEXT    NOT NULL,
    fingerprint      TEXT    NOT NULL,
    status_code      INTEGER NULL,
    response_headers TEXT    NULL,
    response_body    TEXT    NULL,
    created_at       INTEGER NOT NULL,
    recovery_point   TEXT    NOT NULL DEFAULT 'finished',
    row_id           TEXT    NULL,
    lock_token       TEXT    NULL,
    locked_until     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (scope, key)
);
CREATE INDEX IF NOT EXISTS idempotency_records_unfinished ON idempotency_records (locked_until)
    WHERE recovery_point <> 'finished';
CREATE INDEX IF NOT EXISTS idempotency_records_created_at ON idempotency_records (created_at);
";

/// How long a writer waits for another one before SQLite fails with "database is locked".
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Creates the key table and the outbox's table if missing.
pub fn install(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch(SCHEMA)?;
    conn.execute_batch(crate::outbox::SQLITE_SCHEMA)?;
    Ok(())
}

/// One keyed request in one transaction (see the module docs). `work` runs only for a fresh key, with the
/// open transaction; its `Err` rolls everything back and is returned as [`RunError::Work`].
pub fn run_in<E>(
    conn: &mut Connection,
    request: &KeyedRequest,
    retention: Duration,
    work: impl FnOnce(&Transaction<'_>) -> Result<StoredResponse, E>,
) -> Result<Outcome, RunError<E>> {
    check_scope(&request.scope)?;
    let now = unix_now();
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(StoreError::from)?;
    let (scope, key) = (request.scope.as_str(), request.key.as_str());
    forget_expired(&tx, scope, key, retention)?;
    let inserted = tx
        .execute(
            "INSERT INTO idempotency_records (scope, key, fingerprint, created_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (scope, key) DO NOTHING",
            params![scope, key, request.fingerprint, now],
        )
        .map_err(StoreError::from)?;
    if inserted == 0 {
        let (stored_fingerprint, stored) = existing(&tx, scope, key)?;
        tx.commit().map_err(StoreError::from)?;
        return Ok(Outcome::for_existing(&request.fingerprint, &stored_fingerprint, stored));
    }
    let response = work(&tx).map_err(RunError::Work)?;
    if response.body.len() > MAX_STORED_BODY_BYTES {
        return Err(StoreError::ResponseTooLarge(response.body.len()).into());
    }
    tx.execute(
        "UPDATE idempotency_records SET status_code = ?1, response_headers = ?2, response_body = ?3
         WHERE scope = ?4 AND key = ?5",
        params![response.status, response.encode_headers(), response.body, scope, key],
    )
    .map_err(StoreError::from)?;
    tx.commit().map_err(StoreError::from)?;
    Ok(Outcome::Fresh(response))
}

/// Deletes the key's row if it expired: a request with an expired key is new again, even before a sweep.
pub(crate) fn forget_expired(
    tx: &Transaction<'_>,
    scope: &str,
    key: &str,
    retention: Duration,
) -> Result<(), StoreError> {
    tx.execute(
        "DELETE FROM idempotency_records WHERE scope = ?1 AND key = ?2 AND created_at < ?3",
        params![scope, key, expired_before(unix_now(), retention)],
    )?;
    Ok(())
}

/// The row's fingerprint and answer.
fn existing(tx: &Transaction<'_>, scope: &str, key: &str) -> Result<(String, Option<StoredResponse>), StoreError> {
    let (fingerprint, status, headers, body): (String, Option<u16>, Option<String>, Option<String>) = tx.query_row(
        "SELECT fingerprint, status_code, response_headers, response_body FROM idempotency_records
         WHERE scope = ?1 AND key = ?2",
        params![scope, key],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
    )?;
    let stored = StoredResponse::from_columns(status, headers.as_deref(), body)
        .map_err(|e| StoreError::Corrupt(format!("response_headers: {e}")))?;
    Ok((fingerprint, stored))
}

/// What the table holds for `(scope, key)` within the retention window.
pub fn status_in(
    conn: &Connection,
    scope: &str,
    key: &IdempotencyKey,
    retention: Duration,
) -> Result<KeyStatus, StoreError> {
    let row: Option<(Option<u16>, Option<String>, Option<String>)> = conn
        .query_row(
            "SELECT status_code, response_headers, response_body FROM idempotency_records
             WHERE scope = ?1 AND key = ?2 AND created_at >= ?3",
            params![scope, key.as_str(), expired_before(unix_now(), retention)],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()?;
    let Some((status, headers, body)) = row else {
        return Ok(KeyStatus::Unknown);
    };
    match StoredResponse::from_columns(status, headers.as_deref(), body) {
        Ok(Some(stored)) => Ok(KeyStatus::done(stored)),
        Ok(None) => Ok(KeyStatus::InFlight),
        Err(e) => Err(StoreError::Corrupt(format!("response_headers: {e}"))),
    }
}

/// Deletes key rows older than `retention`; returns how many. Business rows are never touched.
pub fn sweep_in(conn: &Connection, retention: Duration) -> Result<u64, StoreError> {
    let deleted = conn.execute(
        "DELETE FROM idempotency_records WHERE created_at < ?1",
        params![expired_before(unix_now(), retention)],
    )?;
    Ok(deleted as u64)
}

/// A SQLite database shared by the handlers: one connection behind a mutex, used from the blocking pool.
/// Cloning shares the connection.
#[derive(Debug, Clone)]
pub struct SqliteKeys {
    conn: Arc<Mutex<Connection>>,
    retention: Duration,
}

impl SqliteKeys {
    /// Opens (creating if needed) the database at `path` (`:memory:` for a private one) in WAL mode with
    /// `synchronous = FULL` (a committed answer survives a power loss), and installs the tables. The app
    /// creates its own tables with [`SqliteKeys::with_conn`].
    pub fn open(path: impl AsRef<Path>, retention: Duration) -> Result<Self, StoreError> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        let _mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
        conn.execute_batch("PRAGMA synchronous = FULL;")?;
        install(&conn)?;
        Ok(SqliteKeys { conn: Arc::new(Mutex::new(conn)), retention })
    }

    /// How long keys are remembered.
    pub fn retention(&self) -> Duration {
        self.retention
    }

    /// Runs `f` with the connection on the blocking pool (the app's own reads and writes).
    pub async fn with_conn<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        tokio::task::spawn_blocking(move || f(&mut lock(&conn))).await.map_err(|e| StoreError::Task(e.to_string()))?
    }

    /// [`run_in`] on the shared connection. The work runs on a blocking thread inside the transaction: it
    /// writes rows, it does not wait on the network (work that leaves the database goes through the
    /// [`crate::outbox`]). It runs in its own task, so a client hanging up cannot cancel it half way.
    pub async fn run<E, F>(&self, request: KeyedRequest, work: F) -> Result<Outcome, RunError<E>>
    where
        E: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<StoredResponse, E> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        let retention = self.retention;
        tokio::task::spawn_blocking(move || run_in(&mut lock(&conn), &request, retention, work))
            .await
            .map_err(|e| StoreError::Task(e.to_string()))?
    }

    /// The key-status answer for `(scope, key)`.
    pub async fn status(&self, scope: String, key: IdempotencyKey) -> Result<KeyStatus, StoreError> {
        let retention = self.retention;
        self.with_conn(move |conn| status_in(conn, &scope, &key, retention)).await
    }

    /// Deletes expired key rows; returns how many.
    pub async fn sweep(&self) -> Result<u64, StoreError> {
        let retention = self.retention;
        self.with_conn(move |conn| sweep_in(conn, retention)).await
    }

    /// The whole key-status answer for a raw key from the URL (`GET .../idempotency-keys/{key}`): 400 for a
    /// malformed key, the [`KeyStatus`] (200, `no-store`), or 500 when the store fails (logged).
    pub async fn status_response(&self, scope: String, raw_key: &str) -> axum::response::Response {
        use axum::response::IntoResponse;
        let key = match IdempotencyKey::parse(raw_key) {
            Ok(key) => key,
            Err(error) => return error.problem().into_response(),
        };
        match self.status(scope, key).await {
            Ok(status) => status.into_response(),
            Err(error) => {
                tracing::error!(%error, "key status failed");
                crate::Problem::internal().into_response()
            }
        }
    }

    /// The retention sweep as a task: deletes expired key rows every `interval` until `shutdown` turns true
    /// (or its sender is dropped). Business rows are never touched.
    pub async fn sweep_every(self, interval: Duration, shutdown: tokio::sync::watch::Receiver<bool>) {
        crate::periodic::every(interval, shutdown, || async {
            match self.sweep().await {
                Ok(0) => {}
                Ok(deleted) => tracing::info!(deleted, "swept expired idempotency keys"),
                Err(error) => tracing::warn!(%error, "sweep failed"),
            }
        })
        .await;
    }
}

/// The connection, even if a thread panicked while holding it: SQLite rolled back whatever transaction
/// that thread had open when its `Transaction` was dropped, so the connection is consistent.
fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
