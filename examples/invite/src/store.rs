//! Where the invitations live: SQLite (one file, one instance) or PostgreSQL (any number of instances on
//! one database). Each store does the same three things: an invitation with its email in the key's
//! transaction, the key-status and fence answers, and the list.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use idempotent_endpoint::outbox::{self, Message};
use idempotent_endpoint::postgres::{self, tokio_postgres};
use idempotent_endpoint::sqlite::{rusqlite, SqliteKeys};
use idempotent_endpoint::{KeyedRequest, Outcome, Problem, RunError, StoreError, StoredResponse, DEFAULT_RETENTION};
use tokio::sync::{watch, Mutex, OwnedMutexGuard};

/// How many connections serve requests on PostgreSQL (the outbox worker and the sweep have their own).
const POSTGRES_CONNECTIONS: usize = 4;
/// How often expired key rows are swept.
const SWEEP_INTERVAL: Duration = Duration::from_secs(3600);

/// The invitations table (SQLite; PostgreSQL's is [`POSTGRES_SCHEMA`]).
const SQLITE_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS invites (id INTEGER PRIMARY KEY, email TEXT NOT NULL)";
/// The invitations table on PostgreSQL.
const POSTGRES_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS invites (id BIGSERIAL PRIMARY KEY, email TEXT NOT NULL)";
/// Held while an instance creates the tables, so instances starting together do not race on them.
const SCHEMA_LOCK: &str = "SELECT pg_advisory_lock(hashtext('invite-example schema'))";
const SCHEMA_UNLOCK: &str = "SELECT pg_advisory_unlock(hashtext('invite-example schema'))";

/// The store of one instance.
#[derive(Clone)]
pub enum Store {
    /// A SQLite file.
    Sqlite(SqliteKeys),
    /// A PostgreSQL database shared with other instances.
    Postgres(Arc<Postgres>),
}

/// A few connections for requests, handed out in turn, and one for the outbox worker and the sweep.
pub struct Postgres {
    requests: Vec<Arc<Mutex<tokio_postgres::Client>>>,
    next: AtomicUsize,
    background: Arc<tokio_postgres::Client>,
}

impl Postgres {
    /// The next request connection, held until the returned guard is dropped.
    async fn connection(&self) -> OwnedMutexGuard<tokio_postgres::Client> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.requests.len();
        Arc::clone(&self.requests[i]).lock_owned().await
    }
}

/// One connection, its connection task spawned (it ends when the client is dropped or the server goes away).
async fn connect(url: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::error!(%error, "PostgreSQL connection ended");
        }
    });
    Ok(client)
}

impl Store {
    /// Opens the SQLite file `db` (created if missing), or PostgreSQL at `database_url` when given, and
    /// creates the tables.
    pub async fn open(db: &str, database_url: Option<&str>) -> Result<Store, Box<dyn std::error::Error>> {
        let Some(url) = database_url else {
            let keys = SqliteKeys::open(db, DEFAULT_RETENTION)?;
            keys.with_conn(|c| Ok(c.execute_batch(SQLITE_SCHEMA)?)).await?;
            return Ok(Store::Sqlite(keys));
        };
        let background = connect(url).await?;
        background.batch_execute(SCHEMA_LOCK).await?;
        let installed = async {
            postgres::install(&background).await?;
            Ok::<_, StoreError>(background.batch_execute(POSTGRES_SCHEMA).await?)
        }
        .await;
        background.batch_execute(SCHEMA_UNLOCK).await?;
        installed?;
        let mut requests = Vec::with_capacity(POSTGRES_CONNECTIONS);
        for _ in 0..POSTGRES_CONNECTIONS {
            requests.push(Arc::new(Mutex::new(connect(url).await?)));
        }
        Ok(Store::Postgres(Arc::new(Postgres {
            requests,
            next: AtomicUsize::new(0),
            background: Arc::new(background),
        })))
    }

