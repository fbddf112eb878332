//! A database written by the server before its key rows and its outbox moved into the library's tables
//! (`idempotency_records`, `outbox_messages`; SQLite and PostgreSQL), with a finished key, a fence, unfinished keys and an undelivered confirmation,
//! is migrated when a server starts on it and keeps working: the finished key replays its stored answer, the
//! fence still refuses, the unfinished keys are completed or taken over, the confirmation is delivered.
//!
//! The PostgreSQL test is `#[ignore]`d like those of `tests/postgres.rs` (run with `--ignored`).

mod common;
#[path = "common/pg_cluster.rs"]
mod pg_cluster;

use idempotent_fetch_server::keys::fingerprint;
use idempotent_fetch_server::protocol::{StoredResponse, FENCED_FINGERPRINT};
use idempotent_fetch_server::{serve, unix_now, Config, RunningServer};
use reqwest::Client;
use serde_json::Value;
use tokio_postgres::NoTls;

use common::checkout::{eventually, Downstream};
use common::key_status::key_status;
use common::{post_to, DEFAULT_ACCOUNT, MUGS, SECRET};
use pg_cluster::{bin_dir, Cluster};

/// The SQLite tables as the server created them before (`git show <before>:server/src/store/sqlite.rs`).
const OLD_SQLITE_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS idempotency_keys (
    account_id       TEXT    NOT NULL,
    key              TEXT    NOT NULL,
    request_hash     TEXT    NOT NULL,
    status_code      INTEGER NULL,
    response_headers TEXT    NULL,
    response_body    TEXT    NULL,
    created_at       INTEGER NOT NULL,
    recovery_point   TEXT    NOT NULL DEFAULT 'finished',
    row_id           TEXT    NULL,
    lock_token       TEXT    NULL,
    locked_until     INTEGER NOT NULL DEFAULT 0,
    order_id         TEXT    NULL,
    PRIMARY KEY (account_id, key)
);
CREATE INDEX IF NOT EXISTS idempotency_keys_created_at ON idempotency_keys (created_at);
CREATE TABLE IF NOT EXISTS orders (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT    NOT NULL UNIQUE,
    account_id      TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    items           TEXT    NOT NULL,
    total_cents     INTEGER NOT NULL,
    currency        TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    charge_id       TEXT   NULL
);
CREATE INDEX IF NOT EXISTS orders_account_seq ON orders (account_id, seq);
CREATE INDEX IF NOT EXISTS orders_account_key ON orders (account_id, idempotency_key);
CREATE INDEX IF NOT EXISTS idempotency_keys_unfinished ON idempotency_keys (locked_until)
    WHERE recovery_point <> 'finished';
CREATE TABLE IF NOT EXISTS outbox (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT    NOT NULL UNIQUE,
    order_id        TEXT    NOT NULL UNIQUE,
    account_id      TEXT    NOT NULL,
    payload         TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL DEFAULT 0,
    claimed_until   INTEGER NOT NULL DEFAULT 0,
    delivered_at    INTEGER NULL
);
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (next_attempt_at) WHERE delivered_at IS NULL;
";

/// The PostgreSQL tables as the server created them before (`server/src/store/postgres.rs` then).
const OLD_POSTGRES_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS idempotency_keys (
    account_id       TEXT    NOT NULL,
    key              TEXT    NOT NULL,
    request_hash     TEXT    NOT NULL,
    status_code      INTEGER NULL,
    response_headers TEXT    NULL,
    response_body    TEXT    NULL,
    created_at       BIGINT  NOT NULL,
    recovery_point   TEXT    NOT NULL DEFAULT 'finished',
    row_id           TEXT    NULL,
    lock_token       TEXT    NULL,
    locked_until     BIGINT  NOT NULL DEFAULT 0,
    order_id         TEXT    NULL,
    PRIMARY KEY (account_id, key)
);
CREATE INDEX IF NOT EXISTS idempotency_keys_created_at ON idempotency_keys (created_at);
CREATE TABLE IF NOT EXISTS orders (
    seq             BIGSERIAL PRIMARY KEY,
    id              TEXT   NOT NULL UNIQUE,
    account_id      TEXT   NOT NULL,
    idempotency_key TEXT   NOT NULL,
    items           TEXT   NOT NULL,
    total_cents     BIGINT NOT NULL,
    currency        TEXT   NOT NULL,
    created_at      BIGINT NOT NULL,
    charge_id       TEXT   NULL
);
CREATE INDEX IF NOT EXISTS orders_account_seq ON orders (account_id, seq);
CREATE INDEX IF NOT EXISTS orders_account_key ON orders (account_id, idempotency_key);
CREATE INDEX IF NOT EXISTS idempotency_keys_unfinished ON idempotency_keys (locked_until)
    WHERE recovery_point <> 'finished';
