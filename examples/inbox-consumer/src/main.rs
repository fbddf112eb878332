//! Apply each message of an at-least-once stream once: a receiver for another app's outbox.
//!
//! An outbox (such as examples/invite's, started with `--mail-url` pointing here) delivers every message at
//! least once, with the same id each time. `POST /messages {"id", "to", "subject", "text"}` applies a message
//! (here: queues one email for sending, a row in `emails`) in one transaction with the library's inbox record
//! of its id, and answers 201 `{"id", "email"}`; a re-delivery applies nothing and gets the same answer with
//! `Idempotent-Replayed: true`, so the sender marks the message delivered either way. A crash before the
//! commit leaves neither the email nor the record, and the sender's re-delivery applies it. `GET /messages`
//! lists the emails queued. Everything about deduplication comes from `idempotent-endpoint`.
//!
//! `inbox-consumer --addr 127.0.0.1:0 --db consumer.sqlite` prints one `listening on URL` line; Ctrl-C or
//! SIGTERM stops it. Then `invite-example --mail-url URL` delivers its invitation emails here.

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use clap::Parser;
use idempotent_endpoint::inbox::SqliteInbox;
use idempotent_endpoint::serve::{serve, shutdown_signal, ServeLimits};
use idempotent_endpoint::sqlite::rusqlite::params;
use idempotent_endpoint::trace_context;
use idempotent_endpoint::{
    BodyDeadline, BoundedBody, Problem, RunError, StoreError, StoredResponse, DEFAULT_RETENTION,
};
use tokio::net::TcpListener;

/// Flags of `inbox-consumer`.
#[derive(Debug, Parser)]
struct Cli {
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:8082")]
    addr: SocketAddr,
    /// SQLite file (created if missing).
    #[arg(long, default_value = "consumer.sqlite")]
    db: String,
    /// The sender whose message ids this receiver records (ids are unique per sender).
    #[arg(long, default_value = "invite")]
    source: String,
    /// Time spent applying each message inside its transaction, in milliseconds: the kill test sets it so
    /// that kills land between the work and the commit.
    #[arg(long, default_value_t = 0, hide = true)]
    work_delay_ms: u64,
}

/// What the handlers share.
#[derive(Debug, Clone)]
struct Consumer {
    inbox: SqliteInbox,
    source: String,
    work_delay: Duration,
}

/// A message as the outbox delivers it (examples/invite's email, with the outbox message's id).
#[derive(Debug, serde::Deserialize)]
struct Delivered {
    id: String,
    to: String,
    subject: String,
    text: String,
}

/// The recipe for an endpoint on the open internet (idempotent-endpoint's README, "Serving"): the request
/// head within `ServeLimits::default()`'s header timeout, the body within this (past it the extractor
/// answers 408) and at most [`MAX_BODY_BYTES`].
const BODY_DEADLINE: BodyDeadline = BodyDeadline(Duration::from_secs(5));
/// A message is one email: recipient, subject and text.
const MAX_BODY_BYTES: usize = 64 * 1024;

/// The app's own table: the emails queued for sending, one per message applied.
const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS emails (
    id         INTEGER PRIMARY KEY,
    message_id TEXT NOT NULL,
    recipient  TEXT NOT NULL,
    subject    TEXT NOT NULL,
    text       TEXT NOT NULL
)";

async fn receive(
    State(consumer): State<Consumer>,
    headers: HeaderMap,
    BoundedBody(body): BoundedBody,
) -> Result<Response, Problem> {
    let message: Delivered = serde_json::from_slice(&body)
        .map_err(|e| Problem::bad_request("invalid-message", format!("Invalid message: {e}.")))?;
    let Consumer { inbox, source, work_delay } = consumer;
    // The sender's trace, which the receipt's span continues.
    let traceparent = trace_context::header(&headers).map(str::to_owned);
    let received = inbox
        .receive(source, message.id.clone(), traceparent, move |tx| {
            tx.execute(
                "INSERT INTO emails (message_id, recipient, subject, text) VALUES (?1, ?2, ?3, ?4)",
                params![message.id, message.to, message.subject, message.text],
            )?;
            let email = tx.last_insert_rowid();
            std::thread::sleep(work_delay);
            Ok::<_, StoreError>(StoredResponse::json(
                StatusCode::CREATED,
                &serde_json::json!({ "id": message.id, "email": email }),
            ))
        })
        .await;
    match received {
        Ok(received) => Ok(received.into_response()),
        Err(RunError::Store(StoreError::InboxId(..))) => {
            Err(Problem::bad_request("invalid-message", "A message id is 1 to 255 bytes."))
        }
        Err(RunError::Store(error) | RunError::Work(error)) => {
            tracing::error!(%error, "applying a message failed");
            Err(Problem::internal())
        }
    }
}

/// `GET /messages`: the emails queued, in order.
async fn list(State(consumer): State<Consumer>) -> Result<Json<serde_json::Value>, Problem> {
    let emails = consumer
        .inbox
        .with_conn(|conn| {
            let mut stmt = conn.prepare("SELECT id, message_id, recipient, subject FROM emails ORDER BY id")?;
            let rows = stmt.query_map([], |r| {
                Ok(serde_json::json!({
                    "email": r.get::<_, i64>(0)?, "id": r.get::<_, String>(1)?,
                    "to": r.get::<_, String>(2)?, "subject": r.get::<_, String>(3)?,
                }))
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .map_err(|error| {
            tracing::error!(%error, "listing emails failed");
            Problem::internal()
        })?;
    Ok(Json(serde_json::json!({ "count": emails.len(), "emails": emails })))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let inbox = SqliteInbox::open(&cli.db, DEFAULT_RETENTION)?;
    inbox.with_conn(|conn| Ok(conn.execute_batch(SCHEMA)?)).await?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let sweeper = tokio::spawn(inbox.clone().sweep_every(Duration::from_secs(3600), stopped));
    let consumer = Consumer { inbox, source: cli.source, work_delay: Duration::from_millis(cli.work_delay_ms) };
    let app = Router::new()
        .route("/messages", get(list).post(receive))
        .with_state(consumer)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(Extension(BODY_DEADLINE));
    let listener = TcpListener::bind(cli.addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    serve(listener, app, ServeLimits::default(), shutdown_signal()).await;
    let _ = stop.send(true);
    let _ = sweeper.await;
    Ok(())
}
