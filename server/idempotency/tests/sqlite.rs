//! The library over real HTTP on 127.0.0.1 and a real SQLite file: an endpoint with its own table.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use idempotent_endpoint::outbox::{self, Message, Worker};
use idempotent_endpoint::sqlite::{run_in, SqliteKeys};
use idempotent_endpoint::{
    fingerprint, IdempotencyKey, Idempotent, KeyStatus, KeyedRequest, Outcome, Problem, RunError, StoreError,
    StoredResponse,
};
use rusqlite::Connection;

#[derive(serde::Deserialize)]
struct Note {
    text: String,
}

async fn create(State(keys): State<SqliteKeys>, request: Idempotent) -> Result<Outcome, RunError<Problem>> {
    let note: Note = request.json().map_err(RunError::Work)?;
    keys.run(request.scoped("tests"), move |tx| {
        // Slow enough that concurrent requests with one key overlap.
        std::thread::sleep(Duration::from_millis(30));
        tx.execute("INSERT INTO notes (text) VALUES (?1)", [&note.text]).map_err(|_| Problem::internal())?;
        let message =
            Message::new("note", &serde_json::json!({ "text": note.text })).map_err(|_| Problem::internal())?;
        outbox::enqueue_sqlite(tx, &message).map_err(|_| Problem::internal())?;
        Ok(StoredResponse::json(
            StatusCode::CREATED,
            &serde_json::json!({ "text": note.text, "id": tx.last_insert_rowid() }),
        ))
    })
    .await
}

async fn status(State(keys): State<SqliteKeys>, Path(raw): Path<String>) -> Result<KeyStatus, Problem> {
    let key = IdempotencyKey::parse(&raw)?;
    keys.status("tests".to_owned(), key).await.map_err(|_| Problem::internal())
}

async fn settle(State(keys): State<SqliteKeys>, Path(raw): Path<String>) -> axum::response::Response {
    keys.settle_response("tests".to_owned(), &raw).await
}

struct App {
    base: String,
    keys: SqliteKeys,
    _dir: tempfile::TempDir,
}

