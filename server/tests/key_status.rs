//! `GET /api/idempotency-keys/{key}` on SQLite: the contract (every answer, another account's key, after
//! the sweep from the order), and an existing database of the previous schema gaining the index it needs;
//! a request whose client hung up reading in flight until its work is done; settling (`POST` on the same
//! URL, the fence). The same contract on PostgreSQL is in `postgres.rs`, the order phases' in `phases.rs`.

mod common;

use common::key_status::{check_hung_up_request_stays_in_flight, check_key_status, check_settle};
use common::TestServer;
use idempotent_fetch_server::keys::{AccountId, IdempotencyKey};
use idempotent_fetch_server::store::{SqliteStore, Synchronous};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_status_answers_from_the_key_row_then_from_the_order() {
    let t = TestServer::start().await;
    let server = &t;
    check_key_status(&t.client, &[t.server.url()], "sqlite", move |at| async move {
        server.sweep(at).await.expect("sweep")
    })
    .await;
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_client_hung_up_reads_in_flight_until_its_work_is_done() {
    let t = TestServer::start().await;
    let base = t.server.url();
    check_hung_up_request_stays_in_flight(&t.client, &base, &base, "hung-up").await;
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settling_fences_an_unseen_key_and_never_a_request_at_work() {
    let t = TestServer::start().await;
    let server = &t;
    check_settle(
        &t.client,
        &[t.server.url()],
        "sqlite",
        move |at| async move { server.sweep(at).await.expect("sweep") },
    )
    .await;
    assert_eq!(t.count_orders(), 2, "K1 once, the other account's K2 once; nothing for the fenced key");
    t.stop().await;
}

/// The tables as the server created them before the key-status lookup (no index on the order's key).
const PREVIOUS_SCHEMA: &str = "
CREATE TABLE idempotency_keys (
    account_id TEXT NOT NULL, key TEXT NOT NULL, request_hash TEXT NOT NULL, status_code INTEGER NULL,
    response_headers TEXT NULL, response_body TEXT NULL, created_at INTEGER NOT NULL,
    PRIMARY KEY (account_id, key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
CREATE TABLE orders (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, account_id TEXT NOT NULL,
    idempotency_key TEXT NOT NULL, items TEXT NOT NULL, total_cents INTEGER NOT NULL, currency TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX orders_account_seq ON orders (account_id, seq);
INSERT INTO orders (id, account_id, idempotency_key, items, total_cents, currency, created_at)
VALUES ('ord_00000000000000aa', 'old', 'old-key',
        '[{\"sku\":\"mug\",\"name\":\"Enamel mug\",\"qty\":1,\"unitPriceCents\":1200,\"lineTotalCents\":1200}]',
        1200, 'EUR', 1700000000);
";

#[tokio::test]
async fn an_existing_database_gains_the_index_and_its_orders_answer_for_their_keys() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("previous.sqlite");
    rusqlite::Connection::open(&path).expect("open").execute_batch(PREVIOUS_SCHEMA).expect("previous schema");
    let store =
        SqliteStore::open(&path, Synchronous::Full, common::RETENTION).await.expect("open with the current schema");
    let conn = rusqlite::Connection::open(&path).expect("open");
    let plan: String = conn
        .query_row(
            "EXPLAIN QUERY PLAN SELECT id FROM orders WHERE account_id = 'old' AND idempotency_key = 'old-key'",
            [],
            |row| row.get(3),
        )
        .expect("plan");
    assert!(plan.contains("orders_account_key"), "the lookup uses the new index: {plan}");
    let account = AccountId::parse("old").expect("account");
    let key = IdempotencyKey::parse("old-key").expect("key");
    match store.newest_order(&account, &key).await.expect("lookup") {
        Some(order) => assert_eq!((order.id.as_str(), order.total_cents), ("ord_00000000000000aa", 1200)),
        other => panic!("expected the old order, got {other:?}"),
    }
}
