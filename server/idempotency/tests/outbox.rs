//! The outbox worker on a real SQLite file and on a throwaway PostgreSQL cluster: the concurrency bound,
//! ordering keys under concurrency, batch marks with failed deliveries, the pipelined `run` past a slow
//! delivery, a worker dropped mid-pass, the backlog. Each scenario is one function run on both databases.
//!
//! The PostgreSQL tests are `#[ignore]`d (they need PostgreSQL's binaries):
//! `cargo test -p idempotent-endpoint --test outbox -- --ignored`.

#[path = "../../tests/common/pg_cluster.rs"]
mod pg_cluster;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use idempotent_endpoint::outbox::{self, Backlog, Delivery, Message, OutboxStore, Worker};
use idempotent_endpoint::sqlite::SqliteKeys;
use tokio_postgres::{Client, NoTls};

/// One of the two databases, with what the scenarios need besides the worker's store.
enum Db {
    /// The store and its directory, which lives as long as the test.
    Sqlite(SqliteKeys, #[allow(dead_code)] tempfile::TempDir),
    Postgres {
        writer: tokio::sync::Mutex<Client>,
        store: Arc<Client>,
        _cluster: Box<pg_cluster::Cluster>,
    },
}

async fn sqlite() -> Db {
    let dir = tempfile::tempdir().expect("temp dir");
    let keys = SqliteKeys::open(dir.path().join("outbox.sqlite"), Duration::from_secs(3600)).expect("open");
    Db::Sqlite(keys, dir)
}

async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.expect("connect to test cluster");
    tokio::spawn(connection);
    client
}

async fn postgres() -> Db {
    let cluster = pg_cluster::Cluster::start(pg_cluster::bin_dir(), pg_cluster::Cluster::FAST)
        .expect("start a throwaway PostgreSQL cluster");
    let url = cluster.url("postgres");
    let writer = connect(&url).await;
    idempotent_endpoint::postgres::install(&writer).await.expect("install");
    let store = Arc::new(connect(&url).await);
    Db::Postgres { writer: tokio::sync::Mutex::new(writer), store, _cluster: Box::new(cluster) }
}

/// A message whose payload is its name (`"k1-3"`: the fourth with key `k1`).
fn message(name: &str) -> Message {
    Message::new("test", &name).expect("message")
}

impl Db {
    /// Enqueues `(name, ordering key)` pairs in this order, one transaction each (as handlers do).
    async fn enqueue(&self, messages: &[(String, Option<String>)]) {
        for (name, key) in messages {
            let m = message(name);
            match self {
                Db::Sqlite(keys, _) => {
                    let key = key.clone();
                    keys.with_conn(move |conn| {
                        let tx = conn.transaction()?;
                        match &key {
                            Some(key) => outbox::enqueue_ordered_sqlite(&tx, &m, key)?,
                            None => outbox::enqueue_sqlite(&tx, &m)?,
                        }
                        Ok(tx.commit()?)
                    })
                    .await
                    .expect("enqueue");
                }
                Db::Postgres { writer, .. } => {
                    let mut writer = writer.lock().await;
                    let tx = writer.transaction().await.expect("begin");
                    match key {
                        Some(key) => outbox::enqueue_ordered_postgres(&tx, &m, key).await.expect("enqueue"),
                        None => outbox::enqueue_postgres(&tx, &m).await.expect("enqueue"),
                    }
                    tx.commit().await.expect("commit");
                }
            }
        }
    }

    /// One number from SQL that reads the same on both databases.
    async fn scalar(&self, sql: &'static str) -> i64 {
        match self {
            Db::Sqlite(keys, _) => keys.with_conn(move |c| Ok(c.query_row(sql, [], |r| r.get(0))?)).await.expect(sql),
            Db::Postgres { store, .. } => store.query_one(sql, &[]).await.expect(sql).get(0),
        }
    }

    async fn execute(&self, sql: &'static str) {
        match self {
            Db::Sqlite(keys, _) => keys.with_conn(move |c| Ok(c.execute_batch(sql)?)).await.expect(sql),
            Db::Postgres { store, .. } => store.batch_execute(sql).await.expect(sql),
        }
    }

