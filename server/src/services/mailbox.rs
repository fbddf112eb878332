//! The mail receiver: `POST /messages` stores a message once by its `id` and answers 201; the same id again
//! is refused as a duplicate (answered 200, so a sender that retries after a lost answer sees success) and
//! counted. The library's inbox decides which delivery is the first: the message row and the inbox record of
//! its id commit in one transaction, so a crash between them leaves neither and the sender's re-delivery
//! stores it; the inbox records expire after [`idempotent_endpoint::DEFAULT_RETENTION`] and are swept. `GET
//! /messages` lists the messages with how many duplicates of each were refused. With `--enable-faults`, `PUT
//! /faults` makes it answer 503 (an outage) with a probability, before storing.
//!
//! **Group commit.** With `synchronous = FULL` every commit waits for a sync to disk, so a commit per
//! message caps the receiver at the disk's syncs per second. The deliveries that arrive while a commit is
//! being written wait in a queue and are stored together by the next one (at most `GROUP_MAX`): each in
//! its own savepoint (its message row and inbox record, or neither if it fails), one commit for all, and
//! every sender is answered only after that commit.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use idempotent_endpoint::inbox::{self, SqliteInbox};
use idempotent_endpoint::sqlite::rusqlite::{params, Connection, Transaction, TransactionBehavior};
use idempotent_endpoint::trace_context;
use idempotent_endpoint::{RunError, StoredResponse, DEFAULT_RETENTION};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot, watch};

use super::{hit, probability, RunningService};
use crate::problem::Problem;
use crate::store::StoreError;

/// The path messages are posted to.
pub const MESSAGES_PATH: &str = "/messages";

/// The inbox source of every message posted here: ids are unique per sender, and the receiver trusts its
/// senders to keep them apart (the outbox's are random 128-bit ids).
const SOURCE: &str = "messages";

/// How often expired inbox records are swept.
const SWEEP_INTERVAL: Duration = Duration::from_secs(3600);

/// The most deliveries one commit stores.
const GROUP_MAX: usize = 256;

/// Deliveries waiting for the committer at most; a sender beyond them waits to be queued.
const QUEUE_MAX: usize = 4 * GROUP_MAX;

/// The mail itself; which ids were stored is the inbox's record, not a constraint here.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS messages (
    seq                INTEGER PRIMARY KEY AUTOINCREMENT,
    id                 TEXT    NOT NULL,
    recipient          TEXT    NOT NULL,
    subject            TEXT    NOT NULL,
    text               TEXT    NOT NULL,
    received_at        INTEGER NOT NULL,
    duplicates_refused INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS messages_id ON messages (id);
";

/// A message, as posted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Message {
    /// The sender's id for the message: 1 to 128 characters of `[A-Za-z0-9_-]`; the same id is the same
    /// message.
    pub id: String,
    /// The recipient.
    pub to: String,
    /// The subject.
    pub subject: String,
    /// The text.
    pub text: String,
}

/// A stored message, as `GET /messages` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Received {
    /// The message.
    #[serde(flatten)]
    pub message: Message,
    /// Unix time (seconds) of the first delivery.
    pub received_at: i64,
    /// Deliveries of the same id refused after the first.
    pub duplicates_refused: i64,
}

/// The receiver's faults (`GET/PUT /faults`, only with `--enable-faults`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct MailboxFaults {
    /// Probability of answering 503 without storing anything.
    pub fail: f64,
}

#[derive(Debug, Clone)]
struct Mailbox {
    inbox: SqliteInbox,
    /// The group committer's queue; it stops once every handle to it is dropped.
    committer: mpsc::Sender<Pending>,
    faults: Option<Arc<RwLock<MailboxFaults>>>,
    /// Dropped with the service's router, which ends the sweep.
    _sweeping: Arc<watch::Sender<bool>>,
}

/// Opens the receiver's database at `db` and serves it on `addr`; faults only when `enable_faults`.
pub async fn start(addr: SocketAddr, db: &str, enable_faults: bool) -> Result<RunningService, crate::ServeError> {
    let db = db.to_owned();
    let inbox = tokio::task::spawn_blocking(move || SqliteInbox::open(db, DEFAULT_RETENTION))
        .await
        .map_err(|e| StoreError::Task(e.to_string()))?
        .map_err(library_error)?;
    inbox.with_conn(|conn| Ok(conn.execute_batch(SCHEMA)?)).await.map_err(library_error)?;
    let (sweeping, stopped) = watch::channel(false);
    tokio::spawn(inbox.clone().sweep_every(SWEEP_INTERVAL, stopped));
    let faults = enable_faults.then(|| Arc::new(RwLock::new(MailboxFaults::default())));
    let (committer, queue) = mpsc::channel(QUEUE_MAX);
    tokio::spawn(commit_groups(inbox.clone(), queue));
    let state = Mailbox { inbox, committer, faults, _sweeping: Arc::new(sweeping) };
    let mut app = Router::new()
        .route(MESSAGES_PATH, get(list).post(receive))
        .route("/health", get(|| async { Json(serde_json::json!({ "status": "ok" })) }))
        .route("/metrics", get(metrics));
    if state.faults.is_some() {
        app = app.route("/faults", get(get_faults).put(put_faults));
    }
    Ok(RunningService::start(addr, app.with_state(state)).await?)
}