async fn app() -> App {
    let dir = tempfile::tempdir().expect("temp dir");
    let keys = SqliteKeys::open(dir.path().join("app.sqlite"), Duration::from_secs(3600)).expect("open");
    keys.with_conn(|c| Ok(c.execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")?))
        .await
        .expect("schema");
    let router = Router::new()
        .route("/notes", post(create))
        .route("/keys/{key}", get(status).post(settle))
        .with_state(keys.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    App { base, keys, _dir: dir }
}

async fn post_note(base: &str, key: &str, text: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/notes"))
        .header("idempotency-key", key)
        .header("content-type", "application/json")
        .body(serde_json::json!({ "text": text }).to_string())
        .send()
        .await
        .expect("answer")
}

async fn count(keys: &SqliteKeys, sql: &'static str) -> i64 {
    keys.with_conn(move |c| Ok(c.query_row(sql, [], |r| r.get(0))?)).await.expect("count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_effect_per_key_replayed_with_the_marker() {
    let app = app().await;
    let key = "3b1f0c7e-7a51-4a43-9d0e-0c6f1a2b3c4d";
    let first = post_note(&app.base, key, "hello").await;
    assert_eq!(first.status(), 201);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first_body = first.text().await.expect("body");

    let again = post_note(&app.base, key, "hello").await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.text().await.expect("body"), first_body);

    let quoted = post_note(&app.base, &format!("\"{key}\""), "hello").await;
    assert_eq!(quoted.headers()["idempotent-replayed"], "true", "the sf-string form names the same key");

    let other = post_note(&app.base, key, "another body").await;
    assert_eq!(other.status(), 422);
    assert_eq!(count(&app.keys, "SELECT COUNT(*) FROM notes").await, 1);
    assert_eq!(count(&app.keys, "SELECT COUNT(*) FROM outbox_messages").await, 1);

    let missing = reqwest::Client::new().post(format!("{}/notes", app.base)).body("{}").send().await.expect("answer");
    assert_eq!(missing.status(), 400);
    let problem: serde_json::Value = missing.json().await.expect("problem");
    assert_eq!(problem["code"], "missing-idempotency-key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_with_one_key_make_one_note() {
    let app = app().await;
    let key = "k".repeat(255);
    let sends = (0..8).map(|_| {
        let (base, key) = (app.base.clone(), key.clone());
        tokio::spawn(async move {
            let response = post_note(&base, &key, "once").await;
            (response.status().as_u16(), response.text().await.expect("body"))
        })
    });
    let answers: Vec<(u16, String)> = futures_join(sends).await;
    let created: Vec<&String> = answers.iter().filter(|(s, _)| *s == 201).map(|(_, b)| b).collect();
    assert!(answers.iter().all(|(s, _)| *s == 201 || *s == 409), "{answers:?}");
    assert!(created.windows(2).all(|w| w[0] == w[1]), "every 201 is the same answer: {answers:?}");
    assert_eq!(count(&app.keys, "SELECT COUNT(*) FROM notes").await, 1);
}

async fn futures_join<T: Send + 'static>(handles: impl Iterator<Item = tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for handle in handles.collect::<Vec<_>>() {
        out.push(handle.await.expect("task"));
    }
    out
}

fn request(key: &str, body: &str) -> KeyedRequest {
    KeyedRequest {
        scope: "tests".to_owned(),
        key: IdempotencyKey::parse(key).expect("key"),
        fingerprint: fingerprint("POST", "/notes", body.as_bytes()),
    }
}

fn memory() -> Connection {
    let conn = Connection::open_in_memory().expect("open");
    idempotent_endpoint::sqlite::install(&conn).expect("install");
    conn.execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)").expect("schema");
    conn
}

fn notes(conn: &Connection) -> i64 {
    conn.query_row("SELECT COUNT(*) FROM notes", [], |r| r.get(0)).expect("count")
}

fn keys(conn: &Connection) -> i64 {
    conn.query_row("SELECT COUNT(*) FROM idempotency_records", [], |r| r.get(0)).expect("count")
}

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn failed_work_leaves_neither_the_key_nor_its_rows() {
    let mut conn = memory();
    let req = request("key-0000000000000001", "{}");
    let failed = run_in(&mut conn, &req, HOUR, |tx| {
        tx.execute("INSERT INTO notes (text) VALUES ('half')", []).map_err(|e| e.to_string())?;
        Err::<StoredResponse, String>("the app's work failed".to_owned())
    });
    assert!(matches!(failed, Err(RunError::Work(ref e)) if e == "the app's work failed"), "{failed:?}");
    assert_eq!((notes(&conn), keys(&conn)), (0, 0));

    let retried = run_in(&mut conn, &req, HOUR, |tx| {
        tx.execute("INSERT INTO notes (text) VALUES ('whole')", []).map_err(|e| e.to_string())?;
        Ok::<_, String>(StoredResponse::json(StatusCode::CREATED, &"whole"))
    });
    assert!(matches!(retried, Ok(Outcome::Fresh(_))), "{retried:?}");
    assert_eq!((notes(&conn), keys(&conn)), (1, 1));
}

#[test]
fn an_answer_too_large_to_store_commits_nothing() {
    let mut conn = memory();
    let req = request("key-0000000000000002", "{}");
    let outcome = run_in(&mut conn, &req, HOUR, |tx| {
        tx.execute("INSERT INTO notes (text) VALUES ('x')", []).map_err(|e| e.to_string())?;
        Ok::<_, String>(StoredResponse::json(StatusCode::OK, &"x".repeat(20_000)))
    });
    assert!(matches!(outcome, Err(RunError::Store(StoreError::ResponseTooLarge(_)))), "{outcome:?}");
    assert_eq!((notes(&conn), keys(&conn)), (0, 0));
}

#[test]
fn an_expired_key_is_new_again_and_the_sweep_deletes_only_keys() {
    let mut conn = memory();
    let req = request("key-0000000000000003", "{}");
    let work = |tx: &rusqlite::Transaction<'_>| {
        tx.execute("INSERT INTO notes (text) VALUES ('n')", []).map_err(|e| e.to_string())?;
        Ok::<_, String>(StoredResponse::json(StatusCode::CREATED, &"n"))
    };
    assert!(matches!(run_in(&mut conn, &req, HOUR, work), Ok(Outcome::Fresh(_))));
    assert!(matches!(run_in(&mut conn, &req, HOUR, work), Ok(Outcome::Replay(_))));
    conn.execute("UPDATE idempotency_records SET created_at = created_at - 7200", []).expect("age");
    assert_eq!(
        idempotent_endpoint::sqlite::status_in(&conn, "tests", &req.key, HOUR).expect("status"),
        KeyStatus::Unknown
    );
    assert!(matches!(run_in(&mut conn, &req, HOUR, work), Ok(Outcome::Fresh(_))), "expired: done again");
    assert_eq!(notes(&conn), 2);
    conn.execute("UPDATE idempotency_records SET created_at = created_at - 7200", []).expect("age");
    assert_eq!(idempotent_endpoint::sqlite::sweep_in(&conn, HOUR).expect("sweep"), 1);
    assert_eq!((notes(&conn), keys(&conn)), (2, 0));
}

