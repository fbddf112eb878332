//! The embedded SQLite backend.
//!
//! One connection behind a mutex, used from `spawn_blocking`. Every protocol step is one
//! `BEGIN IMMEDIATE` transaction: SQLite takes the write lock at `BEGIN`, so concurrent writers
//! (threads here, or other processes sharing the file) serialize, waiting up to the busy timeout.

use std::path::PathBuf;
use std::time::Duration;

use idempotent_endpoint::outbox;
use idempotent_endpoint::phases::Begun;
use idempotent_endpoint::sqlite::{self, SqliteKeys};
use idempotent_endpoint::KeyStatus;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::error::StoreError;
use super::legacy;
use super::phases::{FinishWork, Held, PhaseWork, RecoveryPoint};
use super::rows::{confirm, confirmation_ids, decode_order, select_orders, OrderColumns};
use super::step::{library_error, outcome, stored, ProcessOptions, WorkFn};
use crate::keys::{AccountId, IdempotencyKey};
use crate::orders::{self, Order};
use crate::protocol::{KeyedRequest, Outcome, StoredResponse, Work};

/// The shop's own tables: the same tables, columns and indexes as [`super::postgres`]'s schema, in SQLite's
/// types (`INTEGER`, `INTEGER PRIMARY KEY AUTOINCREMENT`): keep the two in step. The key rows are the
/// library's (`idempotent_endpoint::sqlite::install`).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS orders (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT    NOT NULL UNIQUE,
    account_id      TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    items           TEXT    NOT NULL,
    total_cents     INTEGER NOT NULL,
    currency        TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    charge_id       TEXT   NULL,
    key_row_id      TEXT   NULL
);
CREATE INDEX IF NOT EXISTS orders_account_seq ON orders (account_id, seq);
CREATE INDEX IF NOT EXISTS orders_account_key ON orders (account_id, idempotency_key);
CREATE INDEX IF NOT EXISTS orders_key_row ON orders (key_row_id) WHERE key_row_id IS NOT NULL;
";

/// SQLite's `synchronous` setting: the library's (`--sqlite-synchronous`; see BENCHMARKS.md for the cost of
/// `full`).
pub use idempotent_endpoint::sqlite::Synchronous;

