//! `GET /api/idempotency-keys/{key}` on SQLite: the contract (every answer, another account's key, after
//! the sweep from the order), and an existing database of the previous schema gaining the index it needs.
//! The same contract on PostgreSQL is in `postgres.rs`.

mod common;

use common::key_status::check_key_status;
use common::TestServer;
use idempotent_fetch_server::keys::{AccountId, IdempotencyKey};
use idempotent_fetch_server::store::{KeyRecord, SqliteStore, Synchronous};

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
    let store = SqliteStore::open(&path, Synchronous::Full).expect("open with the current schema");
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
    match store.key_record(&account, &key, 0).await.expect("lookup") {
        KeyRecord::Order(order) => assert_eq!((order.id.as_str(), order.total_cents), ("ord_00000000000000aa", 1200)),
        other => panic!("expected the old order, got {other:?}"),
    }
}
