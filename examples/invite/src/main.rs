//! Invite a user: `POST /api/invites {"email"}` with an `Idempotency-Key` stores one invitation and sends
//! one email, however often the client retries. The invitation row, the outbox message and the key's answer
//! commit in one transaction; the outbox worker delivers the email to a mail receiver, which deduplicates
//! by the message id. Everything about the protocol comes from `idempotent-endpoint`.
//!
//! `invite-example --addr 127.0.0.1:0 --db invites.sqlite --mail-url http://127.0.0.1:8082` prints one
//! `listening on URL` line; Ctrl-C or SIGTERM stops it. With `--database-url postgres://...` instead of
//! `--db` the app keeps its rows in PostgreSQL, and any number of instances may share the database.

mod store;

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Path, State};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use clap::Parser;
use idempotent_endpoint::outbox::Message;
use idempotent_endpoint::serve::{serve, shutdown_signal, ServeLimits};
use idempotent_endpoint::{BodyDeadline, Idempotent, Outcome, Problem, RunError};
use tokio::net::TcpListener;

use crate::store::Store;

/// Flags of `invite-example`.
#[derive(Debug, Parser)]
struct Cli {
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:8090")]
    addr: SocketAddr,
    /// SQLite file (created if missing).
    #[arg(long, default_value = "invites.sqlite")]
    db: String,
    /// PostgreSQL instead of SQLite (`postgres://user@host:port/db`).
    #[arg(long)]
    database_url: Option<String>,
    /// The mail receiver's base URL (`POST {url}/messages`).
    #[arg(long)]
    mail_url: String,
}

/// The recipe for an endpoint on the open internet (idempotent-endpoint's README, "Serving"): the request
/// head within `ServeLimits::default()`'s header timeout, the body within [`BODY_DEADLINE`] and at most
/// [`MAX_BODY_BYTES`].
const BODY_DEADLINE: BodyDeadline = BodyDeadline(Duration::from_secs(5));
/// An invitation is an email address: a small body is all this endpoint takes.
const MAX_BODY_BYTES: usize = 4 * 1024;

/// This app has no accounts: one scope for everyone, and keys are random (128 bits from the client's
/// CSPRNG). An app with sign-in scopes keys by the signed-in account instead.
const SCOPE: &str = "public";

#[derive(serde::Deserialize)]
struct Invite {
    email: String,
}

async fn invite(State(store): State<Store>, request: Idempotent) -> Result<Outcome, RunError<Problem>> {
    let Invite { email } = request.json().map_err(RunError::Work)?;
    if email.len() > 254 || !email.contains('@') {
        return Err(RunError::Work(Problem::bad_request("invalid-email", "`email` must be an email address.")));
    }
    store.invite(request.scoped(SCOPE), email).await
}

async fn key_status(State(store): State<Store>, Path(raw): Path<String>) -> axum::response::Response {
    store.status_response(SCOPE, &raw).await
}

/// Settles a key (the fence): a client settles before it gives an intent a new key.
async fn settle_key(State(store): State<Store>, Path(raw): Path<String>) -> axum::response::Response {
    store.settle_response(SCOPE, &raw).await
}

async fn list(State(store): State<Store>) -> Result<Json<serde_json::Value>, Problem> {
    Ok(Json(serde_json::json!({ "invites": store.list().await? })))
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
    let store = Store::open(&cli.db, cli.database_url.as_deref()).await?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build()?;
    let mail_url = cli.mail_url.trim_end_matches('/').to_owned();
    let deliver = move |message| {
        let (http, mail_url) = (http.clone(), mail_url.clone());
        async move { send_email(&http, &mail_url, message).await }
    };
    let background = tokio::spawn(store.clone().background(deliver, stopped));

    let app = Router::new()
        .route("/api/invites", post(invite).get(list))
        .route("/api/idempotency-keys/{key}", get(key_status).post(settle_key))
        .with_state(store)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(Extension(BODY_DEADLINE));
    let listener = TcpListener::bind(cli.addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    serve(listener, app, ServeLimits::default(), shutdown_signal()).await;
    let _ = stop.send(true);
    let _ = background.await;
    Ok(())
}