CREATE TABLE IF NOT EXISTS outbox (
    seq             BIGSERIAL PRIMARY KEY,
    id              TEXT   NOT NULL UNIQUE,
    order_id        TEXT   NOT NULL UNIQUE,
    account_id      TEXT   NOT NULL,
    payload         TEXT   NOT NULL,
    created_at      BIGINT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL DEFAULT 0,
    claimed_until   BIGINT NOT NULL DEFAULT 0,
    delivered_at    BIGINT NULL
);
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (next_attempt_at) WHERE delivered_at IS NULL;
";

/// Two mugs, as the orders below hold them.
const ITEMS: &str = r#"[{"sku":"mug","name":"Enamel mug","qty":2,"unitPriceCents":1200,"lineTotalCents":2400}]"#;

/// The order the finished key made, whose confirmation was never delivered.
const DONE_ORDER: &str = "ord_00000000000000d1";
/// The order of the key a crash left at `charged`.
const CHARGED_ORDER: &str = "ord_00000000000000c1";

/// The stored answer of the finished key.
fn done_answer() -> StoredResponse {
    StoredResponse {
        status: 201,
        headers: vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("location".to_owned(), format!("/api/orders/{DONE_ORDER}")),
        ],
        body: format!(r#"{{"id":"{DONE_ORDER}","migrated":true}}"#),
    }
}

