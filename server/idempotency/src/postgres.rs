//! The key row in a tokio-postgres transaction.
//!
//! [`run`] does one keyed request in ONE transaction: in one statement it takes a transaction-scoped
//! advisory lock on the key (held elsewhere: the first request is still in flight, 409 at once) and inserts
//! the key row, replacing an expired one; if it was inserted it hands the transaction to the app's work,
//! stores the work's answer on the row and commits (a fresh key: BEGIN, that statement, the work's, the
//! answer, COMMIT). The app's own rows commit with the key row or not at all; the advisory lock ends
//! with the transaction, so a crashed or cancelled request leaves nothing held. Several server instances
//! may share the database. A key row that is a fence ([`settle`]) is answered [`Outcome::Fenced`] and no work
//! is done.
//!
//! **In flight is in flight, across instances.** [`status`] looks the key's advisory lock up in `pg_locks`
//! (without taking it), so a key reads `in_flight` in every instance from the moment its transaction holds
//! the lock until it has committed or rolled back. Who hangs up decides nothing:
//! - [`run_spawned`] runs the transaction in its own task, which owns the connection: a client that hangs
//!   up drops the handler, not the work, which commits and is replayed to the retry. Use it from handlers.
//! - [`run`] runs in the caller's future: if that future is dropped (the client hung up and the server
//!   cancels the handler), the transaction is dropped and rolled back (tokio-postgres sends `ROLLBACK`),
//!   which ends the lock; the key reads `in_flight` until the rollback and `unknown` after it, which is then
//!   true: nothing was done.

/// The tokio-postgres this module is built on: use its `Client` and `Transaction` from here so the versions
/// agree.
pub use tokio_postgres;

use std::future::Future;
use std::ops::DerefMut;
use std::pin::Pin;
use std::time::Duration;

use tokio_postgres::{Client, GenericClient, Transaction};

use crate::error::{check_scope, RunError, StoreError};
use crate::key::IdempotencyKey;
use crate::outcome::{Outcome, FENCED_FINGERPRINT};
use crate::postgres_sql::{self as sql, lock_name};
use crate::request::KeyedRequest;
use crate::response::{StoredResponse, MAX_STORED_BODY_BYTES};
use crate::retention::{expired_before, unix_now};
use crate::status::KeyStatus;

/// The key table (created by [`install`]).
pub use crate::postgres_sql::SCHEMA;

/// How long [`settle`] waits for another transaction that holds the key's row (one inserting it and not yet
/// committed, or phased work deciding on it) before it answers `in_flight`.
pub const SETTLE_LOCK_TIMEOUT: Duration = Duration::from_millis(sql::SETTLE_LOCK_TIMEOUT_MS);

/// How long a phase ([`crate::phases::postgres`]) waits for a key row another transaction holds before it
/// gives up with [`StoreError::KeyBusy`]: a phase's step makes no call outside the database, so a longer
/// wait means the holder is stuck. A connection whose session sets its own `lock_timeout` (opened with
/// `options=-c lock_timeout=...`) keeps that one instead.
pub const KEY_LOCK_TIMEOUT: Duration = Duration::from_millis(sql::KEY_LOCK_TIMEOUT_MS);

/// The future of the app's work: `|tx| Box::pin(async move { ... })`.
pub type WorkFuture<'a, E> = Pin<Box<dyn Future<Output = Result<StoredResponse, E>> + Send + 'a>>;

/// Creates the key table and the outbox's table if missing (a receiver installs the inbox's with
/// `inbox::install_postgres`), over a client or inside a transaction (with the app's own migration).
pub async fn install(client: &impl GenericClient) -> Result<(), StoreError> {
    client.batch_execute(SCHEMA).await?;
    client.batch_execute(crate::outbox_table::POSTGRES_SCHEMA).await?;
    Ok(())
}

