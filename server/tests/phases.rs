//! The order flow in atomic phases (SQLite): a payment provider and a mail receiver as real processes, the
//! key row's recovery point, the lease that makes the key row the lock, the outbox, and real crashes (the
//! server binary aborting) at the three moments the flow must survive. Each test counts every effect:
//! orders in the server's file, charges at the provider, messages at the receiver.

mod common;

use std::path::Path;
use std::time::Duration;

use common::processes::Process;
use idempotent_fetch_server::checkout::{complete_once, Checkout};
use idempotent_fetch_server::config::CheckoutConfig;
use idempotent_fetch_server::store::phases::{BeginDecision, RecoveryPoint};
use idempotent_fetch_server::store::{SqliteStore, Store, Synchronous};
use reqwest::Client;
use serde_json::Value;

use common::checkout::{
    assert_one_charge_and_one_message_each, check_fence_in_phases, eventually, lease_rules, point, post_and_crash,
    post_until_created, put, server, Downstream, LONG_LEASE,
};
use common::{assert_one_order, assert_problem, count, post_concurrently, post_to, TestServer, MUGS};

/// The server binary on the SQLite file `db`.
fn sqlite_server(db: &Path, downstream: &Downstream) -> Process {
    server(&["--db", &db.to_string_lossy()], downstream)
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
        .query_row("SELECT row_id FROM idempotency_records WHERE key = 'k-1'", [], |r| r.get(0))
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_at_work_is_in_flight_and_a_fenced_key_is_refused_without_an_order_or_a_charge() {
    let downstream = Downstream::start();
    let config = idempotent_fetch_server::config::CheckoutConfig { key_lease: LONG_LEASE, ..downstream.config() };
    let t = TestServer::start_with(|c| c.checkout = Some(config)).await;
    check_fence_in_phases(&t.client, &[t.server.url()], &downstream, "phases-fence").await;
    assert_eq!(t.count_orders(), 1, "the slow key's order only");
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
        async move { count(&db, "SELECT attempts FROM outbox_messages") >= 2 }
    })
    .await;
    assert!(downstream.messages().await.is_empty());
    assert_eq!(count(&t.db, "SELECT COUNT(*) FROM outbox_messages WHERE delivered_at IS NULL"), 1);
    downstream.mailbox_faults("{}").await;
    eventually("delivered after the outage", || async { downstream.messages().await.len() == 1 }).await;
    let db = t.db.clone();
    eventually("marked delivered", || {
        let db = db.clone();
        async move { count(&db, "SELECT COUNT(*) FROM outbox_messages WHERE delivered_at IS NOT NULL") == 1 }
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
    let store = Store::Sqlite(
        SqliteStore::open(dir.path().join("s.sqlite"), Synchronous::Full, common::RETENTION).await.expect("open"),
    );
    lease_rules(&store).await;
}

#[tokio::test]
async fn a_crash_after_the_charge_is_completed_by_the_retry_with_one_charge() {
    let downstream = Downstream::start();
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("orders.sqlite");
    let mut first = sqlite_server(&db, &downstream);
    post_and_crash(&mut first, "k-crash-charge", "crash-after-charge").await;
    assert_eq!(point(&db, "k-crash-charge"), "charge_started", "the charge was made but not recorded");
    assert_eq!(downstream.charges().await.len(), 1);

    let restarted = sqlite_server(&db, &downstream);
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
    let mut first = sqlite_server(&db, &downstream);
    post_and_crash(&mut first, "k-orphan", "crash-after-charge").await;
    let _restarted = sqlite_server(&db, &downstream);
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
    let mut first = sqlite_server(&db, &downstream);
    post_and_crash(&mut first, "k-crash-finish", "crash-after-finish").await;
    assert_eq!(point(&db, "k-crash-finish"), "finished");

    let restarted = sqlite_server(&db, &downstream);
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
    let mut first = sqlite_server(&db, &downstream);
    put(&format!("{}/api/faults", first.url), r#"{"crashAfterDelivery":1}"#).await;
    let order = post_until_created(&first.url, "k-crash-deliver").await;
    let status = first.wait_exit(Duration::from_secs(10)).expect("the worker crashed the process");
    assert!(!status.success());
    assert_eq!(downstream.messages().await.len(), 1, "delivered before the crash");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM outbox_messages WHERE delivered_at IS NULL"), 1, "not marked");

    // The restarted server (its faults start off) sends the message again; the receiver refuses it.
    let _restarted = sqlite_server(&db, &downstream);
    let db2 = db.clone();
    eventually("marked delivered after the restart", || {
        let db = db2.clone();
        async move { count(&db, "SELECT COUNT(*) FROM outbox_messages WHERE delivered_at IS NOT NULL") == 1 }
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
    let store = SqliteStore::open(&path, Synchronous::Full, common::RETENTION).await.expect("migrates");
    let account = idempotent_fetch_server::keys::AccountId::parse("demo").expect("account");
    let orders = store.list_orders(&account, 10).await.expect("list");
    assert_eq!(orders.len(), 1);
    assert_eq!(orders[0].charge_id, None);
    assert_eq!(point(&path, "k-old"), "finished", "an old key row is a finished one");
}

/// A key left at `started` (its request died before storing an order) has nothing the completer could go
/// on with: once its lease ran out the completer abandons it through the library, so the key is new again.
#[tokio::test]
async fn the_completer_abandons_a_key_left_at_started() {
    let dir = tempfile::tempdir().expect("dir");
    let store = Store::Sqlite(
        SqliteStore::open(dir.path().join("s.sqlite"), Synchronous::Full, common::RETENTION).await.expect("open"),
    );
    let lease = Duration::from_millis(200);
    // No provider call is made for a key at `started`: the URL is never dialled.
    let config = CheckoutConfig { provider_url: "http://127.0.0.1:9".to_owned(), mail_url: None, key_lease: lease };
    let checkout = Checkout::new(config).expect("checkout");
    let request = common::keyed_request("acct", "k-started", MUGS, idempotent_fetch_server::unix_now());
    let BeginDecision::Held(left) = store.begin(&request, lease).await.expect("begin") else { panic!("held") };
    assert_eq!(complete_once(&store, &checkout).await, 0, "a live lease is left alone");
    tokio::time::sleep(lease + Duration::from_millis(50)).await;
    assert_eq!(complete_once(&store, &checkout).await, 1);
    let BeginDecision::Held(again) = store.begin(&request, lease).await.expect("begin") else { panic!("new again") };
    assert_eq!(again.point, RecoveryPoint::Started);
    assert_ne!(again.held.row_id, left.held.row_id, "a new row: the abandoned one is gone");
}