#[test]
fn a_scope_over_255_bytes_is_refused() {
    let mut conn = memory();
    let mut req = request("key-0000000000000004", "{}");
    req.scope = "s".repeat(256);
    let outcome = run_in(&mut conn, &req, HOUR, |_| Ok::<_, String>(StoredResponse::json(StatusCode::OK, &1)));
    assert!(matches!(outcome, Err(RunError::Store(StoreError::ScopeTooLong(256)))), "{outcome:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn key_status_over_http() {
    let app = app().await;
    let key = "status-key-000000001";
    let unknown: serde_json::Value =
        reqwest::get(format!("{}/keys/{key}", app.base)).await.expect("get").json().await.expect("json");
    assert_eq!(unknown["status"], "unknown");
    assert_eq!(post_note(&app.base, key, "s").await.status(), 201);
    let done: serde_json::Value =
        reqwest::get(format!("{}/keys/{key}", app.base)).await.expect("get").json().await.expect("json");
    assert_eq!(done["status"], "done");
    assert_eq!(done["response"]["status"], 201);
    assert_eq!(done["response"]["headers"]["idempotent-replayed"], "true");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_outbox_delivers_each_message_after_failures() {
    let app = app().await;
    for (i, key) in ["outbox-key-000000001", "outbox-key-000000002"].iter().enumerate() {
        assert_eq!(post_note(&app.base, key, &format!("n{i}")).await.status(), 201);
    }
    let worker =
        Worker { base_delay: Duration::from_millis(1), max_delay: Duration::from_millis(5), ..Worker::default() };
    let calls = Arc::new(AtomicUsize::new(0));
    let delivered = Arc::new(Mutex::new(Vec::new()));
    let deliver = |message: Message| {
        let (calls, delivered) = (Arc::clone(&calls), Arc::clone(&delivered));
        async move {
            // The first two attempts fail, like a mail server that is down.
            if calls.fetch_add(1, Ordering::SeqCst) < 2 {
                return Err("receiver down".to_owned());
            }
            delivered.lock().expect("lock").push(message.id);
            Ok(())
        }
    };
    assert_eq!(worker.deliver_once(&app.keys, &deliver).await.expect("pass").delivered, 0);
    for _ in 0..50 {
        if delivered.lock().expect("lock").len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        worker.deliver_once(&app.keys, &deliver).await.expect("pass");
    }
    let mut ids = delivered.lock().expect("lock").clone();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 2, "each message delivered once");
    assert_eq!(count(&app.keys, "SELECT COUNT(*) FROM outbox_messages WHERE delivered_at IS NOT NULL").await, 2);
    assert_eq!(count(&app.keys, "SELECT SUM(attempts) FROM outbox_messages").await, 4);
    assert_eq!(worker.deliver_once(&app.keys, &deliver).await.expect("pass").claimed, 0, "nothing left");
}

/// A run whose work sleeps `for_ms` and then writes one note, counting the times it ran.
fn slow_note(
    keys: &SqliteKeys,
    key: &str,
    for_ms: u64,
    ran: &Arc<AtomicUsize>,
) -> impl std::future::Future<Output = Result<Outcome, RunError<String>>> + Send + 'static {
    let (keys, req, ran) = (keys.clone(), request(key, "{}"), Arc::clone(ran));
    async move {
        keys.run(req, move |tx| {
            std::thread::sleep(Duration::from_millis(for_ms));
            ran.fetch_add(1, Ordering::SeqCst);
            tx.execute("INSERT INTO notes (text) VALUES ('slow')", []).map_err(|e| e.to_string())?;
            Ok(StoredResponse::json(StatusCode::CREATED, &"slow"))
        })
        .await
    }
}

async fn status_of(keys: &SqliteKeys, key: &str) -> KeyStatus {
    keys.status("tests".to_owned(), IdempotencyKey::parse(key).expect("key")).await.expect("status")
}

async fn settle_of(keys: &SqliteKeys, key: &str) -> KeyStatus {
    keys.settle("tests".to_owned(), IdempotencyKey::parse(key).expect("key")).await.expect("settle")
}

