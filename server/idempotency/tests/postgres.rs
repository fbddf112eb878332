//! The library on a throwaway PostgreSQL cluster.
//!
//! `#[ignore]`d: they need PostgreSQL's binaries, so they run with
//! `cargo test -p idempotent-endpoint --test postgres -- --ignored` (the xtask runs that after installing
//! PostgreSQL); run that way they fail when the binaries are missing.

#[path = "../../tests/common/pg_cluster.rs"]
mod pg_cluster;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use idempotent_endpoint::outbox::{self, Message, OutboxStore, Worker};
use idempotent_endpoint::postgres::{install, run, run_spawned, settle, status, WorkFuture};
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
    assert_eq!(delivered.delivered, 1);
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

    // Abandon: a row held at `started` is deleted (the key is new again); a stale holder's or a moved row's
    // is kept.
    let req = request("pg-phase-0000000004", "{}");
    let Ok(Begun::Held(first)) = phases::begin(&mut a, &req, HOUR, lease).await else { panic!("held") };
    phases::abandon(&a, first.clone()).await.expect("abandon");
    let Ok(Begun::Held(mut again)) = phases::begin(&mut b, &req, HOUR, lease).await else { panic!("new again") };
    assert_ne!(again.row_id, first.row_id);
    assert!(matches!(phases::abandon(&a, first).await, Err(StoreError::LeaseLost)));
    phases::advance(&mut b, &mut again, "charge_started", lease, |_| Box::pin(async { Ok::<(), String>(()) }))
        .await
        .expect("advance");
    assert!(matches!(phases::abandon(&b, again).await, Err(StoreError::LeaseLost)));
    assert_eq!(phases::begin(&mut a, &req, HOUR, lease).await.expect("begin"), Begun::Answered(Outcome::InFlight));
}

/// The app's work for the fence tests: sleeps `for_ms`, counts the run, writes a note named after the key.
fn counted<'t>(tx: &'t Transaction<'t>, key: String, for_ms: u64, ran: Arc<AtomicUsize>) -> WorkFuture<'t, String> {
    Box::pin(async move {
        tokio::time::sleep(Duration::from_millis(for_ms)).await;
        ran.fetch_add(1, Ordering::SeqCst);
        tx.execute("INSERT INTO notes (text) VALUES ($1)", &[&key]).await.map_err(|e| e.to_string())?;
        Ok(StoredResponse::json(StatusCode::CREATED, &key))
    })
}

async fn sleep_until(start: Instant, ms: u64) {
    tokio::time::sleep_until((start + Duration::from_millis(ms)).into()).await;
}