fn valid_id(id: &str) -> bool {
    (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

async fn receive(State(mailbox): State<Mailbox>, headers: HeaderMap, body: Bytes) -> Result<Response, Problem> {
    if let Some(faults) = &mailbox.faults {
        let fail = faults.read().map(|f| f.fail).unwrap_or_else(|p| p.into_inner().fail);
        if hit(fail) {
            return Err(Problem::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "Service unavailable",
                "Injected fault: the message was not stored; send it again.",
            )
            .with_retry_after(1));
        }
    }
    let message: Message = serde_json::from_slice(&body)
        .map_err(|e| Problem::bad_request("invalid-message", format!("Invalid message: {e}.")))?;
    if !valid_id(&message.id) || message.to.len() > 320 || message.subject.len() > 998 || message.text.len() > 16_384 {
        return Err(Problem::bad_request(
            "invalid-message",
            "A message id is 1 to 128 characters of A-Z, a-z, 0-9, '_' or '-'; to, subject and text are bounded.",
        ));
    }
    let id = message.id.clone();
    // The sender's trace: the receipt's span continues it.
    let traceparent = trace_context::header(&headers).map(str::to_owned);
    let (reply, answer) = oneshot::channel();
    mailbox.committer.send(Pending { message, traceparent, reply }).await.map_err(|_| {
        tracing::error!("the group committer has stopped");
        Problem::internal()
    })?;
    let received = answer
        .await
        .map_err(|_| "the group committer dropped the delivery".to_owned())
        .and_then(|stored| stored)
        .map_err(|error| {
            tracing::error!(%error, "storing a message failed");
            Problem::internal()
        })?;
    // A sender retries until it sees a success; the duplicate is said in the body.
    if received.is_duplicate() {
        return Ok((StatusCode::OK, Json(serde_json::json!({ "id": id, "duplicate": true }))).into_response());
    }
    Ok(received.into_response())
}

/// `GET /metrics`: the re-deliveries refused in all (the `duplicates_refused` of every message).
async fn metrics(State(mailbox): State<Mailbox>) -> Result<Response, Problem> {
    let refused: i64 = mailbox
        .inbox
        .with_conn(|conn| {
            Ok(conn.query_row("SELECT coalesce(sum(duplicates_refused), 0) FROM messages", [], |row| row.get(0))?)
        })
        .await
        .map_err(|error| {
            tracing::error!(%error, "reading the refused re-deliveries failed");
            Problem::internal()
        })?;
    let text = crate::metrics::inbox_text(u64::try_from(refused).unwrap_or(0)).map_err(|_| Problem::internal())?;
    Ok(([(axum::http::header::CONTENT_TYPE, crate::metrics::OPENMETRICS_CONTENT_TYPE)], text).into_response())
}

/// A delivery waiting for the group committer, and where its result goes once the group has committed (an
/// error as text: the sender is answered 500 and sends the message again).
#[derive(Debug)]
struct Pending {
    message: Message,
    /// The delivery's `traceparent` header.
    traceparent: Option<String>,
    reply: oneshot::Sender<Result<inbox::Received, String>>,
}

/// The group committer: takes every delivery queued (up to [`GROUP_MAX`]), stores them in one transaction
/// and answers each after the commit; ends when the queue's senders are all dropped.
async fn commit_groups(inbox: SqliteInbox, mut queue: mpsc::Receiver<Pending>) {
    let mut group = Vec::with_capacity(GROUP_MAX);
    while queue.recv_many(&mut group, GROUP_MAX).await > 0 {
        let (messages, replies): (Vec<(Message, Option<String>)>, Vec<_>) =
            group.drain(..).map(|p| ((p.message, p.traceparent), p.reply)).unzip();
        let retention = inbox.retention();
        match inbox.with_conn(move |conn| store_group(conn, &messages, retention)).await {
            Ok(results) => {
                for (reply, result) in replies.into_iter().zip(results) {
                    // A sender that hung up is not told; its message is stored and its re-delivery refused.
                    let _ = reply.send(result);
                }
            }
            Err(error) => {
                // Nothing of the group committed: every sender is answered 500 and sends again.
                let error = error.to_string();
                for reply in replies {
                    let _ = reply.send(Err(error.clone()));
                }
            }
        }
    }
}

/// Stores `messages` in one `BEGIN IMMEDIATE` transaction, each in a savepoint of its own: a message that
/// fails leaves nothing and gets its error; the others commit. `Err` when the transaction or its commit
/// failed, so that none was stored.
fn store_group(
    conn: &mut Connection,
    messages: &[(Message, Option<String>)],
    retention: Duration,
) -> Result<Vec<Result<inbox::Received, String>>, idempotent_endpoint::StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut results = Vec::with_capacity(messages.len());
    for (message, traceparent) in messages {
        tx.execute_batch("SAVEPOINT delivery")?;
        let stored = store_one(&tx, message, traceparent.as_deref(), retention);
        tx.execute_batch(if stored.is_ok() { "RELEASE delivery" } else { "ROLLBACK TO delivery; RELEASE delivery" })?;
        results.push(stored.map_err(|error| error.to_string()));
    }
    tx.commit()?;
    Ok(results)
}

