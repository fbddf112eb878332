//! Outbox benchmark: does the outbox keep up with the commits it follows? examples/invite (`invite-example`,
//! the library's `outbox::Worker` with its defaults) and the mail receiver run as processes on 127.0.0.1;
//! the harness sends a burst of invitations (each a commit with one outbox message) from concurrent clients
//! and watches the receiver's database for the emails. Two measures:
//!
//! - **burst**: invites committed per second (first request to last answer) next to emails delivered per
//!   second (first email to last email), their ratio, and the lag from the last invite's answer to the last
//!   email. A worker that keeps up delivers each email within moments of its invite, so the ratio is about 1
//!   and the lag small; one that does not builds a backlog and the lag grows with the burst.
//! - **backlog**: the worker's drain rate alone: the example is stopped, the same number of messages is
//!   written into its outbox, and the example is started again; deliveries/s from its start to the last
//!   email, next to the burst's commits/s.
//!
//! ```sh
//! cargo build --profile server -p invite-example && \
//!   cargo bench -p idempotent-fetch-server --bench outbox --profile server -- [--invites 10000] [--clients 32]
//! ```
//!
//! `invite-example` is another package, so it is built first and found next to the `mail-receiver` binary
//! of this profile; `IF_SERVER_BIN` (as in the load bench) points at a directory of other binaries instead.
//! It prints figures and fails only when an email is missing or duplicated, never on timing.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Client;

/// The longest wait for the last email before the run is reported as failed.
const DRAIN_DEADLINE: Duration = Duration::from_secs(900);

struct Args {
    invites: usize,
    clients: usize,
}

fn args() -> Result<Args, String> {
    let mut args = Args { invites: 10_000, clients: 32 };
    let mut it = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--invites" => args.invites = value()?.parse().map_err(|e| format!("--invites: {e}"))?,
            "--clients" => args.clients = value()?.parse().map_err(|e| format!("--clients: {e}"))?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if args.invites == 0 || args.clients == 0 {
        return Err("--invites and --clients must be positive".to_owned());
    }
    Ok(args)
}

/// A binary of this profile: `IF_SERVER_BIN`'s directory when set, else next to the built `mail-receiver`.
fn bin(name: &str) -> String {
    let beside = std::env::var("IF_SERVER_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_mail-receiver").to_owned());
    Path::new(&beside).with_file_name(name).to_string_lossy().into_owned()
}

/// A process started with `--addr 127.0.0.1:0`; killed on drop.
struct Process {
    child: Child,
    url: String,
}

