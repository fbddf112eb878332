//! The PostgreSQL store with several server instances on one throwaway cluster.
//!
//! `#[ignore]`d: they need PostgreSQL's binaries, so they run with
//! `cargo test -p idempotent-fetch-server --test postgres -- --ignored` (the xtask runs that after installing
//! PostgreSQL). Run that way they fail when the binaries are missing: an ignored test never reports "ok"
//! without having run. Binaries are looked up in `IF_PG_BINDIR`, on PATH, then in `/usr/lib/postgresql/*/bin`.
//! As root, the cluster runs as the `postgres` user (or `nobody`) through `runuser`, since PostgreSQL refuses
//! to run as root.

mod common;
#[path = "common/pg_cluster.rs"]
mod pg_cluster;

use std::time::Duration;

use idempotent_fetch_server::idempotency::place_order;
use idempotent_fetch_server::keys::{AccountId, IdempotencyKey};
use idempotent_fetch_server::protocol::Outcome;
use idempotent_fetch_server::store::{PgOptions, PgTls, PostgresStore, ProcessOptions, Store, StoreError};
use idempotent_fetch_server::{serve, Config, RunningServer};
use reqwest::{Client, Response};
use tokio_postgres::NoTls;

use pg_cluster::{bin_dir, Cluster};

use common::checkout::{
    assert_one_charge_and_one_message_each, check_fence_in_phases, eventually, lease_rules, post_and_crash,
    post_until_created, server, Downstream, LONG_LEASE,
};
use common::key_status::{
    check_hung_up_request_stays_in_flight, check_key_status, check_settle, settle, until_settled,
};
use common::{
    assert_fresh, assert_one_order, assert_problem, assert_replayed, bearer, crash_before_commit, header, json,
    keyed_request, post_concurrently, post_to, spawn_post, GRINDER, MUGS, RETENTION, SECRET,
};

async fn sql(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.expect("connect to test cluster");
    tokio::spawn(connection);
    client
}

async fn count(db: &tokio_postgres::Client, sql: &str, account: &str) -> i64 {
    db.query_one(sql, &[&account]).await.expect("count").get(0)
}

async fn orders(db: &tokio_postgres::Client, account: &str) -> i64 {
    count(db, "SELECT COUNT(*) FROM orders WHERE account_id = $1", account).await
}

async fn keys(db: &tokio_postgres::Client, account: &str) -> i64 {
    count(db, "SELECT COUNT(*) FROM idempotency_records WHERE scope = $1", account).await
}

/// `POST /api/orders` to one instance; the request must get an answer.
async fn post(client: &Client, base: &str, key: &str, body: &str, headers: &[(&str, &str)]) -> Response {
    post_to(client, base, Some(key), body, headers).await.expect("answer")
}

