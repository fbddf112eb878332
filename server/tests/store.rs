//! The SQLite store's transaction, tested directly (no HTTP).

mod common;

use std::time::Duration;

use idempotent_fetch_server::idempotency::place_order;
use idempotent_fetch_server::keys::AccountId;
use idempotent_fetch_server::protocol::Outcome;
use idempotent_fetch_server::store::{ProcessOptions, SqliteStore, Store, StoreError, Synchronous};
use idempotent_fetch_server::sweep::sweep_once;

use common::{count, crash_before_commit, keyed_request, MUGS};

async fn open(dir: &tempfile::TempDir) -> (Store, std::path::PathBuf) {
    let path = dir.path().join("store.sqlite");
    (Store::Sqlite(SqliteStore::open(&path, Synchronous::Full, common::RETENTION).await.expect("open")), path)
}

#[tokio::test]
async fn a_crash_between_the_order_insert_and_commit_leaves_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let (store, path) = open(&dir).await;
    let crash = crash_before_commit();

    let result = store.process(keyed_request("demo", "k1", MUGS, 1_000), crash, place_order).await;
    assert!(matches!(result, Err(StoreError::InjectedCrash)), "{result:?}");
    // Another connection sees neither the key row nor the order.
    assert_eq!(count(&path, "SELECT COUNT(*) FROM idempotency_records"), 0);
    assert_eq!(count(&path, "SELECT COUNT(*) FROM orders"), 0);

    // The retry with the same key does the work, once.
    let retry = store.process(keyed_request("demo", "k1", MUGS, 1_001), ProcessOptions::default(), place_order).await;
    let Ok(Outcome::Fresh(first)) = retry else { panic!("expected fresh, got {retry:?}") };
    assert_eq!(first.status, 201);
    let again = store.process(keyed_request("demo", "k1", MUGS, 1_002), ProcessOptions::default(), place_order).await;
    assert_eq!(again.ok(), Some(Outcome::Replay(first)));
    assert_eq!(count(&path, "SELECT COUNT(*) FROM idempotency_records"), 1);
    assert_eq!(count(&path, "SELECT COUNT(*) FROM orders"), 1);
}

#[tokio::test]
async fn the_sweep_deletes_only_rows_older_than_retention() {
    let dir = tempfile::tempdir().expect("dir");
    let (store, path) = open(&dir).await;
    let day = 86_400;
    let retention = Duration::from_secs(day as u64);
    let options = ProcessOptions::default();
    let now = idempotent_fetch_server::unix_now();
    // The key rows are the library's, created at the clock's time: they are aged here in the file.
    for (key, created) in [("old", now - 2 * day), ("edge", now - day + 60), ("new", now)] {
        let outcome = store.process(keyed_request("demo", key, MUGS, created), options, place_order).await;
        assert!(matches!(outcome, Ok(Outcome::Fresh(_))), "{outcome:?}");
        age(&path, key, created);
    }
    // At `now`, "old" is 2 days old, "edge" a minute short of 1 day (kept), "new" less.
    assert_eq!(sweep_once(&store, retention).await.ok(), Some(1));
    let keys: Vec<String> = {
        let conn = rusqlite::Connection::open(&path).expect("open");
        let mut stmt = conn.prepare("SELECT key FROM idempotency_records ORDER BY key").expect("prepare");
        let rows = stmt.query_map([], |row| row.get(0)).expect("query");
        rows.collect::<Result<_, _>>().expect("rows")
    };
    assert_eq!(keys, ["edge", "new"]);
    // Orders are never swept.
    assert_eq!(count(&path, "SELECT COUNT(*) FROM orders"), 3);

    // The swept key is new again; the kept one replays.
    let old = store.process(keyed_request("demo", "old", MUGS, now), options, place_order).await;
    assert!(matches!(old, Ok(Outcome::Fresh(_))), "{old:?}");
    let edge = store.process(keyed_request("demo", "edge", MUGS, now), options, place_order).await;
    assert!(matches!(edge, Ok(Outcome::Replay(_))), "{edge:?}");
}

/// Sets the key row's `created_at` in the file, as if it had been made at `at` (unix seconds).
fn age(path: &std::path::Path, key: &str, at: i64) {
    let conn = rusqlite::Connection::open(path).expect("open");
    let changed = conn
        .execute("UPDATE idempotency_records SET created_at = ?1 WHERE key = ?2", rusqlite::params![at, key])
        .expect("age");
    assert_eq!(changed, 1, "{key}");
}

