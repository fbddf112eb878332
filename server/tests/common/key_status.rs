//! The key-status contract (`GET /api/idempotency-keys/{key}`, server/README.md "Key status"), checked
//! once against running servers: one SQLite server, or several instances on one PostgreSQL database.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use reqwest::Client;
use serde_json::Value;

use super::{assert_problem, bearer, header, post_to, spawn_post, Answer, MUGS};

/// One key-status answer: the HTTP status, `Retry-After`, `Cache-Control` and the JSON body.
pub struct Status {
    pub http: u16,
    pub retry_after: Option<String>,
    pub cache_control: Option<String>,
    pub body: Value,
}

/// `GET /api/idempotency-keys/{key}` (the key percent-encoded) as `account`.
pub async fn key_status(client: &Client, base: &str, account: &str, key: &str) -> Status {
    let encoded: String = key
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let response = client
        .get(format!("{base}/api/idempotency-keys/{encoded}"))
        .header("authorization", bearer(account))
        .send()
        .await
        .expect("key status answered");
    let http = response.status().as_u16();
    let retry_after = header(&response, "retry-after").map(str::to_owned);
    let cache_control = header(&response, "cache-control").map(str::to_owned);
    let body = response.json().await.expect("key status is JSON");
    Status { http, retry_after, cache_control, body }
}

/// Asserts `status` is `done` with exactly the replay `answer` (a replay of the key, read in full).
fn assert_done_as(status: &Status, answer: &Answer, location: Option<&str>, content_type: &str) {
    assert_eq!(status.http, 200);
    assert_eq!(status.body["status"], "done", "{}", status.body);
    let response = &status.body["response"];
    assert_eq!(response["status"], answer.status);
    assert_eq!(response["body"].as_str().map(str::as_bytes), Some(&answer.body[..]), "byte for byte");
    assert_eq!(response["headers"]["idempotent-replayed"], "true");
    assert_eq!(response["headers"]["content-type"], content_type);
    assert_eq!(response["headers"]["location"].as_str(), location);
}

async fn post(client: &Client, base: &str, account: &str, key: &str, body: &str, fault: Option<&str>) -> Answer {
    let auth = bearer(account);
    let mut headers = vec![("authorization", auth.as_str())];
    if let Some(fault) = fault {
        headers.push(("x-fault", fault));
    }
    Answer::read(post_to(client, base, Some(key), body, &headers).await.expect("answer")).await.expect("body")
}

/// The whole contract. `bases` are the instances (the first takes the writes, the last answers most
/// questions); accounts are `{prefix}-…`, so a database can be shared with other tests; `sweep(at)` runs the
/// retention sweep at unix time `at` and returns how many key rows it deleted.
pub async fn check_key_status<F, Fut>(client: &Client, bases: &[String], prefix: &str, sweep: F)
where
    F: Fn(i64) -> Fut,
    Fut: Future<Output = u64>,
{
    let (first, last) = (&bases[0], &bases[bases.len() - 1]);
    let (account, other) = (format!("{prefix}-a"), format!("{prefix}-b"));

    // Unknown: a key never sent, on every instance; never cached.
    for base in bases {
        let status = key_status(client, base, &account, "never-sent").await;
        assert_eq!((status.http, &status.body), (200, &serde_json::json!({"status": "unknown"})));
        assert_eq!(status.cache_control.as_deref(), Some("no-store"));
    }

    // Done, from the key row: exactly what a replay sends (status, content type, location, body).
    let created = post(client, first, &account, "ks-order", MUGS, None).await;
    assert_eq!(created.status, 201);
    let replay = post(client, last, &account, "ks-order", MUGS, None).await;
    assert!(replay.replayed);
    let location = serde_json::from_slice::<Value>(&created.body).expect("order")["id"]
        .as_str()
        .map(|id| format!("/api/orders/{id}"))
        .expect("order id");
    for base in bases {
        let status = key_status(client, base, &account, "ks-order").await;
        assert_done_as(&status, &replay, Some(&location), "application/json");
        assert_eq!(status.body["response"]["body"].as_str().map(str::as_bytes), Some(&created.body[..]));
    }

    // A stored refusal is done too: the 400 is the key's answer.
    let refused = post(client, first, &account, "ks-refused", r#"{"items":[]}"#, None).await;
    assert_eq!(refused.status, 400);
    let status = key_status(client, last, &account, "ks-refused").await;
    assert_done_as(&status, &refused, None, "application/problem+json");

    // Another account's key is unknown in this account, never its answer.
    let status = key_status(client, last, &other, "ks-order").await;
    assert_eq!(status.body, serde_json::json!({"status": "unknown"}));

    // In flight: a request holding the key on the first instance, asked about on the last.
    let auth = bearer(&account);
    let slow =
        spawn_post(client, first, "ks-slow", MUGS, &[("authorization", auth.as_str()), ("x-fault", "latency=1500")]);
    let mut seen = None;
    while seen.is_none() && !slow.is_finished() {
        let status = key_status(client, last, &account, "ks-slow").await;
        if status.body["status"] == "in_flight" {
            seen = Some(status);
        } else {
            assert_eq!(status.body["status"], "unknown", "before the request arrives: {}", status.body);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let in_flight = seen.expect("the key was seen in flight while its request ran");
    assert_eq!((in_flight.http, &in_flight.body), (200, &serde_json::json!({"status": "in_flight"})));
    assert_eq!(in_flight.retry_after.as_deref(), Some("1"));
    let slow = Answer::read(slow.await.expect("task").expect("answer")).await.expect("body");
    assert_eq!(slow.status, 201);
    assert_eq!(key_status(client, last, &account, "ks-slow").await.body["status"], "done");

    // A key with characters a path must escape.
    let odd = "ks/odd?key#1%";
    assert_eq!(post(client, first, &account, odd, MUGS, None).await.status, 201);
    assert_eq!(key_status(client, last, &account, odd).await.body["status"], "done");

    // Bad questions: a malformed key is 400, no session is 401.
    let malformed = client
        .get(format!("{last}/api/idempotency-keys/has%20space"))
        .header("authorization", bearer(&account))
        .send()
        .await
        .expect("answer");
    assert_problem(malformed, 400, "malformed-idempotency-key").await;
    let anonymous = client.get(format!("{last}/api/idempotency-keys/ks-order")).send().await.expect("answer");
    assert_problem(anonymous, 401, "unauthenticated").await;

    // After the retention window the key rows are gone: the order still answers, byte for byte as its first
    // 201; the refusal left no record, so it is unknown.
    let later = idempotent_fetch_server::unix_now() + 2 * 86_400;
    assert!(sweep(later).await >= 4, "the key rows were swept");
    for base in bases {
        let status = key_status(client, base, &account, "ks-order").await;
        assert_done_as(&status, &replay, Some(&location), "application/json");
        assert_eq!(status.body["response"]["body"].as_str().map(str::as_bytes), Some(&created.body[..]));
        assert_eq!(key_status(client, base, &account, "ks-refused").await.body["status"], "unknown");
        assert_eq!(key_status(client, base, &account, odd).await.body["status"], "done");
        assert_eq!(key_status(client, base, &other, "ks-order").await.body["status"], "unknown");
    }
}
