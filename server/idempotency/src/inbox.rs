//! The inbox: the receiving half of the [`crate::outbox`], so a message delivered at least once is applied
//! once.
//!
//! A sender's outbox delivers each message at least once, each time with the same message id (a crash
//! between the receiver's answer and the sender's mark sends it again). The receiver calls
//! [`receive_sqlite`] or [`receive_postgres`] in its own transaction with the message's source and id: the
//! first delivery inserts an inbox record `(source, message_id)`, does the app's work with the same
//! transaction and stores the work's answer (a [`StoredResponse`], size-capped like a key row's) on the
//! record, so the work and the record commit together or not at all. A re-delivery finds the record, does
//! nothing and gets the first delivery's answer ([`Received::Duplicate`]).
//!
//! **Concurrent deliveries of one id.** The primary key `(source, message_id)` settles them: the second
//! delivery's insert waits for the first's transaction. If the first commits, the second gets
//! [`Received::Duplicate`] with the first's answer; if it rolls back, the second does the work. On SQLite the
//! wait is for the write lock (open the transaction with `BEGIN IMMEDIATE`, as [`SqliteInbox`] does, so the
//! wait is at its start, up to the busy timeout). On PostgreSQL it is the row lock of the uncommitted
//! insert, under READ COMMITTED (PostgreSQL's default); under REPEATABLE READ or SERIALIZABLE the second
//! fails with a serialization error instead, which the sender retries. Either way the work is never done
//! twice.
//!
//! **A failing work leaves no record.** The record and the work run inside a savepoint of the caller's
//! transaction: an `Err` from the work (or a store failure) rolls both back to it, and whatever the caller
//! wrote before stays as it was. A re-delivery then does the work.
//!
//! **Retention.** A record older than the retention counts as absent (a delivery of its id is applied again)
//! and the sweep ([`sweep_sqlite`], [`sweep_postgres`], [`SqliteInbox::sweep_every`]) deletes it, as for
//! key rows. Keep the retention longer than the sender may go on re-delivering a message.
//!
//! **Traces.** Each delivery runs in a span `inbox.receive` (kind consumer, OpenTelemetry's messaging
//! conventions for processing a message). Given the delivery's `traceparent` (the header the sender's outbox
//! sends, [`crate::outbox::delivery_traceparent`]), with the feature `otel` the span is a child of it and
//! linked to it, so the receipt joins the trace of the request that enqueued the message (see
//! [`crate::outbox`], "Traces"); without one it is a child of the current span.
//!
//! One source is one sender's id space (an app, a topic): ids only need to be unique within their source.
//! The inbox does not compare message contents: a message id names one message, as the outbox makes it.

use axum::response::{IntoResponse, Response};

use crate::error::StoreError;
use crate::response::StoredResponse;

#[cfg(feature = "postgres")]
use crate::error::RunError;
#[cfg(feature = "postgres")]
use crate::inbox_sql;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
use crate::response::MAX_STORED_BODY_BYTES;
#[cfg(feature = "postgres")]
use crate::retention::{expired_before, unix_now};
#[cfg(feature = "postgres")]
use std::time::Duration;

/// The inbox table on SQLite (created by [`install_sqlite`] and [`SqliteInbox::open`]). The answer columns
/// are empty only inside the transaction that inserted the record. The key rows' `install` does not create
/// it: the inbox builds on the key rows' modules, not they on it.
pub const SQLITE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS inbox_messages (
    source           TEXT    NOT NULL,
    message_id       TEXT    NOT NULL,
    status_code      INTEGER NULL,
    response_headers TEXT    NULL,
    response_body    TEXT    NULL,
    received_at      INTEGER NOT NULL,
    PRIMARY KEY (source, message_id)
);
CREATE INDEX IF NOT EXISTS inbox_messages_received_at ON inbox_messages (received_at);
";

/// The inbox table on PostgreSQL (created by [`install_postgres`]): [`crate::inbox_sql::SCHEMA`].
pub use crate::inbox_sql::SCHEMA as POSTGRES_SCHEMA;

pub use crate::inbox_sql::{check_ids, MAX_INBOX_ID_BYTES};

#[cfg(any(feature = "sqlite", feature = "postgres"))]
use crate::inbox_sql::SAVEPOINT;

/// What one delivery of a message got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// The first delivery of the id: the work was done and its answer committed with the record (once the
    /// caller commits).
    Applied(StoredResponse),
    /// A re-delivery: nothing was done; the first delivery's answer.
    Duplicate(StoredResponse),
}

impl Received {
    /// The answer: the work's, or for a duplicate the first delivery's.
    pub fn answer(&self) -> &StoredResponse {
        match self {
            Received::Applied(answer) | Received::Duplicate(answer) => answer,
        }
    }

