//! The key-status contract (`GET /api/idempotency-keys/{key}` and settling with `POST` on it, server/README.md
//! "Key status"), checked once against running servers: one SQLite server, or several instances on one
//! PostgreSQL database.
#![allow(dead_code)]

use std::future::Future;
use std::time::{Duration, Instant};

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
    ask(client.get(status_url(base, key)), account).await
}

/// `POST /api/idempotency-keys/{key}` (settle the key) as `account`.
pub async fn settle(client: &Client, base: &str, account: &str, key: &str) -> Status {
    ask(client.post(status_url(base, key)), account).await
}

fn status_url(base: &str, key: &str) -> String {
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
    format!("{base}/api/idempotency-keys/{encoded}")
}

async fn ask(request: reqwest::RequestBuilder, account: &str) -> Status {
    let response = request.header("authorization", bearer(account)).send().await.expect("key status answered");
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

/// How long after the start of a hung-up request its key is asked about, while its work (3 s) goes on.
pub const ASKED_AT: [Duration; 2] = [Duration::from_millis(1200), Duration::from_millis(2000)];
/// When the client of a hung-up request gives up on it.
pub const HUNG_UP_AT: Duration = Duration::from_millis(800);
/// The latency fault that keeps such a request's work going past the questions.
pub const SLOW_WORK: &str = "latency=3000";

/// `POST /api/orders` with `key` and [`SLOW_WORK`] to `base` as `account`, from a client that hangs up at
/// [`HUNG_UP_AT`] (as a page reload does); when it was sent.
pub async fn post_and_hang_up(base: &str, account: &str, key: &str) -> Instant {
    let impatient = Client::builder().timeout(HUNG_UP_AT).build().expect("client");
    let auth = bearer(account);
    let started = Instant::now();
    let answer =
        post_to(&impatient, base, Some(key), MUGS, &[("authorization", auth.as_str()), ("x-fault", SLOW_WORK)]).await;
    assert!(answer.is_err(), "the client hung up before the answer: {answer:?}");
    started
}

/// The account's orders made with `key`, as `GET /api/orders` lists them.
pub async fn orders_with_key(client: &Client, base: &str, account: &str, key: &str) -> usize {
    let list: Value = client
        .get(format!("{base}/api/orders"))
        .header("authorization", bearer(account))
        .send()
        .await
        .expect("orders")
        .json()
        .await
        .expect("orders json");
    list["orders"].as_array().expect("a list").iter().filter(|o| o["idempotencyKey"] == key).count()
}

/// Asks `ask` again (every 100 ms, at most 15 s) while it answers in flight; the first other answer.
pub async fn until_settled<F, Fut>(what: &str, mut ask: F) -> Status
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Status>,
{
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let status = ask().await;
        if status.body["status"] != "in_flight" {
            return status;
        }
        assert!(Instant::now() < deadline, "{what} stayed in flight");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Asserts an `in_flight` answer: 200, `Retry-After: 1`, not cached.
pub fn assert_in_flight(status: &Status, what: &str) {
    assert_eq!((status.http, &status.body), (200, &serde_json::json!({"status": "in_flight"})), "{what}");
    assert_eq!(status.retry_after.as_deref(), Some("1"), "{what}");
    assert_eq!(status.cache_control.as_deref(), Some("no-store"), "{what}");
}

/// A request whose client hung up reads in flight (asked on `status_base`) until its work is done, then
/// done with its 201; one order. The request goes to `post_base`.
pub async fn check_hung_up_request_stays_in_flight(client: &Client, post_base: &str, status_base: &str, account: &str) {
    let key = "hung-up";
    let started = post_and_hang_up(post_base, account, key).await;
    for at in ASKED_AT {
        tokio::time::sleep((started + at).saturating_duration_since(Instant::now())).await;
        let status = key_status(client, status_base, account, key).await;
        assert_in_flight(&status, &format!("GET at +{at:?}, the work still going on"));
    }
    let done = until_settled("the hung-up request's key", || key_status(client, status_base, account, key)).await;
    assert_eq!(done.body["status"], "done", "{}", done.body);
    assert_eq!(done.body["response"]["status"], 201);
    assert!(started.elapsed() >= Duration::from_millis(2900), "done only once the work finished");
    assert_eq!(orders_with_key(client, post_base, account, key).await, 1);
}

/// Settling (the fence), against `bases` (the first takes the writes, the last is asked): a slow request
/// whose client hung up is in flight while it runs, never fenced, then done with its answer; an unseen key
/// is fenced, a request with it is 410 `key-fenced` and does nothing, and it stays fenced; a done key, a
/// stored refusal, and an order whose key row was swept are done; another account's fence is its own; the
/// fence is swept with the retention. `sweep(at)` as for [`check_key_status`].
pub async fn check_settle<F, Fut>(client: &Client, bases: &[String], prefix: &str, sweep: F)
where
    F: Fn(i64) -> Fut,
    Fut: Future<Output = u64>,
{
    let (first, last) = (&bases[0], &bases[bases.len() - 1]);
    let (account, other) = (format!("{prefix}-settle-a"), format!("{prefix}-settle-b"));

    // The slow cart: order A with K1 takes 3 s; the page reloads at 800 ms and settles K1 before it dares
    // give the intent a new key. The work is still going on: in flight, on every instance, never fenced.
    let started = post_and_hang_up(first, &account, "k1").await;
    for base in bases {
        assert_in_flight(&settle(client, base, &account, "k1").await, "settling K1 while its work goes on");
        assert_in_flight(&key_status(client, base, &account, "k1").await, "K1 read while its work goes on");
    }
    assert!(started.elapsed() < Duration::from_millis(2900), "asked while the work was going on");
    let done = until_settled("K1", || settle(client, last, &account, "k1")).await;
    assert_eq!(done.body["status"], "done", "{}", done.body);
    let replay = post(client, first, &account, "k1", MUGS, None).await;
    assert!(replay.replayed, "K1 was done once, by its first request");
    assert_done_as(&done, &replay, done.body["response"]["headers"]["location"].as_str(), "application/json");
    assert_eq!(orders_with_key(client, first, &account, "k1").await, 1);
    let again = settle(client, first, &account, "k1").await;
    assert_eq!(again.body, done.body, "settling a done key again answers the same");

    // An unseen key K2 is fenced; a request with it that arrives later is refused and does nothing.
    let before = orders_with_key(client, first, &account, "k2").await;
    let fenced = settle(client, last, &account, "k2").await;
    assert_eq!((fenced.http, &fenced.body), (200, &serde_json::json!({"status": "fenced"})));
    assert_eq!(fenced.cache_control.as_deref(), Some("no-store"));
    assert_eq!(fenced.retry_after, None);
    for base in bases {
        assert_eq!(key_status(client, base, &account, "k2").await.body, serde_json::json!({"status": "fenced"}));
        let late = post(client, base, &account, "k2", MUGS, None).await;
        assert_eq!(late.status, 410, "{:?}", late.body);
        assert!(!late.replayed, "a fence is not a stored answer");
        let problem: Value = serde_json::from_slice(&late.body).expect("problem");
        assert_eq!(problem["code"], "key-fenced");
        let other_body = post(client, base, &account, "k2", r#"{"items":[{"sku":"grinder","qty":1}]}"#, None).await;
        assert_eq!(other_body.status, 410, "fenced for any request, not only the first one's");
        assert_eq!(settle(client, base, &account, "k2").await.body, serde_json::json!({"status": "fenced"}));
    }
    assert_eq!(orders_with_key(client, first, &account, "k2").await, before, "no order with a fenced key");
    assert_eq!(before, 0);

    // A fence is the account's own: the other account's K2 is unseen there, and works.
    assert_eq!(key_status(client, last, &other, "k2").await.body["status"], "unknown");
    assert_eq!(post(client, first, &other, "k2", MUGS, None).await.status, 201);
    assert_eq!(settle(client, last, &other, "k2").await.body["status"], "done");

    // A stored refusal is done, not fenced.
    let refused = post(client, first, &account, "k-refused", r#"{"items":[]}"#, None).await;
    assert_eq!(refused.status, 400);
    assert_done_as(&settle(client, last, &account, "k-refused").await, &refused, None, "application/problem+json");

    // Bad questions: a malformed key is 400, no session is 401.
    let malformed = client
        .post(format!("{last}/api/idempotency-keys/has%20space"))
        .header("authorization", bearer(&account))
        .send()
        .await
        .expect("answer");
    assert_problem(malformed, 400, "malformed-idempotency-key").await;
    let anonymous = client.post(format!("{last}/api/idempotency-keys/k2")).send().await.expect("answer");
    assert_problem(anonymous, 401, "unauthenticated").await;

    // After the retention: K1's key row is gone but its order answers, so settling it is done, never a
    // fence over a key that did its work; K2's fence is swept like any key row.
    let later = idempotent_fetch_server::unix_now() + 2 * 86_400;
    assert!(sweep(later).await >= 3, "the key rows and the fence were swept");
    for base in bases {
        assert_eq!(key_status(client, base, &account, "k2").await.body["status"], "unknown", "the fence was swept");
        let k1 = settle(client, base, &account, "k1").await;
        assert_eq!(k1.body["status"], "done", "{}", k1.body);
        assert_eq!(k1.body["response"]["body"], done.body["response"]["body"]);
    }
    assert_eq!(orders_with_key(client, first, &account, "k1").await, 1);
}