/// One keyed request in one transaction (see the module docs). `work` runs only for a fresh key, with the
/// open transaction; its `Err` rolls everything back and is returned as [`RunError::Work`]. Dropping the
/// returned future rolls the transaction back (the key reads `unknown` again); [`run_spawned`] does not.
/// Its claim waits for a key row only while phased work ([`crate::phases::postgres`]) holds the same key;
/// if the session's `statement_timeout` ends that wait, nothing was done: [`StoreError::KeyBusy`].
#[tracing::instrument(
    name = "idempotency.transaction",
    skip_all,
    fields(db.system.name = "postgresql", idempotency.key_hash = %crate::key_hash(request.key.as_str())),
)]
pub async fn run<E, F>(
    client: &mut Client,
    request: &KeyedRequest,
    retention: Duration,
    work: F,
) -> Result<Outcome, RunError<E>>
where
    F: for<'t> FnOnce(&'t Transaction<'t>) -> WorkFuture<'t, E>,
{
    check_scope(&request.scope)?;
    let now = unix_now();
    let tx = client.transaction().await.map_err(StoreError::from)?;
    let (scope, key) = (request.scope.as_str(), request.key.as_str());
    let Some(claimed) = claim(&tx, scope, key, &request.fingerprint, now, retention).await? else {
        tx.rollback().await.map_err(StoreError::from)?;
        return Ok(Outcome::InFlight);
    };
    if !claimed {
        let row = tx.query_one(sql::SELECT_ROW, &[&scope, &key]).await.map_err(StoreError::from)?;
        let stored_fingerprint: String = row.try_get(0).map_err(StoreError::from)?;
        let stored = decode(row.try_get(1), row.try_get(2), row.try_get(3))?;
        tx.commit().await.map_err(StoreError::from)?;
        return Ok(Outcome::for_existing(&request.fingerprint, &stored_fingerprint, stored));
    }
    // A refusal rolls back and waits for it: the key's lock ends only then, and a retry that arrives right
    // after the answer must find the key free (dropping the transaction would roll back in the background).
    let response = match work(&tx).await {
        Ok(response) if response.body.len() <= MAX_STORED_BODY_BYTES => response,
        Ok(response) => {
            tx.rollback().await.map_err(StoreError::from)?;
            return Err(StoreError::ResponseTooLarge(response.body.len()).into());
        }
        Err(error) => {
            tx.rollback().await.map_err(StoreError::from)?;
            return Err(RunError::Work(error));
        }
    };
    tx.execute(
        sql::STORE_ANSWER,
        &[&i32::from(response.status), &response.encode_headers(), &response.body, &scope, &key],
    )
    .await
    .map_err(StoreError::from)?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(Outcome::Fresh(response))
}

/// Bounds the rest of `tx`'s waits for a key row ([`KEY_LOCK_TIMEOUT`], or the session's own `lock_timeout`).
pub(crate) async fn bound_key_waits(tx: &Transaction<'_>) -> Result<(), StoreError> {
    tx.execute(sql::SET_KEY_LOCK_TIMEOUT, &[&sql::key_lock_timeout()]).await?;
    Ok(())
}

/// The error of a statement that may wait for a key row: one that gave up waiting (`lock_timeout`:
/// `lock_not_available`; the session's `statement_timeout` or a cancel: `query_canceled`) did nothing and is
/// [`StoreError::KeyBusy`]; anything else is [`StoreError::Postgres`].
pub(crate) fn key_wait(error: tokio_postgres::Error) -> StoreError {
    match error.code() {
        Some(code) if [sql::LOCK_NOT_AVAILABLE, sql::QUERY_CANCELED].contains(&code.code()) => StoreError::KeyBusy,
        _ => StoreError::Postgres(error),
    }
}

/// Deletes the key's row if it expired: a request with an expired key is new again, even before a sweep.
pub(crate) async fn forget_expired(
    tx: &Transaction<'_>,
    scope: &str,
    key: &str,
    retention: Duration,
) -> Result<(), StoreError> {
    tx.execute(sql::FORGET_EXPIRED, &[&scope, &key, &expired_before(unix_now(), retention)]).await.map_err(key_wait)?;
    Ok(())
}

/// The stored answer from a row's columns, validated.
pub(crate) fn decode(
    status: Result<Option<i32>, tokio_postgres::Error>,
    headers: Result<Option<String>, tokio_postgres::Error>,
    body: Result<Option<String>, tokio_postgres::Error>,
) -> Result<Option<StoredResponse>, StoreError> {
    let status = match status? {
        Some(code) => Some(u16::try_from(code).map_err(|_| StoreError::Corrupt(format!("status_code {code}")))?),
        None => None,
    };
    StoredResponse::from_columns(status, headers?.as_deref(), body?)
        .map_err(|e| StoreError::Corrupt(format!("response_headers: {e}")))
}