async fn sleep_until(start: Instant, ms: u64) {
    tokio::time::sleep_until((start + Duration::from_millis(ms)).into()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_whose_client_hung_up_is_in_flight_until_its_work_commits() {
    let app = app().await;
    let key = "hangup-key-000000001";
    let ran = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let caller = tokio::spawn(slow_note(&app.keys, key, 1500, &ran));
    sleep_until(start, 300).await;
    // The client hangs up: the server drops the handler's future.
    caller.abort();
    assert!(caller.await.expect_err("aborted").is_cancelled());
    sleep_until(start, 500).await;
    assert_eq!(status_of(&app.keys, key).await, KeyStatus::InFlight, "at +0.5 s");
    assert!(start.elapsed() < Duration::from_millis(900), "the status did not wait for the work");
    sleep_until(start, 1000).await;
    assert_eq!(status_of(&app.keys, key).await, KeyStatus::InFlight, "at +1.0 s");
    let over_http = reqwest::get(format!("{}/keys/{key}", app.base)).await.expect("get");
    assert_eq!(over_http.headers()["retry-after"], "1");
    assert_eq!(over_http.json::<serde_json::Value>().await.expect("json")["status"], "in_flight");
    // A retry meanwhile is 409 at once, not queued behind the work.
    let retry = slow_note(&app.keys, key, 0, &ran).await;
    assert!(matches!(retry, Ok(Outcome::InFlight)), "{retry:?}");
    sleep_until(start, 2000).await;
    assert!(matches!(status_of(&app.keys, key).await, KeyStatus::Done { .. }), "the work completed");
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(count(&app.keys, "SELECT COUNT(*) FROM notes").await, 1);
    let replay = slow_note(&app.keys, key, 0, &ran).await;
    assert!(matches!(replay, Ok(Outcome::Replay(_))), "the retry replays: {replay:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_settled_key_is_fenced_and_a_late_request_with_it_does_nothing() {
    let app = app().await;
    let key = "fence-key-0000000001";
    assert_eq!(settle_of(&app.keys, key).await, KeyStatus::Fenced);
    assert_eq!(settle_of(&app.keys, key).await, KeyStatus::Fenced, "settling again");
    assert_eq!(status_of(&app.keys, key).await, KeyStatus::Fenced);
    let ran = Arc::new(AtomicUsize::new(0));
    let late = slow_note(&app.keys, key, 0, &ran).await;
    assert!(matches!(late, Ok(Outcome::Fenced)), "{late:?}");
    assert_eq!(ran.load(Ordering::SeqCst), 0, "the work never ran");

    // Over HTTP, as a client meets it: POST settles, a late POST of the request is 410 and writes nothing.
    let other = "fence-key-0000000002";
    let settled = reqwest::Client::new().post(format!("{}/keys/{other}", app.base)).send().await.expect("post");
    assert_eq!(settled.status(), 200);
    assert_eq!(settled.headers()["cache-control"], "no-store");
    assert_eq!(settled.json::<serde_json::Value>().await.expect("json"), serde_json::json!({"status": "fenced"}));
    let fenced = post_note(&app.base, other, "late").await;
    assert_eq!(fenced.status(), 410);
    assert!(fenced.headers().get("idempotent-replayed").is_none());
    assert_eq!(fenced.json::<serde_json::Value>().await.expect("problem")["code"], "key-fenced");
    let malformed = reqwest::Client::new().post(format!("{}/keys/%20", app.base)).send().await.expect("post");
    assert_eq!(malformed.status(), 400);
    assert_eq!(count(&app.keys, "SELECT COUNT(*) FROM notes").await, 0);

    // Fences expire with the retention: the sweep deletes them, and an expired one is replaced.
    app.keys
        .with_conn(|c| Ok(c.execute("UPDATE idempotency_records SET created_at = created_at - 7200", [])?))
        .await
        .expect("age");
    assert_eq!(status_of(&app.keys, key).await, KeyStatus::Unknown, "expired");
    assert_eq!(settle_of(&app.keys, key).await, KeyStatus::Fenced, "an expired fence is replaced");
    assert_eq!(app.keys.sweep().await.expect("sweep"), 1, "the other, expired fence");
    assert_eq!(count(&app.keys, "SELECT COUNT(*) FROM idempotency_records").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn settling_a_key_in_its_work_is_in_flight_at_once_then_done_with_its_answer() {
    let app = app().await;
    let key = "settle-busy-00000001";
    let ran = Arc::new(AtomicUsize::new(0));
    let work = tokio::spawn(slow_note(&app.keys, key, 1000, &ran));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let asked = Instant::now();
    assert_eq!(settle_of(&app.keys, key).await, KeyStatus::InFlight);
    assert!(asked.elapsed() < Duration::from_millis(300), "without waiting for the work: {:?}", asked.elapsed());
    let Ok(Outcome::Fresh(answer)) = work.await.expect("task") else { panic!("the work was done") };
    assert_eq!(settle_of(&app.keys, key).await, KeyStatus::done(answer.clone()));
    assert_eq!(status_of(&app.keys, key).await, KeyStatus::done(answer));
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

#[test]
fn settle_in_fences_only_an_unseen_key() {
    let mut conn = memory();
    let done = request("key-0000000000000005", "{}");
    let work = |tx: &rusqlite::Transaction<'_>| {
        tx.execute("INSERT INTO notes (text) VALUES ('n')", []).map_err(|e| e.to_string())?;
        Ok::<_, String>(StoredResponse::json(StatusCode::CREATED, &"n"))
    };
    let Ok(Outcome::Fresh(answer)) = run_in(&mut conn, &done, HOUR, work) else { panic!("fresh") };
    let settle = |conn: &mut Connection, key: &IdempotencyKey| {
        idempotent_endpoint::sqlite::settle_in(conn, "tests", key, HOUR).expect("settle")
    };
    assert_eq!(settle(&mut conn, &done.key), KeyStatus::done(answer));
    let unseen = request("key-0000000000000006", "{}");
    assert_eq!(settle(&mut conn, &unseen.key), KeyStatus::Fenced);
    assert!(matches!(run_in(&mut conn, &unseen, HOUR, work), Ok(Outcome::Fenced)));
    assert_eq!(
        idempotent_endpoint::sqlite::status_in(&conn, "tests", &unseen.key, HOUR).expect("status"),
        KeyStatus::Fenced
    );
    assert_eq!(notes(&conn), 1);
}

#[tokio::test]
async fn open_with_applies_the_synchronous_setting() {
    use idempotent_endpoint::sqlite::Synchronous;
    let dir = tempfile::tempdir().expect("dir");
    // `PRAGMA synchronous` reads 2 for FULL and 1 for NORMAL.
    for (setting, expected) in [(Synchronous::Full, 2), (Synchronous::Normal, 1), (Synchronous::default(), 2)] {
        let keys =
            SqliteKeys::open_with(dir.path().join("sync.sqlite"), Duration::from_secs(60), setting).expect("open");
        let value: i64 =
            keys.with_conn(|conn| Ok(conn.query_row("PRAGMA synchronous", [], |row| row.get(0))?)).await.expect("read");
        assert_eq!(value, expected, "{setting:?}");
    }
}

/// Another connection holding the database's write lock past the busy timeout (here shortened to 300 ms on
/// the shared connection) makes a request and a phase give up with the typed `KeyBusy`, answered over HTTP
/// as the 409 of a key in flight with `Retry-After`; nothing was written, and once the lock is free the
/// same request does the work.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_held_by_another_connection_makes_the_key_busy() {
    use idempotent_endpoint::StoreError;

    let app = app().await;
    let busy_for = Duration::from_millis(300);
    app.keys.with_conn(move |c| Ok(c.busy_timeout(busy_for)?)).await.expect("busy timeout");
    let path = app._dir.path().join("app.sqlite");
    let other = Connection::open(&path).expect("open a second connection");
    other.execute_batch("BEGIN IMMEDIATE").expect("take the write lock");

    let key = "5d2c9a1e-0b7f-4c3d-8e6a-1f2b3c4d5e6f";
    let start = Instant::now();
    let answer = post_note(&app.base, key, "busy").await;
    assert!(start.elapsed() >= busy_for, "answered after {:?}", start.elapsed());
    assert_eq!(answer.status(), StatusCode::CONFLICT);
    assert!(answer.headers().contains_key("retry-after"), "{:?}", answer.headers());
    let begun = app.keys.begin(request("sqlite-busy-0000000001", "{}"), Duration::from_secs(60)).await;
    assert!(matches!(begun, Err(StoreError::KeyBusy)), "{begun:?}");

    other.execute_batch("ROLLBACK").expect("release the write lock");
    assert_eq!(count(&app.keys, "SELECT COUNT(*) FROM idempotency_records").await, 0, "nothing was written");
    assert_eq!(post_note(&app.base, key, "busy").await.status(), StatusCode::CREATED);
    assert_eq!(count(&app.keys, "SELECT COUNT(*) FROM notes").await, 1);
}
