//! The inbox on real SQLite files and (`#[ignore]`d, `-- --ignored`) a throwaway PostgreSQL cluster: each
//! message re-delivered is applied once with the same answer, concurrent deliveries of one id apply it once,
//! a failing work leaves no record, and the sweep removes expired records.

#[path = "../../tests/common/pg_cluster.rs"]
mod pg_cluster;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use idempotent_endpoint::inbox::{self, Received, SqliteInbox};
use idempotent_endpoint::postgres::WorkFuture;
use idempotent_endpoint::{RunError, StoreError, StoredResponse};
use pg_cluster::{bin_dir, Cluster};
use rusqlite::{Connection, Transaction, TransactionBehavior};

const HOUR: Duration = Duration::from_secs(3600);
const APPLIED_TABLE: &str = "CREATE TABLE IF NOT EXISTS applied (seq INTEGER PRIMARY KEY, message_id TEXT NOT NULL)";

/// The app's work: one `applied` row per application, answered with the row's sequence number, so two
/// applications would give two different answers.
fn apply(tx: &Transaction<'_>, message_id: &str) -> Result<StoredResponse, String> {
    tx.execute("INSERT INTO applied (message_id) VALUES (?1)", [message_id]).map_err(|e| e.to_string())?;
    let seq = tx.last_insert_rowid();
    Ok(StoredResponse::json(StatusCode::CREATED, &serde_json::json!({ "id": message_id, "seq": seq })))
}

async fn open(path: &std::path::Path) -> SqliteInbox {
    let inbox = SqliteInbox::open(path, HOUR).expect("open");
    inbox.with_conn(|c| Ok(c.execute_batch(APPLIED_TABLE)?)).await.expect("schema");
    inbox
}

async fn count(inbox: &SqliteInbox, sql: &'static str) -> i64 {
    inbox.with_conn(move |c| Ok(c.query_row(sql, [], |r| r.get(0))?)).await.expect("count")
}

#[tokio::test]
async fn each_message_delivered_three_times_is_applied_once_with_one_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inbox = open(&dir.path().join("inbox.sqlite")).await;
    let ids: Vec<String> = (0..5).map(|i| format!("message-{i}")).collect();
    let mut answers = std::collections::BTreeMap::<String, Vec<Received>>::new();
    // Interleaved, as an outbox re-sending after lost answers would: every message, three rounds.
    for _round in 0..3 {
        for id in &ids {
            let message_id = id.clone();
            let received = inbox
                .receive("sender".to_owned(), id.clone(), None, move |tx| apply(tx, &message_id))
                .await
                .expect("receive");
            answers.entry(id.clone()).or_default().push(received);
        }
    }
    assert_eq!(count(&inbox, "SELECT COUNT(*) FROM applied").await, 5);
    for (id, got) in &answers {
        assert!(matches!(got[0], Received::Applied(_)), "{id}: {got:?}");
        assert!(got[1..].iter().all(Received::is_duplicate), "{id}: {got:?}");
        assert!(got.iter().all(|r| r.answer() == got[0].answer()), "{id}: {got:?}");
    }
    // The same id from another source is another message.
    let other = inbox.receive("another".to_owned(), ids[0].clone(), None, |tx| apply(tx, "x")).await.expect("receive");
    assert!(matches!(other, Received::Applied(_)));

    // The free function in a transaction of the app's own, on a second connection to the same file, sees the
    // same records.
    let mut conn = Connection::open(dir.path().join("inbox.sqlite")).expect("second connection");
    conn.busy_timeout(Duration::from_secs(10)).expect("busy timeout");
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).expect("begin");
    let again = inbox::receive_sqlite(&tx, "sender", &ids[1], None, HOUR, |tx| apply(tx, "never")).expect("receive");
    tx.commit().expect("commit");
    assert_eq!(again, Received::Duplicate(answers[&ids[1]][0].answer().clone()));
    assert_eq!(count(&inbox, "SELECT COUNT(*) FROM applied").await, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_deliveries_of_one_id_apply_it_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("inbox.sqlite");
    // Two connections (as two receiver processes would have): SQLite's write lock orders them.
    let inboxes = [open(&path).await, open(&path).await];
    let mut deliveries = tokio::task::JoinSet::new();
    for i in 0..8 {
        let inbox = inboxes[i % 2].clone();
        deliveries.spawn(async move {
            inbox
                .receive("sender".to_owned(), "the-one".to_owned(), None, |tx| {
                    // Slow enough that the other deliveries arrive while it is at work.
                    std::thread::sleep(Duration::from_millis(50));
                    apply(tx, "the-one")
                })
                .await
                .expect("receive")
        });
    }
    let got = deliveries.join_all().await;
    assert_eq!(got.iter().filter(|r| !r.is_duplicate()).count(), 1, "{got:?}");
    assert!(got.iter().all(|r| r.answer() == got[0].answer()), "{got:?}");
    assert_eq!(count(&inboxes[0], "SELECT COUNT(*) FROM applied").await, 1);
}