/// The SQLite store: the library's [`SqliteKeys`] (one connection, its key rows and its outbox) with the
/// shop's tables beside them. Cloning shares the connection.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    keys: SqliteKeys,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` (`:memory:` for a private in-memory one), installs
    /// the library's tables and the shop's, and migrates a database of an earlier version.
    /// `retention` is how long the library's key rows are remembered.
    pub async fn open(
        path: impl Into<PathBuf>,
        synchronous: Synchronous,
        retention: Duration,
    ) -> Result<Self, StoreError> {
        let path = path.into();
        let keys = tokio::task::spawn_blocking(move || SqliteKeys::open_with(path, retention, synchronous))
            .await
            .map_err(|e| StoreError::Task(e.to_string()))??;
        let store = SqliteStore { keys };
        store.with_conn(migrate).await?;
        Ok(store)
    }

    /// The library's keys and outbox on this store's connection.
    pub fn keys(&self) -> &SqliteKeys {
        &self.keys
    }

    /// Runs `f` with the connection on the blocking pool.
    async fn with_conn<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.keys.with_conn(move |conn| Ok(f(conn))).await?
    }

    /// See [`super::Store::process`]: the library's `run_in` on this connection. The `work_delay` is slept before the transaction, while the
    /// caller holds the key's in-flight entry: sleeping inside would stall every other writer,
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
        let retention = self.keys.retention();
        self.with_conn(move |conn| {
            let result = sqlite::run_in(conn, &request.keyed(), retention, |tx| {
                let Work { order, response } = work(&request);
                if let Some(order) = &order {
                    insert_order(tx, order, None)?;
                }
                if options.fail_before_commit {
                    // Neither the key row nor the order survives.
                    return Err(StoreError::InjectedCrash);
                }
                Ok(response)
            });
            outcome(result)
        })
        .await
    }

    /// The library's `begin` (see [`super::Store::begin`]).
    pub(crate) async fn begin(&self, request: &KeyedRequest, lease: Duration) -> Result<Begun, StoreError> {
        self.keys.begin(request.keyed(), lease).await.map_err(library_error)
    }

    /// The library's `advance` with `work` as the step's rows.
    pub(crate) async fn advance(
        &self,
        held: &mut Held,
        point: RecoveryPoint,
        lease: Duration,
        work: PhaseWork,
    ) -> Result<(), StoreError> {
        let result = self
            .keys
            .advance(held, point.as_str(), lease, move |tx| match work {
                PhaseWork::InsertOrder(order, row_id) => insert_order(tx, &order, Some(&row_id)),
                PhaseWork::SetCharge { order_id, charge_id } => {
                    tx.execute("UPDATE orders SET charge_id = ?1 WHERE id = ?2", params![charge_id, order_id])?;
                    Ok(())
                }
            })
            .await;
        outcome(result)
    }

    /// The library's `finish`, enqueueing `message` in the same transaction.
    pub(crate) async fn finish(
        &self,
        held: Held,
        response: StoredResponse,
        message: FinishWork,
    ) -> Result<StoredResponse, StoreError> {
        let result = self
            .keys
            .finish(held, move |tx| {
                if let Some(message) = &message {
                    outbox::enqueue_sqlite(tx, message)?;
                }
                Ok::<_, StoreError>(response)
            })
            .await;
        stored(outcome(result)?)
    }

    /// The library's `release`.
    pub(crate) async fn release(&self, held: Held) -> Result<(), StoreError> {
        self.keys.release(held).await.map_err(library_error)
    }

    /// The library's `abandon`.
    pub(crate) async fn abandon(&self, held: Held) -> Result<(), StoreError> {
        self.keys.abandon(held).await.map_err(library_error)
    }

    /// The library's `unfinished`.
    pub(crate) async fn unfinished(&self, limit: i64, lease: Duration) -> Result<Vec<Held>, StoreError> {
        self.keys.unfinished(limit, lease).await.map_err(library_error)
    }

    /// The order the key row with `row_id` made (`orders.key_row_id`), if it made one yet.
    pub(crate) async fn order_of_row(&self, row_id: String) -> Result<Option<Order>, StoreError> {
        self.with_conn(move |conn| {
            let row = conn
                .query_row(concat!(select_orders!(), "WHERE o.key_row_id = ?1"), params![row_id], |row| {
                    OrderColumns::try_from(row)
                })
                .optional()?;
            confirmed_one(conn, row.map(decode_order).transpose()?)
        })
        .await
    }

    /// See [`super::Store::list_orders`].
    pub async fn list_orders(&self, account: &AccountId, limit: u32) -> Result<Vec<Order>, StoreError> {
        let account = account.as_str().to_owned();
        self.with_conn(move |conn| {
            let mut stmt =
                conn.prepare_cached(concat!(select_orders!(), "WHERE o.account_id = ?1 ORDER BY o.seq DESC LIMIT ?2"))?;
            let rows = stmt.query_map(params![account, limit], |row| OrderColumns::try_from(row))?;
            let mut out = Vec::new();
            for row in rows {
                out.push(decode_order(row?)?);
            }
            confirmed(conn, out)
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
                    concat!(select_orders!(), "WHERE o.account_id = ?1 AND o.id = ?2"),
                    params![account, id],
                    |row| OrderColumns::try_from(row),
                )
                .optional()?;
            confirmed_one(conn, row.map(decode_order).transpose()?)
        })
        .await
    }

    /// See [`super::Store::key_status`]: the library's `status_in`.
    pub async fn key_status(
        &self,
        account: &AccountId,
        key: &IdempotencyKey,
        retention: Duration,
    ) -> Result<KeyStatus, StoreError> {
        let (scope, key) = (account.as_str().to_owned(), key.clone());
        self.with_conn(move |conn| Ok(sqlite::status_in(conn, &scope, &key, retention)?)).await
    }

    /// The library's `settle_in` (see [`super::Store::settle`]).
    pub async fn settle(
        &self,
        account: &AccountId,
        key: &IdempotencyKey,
        retention: Duration,
    ) -> Result<KeyStatus, StoreError> {
        let (scope, key) = (account.as_str().to_owned(), key.clone());
        self.with_conn(move |conn| Ok(sqlite::settle_in(conn, &scope, &key, retention)?)).await
    }

    /// The newest order the account made with the key (an expired key may have been used again).
    pub async fn newest_order(&self, account: &AccountId, key: &IdempotencyKey) -> Result<Option<Order>, StoreError> {
        let (account, key) = (account.as_str().to_owned(), key.as_str().to_owned());
        self.with_conn(move |conn| {
            let order = conn
                .query_row(
                    concat!(
                        select_orders!(),
                        "WHERE o.account_id = ?1 AND o.idempotency_key = ?2 ORDER BY o.seq DESC LIMIT 1"
                    ),
                    params![account, key],
                    |row| OrderColumns::try_from(row),
                )
                .optional()?;
            confirmed_one(conn, order.map(decode_order).transpose()?)
        })
        .await
    }

    /// See [`super::Store::sweep`]: the library's `sweep_in`.
    pub async fn sweep(&self, retention: Duration) -> Result<u64, StoreError> {
        self.with_conn(move |conn| Ok(sqlite::sweep_in(conn, retention)?)).await
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

/// Brings the database up to date in one transaction (the library's tables are installed by then): the
/// shop's tables, and the rows of an earlier version moved into the library's tables ([`super::legacy`]).
fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    add_missing_columns(&tx)?;
    tx.execute_batch(SCHEMA)?;
    if exists(&tx, legacy::OLD_KEY_TABLE)? {
        tx.execute(legacy::COPY_KEYS, [])?;
        tx.execute(legacy::LINK_ORDERS, [])?;
        tx.execute(legacy::DROP_OLD_KEYS, [])?;
    }
    if exists(&tx, legacy::OLD_OUTBOX)? {
        tx.execute(&legacy::copy_outbox(), [])?;
        tx.execute(legacy::DROP_OLD_OUTBOX, [])?;
    }
    tx.commit()?;
    Ok(())
}

