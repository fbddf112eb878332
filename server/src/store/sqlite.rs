//! The embedded SQLite backend.
//!
//! One connection behind a mutex, used from `spawn_blocking`. Every protocol step is one
//! `BEGIN IMMEDIATE` transaction: SQLite takes the write lock at `BEGIN`, so concurrent writers
//! (threads here, or other processes sharing the file) serialize, waiting up to the busy timeout.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use super::{
    decode_order, stored_from_columns, Claim, KeyRecord, KeyTransaction, OrderColumns, ProcessOptions, StoreError,
    WorkFn,
};
use crate::keys::{AccountId, IdempotencyKey};
use crate::orders::{self, Order};
use crate::protocol::{KeyedRequest, Outcome, StoredResponse};

/// How long a writer waits for another one before failing with "database is locked".
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The same tables, columns and indexes as [`super::postgres`]'s schema, in SQLite's types
/// (`INTEGER`, `INTEGER PRIMARY KEY AUTOINCREMENT`): keep the two in step.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS idempotency_keys (
    account_id       TEXT    NOT NULL,
    key              TEXT    NOT NULL,
    request_hash     TEXT    NOT NULL,
    status_code      INTEGER NULL,
    response_headers TEXT    NULL,
    response_body    TEXT    NULL,
    created_at       INTEGER NOT NULL,
    PRIMARY KEY (account_id, key)
);
CREATE INDEX IF NOT EXISTS idempotency_keys_created_at ON idempotency_keys (created_at);
CREATE TABLE IF NOT EXISTS orders (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT    NOT NULL UNIQUE,
    account_id      TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    items           TEXT    NOT NULL,
    total_cents     INTEGER NOT NULL,
    currency        TEXT    NOT NULL,
    created_at      INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS orders_account_seq ON orders (account_id, seq);
CREATE INDEX IF NOT EXISTS orders_account_key ON orders (account_id, idempotency_key);
";

/// SQLite's `synchronous` setting (with WAL).
///
/// `Full` (the default) syncs the WAL at every commit: an order confirmed to the shopper survives a power
/// loss. `Normal` syncs only at checkpoints: faster (see BENCHMARKS.md), but a power loss can undo the last
/// commits, so a confirmed order could vanish while the client already retired its key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Synchronous {
    /// `PRAGMA synchronous = FULL`.
    #[default]
    Full,
    /// `PRAGMA synchronous = NORMAL`.
    Normal,
}

/// The SQLite store. Cloning shares the connection.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` (`:memory:` for a private in-memory one)
    /// and applies the schema.
    pub fn open(path: impl AsRef<Path>, synchronous: Synchronous) -> Result<Self, StoreError> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // WAL lets readers proceed while a writer commits; in-memory databases keep their own mode.
        let _mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
        conn.execute_batch(match synchronous {
            Synchronous::Full => "PRAGMA synchronous = FULL;",
            Synchronous::Normal => "PRAGMA synchronous = NORMAL;",
        })?;
        conn.execute_batch(SCHEMA)?;
        Ok(SqliteStore { conn: Arc::new(Mutex::new(conn)) })
    }

    /// Runs `f` with the connection on the blocking pool.
    async fn with_conn<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        tokio::task::spawn_blocking(move || f(&mut lock(&conn))).await.map_err(|e| StoreError::Task(e.to_string()))?
    }

    /// See [`super::Store::process`]. The `work_delay` is slept before the transaction, while the
    /// caller holds the key's in-process claim: sleeping inside would stall every other writer,
    /// since SQLite has one.
    pub(crate) async fn process(
        &self,
        request: KeyedRequest,
        options: ProcessOptions,
        work: WorkFn,
    ) -> Result<Outcome, StoreError> {
        if let Some(delay) = options.work_delay {
            tokio::time::sleep(delay).await;
        }
        let runtime = tokio::runtime::Handle::current();
        self.with_conn(move |conn| {
            let tx = SqliteTransaction(conn.transaction_with_behavior(TransactionBehavior::Immediate)?);
            // The SQLite transaction never awaits anything: the step runs straight through on this
            // blocking thread (`block_on` is allowed here, outside the async workers).
            runtime.block_on(super::step(tx, &request, options, None, work))
        })
        .await
    }

    /// See [`super::Store::list_orders`].
    pub async fn list_orders(&self, account: &AccountId, limit: u32) -> Result<Vec<Order>, StoreError> {
        let account = account.as_str().to_owned();
        self.with_conn(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, account_id, idempotency_key, items, total_cents, currency, created_at
                 FROM orders WHERE account_id = ?1 ORDER BY seq DESC LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![account, limit], |row| OrderColumns::try_from(row))?;
            let mut out = Vec::new();
            for row in rows {
                out.push(decode_order(row?)?);
            }
            Ok(out)
        })
        .await
    }

    /// See [`super::Store::get_order`].
    pub async fn get_order(&self, account: &AccountId, id: &str) -> Result<Option<Order>, StoreError> {
        let account = account.as_str().to_owned();
        let id = id.to_owned();
        self.with_conn(move |conn| {
            let row = conn
                .query_row(
                    "SELECT id, account_id, idempotency_key, items, total_cents, currency, created_at
                     FROM orders WHERE account_id = ?1 AND id = ?2",
                    params![account, id],
                    |row| OrderColumns::try_from(row),
                )
                .optional()?;
            row.map(decode_order).transpose()
        })
        .await
    }

    /// See [`super::Store::key_record`]. The in-flight state of a key is this process's claim, which the
    /// caller checks: the row of a request in flight is uncommitted, so invisible here.
    pub async fn key_record(
        &self,
        account: &AccountId,
        key: &IdempotencyKey,
        expired_before: i64,
    ) -> Result<KeyRecord, StoreError> {
        let (account, key) = (account.as_str().to_owned(), key.as_str().to_owned());
        self.with_conn(move |conn| {
            let row: Option<(Option<u16>, Option<String>, Option<String>)> = conn
                .query_row(
                    "SELECT status_code, response_headers, response_body FROM idempotency_keys
                     WHERE account_id = ?1 AND key = ?2 AND created_at >= ?3",
                    params![account, key, expired_before],
                    |row| row.try_into(),
                )
                .optional()?;
            if let Some((status, headers, body)) = row {
                return Ok(match stored_from_columns(status, headers.as_deref(), body)? {
                    Some(stored) => KeyRecord::Answered(stored),
                    None => KeyRecord::InFlight,
                });
            }
            let order = conn
                .query_row(
                    "SELECT id, account_id, idempotency_key, items, total_cents, currency, created_at
                     FROM orders WHERE account_id = ?1 AND idempotency_key = ?2 ORDER BY seq DESC LIMIT 1",
                    params![account, key],
                    |row| OrderColumns::try_from(row),
                )
                .optional()?;
            Ok(match order {
                Some(columns) => KeyRecord::Order(decode_order(columns)?),
                None => KeyRecord::Absent,
            })
        })
        .await
    }

    /// See [`super::Store::sweep`].
    pub async fn sweep(&self, cutoff: i64) -> Result<u64, StoreError> {
        self.with_conn(move |conn| {
            let deleted = conn.execute("DELETE FROM idempotency_keys WHERE created_at < ?1", params![cutoff])?;
            Ok(deleted as u64)
        })
        .await
    }

    /// See [`super::Store::health`].
    pub async fn health(&self) -> Result<(), StoreError> {
        self.with_conn(|conn| {
            let _one: i64 = conn.query_row("SELECT 1", [], |row| row.get(0))?;
            Ok(())
        })
        .await
    }
}