/// The sweep as at unix time `at` from every instance at once (every key row first aged by `at - now`: the
/// library's sweep reads the clock); how many rows each deleted.
async fn sweep_all(servers: &[RunningServer], db: &tokio_postgres::Client, at: i64) -> Vec<u64> {
    let by = at - idempotent_fetch_server::unix_now();
    db.execute("UPDATE idempotency_records SET created_at = created_at - $1", &[&by]).await.expect("age key rows");
    let sweeps = servers.iter().map(|s| idempotent_fetch_server::sweep::sweep_once(s.store(), RETENTION));
    futures_util::future::join_all(sweeps).await.into_iter().map(|r| r.expect("sweep")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL: run with --ignored"]
async fn postgres_protocol_across_three_instances() {
    let cluster = Cluster::start(bin_dir(), Cluster::FAST).expect("start a throwaway PostgreSQL cluster");
    let admin = sql(&cluster.url("postgres")).await;
    admin.batch_execute("CREATE DATABASE idem").await.expect("create database");
    let url = cluster.url("idem");
    let db = sql(&url).await;

    // Three instances starting at once: the migrations must not race.
    // They share the session secret, so a session works on every instance.
    let config = Config { session_secret: Some(SECRET.to_owned()), ..Config::postgres(url.clone()) };
    let starts = (0..3).map(|_| serve(config.clone()));
    let servers: Vec<RunningServer> = futures_util::future::join_all(starts)
        .await
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("three instances start");
    let bases: Vec<String> = servers.iter().map(RunningServer::url).collect();
    let client = Client::new();

    let health = json(client.get(format!("{}/api/health", bases[1]))).await;
    assert_eq!(health["store"], "postgres");

    // 50 concurrent same-key requests spread over the instances: exactly one order.
    let auth = bearer("pg-concurrent");
    let account = [("authorization", auth.as_str())];
    let answers = post_concurrently(&client, &bases, 50, "pg-key", MUGS, &account).await;
    assert_one_order(&answers);
    assert_eq!(orders(&db, "pg-concurrent").await, 1);

    // Replays are byte-identical on every instance; a different body is 422 on every instance.
    let first = post(&client, &bases[0], "pg-key", MUGS, &account).await;
    assert_eq!(first.status(), 201);
    let first_body = first.bytes().await.expect("body");
    for base in &bases {
        let again = post(&client, base, "pg-key", MUGS, &account).await;
        assert_replayed(&again);
        assert_eq!(again.bytes().await.expect("body"), first_body);
        let other = post(&client, base, "pg-key", GRINDER, &account).await;
        assert_problem(other, 422, "idempotency-key-reused").await;
    }
    assert_eq!(orders(&db, "pg-concurrent").await, 1);

    // In flight on instance 0 -> 409 from instances 1 and 2 (the database lock, not the process set).
    let auth = bearer("pg-inflight");
    let account = [("authorization", auth.as_str())];
    let slow = spawn_post(&client, &bases[0], "pg-slow", MUGS, &[account[0], ("x-fault", "latency=1500")]);
    tokio::time::sleep(Duration::from_millis(400)).await;
    for base in &bases[1..] {
        let busy = post(&client, base, "pg-slow", MUGS, &account).await;
        assert_eq!(header(&busy, "retry-after"), Some("1"));
        assert_problem(busy, 409, "request-in-flight").await;
    }
    let done = slow.await.expect("task").expect("slow");
    assert_eq!(done.status(), 201);
    let replay = post(&client, &bases[2], "pg-slow", MUGS, &account).await;
    assert_eq!(header(&replay, "idempotent-replayed"), Some("true"));
    assert_eq!(orders(&db, "pg-inflight").await, 1);

    // Crash before commit on one instance leaves nothing; the retry on another does the work once.
    let auth = bearer("pg-crash");
    let account = [("authorization", auth.as_str())];
    let crashed = post(&client, &bases[0], "pg-crash", MUGS, &[account[0], ("x-fault", "crash-before-commit")]).await;
    assert_problem(crashed, 500, "crashed-before-commit").await;
    assert_eq!(keys(&db, "pg-crash").await, 0);
    assert_eq!(orders(&db, "pg-crash").await, 0);
    let retry = post(&client, &bases[1], "pg-crash", MUGS, &account).await;
    assert_fresh(&retry);
    assert_eq!(orders(&db, "pg-crash").await, 1);

    // Drop after commit on one instance; the retry on another replays.
    let auth = bearer("pg-drop");
    let account = [("authorization", auth.as_str())];
    let dropped =
        post_to(&client, &bases[2], Some("pg-drop"), MUGS, &[account[0], ("x-fault", "drop-after-commit")]).await;
    assert!(dropped.is_err(), "the client must see a network error");
    let retry = post(&client, &bases[0], "pg-drop", MUGS, &account).await;
    assert_replayed(&retry);
    assert_eq!(orders(&db, "pg-drop").await, 1);

    // Accounts are isolated.
    for account in ["pg-a", "pg-b"] {
        let r = post(&client, &bases[1], "shared", MUGS, &[("authorization", &bearer(account))]).await;
        assert_eq!(header(&r, "idempotent-replayed"), None);
        assert_eq!(orders(&db, account).await, 1);
    }

    // The sweep is safe from every instance at once and deletes only expired rows.
    let total: i64 = db.query_one("SELECT COUNT(*) FROM idempotency_records", &[]).await.expect("count").get(0);
    let now = idempotent_fetch_server::unix_now();
    assert_eq!(sweep_all(&servers, &db, now).await, [0, 0, 0]);
    let later = now + 2 * 86_400;
    let swept = sweep_all(&servers, &db, later).await;
    assert_eq!(swept.iter().sum::<u64>(), u64::try_from(total).expect("count"));
    let after = post(&client, &bases[0], "shared", MUGS, &[("authorization", &bearer("pg-a"))]).await;
    assert_fresh(&after);
    assert_eq!(orders(&db, "pg-a").await, 2);

    // The transaction itself, store level: an error after the order insert leaves nothing behind.
    let store =
        Store::Postgres(PostgresStore::connect(&url, &PgOptions::default(), RETENTION).await.expect("connect store"));
    let request = keyed_request("pg-store", "k", MUGS, now);
    let result = store.process(request.clone(), crash_before_commit(), place_order).await;
    assert!(matches!(result, Err(StoreError::InjectedCrash)), "{result:?}");
    assert_eq!(orders(&db, "pg-store").await, 0);
    let fresh = store.process(request.clone(), ProcessOptions::default(), place_order).await;
    assert!(matches!(fresh, Ok(Outcome::Fresh(_))), "{fresh:?}");
    let replay = store.process(request, ProcessOptions::default(), place_order).await;
    assert!(matches!(replay, Ok(Outcome::Replay(_))), "{replay:?}");
    assert_eq!(orders(&db, "pg-store").await, 1);

    for server in servers {
        server.shutdown().await.expect("shutdown");
    }
    drop(db);
    drop(admin);
    drop(cluster);
}

/// The tables as the server created them before the key-status lookup (no index on the order's key).
const PREVIOUS_SCHEMA: &str = "
CREATE TABLE idempotency_keys (
    account_id TEXT NOT NULL, key TEXT NOT NULL, request_hash TEXT NOT NULL, status_code INTEGER NULL,
    response_headers TEXT NULL, response_body TEXT NULL, created_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
CREATE TABLE orders (
    seq BIGSERIAL PRIMARY KEY, id TEXT NOT NULL UNIQUE, account_id TEXT NOT NULL, idempotency_key TEXT NOT NULL,
    items TEXT NOT NULL, total_cents BIGINT NOT NULL, currency TEXT NOT NULL, created_at BIGINT NOT NULL
);
CREATE INDEX orders_account_seq ON orders (account_id, seq);
INSERT INTO orders (id, account_id, idempotency_key, items, total_cents, currency, created_at)
VALUES ('ord_00000000000000aa', 'old', 'old-key',
        '[{\"sku\":\"mug\",\"name\":\"Enamel mug\",\"qty\":1,\"unitPriceCents\":1200,\"lineTotalCents\":1200}]',
        1200, 'EUR', 1700000000);
";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL: run with --ignored"]
async fn postgres_key_status_across_instances_and_after_the_sweep() {
    let cluster = Cluster::start(bin_dir(), Cluster::FAST).expect("start a throwaway PostgreSQL cluster");
    let admin = sql(&cluster.url("postgres")).await;
    for db in ["status", "previous"] {
        admin.batch_execute(&format!("CREATE DATABASE {db}")).await.expect("create database");
    }

    // Two instances: a key in flight on one is seen in flight on the other (through pg_locks).
    let url = cluster.url("status");
    let config = Config { session_secret: Some(SECRET.to_owned()), ..Config::postgres(url.clone()) };
    let servers = vec![serve(config.clone()).await.expect("instance 1"), serve(config).await.expect("instance 2")];
    let bases: Vec<String> = servers.iter().map(RunningServer::url).collect();
    let status_db = sql(&url).await;
    let (servers_ref, db_ref) = (&servers, &status_db);
    check_key_status(&Client::new(), &bases, "pg", move |at| async move {
        sweep_all(servers_ref, db_ref, at).await.iter().sum()
    })
    .await;
    for server in servers {
        server.shutdown().await.expect("shutdown");
    }

    // A database of the previous schema gains the index at start, and its orders answer for their keys.
    let previous = cluster.url("previous");
    sql(&previous).await.batch_execute(PREVIOUS_SCHEMA).await.expect("previous schema");
    let store = PostgresStore::connect(&previous, &PgOptions::default(), RETENTION)
        .await
        .expect("connect with the current schema");
    let db = sql(&previous).await;
    let indexed: i64 = db
        .query_one(
            "SELECT COUNT(*) FROM pg_indexes WHERE tablename = 'orders' AND indexname = 'orders_account_key'",
            &[],
        )
        .await
        .expect("pg_indexes")
        .get(0);
    assert_eq!(indexed, 1);
    let account = AccountId::parse("old").expect("account");
    let key = IdempotencyKey::parse("old-key").expect("key");
    match store.newest_order(&account, &key).await.expect("lookup") {
        Some(order) => assert_eq!((order.id.as_str(), order.total_cents), ("ord_00000000000000aa", 1200)),
        other => panic!("expected the old order, got {other:?}"),
    }
    drop((db, store, admin));
    drop(cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL and openssl: run with --ignored"]
async fn postgres_over_tls_verifies_the_certificate() {
    let cluster = Cluster::start(bin_dir(), Cluster::TLS).expect("start a throwaway PostgreSQL cluster with TLS");
    let url = cluster.url("postgres");
    let tls =
        |ca_file: Option<std::path::PathBuf>| PgOptions { tls: PgTls::Required { ca_file }, ..PgOptions::default() };

    // Trusting the cluster's certificate: connected, and every pooled connection is encrypted.
    let config = Config {
        session_secret: Some(SECRET.to_owned()),
        database: idempotent_fetch_server::Database::Postgres(url.clone(), tls(Some(cluster.ca_file()))),
        ..Config::postgres(&url)
    };
    let server = serve(config).await.expect("server over TLS");
    let client = Client::new();
    let health = json(client.get(format!("{}/api/health", server.url()))).await;
    assert_eq!(health["store"], "postgres");
    let auth = bearer("tls");
    let created = post(&client, &server.url(), "tls-key", MUGS, &[("authorization", auth.as_str())]).await;
    assert_fresh(&created);
    let admin = sql(&url).await;
    let plain: i64 = admin
        .query_one("SELECT COUNT(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE datname = 'postgres' AND NOT ssl AND pid <> pg_backend_pid()", &[])
        .await
        .expect("pg_stat_ssl")
        .get(0);
    let encrypted: i64 =
        admin.query_one("SELECT COUNT(*) FROM pg_stat_ssl WHERE ssl", &[]).await.expect("pg_stat_ssl").get(0);
    assert_eq!(plain, 0, "a pooled connection is not encrypted");
    assert!(encrypted >= 1, "no encrypted connection");
    server.shutdown().await.expect("shutdown");

    // A certificate nobody vouches for (only the Mozilla roots): refused, no fallback to plain TCP.
    let refused = PostgresStore::connect(&url, &tls(None), RETENTION).await;
    assert!(refused.is_err(), "connected to a self-signed server without trusting it");
    // A CA file without certificates is a configuration error.
    let empty = tempfile::NamedTempFile::new().expect("temp file");
    let bad = PostgresStore::connect(&url, &tls(Some(empty.path().to_path_buf())), RETENTION).await;
    assert!(matches!(bad, Err(StoreError::Tls(_))), "{bad:?}");
    drop(admin);
    drop(cluster);
}

/// The order phases on one database shared by three instances, with a real provider and receiver: the
/// lease rules hold on PostgreSQL, concurrent requests with one key spread over the instances make one
/// order and one charge, and the three outbox workers deliver every confirmation once between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL: run with --ignored"]
async fn postgres_phases_across_three_instances_charge_and_confirm_once() {
    let cluster = Cluster::start(bin_dir(), Cluster::FAST).expect("start a throwaway PostgreSQL cluster");
    let admin = sql(&cluster.url("postgres")).await;
    admin.batch_execute("CREATE DATABASE phases").await.expect("create database");
    let url = cluster.url("phases");
    let db = sql(&url).await;
    let downstream = Downstream::start();
    let config = Config {
        session_secret: Some(SECRET.to_owned()),
        checkout: Some(downstream.config()),
        ..Config::postgres(url.clone())
    };
    let starts = (0..3).map(|_| serve(config.clone()));
    let servers: Vec<RunningServer> =
        futures_util::future::join_all(starts).await.into_iter().collect::<Result<_, _>>().expect("instances start");
    let bases: Vec<String> = servers.iter().map(RunningServer::url).collect();
    let client = Client::new();

    // The lease rules in a database of their own: the instances' completers would take their key over.
    admin.batch_execute("CREATE DATABASE leases").await.expect("create database");
    let leases = PostgresStore::connect(&cluster.url("leases"), &PgOptions::default(), RETENTION).await;
    lease_rules(&Store::Postgres(leases.expect("connect store"))).await;

    downstream.provider_faults(r#"{"latencyMs":150,"latencyProbability":1}"#).await;
    let mut placed = Vec::new();
    for i in 0..6 {
        let key = format!("pg-phase-{i}");
        let answers = post_concurrently(&client, &bases, 6, &key, MUGS, &[]).await;
        assert_one_order(&answers);
        let order = post_until_created(&bases[i % 3], &key).await;
        placed.push(order["id"].as_str().expect("id").to_owned());
    }
    assert_eq!(orders(&db, "demo").await, 6);
    eventually("six confirmations", || async { downstream.messages().await.len() == 6 }).await;
    assert_one_charge_and_one_message_each(&downstream, &placed).await;
    let refused: i64 = downstream.messages().await.iter().filter_map(|m| m["duplicatesRefused"].as_i64()).sum();
    assert_eq!(refused, 0, "three workers, and still no message sent twice");
    for server in servers {
        server.shutdown().await.expect("shutdown");
    }
}

/// An instance (a real process) crashes after the provider charged, and another after `finished`
/// committed; the instance still serving finishes the first key (once the dead one's lease ran out) and
/// replays the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL: run with --ignored"]
async fn postgres_a_crashed_instance_leaves_its_keys_to_the_others() {
    let cluster = Cluster::start(bin_dir(), Cluster::FAST).expect("start a throwaway PostgreSQL cluster");
    let admin = sql(&cluster.url("postgres")).await;
    admin.batch_execute("CREATE DATABASE crashes").await.expect("create database");
    let url = cluster.url("crashes");
    let downstream = Downstream::start();
    let config = Config {
        session_secret: Some(SECRET.to_owned()),
        checkout: Some(downstream.config()),
        ..Config::postgres(url.clone())
    };
    let survivor = serve(config).await.expect("instance starts");

    let mut doomed = server(&["--database-url", &url], &downstream);
    post_and_crash(&mut doomed, "pg-crash-charge", "crash-after-charge").await;
    let mut doomed = server(&["--database-url", &url], &downstream);
    post_and_crash(&mut doomed, "pg-crash-finish", "crash-after-finish").await;

    let a = post_until_created(&survivor.url(), "pg-crash-charge").await;
    let b = post_until_created(&survivor.url(), "pg-crash-finish").await;
    let db = sql(&url).await;
    assert_eq!(orders(&db, "demo").await, 2);
    let placed = [a["id"].as_str().expect("id").to_owned(), b["id"].as_str().expect("id").to_owned()];
    eventually("two confirmations", || async { downstream.messages().await.len() == 2 }).await;
    assert_one_charge_and_one_message_each(&downstream, &placed).await;
    survivor.shutdown().await.expect("shutdown");
}

/// Two instances on one database: a request whose client hung up reads in flight on both (its transaction,
/// in a task of its own, holds the key's advisory lock across the hang-up) until it commits; settling, on
/// either instance (the contract of `check_settle`); and the same fence in the order phases.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL: run with --ignored"]
async fn postgres_in_flight_is_held_by_the_work_and_settling_fences() {
    let cluster = Cluster::start(bin_dir(), Cluster::FAST).expect("start a throwaway PostgreSQL cluster");
    let admin = sql(&cluster.url("postgres")).await;
    for db in ["fence", "fencephases"] {
        admin.batch_execute(&format!("CREATE DATABASE {db}")).await.expect("create database");
    }
    let url = cluster.url("fence");
    let db = sql(&url).await;
    let config = Config { session_secret: Some(SECRET.to_owned()), ..Config::postgres(url.clone()) };
    let servers = vec![serve(config.clone()).await.expect("instance 1"), serve(config).await.expect("instance 2")];
    let bases: Vec<String> = servers.iter().map(RunningServer::url).collect();
    let client = Client::new();

    check_hung_up_request_stays_in_flight(&client, &bases[0], &bases[0], "pg-hung-same").await;
    check_hung_up_request_stays_in_flight(&client, &bases[0], &bases[1], "pg-hung-other").await;
    let (servers_ref, db_ref) = (&servers, &db);
    check_settle(&client, &bases, "pg", move |at| async move { sweep_all(servers_ref, db_ref, at).await.iter().sum() })
        .await;
    assert_eq!(orders(&db, "pg-settle-a").await, 1, "K1 once; nothing for the fenced key");
    for server in servers {
        server.shutdown().await.expect("shutdown");
    }

    let downstream = Downstream::start();
    let checkout = idempotent_fetch_server::config::CheckoutConfig { key_lease: LONG_LEASE, ..downstream.config() };
    let config = Config {
        session_secret: Some(SECRET.to_owned()),
        checkout: Some(checkout),
        ..Config::postgres(cluster.url("fencephases"))
    };
    let servers = vec![serve(config.clone()).await.expect("instance 1"), serve(config).await.expect("instance 2")];
    let bases: Vec<String> = servers.iter().map(RunningServer::url).collect();
    check_fence_in_phases(&client, &bases, &downstream, "pg-phases-fence").await;
    for server in servers {
        server.shutdown().await.expect("shutdown");
    }
}

/// A request with a key and the settling of that key, at the same time on two instances, round after round:
/// each key ends either with one order (settling answers in flight or done, never fenced) or fenced with no
/// order (the request is refused 410), never both, and never an order after a fenced answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL: run with --ignored"]
async fn postgres_settling_races_a_request_across_two_instances() {
    const ROUNDS: usize = 40;
    let cluster = Cluster::start(bin_dir(), Cluster::FAST).expect("start a throwaway PostgreSQL cluster");
    let admin = sql(&cluster.url("postgres")).await;
    admin.batch_execute("CREATE DATABASE race").await.expect("create database");
    let url = cluster.url("race");
    let db = sql(&url).await;
    let config = Config { session_secret: Some(SECRET.to_owned()), ..Config::postgres(url.clone()) };
    let servers = vec![serve(config.clone()).await.expect("instance 1"), serve(config).await.expect("instance 2")];
    let bases: Vec<String> = servers.iter().map(RunningServer::url).collect();
    let client = Client::new();
    let account = "pg-race";
    let auth = bearer(account);

    let (mut created, mut fenced) = (0, 0);
    for round in 0..ROUNDS {
        let key = format!("race-{round}");
        let (post_base, settle_base) = (&bases[round % 2], &bases[(round + 1) % 2]);
        // Either side may start first, by up to a few milliseconds, and the request may do its work slowly.
        let post_delay = Duration::from_millis((round % 3) as u64 * 3);
        let settle_delay = Duration::from_millis((round % 4) as u64 * 2);
        let latency = format!("latency={}", (round % 5) * 10);
        let request = {
            let (client, base, key, auth) = (client.clone(), post_base.clone(), key.clone(), auth.clone());
            tokio::spawn(async move {
                tokio::time::sleep(post_delay).await;
                post_to(&client, &base, Some(&key), MUGS, &[("authorization", auth.as_str()), ("x-fault", &latency)])
                    .await
            })
        };
        tokio::time::sleep(settle_delay).await;
        let first = settle(&client, settle_base, account, &key).await;
        let mut status = request.await.expect("task").expect("answer").status().as_u16();
        while status == 409 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            status = post(&client, post_base, &key, MUGS, &[("authorization", auth.as_str())]).await.status().as_u16();
        }
        let last = until_settled(&key, || settle(&client, settle_base, account, &key)).await;
        let made: i64 = db
            .query_one("SELECT COUNT(*) FROM orders WHERE account_id = $1 AND idempotency_key = $2", &[&account, &key])
            .await
            .expect("count")
            .get(0);
        if first.body["status"] == "fenced" {
            fenced += 1;
            assert_eq!((made, status), (0, 410), "{key}: fenced, so no order and the request refused");
            assert_eq!(last.body["status"], "fenced", "{key}: fenced for good");
        } else {
            created += 1;
            assert!(["in_flight", "done"].contains(&first.body["status"].as_str().unwrap_or("")), "{}", first.body);
            assert_eq!((made, status), (1, 201), "{key}: the request did its work once");
            assert_eq!(last.body["status"], "done", "{key}: {}", last.body);
        }
    }
    eprintln!("{ROUNDS} rounds: {created} orders, {fenced} fenced");
    assert_eq!(created + fenced, ROUNDS);
    assert!(created > 0 && fenced > 0, "both outcomes were raced: {created} orders, {fenced} fenced");
    for server in servers {
        server.shutdown().await.expect("shutdown");
    }
}

/// The order phases on PostgreSQL: while another transaction holds a key's row, a request with the key waits
/// the library's `KEY_LOCK_TIMEOUT` and is answered 409 with `Retry-After` (the library's `KeyBusy`), and
/// nothing is written; once the row is free the retry is answered as before (a replay).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL: run with --ignored"]
async fn postgres_a_key_row_held_elsewhere_is_answered_409_after_the_library_wait() {
    use idempotent_endpoint::postgres::KEY_LOCK_TIMEOUT;

    let cluster = Cluster::start(bin_dir(), Cluster::FAST).expect("start a throwaway PostgreSQL cluster");
    let admin = sql(&cluster.url("postgres")).await;
    admin.batch_execute("CREATE DATABASE busy").await.expect("create database");
    let url = cluster.url("busy");
    let downstream = Downstream::start();
    let config = Config {
        session_secret: Some(SECRET.to_owned()),
        checkout: Some(downstream.config()),
        ..Config::postgres(url.clone())
    };
    let server = serve(config).await.expect("instance starts");
    let client = Client::new();
    let key = "pg-busy-row-0001";
    post_until_created(&server.url(), key).await;

    let mut holder = sql(&url).await;
    let tx = holder.transaction().await.expect("begin");
    tx.query_one("SELECT 1 FROM idempotency_records WHERE key = $1 FOR UPDATE", &[&key]).await.expect("hold the row");
    let start = std::time::Instant::now();
    let answer = post(&client, &server.url(), key, MUGS, &[]).await;
    let waited = start.elapsed();
    assert!(header(&answer, "retry-after").is_some(), "{:?}", answer.headers());
    assert_problem(answer, 409, "request-in-flight").await;
    assert!(waited >= KEY_LOCK_TIMEOUT && waited < KEY_LOCK_TIMEOUT * 2, "answered after {waited:?}");
    tx.rollback().await.expect("release the row");

    assert_replayed(&post(&client, &server.url(), key, MUGS, &[]).await);
    assert_eq!(orders(&sql(&url).await, "demo").await, 1);
    server.shutdown().await.expect("shutdown");
}
