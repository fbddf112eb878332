//! The mail receiver: `POST /messages` stores a message once by its `id` and answers 201; the same id again
//! is refused as a duplicate (answered 200, so a sender that retries after a lost answer sees success) and
//! counted. `GET /messages` lists the messages with how many duplicates of each were refused. With
//! `--enable-faults`, `PUT /faults` makes it answer 503 (an outage) with a probability, before storing.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use rusqlite::params;
use serde::{Deserialize, Serialize};

use super::{hit, probability, Db, RunningService};
use crate::problem::Problem;
use crate::store::StoreError;

/// The path messages are posted to.
pub const MESSAGES_PATH: &str = "/messages";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS messages (
    seq                INTEGER PRIMARY KEY AUTOINCREMENT,
    id                 TEXT    NOT NULL UNIQUE,
    recipient          TEXT    NOT NULL,
    subject            TEXT    NOT NULL,
    text               TEXT    NOT NULL,
    received_at        INTEGER NOT NULL,
    duplicates_refused INTEGER NOT NULL DEFAULT 0
);
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
    db: Db,
    faults: Option<Arc<RwLock<MailboxFaults>>>,
}

/// Opens the receiver's database at `db` and serves it on `addr`; faults only when `enable_faults`.
pub async fn start(addr: SocketAddr, db: &str, enable_faults: bool) -> Result<RunningService, crate::ServeError> {
    let db = db.to_owned();
    let db = tokio::task::spawn_blocking(move || Db::open(db, SCHEMA))
        .await
        .map_err(|e| StoreError::Task(e.to_string()))??;
    let faults = enable_faults.then(|| Arc::new(RwLock::new(MailboxFaults::default())));
    let state = Mailbox { db, faults };
    let mut app = Router::new()
        .route(MESSAGES_PATH, get(list).post(receive))
        .route("/health", get(|| async { Json(serde_json::json!({ "status": "ok" })) }));
    if state.faults.is_some() {
        app = app.route("/faults", get(get_faults).put(put_faults));
    }
    Ok(RunningService::start(addr, app.with_state(state)).await?)
}

fn valid_id(id: &str) -> bool {
    (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

async fn receive(State(mailbox): State<Mailbox>, body: Bytes) -> Result<Response, Problem> {
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
    let stored = mailbox
        .db
        .run(move |conn| {
            let inserted = conn.execute(
                "INSERT INTO messages (id, recipient, subject, text, received_at) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (id) DO UPDATE SET duplicates_refused = duplicates_refused + 1",
                params![message.id, message.to, message.subject, message.text, crate::unix_now()],
            )?;
            // The upsert reports 1 either way; the counter tells a first delivery from a refused one.
            let refused: i64 =
                conn.query_row("SELECT duplicates_refused FROM messages WHERE id = ?1", params![message.id], |r| {
                    r.get(0)
                })?;
            Ok(inserted == 1 && refused == 0)
        })
        .await
        .map_err(|error| {
            tracing::error!(%error, "storing a message failed");
            Problem::internal()
        })?;
    let (status, duplicate) = if stored { (StatusCode::CREATED, false) } else { (StatusCode::OK, true) };
    Ok((status, Json(serde_json::json!({ "id": id, "duplicate": duplicate }))).into_response())
}

/// `GET /messages`: every message, oldest first, and the duplicates refused in all.
async fn list(State(mailbox): State<Mailbox>) -> Result<Response, Problem> {
    let messages = mailbox
        .db
        .run(|conn| {
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
