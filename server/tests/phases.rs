//! The order flow in atomic phases (SQLite): a payment provider and a mail receiver as real processes, the
//! key row's recovery point, the lease that makes the key row the lock, the outbox, and real crashes (the
//! server binary aborting) at the three moments the flow must survive. Each test counts every effect:
//! orders in the server's file, charges at the provider, messages at the receiver.

mod common;
#[path = "common/processes.rs"]
mod processes;

use std::path::Path;
use std::time::{Duration, Instant};

use idempotent_fetch_server::checkout::CheckoutConfig;
use idempotent_fetch_server::store::phases::{random_id, Begun, PhaseOp, PhaseResult, RecoveryPoint};
use idempotent_fetch_server::store::{SqliteStore, Store, StoreError, Synchronous};
use idempotent_fetch_server::unix_now;
use processes::Process;
use reqwest::Client;
use serde_json::Value;

use common::{
    assert_one_order, assert_problem, count, keyed_request, post_concurrently, post_to, TestServer, MUGS, SECRET,
};

/// A short lease, so that a key left by a crash is taken over within a test.
const LEASE: Duration = Duration::from_millis(900);

struct Downstream {
    provider: Process,
    mailbox: Process,
    _dir: tempfile::TempDir,
}

impl Downstream {
    fn start() -> Downstream {
        let dir = tempfile::tempdir().expect("dir");
        let provider = Process::provider(&dir.path().join("provider.sqlite"));
        let mailbox = Process::mailbox(&dir.path().join("mail.sqlite"));
        Downstream { provider, mailbox, _dir: dir }
    }

    fn config(&self) -> CheckoutConfig {
        CheckoutConfig {
            provider_url: self.provider.url.clone(),
            mail_url: Some(self.mailbox.url.clone()),
            key_lease: LEASE,
        }
    }

    async fn charges(&self) -> Vec<Value> {
        list(&format!("{}/charges", self.provider.url), "charges").await
    }

    async fn messages(&self) -> Vec<Value> {
        list(&format!("{}/messages", self.mailbox.url), "messages").await
    }

    async fn provider_faults(&self, body: &str) {
        put(&format!("{}/faults", self.provider.url), body).await;
    }

    async fn mailbox_faults(&self, body: &str) {
        put(&format!("{}/faults", self.mailbox.url), body).await;
    }
}

async fn list(url: &str, field: &str) -> Vec<Value> {
    let body: Value = Client::new().get(url).send().await.expect("get").json().await.expect("json");
    body[field].as_array().cloned().expect("a list")
}

async fn put(url: &str, body: &str) {
    let response = Client::new().put(url).body(body.to_owned()).send().await.expect("put");
    assert_eq!(response.status(), 200, "PUT {url} {body}");
}

/// Polls `check` until it holds (at most 20 s).
async fn eventually<F: std::future::Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The recovery point of the default account's key, read straight from the file.
fn point(db: &Path, key: &str) -> String {
    let conn = rusqlite::Connection::open(db).expect("open");
    conn.query_row("SELECT recovery_point FROM idempotency_keys WHERE account_id = 'demo' AND key = ?1", [key], |row| {
        row.get(0)
    })
    .expect("key row")
}

