//! The phases on SQLite: methods of [`SqliteKeys`].

use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use tracing::Instrument;

use super::{
    begin_span, check_point, claiming_traceparent, existing_row, lease_end, random_hex, require_row_id, Begun, Held,
    FINISHED, STARTED,
};
use crate::error::{check_scope, RunError, StoreError};
use crate::key::IdempotencyKey;
use crate::outcome::Outcome;
use crate::request::KeyedRequest;
use crate::response::{StoredResponse, MAX_STORED_BODY_BYTES};
use crate::retention::{unix_now, unix_now_ms};
use crate::sqlite::{begin_key_tx, forget_expired, SqliteKeys};

type PhaseRow = (String, Option<u16>, Option<String>, Option<String>, String, Option<String>, i64, Option<String>);

/// An unfinished row as the completer's query reads it: scope, key, recovery point, row id, traceparent.
type UnfinishedRow = (String, String, String, Option<String>, Option<String>);

fn begin_in(
    conn: &mut Connection,
    request: &KeyedRequest,
    retention: Duration,
    lease: Duration,
    traceparent: Option<String>,
) -> Result<Begun, StoreError> {
    check_scope(&request.scope)?;
    let tx = begin_key_tx(conn)?;
    let (scope, key) = (request.scope.as_str(), request.key.as_str());
    forget_expired(&tx, scope, key, retention)?;
    let (row_id, token) = (random_hex()?, random_hex()?);
    let inserted = tx.execute(
        "INSERT INTO idempotency_records
             (scope, key, fingerprint, created_at, recovery_point, row_id, lock_token, locked_until, traceparent)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (scope, key) DO NOTHING",
        params![scope, key, request.fingerprint, unix_now(), STARTED, row_id, token, lease_end(lease), traceparent],
    )?;
    let held = |point: String, row_id: String, token: String, traceparent: Option<String>| Held {
        scope: scope.to_owned(),
        key: request.key.clone(),
        point,
        row_id,
        traceparent,
        token,
    };
    if inserted == 1 {
        tx.commit()?;
        return Ok(Begun::Held(held(STARTED.to_owned(), row_id, token, traceparent)));
    }
    let (fingerprint, status, headers, body, point, stored_row_id, locked_until, stored_traceparent): PhaseRow = tx
        .query_row(
            "SELECT fingerprint, status_code, response_headers, response_body, recovery_point, row_id, locked_until,
                    traceparent
             FROM idempotency_records WHERE scope = ?1 AND key = ?2",
            params![scope, key],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?)),
        )?;
    let stored = StoredResponse::from_columns(status, headers.as_deref(), body)
        .map_err(|e| StoreError::Corrupt(format!("response_headers: {e}")))?;
    if let Some(outcome) = existing_row(&request.fingerprint, &fingerprint, stored, locked_until, unix_now_ms()) {
        tx.commit()?;
        return Ok(Begun::Answered(outcome));
    }
    // An unfinished row whose holder is gone: take it over where it stands.
    let row_id = require_row_id(stored_row_id, key)?;
    tx.execute(
        "UPDATE idempotency_records SET lock_token = ?1, locked_until = ?2 WHERE scope = ?3 AND key = ?4",
        params![token, lease_end(lease), scope, key],
    )?;
    tx.commit()?;
    Ok(Begun::Held(held(point, row_id, token, stored_traceparent)))
}

/// Checks `held` still holds its row (else [`StoreError::LeaseLost`]) inside `tx`.
fn check_lease(tx: &Transaction<'_>, held: &Held) -> Result<(), StoreError> {
    let token: Option<Option<String>> = tx
        .query_row(
            "SELECT lock_token FROM idempotency_records WHERE scope = ?1 AND key = ?2 AND recovery_point <> ?3",
            params![held.scope, held.key.as_str(), FINISHED],
            |r| r.get(0),
        )
        .optional()?;
    match token {
        Some(Some(token)) if token == held.token => Ok(()),
        _ => Err(StoreError::LeaseLost),
    }
}

impl SqliteKeys {
    /// Starts (or takes over) the phased work of a keyed request, holding the row for `lease`. A new row keeps
    /// the current span's `traceparent` ([`Held::traceparent`]).
    pub async fn begin(&self, request: KeyedRequest, lease: Duration) -> Result<Begun, StoreError> {
        let (retention, traceparent) = (self.retention(), claiming_traceparent());
        self.with_conn(move |conn| begin_in(conn, &request, retention, lease, traceparent))
            .instrument(begin_span())
            .await
    }