    /// True for a re-delivery (nothing was done).
    pub fn is_duplicate(&self) -> bool {
        matches!(self, Received::Duplicate(_))
    }
}

impl IntoResponse for Received {
    /// The answer as the first delivery got it; a duplicate's also carries `Idempotent-Replayed: true`.
    fn into_response(self) -> Response {
        match self {
            Received::Applied(answer) => answer.into_http(false),
            Received::Duplicate(answer) => answer.into_http(true),
        }
    }
}

/// The span of one delivery's receipt: a child of the delivery's `traceparent` when it has one (feature
/// `otel`), else of the current span.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn receipt_span(source: &str, message_id: &str, traceparent: Option<&str>) -> tracing::Span {
    let span = tracing::info_span!(
        "inbox.receive",
        otel.kind = "consumer",
        messaging.operation.type = "process",
        messaging.message.id = %message_id,
        messaging.destination.name = %source,
    );
    if let Some(traceparent) = traceparent {
        crate::trace_context::continue_from(&span, traceparent);
    }
    span
}

/// A record's answer columns as read back; empty columns are a record whose transaction never finished,
/// which a commit cannot produce.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn recorded_answer(
    status: Option<u16>,
    headers: Option<String>,
    body: Option<String>,
) -> Result<StoredResponse, StoreError> {
    StoredResponse::from_columns(status, headers.as_deref(), body)
        .map_err(|e| StoreError::Corrupt(format!("inbox response_headers: {e}")))?
        .ok_or_else(|| StoreError::Corrupt("an inbox record without an answer".to_owned()))
}

/// The work's answer if it can be stored.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn storable(answer: StoredResponse) -> Result<StoredResponse, StoreError> {
    if answer.body.len() > MAX_STORED_BODY_BYTES {
        return Err(StoreError::ResponseTooLarge(answer.body.len()));
    }
    Ok(answer)
}

#[cfg(feature = "sqlite")]
pub use self::sqlite_inbox::{install_sqlite, receive_sqlite, sweep_sqlite, SqliteInbox};

#[cfg(feature = "sqlite")]
mod sqlite_inbox {
    use std::path::Path;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

    use super::{check_ids, recorded_answer, storable, Received, SAVEPOINT};
    use crate::error::{RunError, StoreError};
    use crate::response::StoredResponse;
    use crate::retention::{expired_before, unix_now};

    /// Creates the inbox table if missing.
    pub fn install_sqlite(conn: &Connection) -> Result<(), StoreError> {
        conn.execute_batch(super::SQLITE_SCHEMA)?;
        Ok(())
    }