/// The old server's rows: a finished key with its order and an undelivered confirmation, a fence, a key a
/// crash left at `charged` (its order charged) and one left at `started`, both with their lease run out.
/// The statements are valid in SQLite and PostgreSQL.
fn old_rows() -> String {
    let now = unix_now();
    let now_ms = now * 1000;
    let hash = fingerprint("POST", "/api/orders", MUGS.as_bytes());
    let done = done_answer();
    let (headers, body) = (done.encode_headers(), done.body);
    let confirmation = serde_json::json!({
        "id": format!("confirm-{DONE_ORDER}"),
        "to": "demo@customers.invalid",
        "subject": format!("Order {DONE_ORDER} confirmed"),
        "text": "written by the old server",
    });
    format!(
        "INSERT INTO orders (id, account_id, idempotency_key, items, total_cents, currency, created_at, charge_id)
         VALUES ('{DONE_ORDER}', 'demo', 'k-done', '{ITEMS}', 2400, 'EUR', {now}, 'ch_old_done'),
                ('{CHARGED_ORDER}', 'demo', 'k-charged', '{ITEMS}', 2400, 'EUR', {now}, 'ch_old_charged');
         INSERT INTO idempotency_keys (account_id, key, request_hash, status_code, response_headers, response_body,
                                       created_at, recovery_point, row_id, lock_token, locked_until, order_id)
         VALUES ('demo', 'k-done', '{hash}', 201, '{headers}', '{body}', {now}, 'finished',
                 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', NULL, 0, '{DONE_ORDER}'),
                ('demo', 'k-fenced', '{FENCED_FINGERPRINT}', NULL, NULL, NULL, {now}, 'finished', NULL, NULL, 0, NULL),
                ('demo', 'k-charged', '{hash}', NULL, NULL, NULL, {now}, 'charged',
                 'cccccccccccccccccccccccccccccccc', 'old-token', {now_ms} - 1000, '{CHARGED_ORDER}'),
                ('demo', 'k-started', '{hash}', NULL, NULL, NULL, {now}, 'started',
                 'ssssssssssssssssssssssssssssssss', 'old-token', {now_ms} - 1000, NULL);
         INSERT INTO outbox (id, order_id, account_id, payload, created_at, next_attempt_at)
         VALUES ('confirm-{DONE_ORDER}', '{DONE_ORDER}', 'demo', '{confirmation}', {now_ms}, 0);"
    )
}

/// What a server started on the migrated database must do with the old rows.
async fn check_migrated(server: &RunningServer, downstream: &Downstream) {
    let (client, base) = (Client::new(), server.url());

    // The finished key replays its stored answer, byte for byte.
    let replay = post_to(&client, &base, Some("k-done"), MUGS, &[]).await.expect("answer");
    assert_eq!(replay.status(), 201);
    assert_eq!(replay.headers().get("idempotent-replayed").and_then(|v| v.to_str().ok()), Some("true"));
    assert_eq!(replay.text().await.expect("body"), done_answer().body);

    // The fence still refuses.
    let fenced = post_to(&client, &base, Some("k-fenced"), MUGS, &[]).await.expect("answer");
    assert_eq!(fenced.status(), 410);

    // The key left at `charged` is completed (by the completer, or this request, whichever takes it first)
    // with the old charge: no second charge, and its answer is the order.
    let charged = common::checkout::post_until_created(&base, "k-charged").await;
    assert_eq!(charged["id"], CHARGED_ORDER);
    assert_eq!(charged["chargeId"], "ch_old_charged");
    let status = key_status(&client, &base, DEFAULT_ACCOUNT, "k-charged").await;
    assert_eq!(status.body["status"], "done", "{:?}", status.body);

    // The key left at `started` did nothing yet: it is taken over and makes its order now, charged once.
    let started = common::checkout::post_until_created(&base, "k-started").await;
    let started_order = started["id"].as_str().expect("order id").to_owned();
    assert_ne!(started_order, DONE_ORDER);
    let charges = downstream.charges().await;
    assert_eq!(charges.len(), 1, "only the order that was never charged is charged: {charges:?}");

    // The undelivered confirmation is delivered, and so are those of the two completed keys; each once.
    eventually("every confirmation is delivered", || async { downstream.messages().await.len() == 3 }).await;
    let mut ids: Vec<String> =
        downstream.messages().await.iter().map(|m: &Value| m["id"].as_str().expect("id").to_owned()).collect();
    ids.sort();
    let mut expected =
        vec![format!("confirm-{CHARGED_ORDER}"), format!("confirm-{DONE_ORDER}"), format!("confirm-{started_order}")];
    expected.sort();
    assert_eq!(ids, expected);

    // The order listing shows each order's confirmation, the old one included, delivered.
    eventually("the listing shows every confirmation delivered", || async {
        let list: Value = client
            .get(format!("{base}/api/orders"))
            .header("authorization", common::bearer(DEFAULT_ACCOUNT))
            .send()
            .await
            .expect("list")
            .json()
            .await
            .expect("json");
        let orders = list["orders"].as_array().cloned().unwrap_or_default();
        orders.len() == 3 && orders.iter().all(|o| o["confirmation"]["deliveredAt"].is_i64())
    })
    .await;
}

fn config(mut config: Config, downstream: &Downstream) -> Config {
    config.session_secret = Some(SECRET.to_owned());
    config.checkout = Some(downstream.config());
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_sqlite_database_is_migrated_and_keeps_working() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("old.sqlite");
    let old = rusqlite::Connection::open(&path).expect("open");
    old.execute_batch(OLD_SQLITE_SCHEMA).expect("old schema");
    old.execute_batch(&old_rows()).expect("old rows");
    drop(old);

    let downstream = Downstream::start();
    let server = serve(config(Config::sqlite(path.to_string_lossy().into_owned()), &downstream)).await.expect("starts");
    let db = rusqlite::Connection::open(&path).expect("open");
    let old_tables: i64 = db
        .query_row("SELECT COUNT(*) FROM sqlite_master WHERE name IN ('idempotency_keys', 'outbox')", [], |r| r.get(0))
        .expect("count");
    assert_eq!(old_tables, 0, "the old key table and outbox are dropped");
    let moved: i64 = db.query_row("SELECT COUNT(*) FROM idempotency_records", [], |r| r.get(0)).expect("count");
    assert_eq!(moved, 4, "every old key row is in the library's table");
    check_migrated(&server, &downstream).await;
    server.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run with --ignored"]
async fn an_old_postgres_database_is_migrated_and_keeps_working() {
    let cluster = Cluster::start(bin_dir(), Cluster::FAST).expect("start a throwaway PostgreSQL cluster");
    let url = cluster.url("postgres");
    let (db, connection) = tokio_postgres::connect(&url, NoTls).await.expect("connect to test cluster");
    tokio::spawn(connection);
    db.batch_execute(OLD_POSTGRES_SCHEMA).await.expect("old schema");
    db.batch_execute(&old_rows()).await.expect("old rows");

    let downstream = Downstream::start();
    let server = serve(config(Config::postgres(url), &downstream)).await.expect("starts");
    let old_tables: bool = db
        .query_one("SELECT to_regclass('idempotency_keys') IS NOT NULL OR to_regclass('outbox') IS NOT NULL", &[])
        .await
        .expect("query")
        .get(0);
    assert!(!old_tables, "the old key table and outbox are dropped");
    let moved: i64 = db.query_one("SELECT COUNT(*) FROM idempotency_records", &[]).await.expect("count").get(0);
    assert_eq!(moved, 4, "every old key row is in the library's table");
    check_migrated(&server, &downstream).await;
    server.shutdown().await.expect("shutdown");
}
