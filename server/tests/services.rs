//! The payment provider and the mail receiver, as the separate processes the order flow talks to: a charge
//! is made once per key and replayed after, even when its first answer was dropped; a message is stored
//! once per id and a duplicate is refused and counted, also when copies arrive together.

mod common;

use common::processes::Process;
use reqwest::Client;
use serde_json::{json, Value};

async fn charge(client: &Client, url: &str, key: &str, body: &Value) -> reqwest::Result<reqwest::Response> {
    client.post(format!("{url}/charges")).header("idempotency-key", key).json(body).send().await
}

async fn get(client: &Client, url: &str) -> Value {
    client.get(url).send().await.expect("get").json().await.expect("json")
}

#[tokio::test]
async fn a_charge_is_made_once_per_key_and_replayed_after_a_dropped_answer() {
    let dir = tempfile::tempdir().expect("dir");
    let provider = Process::provider(&dir.path().join("provider.sqlite"));
    let client = Client::new();
    let body = json!({ "amountCents": 2400, "currency": "EUR", "reference": "ord_1" });

    let first = charge(&client, &provider.url, "k1", &body).await.expect("charge");
    assert_eq!(first.status(), 201);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first: Value = first.json().await.expect("json");
    let again = charge(&client, &provider.url, "k1", &body).await.expect("charge");
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers().get("idempotent-replayed").and_then(|v| v.to_str().ok()), Some("true"));
    assert_eq!(again.json::<Value>().await.expect("json"), first);
    // The same key with another body is a caller bug.
    let other = json!({ "amountCents": 1, "currency": "EUR", "reference": "ord_1" });
    assert_eq!(charge(&client, &provider.url, "k1", &other).await.expect("charge").status(), 422);

    // The answer dropped after the charge committed: the caller sees a network error, and its retry with
    // the same key gets the same charge, not a second one.
    let put = client.put(format!("{}/faults", provider.url)).body(r#"{"dropAfterCharge":1}"#).send().await;
    assert_eq!(put.expect("put").status(), 200);
    assert!(charge(&client, &provider.url, "k2", &body).await.is_err(), "the answer is dropped");
    client.put(format!("{}/faults", provider.url)).body("{}").send().await.expect("put");
    let retried = charge(&client, &provider.url, "k2", &body).await.expect("charge");
    assert_eq!(retried.headers().get("idempotent-replayed").and_then(|v| v.to_str().ok()), Some("true"));

    // 503 before charging: nothing was charged.
    client.put(format!("{}/faults", provider.url)).body(r#"{"failBeforeCharge":1}"#).send().await.expect("put");
    assert_eq!(charge(&client, &provider.url, "k3", &body).await.expect("charge").status(), 503);
    client.put(format!("{}/faults", provider.url)).body("{}").send().await.expect("put");

    let charges = get(&client, &format!("{}/charges", provider.url)).await;
    assert_eq!(charges["count"], 2, "{charges}");
    let keys: Vec<&str> =
        charges["charges"].as_array().expect("list").iter().filter_map(|c| c["idempotencyKey"].as_str()).collect();
    assert_eq!(keys, ["k1", "k2"]);
}

#[tokio::test]
async fn a_concurrent_charge_with_the_same_key_is_409_and_a_bad_charge_400() {
    let dir = tempfile::tempdir().expect("dir");
    let provider = Process::provider(&dir.path().join("provider.sqlite"));
    let client = Client::new();
    let body = json!({ "amountCents": 2400, "currency": "EUR", "reference": "ord_1" });
    client
        .put(format!("{}/faults", provider.url))
        .body(r#"{"latencyMs":1500,"latencyProbability":1}"#)
        .send()
        .await
        .expect("put");
    let slow = tokio::spawn({
        let (client, url, body) = (client.clone(), provider.url.clone(), body.clone());
        async move { charge(&client, &url, "k", &body).await.map(|r| r.status().as_u16()) }
    });
    // The first charge holds its key for 1.5 s; a second one well inside that window meets it.
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(charge(&client, &provider.url, "k", &body).await.expect("charge").status(), 409);
    assert_eq!(slow.await.expect("task").expect("charge"), 201);
    let bad = json!({ "amountCents": -5, "currency": "EUR", "reference": "x" });
    assert_eq!(charge(&client, &provider.url, "k-bad", &bad).await.expect("charge").status(), 400);
    assert_eq!(get(&client, &format!("{}/charges", provider.url)).await["count"], 1);
}

#[tokio::test]
async fn the_mail_receiver_stores_a_message_once_and_counts_refused_duplicates() {
    let dir = tempfile::tempdir().expect("dir");
    let mailbox = Process::mailbox(&dir.path().join("mail.sqlite"));
    let client = Client::new();
    let message = json!({ "id": "msg_1", "to": "demo", "subject": "Order ord_1", "text": "Thanks" });
    let post = |m: &Value| client.post(format!("{}/messages", mailbox.url)).json(m).send();
    assert_eq!(post(&message).await.expect("post").status(), 201);
    for _ in 0..2 {
        let again = post(&message).await.expect("post");
        assert_eq!(again.status(), 200);
        assert_eq!(again.json::<Value>().await.expect("json")["duplicate"], true);
    }
    assert_eq!(
        post(&json!({ "id": "bad id", "to": "", "subject": "", "text": "" })).await.expect("post").status(),
        400
    );
    client.put(format!("{}/faults", mailbox.url)).body(r#"{"fail":1}"#).send().await.expect("put");
    assert_eq!(post(&json!({ "id": "msg_2", "to": "", "subject": "", "text": "" })).await.expect("post").status(), 503);
    let list = get(&client, &format!("{}/messages", mailbox.url)).await;
    assert_eq!(list["count"], 1, "{list}");
    assert_eq!(list["duplicatesRefused"], 2);
    assert_eq!(list["messages"][0]["duplicatesRefused"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_deliveries_committed_together_store_each_message_once() {
    let dir = tempfile::tempdir().expect("dir");
    let mailbox = Process::mailbox(&dir.path().join("mail.sqlite"));
    let client = Client::new();
    // Three copies of each of 40 ids at once: the receiver commits them in groups, copies side by side.
    let posts = (0..120).map(|n| {
        let (client, url) = (client.clone(), format!("{}/messages", mailbox.url));
        let message = json!({ "id": format!("msg_{}", n % 40), "to": "demo", "subject": "s", "text": "t" });
        tokio::spawn(async move { client.post(url).json(&message).send().await.expect("post").status().as_u16() })
    });
    let mut statuses = Vec::new();
    for post in posts.collect::<Vec<_>>() {
        statuses.push(post.await.expect("task"));
    }
    assert_eq!(statuses.iter().filter(|&&s| s == 201).count(), 40, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|&&s| s == 200).count(), 80, "{statuses:?}");
    let list = get(&client, &format!("{}/messages", mailbox.url)).await;
    assert_eq!(list["count"], 40, "{list}");
    assert_eq!(list["duplicatesRefused"], 80);
}

#[tokio::test]
async fn without_enable_faults_the_services_have_no_fault_switches() {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("p.sqlite");
    let provider = Process::start(env!("CARGO_BIN_EXE_payment-provider"), &["--db", &db.to_string_lossy()]);
    let db = dir.path().join("m.sqlite");
    let mailbox = Process::start(env!("CARGO_BIN_EXE_mail-receiver"), &["--db", &db.to_string_lossy()]);
    let client = Client::new();
    for url in [&provider.url, &mailbox.url] {
        let put = client.put(format!("{url}/faults")).body(r#"{}"#).send().await.expect("put");
        assert_eq!(put.status(), 404);
    }
}
