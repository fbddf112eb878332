//! The PostgreSQL backend, for several server instances sharing one database.
//!
//! Same protocol step as SQLite, in one transaction per request: the library's `postgres::run`, whose one
//! statement takes the key's transaction-scoped advisory lock (held in any instance: the first request is
//! still in flight, 409 at once) and inserts the key row (replacing an expired one); then the work (the
//! order), the stored response and the commit, or the replay, 422 or 409 for a row that is there. The
//! lock ends with the transaction, so the retry sees the committed row; the library's key status reads the
//! same lock in `pg_locks`, so the key is in flight in every instance.
//!
//! Key status and settling are the library's (`postgres::status`, `postgres::settle`) on a pooled
//! connection; the shop's part is the order that answers for a key whose row was swept.
//!
//! The order phases are the library's (`idempotent_endpoint::phases::postgres`) on a pooled connection,
//! with the shop's rows as each step's work. `statement_timeout` bounds every statement. Migrations run at start under a
//! transaction-scoped advisory lock, so instances starting together do not race on `CREATE TABLE`.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime, Transaction};
use idempotent_endpoint::outbox;
use idempotent_endpoint::phases::{postgres as phases, Begun};
use idempotent_endpoint::postgres::PgConnections;
use idempotent_endpoint::KeyStatus;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use tokio_postgres::config::SslMode;
use tokio_postgres::{NoTls, Row};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::error::StoreError;
use super::legacy;
use super::phases::{FinishWork, Held, PhaseWork, RecoveryPoint};
use super::rows::{confirm, confirmation_ids, select_orders, OrderColumns};
use super::step::{library_error, outcome, stored, ProcessOptions, WorkFn};
use crate::keys::{AccountId, IdempotencyKey};
use crate::orders::{self, Order};
use crate::protocol::{KeyedRequest, Outcome, StoredResponse, Work};

/// How long a request waits for a pooled connection.
pub const POOL_WAIT: Duration = Duration::from_secs(10);
/// Advisory lock id (an arbitrary constant) serializing migrations across instances.
const MIGRATION_LOCK: i64 = 0x1de3_907e_f37c_0001;

/// How the connections to PostgreSQL are secured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum PgTls {
    /// Plain TCP: keep the database on a private network.
    #[default]
    Disabled,
    /// TLS (rustls) required; the server's certificate is verified, for the host in the URL, against the
    /// PEM certificates in `ca_file`, or against the Mozilla roots (webpki-roots) without one.
    Required {
        /// PEM file of the certificates to trust.
        ca_file: Option<PathBuf>,
    },
}

/// Connection settings beyond the URL.
///
/// # Default
/// 16 connections, `statement_timeout` 5 s, `idle_in_transaction_session_timeout` 15 s, no TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgOptions {
    /// Connections per server instance.
    pub pool_size: usize,
    /// PostgreSQL's `statement_timeout`: no statement runs longer.
    pub statement_timeout: Duration,
    /// PostgreSQL's `idle_in_transaction_session_timeout`: a transaction left idle this long (a stuck
    /// handler) is ended by the server, releasing its locks and its key.
    pub idle_in_transaction_timeout: Duration,
    /// TLS to the database.
    pub tls: PgTls,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            pool_size: 16,
            statement_timeout: Duration::from_secs(5),
            idle_in_transaction_timeout: Duration::from_secs(15),
            tls: PgTls::Disabled,
        }
    }
}

/// The shop's own tables: the same tables, columns and indexes as [`super::sqlite`]'s schema, in PostgreSQL's
/// types (`BIGINT`, `BIGSERIAL`): keep the two in step. The key rows are the library's
/// (`idempotent_endpoint::postgres::install`).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS orders (
    seq             BIGSERIAL PRIMARY KEY,
    id              TEXT   NOT NULL UNIQUE,
    account_id      TEXT   NOT NULL,
    idempotency_key TEXT   NOT NULL,
    items           TEXT   NOT NULL,
    total_cents     BIGINT NOT NULL,
    currency        TEXT   NOT NULL,
    created_at      BIGINT NOT NULL,
    charge_id       TEXT   NULL,
    key_row_id      TEXT   NULL
);
CREATE INDEX IF NOT EXISTS orders_account_seq ON orders (account_id, seq);
CREATE INDEX IF NOT EXISTS orders_account_key ON orders (account_id, idempotency_key);
CREATE INDEX IF NOT EXISTS orders_key_row ON orders (key_row_id) WHERE key_row_id IS NOT NULL;
";

