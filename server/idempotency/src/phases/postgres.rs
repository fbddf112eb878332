//! The phases on PostgreSQL, over a `tokio_postgres::Client`: each function is one transaction. Rows are
//! locked with `FOR UPDATE` while a transaction decides on them, so instances sharing the database never
//! hold one key together, and the completer's query skips rows another instance is deciding on. A
//! transaction that waits for a row another one holds (`begin`, `advance`, `finish`) waits at most
//! [`crate::postgres::KEY_LOCK_TIMEOUT`] (or the session's own `lock_timeout`), then gives up with
//! [`StoreError::KeyBusy`]: nothing was done, and the caller answers it as a key in flight (409).
//! `release` and `abandon` are one statement each, outside a transaction: only the session's
//! `statement_timeout` bounds their wait, and giving up is [`StoreError::KeyBusy`] too.

use std::time::Duration;

use tokio_postgres::{Client, Transaction};

use tracing::Instrument;

use super::{
    begin_span, check_point, claiming_traceparent, existing_row, lease_end, random_hex, require_row_id, Begun, Held,
    FINISHED, STARTED,
};
use crate::error::{check_scope, RunError, StoreError};
use crate::key::IdempotencyKey;
use crate::outcome::Outcome;
use crate::phases_sql as sql;
use crate::postgres::{bound_key_waits, decode, forget_expired, key_wait, WorkFuture};
use crate::request::KeyedRequest;
use crate::response::MAX_STORED_BODY_BYTES;
use crate::retention::{unix_now, unix_now_ms};

/// The future of one step's work: `|tx| Box::pin(async move { ...; Ok(()) })`.
pub type StepFuture<'a, E> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), E>> + Send + 'a>>;

/// Starts (or takes over) the phased work of a keyed request, holding the row for `lease`. A new row keeps
/// the current span's `traceparent` ([`Held::traceparent`]).
pub async fn begin(
    client: &mut Client,
    request: &KeyedRequest,
    retention: Duration,
    lease: Duration,
) -> Result<Begun, StoreError> {
    let traceparent = claiming_traceparent();
    begin_in(client, request, retention, lease, traceparent).instrument(begin_span()).await
}

async fn begin_in(
    client: &mut Client,
    request: &KeyedRequest,
    retention: Duration,
    lease: Duration,
    traceparent: Option<String>,
) -> Result<Begun, StoreError> {
    check_scope(&request.scope)?;
    let tx = client.transaction().await?;
    bound_key_waits(&tx).await?;
    let (scope, key) = (request.scope.as_str(), request.key.as_str());
    forget_expired(&tx, scope, key, retention).await?;
    let (row_id, token) = (random_hex()?, random_hex()?);
    let inserted = tx
        .execute(
            sql::INSERT_STARTED,
            &[
                &scope,
                &key,
                &request.fingerprint,
                &unix_now(),
                &STARTED,
                &row_id,
                &token,
                &lease_end(lease),
                &traceparent,
            ],
        )
        .await
        .map_err(key_wait)?;
    let held = |point: String, row_id: String, token: String, traceparent: Option<String>| Held {
        scope: scope.to_owned(),
        key: request.key.clone(),
        point,
        row_id,
        traceparent,
        token,
    };
    if inserted == 1 {
        tx.commit().await?;
        return Ok(Begun::Held(held(STARTED.to_owned(), row_id, token, traceparent)));
    }
    let row = tx.query_one(sql::SELECT_FOR_BEGIN, &[&scope, &key]).await.map_err(key_wait)?;
    let fingerprint: String = row.try_get(0)?;
    let stored = decode(row.try_get(1), row.try_get(2), row.try_get(3))?;
    if let Some(outcome) = existing_row(&request.fingerprint, &fingerprint, stored, row.try_get(6)?, unix_now_ms()) {
        tx.commit().await?;
        return Ok(Begun::Answered(outcome));
    }
    let row_id = require_row_id(row.try_get(5)?, key)?;
    tx.execute(sql::TAKE_OVER, &[&token, &lease_end(lease), &scope, &key]).await?;
    tx.commit().await?;
    Ok(Begun::Held(held(row.try_get(4)?, row_id, token, row.try_get(7)?)))
}

/// Locks the row, waiting for it at most [`crate::postgres::KEY_LOCK_TIMEOUT`] (else
/// [`StoreError::KeyBusy`]), and checks `held` still holds it (else [`StoreError::LeaseLost`]).
async fn check_lease(tx: &Transaction<'_>, held: &Held) -> Result<(), StoreError> {
    bound_key_waits(tx).await?;
    let row = tx.query_opt(sql::CHECK_LEASE, &[&held.scope, &held.key.as_str(), &FINISHED]).await.map_err(key_wait)?;
    let token: Option<String> = match row {
        Some(row) => row.try_get(0)?,
        None => None,
    };
    if token.as_deref() == Some(held.token.as_str()) {
        Ok(())
    } else {
        Err(StoreError::LeaseLost)
    }
}