    /// Every message's id by its name (the payload).
    async fn ids_by_name(&self) -> HashMap<String, String> {
        const SQL: &str = "SELECT id, payload FROM outbox_messages";
        let rows: Vec<(String, String)> = match self {
            Db::Sqlite(keys, _) => keys
                .with_conn(|c| {
                    let mut stmt = c.prepare(SQL)?;
                    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
                    Ok(rows.collect::<Result<Vec<_>, _>>()?)
                })
                .await
                .expect("ids"),
            Db::Postgres { store, .. } => {
                store.query(SQL, &[]).await.expect("ids").iter().map(|r| (r.get(0), r.get(1))).collect()
            }
        };
        rows.into_iter().map(|(id, payload)| (serde_json::from_str(&payload).expect("payload"), id)).collect()
    }

    async fn deliveries(&self, ids: &[&str]) -> HashMap<String, Delivery> {
        let ids: Vec<String> = ids.iter().map(|id| (*id).to_owned()).collect();
        match self {
            Db::Sqlite(keys, _) => {
                keys.with_conn(move |c| outbox::deliveries_sqlite(c, &ids)).await.expect("deliveries")
            }
            Db::Postgres { store, .. } => outbox::deliveries_postgres(store, &ids).await.expect("deliveries"),
        }
    }

    async fn backlog(&self) -> Backlog {
        match self {
            Db::Sqlite(keys, _) => keys.with_conn(|c| outbox::backlog_sqlite(c)).await.expect("backlog"),
            Db::Postgres { store, .. } => outbox::backlog_postgres(store).await.expect("backlog"),
        }
    }
}

/// The worker's store for `db`, handed to a scenario.
macro_rules! on_both {
    ($scenario:ident, $sqlite_test:ident, $postgres_test:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $sqlite_test() {
            let db = sqlite().await;
            let Db::Sqlite(keys, _) = &db else { unreachable!() };
            let store = keys.clone();
            $scenario(&db, store).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        #[ignore = "needs PostgreSQL binaries: cargo test -p idempotent-endpoint --test outbox -- --ignored"]
        async fn $postgres_test() {
            let db = postgres().await;
            let Db::Postgres { store, .. } = &db else { unreachable!() };
            let store = Arc::clone(store);
            $scenario(&db, store).await;
        }
    };
}

/// Retries after a millisecond or two, so failed messages come back within a test.
fn quick(concurrency: usize, batch: i64) -> Worker {
    Worker {
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(2),
        concurrency,
        batch,
        ..Worker::default()
    }
}

/// In-flight deliveries now and at most, overall and per ordering key, and every delivery in order.
#[derive(Default)]
struct Probe {
    in_flight: AtomicUsize,
    peak: AtomicUsize,
    per_key: Mutex<HashMap<String, usize>>,
    overlaps: AtomicUsize,
    delivered: Mutex<Vec<String>>,
    calls: Mutex<HashMap<String, usize>>,
}

impl Probe {
    /// A delivery of `name` that takes `hold`, fails when `fail` says so, and records what it saw.
    async fn deliver(&self, name: String, hold: Duration, fail: bool) -> Result<(), String> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        *self.calls.lock().expect("lock").entry(name.clone()).or_default() += 1;
        let key = name.split_once('-').map(|(k, _)| k.to_owned()).unwrap_or_default();
        {
            let mut per_key = self.per_key.lock().expect("lock");
            let n = per_key.entry(key.clone()).or_default();
            *n += 1;
            if *n > 1 && key.starts_with('k') {
                self.overlaps.fetch_add(1, Ordering::SeqCst);
            }
        }
        tokio::time::sleep(hold).await;
        *self.per_key.lock().expect("lock").entry(key).or_default() -= 1;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if fail {
            return Err("receiver refused".to_owned());
        }
        self.delivered.lock().expect("lock").push(name);
        Ok(())
    }
}

fn name_of(m: &Message) -> String {
    serde_json::from_str(&m.payload).expect("payload")
}

