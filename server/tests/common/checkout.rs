//! The order flow's shared test parts: the provider and the receiver as processes, counting their effects,
//! the lease rules every backend must keep, and the server binary that crashes on a fault.
#![allow(dead_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use idempotent_fetch_server::checkout::provider_key;
use idempotent_fetch_server::config::CheckoutConfig;
use idempotent_fetch_server::store::phases::{BeginDecision, RecoveryPoint};
use idempotent_fetch_server::store::{Store, StoreError};
use idempotent_fetch_server::unix_now;
use reqwest::Client;
use serde_json::Value;

use super::key_status::{
    assert_in_flight, key_status, orders_with_key, post_and_hang_up, settle, until_settled, ASKED_AT,
};
use super::processes::Process;
use super::{keyed_request, post_to, Answer, MUGS, SECRET};

/// A short lease, so that a key left by a crash is taken over within a test.
pub const LEASE: Duration = Duration::from_millis(900);
/// A lease longer than the slow work of [`check_fence_in_phases`], so the completer leaves its key alone.
pub const LONG_LEASE: Duration = Duration::from_secs(10);

pub struct Downstream {
    pub provider: Process,
    pub mailbox: Process,
    _dir: tempfile::TempDir,
}

impl Downstream {
    pub fn start() -> Downstream {
        let dir = tempfile::tempdir().expect("dir");
        let provider = Process::provider(&dir.path().join("provider.sqlite"));
        let mailbox = Process::mailbox(&dir.path().join("mail.sqlite"));
        Downstream { provider, mailbox, _dir: dir }
    }

    /// [`Downstream::start`] with a mail receiver that exports its spans to `otlp_endpoint`.
    pub fn start_exporting(otlp_endpoint: &str) -> Downstream {
        let dir = tempfile::tempdir().expect("dir");
        let provider = Process::provider(&dir.path().join("provider.sqlite"));
        let mailbox = Process::mailbox_exporting(&dir.path().join("mail.sqlite"), otlp_endpoint);
        Downstream { provider, mailbox, _dir: dir }
    }

    pub fn config(&self) -> CheckoutConfig {
        CheckoutConfig {
            provider_url: self.provider.url.clone(),
            mail_url: Some(self.mailbox.url.clone()),
            key_lease: LEASE,
        }
    }

    pub async fn charges(&self) -> Vec<Value> {
        list(&format!("{}/charges", self.provider.url), "charges").await
    }

    pub async fn messages(&self) -> Vec<Value> {
        list(&format!("{}/messages", self.mailbox.url), "messages").await
    }

    pub async fn provider_faults(&self, body: &str) {
        put(&format!("{}/faults", self.provider.url), body).await;
    }

    pub async fn mailbox_faults(&self, body: &str) {
        put(&format!("{}/faults", self.mailbox.url), body).await;
    }
}

pub async fn list(url: &str, field: &str) -> Vec<Value> {
    let body: Value = Client::new().get(url).send().await.expect("get").json().await.expect("json");
    body[field].as_array().cloned().expect("a list")
}

pub async fn put(url: &str, body: &str) {
    let response = Client::new().put(url).body(body.to_owned()).send().await.expect("put");
    assert_eq!(response.status(), 200, "PUT {url} {body}");
}

/// Polls `check` until it holds (at most 20 s).
pub async fn eventually<F: std::future::Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The recovery point of the default account's key, read straight from the file.
pub fn point(db: &Path, key: &str) -> String {
    let conn = rusqlite::Connection::open(db).expect("open");
    conn.query_row("SELECT recovery_point FROM idempotency_records WHERE scope = 'demo' AND key = ?1", [key], |row| {
        row.get(0)
    })
    .expect("key row")
}