#[tokio::test]
async fn a_failing_work_leaves_no_record_and_a_redelivery_applies_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inbox = open(&dir.path().join("inbox.sqlite")).await;
    let failed = inbox
        .receive("sender".to_owned(), "m".to_owned(), None, |tx| {
            apply(tx, "m")?;
            Err::<StoredResponse, _>("the work failed after writing".to_owned())
        })
        .await;
    assert!(matches!(failed, Err(RunError::Work(_))), "{failed:?}");
    assert_eq!(count(&inbox, "SELECT COUNT(*) FROM applied").await, 0);
    assert_eq!(count(&inbox, "SELECT COUNT(*) FROM inbox_messages").await, 0);
    let again = inbox.receive("sender".to_owned(), "m".to_owned(), None, |tx| apply(tx, "m")).await.expect("receive");
    assert!(matches!(again, Received::Applied(_)), "{again:?}");
    assert_eq!(count(&inbox, "SELECT COUNT(*) FROM applied").await, 1);

    // In the app's own transaction, what it wrote before the delivery stays when it commits after a failure.
    let mut conn = Connection::open(dir.path().join("inbox.sqlite")).expect("second connection");
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).expect("begin");
    tx.execute("INSERT INTO applied (message_id) VALUES ('before')", []).expect("insert");
    let failed = inbox::receive_sqlite(&tx, "sender", "n", None, HOUR, |tx| {
        apply(tx, "n")?;
        Err::<StoredResponse, _>("failed".to_owned())
    });
    assert!(matches!(failed, Err(RunError::Work(_))), "{failed:?}");
    tx.commit().expect("commit");
    let rows: Vec<String> = {
        let mut stmt = conn.prepare("SELECT message_id FROM applied ORDER BY seq").expect("prepare");
        stmt.query_map([], |r| r.get(0)).expect("query").collect::<Result<_, _>>().expect("rows")
    };
    assert_eq!(rows, ["m", "before"]);
    assert_eq!(count(&inbox, "SELECT COUNT(*) FROM inbox_messages WHERE message_id = 'n'").await, 0);

    // An answer too large to keep is refused before anything is recorded.
    let big = inbox
        .receive("sender".to_owned(), "big".to_owned(), None, |tx| {
            apply(tx, "big")?;
            Ok::<_, String>(StoredResponse::json(
                StatusCode::OK,
                &"x".repeat(idempotent_endpoint::MAX_STORED_BODY_BYTES),
            ))
        })
        .await;
    assert!(matches!(big, Err(RunError::Store(StoreError::ResponseTooLarge(_)))), "{big:?}");
    assert_eq!(count(&inbox, "SELECT COUNT(*) FROM applied WHERE message_id = 'big'").await, 0);
    let empty = inbox.receive("sender".to_owned(), String::new(), None, |tx| apply(tx, "")).await;
    assert!(matches!(empty, Err(RunError::Store(StoreError::InboxId(..)))), "{empty:?}");
}

