//! The key row in a tokio-postgres transaction.
//!
//! [`run`] does one keyed request in ONE transaction: it takes a transaction-scoped advisory lock on the key
//! (held elsewhere: the first request is still in flight, 409 at once), deletes the key's row if it expired,
//! inserts it, and if it was inserted hands the transaction to the app's work, stores the work's answer on
//! the row and commits. The app's own rows commit with the key row or not at all; the advisory lock ends
//! with the transaction, so a crashed or cancelled request leaves nothing held. Several server instances
//! may share the database.

/// The tokio-postgres this module is built on: use its `Client` and `Transaction` from here so the versions
/// agree.
pub use tokio_postgres;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio_postgres::{Client, Transaction};

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
    created_at       BIGINT  NOT NULL,
    recovery_point   TEXT    NOT NULL DEFAULT 'finished',
    row_id           TEXT    NULL,
    lock_token       TEXT    NULL,
    locked_until     BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (scope, key)
);
CREATE INDEX IF NOT EXISTS idempotency_records_unfinished ON idempotency_records (locked_until)
    WHERE recovery_point <> 'finished';
CREATE INDEX IF NOT EXISTS idempotency_records_created_at ON idempotency_records (created_at);
";

/// The future of the app's work: `|tx| Box::pin(async move { ... })`.
pub type WorkFuture<'a, E> = Pin<Box<dyn Future<Output = Result<StoredResponse, E>> + Send + 'a>>;

/// Creates the key table and the outbox's table if missing.
pub async fn install(client: &Client) -> Result<(), StoreError> {
    client.batch_execute(SCHEMA).await?;
    client.batch_execute(crate::outbox::POSTGRES_SCHEMA).await?;
    Ok(())
}

/// One keyed request in one transaction (see the module docs). `work` runs only for a fresh key, with the
/// open transaction; its `Err` rolls everything back and is returned as [`RunError::Work`].
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
    let lock_name = format!("{scope}\n{key}");
    let locked: bool = tx
        .query_one("SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))", &[&lock_name])
        .await
        .map_err(StoreError::from)?
        .try_get(0)
        .map_err(StoreError::from)?;
    if !locked {
        tx.rollback().await.map_err(StoreError::from)?;
        return Ok(Outcome::InFlight);
    }
    forget_expired(&tx, scope, key, retention).await?;
    let inserted = tx
        .execute(
            "INSERT INTO idempotency_records (scope, key, fingerprint, created_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (scope, key) DO NOTHING",
            &[&scope, &key, &request.fingerprint, &now],
        )
        .await
        .map_err(StoreError::from)?;
    if inserted == 0 {
        let row = tx
            .query_one(
                "SELECT fingerprint, status_code, response_headers, response_body FROM idempotency_records
                 WHERE scope = $1 AND key = $2",
                &[&scope, &key],
            )
            .await
            .map_err(StoreError::from)?;
        let stored_fingerprint: String = row.try_get(0).map_err(StoreError::from)?;
        let stored = decode(row.try_get(1), row.try_get(2), row.try_get(3))?;
        tx.commit().await.map_err(StoreError::from)?;
        return Ok(Outcome::for_existing(&request.fingerprint, &stored_fingerprint, stored));
    }
    let response = work(&tx).await.map_err(RunError::Work)?;
    if response.body.len() > MAX_STORED_BODY_BYTES {
        return Err(StoreError::ResponseTooLarge(response.body.len()).into());
    }
    tx.execute(
        "UPDATE idempotency_records SET status_code = $1, response_headers = $2, response_body = $3
         WHERE scope = $4 AND key = $5",
        &[&i32::from(response.status), &response.encode_headers(), &response.body, &scope, &key],
    )
    .await
    .map_err(StoreError::from)?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(Outcome::Fresh(response))
}

/// Deletes the key's row if it expired: a request with an expired key is new again, even before a sweep.
pub(crate) async fn forget_expired(
    tx: &Transaction<'_>,
    scope: &str,
    key: &str,
    retention: Duration,
) -> Result<(), StoreError> {
    tx.execute(
        "DELETE FROM idempotency_records WHERE scope = $1 AND key = $2 AND created_at < $3",
        &[&scope, &key, &expired_before(unix_now(), retention)],
    )
    .await?;
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

/// The key-status answer for `(scope, key)` within the retention window. A key whose advisory lock is held
/// (its first request is in its transaction) is in flight.
pub async fn status(
    client: &Client,
    scope: &str,
    key: &IdempotencyKey,
    retention: Duration,
) -> Result<KeyStatus, StoreError> {
    let row = client
        .query_opt(
            "SELECT status_code, response_headers, response_body FROM idempotency_records
             WHERE scope = $1 AND key = $2 AND created_at >= $3",
            &[&scope, &key.as_str(), &expired_before(unix_now(), retention)],
        )
        .await?;
    // A bigint advisory lock shows in pg_locks as classid (high 32 bits), objid (low 32), objsubid 1.
    if let Some(row) = row {
        return Ok(match decode(row.try_get(0), row.try_get(1), row.try_get(2))? {
            Some(stored) => KeyStatus::done(stored),
            None => KeyStatus::InFlight,
        });
    }
    let held: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_locks
               WHERE locktype = 'advisory' AND objsubid = 1
                 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                 AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0))",
            &[&format!("{scope}\n{}", key.as_str())],
        )
        .await?
        .try_get(0)?;
    Ok(if held { KeyStatus::InFlight } else { KeyStatus::Unknown })
}

/// Deletes key rows older than `retention`; returns how many. Business rows are never touched.
pub async fn sweep(client: &Client, retention: Duration) -> Result<u64, StoreError> {
    Ok(client
        .execute("DELETE FROM idempotency_records WHERE created_at < $1", &[&expired_before(unix_now(), retention)])
        .await?)
}