/// Retries `key` until it answers 201 (a 409 while the key is held, a 503 while the provider fails, and
/// connection errors while the server restarts are retried); the 201's body.
pub async fn post_until_created(base: &str, key: &str) -> Value {
    let client = Client::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(response) = post_to(&client, base, Some(key), MUGS, &[]).await {
            match response.status().as_u16() {
                201 => return response.json().await.expect("order"),
                409 | 503 => {}
                other => panic!("unexpected {other}: {:?}", response.text().await),
            }
        }
        assert!(Instant::now() < deadline, "no 201 for {key}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every order has exactly one charge (referencing it) and one stored confirmation (`confirm-<order>`).
pub async fn assert_one_charge_and_one_message_each(downstream: &Downstream, orders: &[String]) {
    let charges = downstream.charges().await;
    let messages = downstream.messages().await;
    for order in orders {
        let n = charges.iter().filter(|c| c["reference"] == order.as_str()).count();
        assert_eq!(n, 1, "charges of {order}: {charges:?}");
        let id = format!("confirm-{order}");
        let m = messages.iter().filter(|m| m["id"] == id.as_str()).count();
        assert_eq!(m, 1, "confirmations of {order}: {messages:?}");
    }
    assert_eq!(charges.len(), orders.len(), "no charge without an order: {charges:?}");
    assert_eq!(messages.len(), orders.len(), "no message without an order: {messages:?}");
}

/// The lease rules on the library's phases: a live lease answers 409, a run-out one is taken over at its
/// point with the same row (so the same provider key), the old holder writes nothing more, the completer
/// takes only keys whose lease ran out, and a taken-over key carries its order.
pub async fn lease_rules(store: &Store) {
    let request = keyed_request("acct", "k-lease", MUGS, unix_now());
    let lease = Duration::from_millis(300);
    let first = match store.begin(&request, lease).await.expect("begin") {
        BeginDecision::Held(held) => held,
        other => panic!("{other:?}"),
    };
    assert_eq!(first.point, RecoveryPoint::Started);
    match store.begin(&request, lease).await.expect("begin") {
        BeginDecision::Done(outcome) => assert_eq!(outcome, idempotent_fetch_server::protocol::Outcome::InFlight),
        other => panic!("a live lease must answer in flight: {other:?}"),
    }
    // After the lease: the second caller takes the key over at its point.
    tokio::time::sleep(lease + Duration::from_millis(50)).await;
    let second = match store.begin(&request, lease).await.expect("begin") {
        BeginDecision::Held(held) => held,
        other => panic!("{other:?}"),
    };
    assert_eq!(second.held.row_id, first.held.row_id, "the same row, so the same downstream keys");
    assert_eq!(provider_key(&second), provider_key(&first));
    let order = match idempotent_fetch_server::idempotency::place_order(&request).order {
        Some(order) => order,
        None => panic!("valid order"),
    };
    let stale = store.store_order(first, order.clone(), lease).await;
    assert!(matches!(stale, Err(StoreError::LeaseLost)), "{stale:?}");
    let held = store.store_order(second, order, lease).await.expect("store order");
    assert_eq!(held.point, RecoveryPoint::ChargeStarted);
    // The completer takes only keys whose lease ran out.
    let taken = store.unfinished(10, lease).await.expect("unfinished");
    assert!(taken.is_empty(), "{taken:?}");
    tokio::time::sleep(lease + Duration::from_millis(50)).await;
    let taken = store.unfinished(10, lease).await.expect("unfinished");
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].point, RecoveryPoint::ChargeStarted);
    assert_eq!(taken[0].order.as_ref().map(|o| o.total_cents), Some(2400));
    // The holder it was taken from cannot record a charge any more.
    let lost = store.record_charge(held, "ch_x".to_owned(), lease).await;
    assert!(matches!(lost, Err(StoreError::LeaseLost)), "{lost:?}");
}

/// The server binary with the order flow, faults enabled, on `database` (`--db FILE` or
/// `--database-url URL`).
pub fn server(database: &[&str], downstream: &Downstream) -> Process {
    let lease = LEASE.as_millis().to_string();
    let mut args = database.to_vec();
    args.extend([
        "--enable-faults",
        "--session-secret",
        SECRET,
        "--provider-url",
        &downstream.provider.url,
        "--mail-url",
        &downstream.mailbox.url,
        "--key-lease-ms",
        &lease,
    ]);
    Process::start(env!("CARGO_BIN_EXE_idempotent-fetch-server"), &args)
}

/// Sends `key` with `X-Fault: fault` to a server that must crash on it: no answer, and the process ends.
pub async fn post_and_crash(server: &mut Process, key: &str, fault: &str) {
    let answer = post_to(&Client::new(), &server.url, Some(key), MUGS, &[("x-fault", fault)]).await;
    assert!(answer.is_err(), "a crashed server answers nothing: {answer:?}");
    let status = server.wait_exit(Duration::from_secs(10)).expect("the process ended");
    assert!(!status.success(), "aborted, not a clean exit: {status}");
}

/// The fence in the order phases, on `bases` (the first takes the writes, the last is asked) as `account`: a
/// request whose client hung up is in flight to GET and to settling while its work goes on (its `started`
/// row and its lease), then done with one charge; an unseen key settled is fenced, and a request with it is
/// 410 `key-fenced` on every instance, with no order and no charge. Needs a lease of [`LONG_LEASE`].
pub async fn check_fence_in_phases(client: &Client, bases: &[String], downstream: &Downstream, account: &str) {
    let (first, last) = (&bases[0], &bases[bases.len() - 1]);
    let started = post_and_hang_up(first, account, "ph-slow").await;
    for at in ASKED_AT {
        tokio::time::sleep((started + at).saturating_duration_since(Instant::now())).await;
        for base in bases {
            assert_in_flight(&key_status(client, base, account, "ph-slow").await, "GET while the phases go on");
            assert_in_flight(&settle(client, base, account, "ph-slow").await, "settling while the phases go on");
        }
    }
    let done = until_settled("the slow key", || settle(client, last, account, "ph-slow")).await;
    assert_eq!(done.body["status"], "done", "{}", done.body);
    assert_eq!(done.body["response"]["status"], 201);
    assert_eq!(orders_with_key(client, first, account, "ph-slow").await, 1);
    let charges = downstream.charges().await.len();

    let fenced = settle(client, last, account, "ph-fenced").await;
    assert_eq!(fenced.body, serde_json::json!({"status": "fenced"}));
    let auth = super::bearer(account);
    for base in bases {
        let late = post_to(client, base, Some("ph-fenced"), MUGS, &[("authorization", auth.as_str())]).await;
        let late = Answer::read(late.expect("answer")).await.expect("body");
        assert_eq!(late.status, 410, "{:?}", late.body);
        let problem: Value = serde_json::from_slice(&late.body).expect("problem");
        assert_eq!(problem["code"], "key-fenced");
        assert_eq!(key_status(client, base, account, "ph-fenced").await.body["status"], "fenced");
        assert_eq!(settle(client, base, account, "ph-fenced").await.body["status"], "fenced");
    }
    assert_eq!(orders_with_key(client, first, account, "ph-fenced").await, 0, "no order with a fenced key");
    assert_eq!(downstream.charges().await.len(), charges, "no charge with a fenced key");
}
