//! The key row in a rusqlite transaction.
//!
//! [`run_in`] does one keyed request in ONE `BEGIN IMMEDIATE` transaction: it deletes the key's row if it
//! expired, inserts it (the primary key `(scope, key)` settles races), and if it was inserted hands the
//! transaction to the app's work, stores the work's answer on the row and commits. The app's own rows
//! (an order, an invitation, an outbox message) commit with the key row or not at all, so a crash anywhere
//! before the commit leaves nothing behind and a retry simply does the work once. A key row that is a fence
//! ([`settle_in`]) is answered [`Outcome::Fenced`] and no work is done.
//!
//! [`SqliteKeys`] is the same over a shared connection, from async code (the transaction runs on the
//! blocking pool), and it knows which keys it is working on: a key reads `in_flight` from the moment `run`
//! accepts it until its transaction has committed or rolled back, whether or not the client that sent it is
//! still connected, and a second request with the key meanwhile is answered 409 at once. An uncommitted
//! row is invisible to other connections, so that knowledge is this `SqliteKeys`'s (clone it to share it):
//! another process, or another `SqliteKeys` opened on the same file, sees such a key as `unknown` until the
//! commit. The free functions ([`run_in`], [`status_in`], [`settle_in`]) have no such set.

/// The rusqlite this module is built on: use its `Transaction` and `params!` from here so the versions agree.
pub use rusqlite;

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use crate::error::{check_scope, RunError, StoreError};
use crate::inflight::InFlightKeys;
use crate::key::IdempotencyKey;
use crate::outcome::{Outcome, FENCED_FINGERPRINT};
use crate::request::KeyedRequest;
use crate::response::{StoredResponse, MAX_STORED_BODY_BYTES};
use crate::retention::{expired_before, unix_now};
use crate::status::KeyStatus;

/// The key table (created by [`install`], which also adds the columns later versions brought
/// (`traceparent`) to a table made before them). `traceparent` is the W3C trace context of the request
/// that claimed a phased row ([`crate::phases::Held::traceparent`]), NULL when it had none.
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
    traceparent      TEXT    NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX IF NOT EXISTS idempotency_records_unfinished ON idempotency_records (locked_until)
    WHERE recovery_point <> 'finished';
CREATE INDEX IF NOT EXISTS idempotency_records_created_at ON idempotency_records (created_at);
";

/// The columns later versions added to the key table, each with its definition, which [`install`] adds to
/// a table made before them.
const ADDED_COLUMNS: [(&str, &str); 1] = [("traceparent", "TEXT NULL")];

/// How long a writer waits for another one before SQLite fails with "database is locked".
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Creates the key table and the outbox's table if missing (a receiver installs the inbox's with
/// `inbox::install_sqlite`).
pub fn install(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch(SCHEMA)?;
    crate::sqlite_columns::add_missing(conn, "idempotency_records", &ADDED_COLUMNS)?;
    crate::outbox_table::install_sqlite(conn)?;
    Ok(())
}

/// SQLite's `synchronous` setting (with WAL), for [`SqliteKeys::open_with`].
///
/// `Full` (the default) syncs the WAL at every commit: an answer committed and sent survives a power loss.
/// `Normal` syncs only at checkpoints: faster, but a power loss can undo the last commits, so an answer the
/// client already received (and retired its key on) could vanish, and a retry would do the work again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Synchronous {
    /// `PRAGMA synchronous = FULL`.
    #[default]
    Full,
    /// `PRAGMA synchronous = NORMAL`.
    Normal,
}

impl Synchronous {
    /// The setting's name in SQL (`"FULL"`, `"NORMAL"`).
    pub fn as_sql(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        }
    }
}

/// Opens (creating if needed) the database at `path` in WAL mode with `synchronous` and the busy timeout.
pub(crate) fn open_connection(path: impl AsRef<Path>, synchronous: Synchronous) -> Result<Connection, StoreError> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let _mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    conn.execute_batch(&format!("PRAGMA synchronous = {};", synchronous.as_sql()))?;
    Ok(conn)
}

/// Opens the write transaction that decides a key (`BEGIN IMMEDIATE`). A database whose write lock another
/// connection (another process, or the app's own second connection) holds past [`BUSY_TIMEOUT`] is
/// [`StoreError::KeyBusy`]: nothing was done. Every later statement of the transaction holds the lock.
pub(crate) fn begin_key_tx(conn: &mut Connection) -> Result<Transaction<'_>, StoreError> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|error| match error.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy) => StoreError::KeyBusy,
        _ => StoreError::Sqlite(error),
    })
}