/// One delivery inside the group's transaction: the inbox's decision and the message row, or for a
/// duplicate the refusal counted.
fn store_one(
    tx: &Transaction<'_>,
    message: &Message,
    traceparent: Option<&str>,
    retention: Duration,
) -> Result<inbox::Received, idempotent_endpoint::StoreError> {
    let received = inbox::receive_sqlite(tx, SOURCE, &message.id, traceparent, retention, |tx| {
        tx.execute(
            "INSERT INTO messages (id, recipient, subject, text, received_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![message.id, message.to, message.subject, message.text, crate::unix_now()],
        )?;
        Ok(StoredResponse::json(StatusCode::CREATED, &serde_json::json!({ "id": message.id, "duplicate": false })))
    })
    .map_err(|error| match error {
        RunError::Store(error) | RunError::Work(error) => error,
    })?;
    if received.is_duplicate() {
        tx.execute(
            "UPDATE messages SET duplicates_refused = duplicates_refused + 1 WHERE id = ?1",
            params![message.id],
        )?;
    }
    Ok(received)
}

/// The library's store error as the server's (opening the receiver's database).
fn library_error(error: idempotent_endpoint::StoreError) -> crate::ServeError {
    crate::ServeError::Store(StoreError::Task(error.to_string()))
}

/// `GET /messages`: every message, oldest first, and the duplicates refused in all.
async fn list(State(mailbox): State<Mailbox>) -> Result<Response, Problem> {
    let messages = mailbox
        .inbox
        .with_conn(|conn| {
            let mut stmt = conn.prepare(
                "SELECT id, recipient, subject, text, received_at, duplicates_refused FROM messages ORDER BY seq",
            )?;
            let rows = stmt.query_map([], |row| {
                Ok(Received {
                    message: Message { id: row.get(0)?, to: row.get(1)?, subject: row.get(2)?, text: row.get(3)? },
                    received_at: row.get(4)?,
                    duplicates_refused: row.get(5)?,
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .map_err(|error| {
            tracing::error!(%error, "listing messages failed");
            Problem::internal()
        })?;
    let refused: i64 = messages.iter().map(|m| m.duplicates_refused).sum();
    Ok(Json(serde_json::json!({ "count": messages.len(), "duplicatesRefused": refused, "messages": messages }))
        .into_response())
}

async fn get_faults(State(mailbox): State<Mailbox>) -> Response {
    match &mailbox.faults {
        Some(faults) => {
            Json(faults.read().map(|f| f.clone()).unwrap_or_else(|p| p.into_inner().clone())).into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn put_faults(State(mailbox): State<Mailbox>, body: Bytes) -> Result<Response, Problem> {
    let Some(faults) = &mailbox.faults else {
        return Ok(StatusCode::NOT_FOUND.into_response());
    };
    let config: MailboxFaults = serde_json::from_slice(&body)
        .map_err(|e| Problem::bad_request("invalid-fault-config", format!("Invalid fault config: {e}.")))?;
    probability("fail", config.fail)?;
    match faults.write() {
        Ok(mut guard) => *guard = config.clone(),
        Err(poisoned) => *poisoned.into_inner() = config.clone(),
    }
    Ok(Json(config).into_response())
}