/// The key-status answer for `(scope, key)` within the retention window: `done`, `in_flight` (the key's
/// advisory lock is held in any instance: its request is in its transaction; or a row without an answer:
/// phased work not finished), `fenced`, or `unknown`.
pub async fn status(
    client: &Client,
    scope: &str,
    key: &IdempotencyKey,
    retention: Duration,
) -> Result<KeyStatus, StoreError> {
    // The lock is looked up before the row, in its own statement: a transaction that ends after the lookup
    // has committed before the row's statement takes its snapshot. In one statement, the snapshot would
    // come first and a commit in between would read as `unknown`.
    // A bigint advisory lock shows in pg_locks as classid (high 32 bits), objid (low 32), objsubid 1.
    let held: bool = client.query_one(sql::LOCK_HELD, &[&lock_name(scope, key.as_str())]).await?.try_get(0)?;
    let row = client
        .query_opt(sql::SELECT_LIVE_ROW, &[&scope, &key.as_str(), &expired_before(unix_now(), retention)])
        .await?;
    let row = match row {
        Some(row) => Some((row.try_get::<_, String>(0)?, decode(row.try_get(1), row.try_get(2), row.try_get(3))?)),
        None => None,
    };
    Ok(KeyStatus::looked_up(held, row.as_ref().map(|(f, stored)| (f.as_str(), stored.clone()))))
}

/// Settles `(scope, key)` in one transaction (the fence). A key whose advisory lock is held in any instance
/// (a request with it is in its transaction) is `in_flight` at once: settle again later. Otherwise, holding
/// the lock itself, it inserts a fence row ([`FENCED_FINGERPRINT`], no answer; an expired row is replaced, as
/// a request would replace it) if the key has none, and answers `fenced`; a key with a row gets the row's
/// status (`done` with its answer, `in_flight` for unfinished phased work, `fenced` again). The insert waits
/// for a transaction that holds the same key's row (phased work that does not take the advisory lock) for
/// up to [`SETTLE_LOCK_TIMEOUT`], then answers `in_flight`. The primary key decides every race: a request
/// and a settle of one key never both win, so either the work is done or the key is fenced. A request with
/// a fenced key is answered [`Outcome::Fenced`] and does no work, until the fence expires with the retention.
/// While the fence is written the key's lock is held, so a request arriving in that instant gets 409 and its
/// retry 410.
pub async fn settle(
    client: &mut Client,
    scope: &str,
    key: &IdempotencyKey,
    retention: Duration,
) -> Result<KeyStatus, StoreError> {
    check_scope(scope)?;
    let tx = client.transaction().await?;
    let timeout = sql::settle_lock_timeout();
    tx.execute(sql::SET_LOCK_TIMEOUT, &[&timeout]).await?;
    let fenced = async {
        let Some(inserted) = claim(&tx, scope, key.as_str(), FENCED_FINGERPRINT, unix_now(), retention).await? else {
            return Ok(None);
        };
        let row = match inserted {
            true => None,
            false => match tx.query_opt(sql::SELECT_ROW, &[&scope, &key.as_str()]).await? {
                Some(row) => {
                    Some((row.try_get::<_, String>(0)?, decode(row.try_get(1), row.try_get(2), row.try_get(3))?))
                }
                None => None,
            },
        };
        let status = KeyStatus::settled(inserted, row.as_ref().map(|(f, stored)| (f.as_str(), stored.clone())));
        // A fence inserted, or an existing row read: commit. No row after a conflict (the claim locks the
        // row it conflicted with, so no sweep removes it; kept for safety): nothing to keep, and asking
        // again settles it.
        Ok::<_, StoreError>(Some((inserted || row.is_some(), status)))
    }
    .await;
    match fenced {
        Ok(Some((true, status))) => {
            tx.commit().await?;
            Ok(status)
        }
        Ok(Some((false, status))) => Ok(status),
        // Another transaction holds the key's lock: nothing was written, and dropping `tx` rolls it back.
        Ok(None) => Ok(KeyStatus::InFlight),
        Err(StoreError::KeyBusy) => Ok(KeyStatus::InFlight),
        Err(e) => Err(e),
    }
}