    /// Stores one invitation for `email` and its email in the outbox, in the key's transaction.
    pub async fn invite(&self, request: KeyedRequest, email: String) -> Result<Outcome, RunError<Problem>> {
        match self {
            Store::Sqlite(keys) => {
                keys.run(request, move |tx| {
                    tx.execute("INSERT INTO invites (email) VALUES (?1)", rusqlite::params![email])
                        .map_err(|e| internal(e.into()))?;
                    let (mail, created) = invitation(tx.last_insert_rowid(), &email)?;
                    outbox::enqueue_sqlite(tx, &mail).map_err(internal)?;
                    Ok(created)
                })
                .await
            }
            Store::Postgres(pg) => {
                let client = pg.connection().await;
                postgres::run_spawned(client, request, DEFAULT_RETENTION, move |tx| {
                    Box::pin(async move {
                        let row = tx
                            .query_one("INSERT INTO invites (email) VALUES ($1) RETURNING id", &[&email])
                            .await
                            .map_err(|e| internal(e.into()))?;
                        let id: i64 = row.try_get(0).map_err(|e| internal(e.into()))?;
                        let (mail, created) = invitation(id, &email)?;
                        outbox::enqueue_postgres(tx, &mail).await.map_err(internal)?;
                        Ok(created)
                    })
                })
                .await
            }
        }
    }

    /// The key-status answer (`GET .../idempotency-keys/{key}`).
    pub async fn status_response(&self, scope: &str, raw_key: &str) -> axum::response::Response {
        match self {
            Store::Sqlite(keys) => keys.status_response(scope.to_owned(), raw_key).await,
            Store::Postgres(pg) => {
                postgres::status_response(&*pg.connection().await, scope, raw_key, DEFAULT_RETENTION).await
            }
        }
    }

    /// The fence (`POST .../idempotency-keys/{key}`).
    pub async fn settle_response(&self, scope: &str, raw_key: &str) -> axum::response::Response {
        match self {
            Store::Sqlite(keys) => keys.settle_response(scope.to_owned(), raw_key).await,
            Store::Postgres(pg) => {
                postgres::settle_response(&mut *pg.connection().await, scope, raw_key, DEFAULT_RETENTION).await
            }
        }
    }

    /// Every invitation, oldest first, as `{"id", "email"}`.
    pub async fn list(&self) -> Result<Vec<serde_json::Value>, Problem> {
        let listed = match self {
            Store::Sqlite(keys) => {
                keys.with_conn(|conn| {
                    let mut stmt = conn.prepare("SELECT id, email FROM invites ORDER BY id")?;
                    let rows = stmt.query_map([], |r| Ok(entry(r.get(0)?, r.get(1)?)))?;
                    Ok(rows.collect::<Result<Vec<_>, _>>()?)
                })
                .await
            }
            Store::Postgres(pg) => {
                async {
                    let rows = pg.connection().await.query("SELECT id, email FROM invites ORDER BY id", &[]).await?;
                    rows.iter().map(|r| Ok(entry(r.try_get(0)?, r.try_get(1)?))).collect::<Result<Vec<_>, StoreError>>()
                }
                .await
            }
        };
        listed.map_err(internal)
    }

    /// The outbox worker (delivering with `deliver`) and the retention sweep, until `stopped` turns true.
    pub async fn background<D, Fut>(self, deliver: D, stopped: watch::Receiver<bool>)
    where
        D: Fn(Message) -> Fut,
        Fut: std::future::Future<Output = Result<(), String>>,
    {
        let worker = outbox::Worker::default();
        match self {
            Store::Sqlite(keys) => {
                let sweep = keys.clone().sweep_every(SWEEP_INTERVAL, stopped.clone());
                tokio::join!(worker.run(keys, deliver, stopped), sweep);
            }
            Store::Postgres(pg) => {
                let client = Arc::clone(&pg.background);
                let sweep = idempotent_endpoint::periodic::every(SWEEP_INTERVAL, stopped.clone(), || async {
                    if let Err(error) = postgres::sweep(&pg.background, DEFAULT_RETENTION).await {
                        tracing::warn!(%error, "sweep failed");
                    }
                });
                tokio::join!(worker.run(client, deliver, stopped), sweep);
            }
        }
    }
}

/// Invitation `id`'s email and the endpoint's answer.
fn invitation(id: i64, email: &str) -> Result<(Message, StoredResponse), Problem> {
    let text = format!("You are invited. Your invitation is number {id}.");
    let mail = Message::new("invite-email", &serde_json::json!({ "to": email, "subject": "Invitation", "text": text }))
        .map_err(internal)?;
    let created = StoredResponse::json(StatusCode::CREATED, &serde_json::json!({ "id": id, "email": email }));
    Ok((mail, created.with_header("location", format!("/api/invites/{id}"))))
}

fn entry(id: i64, email: String) -> serde_json::Value {
    serde_json::json!({ "id": id, "email": email })
}

/// A store failure: logged, answered 500 (nothing was committed; retrying is safe).
fn internal(error: StoreError) -> Problem {
    tracing::error!(%error, "the store failed");
    Problem::internal()
}