    /// One delivery of `(source, message_id)` inside the caller's transaction (see the module docs): `work`
    /// runs only for the first delivery, with the same transaction, and its answer is stored on the record;
    /// a re-delivery gets [`Received::Duplicate`] with the first's answer. An `Err` (the work's, as
    /// [`RunError::Work`], or the store's) has rolled back the record and the work's writes; the caller may
    /// still commit what it wrote before. Open `tx` with `BEGIN IMMEDIATE` (see the module docs).
    /// `traceparent` is the delivery's (its `traceparent` header), which the receipt's span continues (see
    /// the module docs, "Traces").
    pub fn receive_sqlite<E>(
        tx: &Transaction<'_>,
        source: &str,
        message_id: &str,
        traceparent: Option<&str>,
        retention: Duration,
        work: impl FnOnce(&Transaction<'_>) -> Result<StoredResponse, E>,
    ) -> Result<Received, RunError<E>> {
        check_ids(source, message_id)?;
        let _receipt = super::receipt_span(source, message_id, traceparent).entered();
        tx.execute_batch(&format!("SAVEPOINT {SAVEPOINT}")).map_err(StoreError::from)?;
        let received = apply(tx, source, message_id, retention, work);
        let end = match received {
            Ok(_) => format!("RELEASE {SAVEPOINT}"),
            Err(_) => format!("ROLLBACK TO {SAVEPOINT}; RELEASE {SAVEPOINT}"),
        };
        tx.execute_batch(&end).map_err(StoreError::from)?;
        received
    }

    fn apply<E>(
        tx: &Transaction<'_>,
        source: &str,
        message_id: &str,
        retention: Duration,
        work: impl FnOnce(&Transaction<'_>) -> Result<StoredResponse, E>,
    ) -> Result<Received, RunError<E>> {
        let now = unix_now();
        // An expired record counts as absent even before a sweep deletes it.
        tx.execute(
            "DELETE FROM inbox_messages WHERE source = ?1 AND message_id = ?2 AND received_at < ?3",
            params![source, message_id, expired_before(now, retention)],
        )
        .map_err(StoreError::from)?;
        let inserted = tx
            .execute(
                "INSERT INTO inbox_messages (source, message_id, received_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (source, message_id) DO NOTHING",
                params![source, message_id, now],
            )
            .map_err(StoreError::from)?;
        if inserted == 0 {
            return Ok(Received::Duplicate(recorded(tx, source, message_id)?));
        }
        let answer = storable(work(tx).map_err(RunError::Work)?)?;
        tx.execute(
            "UPDATE inbox_messages SET status_code = ?1, response_headers = ?2, response_body = ?3
             WHERE source = ?4 AND message_id = ?5",
            params![answer.status, answer.encode_headers(), answer.body, source, message_id],
        )
        .map_err(StoreError::from)?;
        Ok(Received::Applied(answer))
    }

    /// The answer on an existing record.
    fn recorded(tx: &Transaction<'_>, source: &str, message_id: &str) -> Result<StoredResponse, StoreError> {
        let (status, headers, body) = tx
            .query_row(
                "SELECT status_code, response_headers, response_body FROM inbox_messages
                 WHERE source = ?1 AND message_id = ?2",
                params![source, message_id],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()?
            .ok_or_else(|| StoreError::Corrupt("an inbox record vanished while it was read".to_owned()))?;
        recorded_answer(status, headers, body)
    }

    /// Deletes inbox records older than `retention`; returns how many. The app's own rows are never touched.
    pub fn sweep_sqlite(conn: &Connection, retention: Duration) -> Result<u64, StoreError> {
        let deleted = conn.execute(
            "DELETE FROM inbox_messages WHERE received_at < ?1",
            params![expired_before(unix_now(), retention)],
        )?;
        Ok(deleted as u64)
    }

    /// A receiver's SQLite database shared by its handlers: one connection behind a mutex, used from the
    /// blocking pool, as [`crate::sqlite::SqliteKeys`] is for keyed endpoints. Cloning shares the connection.
    #[derive(Debug, Clone)]
    pub struct SqliteInbox {
        conn: Arc<Mutex<Connection>>,
        retention: Duration,
    }

    impl SqliteInbox {
        /// Opens (creating if needed) the database at `path` as [`crate::sqlite::SqliteKeys::open`] does (WAL,
        /// `synchronous = FULL`, the busy timeout) and installs the inbox table. The app creates its own
        /// tables with [`SqliteInbox::with_conn`].
        pub fn open(path: impl AsRef<Path>, retention: Duration) -> Result<Self, StoreError> {
            let conn = crate::sqlite::open_connection(path, crate::sqlite::Synchronous::Full)?;
            install_sqlite(&conn)?;
            Ok(SqliteInbox { conn: Arc::new(Mutex::new(conn)), retention })
        }

        /// How long message ids are remembered.
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
            tokio::task::spawn_blocking(move || f(&mut crate::sqlite::lock(&conn)))
                .await
                .map_err(|e| StoreError::Task(e.to_string()))?
        }

        /// One delivery in its own `BEGIN IMMEDIATE` transaction: [`receive_sqlite`], then the commit. The
        /// work runs on a blocking thread and writes rows; it does not wait on the network. The transaction
        /// runs in its own task, so a sender hanging up cannot cancel it half way: it commits, and the
        /// sender's re-delivery gets [`Received::Duplicate`]. `traceparent` is the delivery's (see the
        /// module docs, "Traces").
        pub async fn receive<E, F>(
            &self,
            source: String,
            message_id: String,
            traceparent: Option<String>,
            work: F,
        ) -> Result<Received, RunError<E>>
        where
            E: Send + 'static,
            F: FnOnce(&Transaction<'_>) -> Result<StoredResponse, E> + Send + 'static,
        {
            let conn = Arc::clone(&self.conn);
            let retention = self.retention;
            // The blocking thread has no current span of its own: the caller's is the receipt's parent.
            let caller = tracing::Span::current();
            tokio::task::spawn_blocking(move || {
                let _caller = caller.entered();
                let mut conn = crate::sqlite::lock(&conn);
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(StoreError::from)?;
                let received = receive_sqlite(&tx, &source, &message_id, traceparent.as_deref(), retention, work)?;
                tx.commit().map_err(StoreError::from)?;
                Ok(received)
            })
            .await
            .map_err(|e| StoreError::Task(e.to_string()))?
        }

        /// Deletes expired inbox records; returns how many.
        pub async fn sweep(&self) -> Result<u64, StoreError> {
            let retention = self.retention;
            self.with_conn(move |conn| sweep_sqlite(conn, retention)).await
        }

        /// The retention sweep as a task: deletes expired inbox records every `interval` until `shutdown`
        /// turns true (or its sender is dropped). The app's own rows are never touched.
        pub async fn sweep_every(self, interval: Duration, shutdown: tokio::sync::watch::Receiver<bool>) {
            crate::periodic::every(interval, shutdown, || async {
                match self.sweep().await {
                    Ok(0) => {}
                    Ok(deleted) => tracing::info!(deleted, "swept expired inbox records"),
                    Err(error) => tracing::warn!(%error, "inbox sweep failed"),
                }
            })
            .await;
        }
    }
}

/// Creates the inbox table if missing.
#[cfg(feature = "postgres")]
pub async fn install_postgres(client: &tokio_postgres::Client) -> Result<(), StoreError> {
    client.batch_execute(POSTGRES_SCHEMA).await?;
    Ok(())
}

/// One delivery of `(source, message_id)` inside the caller's tokio-postgres transaction (READ COMMITTED;
/// see the module docs): `work` runs only for the first delivery, with the same transaction, and its answer
/// is stored on the record; a re-delivery gets [`Received::Duplicate`] with the first's answer, after waiting
/// for a transaction that is inserting the same id to end. An `Err` (the work's, as [`RunError::Work`], or
/// the store's) has rolled back the record and the work's writes to a savepoint, so the transaction is usable
/// again and what the caller wrote before stays. Dropping the future mid-way leaves the transaction in an
/// unknown state: roll it back. `traceparent` is the delivery's (see the module docs, "Traces").
#[cfg(feature = "postgres")]
pub async fn receive_postgres<E, F>(
    tx: &tokio_postgres::Transaction<'_>,
    source: &str,
    message_id: &str,
    traceparent: Option<&str>,
    retention: Duration,
    work: F,
) -> Result<Received, RunError<E>>
where
    F: for<'t> FnOnce(&'t tokio_postgres::Transaction<'t>) -> crate::postgres::WorkFuture<'t, E>,
{
    check_ids(source, message_id)?;
    let receipt = receipt_span(source, message_id, traceparent);
    let received = async move {
        tx.batch_execute(&format!("SAVEPOINT {SAVEPOINT}")).await.map_err(StoreError::from)?;
        let received = apply_postgres(tx, source, message_id, retention, work).await;
        let end = match received {
            Ok(_) => format!("RELEASE {SAVEPOINT}"),
            Err(_) => format!("ROLLBACK TO {SAVEPOINT}; RELEASE {SAVEPOINT}"),
        };
        tx.batch_execute(&end).await.map_err(StoreError::from)?;
        received
    };
    tracing::Instrument::instrument(received, receipt).await
}

#[cfg(feature = "postgres")]
async fn apply_postgres<E, F>(
    tx: &tokio_postgres::Transaction<'_>,
    source: &str,
    message_id: &str,
    retention: Duration,
    work: F,
) -> Result<Received, RunError<E>>
where
    F: for<'t> FnOnce(&'t tokio_postgres::Transaction<'t>) -> crate::postgres::WorkFuture<'t, E>,
{
    let now = unix_now();
    // An expired record counts as absent even before a sweep deletes it.
    tx.execute(inbox_sql::FORGET_EXPIRED, &[&source, &message_id, &expired_before(now, retention)])
        .await
        .map_err(StoreError::from)?;
    // Waits here while another transaction holds an uncommitted insert of the same id.
    let inserted = tx.execute(inbox_sql::INSERT, &[&source, &message_id, &now]).await.map_err(StoreError::from)?;
    if inserted == 0 {
        let row = tx
            .query_opt(inbox_sql::SELECT_ANSWER, &[&source, &message_id])
            .await
            .map_err(StoreError::from)?
            .ok_or_else(|| StoreError::Corrupt("an inbox record vanished while it was read".to_owned()))?;
        let status: Option<i32> = row.try_get(0).map_err(StoreError::from)?;
        let status = status
            .map(|code| u16::try_from(code).map_err(|_| StoreError::Corrupt(format!("inbox status_code {code}"))))
            .transpose()?;
        let answer = recorded_answer(
            status,
            row.try_get(1).map_err(StoreError::from)?,
            row.try_get(2).map_err(StoreError::from)?,
        )?;
        return Ok(Received::Duplicate(answer));
    }
    let answer = storable(work(tx).await.map_err(RunError::Work)?)?;
    tx.execute(
        inbox_sql::STORE_ANSWER,
        &[&i32::from(answer.status), &answer.encode_headers(), &answer.body, &source, &message_id],
    )
    .await
    .map_err(StoreError::from)?;
    Ok(Received::Applied(answer))
}

/// Deletes inbox records older than `retention`; returns how many. The app's own rows are never touched.
#[cfg(feature = "postgres")]
pub async fn sweep_postgres(client: &tokio_postgres::Client, retention: Duration) -> Result<u64, StoreError> {
    Ok(client.execute(inbox_sql::SWEEP, &[&expired_before(unix_now(), retention)]).await?)
}
