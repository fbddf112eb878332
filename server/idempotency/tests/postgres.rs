//! The library on a throwaway PostgreSQL cluster.
//!
//! `#[ignore]`d: they need PostgreSQL's binaries, so they run with
//! `cargo test -p idempotent-endpoint --test postgres -- --ignored` (the xtask runs that after installing
//! PostgreSQL); run that way they fail when the binaries are missing.

#[path = "../../tests/common/pg_cluster.rs"]
mod pg_cluster;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use idempotent_endpoint::outbox::{self, Message, OutboxStore, Worker};
use idempotent_endpoint::postgres::{install, run, status, WorkFuture};
use idempotent_endpoint::{fingerprint, IdempotencyKey, KeyStatus, KeyedRequest, Outcome, RunError, StoredResponse};
use pg_cluster::{bin_dir, Cluster};
use tokio_postgres::{Client, NoTls, Transaction};

async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.expect("connect to test cluster");
    tokio::spawn(connection);
    client
}

fn request(key: &str, body: &str) -> KeyedRequest {
    KeyedRequest {
        scope: "tests".to_owned(),
        key: IdempotencyKey::parse(key).expect("key"),
        fingerprint: fingerprint("POST", "/notes", body.as_bytes()),
    }
}

async fn count(client: &Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).await.expect("count").get(0)
}

/// The app's work: a note and its outbox message, in the key's transaction.
fn note<'t>(tx: &'t Transaction<'t>, text: &'static str) -> WorkFuture<'t, String> {
    Box::pin(async move {
        tx.execute("INSERT INTO notes (text) VALUES ($1)", &[&text]).await.map_err(|e| e.to_string())?;
        let message = Message::new("note", &text).map_err(|e| e.to_string())?;
        outbox::enqueue_postgres(tx, &message).await.map_err(|e| e.to_string())?;
        Ok(StoredResponse::json(StatusCode::CREATED, &text))
    })
}

const HOUR: Duration = Duration::from_secs(3600);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL binaries: cargo test -p idempotent-endpoint --test postgres -- --ignored"]
async fn the_key_row_commits_with_the_apps_rows() {
    let cluster = Cluster::start(bin_dir(), Cluster::FAST).expect("start a throwaway PostgreSQL cluster");
    let url = cluster.url("postgres");
    let mut a = connect(&url).await;
    let mut b = connect(&url).await;
    install(&a).await.expect("install");
    install(&b).await.expect("install again: idempotent");
    a.batch_execute("CREATE TABLE notes (id BIGSERIAL PRIMARY KEY, text TEXT NOT NULL)").await.expect("schema");

    let req = request("pg-key-00000000000001", "{\"text\":\"one\"}");
    assert!(matches!(run(&mut a, &req, HOUR, |tx| note(tx, "one")).await, Ok(Outcome::Fresh(_))));
    assert!(matches!(run(&mut b, &req, HOUR, |tx| note(tx, "one")).await, Ok(Outcome::Replay(_))));
    let other = request("pg-key-00000000000001", "{\"text\":\"two\"}");
    assert!(matches!(run(&mut b, &other, HOUR, |tx| note(tx, "two")).await, Ok(Outcome::Mismatch)));
    assert_eq!(count(&a, "SELECT COUNT(*) FROM notes").await, 1);
    assert!(matches!(status(&a, "tests", &req.key, HOUR).await, Ok(KeyStatus::Done { .. })));

    // A failing work rolls the key row back with the app's rows.
    let failing = request("pg-key-00000000000002", "{}");
    let failed = run(&mut a, &failing, HOUR, |tx| {
        Box::pin(async move {
            tx.execute("INSERT INTO notes (text) VALUES ('half')", &[]).await.map_err(|e| e.to_string())?;
            Err("failed".to_owned())
        })
    })
    .await;
    assert!(matches!(failed, Err(RunError::Work(_))), "{failed:?}");
    assert_eq!(count(&a, "SELECT COUNT(*) FROM notes").await, 1);
    assert_eq!(status(&a, "tests", &failing.key, HOUR).await.expect("status"), KeyStatus::Unknown);

    // While one transaction holds a key, another instance gets "in flight" at once, and so does the status.
    let held = request("pg-key-00000000000003", "{}");
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let (started, is_started) = tokio::sync::oneshot::channel::<()>();
    let first = {
        let held = held.clone();
        tokio::spawn(async move {
            let outcome = run(&mut a, &held, HOUR, move |tx| {
                Box::pin(async move {
                    let _ = started.send(());
                    let _ = released.await;
                    tx.execute("INSERT INTO notes (text) VALUES ('held')", &[]).await.map_err(|e| e.to_string())?;
                    Ok::<_, String>(StoredResponse::json(StatusCode::CREATED, &"held"))
                })
            })
            .await;
            (outcome, a)
        })
    };
    is_started.await.expect("the first request started its work");
    assert!(matches!(run(&mut b, &held, HOUR, |tx| note(tx, "held")).await, Ok(Outcome::InFlight)));
    assert_eq!(status(&b, "tests", &held.key, HOUR).await.expect("status"), KeyStatus::InFlight);
    release.send(()).expect("release");
    let (outcome, a) = first.await.expect("task");
    assert!(matches!(outcome, Ok(Outcome::Fresh(_))), "{outcome:?}");
    assert!(matches!(run(&mut b, &held, HOUR, |tx| note(tx, "held")).await, Ok(Outcome::Replay(_))));
    assert_eq!(count(&a, "SELECT COUNT(*) FROM notes").await, 2);

    // The outbox on PostgreSQL: the one message written, claimed once, delivered.
    let store = Arc::new(b);
    assert!(store.claim(0, 0, 0).await.expect("claim none").is_empty());
    let worker = Worker::default();
    let delivered = worker.deliver_once(&store, &|_m: Message| async { Ok::<(), String>(()) }).await.expect("pass");
    assert_eq!(delivered, 1);
    assert_eq!(count(&a, "SELECT COUNT(*) FROM outbox_messages WHERE delivered_at IS NOT NULL").await, 1);
    assert_eq!(idempotent_endpoint::postgres::sweep(&a, HOUR).await.expect("sweep"), 0);
}