    /// One step: in one transaction, checks the lease, runs `work` (the app's rows for this step) and moves
    /// the row to `point`, renewing the lease for `lease`. A lease taken over by another caller is
    /// [`StoreError::LeaseLost`] and nothing is written.
    #[tracing::instrument(name = "idempotency.phase", skip_all, fields(idempotency.phase = point))]
    pub async fn advance<E, F>(&self, held: &mut Held, point: &str, lease: Duration, work: F) -> Result<(), RunError<E>>
    where
        E: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<(), E> + Send + 'static,
    {
        check_point(point)?;
        let (moved, point) = (held.clone(), point.to_owned());
        let next = point.clone();
        self.with_conn_run(move |conn| {
            let tx = begin_key_tx(conn)?;
            check_lease(&tx, &moved)?;
            work(&tx).map_err(RunError::Work)?;
            tx.execute(
                "UPDATE idempotency_records SET recovery_point = ?1, locked_until = ?2 WHERE scope = ?3 AND key = ?4",
                params![next, lease_end(lease), moved.scope, moved.key.as_str()],
            )
            .map_err(StoreError::from)?;
            tx.commit().map_err(StoreError::from)?;
            Ok(())
        })
        .await?;
        held.point = point;
        Ok(())
    }

    /// The last step: in one transaction, checks the lease, runs `work` and stores its answer, which every
    /// later request with the key replays.
    #[tracing::instrument(name = "idempotency.phase", skip_all, fields(idempotency.phase = FINISHED))]
    pub async fn finish<E, F>(&self, held: Held, work: F) -> Result<Outcome, RunError<E>>
    where
        E: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<StoredResponse, E> + Send + 'static,
    {
        self.with_conn_run(move |conn| {
            let tx = begin_key_tx(conn)?;
            check_lease(&tx, &held)?;
            let response = work(&tx).map_err(RunError::Work)?;
            if response.body.len() > MAX_STORED_BODY_BYTES {
                return Err(StoreError::ResponseTooLarge(response.body.len()).into());
            }
            tx.execute(
                "UPDATE idempotency_records SET status_code = ?1, response_headers = ?2, response_body = ?3,
                     recovery_point = ?4, lock_token = NULL, locked_until = 0
                 WHERE scope = ?5 AND key = ?6",
                params![
                    response.status,
                    response.encode_headers(),
                    response.body,
                    FINISHED,
                    held.scope,
                    held.key.as_str()
                ],
            )
            .map_err(StoreError::from)?;
            tx.commit().map_err(StoreError::from)?;
            Ok(Outcome::Fresh(response))
        })
        .await
    }

    /// Gives the row up without finishing it (the external call is unavailable for now): the next request
    /// with the key, or the completer, takes it over at once, at the point it reached.
    pub async fn release(&self, held: Held) -> Result<(), StoreError> {
        self.with_conn(move |conn| {
            conn.execute(
                "UPDATE idempotency_records SET locked_until = 0 WHERE scope = ?1 AND key = ?2 AND lock_token = ?3",
                params![held.scope, held.key.as_str(), held.token],
            )?;
            Ok(())
        })
        .await
    }

    /// Deletes a row this caller holds at [`STARTED`], as if its request had never come: for a holder that
    /// cannot start the work (a completer has no request body to build it from) or gave up before any step
    /// wrote anything. The next request with the key is new. A row another caller took over, or one that
    /// moved past [`STARTED`] (its external call may have happened), is kept: [`StoreError::LeaseLost`].
    pub async fn abandon(&self, held: Held) -> Result<(), StoreError> {
        self.with_conn(move |conn| {
            let deleted = conn.execute(
                "DELETE FROM idempotency_records
                 WHERE scope = ?1 AND key = ?2 AND lock_token = ?3 AND recovery_point = ?4",
                params![held.scope, held.key.as_str(), held.token, STARTED],
            )?;
            if deleted == 1 {
                Ok(())
            } else {
                Err(StoreError::LeaseLost)
            }
        })
        .await
    }

    /// For a background completer: takes over up to `limit` unfinished rows whose lease ran out, each for
    /// `lease`, so keys a crash left are finished without waiting for the client to come back.
    pub async fn unfinished(&self, limit: i64, lease: Duration) -> Result<Vec<Held>, StoreError> {
        self.with_conn(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let rows: Vec<UnfinishedRow> = {
                let mut stmt = tx.prepare(
                    "SELECT scope, key, recovery_point, row_id, traceparent FROM idempotency_records
                     WHERE recovery_point <> ?1 AND locked_until <= ?2 ORDER BY locked_until LIMIT ?3",
                )?;
                let rows = stmt.query_map(params![FINISHED, unix_now_ms(), limit], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })?;
                rows.collect::<Result<_, _>>()?
            };
            let mut held = Vec::with_capacity(rows.len());
            for (scope, key, point, row_id, traceparent) in rows {
                let token = random_hex()?;
                tx.execute(
                    "UPDATE idempotency_records SET lock_token = ?1, locked_until = ?2 WHERE scope = ?3 AND key = ?4",
                    params![token, lease_end(lease), scope, key],
                )?;
                let key = IdempotencyKey::parse(&key).map_err(|e| StoreError::Corrupt(format!("stored key: {e}")))?;
                let row_id = require_row_id(row_id, key.as_str())?;
                held.push(Held { scope, key, point, row_id, traceparent, token });
            }
            tx.commit()?;
            Ok(held)
        })
        .await
    }

    async fn with_conn_run<T, E, F>(&self, f: F) -> Result<T, RunError<E>>
    where
        T: Send + 'static,
        E: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, RunError<E>> + Send + 'static,
    {
        let outcome = self.with_conn(move |conn| Ok(f(conn))).await?;
        outcome
    }
}