/// Retries `key` until it answers 201 (a 409 while the key is held, a 503 while the provider fails, and
/// connection errors while the server restarts are retried); the 201's body.
async fn post_until_created(base: &str, key: &str) -> Value {
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
async fn assert_one_charge_and_one_message_each(downstream: &Downstream, orders: &[String]) {
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

#[tokio::test]
async fn an_order_is_charged_once_with_a_derived_key_and_confirmed_once() {
    let downstream = Downstream::start();
    let t = TestServer::start_with(|c| c.checkout = Some(downstream.config())).await;
    let first = t.post(Some("k-1"), MUGS, &[]).await.expect("post");
    assert_eq!(first.status(), 201);
    let order: Value = first.json().await.expect("order");
    let order_id = order["id"].as_str().expect("id").to_owned();
    let charge_id = order["chargeId"].as_str().expect("the answer names the charge").to_owned();
    let replay = t.post(Some("k-1"), MUGS, &[]).await.expect("replay");
    assert_eq!(replay.headers().get("idempotent-replayed").and_then(|v| v.to_str().ok()), Some("true"));
    assert_eq!(replay.json::<Value>().await.expect("json"), order);
    assert_eq!(point(&t.db, "k-1"), "finished");

    let charges = downstream.charges().await;
    assert_eq!(charges.len(), 1);
    assert_eq!(charges[0]["id"], charge_id.as_str());
    assert_eq!(charges[0]["amountCents"], 2400);
    // The provider's key is the row's own id, not the client's key.
    let row_id: String = rusqlite::Connection::open(&t.db)
        .expect("open")
        .query_row("SELECT row_id FROM idempotency_keys WHERE key = 'k-1'", [], |r| r.get(0))
        .expect("row id");
    assert_eq!(charges[0]["idempotencyKey"], format!("order-charge-{row_id}").as_str());
    assert_eq!(row_id.len(), 32);

    eventually("the confirmation is delivered", || async { downstream.messages().await.len() == 1 }).await;
    assert_one_charge_and_one_message_each(&downstream, std::slice::from_ref(&order_id)).await;
    eventually("the order shows its delivered confirmation", || async {
        let list = t.get_json("/api/orders").await;
        let order = &list["orders"][0];
        order["chargeId"] == charge_id.as_str()
            && order["confirmation"]["id"] == format!("confirm-{order_id}").as_str()
            && order["confirmation"]["deliveredAt"].is_i64()
    })
    .await;
    t.stop().await;
}

#[tokio::test]
async fn a_refused_order_is_stored_finished_without_a_charge() {
    let downstream = Downstream::start();
    let t = TestServer::start_with(|c| c.checkout = Some(downstream.config())).await;
    let bad = r#"{"items":[{"sku":"nope","qty":1}]}"#;
    let first = t.post(Some("k-bad"), bad, &[]).await.expect("post");
    let body = assert_problem(first, 400, "invalid-order").await;
    let again = t.post(Some("k-bad"), bad, &[]).await.expect("post");
    assert_eq!(assert_problem(again, 400, "invalid-order").await, body);
    assert_eq!(point(&t.db, "k-bad"), "finished");
    assert_eq!(t.count_orders(), 0);
    assert!(downstream.charges().await.is_empty());
    // A different body with the key is still a reused key.
    let reused = t.post(Some("k-bad"), MUGS, &[]).await.expect("post");
    assert_problem(reused, 422, "idempotency-key-reused").await;
    t.stop().await;
}

#[tokio::test]
async fn a_provider_outage_or_a_lost_charge_answer_resumes_at_charge_started_and_charges_once() {
    let downstream = Downstream::start();
    let t = TestServer::start_with(|c| c.checkout = Some(downstream.config())).await;

    // 503 before charging: the order is stored, the key waits at charge_started, released for a retry.
    downstream.provider_faults(r#"{"failBeforeCharge":1}"#).await;
    let failed = t.post(Some("k-503"), MUGS, &[]).await.expect("post");
    assert_problem(failed, 503, "payment-unavailable").await;
    assert_eq!(point(&t.db, "k-503"), "charge_started");
    assert_eq!(t.count_orders(), 1);
    assert!(downstream.charges().await.is_empty());

    // The provider charges but its answer is lost: the retry repeats the call with the same derived key
    // and the provider replays the charge.
    downstream.provider_faults(r#"{"dropAfterCharge":1}"#).await;
    let lost = t.post(Some("k-lost"), MUGS, &[]).await.expect("post");
    assert_problem(lost, 503, "payment-unavailable").await;
    assert_eq!(point(&t.db, "k-lost"), "charge_started");
    assert_eq!(downstream.charges().await.len(), 1, "charged once, answer lost");

    downstream.provider_faults("{}").await;
    let a = post_until_created(&t.server.url(), "k-503").await;
    let b = post_until_created(&t.server.url(), "k-lost").await;
    assert_eq!(t.count_orders(), 2, "the retries resumed the stored orders");
    let orders = [a["id"].as_str().expect("id").to_owned(), b["id"].as_str().expect("id").to_owned()];
    eventually("both confirmations", || async { downstream.messages().await.len() == 2 }).await;
    assert_one_charge_and_one_message_each(&downstream, &orders).await;
    t.stop().await;
}

#[tokio::test]
async fn concurrent_requests_with_one_key_make_one_order_one_charge_one_confirmation() {
    let downstream = Downstream::start();
    let t = TestServer::start_with(|c| c.checkout = Some(downstream.config())).await;
    downstream.provider_faults(r#"{"latencyMs":200,"latencyProbability":1}"#).await;
    let answers = post_concurrently(&t.client, &[t.server.url()], 8, "k-race", MUGS, &[]).await;
    assert_one_order(&answers);
    let order = post_until_created(&t.server.url(), "k-race").await;
    assert_eq!(t.count_orders(), 1);
    eventually("the confirmation", || async { downstream.messages().await.len() == 1 }).await;
    assert_one_charge_and_one_message_each(&downstream, &[order["id"].as_str().expect("id").to_owned()]).await;
    t.stop().await;
}

#[tokio::test]
async fn the_outbox_survives_a_receiver_outage_and_delivers_once() {
    let downstream = Downstream::start();
    let t = TestServer::start_with(|c| c.checkout = Some(downstream.config())).await;
    downstream.mailbox_faults(r#"{"fail":1}"#).await;
    let order = post_until_created(&t.server.url(), "k-out").await;
    let db = t.db.clone();
    eventually("a few failed attempts", || {
        let db = db.clone();
        async move { count(&db, "SELECT attempts FROM outbox") >= 2 }
    })
    .await;
    assert!(downstream.messages().await.is_empty());
    assert_eq!(count(&t.db, "SELECT COUNT(*) FROM outbox WHERE delivered_at IS NULL"), 1);
    downstream.mailbox_faults("{}").await;
    eventually("delivered after the outage", || async { downstream.messages().await.len() == 1 }).await;
    let db = t.db.clone();
    eventually("marked delivered", || {
        let db = db.clone();
        async move { count(&db, "SELECT COUNT(*) FROM outbox WHERE delivered_at IS NOT NULL") == 1 }
    })
    .await;
    assert_one_charge_and_one_message_each(&downstream, &[order["id"].as_str().expect("id").to_owned()]).await;
    t.stop().await;
}

/// The lease at the store: a held key is 409 to everyone else until its lease runs out; then one other
/// caller takes it over, and the first holder can no longer advance it.
#[tokio::test]
async fn the_key_row_is_the_lock_and_a_lost_lease_cannot_advance() {
    let dir = tempfile::tempdir().expect("dir");
    let store = Store::Sqlite(SqliteStore::open(dir.path().join("s.sqlite"), Synchronous::Full).expect("open"));
    lease_rules(&store).await;
}

pub async fn lease_rules(store: &Store) {
    let now = unix_now();
    let request = keyed_request("acct", "k-lease", MUGS, now);
    let begin = |token: String, now_ms: i64| PhaseOp::Begin {
        request: request.clone(),
        token,
        until_ms: now_ms + 1_000,
        now_ms,
    };
    let t0 = now * 1000;
    let first = match store.phase(begin(random_id().expect("id"), t0)).await.expect("begin") {
        PhaseResult::Begun(Begun::Held(held)) => held,
        other => panic!("{other:?}"),
    };
    assert_eq!(first.point, RecoveryPoint::Started);
    match store.phase(begin(random_id().expect("id"), t0 + 500)).await.expect("begin") {
        PhaseResult::Begun(Begun::Done(outcome)) => {
            assert_eq!(outcome, idempotent_fetch_server::protocol::Outcome::InFlight)
        }
        other => panic!("a live lease must answer in flight: {other:?}"),
    }
    // After the lease: the second caller takes the key over at its point.
    let second = match store.phase(begin(random_id().expect("id"), t0 + 1_001)).await.expect("begin") {
        PhaseResult::Begun(Begun::Held(held)) => held,
        other => panic!("{other:?}"),
    };
    assert_eq!(second.row_id, first.row_id, "the same row, so the same downstream keys");
    assert_ne!(second.token, first.token);
    let order = match idempotent_fetch_server::idempotency::place_order(&request).order {
        Some(order) => order,
        None => panic!("valid order"),
    };
    let stale = store.phase(PhaseOp::StoreOrder { held: first, order: order.clone() }).await;
    assert!(matches!(stale, Err(StoreError::LeaseLost)), "{stale:?}");
    let stored = store.phase(PhaseOp::StoreOrder { held: second, order }).await.expect("store order");
    let PhaseResult::Held(held) = stored else { panic!("{stored:?}") };
    assert_eq!(held.point, RecoveryPoint::ChargeStarted);
    // The completer takes only keys whose lease ran out.
    let taken = store.phase(PhaseOp::TakeStale { now_ms: t0 + 1_500, until_ms: t0 + 2_500, limit: 10 }).await;
    assert!(matches!(taken, Ok(PhaseResult::Taken(ref v)) if v.is_empty()), "{taken:?}");
    let taken = store.phase(PhaseOp::TakeStale { now_ms: t0 + 2_002, until_ms: t0 + 3_000, limit: 10 }).await;
    let Ok(PhaseResult::Taken(taken)) = taken else { panic!("{taken:?}") };
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].point, RecoveryPoint::ChargeStarted);
    assert_eq!(taken[0].order.as_ref().map(|o| o.total_cents), Some(2400));
    // The holder it was taken from cannot record a charge any more.
    let lost = store.phase(PhaseOp::RecordCharge { held, charge_id: "ch_x".to_owned() }).await;
    assert!(matches!(lost, Err(StoreError::LeaseLost)), "{lost:?}");
}

/// The server binary with the order flow, faults enabled, on `db`.
fn server(db: &Path, downstream: &Downstream) -> Process {
    Process::start(
        env!("CARGO_BIN_EXE_idempotent-fetch-server"),
        &[
            "--db",
            &db.to_string_lossy(),
            "--enable-faults",
            "--session-secret",
            SECRET,
            "--provider-url",
            &downstream.provider.url,
            "--mail-url",
            &downstream.mailbox.url,
            "--key-lease-ms",
            &LEASE.as_millis().to_string(),
        ],
    )
}

/// Sends `key` with `X-Fault: fault` to a server that must crash on it: no answer, and the process ends.
async fn post_and_crash(server: &mut Process, key: &str, fault: &str) {
    let answer = post_to(&Client::new(), &server.url, Some(key), MUGS, &[("x-fault", fault)]).await;
    assert!(answer.is_err(), "a crashed server answers nothing: {answer:?}");
    let status = server.wait_exit(Duration::from_secs(10)).expect("the process ended");
    assert!(!status.success(), "aborted, not a clean exit: {status}");
}

#[tokio::test]
async fn a_crash_after_the_charge_is_completed_by_the_retry_with_one_charge() {
    let downstream = Downstream::start();
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("orders.sqlite");
    let mut first = server(&db, &downstream);
    post_and_crash(&mut first, "k-crash-charge", "crash-after-charge").await;
    assert_eq!(point(&db, "k-crash-charge"), "charge_started", "the charge was made but not recorded");
    assert_eq!(downstream.charges().await.len(), 1);

    let restarted = server(&db, &downstream);
    let order = post_until_created(&restarted.url, "k-crash-charge").await;
    let id = order["id"].as_str().expect("id").to_owned();
    assert_eq!(count(&db, "SELECT COUNT(*) FROM orders"), 1);
    assert_eq!(order["chargeId"], downstream.charges().await[0]["id"]);
    eventually("the confirmation", || async { downstream.messages().await.len() == 1 }).await;
    assert_one_charge_and_one_message_each(&downstream, &[id]).await;
}

#[tokio::test]
async fn a_key_left_by_a_crash_is_finished_by_the_completer_without_a_retry() {
    let downstream = Downstream::start();
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("orders.sqlite");
    let mut first = server(&db, &downstream);
    post_and_crash(&mut first, "k-orphan", "crash-after-charge").await;
    let _restarted = server(&db, &downstream);
    let db2 = db.clone();
    eventually("the completer finishes the key", || {
        let db = db2.clone();
        async move { point(&db, "k-orphan") == "finished" }
    })
    .await;
    let order: String = rusqlite::Connection::open(&db)
        .expect("open")
        .query_row("SELECT id FROM orders", [], |r| r.get(0))
        .expect("order");
    eventually("the confirmation", || async { downstream.messages().await.len() == 1 }).await;
    assert_one_charge_and_one_message_each(&downstream, &[order]).await;
}

#[tokio::test]
async fn a_crash_after_finished_commits_replays_the_answer_and_confirms_once() {
    let downstream = Downstream::start();
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("orders.sqlite");
    let mut first = server(&db, &downstream);
    post_and_crash(&mut first, "k-crash-finish", "crash-after-finish").await;
    assert_eq!(point(&db, "k-crash-finish"), "finished");

    let restarted = server(&db, &downstream);
    let response = post_to(&Client::new(), &restarted.url, Some("k-crash-finish"), MUGS, &[]).await.expect("post");
    assert_eq!(response.status(), 201);
    assert_eq!(response.headers().get("idempotent-replayed").and_then(|v| v.to_str().ok()), Some("true"));
    let order: Value = response.json().await.expect("order");
    eventually("the confirmation", || async { downstream.messages().await.len() == 1 }).await;
    assert_one_charge_and_one_message_each(&downstream, &[order["id"].as_str().expect("id").to_owned()]).await;
}

#[tokio::test]
async fn a_crash_after_delivery_sends_again_and_the_receiver_refuses_the_duplicate() {
    let downstream = Downstream::start();
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("orders.sqlite");
    let mut first = server(&db, &downstream);
    put(&format!("{}/api/faults", first.url), r#"{"crashAfterDelivery":1}"#).await;
    let order = post_until_created(&first.url, "k-crash-deliver").await;
    let status = first.wait_exit(Duration::from_secs(10)).expect("the worker crashed the process");
    assert!(!status.success());
    assert_eq!(downstream.messages().await.len(), 1, "delivered before the crash");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM outbox WHERE delivered_at IS NULL"), 1, "not marked");

    // The restarted server (its faults start off) sends the message again; the receiver refuses it.
    let _restarted = server(&db, &downstream);
    let db2 = db.clone();
    eventually("marked delivered after the restart", || {
        let db = db2.clone();
        async move { count(&db, "SELECT COUNT(*) FROM outbox WHERE delivered_at IS NOT NULL") == 1 }
    })
    .await;
    let messages = downstream.messages().await;
    assert_eq!(messages[0]["duplicatesRefused"], 1, "{messages:?}");
    assert_one_charge_and_one_message_each(&downstream, &[order["id"].as_str().expect("id").to_owned()]).await;
}

#[tokio::test]
async fn a_database_from_before_the_phases_gains_their_columns_and_keeps_its_rows() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("old.sqlite");
    let old = rusqlite::Connection::open(&path).expect("open");
    old.execute_batch(
        "CREATE TABLE idempotency_keys (account_id TEXT NOT NULL, key TEXT NOT NULL, request_hash TEXT NOT NULL,
             status_code INTEGER NULL, response_headers TEXT NULL, response_body TEXT NULL,
             created_at INTEGER NOT NULL, PRIMARY KEY (account_id, key));
         CREATE TABLE orders (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
             account_id TEXT NOT NULL, idempotency_key TEXT NOT NULL, items TEXT NOT NULL,
             total_cents INTEGER NOT NULL, currency TEXT NOT NULL, created_at INTEGER NOT NULL);
         INSERT INTO idempotency_keys VALUES ('demo', 'k-old', 'h', 201, '[]', '{}', 1);
         INSERT INTO orders (id, account_id, idempotency_key, items, total_cents, currency, created_at)
             VALUES ('ord_0000000000000001', 'demo', 'k-old', '[]', 100, 'EUR', 1);",
    )
    .expect("old schema");
    drop(old);
    let store = SqliteStore::open(&path, Synchronous::Full).expect("migrates");
    let account = idempotent_fetch_server::keys::AccountId::parse("demo").expect("account");
    let orders = store.list_orders(&account, 10).await.expect("list");
    assert_eq!(orders.len(), 1);
    assert_eq!(orders[0].charge_id, None);
    assert_eq!(point(&path, "k-old"), "finished", "an old key row is a finished one");
}
