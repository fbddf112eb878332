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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL binaries: cargo test -p idempotent-endpoint --test postgres -- --ignored"]
async fn phases_take_over_a_crashed_holder_across_connections() {
    use idempotent_endpoint::phases::{postgres as phases, Begun, STARTED};
    use idempotent_endpoint::StoreError;

    let cluster = Cluster::start(bin_dir(), Cluster::FAST).expect("start a throwaway PostgreSQL cluster");
    let url = cluster.url("postgres");
    let (mut a, mut b) = (connect(&url).await, connect(&url).await);
    install(&a).await.expect("install");
    a.batch_execute("CREATE TABLE charges (key TEXT NOT NULL)").await.expect("schema");
    let lease = Duration::from_millis(300);
    let req = request("pg-phase-0000000001", "{\"amount\":5}");

    let Ok(Begun::Held(mut first)) = phases::begin(&mut a, &req, HOUR, lease).await else { panic!("held") };
    assert_eq!(first.point, STARTED);
    assert_eq!(phases::begin(&mut b, &req, HOUR, lease).await.expect("begin"), Begun::Answered(Outcome::InFlight));
    phases::advance(&mut a, &mut first, "charge_started", lease, |tx| {
        Box::pin(async move {
            tx.execute("INSERT INTO charges (key) VALUES ('pending')", &[]).await.map(|_| ()).map_err(|e| e.to_string())
        })
    })
    .await
    .expect("advance");

    tokio::time::sleep(lease + Duration::from_millis(100)).await;
    let Ok(Begun::Held(second)) = phases::begin(&mut b, &req, HOUR, lease).await else { panic!("taken over") };
    assert_eq!(second.point, "charge_started");
    assert_eq!(second.downstream_key("charge"), first.downstream_key("charge"));
    let stale =
        phases::advance(&mut a, &mut first, "charged", lease, |_| Box::pin(async { Ok::<(), String>(()) })).await;
    assert!(matches!(stale, Err(RunError::Store(StoreError::LeaseLost))), "{stale:?}");

    let done = phases::finish(&mut b, second, |_| {
        Box::pin(async { Ok::<_, String>(StoredResponse::json(StatusCode::CREATED, &"paid")) })
    })
    .await
    .expect("finish");
    let Outcome::Fresh(answer) = done else { panic!("fresh") };
    assert_eq!(
        phases::begin(&mut a, &req, HOUR, lease).await.expect("begin"),
        Begun::Answered(Outcome::Replay(answer))
    );

    // The completer: a released key at once, an abandoned one after its lease.
    let Ok(Begun::Held(released)) = phases::begin(&mut a, &request("pg-phase-0000000002", "{}"), HOUR, lease).await
    else {
        panic!()
    };
    let Ok(Begun::Held(_abandoned)) = phases::begin(&mut a, &request("pg-phase-0000000003", "{}"), HOUR, lease).await
    else {
        panic!()
    };
    phases::release(&a, released).await.expect("release");
    let now = phases::unfinished(&mut b, 10, lease).await.expect("unfinished");
    assert_eq!(now.iter().map(|h| h.key.as_str()).collect::<Vec<_>>(), vec!["pg-phase-0000000002"]);
    tokio::time::sleep(lease + Duration::from_millis(100)).await;
    let later = phases::unfinished(&mut b, 10, lease).await.expect("unfinished");
    assert!(later.iter().any(|h| h.key.as_str() == "pg-phase-0000000003"));
    assert_eq!(count(&a, "SELECT COUNT(*) FROM charges").await, 1, "the stale holder's step wrote nothing");
}