#[tokio::test]
async fn the_sweep_removes_expired_records_and_an_expired_id_is_new_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inbox = open(&dir.path().join("inbox.sqlite")).await;
    for id in ["old-1", "old-2", "new"] {
        inbox.receive("sender".to_owned(), id.to_owned(), None, move |tx| apply(tx, id)).await.expect("receive");
    }
    // Two records from before the retention window.
    inbox
        .with_conn(|c| {
            Ok(c.execute(
                "UPDATE inbox_messages SET received_at = received_at - 7200 WHERE message_id LIKE 'old-%'",
                [],
            )?)
        })
        .await
        .expect("age");
    // An expired record counts as absent even before the sweep.
    let again =
        inbox.receive("sender".to_owned(), "old-1".to_owned(), None, |tx| apply(tx, "old-1")).await.expect("receive");
    assert!(matches!(again, Received::Applied(_)), "{again:?}");
    assert_eq!(inbox.sweep().await.expect("sweep"), 1, "old-2 only: old-1 was recorded again");
    assert_eq!(count(&inbox, "SELECT COUNT(*) FROM inbox_messages").await, 2);
    assert_eq!(count(&inbox, "SELECT COUNT(*) FROM applied").await, 4, "the app's rows are never swept");
    let new = inbox.receive("sender".to_owned(), "new".to_owned(), None, |tx| apply(tx, "new")).await.expect("receive");
    assert!(new.is_duplicate());
    assert_eq!(inbox.sweep().await.expect("sweep"), 0);
}

// PostgreSQL.

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(connection);
    client
}

async fn pg_count(client: &tokio_postgres::Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).await.expect("count").get(0)
}

/// The app's work on PostgreSQL: one `applied` row, answered with its sequence number, after `sleep`.
fn pg_apply<'t>(
    tx: &'t tokio_postgres::Transaction<'t>,
    message_id: String,
    sleep: Duration,
) -> WorkFuture<'t, String> {
    Box::pin(async move {
        let row = tx
            .query_one("INSERT INTO applied (message_id) VALUES ($1) RETURNING seq", &[&message_id])
            .await
            .map_err(|e| e.to_string())?;
        let seq: i64 = row.get(0);
        tokio::time::sleep(sleep).await;
        Ok(StoredResponse::json(StatusCode::CREATED, &serde_json::json!({ "id": message_id, "seq": seq })))
    })
}

/// One delivery in its own transaction on `client`.
async fn pg_receive(
    client: &mut tokio_postgres::Client,
    message_id: &str,
    sleep: Duration,
) -> Result<Received, RunError<String>> {
    let tx = client.transaction().await.map_err(StoreError::from)?;
    let id = message_id.to_owned();
    let received = inbox::receive_postgres(&tx, "sender", message_id, None, HOUR, |tx| pg_apply(tx, id, sleep)).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(received)
}