/// The PostgreSQL store: a connection pool. Cloning shares the pool.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    /// How long the library's key rows are remembered.
    retention: Duration,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").field("status", &self.pool.status()).finish()
    }
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user[:password]@host:port/db`) and applies the schema.
    /// `retention` is how long the library's key rows are remembered.
    pub async fn connect(url: &str, options: &PgOptions, retention: Duration) -> Result<Self, StoreError> {
        let mut config = tokio_postgres::Config::from_str(url)?;
        // Session settings sent at connect time, so every pooled connection has them.
        config.options(format!(
            "-c statement_timeout={} -c idle_in_transaction_session_timeout={}",
            options.statement_timeout.as_millis(),
            options.idle_in_transaction_timeout.as_millis()
        ));
        let recycling = ManagerConfig { recycling_method: RecyclingMethod::Fast };
        let manager = match &options.tls {
            PgTls::Disabled => Manager::from_config(config, NoTls, recycling),
            PgTls::Required { ca_file } => {
                config.ssl_mode(SslMode::Require);
                Manager::from_config(config, MakeRustlsConnect::new(tls_config(ca_file.as_deref())?), recycling)
            }
        };
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(POOL_WAIT))
            .create_timeout(Some(POOL_WAIT))
            .build()
            .map_err(|e| StoreError::Pool(e.to_string()))?;
        let store = PostgresStore { pool, retention };
        store.migrate().await?;
        Ok(store)
    }

    async fn client(&self) -> Result<deadpool_postgres::Client, StoreError> {
        self.pool.get().await.map_err(|e| StoreError::Pool(e.to_string()))
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
        for (table, column, definition) in legacy::ADDED_COLUMNS {
            tx.batch_execute(&format!("ALTER TABLE IF EXISTS {table} ADD COLUMN IF NOT EXISTS {column} {definition}"))
                .await?;
        }
        idempotent_endpoint::postgres::install(&*tx).await?;
        tx.batch_execute(SCHEMA).await?;
        if exists(&tx, legacy::OLD_KEY_TABLE).await? {
            tx.batch_execute(legacy::COPY_KEYS).await?;
            tx.batch_execute(legacy::LINK_ORDERS).await?;
            tx.batch_execute(legacy::DROP_OLD_KEYS).await?;
        }
        if exists(&tx, legacy::OLD_OUTBOX).await? {
            tx.batch_execute(&legacy::copy_outbox()).await?;
            tx.batch_execute(legacy::DROP_OLD_OUTBOX).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// See [`super::Store::process`]: the library's `postgres::run` on a pooled connection. The `work_delay`
    /// is slept inside the transaction, with the key locked.
    pub(crate) async fn process(
        &self,
        request: KeyedRequest,
        options: ProcessOptions,
        work: WorkFn,
    ) -> Result<Outcome, StoreError> {
        let mut client = self.client().await?;
        let keyed = request.keyed();
        let result = idempotent_endpoint::postgres::run(&mut client, &keyed, self.retention, move |tx| {
            Box::pin(async move {
                if let Some(delay) = options.work_delay {
                    tokio::time::sleep(delay).await;
                }
                let Work { order, response } = work(&request);
                if let Some(order) = &order {
                    insert_order(tx, order, None).await?;
                }
                if options.fail_before_commit {
                    // Neither the key row nor the order survives.
                    return Err(StoreError::InjectedCrash);
                }
                Ok(response)
            })
        })
        .await;
        outcome(result)
    }

    /// The library's `phases::postgres::begin` on a pooled connection (see [`super::Store::begin`]).
    pub(crate) async fn begin(&self, request: &KeyedRequest, lease: Duration) -> Result<Begun, StoreError> {
        let mut client = self.client().await?;
        phases::begin(&mut client, &request.keyed(), self.retention, lease).await.map_err(library_error)
    }

    /// The library's `phases::postgres::advance` with `work` as the step's rows.
    pub(crate) async fn advance(
        &self,
        held: &mut Held,
        point: RecoveryPoint,
        lease: Duration,
        work: PhaseWork,
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let result = phases::advance(&mut client, held, point.as_str(), lease, move |tx| {
            Box::pin(async move {
                match work {
                    PhaseWork::InsertOrder(order, row_id) => insert_order(tx, &order, Some(&row_id)).await,
                    PhaseWork::SetCharge { order_id, charge_id } => {
                        tx.execute("UPDATE orders SET charge_id = $1 WHERE id = $2", &[&charge_id, &order_id]).await?;
                        Ok(())
                    }
                }
            })
        })
        .await;
        outcome(result)
    }

    /// The library's `phases::postgres::finish`, enqueueing `message` in the same transaction.
    pub(crate) async fn finish(
        &self,
        held: Held,
        response: StoredResponse,
        message: FinishWork,
    ) -> Result<StoredResponse, StoreError> {
        let mut client = self.client().await?;
        let result = phases::finish(&mut client, held, move |tx| {
            Box::pin(async move {
                if let Some(message) = &message {
                    outbox::enqueue_postgres(tx, message).await?;
                }
                Ok::<_, StoreError>(response)
            })
        })
        .await;
        stored(outcome(result)?)
    }

    /// The library's `phases::postgres::release`.
    pub(crate) async fn release(&self, held: Held) -> Result<(), StoreError> {
        let client = self.client().await?;
        phases::release(&client, held).await.map_err(library_error)
    }

    /// The library's `phases::postgres::abandon`.
    pub(crate) async fn abandon(&self, held: Held) -> Result<(), StoreError> {
        let client = self.client().await?;
        phases::abandon(&client, held).await.map_err(library_error)
    }

    /// The library's `phases::postgres::unfinished`.
    pub(crate) async fn unfinished(&self, limit: i64, lease: Duration) -> Result<Vec<Held>, StoreError> {
        let mut client = self.client().await?;
        phases::unfinished(&mut client, limit, lease).await.map_err(library_error)
    }

    /// The order the key row with `row_id` made (`orders.key_row_id`), if it made one yet.
    pub(crate) async fn order_of_row(&self, row_id: String) -> Result<Option<Order>, StoreError> {
        let client = self.client().await?;
        let row = client.query_opt(concat!(select_orders!(), "WHERE o.key_row_id = $1"), &[&row_id]).await?;
        confirmed_one(&client, row.as_ref().map(decode_order).transpose()?).await
    }

    /// See [`super::Store::list_orders`].
    pub async fn list_orders(&self, account: &AccountId, limit: u32) -> Result<Vec<Order>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                concat!(select_orders!(), "WHERE o.account_id = $1 ORDER BY o.seq DESC LIMIT $2"),
                &[&account.as_str(), &i64::from(limit)],
            )
            .await?;
        confirmed(&client, rows.iter().map(decode_order).collect::<Result<_, _>>()?).await
    }

    /// See [`super::Store::get_order`].
    pub async fn get_order(&self, account: &AccountId, id: &str) -> Result<Option<Order>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(concat!(select_orders!(), "WHERE o.account_id = $1 AND o.id = $2"), &[&account.as_str(), &id])
            .await?;
        confirmed_one(&client, row.as_ref().map(decode_order).transpose()?).await
    }

    /// See [`super::Store::key_status`]: the library's `postgres::status` (the key's advisory lock in
    /// `pg_locks`, then the key row).
    pub async fn key_status(
        &self,
        account: &AccountId,
        key: &IdempotencyKey,
        retention: Duration,
    ) -> Result<KeyStatus, StoreError> {
        let client = self.client().await?;
        Ok(idempotent_endpoint::postgres::status(&client, account.as_str(), key, retention).await?)
    }

    /// The library's `postgres::settle` (see [`super::Store::settle`]).
    pub async fn settle(
        &self,
        account: &AccountId,
        key: &IdempotencyKey,
        retention: Duration,
    ) -> Result<KeyStatus, StoreError> {
        let mut client = self.client().await?;
        Ok(idempotent_endpoint::postgres::settle(&mut client, account.as_str(), key, retention).await?)
    }

    /// The newest order the account made with the key (an expired key may have been used again).
    pub async fn newest_order(&self, account: &AccountId, key: &IdempotencyKey) -> Result<Option<Order>, StoreError> {
        let client = self.client().await?;
        let row = client.query_opt(NEWEST_ORDER, &[&account.as_str(), &key.as_str()]).await?;
        confirmed_one(&client, row.as_ref().map(decode_order).transpose()?).await
    }

    /// See [`super::Store::sweep`]: the library's `postgres::sweep`. Deleting by age is safe to run from
    /// every instance at once.
    pub async fn sweep(&self, retention: Duration) -> Result<u64, StoreError> {
        let client = self.client().await?;
        Ok(idempotent_endpoint::postgres::sweep(&client, retention).await?)
    }

    /// See [`super::Store::health`].
    pub async fn health(&self) -> Result<(), StoreError> {
        let client = self.client().await?;
        client.query_one("SELECT 1", &[]).await?;
        Ok(())
    }
}

/// The library's outbox worker takes a pooled connection for each statement.
impl PgConnections for PostgresStore {
    type Connection = Pooled;

    async fn connection(&self) -> Result<Pooled, idempotent_endpoint::StoreError> {
        self.client().await.map(Pooled).map_err(|e| idempotent_endpoint::StoreError::Backend(Box::new(e)))
    }
}

/// A pooled connection, as the library's client (it goes back to the pool when dropped).
pub struct Pooled(deadpool_postgres::Client);

impl std::ops::Deref for Pooled {
    type Target = tokio_postgres::Client;

    fn deref(&self) -> &tokio_postgres::Client {
        &self.0
    }
}

/// Whether the database has the table `name`.
async fn exists(tx: &Transaction<'_>, name: &str) -> Result<bool, StoreError> {
    Ok(tx.query_one("SELECT to_regclass($1) IS NOT NULL", &[&name]).await?.try_get(0)?)
}

/// The newest order the account made with the key (an expired key may have been used again).
const NEWEST_ORDER: &str =
    concat!(select_orders!(), "WHERE o.account_id = $1 AND o.idempotency_key = $2 ORDER BY o.seq DESC LIMIT 1");

/// The rustls client configuration: the roots from `ca_file`, or the Mozilla roots.
fn tls_config(ca_file: Option<&Path>) -> Result<rustls::ClientConfig, StoreError> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_file {
        Some(path) => {
            let failed = |e: &dyn std::fmt::Display| StoreError::Tls(format!("{}: {e}", path.display()));
            for cert in CertificateDer::pem_file_iter(path).map_err(|e| failed(&e))? {
                roots.add(cert.map_err(|e| failed(&e))?).map_err(|e| failed(&e))?;
            }
            if roots.is_empty() {
                return Err(failed(&"no certificate in the file"));
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Inserts a new order, made by the key row with `key_row_id` (the order phases' rows have one).
async fn insert_order(
    tx: &tokio_postgres::Transaction<'_>,
    order: &Order,
    key_row_id: Option<&str>,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO orders (id, account_id, idempotency_key, items, total_cents, currency, created_at, key_row_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        &[
            &order.id,
            &order.account_id,
            &order.idempotency_key,
            &orders::encode_items(&order.items),
            &order.total_cents,
            &order.currency,
            &order.created_at,
            &key_row_id,
        ],
    )
    .await?;
    Ok(())
}

/// `orders` with their confirmations, read from the library's outbox.
async fn confirmed(client: &tokio_postgres::Client, mut orders: Vec<Order>) -> Result<Vec<Order>, StoreError> {
    let deliveries = outbox::deliveries_postgres(client, &confirmation_ids(&orders)).await?;
    confirm(&mut orders, &deliveries);
    Ok(orders)
}

/// [`confirmed`] for at most one order.
async fn confirmed_one(client: &tokio_postgres::Client, order: Option<Order>) -> Result<Option<Order>, StoreError> {
    Ok(confirmed(client, order.into_iter().collect()).await?.pop())
}

fn decode_order(row: &Row) -> Result<Order, StoreError> {
    let columns: OrderColumns = (
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
        row.try_get(4)?,
        row.try_get(5)?,
        row.try_get(6)?,
        row.try_get(7)?,
    );
    super::rows::decode_order(columns)
}
