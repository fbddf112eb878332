//! Load benchmark of the reference server: N concurrent clients, each with its own session (account), send
//! a fixed number of operations: mostly orders with fresh keys, plus retries of their own earlier keys (a
//! lost answer) and in-flight twins (two requests with one new key at the same moment, as two tabs would).
//! Reports requests/s, p50/p99 latency and, from the database, orders vs keys and duplicates.
//!
//! Scenarios: SQLite with `synchronous=FULL` (the default) and `NORMAL`, one instance each; SQLite FULL with
//! the order flow through a payment provider and a mail receiver (`--provider-url`, `--mail-url`: atomic
//! phases and the outbox; the provider's charges and the receiver's messages are counted too); PostgreSQL
//! with three instances behind a round-robin client (durable commits: `fsync=on`, `synchronous_commit=on`).
//!
//! A small harness rather than `oha`/`autocannon`: the mix needs per-client state (replaying one's own
//! earlier key with the same body, firing twins with one key and retrying the 409 that loses) and a check
//! of the database afterwards; fixed-request generators send independent requests only.
//!
//! ```sh
//! cargo bench -p idempotent-fetch-server --bench load --profile server -- [--clients 32] [--ops 100]
//!     [--only sqlite-full|sqlite-checkout|sqlite-normal|postgres]
//! cargo bench -p idempotent-fetch-server --bench load --profile server --features otel -- --only otel
//!     [--rounds 4]
//! ```
//!
//! `otel` (only when named) measures what tracing costs a request: two servers of the same binary on
//! SQLite `synchronous=NORMAL`, one exporting its spans over OTLP/HTTP to a receiver this harness starts
//! (it answers each export and counts the spans), one without an exporter, driven in alternating rounds
//! of the same mix; it prints each side's p50/p99 and the ratios, and fails when the receiver got no span
//! (a binary built without the `otel` feature).
//!
//! `--profile server` builds the server binary the harness starts (and the harness) the way the server
//! ships; `IF_SERVER_BIN` points the harness at another server binary. Under `cargo test` (no `--bench` argument) it runs a small SQLite smoke pass instead and fails
//! only if the protocol broke (a duplicate order or charge or confirmation, an unexpected status), never on
//! timing.

#[path = "../tests/common/pg_cluster.rs"]
mod pg_cluster;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Client;

/// The server binary cargo built along with this harness (same profile), unless `IF_SERVER_BIN` names one.
fn server_bin() -> String {
    std::env::var("IF_SERVER_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_idempotent-fetch-server").to_owned())
}

/// Another binary of the package: next to `IF_SERVER_BIN` when that is set, else the one cargo built.
fn sibling_bin(name: &str, built: &str) -> String {
    match std::env::var("IF_SERVER_BIN") {
        Ok(server) => std::path::Path::new(&server).with_file_name(name).to_string_lossy().into_owned(),
        Err(_) => built.to_owned(),
    }
}
const SECRET: &str = "the load benchmark's shared session secret";
/// Share of operations that retry one of the client's earlier keys.
const RETRY_SHARE: f64 = 0.10;
/// Share of operations that are in-flight twins.
const TWIN_SHARE: f64 = 0.10;

struct Args {
    clients: usize,
    ops: usize,
    only: Option<String>,
    smoke: bool,
    /// Alternating rounds per side of the `otel` scenario.
    rounds: usize,
}

/// The scenarios that run only when `--only` names them.
const ON_REQUEST: &[&str] = &["otel"];

impl Args {
    fn wanted(&self, name: &str) -> bool {
        if self.smoke {
            return ["sqlite-full", "sqlite-checkout"].contains(&name);
        }
        match self.only.as_deref() {
            Some(only) => only == name,
            None => !ON_REQUEST.contains(&name),
        }
    }
}

fn args() -> Result<Args, String> {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let smoke = !raw.iter().any(|a| a == "--bench");
    let mut args = Args { clients: 32, ops: 100, only: None, smoke, rounds: 4 };
    if smoke {
        (args.clients, args.ops) = (4, 10);
        return Ok(args);
    }
    let mut it = raw.into_iter().filter(|a| a != "--bench");
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--clients" => args.clients = value()?.parse().map_err(|e| format!("--clients: {e}"))?,
            "--ops" => args.ops = value()?.parse().map_err(|e| format!("--ops: {e}"))?,
            "--only" => args.only = Some(value()?),
            "--rounds" => args.rounds = value()?.parse().map_err(|e| format!("--rounds: {e}"))?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(args)
}

