//! The PostgreSQL store with several server instances on one throwaway cluster.
//!
//! Gated: runs only with `IF_PG_TESTS=1` (the xtask sets it after installing PostgreSQL). With the
//! variable set, it skips (loudly) only when the PostgreSQL binaries are absent; any other problem fails.
//! Binaries are looked up on PATH, then in `/usr/lib/postgresql/*/bin`. As root, the cluster runs as the
//! `postgres` user (or `nobody`) through `runuser`, since PostgreSQL refuses to run as root.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use idempotent_fetch_server::keys::{request_hash, AccountId, IdempotencyKey};
use idempotent_fetch_server::store::{
    KeyedRequest, Outcome, PostgresStore, ProcessOptions, Store, StoreError,
};
use idempotent_fetch_server::{serve, Config, RunningServer};
use tokio_postgres::NoTls;

use common::{assert_problem, header, post_to, GRINDER, MUGS};

fn loud(message: &str) {
    // Written to the real stderr (not captured by the test harness) so nobody misses it.
    let _ = writeln!(std::io::stderr(), "\n!!!!!!!!!! {message} !!!!!!!!!!\n");
}

/// The directory holding `initdb`, `pg_ctl` and `postgres`, if any.
fn find_bin_dir() -> Option<PathBuf> {
    let has_all = |dir: &Path| {
        ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|b| dir.join(b).is_file())
    };
    if let Some(path) = std::env::var_os("PATH") {
        if let Some(dir) = std::env::split_paths(&path).find(|d| has_all(d)) {
            return Some(dir);
        }
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|d| has_all(d))
        .collect();
    versions.sort_by_key(|d| {
        d.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    versions.pop()
}

fn gate() -> Option<PathBuf> {
    if std::env::var("IF_PG_TESTS").as_deref() != Ok("1") {
        let _ = writeln!(
            std::io::stderr(),
            "note: PostgreSQL tests skipped (set IF_PG_TESTS=1 to run them)"
        );
        return None;
    }
    let found = find_bin_dir();
    if found.is_none() {
        loud(
            "SKIPPING PostgreSQL tests: IF_PG_TESTS=1 but initdb/pg_ctl/postgres were not found on PATH or in \
             /usr/lib/postgresql/*/bin (apt-get install -y postgresql)",
        );
    }
    found
}

fn output(command: &mut Command) -> Result<String, String> {
    let out = command.output().map_err(|e| format!("{command:?}: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{command:?} failed ({}): {text}", out.status))
    }
}

/// A throwaway PostgreSQL cluster on 127.0.0.1, stopped on drop.
struct Cluster {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    run_as: Option<String>,
    dir: tempfile::TempDir,
}

impl Cluster {
    fn start(bin: PathBuf) -> Result<Cluster, String> {
        let dir = tempfile::Builder::new()
            .prefix("ifpg")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let is_root = output(Command::new("id").arg("-u"))?.trim() == "0";
        let run_as = if is_root {
            let user = if output(Command::new("id").args(["-u", "postgres"])).is_ok() {
                "postgres"
            } else {
                "nobody"
            };
            let uid: u32 = output(Command::new("id").args(["-u", user]))?
                .trim()
                .parse()
                .map_err(|e| format!("{e}"))?;
            let gid: u32 = output(Command::new("id").args(["-g", user]))?
                .trim()
                .parse()
                .map_err(|e| format!("{e}"))?;
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .map_err(|e| format!("chown: {e}"))?;
            Some(user.to_owned())
        } else {
            None
        };
        let data = dir.path().join("data");
        let mut cluster = Cluster {
            bin,
            data,
            port: 0,
            run_as,
            dir,
        };
        output(
            cluster
                .command("initdb")
                .arg("-D")
                .arg(&cluster.data)
                .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"]),
        )?;
        let mut last_error = String::new();
        for _ in 0..3 {
            cluster.port = free_port()?;
            let options = format!(
                "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
                cluster.port,
                cluster.dir.path().display()
            );
            let log = cluster.dir.path().join("postgres.log");
            match output(
                cluster
                    .command("pg_ctl")
                    .arg("-D")
                    .arg(&cluster.data)
                    .arg("-l")
                    .arg(&log)
                    .args(["-w", "-t", "30", "-o", &options, "start"]),
            ) {
                Ok(_) => return Ok(cluster),
                Err(e) => {
                    last_error =
                        format!("{e}\n{}", std::fs::read_to_string(&log).unwrap_or_default())
                }
            }
        }
        Err(last_error)
    }

    fn command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        match &self.run_as {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(program);
                command
            }
            None => Command::new(program),
        }
    }

    fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let stopped = output(self.command("pg_ctl").arg("-D").arg(&self.data).args([
            "-m",
            "immediate",
            "-w",
            "stop",
        ]));
        if let Err(e) = stopped {
            loud(&format!("could not stop the test PostgreSQL cluster: {e}"));
        }
    }
}

fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(listener.local_addr().map_err(|e| e.to_string())?.port())
}

async fn sql(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .expect("connect to test cluster");
    tokio::spawn(connection);
    client
}

async fn count(db: &tokio_postgres::Client, sql: &str, account: &str) -> i64 {
    db.query_one(sql, &[&account]).await.expect("count").get(0)
}

async fn orders(db: &tokio_postgres::Client, account: &str) -> i64 {
    count(
        db,
        "SELECT COUNT(*) FROM orders WHERE account_id = $1",
        account,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_protocol_across_three_instances() {
    let Some(bin) = gate() else { return };
    let cluster = Cluster::start(bin).expect("start a throwaway PostgreSQL cluster");
    let admin = sql(&cluster.url("postgres")).await;
    admin
        .batch_execute("CREATE DATABASE idem")
        .await
        .expect("create database");
    let url = cluster.url("idem");
    let db = sql(&url).await;

    // Three instances starting at once: the migrations must not race.
    let starts = (0..3).map(|_| serve(Config::postgres(url.clone())));
    let servers: Vec<RunningServer> = futures_util::future::join_all(starts)
        .await
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("three instances start");
    let bases: Vec<String> = servers.iter().map(RunningServer::url).collect();
    let client = reqwest::Client::new();

    let health: serde_json::Value = client
        .get(format!("{}/api/health", bases[1]))
        .send()
        .await
        .expect("health")
        .json()
        .await
        .expect("json");
    assert_eq!(health["store"], "postgres");

    // 50 concurrent same-key requests spread over the instances: exactly one order.
    let account = [("x-account-id", "pg-concurrent")];
    let mut tasks = Vec::new();
    for i in 0..50 {
        let client = client.clone();
        let base = bases[i % bases.len()].clone();
        tasks.push(tokio::spawn(async move {
            let response = post_to(
                &client,
                &base,
                Some("pg-key"),
                MUGS,
                &[("x-account-id", "pg-concurrent")],
            )
            .await?;
            let status = response.status().as_u16();
            let replayed = header(&response, "idempotent-replayed") == Some("true");
            let retry_after = header(&response, "retry-after").map(str::to_owned);
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, replayed, retry_after, body))
        }));
    }
    let mut originals = 0;
    let mut bodies = Vec::new();
    for task in tasks {
        let (status, replayed, retry_after, body) = task.await.expect("task").expect("answer");
        match status {
            201 => {
                originals += usize::from(!replayed);
                bodies.push(body);
            }
            409 => assert_eq!(retry_after.as_deref(), Some("1")),
            other => panic!("unexpected status {other}: {body:?}"),
        }
    }
    assert!(originals <= 1);
    assert!(bodies.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(orders(&db, "pg-concurrent").await, 1);

    // Replays are byte-identical on every instance; a different body is 422 on every instance.
    let first = post_to(&client, &bases[0], Some("pg-key"), MUGS, &account)
        .await
        .expect("post");
    assert_eq!(first.status(), 201);
    let first_body = first.bytes().await.expect("body");
    for base in &bases {
        let again = post_to(&client, base, Some("pg-key"), MUGS, &account)
            .await
            .expect("replay");
        assert_eq!(again.status(), 201);
        assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
        assert_eq!(again.bytes().await.expect("body"), first_body);
        let other = post_to(&client, base, Some("pg-key"), GRINDER, &account)
            .await
            .expect("422");
        assert_problem(other, 422, "idempotency-key-reused").await;
    }
    assert_eq!(orders(&db, "pg-concurrent").await, 1);

    // In flight on instance 0 -> 409 from instances 1 and 2 (the database lock, not the process set).
    let account = [("x-account-id", "pg-inflight")];
    let slow = {
        let client = client.clone();
        let base = bases[0].clone();
        tokio::spawn(async move {
            post_to(
                &client,
                &base,
                Some("pg-slow"),
                MUGS,
                &[("x-account-id", "pg-inflight"), ("x-fault", "latency=1500")],
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    for base in &bases[1..] {
        let busy = post_to(&client, base, Some("pg-slow"), MUGS, &account)
            .await
            .expect("busy");
        assert_eq!(header(&busy, "retry-after"), Some("1"));
        assert_problem(busy, 409, "request-in-flight").await;
    }
    let done = slow.await.expect("task").expect("slow");
    assert_eq!(done.status(), 201);
    let replay = post_to(&client, &bases[2], Some("pg-slow"), MUGS, &account)
        .await
        .expect("replay");
    assert_eq!(header(&replay, "idempotent-replayed"), Some("true"));
    assert_eq!(orders(&db, "pg-inflight").await, 1);

    // Crash before commit on one instance leaves nothing; the retry on another does the work once.
    let account = [("x-account-id", "pg-crash")];
    let crashed = post_to(
        &client,
        &bases[0],
        Some("pg-crash"),
        MUGS,
        &[account[0], ("x-fault", "crash-before-commit")],
    )
    .await
    .expect("crash");
    assert_problem(crashed, 500, "crashed-before-commit").await;
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM idempotency_keys WHERE account_id = $1",
            "pg-crash"
        )
        .await,
        0
    );
    assert_eq!(orders(&db, "pg-crash").await, 0);
    let retry = post_to(&client, &bases[1], Some("pg-crash"), MUGS, &account)
        .await
        .expect("retry");
    assert_eq!(retry.status(), 201);
    assert_eq!(header(&retry, "idempotent-replayed"), None);
    assert_eq!(orders(&db, "pg-crash").await, 1);

    // Drop after commit on one instance; the retry on another replays.
    let account = [("x-account-id", "pg-drop")];
    let dropped = post_to(
        &client,
        &bases[2],
        Some("pg-drop"),
        MUGS,
        &[account[0], ("x-fault", "drop-after-commit")],
    )
    .await;
    assert!(dropped.is_err(), "the client must see a network error");
    let retry = post_to(&client, &bases[0], Some("pg-drop"), MUGS, &account)
        .await
        .expect("retry");
    assert_eq!(retry.status(), 201);
    assert_eq!(header(&retry, "idempotent-replayed"), Some("true"));
    assert_eq!(orders(&db, "pg-drop").await, 1);

    // Accounts are isolated.
    for account in ["pg-a", "pg-b"] {
        let r = post_to(
            &client,
            &bases[1],
            Some("shared"),
            MUGS,
            &[("x-account-id", account)],
        )
        .await
        .expect("post");
        assert_eq!(header(&r, "idempotent-replayed"), None);
        assert_eq!(orders(&db, account).await, 1);
    }

    // The sweep is safe from every instance at once and deletes only expired rows.
    let total: i64 = db
        .query_one("SELECT COUNT(*) FROM idempotency_keys", &[])
        .await
        .expect("count")
        .get(0);
    let now = idempotent_fetch_server::unix_now();
    let retention = Duration::from_secs(86_400);
    let kept = servers
        .iter()
        .map(|s| idempotent_fetch_server::sweep::sweep_once(s.store(), now, retention));
    let kept: Vec<u64> = futures_util::future::join_all(kept)
        .await
        .into_iter()
        .map(|r| r.expect("sweep"))
        .collect();
    assert_eq!(kept, [0, 0, 0]);
    let later = now + 2 * 86_400;
    let swept = servers
        .iter()
        .map(|s| idempotent_fetch_server::sweep::sweep_once(s.store(), later, retention));
    let swept: Vec<u64> = futures_util::future::join_all(swept)
        .await
        .into_iter()
        .map(|r| r.expect("sweep"))
        .collect();
    assert_eq!(
        swept.iter().sum::<u64>(),
        u64::try_from(total).expect("count")
    );
    let after = post_to(
        &client,
        &bases[0],
        Some("shared"),
        MUGS,
        &[("x-account-id", "pg-a")],
    )
    .await
    .expect("post");
    assert_eq!(after.status(), 201);
    assert_eq!(header(&after, "idempotent-replayed"), None);
    assert_eq!(orders(&db, "pg-a").await, 2);

    // The transaction itself, store level: an error after the order insert leaves nothing behind.
    let store = Store::Postgres(PostgresStore::connect(&url).await.expect("connect store"));
    let request = KeyedRequest {
        account: AccountId::parse("pg-store").expect("account"),
        key: IdempotencyKey::parse("k").expect("key"),
        request_hash: request_hash("POST", "/api/orders", MUGS.as_bytes()),
        body: Bytes::from_static(MUGS.as_bytes()),
        now,
        expired_before: 0,
    };
    let crash = ProcessOptions {
        fail_before_commit: true,
        ..ProcessOptions::default()
    };
    let result = store.process(request.clone(), crash).await;
    assert!(
        matches!(result, Err(StoreError::InjectedCrash)),
        "{result:?}"
    );
    assert_eq!(orders(&db, "pg-store").await, 0);
    assert!(matches!(
        store
            .process(request.clone(), ProcessOptions::default())
            .await,
        Ok(Outcome::Fresh(_))
    ));
    assert!(matches!(
        store.process(request, ProcessOptions::default()).await,
        Ok(Outcome::Replay(_))
    ));
    assert_eq!(orders(&db, "pg-store").await, 1);

    for server in servers {
        server.shutdown().await.expect("shutdown");
    }
    drop(db);
    drop(admin);
    drop(cluster);
}