impl Process {
    fn start(exe: &str, args: &[&str]) -> Result<Process, String> {
        let mut child = Command::new(exe)
            .args(["--addr", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .env("RUST_LOG", "warn")
            .spawn()
            .map_err(|e| format!("{exe}: {e} (build it: cargo build --profile server -p invite-example)"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map_err(|e| e.to_string())?;
        let url = line.trim().strip_prefix("listening on ").ok_or_else(|| format!("{exe}: {line:?}"))?.to_owned();
        Ok(Process { child, url })
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Emails in the receiver's database (read beside the receiver, so polling costs it no HTTP requests).
fn emails(mail_db: &Path) -> Result<usize, String> {
    let conn = rusqlite::Connection::open_with_flags(mail_db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| e.to_string())?;
    conn.busy_timeout(Duration::from_secs(5)).map_err(|e| e.to_string())?;
    let count: i64 =
        conn.query_row("SELECT count(*) FROM messages", [], |row| row.get(0)).map_err(|e| e.to_string())?;
    usize::try_from(count).map_err(|e| e.to_string())
}

/// When the receiver first held more than `from` emails, and when it held `to`.
fn watch_emails(mail_db: &Path, from: usize, to: usize) -> Result<(Instant, Instant), String> {
    let deadline = Instant::now() + DRAIN_DEADLINE;
    let mut first = None;
    loop {
        let count = emails(mail_db)?;
        let now = Instant::now();
        if count > from && first.is_none() {
            first = Some(now);
        }
        if count >= to {
            return Ok((first.unwrap_or(now), now));
        }
        if now > deadline {
            return Err(format!("{count} of {to} emails after {DRAIN_DEADLINE:?}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends `invites` invitations from `clients` concurrent clients, each with a fresh key; returns when the
/// last answer arrived.
async fn burst(url: &str, invites: usize, clients: usize) -> Result<Instant, String> {
    let client = Client::new();
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (client, next, url) = (client.clone(), Arc::clone(&next), format!("{url}/api/invites"));
            tokio::spawn(async move {
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= invites {
                        return Ok::<_, String>(());
                    }
                    let key = format!("outbox-bench-{n}-{:016x}", fastrand::u64(..));
                    let body = serde_json::json!({ "email": format!("user{n}@example.test") });
                    let answer = client
                        .post(&url)
                        .header("idempotency-key", key)
                        .json(&body)
                        .send()
                        .await
                        .map_err(|e| e.to_string())?;
                    if answer.status() != reqwest::StatusCode::CREATED {
                        return Err(format!("invite {n}: {}", answer.status()));
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    Ok(Instant::now())
}

/// Writes `count` messages into the (stopped) example's outbox in one transaction.
fn fill_outbox(invites_db: &Path, count: usize) -> Result<(), String> {
    let mut conn = rusqlite::Connection::open(invites_db).map_err(|e| e.to_string())?;
    let tx = conn.transaction().map_err(|e| e.to_string())?;
    {
        let mut insert = tx
            .prepare("INSERT INTO outbox_messages (id, topic, payload, created_at) VALUES (?1, 'invite-email', ?2, 0)")
            .map_err(|e| e.to_string())?;
        for n in 0..count {
            let payload = serde_json::json!({ "to": format!("backlog{n}@example.test"), "subject": "Invitation",
                                              "text": "You are invited." });
            insert
                .execute(rusqlite::params![format!("backlog{n:08}"), payload.to_string()])
                .map_err(|e| e.to_string())?;
        }
    }
    tx.commit().map_err(|e| e.to_string())
}

fn per_second(count: usize, span: Duration) -> f64 {
    count as f64 / span.as_secs_f64().max(1e-9)
}

async fn main_async(args: Args) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (mail_db, invites_db) = (dir.path().join("mail.sqlite"), dir.path().join("invites.sqlite"));
    let mailbox = Process::start(&bin("mail-receiver"), &["--db", &mail_db.to_string_lossy()])?;
    let app_args = ["--db", &*invites_db.to_string_lossy(), "--mail-url", &mailbox.url].map(str::to_owned);
    let app_args: Vec<&str> = app_args.iter().map(String::as_str).collect();
    let app = Process::start(&bin("invite-example"), &app_args)?;
    let n = args.invites;

    let start = Instant::now();
    let watcher = {
        let mail_db = mail_db.clone();
        tokio::task::spawn_blocking(move || watch_emails(&mail_db, 0, n))
    };
    let last_invite = burst(&app.url, n, args.clients).await?;
    let (first_email, last_email) = watcher.await.map_err(|e| e.to_string())??;
    let commits = per_second(n, last_invite - start);
    let deliveries = per_second(n, last_email.saturating_duration_since(first_email));
    let lag = last_email.saturating_duration_since(last_invite);
    drop(app);

    fill_outbox(&invites_db, n)?;
    let restarted = Instant::now();
    let app = Process::start(&bin("invite-example"), &app_args)?;
    let (_, drained) = tokio::task::spawn_blocking({
        let mail_db = mail_db.clone();
        move || watch_emails(&mail_db, n, 2 * n)
    })
    .await
    .map_err(|e| e.to_string())??;
    let drain = per_second(n, drained - restarted);
    drop(app);
    drop(mailbox);
    let total = emails(&mail_db)?;
    if total != 2 * n {
        return Err(format!("{total} emails for {} messages", 2 * n));
    }

    println!(
        "| measure | messages | clients | commits/s | deliveries/s | deliveries ÷ commits | last invite → last email |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    println!(
        "| burst | {n} | {} | {commits:.0} | {deliveries:.0} | {:.2} | {:.2} s |",
        args.clients,
        deliveries / commits,
        lag.as_secs_f64()
    );
    println!("| backlog | {n} | – | {commits:.0} (burst) | {drain:.0} | {:.2} | – |", drain / commits);
    Ok(())
}

fn main() -> std::process::ExitCode {
    let args = match args() {
        Ok(args) => args,
        Err(error) => {
            eprintln!("outbox bench: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("outbox bench: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(main_async(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("outbox bench: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