/// A server process, killed on drop.
struct ServerProcess {
    child: Child,
    url: String,
}

impl ServerProcess {
    fn start(extra: &[&str]) -> Result<ServerProcess, String> {
        ServerProcess::spawn(
            &server_bin(),
            &[
                &["--session-secret", SECRET][..],
                // The limiter still runs, but no client of the benchmark should be throttled.
                &["--account-rate-per-sec", "1000000", "--account-burst", "1000000"],
                extra,
            ]
            .concat(),
        )
    }

    /// `bin --addr 127.0.0.1:0 args...`, once it printed its `listening on` line.
    fn spawn(server: &str, args: &[&str]) -> Result<ServerProcess, String> {
        let mut child = Command::new(server)
            .args(["--addr", "127.0.0.1:0"])
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("{server}: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map_err(|e| e.to_string())?;
        let url = line.trim().strip_prefix("listening on ").ok_or_else(|| format!("unexpected line {line:?}"))?;
        Ok(ServerProcess { url: url.to_owned(), child })
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one request took and got.
struct Sample {
    latency: Duration,
    status: u16,
}

/// What one client did.
#[derive(Default)]
struct ClientRun {
    samples: Vec<Sample>,
    /// Keys this client meant to create an order with (fresh and twin keys).
    keys: u64,
    /// Answers that break the protocol (anything but 201, or 409 for a twin).
    unexpected: Vec<String>,
}

fn body_for(n: usize) -> String {
    format!(r#"{{"items":[{{"sku":"mug","qty":{}}},{{"sku":"filter-papers","qty":1}}]}}"#, n % 9 + 1)
}

async fn post(client: &Client, base: &str, token: &str, key: &str, body: String) -> Result<Sample, String> {
    let started = Instant::now();
    let response = client
        .post(format!("{base}/api/orders"))
        .bearer_auth(token)
        .header("idempotency-key", key)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| format!("POST {key}: {e}"))?;
    let status = response.status().as_u16();
    response.bytes().await.map_err(|e| format!("POST {key} body: {e}"))?;
    Ok(Sample { latency: started.elapsed(), status })
}

async fn run_client(index: usize, bases: Vec<String>, ops: usize) -> Result<ClientRun, String> {
    let client = Client::new();
    let session: serde_json::Value = client
        .post(format!("{}/api/session", bases[0]))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())?;
    let token = session["token"].as_str().ok_or("no session token")?.to_owned();
    let mut rng = fastrand::Rng::with_seed(index as u64);
    let mut run = ClientRun::default();
    let mut used: Vec<usize> = Vec::new();
    let base = |n: usize| bases[n % bases.len()].as_str();
    for n in 0..ops {
        let roll = rng.f64();
        if roll < RETRY_SHARE && !used.is_empty() {
            // A retry after a lost answer: same key, same body; the stored 201 comes back.
            let old = used[rng.usize(..used.len())];
            let sample = post(&client, base(n), &token, &format!("c{index}-k{old}"), body_for(old)).await?;
            if sample.status != 201 {
                run.unexpected.push(format!("retry of k{old}: {}", sample.status));
            }
            run.samples.push(sample);
        } else if roll < RETRY_SHARE + TWIN_SHARE {
            // Twins: one new key, two requests at once (to two instances when there are several).
            run.keys += 1;
            used.push(n);
            let key = format!("c{index}-k{n}");
            let (a, b) = tokio::join!(
                post(&client, base(n), &token, &key, body_for(n)),
                post(&client, base(n + 1), &token, &key, body_for(n))
            );
            for sample in [a?, b?] {
                let mut status = sample.status;
                run.samples.push(sample);
                // The loser is told 409 + Retry-After; it retries (sooner than the 1 s it is told, to keep
                // the client busy) until it gets the replay.
                while status == 409 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    let again = post(&client, base(n), &token, &key, body_for(n)).await?;
                    status = again.status;
                    run.samples.push(again);
                }
                if status != 201 {
                    run.unexpected.push(format!("twin k{n}: {status}"));
                }
            }
        } else {
            run.keys += 1;
            used.push(n);
            let sample = post(&client, base(n), &token, &format!("c{index}-k{n}"), body_for(n)).await?;
            if sample.status != 201 {
                run.unexpected.push(format!("k{n}: {}", sample.status));
            }
            run.samples.push(sample);
        }
    }
    Ok(run)
}

/// Orders, and `(account, key)` pairs with more than one order, counted in the database.
struct Counts {
    orders: i64,
    duplicates: i64,
    /// With the provider and the receiver: charges, orders with more than one charge, delivered
    /// confirmations.
    effects: Option<(i64, i64, i64)>,
}

const COUNT_ORDERS: &str = "SELECT COUNT(*) FROM orders";
const COUNT_DUPLICATES: &str =
    "SELECT COUNT(*) FROM (SELECT 1 FROM orders GROUP BY account_id, idempotency_key HAVING COUNT(*) > 1) AS d";

struct Report {
    scenario: String,
    clients: usize,
    requests: usize,
    elapsed: Duration,
    p50: Duration,
    p99: Duration,
    keys: u64,
    counts: Counts,
    unexpected: Vec<String>,
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    let index = ((sorted.len() as f64) * q) as usize;
    sorted.get(index.min(sorted.len().saturating_sub(1))).copied().unwrap_or_default()
}

/// One run of the mix against `bases`: its report, and every request's latency (sorted).
async fn drive(scenario: &str, bases: Vec<String>, args: &Args) -> Result<(Report, Vec<Duration>), String> {
    let started = Instant::now();
    let tasks: Vec<_> = (0..args.clients).map(|i| tokio::spawn(run_client(i, bases.clone(), args.ops))).collect();
    let mut latencies = Vec::new();
    let (mut keys, mut unexpected) = (0, Vec::new());
    for task in tasks {
        let run = task.await.map_err(|e| e.to_string())??;
        latencies.extend(run.samples.iter().map(|s| s.latency));
        keys += run.keys;
        unexpected.extend(run.unexpected);
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let report = Report {
        scenario: scenario.to_owned(),
        clients: args.clients,
        requests: latencies.len(),
        elapsed,
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
        keys,
        counts: Counts { orders: 0, duplicates: 0, effects: None },
        unexpected,
    };
    Ok((report, latencies))
}

async fn sqlite(scenario: &str, synchronous: &str, checkout: bool, args: &Args) -> Result<Report, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let db = dir.path().join("load.sqlite");
    let db_arg = db.to_string_lossy().into_owned();
    let mut extra = vec!["--db".to_owned(), db_arg, "--sqlite-synchronous".to_owned(), synchronous.to_owned()];
    let downstream = if checkout {
        let service = |name: &str, built: &str, file: &str| {
            let db = dir.path().join(file).to_string_lossy().into_owned();
            ServerProcess::spawn(&sibling_bin(name, built), &["--db", &db])
        };
        let provider = service("payment-provider", env!("CARGO_BIN_EXE_payment-provider"), "provider.sqlite")?;
        let mailbox = service("mail-receiver", env!("CARGO_BIN_EXE_mail-receiver"), "mail.sqlite")?;
        extra.extend(["--provider-url".to_owned(), provider.url.clone(), "--mail-url".to_owned(), mailbox.url.clone()]);
        Some((provider, mailbox))
    } else {
        None
    };
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let server = ServerProcess::start(&extra)?;
    let (mut report, _) = drive(scenario, vec![server.url.clone()], args).await?;
    let effects = match &downstream {
        Some((provider, mailbox)) => Some(effects(provider, mailbox, report.keys).await?),
        None => None,
    };
    drop(server);
    let conn = rusqlite::Connection::open(&db).map_err(|e| e.to_string())?;
    let count = |sql: &str| conn.query_row(sql, [], |row| row.get::<_, i64>(0)).map_err(|e| e.to_string());
    report.counts = Counts { orders: count(COUNT_ORDERS)?, duplicates: count(COUNT_DUPLICATES)?, effects };
    Ok(report)
}

/// The provider's charges (and orders charged twice), and the receiver's messages once the outbox drained
/// (waiting at most 60 s for `keys` of them; the timing stopped before).
async fn effects(provider: &ServerProcess, mailbox: &ServerProcess, keys: u64) -> Result<(i64, i64, i64), String> {
    let client = Client::new();
    let get = |url: String| {
        let client = client.clone();
        async move {
            let body: serde_json::Value =
                client.get(&url).send().await.map_err(|e| e.to_string())?.json().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(body)
        }
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let messages = loop {
        let messages = get(format!("{}/messages", mailbox.url)).await?["count"].as_i64().unwrap_or(0);
        if messages >= keys as i64 || Instant::now() > deadline {
            break messages;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let charges = get(format!("{}/charges", provider.url)).await?;
    let list = charges["charges"].as_array().cloned().unwrap_or_default();
    let mut references: Vec<&str> = list.iter().filter_map(|c| c["reference"].as_str()).collect();
    references.sort_unstable();
    let twice = references.windows(2).filter(|w| w[0] == w[1]).count() as i64;
    Ok((list.len() as i64, twice, messages))
}

async fn postgres(args: &Args) -> Result<Report, String> {
    let cluster = pg_cluster::Cluster::start(pg_cluster::bin_dir(), pg_cluster::Cluster::DURABLE)?;
    let (admin, connection) =
        tokio_postgres::connect(&cluster.url("postgres"), tokio_postgres::NoTls).await.map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    admin.batch_execute("CREATE DATABASE load").await.map_err(|e| e.to_string())?;
    let url = cluster.url("load");
    let servers = (0..3).map(|_| ServerProcess::start(&["--database-url", &url])).collect::<Result<Vec<_>, _>>()?;
    let bases = servers.iter().map(|s| s.url.clone()).collect();
    let (mut report, _) = drive("PostgreSQL, 3 instances", bases, args).await?;
    drop(servers);
    let (db, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let count = |row: tokio_postgres::Row| row.get::<_, i64>(0);
    report.counts = Counts {
        orders: count(db.query_one(COUNT_ORDERS, &[]).await.map_err(|e| e.to_string())?),
        duplicates: count(db.query_one(COUNT_DUPLICATES, &[]).await.map_err(|e| e.to_string())?),
        effects: None,
    };
    drop(db);
    drop(admin);
    drop(cluster);
    Ok(report)
}

/// A stand-in OTLP/HTTP receiver on 127.0.0.1: answers every `POST /v1/traces` with an empty JSON
/// export response and counts the spans it was sent. Returns its base URL and the count.
async fn otlp_receiver() -> Result<(String, Arc<AtomicUsize>), String> {
    let spans = Arc::new(AtomicUsize::new(0));
    let counted = spans.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let counted = counted.clone();
            async move {
                // Each span of the JSON export carries one `spanId`.
                let n = body.windows(b"\"spanId\"".len()).filter(|w| *w == b"\"spanId\"").count();
                counted.fetch_add(n, Ordering::Relaxed);
                ([(axum::http::header::CONTENT_TYPE, "application/json")], "{}")
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| format!("OTLP receiver: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            eprintln!("OTLP receiver: {error}");
        }
    });
    Ok((format!("http://{addr}"), spans))
}

/// The traced server against the untraced one, in alternating rounds: a report of each side (every
/// round's requests together) and the spans the receiver counted.
async fn otel(args: &Args) -> Result<(Report, Report, usize), String> {
    let (receiver, spans) = otlp_receiver().await?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let db = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let (traced_db, untraced_db) = (db("traced.sqlite"), db("untraced.sqlite"));
    let sqlite =
        |path: &str| vec!["--db".to_owned(), path.to_owned(), "--sqlite-synchronous".to_owned(), "normal".to_owned()];
    let mut traced_args = sqlite(&traced_db);
    traced_args.extend(["--otlp-endpoint".to_owned(), receiver]);
    let untraced_args = sqlite(&untraced_db);
    let start = |args: &[String]| ServerProcess::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let traced = start(&traced_args)?;
    let untraced = start(&untraced_args)?;
    let sides = [("traced (OTLP export)", &traced), ("untraced", &untraced)];
    let mut merged: Vec<Option<(Report, Vec<Duration>)>> = vec![None, None];
    for round in 0..args.rounds.max(1) {
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            let (name, server) = sides[side];
            let (report, latencies) = drive(name, vec![server.url.clone()], args).await?;
            merged[side] = Some(match merged[side].take() {
                None => (report, latencies),
                Some((mut sum, mut all)) => {
                    sum.requests += report.requests;
                    sum.elapsed += report.elapsed;
                    sum.keys += report.keys;
                    sum.unexpected.extend(report.unexpected);
                    all.extend(latencies);
                    (sum, all)
                }
            });
        }
    }
    drop(traced);
    drop(untraced);
    let mut reports = Vec::new();
    for (side, path) in merged.into_iter().zip([&traced_db, &untraced_db]) {
        let (mut report, mut latencies) = side.ok_or("no round ran")?;
        latencies.sort();
        report.p50 = percentile(&latencies, 0.50);
        report.p99 = percentile(&latencies, 0.99);
        let conn = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
        let count = |sql: &str| conn.query_row(sql, [], |row| row.get::<_, i64>(0)).map_err(|e| e.to_string());
        report.counts = Counts { orders: count(COUNT_ORDERS)?, duplicates: count(COUNT_DUPLICATES)?, effects: None };
        reports.push(report);
    }
    let untraced = reports.pop().ok_or("no untraced report")?;
    let traced = reports.pop().ok_or("no traced report")?;
    Ok((traced, untraced, spans.load(Ordering::Relaxed)))
}

fn print_header() {
    println!(
        "| scenario | clients | requests | requests/s | p50 | p99 | keys | orders | duplicates | charges (twice) / confirmations | unexpected |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
}

fn print_row(r: &Report) {
    println!(
        "| {} | {} | {} | {:.0} | {:.1} ms | {:.1} ms | {} | {} | {} | {} | {} |",
        r.scenario,
        r.clients,
        r.requests,
        r.requests as f64 / r.elapsed.as_secs_f64(),
        r.p50.as_secs_f64() * 1e3,
        r.p99.as_secs_f64() * 1e3,
        r.keys,
        r.counts.orders,
        r.counts.duplicates,
        match r.counts.effects {
            Some((charges, twice, messages)) => format!("{charges} ({twice}) / {messages}"),
            None => "–".to_owned(),
        },
        r.unexpected.len()
    );
    for problem in r.unexpected.iter().take(5) {
        eprintln!("  unexpected: {problem}");
    }
}

async fn main_async(args: Args) -> Result<bool, String> {
    let mut reports = Vec::new();
    print_header();
    if args.wanted("sqlite-full") {
        reports.push(sqlite("SQLite, synchronous=FULL", "full", false, &args).await?);
        print_row(reports.last().ok_or("no report")?);
    }
    if args.wanted("sqlite-checkout") {
        reports.push(sqlite("SQLite FULL, provider + outbox", "full", true, &args).await?);
        print_row(reports.last().ok_or("no report")?);
    }
    if args.wanted("sqlite-normal") {
        reports.push(sqlite("SQLite, synchronous=NORMAL", "normal", false, &args).await?);
        print_row(reports.last().ok_or("no report")?);
    }
    if args.wanted("postgres") {
        reports.push(postgres(&args).await?);
        print_row(reports.last().ok_or("no report")?);
    }
    if args.wanted("otel") {
        let (traced, untraced, spans) = otel(&args).await?;
        print_row(&traced);
        print_row(&untraced);
        let ratio = |t: Duration, u: Duration| t.as_secs_f64() / u.as_secs_f64();
        let rate = |r: &Report| r.requests as f64 / r.elapsed.as_secs_f64();
        println!(
            "traced ÷ untraced ({} alternating rounds each): p50 {:.2}x, p99 {:.2}x, requests/s {:.2}x; {spans} spans received over OTLP",
            args.rounds.max(1),
            ratio(traced.p50, untraced.p50),
            ratio(traced.p99, untraced.p99),
            rate(&traced) / rate(&untraced),
        );
        if spans == 0 {
            return Err("the OTLP receiver got no span: build the server with `--features otel`".to_owned());
        }
        reports.extend([traced, untraced]);
    }
    Ok(reports.iter().all(|r| {
        let effects_ok = r.counts.effects.is_none_or(|(charges, twice, messages)| {
            charges == r.keys as i64 && twice == 0 && messages == r.keys as i64
        });
        r.counts.duplicates == 0 && r.counts.orders == r.keys as i64 && r.unexpected.is_empty() && effects_ok
    }))
}

fn main() -> std::process::ExitCode {
    let args = match args() {
        Ok(args) => args,
        Err(error) => {
            eprintln!("load: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    if args.smoke && std::env::args().any(|a| a == "--ignored") {
        // `cargo test -- --ignored` runs every test target again: the smoke pass already ran.
        return std::process::ExitCode::SUCCESS;
    }
    if args.smoke {
        println!("load benchmark smoke pass (cargo test): protocol checks only, no timing; `cargo bench` measures");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("load: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(main_async(args)) {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("load: the protocol broke under load (orders != keys, a duplicate, or an unexpected answer)");
            std::process::ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("load: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
