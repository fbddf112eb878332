//! Each message re-sent 3 times through `kill -9`s of the receiver: every message is applied exactly once,
//! and every delivery that got an answer got the same one.
//!
//! The test is the at-least-once sender: it re-sends each delivery until it gets a 2xx answer (a kill
//! loses the answer, or the connection, and the delivery is sent again), and sends every message 3 times,
//! shuffled, from several tasks at once. Meanwhile it kills the `inbox-consumer` process with SIGKILL at
//! random moments and restarts it on the same SQLite file and port. The receiver spends a while inside each
//! transaction (`--work-delay-ms`), so kills land between the work and the commit.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const MESSAGES: usize = 150;
const SENDS_PER_MESSAGE: usize = 3;
const SENDERS: usize = 6;

/// Starts the receiver on `port` with the database `db`, once it listens.
async fn start(db: &str, port: u16) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_inbox-consumer"))
        .args(["--addr", &format!("127.0.0.1:{port}"), "--db", db, "--work-delay-ms", "15"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start inbox-consumer");
    let stdout = child.stdout.take().expect("stdout");
    let line = tokio::time::timeout(Duration::from_secs(20), BufReader::new(stdout).lines().next_line())
        .await
        .expect("inbox-consumer listens within 20 s")
        .expect("read stdout")
        .expect("a line");
    assert!(line.starts_with("listening on "), "{line}");
    child
}

/// A free port on 127.0.0.1 (the receiver binds it again after every restart).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// The answer a delivery got: status, whether it was a replay, and the body.
type Answer = (u16, bool, Value);

/// Sends one delivery until the receiver answers 2xx.
async fn deliver(http: &reqwest::Client, url: &str, id: &str) -> Answer {
    let mail = serde_json::json!({ "id": id, "to": format!("{id}@example.test"), "subject": "Invitation", "text": id });
    loop {
        if let Ok(answer) = http.post(url).json(&mail).send().await {
            let status = answer.status();
            let replayed = answer.headers().get("idempotent-replayed").is_some_and(|v| v == "true");
            if let (true, Ok(body)) = (status.is_success(), answer.json::<Value>().await) {
                return (status.as_u16(), replayed, body);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_message_sent_three_times_through_kills_is_applied_exactly_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("consumer.sqlite").to_string_lossy().into_owned();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/messages");
    let receiver = Arc::new(tokio::sync::Mutex::new(start(&db, port).await));

    let ids: Vec<String> = (0..MESSAGES).map(|i| format!("message-{i:04}")).collect();
    let mut deliveries: Vec<String> =
        ids.iter().flat_map(|id| std::iter::repeat_n(id.clone(), SENDS_PER_MESSAGE)).collect();
    fastrand::shuffle(&mut deliveries);
    let deliveries = Arc::new(Mutex::new(deliveries));
    let answers = Arc::new(Mutex::new(BTreeMap::<String, Vec<Answer>>::new()));
    let http = reqwest::Client::builder().timeout(Duration::from_secs(3)).build().expect("client");

    let mut senders = tokio::task::JoinSet::new();
    for _ in 0..SENDERS {
        let (deliveries, answers, http, url) = (deliveries.clone(), answers.clone(), http.clone(), url.clone());
        senders.spawn(async move {
            loop {
                let Some(id) = deliveries.lock().expect("deliveries").pop() else { return };
                let answer = deliver(&http, &url, &id).await;
                answers.lock().expect("answers").entry(id).or_default().push(answer);
            }
        });
    }
    let sending = Arc::new(AtomicBool::new(true));
    let killer = {
        let (receiver, sending, db) = (receiver.clone(), sending.clone(), db.clone());
        tokio::spawn(async move {
            let mut kills = 0;
            while sending.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(fastrand::u64(80..300))).await;
                let mut child = receiver.lock().await;
                child.kill().await.expect("kill -9");
                kills += 1;
                *child = start(&db, port).await;
            }
            kills
        })
    };
    senders.join_all().await;
    sending.store(false, Ordering::SeqCst);
    let kills = killer.await.expect("killer");
    assert!(kills >= 5, "only {kills} kills: the stream was too short to be killed mid-way");

    let listed: Value = http.get(&url).send().await.expect("list").json().await.expect("json");
    let mut applied = BTreeMap::<String, Vec<i64>>::new();
    for email in listed["emails"].as_array().expect("emails") {
        let id = email["id"].as_str().expect("id").to_owned();
        applied.entry(id).or_default().push(email["email"].as_i64().expect("email"));
    }
    let twice: Vec<_> = applied.iter().filter(|(_, emails)| emails.len() > 1).collect();
    assert!(twice.is_empty(), "applied more than once after {kills} kills: {twice:?}");
    let missing: Vec<_> = ids.iter().filter(|id| !applied.contains_key(*id)).collect();
    assert!(missing.is_empty(), "never applied: {missing:?}");

    let answers = answers.lock().expect("answers");
    for id in &ids {
        let got = &answers[id];
        assert_eq!(got.len(), SENDS_PER_MESSAGE, "{id}");
        let expected = serde_json::json!({ "id": id, "email": applied[id][0] });
        assert!(got.iter().all(|(status, _, body)| *status == 201 && *body == expected), "{id}: {got:?}");
        assert!(got.iter().filter(|(_, replayed, _)| !replayed).count() <= 1, "{id}: {got:?}");
    }
    eprintln!("{MESSAGES} messages × {SENDS_PER_MESSAGE} through {kills} kills: each applied once");
}
