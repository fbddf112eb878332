//! Invite a user: `POST /api/invites {"email"}` with an `Idempotency-Key` stores one invitation and sends
//! one email, however often the client retries. The invitation row, the outbox message and the key's answer
//! commit in one transaction; the outbox worker delivers the email to a mail receiver, which deduplicates
//! by the message id. Everything about the protocol comes from `idempotent-endpoint`.
//!
//! `invite-example --addr 127.0.0.1:0 --db invites.sqlite --mail-url http://127.0.0.1:8082` prints one
//! `listening on URL` line; Ctrl-C or SIGTERM stops it.

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use clap::Parser;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use idempotent_endpoint::outbox::{self, Message, Worker};
use idempotent_endpoint::sqlite::SqliteKeys;
use idempotent_endpoint::{
    BodyDeadline, Idempotent, Outcome, Problem, RunError, StoreError, StoredResponse, DEFAULT_RETENTION,
};
use rusqlite::params;
use tokio::net::TcpListener;

/// Flags of `invite-example`.
#[derive(Debug, Parser)]
struct Cli {
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:8090")]
    addr: SocketAddr,
    /// SQLite file (created if missing).
    #[arg(long, default_value = "invites.sqlite")]
    db: String,
    /// The mail receiver's base URL (`POST {url}/messages`).
    #[arg(long)]
    mail_url: String,
}

/// The recipe for an endpoint on the open internet (idempotent-endpoint's README, "Serving"): the request
/// head within this, the body within [`BODY_DEADLINE`] and at most [`MAX_BODY_BYTES`].
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request body may take to arrive; past it the extractor answers 408.
const BODY_DEADLINE: BodyDeadline = BodyDeadline(Duration::from_secs(5));
/// How long open requests may run after a shutdown was asked for.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// An invitation is an email address: a small body is all this endpoint takes.
const MAX_BODY_BYTES: usize = 4 * 1024;

/// This app has no accounts: one scope for everyone, and keys are random (128 bits from the client's
/// CSPRNG). An app with sign-in scopes keys by the signed-in account instead.
const SCOPE: &str = "public";

#[derive(serde::Deserialize)]
struct Invite {
    email: String,
}

async fn invite(State(keys): State<SqliteKeys>, request: Idempotent) -> Result<Outcome, RunError<Problem>> {
    let Invite { email } = request.json().map_err(RunError::Work)?;
    if email.len() > 254 || !email.contains('@') {
        return Err(RunError::Work(Problem::bad_request("invalid-email", "`email` must be an email address.")));
    }
    keys.run(request.scoped(SCOPE), move |tx| {
        tx.execute("INSERT INTO invites (email) VALUES (?1)", params![email]).map_err(|e| internal(e.into()))?;
        let id = tx.last_insert_rowid();
        let text = format!("You are invited. Your invitation is number {id}.");
        let mail =
            Message::new("invite-email", &serde_json::json!({ "to": email, "subject": "Invitation", "text": text }))
                .map_err(internal)?;
        outbox::enqueue_sqlite(tx, &mail).map_err(internal)?;
        let created = StoredResponse::json(StatusCode::CREATED, &serde_json::json!({ "id": id, "email": email }));
        Ok(created.with_header("location", format!("/api/invites/{id}")))
    })
    .await
}

/// A store failure inside the work: logged, answered 500 (nothing was committed; retrying is safe).
fn internal(error: StoreError) -> Problem {
    tracing::error!(%error, "invite failed");
    Problem::internal()
}

async fn key_status(State(keys): State<SqliteKeys>, Path(raw): Path<String>) -> axum::response::Response {
    keys.status_response(SCOPE.to_owned(), &raw).await
}

/// Settles a key (the fence): a client settles before it gives an intent a new key.
async fn settle_key(State(keys): State<SqliteKeys>, Path(raw): Path<String>) -> axum::response::Response {
    keys.settle_response(SCOPE.to_owned(), &raw).await
}

async fn list(State(keys): State<SqliteKeys>) -> Result<Json<serde_json::Value>, Problem> {
    let invites = keys
        .with_conn(|conn| {
            let mut stmt = conn.prepare("SELECT id, email FROM invites ORDER BY id")?;
            let rows = stmt.query_map([], |r| {
                Ok(serde_json::json!({ "id": r.get::<_, i64>(0)?, "email": r.get::<_, String>(1)? }))
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .map_err(internal)?;
    Ok(Json(serde_json::json!({ "invites": invites })))
}

/// Sends one outbox message to the mail receiver, with its id (the receiver stores each id once).
async fn send_email(http: &reqwest::Client, mail_url: &str, message: Message) -> Result<(), String> {
    let mut mail: serde_json::Value = serde_json::from_str(&message.payload).map_err(|e| e.to_string())?;
    mail["id"] = serde_json::Value::String(message.id);
    let answer = http.post(format!("{mail_url}/messages")).json(&mail).send().await.map_err(|e| e.to_string())?;
    match answer.status() {
        status if status.is_success() => Ok(()),
        status => Err(format!("mail receiver answered {status}")),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let keys = SqliteKeys::open(&cli.db, DEFAULT_RETENTION)?;
    keys.with_conn(|c| {
        Ok(c.execute_batch("CREATE TABLE IF NOT EXISTS invites (id INTEGER PRIMARY KEY, email TEXT NOT NULL)")?)
    })
    .await?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build()?;
    let (store, mail_url) = (keys.clone(), cli.mail_url.trim_end_matches('/').to_owned());
    let deliver = move |message| {
        let (http, mail_url) = (http.clone(), mail_url.clone());
        async move { send_email(&http, &mail_url, message).await }
    };
    let worker = tokio::spawn(Worker::default().run(store, deliver, stopped.clone()));
    let sweeper = tokio::spawn(keys.clone().sweep_every(Duration::from_secs(3600), stopped));

    let app = Router::new()
        .route("/api/invites", post(invite).get(list))
        .route("/api/idempotency-keys/{key}", get(key_status).post(settle_key))
        .with_state(keys)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(Extension(BODY_DEADLINE));
    let listener = TcpListener::bind(cli.addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    serve(listener, app, shutdown_signal()).await;
    let _ = stop.send(true);
    let _ = tokio::join!(worker, sweeper);
    Ok(())
}

/// Serves `app` until `shutdown` resolves, then lets open requests finish (at most `SHUTDOWN_GRACE`).
///
/// hyper directly rather than `axum::serve`, which has no header-read timeout: a client must send its
/// whole request head within `HEADER_TIMEOUT` (the same bound holds an idle keep-alive connection), so a
/// socket that sends nothing or dribbles headers is closed instead of holding a task.
async fn serve(listener: TcpListener, app: Router, shutdown: impl std::future::Future<Output = ()>) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of file descriptors and the like: wait a little instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let connection = http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown()).await;
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => return interrupt.await.unwrap_or(()),
        };
        tokio::select! { _ = interrupt => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}