/// One step: checks the lease, runs `work` (the app's rows for this step) and moves the row to `point`,
/// renewing the lease, in one transaction. A lease taken over by another caller is
/// [`StoreError::LeaseLost`] and nothing is written.
#[tracing::instrument(name = "idempotency.phase", skip_all, fields(idempotency.phase = point))]
pub async fn advance<E, F>(
    client: &mut Client,
    held: &mut Held,
    point: &str,
    lease: Duration,
    work: F,
) -> Result<(), RunError<E>>
where
    F: for<'t> FnOnce(&'t Transaction<'t>) -> StepFuture<'t, E>,
{
    check_point(point)?;
    let tx = client.transaction().await.map_err(StoreError::from)?;
    check_lease(&tx, held).await?;
    work(&tx).await.map_err(RunError::Work)?;
    tx.execute(sql::ADVANCE, &[&point, &lease_end(lease), &held.scope, &held.key.as_str()])
        .await
        .map_err(StoreError::from)?;
    tx.commit().await.map_err(StoreError::from)?;
    held.point = point.to_owned();
    Ok(())
}

/// The last step: checks the lease, runs `work` and stores its answer (replayed from then on), in one
/// transaction.
#[tracing::instrument(name = "idempotency.phase", skip_all, fields(idempotency.phase = FINISHED))]
pub async fn finish<E, F>(client: &mut Client, held: Held, work: F) -> Result<Outcome, RunError<E>>
where
    F: for<'t> FnOnce(&'t Transaction<'t>) -> WorkFuture<'t, E>,
{
    let tx = client.transaction().await.map_err(StoreError::from)?;
    check_lease(&tx, &held).await?;
    let response = work(&tx).await.map_err(RunError::Work)?;
    if response.body.len() > MAX_STORED_BODY_BYTES {
        return Err(StoreError::ResponseTooLarge(response.body.len()).into());
    }
    tx.execute(
        sql::FINISH,
        &[
            &i32::from(response.status),
            &response.encode_headers(),
            &response.body,
            &FINISHED,
            &held.scope,
            &held.key.as_str(),
        ],
    )
    .await
    .map_err(StoreError::from)?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(Outcome::Fresh(response))
}

/// Gives the row up without finishing it: the next request with the key, or the completer, takes it over
/// at once, at the point it reached.
pub async fn release(client: &Client, held: Held) -> Result<(), StoreError> {
    client.execute(sql::RELEASE, &[&held.scope, &held.key.as_str(), &held.token]).await.map_err(key_wait)?;
    Ok(())
}

/// Deletes a row this caller holds at [`STARTED`], as if its request had never come: for a holder that
/// cannot start the work (a completer has no request body to build it from) or gave up before any step
/// wrote anything. The next request with the key is new. A row another caller took over, or one that moved
/// past [`STARTED`] (its external call may have happened), is kept: [`StoreError::LeaseLost`].
pub async fn abandon(client: &Client, held: Held) -> Result<(), StoreError> {
    let deleted = client
        .execute(sql::ABANDON, &[&held.scope, &held.key.as_str(), &held.token, &STARTED])
        .await
        .map_err(key_wait)?;
    if deleted == 1 {
        Ok(())
    } else {
        Err(StoreError::LeaseLost)
    }
}

/// For a background completer: takes over up to `limit` unfinished rows whose lease ran out, each for
/// `lease` (`FOR UPDATE SKIP LOCKED`: instances running completers at once never take one row together).
pub async fn unfinished(client: &mut Client, limit: i64, lease: Duration) -> Result<Vec<Held>, StoreError> {
    let tx = client.transaction().await?;
    let rows = tx.query(sql::UNFINISHED, &[&FINISHED, &unix_now_ms(), &limit]).await?;
    let mut held = Vec::with_capacity(rows.len());
    for row in rows {
        let (scope, key, point): (String, String, String) = (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
        let (row_id, traceparent) = (require_row_id(row.try_get(3)?, &key)?, row.try_get(4)?);
        let token = random_hex()?;
        tx.execute(sql::TAKE_OVER, &[&token, &lease_end(lease), &scope, &key]).await?;
        let key = IdempotencyKey::parse(&key).map_err(|e| StoreError::Corrupt(format!("stored key: {e}")))?;
        held.push(Held { scope, key, point, row_id, traceparent, token });
    }
    tx.commit().await?;
    Ok(held)
}