/// The connection, even if a previous holder panicked: an unfinished transaction was rolled back when
/// its `Transaction` was dropped during the unwind, so the connection is still sound.
fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One `BEGIN IMMEDIATE` transaction: SQLite takes the write lock at `BEGIN`.
struct SqliteTransaction<'c>(Transaction<'c>);

impl KeyTransaction for SqliteTransaction<'_> {
    async fn claim(&mut self, request: &KeyedRequest) -> Result<Claim, StoreError> {
        let (account, key) = (request.account.as_str(), request.key.as_str());
        // An expired key behaves as new, even before the sweep deletes it.
        self.0.execute(
            "DELETE FROM idempotency_keys WHERE account_id = ?1 AND key = ?2 AND created_at < ?3",
            params![account, key, request.expired_before],
        )?;
        let inserted = self.0.execute(
            "INSERT INTO idempotency_keys (account_id, key, request_hash, created_at)
             VALUES (?1, ?2, ?3, ?4) ON CONFLICT (account_id, key) DO NOTHING",
            params![account, key, request.request_hash, request.now],
        )?;
        if inserted == 1 {
            return Ok(Claim::Claimed);
        }
        let (request_hash, status, headers, body): (String, Option<u16>, Option<String>, Option<String>) =
            self.0.query_row(
                "SELECT request_hash, status_code, response_headers, response_body
                 FROM idempotency_keys WHERE account_id = ?1 AND key = ?2",
                params![account, key],
                |row| row.try_into(),
            )?;
        Ok(Claim::Existing { request_hash, stored: stored_from_columns(status, headers.as_deref(), body)? })
    }

    async fn insert_order(&mut self, order: &Order) -> Result<(), StoreError> {
        self.0.execute(
            "INSERT INTO orders (id, account_id, idempotency_key, items, total_cents, currency, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                order.id,
                order.account_id,
                order.idempotency_key,
                orders::encode_items(&order.items),
                order.total_cents,
                order.currency,
                order.created_at
            ],
        )?;
        Ok(())
    }

    async fn save_response(&mut self, request: &KeyedRequest, response: &StoredResponse) -> Result<(), StoreError> {
        self.0.execute(
            "UPDATE idempotency_keys SET status_code = ?1, response_headers = ?2, response_body = ?3
             WHERE account_id = ?4 AND key = ?5",
            params![
                response.status,
                response.encode_headers(),
                response.body,
                request.account.as_str(),
                request.key.as_str()
            ],
        )?;
        Ok(())
    }

    async fn commit(self) -> Result<(), StoreError> {
        Ok(self.0.commit()?)
    }

    async fn rollback(self) -> Result<(), StoreError> {
        Ok(self.0.rollback()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn synchronous_is_applied() {
        let dir = tempfile::tempdir().expect("dir");
        for (setting, expected) in [(Synchronous::Full, 2), (Synchronous::Normal, 1)] {
            let store = SqliteStore::open(dir.path().join("s.sqlite"), setting).expect("open");
            let value: i64 = store
                .with_conn(|conn| Ok(conn.query_row("PRAGMA synchronous", [], |row| row.get(0))?))
                .await
                .expect("read");
            assert_eq!(value, expected, "{setting:?}");
        }
    }
}