async fn pg_setup(cluster: &Cluster) -> tokio_postgres::Client {
    let client = connect(&cluster.url("postgres")).await;
    inbox::install_postgres(&client).await.expect("install");
    client
        .batch_execute("CREATE TABLE applied (seq BIGSERIAL PRIMARY KEY, message_id TEXT NOT NULL)")
        .await
        .expect("schema");
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL binaries: cargo test -p idempotent-endpoint --test inbox -- --ignored"]
async fn postgres_each_message_delivered_three_times_is_applied_once_and_a_failure_leaves_no_record() {
    let cluster = Cluster::start(bin_dir(), Cluster::FAST).expect("start a throwaway PostgreSQL cluster");
    let mut client = pg_setup(&cluster).await;
    let mut first = std::collections::BTreeMap::new();
    for _round in 0..3 {
        for i in 0..5 {
            let id = format!("message-{i}");
            let received = pg_receive(&mut client, &id, Duration::ZERO).await.expect("receive");
            let answer = first.entry(id.clone()).or_insert_with(|| {
                assert!(!received.is_duplicate(), "{id}: {received:?}");
                received.answer().clone()
            });
            assert_eq!(received.answer(), answer, "{id}");
        }
    }
    assert_eq!(pg_count(&client, "SELECT COUNT(*) FROM applied").await, 5);
    assert_eq!(pg_count(&client, "SELECT COUNT(*) FROM inbox_messages").await, 5);

    // A failing work (here a failing statement, which aborts the transaction) leaves no record and leaves the
    // caller's transaction usable: what it wrote before commits.
    let tx = client.transaction().await.expect("begin");
    tx.execute("INSERT INTO applied (message_id) VALUES ('before')", &[]).await.expect("insert");
    let failed = inbox::receive_postgres(&tx, "sender", "failing", None, HOUR, |tx| {
        Box::pin(async move {
            tx.execute("INSERT INTO applied (message_id) VALUES ('failing')", &[]).await.map_err(|e| e.to_string())?;
            tx.execute("INSERT INTO no_such_table VALUES (1)", &[]).await.map_err(|e| e.to_string())?;
            Ok::<_, String>(StoredResponse::json(StatusCode::OK, &"unreachable"))
        })
    })
    .await;
    assert!(matches!(failed, Err(RunError::Work(_))), "{failed:?}");
    tx.commit().await.expect("commit after a failed delivery");
    assert_eq!(pg_count(&client, "SELECT COUNT(*) FROM applied WHERE message_id = 'before'").await, 1);
    assert_eq!(pg_count(&client, "SELECT COUNT(*) FROM applied WHERE message_id = 'failing'").await, 0);
    assert_eq!(pg_count(&client, "SELECT COUNT(*) FROM inbox_messages WHERE message_id = 'failing'").await, 0);
    let again = pg_receive(&mut client, "failing", Duration::ZERO).await.expect("receive");
    assert!(matches!(again, Received::Applied(_)), "{again:?}");

    // The sweep: two records aged past the retention go; the rest stay.
    client
        .execute(
            "UPDATE inbox_messages SET received_at = received_at - 7200 WHERE message_id IN ('message-0', 'message-1')",
            &[],
        )
        .await
        .expect("age");
    assert_eq!(inbox::sweep_postgres(&client, HOUR).await.expect("sweep"), 2);
    assert_eq!(pg_count(&client, "SELECT COUNT(*) FROM inbox_messages").await, 4);
    assert_eq!(pg_count(&client, "SELECT COUNT(*) FROM applied").await, 7, "the app's rows are never swept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL binaries: cargo test -p idempotent-endpoint --test inbox -- --ignored"]
async fn postgres_concurrent_deliveries_of_one_id_apply_it_once() {
    let cluster = Cluster::start(bin_dir(), Cluster::FAST).expect("start a throwaway PostgreSQL cluster");
    let client = pg_setup(&cluster).await;
    let url = Arc::new(cluster.url("postgres"));
    let mut deliveries = tokio::task::JoinSet::new();
    for _ in 0..6 {
        let url = Arc::clone(&url);
        deliveries.spawn(async move {
            let mut client = connect(&url).await;
            // The first at work holds its uncommitted record; the others wait on it, then read its answer.
            pg_receive(&mut client, "the-one", Duration::from_millis(300)).await.expect("receive")
        });
    }
    let got = deliveries.join_all().await;
    assert_eq!(got.iter().filter(|r| !r.is_duplicate()).count(), 1, "{got:?}");
    assert!(got.iter().all(|r| r.answer() == got[0].answer()), "{got:?}");
    assert_eq!(pg_count(&client, "SELECT COUNT(*) FROM applied").await, 1);

    // A first delivery that rolls back lets the waiting one do the work.
    let mut a = connect(&url).await;
    let mut b = connect(&url).await;
    let tx = a.transaction().await.expect("begin");
    let first = inbox::receive_postgres(&tx, "sender", "rolled-back", None, HOUR, |tx| {
        pg_apply(tx, "rolled-back".to_owned(), Duration::ZERO)
    })
    .await
    .expect("receive");
    assert!(matches!(first, Received::Applied(_)));
    let second = tokio::spawn(async move { pg_receive(&mut b, "rolled-back", Duration::ZERO).await.expect("receive") });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!second.is_finished(), "the second delivery waits for the first's transaction");
    tx.rollback().await.expect("rollback");
    let second = second.await.expect("join");
    assert!(matches!(second, Received::Applied(_)), "{second:?}");
    assert_eq!(pg_count(&client, "SELECT COUNT(*) FROM applied WHERE message_id = 'rolled-back'").await, 1);
}