/// Whether the database has the table `name`.
fn exists(conn: &Connection, name: &str) -> Result<bool, StoreError> {
    Ok(conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
        params![name],
        |row| row.get(0),
    )?)
}

/// Adds the [`legacy::ADDED_COLUMNS`] an existing table lacks (SQLite has no `ADD COLUMN IF NOT EXISTS`).
fn add_missing_columns(conn: &Connection) -> Result<(), StoreError> {
    for (table, column, definition) in legacy::ADDED_COLUMNS {
        let mut stmt = conn.prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))?;
        let names = stmt.query_map([], |row| row.get::<_, String>(0))?.collect::<Result<Vec<_>, _>>()?;
        if !names.is_empty() && !names.iter().any(|name| name == column) {
            conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {definition}"))?;
        }
    }
    Ok(())
}

/// `orders` with their confirmations, read from the library's outbox on `conn`.
fn confirmed(conn: &Connection, mut orders: Vec<Order>) -> Result<Vec<Order>, StoreError> {
    let deliveries = outbox::deliveries_sqlite(conn, &confirmation_ids(&orders))?;
    confirm(&mut orders, &deliveries);
    Ok(orders)
}

/// [`confirmed`] for at most one order.
fn confirmed_one(conn: &Connection, order: Option<Order>) -> Result<Option<Order>, StoreError> {
    Ok(confirmed(conn, order.into_iter().collect())?.pop())
}

/// Inserts a new order, made by the key row with `key_row_id` (the order phases' rows have one).
fn insert_order(conn: &Connection, order: &Order, key_row_id: Option<&str>) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO orders (id, account_id, idempotency_key, items, total_cents, currency, created_at, key_row_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            order.id,
            order.account_id,
            order.idempotency_key,
            orders::encode_items(&order.items),
            order.total_cents,
            order.currency,
            order.created_at,
            key_row_id
        ],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn synchronous_is_applied() {
        let dir = tempfile::tempdir().expect("dir");
        for (setting, expected) in [(Synchronous::Full, 2), (Synchronous::Normal, 1)] {
            let store =
                SqliteStore::open(dir.path().join("s.sqlite"), setting, Duration::from_secs(60)).await.expect("open");
            let value: i64 = store
                .with_conn(|conn| Ok(conn.query_row("PRAGMA synchronous", [], |row| row.get(0))?))
                .await
                .expect("read");
            assert_eq!(value, expected, "{setting:?}");
        }
    }
}