async fn notes_named(client: &Client, key: &str) -> i64 {
    client.query_one("SELECT COUNT(*) FROM notes WHERE text = $1", &[&key]).await.expect("count").get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL binaries: cargo test -p idempotent-endpoint --test postgres -- --ignored"]
async fn a_hung_up_request_is_in_flight_in_every_connection_until_its_work_ends() {
    let cluster = Cluster::start(bin_dir(), Cluster::FAST).expect("start a throwaway PostgreSQL cluster");
    let url = cluster.url("postgres");
    let observer = connect(&url).await;
    install(&observer).await.expect("install");
    observer.batch_execute("CREATE TABLE notes (id BIGSERIAL PRIMARY KEY, text TEXT NOT NULL)").await.expect("schema");

    // run_spawned: the work outlives the caller and commits.
    let req = request("pg-hangup-0000000001", "{}");
    let ran = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let caller = {
        let (client, req, ran) = (Box::new(connect(&url).await), req.clone(), Arc::clone(&ran));
        let name = req.key.as_str().to_owned();
        tokio::spawn(run_spawned(client, req, HOUR, move |tx| counted(tx, name, 1500, ran)))
    };
    sleep_until(start, 300).await;
    caller.abort();
    assert!(caller.await.expect_err("aborted").is_cancelled());
    sleep_until(start, 500).await;
    assert_eq!(status(&observer, "tests", &req.key, HOUR).await.expect("status"), KeyStatus::InFlight, "+0.5 s");
    sleep_until(start, 1000).await;
    assert_eq!(status(&observer, "tests", &req.key, HOUR).await.expect("status"), KeyStatus::InFlight, "+1.0 s");
    sleep_until(start, 2500).await;
    let done = status(&observer, "tests", &req.key, HOUR).await.expect("status");
    assert!(matches!(done, KeyStatus::Done { .. }), "the work completed: {done:?}");
    assert_eq!((ran.load(Ordering::SeqCst), notes_named(&observer, req.key.as_str()).await), (1, 1));

    // run in the caller's future: a hang-up rolls it back, and the key then reads unknown, which is true.
    let req = request("pg-hangup-0000000002", "{}");
    let ran = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let caller = {
        let (mut client, req, ran) = (connect(&url).await, req.clone(), Arc::clone(&ran));
        let name = req.key.as_str().to_owned();
        tokio::spawn(async move { run(&mut client, &req, HOUR, move |tx| counted(tx, name, 1500, ran)).await })
    };
    sleep_until(start, 300).await;
    assert_eq!(status(&observer, "tests", &req.key, HOUR).await.expect("status"), KeyStatus::InFlight);
    caller.abort();
    assert!(caller.await.expect_err("aborted").is_cancelled());
    let mut rolled_back = KeyStatus::InFlight;
    for _ in 0..50 {
        rolled_back = status(&observer, "tests", &req.key, HOUR).await.expect("status");
        if rolled_back != KeyStatus::InFlight {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(rolled_back, KeyStatus::Unknown);
    sleep_until(start, 2000).await;
    assert_eq!((ran.load(Ordering::SeqCst), notes_named(&observer, req.key.as_str()).await), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL binaries: cargo test -p idempotent-endpoint --test postgres -- --ignored"]
async fn settle_fences_an_unseen_key_and_waits_for_none() {
    use idempotent_endpoint::phases::{postgres as phases, Begun};
    use idempotent_endpoint::postgres::{settle_response, sweep};

    let cluster = Cluster::start(bin_dir(), Cluster::FAST).expect("start a throwaway PostgreSQL cluster");
    let url = cluster.url("postgres");
    let (mut a, mut b) = (connect(&url).await, connect(&url).await);
    install(&a).await.expect("install");
    a.batch_execute("CREATE TABLE notes (id BIGSERIAL PRIMARY KEY, text TEXT NOT NULL)").await.expect("schema");

    // An unseen key: fenced, fenced again, read fenced; a late request does no work.
    let req = request("pg-fence-00000000001", "{}");
    assert_eq!(settle(&mut a, "tests", &req.key, HOUR).await.expect("settle"), KeyStatus::Fenced);
    assert_eq!(settle(&mut b, "tests", &req.key, HOUR).await.expect("settle"), KeyStatus::Fenced);
    assert_eq!(status(&b, "tests", &req.key, HOUR).await.expect("status"), KeyStatus::Fenced);
    let ran = Arc::new(AtomicUsize::new(0));
    let late = {
        let (ran, name) = (Arc::clone(&ran), req.key.as_str().to_owned());
        run(&mut b, &req, HOUR, move |tx| counted(tx, name, 0, ran)).await
    };
    assert!(matches!(late, Ok(Outcome::Fenced)), "{late:?}");
    let spawned = {
        let (ran, name) = (Arc::clone(&ran), req.key.as_str().to_owned());
        run_spawned(Box::new(connect(&url).await), req.clone(), HOUR, move |tx| counted(tx, name, 0, ran)).await
    };
    assert!(matches!(spawned, Ok(Outcome::Fenced)), "{spawned:?}");
    assert_eq!(
        phases::begin(&mut a, &request("pg-fence-00000000001", "{}"), HOUR, HOUR).await.expect("begin"),
        Begun::Answered(Outcome::Fenced)
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0, "the work never ran");
    assert_eq!(count(&a, "SELECT COUNT(*) FROM notes").await, 0);

    // The POST glue, as an app exposes it.
    let answer = settle_response(&mut a, "tests", "pg-fence-00000000002", HOUR).await;
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["cache-control"], "no-store");

    // A key in its work: in flight at once (no waiting for the work), then done with its answer.
    let busy = request("pg-fence-00000000003", "{}");
    let work = {
        let (client, req, ran) = (Box::new(connect(&url).await), busy.clone(), Arc::clone(&ran));
        let name = req.key.as_str().to_owned();
        tokio::spawn(run_spawned(client, req, HOUR, move |tx| counted(tx, name, 1000, ran)))
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let asked = Instant::now();
    assert_eq!(settle(&mut a, "tests", &busy.key, HOUR).await.expect("settle"), KeyStatus::InFlight);
    assert!(asked.elapsed() < Duration::from_millis(300), "without waiting: {:?}", asked.elapsed());
    let Ok(Outcome::Fresh(answer)) = work.await.expect("task") else { panic!("the work was done") };
    assert_eq!(settle(&mut a, "tests", &busy.key, HOUR).await.expect("settle"), KeyStatus::done(answer.clone()));
    assert_eq!(status(&b, "tests", &busy.key, HOUR).await.expect("status"), KeyStatus::done(answer));

    // Fences expire with the retention: an expired one is replaced, the sweep deletes them.
    a.batch_execute("UPDATE idempotency_records SET created_at = created_at - 7200").await.expect("age");
    assert_eq!(status(&a, "tests", &req.key, HOUR).await.expect("status"), KeyStatus::Unknown);
    assert_eq!(settle(&mut a, "tests", &req.key, HOUR).await.expect("settle"), KeyStatus::Fenced);
    assert_eq!(sweep(&a, HOUR).await.expect("sweep"), 2, "the other fence and the done key");
    assert_eq!(count(&a, "SELECT COUNT(*) FROM idempotency_records").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL binaries: cargo test -p idempotent-endpoint --test postgres -- --ignored"]
async fn a_request_and_a_settle_racing_never_both_win() {
    let cluster = Cluster::start(bin_dir(), Cluster::FAST).expect("start a throwaway PostgreSQL cluster");
    let url = cluster.url("postgres");
    let observer = connect(&url).await;
    install(&observer).await.expect("install");
    observer.batch_execute("CREATE TABLE notes (id BIGSERIAL PRIMARY KEY, text TEXT NOT NULL)").await.expect("schema");
    let mut runners = Vec::new();
    let mut settlers = Vec::new();
    for _ in 0..3 {
        runners.push(Arc::new(tokio::sync::Mutex::new(connect(&url).await)));
        settlers.push(Arc::new(tokio::sync::Mutex::new(connect(&url).await)));
    }
    let (mut worked, mut fenced) = (0, 0);
    for round in 0..50u64 {
        let req = request(&format!("pg-race-{round:04}-0000000000"), "{}");
        let ran = Arc::new(AtomicUsize::new(0));
        // Either side starts up to 1 ms after the other, so each wins some rounds.
        let lag = Duration::from_micros((round % 5) * 250);
        let (run_lag, settle_lag) = if round % 2 == 0 { (lag, Duration::ZERO) } else { (Duration::ZERO, lag) };
        let runner = Arc::clone(&runners[round as usize % runners.len()]).lock_owned().await;
        let settler = Arc::clone(&settlers[round as usize % settlers.len()]);
        let running = {
            let (req, ran) = (req.clone(), Arc::clone(&ran));
            let name = req.key.as_str().to_owned();
            tokio::spawn(async move {
                tokio::time::sleep(run_lag).await;
                run_spawned(runner, req, HOUR, move |tx| counted(tx, name, 5, ran)).await
            })
        };
        let settling = {
            let key = req.key.clone();
            tokio::spawn(async move {
                tokio::time::sleep(settle_lag).await;
                settle(&mut *settler.lock().await, "tests", &key, HOUR).await
            })
        };
        let outcome = running.await.expect("task").expect("run");
        let settled = settling.await.expect("task").expect("settle");
        let ran = ran.load(Ordering::SeqCst);
        let last = settle(&mut *settlers[0].lock().await, "tests", &req.key, HOUR).await.expect("settle");
        let what = format!("round {round}: run {outcome:?}, settle {settled:?}, work ran {ran}x, then {last:?}");
        assert!(ran <= 1, "{what}");
        assert_eq!(notes_named(&observer, req.key.as_str()).await, ran as i64, "{what}");
        if ran == 1 {
            worked += 1;
            assert!(matches!(outcome, Outcome::Fresh(_)), "{what}");
            assert_ne!(settled, KeyStatus::Fenced, "{what}");
            assert!(matches!(last, KeyStatus::Done { .. }), "{what}");
        } else {
            fenced += 1;
            assert!(matches!(outcome, Outcome::Fenced | Outcome::InFlight), "{what}");
            assert_eq!(settled, KeyStatus::Fenced, "{what}");
            assert_eq!(last, KeyStatus::Fenced, "{what}");
        }
    }
    eprintln!("50 races: the work won {worked}, the fence won {fenced}");
    assert_eq!(worked + fenced, 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL binaries: cargo test -p idempotent-endpoint --test postgres -- --ignored"]
async fn an_expired_key_is_new_again_and_its_row_is_replaced_whole() {
    let cluster = Cluster::start(bin_dir(), Cluster::FAST).expect("start a throwaway PostgreSQL cluster");
    let url = cluster.url("postgres");
    let mut a = connect(&url).await;
    install(&a).await.expect("install");
    a.batch_execute("CREATE TABLE notes (id BIGSERIAL PRIMARY KEY, text TEXT NOT NULL)").await.expect("schema");

    let first = request("pg-expire-0000000001", "{\"text\":\"one\"}");
    assert!(matches!(run(&mut a, &first, HOUR, |tx| note(tx, "one")).await, Ok(Outcome::Fresh(_))));
    // Within the retention another body is a mismatch and the row stays as it is.
    let second = request("pg-expire-0000000001", "{\"text\":\"two\"}");
    assert!(matches!(run(&mut a, &second, HOUR, |tx| note(tx, "two")).await, Ok(Outcome::Mismatch)));

    // Aged past the retention, with leftovers of phased work on it: the key is new again, the work runs,
    // and the row is the new request's alone (no column of the old row survives).
    a.batch_execute(
        "UPDATE idempotency_records SET created_at = created_at - 7200, recovery_point = 'started',
             row_id = 'r', lock_token = 't', locked_until = 1",
    )
    .await
    .expect("age");
    let outcome = run(&mut a, &second, HOUR, |tx| note(tx, "two")).await;
    let Ok(Outcome::Fresh(answer)) = outcome else { panic!("an expired key is new again: {outcome:?}") };
    assert_eq!(count(&a, "SELECT COUNT(*) FROM notes").await, 2);
    let row = a
        .query_one(
            "SELECT fingerprint, recovery_point, row_id, lock_token, locked_until, created_at
             FROM idempotency_records WHERE key = $1",
            &[&second.key.as_str()],
        )
        .await
        .expect("the row");
    assert_eq!(row.get::<_, String>(0), second.fingerprint);
    assert_eq!(row.get::<_, String>(1), "finished");
    assert_eq!((row.get::<_, Option<String>>(2), row.get::<_, Option<String>>(3)), (None, None));
    assert_eq!(row.get::<_, i64>(4), 0);
    assert!(row.get::<_, i64>(5) > idempotent_endpoint::retention::unix_now() - 60, "created now");
    assert_eq!(status(&a, "tests", &second.key, HOUR).await.expect("status"), KeyStatus::done(answer));
    assert!(matches!(run(&mut a, &second, HOUR, |tx| note(tx, "two")).await, Ok(Outcome::Replay(_))));
    assert!(matches!(run(&mut a, &first, HOUR, |tx| note(tx, "one")).await, Ok(Outcome::Mismatch)));
    assert_eq!(count(&a, "SELECT COUNT(*) FROM idempotency_records").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL binaries: cargo test -p idempotent-endpoint --test postgres -- --ignored"]
async fn racing_requests_with_one_key_do_the_work_once() {
    let cluster = Cluster::start(bin_dir(), Cluster::FAST).expect("start a throwaway PostgreSQL cluster");
    let url = cluster.url("postgres");
    let observer = connect(&url).await;
    install(&observer).await.expect("install");
    observer.batch_execute("CREATE TABLE notes (id BIGSERIAL PRIMARY KEY, text TEXT NOT NULL)").await.expect("schema");
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(Arc::new(tokio::sync::Mutex::new(connect(&url).await)));
    }
    let (mut in_flight, mut replayed) = (0, 0);
    for round in 0..40u64 {
        let req = request(&format!("pg-same-{round:04}-0000000000"), "{}");
        let ran = Arc::new(AtomicUsize::new(0));
        let mut racers = Vec::new();
        for (i, client) in clients.iter().enumerate() {
            // The later ones start while the first is in its work, or as it commits.
            let lag = Duration::from_micros(i as u64 * (round % 8) * 500);
            let (client, req, ran) = (Arc::clone(client).lock_owned().await, req.clone(), Arc::clone(&ran));
            let name = req.key.as_str().to_owned();
            racers.push(tokio::spawn(async move {
                tokio::time::sleep(lag).await;
                run_spawned(client, req, HOUR, move |tx| counted(tx, name, 3, ran)).await
            }));
        }
        let mut outcomes = Vec::new();
        for racer in racers {
            outcomes.push(racer.await.expect("task").expect("run"));
        }
        let what = format!("round {round}: {outcomes:?}");
        assert_eq!(ran.load(Ordering::SeqCst), 1, "{what}");
        assert_eq!(notes_named(&observer, req.key.as_str()).await, 1, "{what}");
        assert_eq!(outcomes.iter().filter(|o| matches!(o, Outcome::Fresh(_))).count(), 1, "{what}");
        for outcome in &outcomes {
            match outcome {
                Outcome::Fresh(_) => {}
                Outcome::InFlight => in_flight += 1,
                Outcome::Replay(_) => replayed += 1,
                other => panic!("{what}: {other:?}"),
            }
        }
    }
    eprintln!("40 rounds of 3: {in_flight} answered in flight, {replayed} replayed");
    assert!(in_flight > 0, "some request arrived while another was in its work");
}

/// A connection whose session runs with `settings` (`-c name=value ...`).
async fn connect_with(url: &str, settings: &str) -> Client {
    let mut config: tokio_postgres::Config = url.parse().expect("test cluster url");
    config.options(settings);
    let (client, connection) = config.connect(NoTls).await.expect("connect to test cluster");
    tokio::spawn(connection);
    client
}

/// Holds `key`'s row locked (`FOR UPDATE`) in an open transaction of `holder` until the returned sender
/// fires or is dropped; resolves once the lock is held.
async fn hold_key_row(holder: Client, key: &'static str) -> tokio::sync::oneshot::Sender<()> {
    let (locked, is_locked) = tokio::sync::oneshot::channel();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let mut holder = holder;
        let tx = holder.transaction().await.expect("begin");
        tx.query_one("SELECT 1 FROM idempotency_records WHERE scope = 'tests' AND key = $1 FOR UPDATE", &[&key])
            .await
            .expect("lock the key row");
        let _ = locked.send(());
        let _ = released.await;
        tx.rollback().await.expect("rollback");
    });
    is_locked.await.expect("the holder locked the row");
    release
}

/// A step that writes no rows of its own.
fn no_rows<'t>(_: &'t Transaction<'t>) -> idempotent_endpoint::phases::postgres::StepFuture<'t, String> {
    Box::pin(async { Ok(()) })
}

/// A last step that answers 201.
fn done<'t>(_: &'t Transaction<'t>) -> WorkFuture<'t, String> {
    Box::pin(async { Ok(StoredResponse::json(StatusCode::CREATED, &"done")) })
}

/// Runs `phase` and returns its result and how long it took; a phase still waiting after 30 s fails the test.
async fn timed<T>(phase: impl std::future::Future<Output = T>) -> (T, Duration) {
    let start = Instant::now();
    let result =
        tokio::time::timeout(Duration::from_secs(30), phase).await.expect("the phase was still waiting after 30 s");
    (result, start.elapsed())
}

/// A phase that waits for a key row another transaction holds gives up after the library's
/// `KEY_LOCK_TIMEOUT` (or the session's own `lock_timeout`, or its `statement_timeout`, whichever ends the
/// wait first) with the typed `KeyBusy`, writes nothing, and goes through once the row is free again;
/// `RunError`'s answer for it is the 409 of a key in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL binaries: cargo test -p idempotent-endpoint --test postgres -- --ignored"]
async fn a_phase_waiting_for_a_held_key_row_gives_up_as_key_busy() {
    use axum::response::IntoResponse;
    use idempotent_endpoint::phases::{postgres as phases, Begun};
    use idempotent_endpoint::postgres::KEY_LOCK_TIMEOUT;
    use idempotent_endpoint::StoreError;

    let cluster = Cluster::start(bin_dir(), Cluster::FAST).expect("start a throwaway PostgreSQL cluster");
    let url = cluster.url("postgres");
    let mut a = connect(&url).await;
    install(&a).await.expect("install");
    let lease = Duration::from_secs(60);
    const KEY: &str = "pg-busy-0000000001";
    let req = request(KEY, "{}");
    let Ok(Begun::Held(mut held)) = phases::begin(&mut a, &req, HOUR, lease).await else { panic!("held") };
    let release = hold_key_row(connect(&url).await, KEY).await;

    // The default wait: `KEY_LOCK_TIMEOUT`, on a connection without a `lock_timeout` of its own.
    let (begun, waited) = timed(phases::begin(&mut a, &req, HOUR, lease)).await;
    assert!(matches!(begun, Err(StoreError::KeyBusy)), "{begun:?}");
    assert!(waited >= KEY_LOCK_TIMEOUT && waited < KEY_LOCK_TIMEOUT * 2, "begin gave up after {waited:?}");
    let (advanced, waited) = timed(phases::advance(&mut a, &mut held, "charge_started", lease, no_rows)).await;
    assert!(matches!(advanced, Err(RunError::Store(StoreError::KeyBusy))), "{advanced:?}");
    assert!(waited >= KEY_LOCK_TIMEOUT && waited < KEY_LOCK_TIMEOUT * 2, "advance gave up after {waited:?}");

    // A session's own `lock_timeout` is kept: `finish` gives up after it.
    let mut short = connect_with(&url, "-c lock_timeout=300ms").await;
    let (finished, waited) = timed(phases::finish(&mut short, held.clone(), done)).await;
    assert!(matches!(finished, Err(RunError::Store(StoreError::KeyBusy))), "{finished:?}");
    assert!(waited >= Duration::from_millis(300) && waited < KEY_LOCK_TIMEOUT, "finish gave up after {waited:?}");

    // The session's `statement_timeout`, shorter than the library's wait, ends it the same way (`release` is
    // one statement outside a transaction: only that bounds it).
    let mut bounded = connect_with(&url, "-c statement_timeout=300ms").await;
    let (begun, waited) = timed(phases::begin(&mut bounded, &req, HOUR, lease)).await;
    assert!(matches!(begun, Err(StoreError::KeyBusy)), "{begun:?}");
    assert!(waited < KEY_LOCK_TIMEOUT, "begin gave up after {waited:?}");
    let (released, waited) = timed(phases::release(&bounded, held.clone())).await;
    assert!(matches!(released, Err(StoreError::KeyBusy)), "{released:?}");
    assert!(waited < KEY_LOCK_TIMEOUT, "release gave up after {waited:?}");

    let busy = RunError::<String>::Store(StoreError::KeyBusy).into_response();
    assert_eq!(busy.status(), StatusCode::CONFLICT);
    assert!(busy.headers().contains_key("retry-after"), "{:?}", busy.headers());

    // Nothing was written; with the row free the same holder goes on.
    assert_eq!(count(&a, "SELECT COUNT(*) FROM idempotency_records WHERE recovery_point = 'started'").await, 1);
    let _ = release.send(());
    phases::advance(&mut a, &mut held, "charge_started", lease, no_rows).await.expect("advance once the row is free");
    let Outcome::Fresh(_) = phases::finish(&mut a, held, done).await.expect("finish") else { panic!("fresh") };
}