/// Runs passes until `want` messages are delivered or 10 s pass.
async fn drain<S: OutboxStore>(worker: &Worker, store: &S, probe: &Arc<Probe>, fail_first: bool, want: usize) {
    let deliver = |m: Message| {
        let probe = Arc::clone(probe);
        async move {
            let name = name_of(&m);
            let first = !probe.calls.lock().expect("lock").contains_key(&name);
            let fail = fail_first && first && name.ends_with(['1', '3', '5', '7', '9']);
            probe.deliver(name, Duration::from_millis(5), fail).await
        }
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while probe.delivered.lock().expect("lock").len() < want {
        assert!(Instant::now() < deadline, "not drained in 10 s");
        let pass = worker.deliver_once(store, &deliver).await.expect("pass");
        if pass.claimed == 0 {
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
    }
}

async fn concurrency_is_bounded<S: OutboxStore>(db: &Db, store: S) {
    let names: Vec<_> = (0..40).map(|i| (format!("u-{i}"), None)).collect();
    db.enqueue(&names).await;
    let probe = Arc::new(Probe::default());
    let deliver = |m: Message| {
        let probe = Arc::clone(&probe);
        async move { probe.deliver(name_of(&m), Duration::from_millis(20), false).await }
    };
    let pass = quick(4, 40).deliver_once(&store, &deliver).await.expect("pass");
    assert_eq!((pass.claimed, pass.delivered, pass.failed), (40, 40, 0));
    assert_eq!(probe.peak.load(Ordering::SeqCst), 4, "four deliveries at once, never more");
    assert_eq!(db.scalar("SELECT count(*) FROM outbox_messages WHERE delivered_at IS NOT NULL").await, 40);
}
on_both!(concurrency_is_bounded, sqlite_concurrency_is_bounded, postgres_concurrency_is_bounded);

/// `run` claims again while one delivery of a claim is still slow, claims back to back without the poll
/// sleep while claims find messages, writes every mark, and stops at once when told.
async fn run_delivers_past_a_slow_delivery_without_polling<S: OutboxStore>(db: &Db, store: S) {
    let mut names = vec![("slow-0".to_owned(), None)];
    names.extend((0..30).map(|i| (format!("u-{i}"), None)));
    db.enqueue(&names).await;
    let probe = Arc::new(Probe::default());
    let deliver = {
        let probe = Arc::clone(&probe);
        move |m: Message| {
            let probe = Arc::clone(&probe);
            async move {
                let name = name_of(&m);
                let hold = if name == "slow-0" { Duration::from_secs(5) } else { Duration::from_millis(5) };
                probe.deliver(name, hold, false).await
            }
        }
    };
    // A poll longer than the test: any sleep between claims would show.
    let worker = Worker { poll: Duration::from_secs(30), ..quick(4, 4) };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let running = tokio::spawn(worker.run(store, deliver, stopped));
    let deadline = Instant::now() + Duration::from_secs(15);
    while db.scalar("SELECT count(*) FROM outbox_messages WHERE delivered_at IS NOT NULL").await < 31 {
        assert!(Instant::now() < deadline, "not all delivered and marked in 15 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let order = probe.delivered.lock().expect("lock").clone();
    assert_eq!(order.last().map(String::as_str), Some("slow-0"), "the others went on past the slow one: {order:?}");
    assert!(probe.calls.lock().expect("lock").values().all(|&n| n == 1), "each message sent once");
    assert!(probe.peak.load(Ordering::SeqCst) <= 4, "never more than four at once");
    stop.send(true).expect("stop");
    tokio::time::timeout(Duration::from_secs(2), running).await.expect("stops at once").expect("run");
}
on_both!(
    run_delivers_past_a_slow_delivery_without_polling,
    sqlite_run_delivers_past_a_slow_delivery_without_polling,
    postgres_run_delivers_past_a_slow_delivery_without_polling
);

async fn an_ordering_key_is_delivered_in_order_under_concurrency<S: OutboxStore>(db: &Db, store: S) {
    // Three keys interleaved with unordered messages, as several handlers would enqueue them.
    let mut names = Vec::new();
    for i in 0..10 {
        for key in ["k1", "k2", "k3"] {
            names.push((format!("{key}-{i}"), Some(key.to_owned())));
        }
        names.push((format!("u-{i}"), None));
    }
    db.enqueue(&names).await;
    let probe = Arc::new(Probe::default());
    // Odd-numbered messages fail once: a failed head holds back the messages behind it.
    drain(&quick(8, 16), &store, &probe, true, names.len()).await;
    assert_eq!(probe.overlaps.load(Ordering::SeqCst), 0, "one delivery at a time per key");
    assert!(probe.peak.load(Ordering::SeqCst) > 1, "deliveries overlapped");
    let delivered = probe.delivered.lock().expect("lock").clone();
    for key in ["k1", "k2", "k3"] {
        let order: Vec<_> = delivered.iter().filter(|n| n.starts_with(&format!("{key}-"))).cloned().collect();
        let expected: Vec<_> = (0..10).map(|i| format!("{key}-{i}")).collect();
        assert_eq!(order, expected, "{key} in enqueue order");
    }
    assert_eq!(delivered.len(), names.len(), "each delivered once: {delivered:?}");
}
on_both!(
    an_ordering_key_is_delivered_in_order_under_concurrency,
    sqlite_an_ordering_key_is_delivered_in_order_under_concurrency,
    postgres_an_ordering_key_is_delivered_in_order_under_concurrency
);

async fn batch_marks_retry_the_failed_and_never_resend_the_delivered<S: OutboxStore>(db: &Db, store: S) {
    let names: Vec<_> = (0..20).map(|i| (format!("u-{i}"), None)).collect();
    db.enqueue(&names).await;
    let probe = Arc::new(Probe::default());
    let worker =
        Worker { base_delay: Duration::from_millis(300), max_delay: Duration::from_millis(300), ..quick(8, 64) };
    let deliver = |m: Message| {
        let probe = Arc::clone(&probe);
        async move {
            let name = name_of(&m);
            let first = !probe.calls.lock().expect("lock").contains_key(&name);
            let fail = first && name.ends_with(['1', '3', '5', '7', '9']);
            probe.deliver(name, Duration::from_millis(2), fail).await
        }
    };
    let pass = worker.deliver_once(&store, &deliver).await.expect("pass");
    assert_eq!((pass.claimed, pass.delivered, pass.failed), (20, 10, 10));
    assert_eq!(db.scalar("SELECT count(*) FROM outbox_messages WHERE delivered_at IS NOT NULL").await, 10);
    // The failed ones are released (no claim) and wait for their retry; none is due yet.
    assert_eq!(
        db.scalar("SELECT count(*) FROM outbox_messages WHERE delivered_at IS NULL AND claimed_until = 0 AND next_attempt_at > 0")
            .await,
        10
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while probe.delivered.lock().expect("lock").len() < 20 {
        assert!(Instant::now() < deadline, "the failed ones were not retried");
        tokio::time::sleep(Duration::from_millis(50)).await;
        worker.deliver_once(&store, &deliver).await.expect("pass");
    }
    let calls = probe.calls.lock().expect("lock").clone();
    for (name, n) in &calls {
        let odd = name.ends_with(['1', '3', '5', '7', '9']);
        assert_eq!(*n, if odd { 2 } else { 1 }, "{name}: a delivered message is never sent again");
    }
    assert_eq!(calls.len(), 20);
    assert_eq!(db.scalar("SELECT count(*) FROM outbox_messages WHERE delivered_at IS NULL").await, 0);
}
on_both!(
    batch_marks_retry_the_failed_and_never_resend_the_delivered,
    sqlite_batch_marks_retry_the_failed_and_never_resend_the_delivered,
    postgres_batch_marks_retry_the_failed_and_never_resend_the_delivered
);

async fn a_worker_dropped_mid_pass_leaves_its_messages_to_the_next_after_the_lease<S: OutboxStore>(db: &Db, store: S) {
    let names: Vec<_> = (0..6).map(|i| (format!("u-{i}"), None)).collect();
    db.enqueue(&names).await;
    let lease = Duration::from_millis(1500);
    let worker = Worker { lease, ..quick(3, 6) };
    // The first worker's deliveries hang (the process is about to die); its task is dropped mid-pass.
    let started = Arc::new(AtomicUsize::new(0));
    let claimed_at = Instant::now();
    let hung = {
        let (store, started) = (store.clone(), Arc::clone(&started));
        let deliver = move |_m: Message| {
            started.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<Result<(), String>>()
        };
        let (_stop, stopped) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            let _stop = _stop;
            worker.run(store, deliver, stopped).await
        })
    };
    while started.load(Ordering::SeqCst) < 3 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    hung.abort();
    let _ = hung.await;
    assert_eq!(db.scalar("SELECT count(*) FROM outbox_messages WHERE delivered_at IS NOT NULL").await, 0);
    let probe = Arc::new(Probe::default());
    let deliver = |m: Message| {
        let probe = Arc::clone(&probe);
        async move { probe.deliver(name_of(&m), Duration::from_millis(1), false).await }
    };
    // While the claim holds, nobody else takes those messages.
    assert_eq!(worker.deliver_once(&store, &deliver).await.expect("pass").claimed, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while probe.delivered.lock().expect("lock").len() < 6 {
        assert!(Instant::now() < deadline, "the dropped worker's messages were never delivered");
        worker.deliver_once(&store, &deliver).await.expect("pass");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(claimed_at.elapsed() >= lease, "delivered again only after the claim ran out");
    assert_eq!(probe.calls.lock().expect("lock").len(), 6);
    assert_eq!(db.scalar("SELECT count(*) FROM outbox_messages WHERE delivered_at IS NULL").await, 0);
    assert_eq!(
        db.scalar("SELECT CAST(sum(attempts) AS BIGINT) FROM outbox_messages").await,
        12,
        "one lost attempt each"
    );
}
on_both!(
    a_worker_dropped_mid_pass_leaves_its_messages_to_the_next_after_the_lease,
    sqlite_a_worker_dropped_mid_pass_leaves_its_messages_to_the_next_after_the_lease,
    postgres_a_worker_dropped_mid_pass_leaves_its_messages_to_the_next_after_the_lease
);

async fn the_backlog_counts_undelivered_messages_and_the_oldest_age<S: OutboxStore>(db: &Db, store: S) {
    assert_eq!(db.backlog().await, Backlog { undelivered: 0, oldest_age: None });
    let names: Vec<_> = (0..3).map(|i| (format!("u-{i}"), None)).collect();
    db.enqueue(&names).await;
    db.execute("UPDATE outbox_messages SET created_at = created_at - 100 WHERE payload = '\"u-1\"'").await;
    let backlog = db.backlog().await;
    assert_eq!(backlog.undelivered, 3);
    let age = backlog.oldest_age.expect("an age");
    assert!((Duration::from_secs(100)..Duration::from_secs(110)).contains(&age), "{age:?}");
    // A message waiting for its retry is still in the backlog; a delivered one is not.
    let deliver = |m: Message| async move {
        if name_of(&m) == "u-2" {
            Err("refused".to_owned())
        } else {
            Ok(())
        }
    };
    let worker = Worker { base_delay: Duration::from_secs(60), ..quick(4, 64) };
    let pass = worker.deliver_once(&store, &deliver).await.expect("pass");
    assert_eq!((pass.delivered, pass.failed), (2, 1));
    let backlog = db.backlog().await;
    assert_eq!(backlog.undelivered, 1);
    assert!(backlog.oldest_age.expect("an age") < Duration::from_secs(10), "{backlog:?}");
    // Each message's own delivery, by id: the refused one waits, an unknown id is absent.
    let ids: HashMap<String, String> = db.ids_by_name().await;
    let (id0, id2) = (&ids["u-0"], &ids["u-2"]);
    let deliveries = db.deliveries(&[id0, id2, "no-such-message"]).await;
    assert_eq!(deliveries.len(), 2, "{deliveries:?}");
    assert!(matches!(deliveries[id0], Delivery::Delivered(at) if at > 0), "{deliveries:?}");
    assert_eq!(deliveries[id2], Delivery::Waiting);
}
on_both!(
    the_backlog_counts_undelivered_messages_and_the_oldest_age,
    sqlite_the_backlog_counts_undelivered_messages_and_the_oldest_age,
    postgres_the_backlog_counts_undelivered_messages_and_the_oldest_age
);

/// The outbox table as the first version made it, before `ordering_key` and `traceparent`, with one
/// undelivered message.
const OLD_TABLE: &str = "
CREATE TABLE outbox_messages (
    id              TEXT    PRIMARY KEY,
    topic           TEXT    NOT NULL,
    payload         TEXT    NOT NULL,
    created_at      BIGINT  NOT NULL,
    attempts        BIGINT  NOT NULL DEFAULT 0,
    next_attempt_at BIGINT  NOT NULL DEFAULT 0,
    claimed_until   BIGINT  NOT NULL DEFAULT 0,
    delivered_at    BIGINT  NULL
);
INSERT INTO outbox_messages (id, topic, payload, created_at) VALUES ('old', 'test', '\"old\"', 1);
";

/// A message enqueued with a trace context of its own.
fn traced_message() -> Message {
    Message {
        traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned()),
        ..message("new")
    }
}

/// Claims every due message of `store`: each message's name and `traceparent`, by name.
async fn claimed_traces<S: OutboxStore>(store: &S) -> HashMap<String, Option<String>> {
    let claimed = store.claim(i64::MAX - 1, i64::MAX, 10).await.expect("claim");
    claimed.into_iter().map(|c| (name_of(&c.message), c.message.traceparent)).collect()
}

#[tokio::test]
async fn sqlite_install_upgrades_an_old_outbox_table() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("old.sqlite");
    idempotent_endpoint::sqlite::rusqlite::Connection::open(&path)
        .expect("old database")
        .execute_batch(OLD_TABLE)
        .expect("old table");
    let keys = SqliteKeys::open(&path, Duration::from_secs(3600)).expect("open upgrades the table");
    let new = traced_message();
    keys.with_conn(move |conn| {
        let tx = conn.transaction()?;
        outbox::enqueue_ordered_sqlite(&tx, &new, "k")?;
        Ok(tx.commit()?)
    })
    .await
    .expect("enqueue into the upgraded table");
    let traces = claimed_traces(&keys).await;
    assert_eq!(traces["old"], None);
    assert_eq!(traces["new"], traced_message().traceparent);
    // Opening again finds the columns and adds nothing.
    drop(keys);
    SqliteKeys::open(&path, Duration::from_secs(3600)).expect("open again");
}

#[tokio::test]
#[ignore = "needs PostgreSQL binaries: cargo test -p idempotent-endpoint --test outbox -- --ignored"]
async fn postgres_install_upgrades_an_old_outbox_table() {
    let cluster = pg_cluster::Cluster::start(pg_cluster::bin_dir(), pg_cluster::Cluster::FAST).expect("cluster");
    let client = connect(&cluster.url("postgres")).await;
    client.batch_execute(OLD_TABLE).await.expect("old table");
    idempotent_endpoint::postgres::install(&client).await.expect("install upgrades the table");
    idempotent_endpoint::postgres::install(&client).await.expect("install again");
    let mut client = client;
    let tx = client.transaction().await.expect("begin");
    outbox::enqueue_ordered_postgres(&tx, &traced_message(), "k").await.expect("enqueue into the upgraded table");
    tx.commit().await.expect("commit");
    let traces = claimed_traces(&Arc::new(client)).await;
    assert_eq!(traces["old"], None);
    assert_eq!(traces["new"], traced_message().traceparent);
}

/// A `traceparent` the app sets on a message is kept only when it is a valid W3C value (in the W3C form);
/// other text is never stored (the current span's, none here, is used instead).
#[tokio::test]
async fn sqlite_a_message_keeps_only_a_valid_traceparent() {
    let dir = tempfile::tempdir().expect("temp dir");
    let keys = SqliteKeys::open(dir.path().join("t.sqlite"), Duration::from_secs(3600)).expect("open");
    let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let cases = [
        ("padded", format!(" {valid} "), Some(valid.to_owned())),
        ("upper", valid.to_uppercase(), None),
        ("injected", format!("{valid}\r\nx-injected: 1"), None),
        ("text", "not a trace context".to_owned(), None),
    ];
    for (name, given, _) in &cases {
        let message = Message { traceparent: Some(given.clone()), ..message(name) };
        keys.with_conn(move |conn| {
            let tx = conn.transaction()?;
            outbox::enqueue_sqlite(&tx, &message)?;
            Ok(tx.commit()?)
        })
        .await
        .expect("enqueue");
    }
    let traces = claimed_traces(&keys).await;
    for (name, _, expected) in &cases {
        assert_eq!(&traces[*name], expected, "{name}");
    }
}