#[tokio::test]
async fn an_expired_key_behaves_as_new_even_before_the_sweep() {
    let dir = tempfile::tempdir().expect("dir");
    let (store, path) = open(&dir).await;
    let options = ProcessOptions::default();
    let now = idempotent_fetch_server::unix_now();
    let first = store.process(keyed_request("demo", "k", MUGS, now), options, place_order).await;
    assert!(matches!(first, Ok(Outcome::Fresh(_))), "{first:?}");
    // The store's retention is a day: a row two days old is expired, though not swept.
    age(&path, "k", now - 2 * 86_400);
    let later = keyed_request("demo", "k", r#"{"items":[{"sku":"kettle","qty":1}]}"#, now);
    let second = store.process(later, options, place_order).await;
    assert!(matches!(second, Ok(Outcome::Fresh(_))), "{second:?}");
    assert_eq!(count(&path, "SELECT COUNT(*) FROM orders"), 2);
}

#[tokio::test]
async fn accounts_scope_keys_in_the_store() {
    let dir = tempfile::tempdir().expect("dir");
    let (store, path) = open(&dir).await;
    let options = ProcessOptions::default();
    for account in ["a", "b"] {
        let outcome = store.process(keyed_request(account, "k", MUGS, 1_000), options, place_order).await;
        assert!(matches!(outcome, Ok(Outcome::Fresh(_))), "{outcome:?}");
    }
    let mismatch = store
        .process(keyed_request("a", "k", r#"{"items":[{"sku":"kettle","qty":1}]}"#, 1_001), options, place_order)
        .await;
    assert_eq!(mismatch.ok(), Some(Outcome::Mismatch));
    assert_eq!(count(&path, "SELECT COUNT(*) FROM orders"), 2);
    let listed = store.list_orders(&AccountId::parse("a").expect("account"), 10).await.expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].account_id, "a");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_connections_racing_on_one_file_do_the_work_once() {
    // Two stores on one file behave like two server processes: no shared in-flight set, only
    // BEGIN IMMEDIATE, the busy timeout and the primary key.
    let dir = tempfile::tempdir().expect("dir");
    let (first, path) = open(&dir).await;
    let second =
        Store::Sqlite(SqliteStore::open(&path, Synchronous::Full, common::RETENTION).await.expect("second connection"));
    let mut tasks = Vec::new();
    for i in 0..40 {
        let store = if i % 2 == 0 { first.clone() } else { second.clone() };
        tasks.push(tokio::spawn(async move {
            store.process(keyed_request("demo", "race", MUGS, 1_000), ProcessOptions::default(), place_order).await
        }));
    }
    let mut fresh = 0;
    let mut replays = Vec::new();
    for task in tasks {
        match task.await.expect("task") {
            Ok(Outcome::Fresh(response)) => {
                fresh += 1;
                replays.push(response);
            }
            Ok(Outcome::Replay(response)) => replays.push(response),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(fresh, 1);
    assert!(replays.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(count(&path, "SELECT COUNT(*) FROM orders"), 1);
}

#[tokio::test]
async fn an_answer_too_large_to_store_is_refused_and_rolled_back() {
    let dir = tempfile::tempdir().expect("dir");
    let (store, path) = open(&dir).await;
    let huge = |_: &idempotent_fetch_server::protocol::KeyedRequest| idempotent_fetch_server::protocol::Work {
        order: None,
        response: idempotent_fetch_server::protocol::StoredResponse {
            status: 200,
            headers: Vec::new(),
            body: "x".repeat(idempotent_fetch_server::protocol::MAX_STORED_BODY_BYTES + 1),
        },
    };
    let result = store.process(keyed_request("demo", "big", MUGS, 1_000), ProcessOptions::default(), huge).await;
    assert!(matches!(result, Err(StoreError::ResponseTooLarge(_))), "{result:?}");
    assert_eq!(count(&path, "SELECT COUNT(*) FROM idempotency_records"), 0);
    // The key stays usable.
    let retry = store.process(keyed_request("demo", "big", MUGS, 1_001), ProcessOptions::default(), place_order).await;
    assert!(matches!(retry, Ok(Outcome::Fresh(_))), "{retry:?}");
}