/// One keyed request in one transaction (see the module docs). `work` runs only for a fresh key, with the
/// open transaction; its `Err` rolls everything back and is returned as [`RunError::Work`].
pub fn run_in<E>(
    conn: &mut Connection,
    request: &KeyedRequest,
    retention: Duration,
    work: impl FnOnce(&Transaction<'_>) -> Result<StoredResponse, E>,
) -> Result<Outcome, RunError<E>> {
    let _span = tracing::info_span!(
        "idempotency.transaction",
        db.system.name = "sqlite",
        idempotency.key_hash = %crate::key_hash(request.key.as_str()),
    )
    .entered();
    check_scope(&request.scope)?;
    let now = unix_now();
    let tx = begin_key_tx(conn)?;
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

/// A key row's fingerprint, status code, headers and body.
type KeyRow = (String, Option<u16>, Option<String>, Option<String>);

/// The row's fingerprint and answer.
fn existing(tx: &Transaction<'_>, scope: &str, key: &str) -> Result<(String, Option<StoredResponse>), StoreError> {
    let (fingerprint, status, headers, body): KeyRow = tx.query_row(
        "SELECT fingerprint, status_code, response_headers, response_body FROM idempotency_records
         WHERE scope = ?1 AND key = ?2",
        params![scope, key],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
    )?;
    let stored = StoredResponse::from_columns(status, headers.as_deref(), body)
        .map_err(|e| StoreError::Corrupt(format!("response_headers: {e}")))?;
    Ok((fingerprint, stored))
}

/// What the table holds for `(scope, key)` within the retention window: `done`, `in_flight` (a row without
/// an answer: phased work not finished yet), `fenced`, or `unknown`. It cannot see a transaction that has not
/// committed; [`SqliteKeys::status`] also knows the keys its own transactions are working on.
pub fn status_in(
    conn: &Connection,
    scope: &str,
    key: &IdempotencyKey,
    retention: Duration,
) -> Result<KeyStatus, StoreError> {
    let row: Option<KeyRow> = conn
        .query_row(
            "SELECT fingerprint, status_code, response_headers, response_body FROM idempotency_records
             WHERE scope = ?1 AND key = ?2 AND created_at >= ?3",
            params![scope, key.as_str(), expired_before(unix_now(), retention)],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
        )
        .optional()?;
    let Some((fingerprint, status, headers, body)) = row else {
        return Ok(KeyStatus::Unknown);
    };
    let stored = StoredResponse::from_columns(status, headers.as_deref(), body)
        .map_err(|e| StoreError::Corrupt(format!("response_headers: {e}")))?;
    Ok(KeyStatus::of_row(&fingerprint, stored))
}

/// Settles `(scope, key)` in one `BEGIN IMMEDIATE` transaction (the fence): a key with no live row gets a
/// fence row ([`FENCED_FINGERPRINT`], no answer; an expired row is replaced, as a request would replace it)
/// and the answer is `fenced`; a key with a row gets the row's status (`done` with its answer, `in_flight`
/// for unfinished phased work, `fenced` again). Every request with a fenced key is then answered
/// [`Outcome::Fenced`] and does no work, until the fence expires with the retention. SQLite has one writer,
/// so a transaction inserting the key on another connection has committed or rolled back before this one
/// starts.
pub fn settle_in(
    conn: &mut Connection,
    scope: &str,
    key: &IdempotencyKey,
    retention: Duration,
) -> Result<KeyStatus, StoreError> {
    check_scope(scope)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    forget_expired(&tx, scope, key.as_str(), retention)?;
    let inserted = tx.execute(
        "INSERT INTO idempotency_records (scope, key, fingerprint, created_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (scope, key) DO NOTHING",
        params![scope, key.as_str(), FENCED_FINGERPRINT, unix_now()],
    )?;
    let status = if inserted == 1 {
        KeyStatus::Fenced
    } else {
        let (stored_fingerprint, stored) = existing(&tx, scope, key.as_str())?;
        KeyStatus::of_row(&stored_fingerprint, stored)
    };
    tx.commit()?;
    Ok(status)
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
    /// The keys whose transaction is open or waiting for the connection.
    working: InFlightKeys,
}

impl SqliteKeys {
    /// Opens (creating if needed) the database at `path` (`:memory:` for a private one) in WAL mode with
    /// `synchronous = FULL` (a committed answer survives a power loss), and installs the tables. The app
    /// creates its own tables with [`SqliteKeys::with_conn`].
    pub fn open(path: impl AsRef<Path>, retention: Duration) -> Result<Self, StoreError> {
        Self::open_with(path, retention, Synchronous::Full)
    }

    /// [`SqliteKeys::open`] with another [`Synchronous`] setting.
    pub fn open_with(
        path: impl AsRef<Path>,
        retention: Duration,
        synchronous: Synchronous,
    ) -> Result<Self, StoreError> {
        let conn = open_connection(path, synchronous)?;
        install(&conn)?;
        Ok(SqliteKeys { conn: Arc::new(Mutex::new(conn)), retention, working: InFlightKeys::default() })
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
        // The blocking thread has no current span: the caller's goes along, so the work's spans nest under it.
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || span.in_scope(|| f(&mut lock(&conn))))
            .await
            .map_err(|e| StoreError::Task(e.to_string()))?
    }

    /// [`run_in`] on the shared connection. The work runs on a blocking thread inside the transaction: it
    /// writes rows, it does not wait on the network (work that leaves the database goes through the
    /// [`crate::outbox`]). It runs in its own task, so a client hanging up cannot cancel it half way: the
    /// work goes on, commits, and its answer is replayed to the retry. From the moment this is called until
    /// that task has committed or rolled back, the key reads `in_flight` ([`SqliteKeys::status`]) and another
    /// request with it is answered [`Outcome::InFlight`] at once.
    pub async fn run<E, F>(&self, request: KeyedRequest, work: F) -> Result<Outcome, RunError<E>>
    where
        E: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<StoredResponse, E> + Send + 'static,
    {
        let Some(entry) = self.working.enter(&request.scope, request.key.as_str()) else {
            return Ok(Outcome::InFlight);
        };
        let conn = Arc::clone(&self.conn);
        let retention = self.retention;
        // The in-flight entry moves into the task that owns the transaction, and drops after its commit or rollback.
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || {
            let _caller = span.enter();
            let outcome = run_in(&mut lock(&conn), &request, retention, work);
            drop(entry);
            outcome
        })
        .await
        .map_err(|e| StoreError::Task(e.to_string()))?
    }

    /// The key-status answer for `(scope, key)`: `in_flight` at once while this `SqliteKeys` works on the
    /// key, else what the table holds ([`status_in`]).
    pub async fn status(&self, scope: String, key: IdempotencyKey) -> Result<KeyStatus, StoreError> {
        // Asked before the table: a key not in the in-flight set now was not accepted yet, or its transaction has ended
        // and the table holds its row if it committed.
        if self.working.holds(&scope, key.as_str()) {
            return Ok(KeyStatus::InFlight);
        }
        let retention = self.retention;
        self.with_conn(move |conn| status_in(conn, &scope, &key, retention)).await
    }

    /// Settles `(scope, key)`: the fence ([`settle_in`]). A key this `SqliteKeys` is working on is
    /// `in_flight` at once (settle again later); otherwise the answer is `done`, `in_flight` for unfinished
    /// phased work, or `fenced`, and from then on a request with a fenced key does no work. While the fence
    /// is being written the key is in the in-flight set like a request's, so a request arriving in that instant is
    /// answered 409 and its retry 410.
    pub async fn settle(&self, scope: String, key: IdempotencyKey) -> Result<KeyStatus, StoreError> {
        let Some(entry) = self.working.enter(&scope, key.as_str()) else {
            return Ok(KeyStatus::InFlight);
        };
        let conn = Arc::clone(&self.conn);
        let retention = self.retention;
        tokio::task::spawn_blocking(move || {
            let status = settle_in(&mut lock(&conn), &scope, &key, retention);
            drop(entry);
            status
        })
        .await
        .map_err(|e| StoreError::Task(e.to_string()))?
    }

    /// Deletes expired key rows; returns how many.
    pub async fn sweep(&self) -> Result<u64, StoreError> {
        let retention = self.retention;
        self.with_conn(move |conn| sweep_in(conn, retention)).await
    }

    /// The whole key-status answer for a raw key from the URL (`GET .../idempotency-keys/{key}`): 400 for a
    /// malformed key, the [`KeyStatus`] (200, `no-store`, `Retry-After` when in flight), or 500 when the
    /// store fails (logged). See [`crate::status::respond`].
    pub async fn status_response(&self, scope: String, raw_key: &str) -> axum::response::Response {
        crate::status::respond(raw_key, |key| self.status(scope, key)).await
    }

    /// The whole answer to settling a raw key from the URL (`POST .../idempotency-keys/{key}`): as
    /// [`SqliteKeys::status_response`], over [`SqliteKeys::settle`].
    pub async fn settle_response(&self, scope: String, raw_key: &str) -> axum::response::Response {
        crate::status::respond(raw_key, |key| self.settle(scope, key)).await
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
pub(crate) fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