/// [`run`] in its own task, which owns `client` (a pooled connection that dereferences to the client, such
/// as bb8's `get_owned()`, a `tokio::sync::OwnedMutexGuard<Client>`, or a `Box<Client>`) until the
/// transaction has committed or rolled back. Dropping the returned future (the client hung up) does not
/// cancel the work: it commits, the key reads `in_flight` until then ([`status`], in any instance) and its
/// answer is replayed to the retry. A panic in the work rolls back and is [`StoreError::Task`].
pub async fn run_spawned<C, E, F>(
    client: C,
    request: KeyedRequest,
    retention: Duration,
    work: F,
) -> Result<Outcome, RunError<E>>
where
    C: DerefMut<Target = Client> + Send + 'static,
    E: Send + 'static,
    F: for<'t> FnOnce(&'t Transaction<'t>) -> WorkFuture<'t, E> + Send + 'static,
{
    let mut client = client;
    tokio::spawn(async move { run(&mut client, &request, retention, work).await })
        .await
        .map_err(|e| StoreError::Task(e.to_string()))?
}

/// The whole key-status answer for a raw key from the URL (`GET .../idempotency-keys/{key}`) over
/// [`status`]: see [`crate::status::respond`].
pub async fn status_response(
    client: &Client,
    scope: &str,
    raw_key: &str,
    retention: Duration,
) -> axum::response::Response {
    crate::status::respond(raw_key, |key| async move { status(client, scope, &key, retention).await }).await
}

/// The whole answer to settling a raw key from the URL (`POST .../idempotency-keys/{key}`) over [`settle`]:
/// see [`crate::status::respond`].
pub async fn settle_response(
    client: &mut Client,
    scope: &str,
    raw_key: &str,
    retention: Duration,
) -> axum::response::Response {
    crate::status::respond(raw_key, |key| async move { settle(client, scope, &key, retention).await }).await
}

/// Where work that runs outside a request (the [`crate::outbox::Worker`]) gets a connection for each
/// statement: a shared `Arc<Client>`, or the app's pool. For a pool, implement it for the pool (or a
/// wrapper of it) with a pooled connection that dereferences to the client and goes back to the pool when
/// dropped; a pool's own failure is [`StoreError::Backend`].
pub trait PgConnections: Clone + Send + Sync + 'static {
    /// A connection, held for one statement.
    type Connection: std::ops::Deref<Target = Client> + Send;
    /// Takes a connection.
    fn connection(&self) -> impl Future<Output = Result<Self::Connection, StoreError>> + Send;
}

/// One client shared by every statement (tokio-postgres pipelines concurrent statements on it).
impl PgConnections for std::sync::Arc<Client> {
    type Connection = std::sync::Arc<Client>;

    async fn connection(&self) -> Result<Self::Connection, StoreError> {
        Ok(std::sync::Arc::clone(self))
    }
}

/// Takes the key's advisory lock for the rest of `tx` without waiting and, holding it, inserts the key row
/// or replaces an expired one ([`sql::CLAIM_KEY`], one statement): `None` while another transaction holds
/// the lock (nothing written), else whether the row was claimed (`false`: a live row is there).
async fn claim(
    tx: &Transaction<'_>,
    scope: &str,
    key: &str,
    fingerprint: &str,
    now: i64,
    retention: Duration,
) -> Result<Option<bool>, StoreError> {
    let cutoff = expired_before(now, retention);
    let row = tx
        .query_one(sql::CLAIM_KEY, &[&lock_name(scope, key), &scope, &key, &fingerprint, &now, &cutoff])
        .await
        .map_err(key_wait)?;
    if !row.try_get::<_, bool>(0)? {
        return Ok(None);
    }
    Ok(Some(row.try_get(1)?))
}

/// Deletes key rows older than `retention`; returns how many. Business rows are never touched.
pub async fn sweep(client: &Client, retention: Duration) -> Result<u64, StoreError> {
    Ok(client.execute(sql::SWEEP, &[&expired_before(unix_now(), retention)]).await?)
}
