//! Shared helpers: a real server on 127.0.0.1 with a real SQLite file in a temp dir, and the requests
//! and checks the HTTP and store tests share.
#![allow(dead_code)]

pub mod checkout;
pub mod processes;

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use idempotent_fetch_server::keys::{fingerprint, AccountId, IdempotencyKey};
use idempotent_fetch_server::protocol::KeyedRequest;
use idempotent_fetch_server::session::SessionKey;
use idempotent_fetch_server::store::ProcessOptions;
use idempotent_fetch_server::{serve, Config, RunningServer};
use reqwest::{Client, RequestBuilder, Response};
use tokio::task::JoinHandle;

pub const MUGS: &str = r#"{"items":[{"sku":"mug","qty":2}]}"#;
pub const GRINDER: &str = r#"{"items":[{"sku":"grinder","qty":1}]}"#;
/// The retention window the tests sweep with: one day.
pub const RETENTION: Duration = Duration::from_secs(86_400);
/// The session secret of every test server, so tests can issue sessions themselves.
pub const SECRET: &str = "a test secret of at least thirty-two bytes";
/// The account of requests that name none.
pub const DEFAULT_ACCOUNT: &str = "demo";

/// `Bearer TOKEN` for a session of `account` signed with [`SECRET`].
pub fn bearer(account: &str) -> String {
    let key = SessionKey::from_secret(SECRET.as_bytes()).expect("secret");
    let session = key.issue(AccountId::parse(account).expect("account"), idempotent_fetch_server::unix_now());
    format!("Bearer {}", session.token)
}

pub struct TestServer {
    pub server: RunningServer,
    pub client: Client,
    pub db: PathBuf,
    _dir: tempfile::TempDir,
}

impl TestServer {
    pub async fn start() -> TestServer {
        TestServer::start_with(|_| {}).await
    }

    pub async fn start_with(adjust: impl FnOnce(&mut Config)) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("test.sqlite");
        let mut config = Config::sqlite(db.to_string_lossy().into_owned());
        config.session_secret = Some(SECRET.to_owned());
        adjust(&mut config);
        let server = serve(config).await.expect("server starts");
        TestServer { server, client: Client::new(), db, _dir: dir }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.server.url(), path)
    }

    /// `POST /api/orders` with the given key (None: no header) and extra headers; as the default account
    /// unless the headers carry an `authorization`.
    pub async fn post(&self, key: Option<&str>, body: &str, headers: &[(&str, &str)]) -> reqwest::Result<Response> {
        post_to(&self.client, &self.server.url(), key, body, headers).await
    }

    /// The status of `POST /api/orders` (see [`TestServer::post`]); the request must get an answer.
    pub async fn post_status(&self, key: Option<&str>, body: &str, headers: &[(&str, &str)]) -> u16 {
        self.post(key, body, headers).await.expect("post").status().as_u16()
    }

    /// `GET path` as JSON, as the default account.
    pub async fn get_json(&self, path: &str) -> serde_json::Value {
        json(self.client.get(self.url(path)).header("authorization", bearer(DEFAULT_ACCOUNT))).await
    }

    /// [`idempotent_fetch_server::sweep::sweep_once`] on this server's store as at unix time `at`: every key
    /// row is first aged by `at - now` in the file (the library's sweep reads the clock).
    pub async fn sweep(&self, at: i64) -> Option<u64> {
        let conn = rusqlite::Connection::open(&self.db).expect("open sqlite file");
        let by = at - idempotent_fetch_server::unix_now();
        conn.execute("UPDATE idempotency_records SET created_at = created_at - ?1", [by]).expect("age key rows");
        idempotent_fetch_server::sweep::sweep_once(self.server.store(), RETENTION).await.ok()
    }

    /// Rows in `orders` (all accounts), read straight from the SQLite file.
    pub fn count_orders(&self) -> i64 {
        count(&self.db, "SELECT COUNT(*) FROM orders")
    }

    /// Rows in `idempotency_records`, read straight from the SQLite file.
    pub fn count_keys(&self) -> i64 {
        count(&self.db, "SELECT COUNT(*) FROM idempotency_records")
    }

    pub async fn stop(self) {
        self.server.shutdown().await.expect("clean shutdown");
    }
}

pub async fn post_to(
    client: &Client,
    base: &str,
    key: Option<&str>,
    body: &str,
    headers: &[(&str, &str)],
) -> reqwest::Result<Response> {
    let mut request =
        client.post(format!("{base}/api/orders")).header("content-type", "application/json").body(body.to_owned());
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("authorization")) {
        request = request.header("authorization", bearer(DEFAULT_ACCOUNT));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await
}

/// [`post_to`] in a task of its own, for a request that is still running while the test goes on.
pub fn spawn_post(
    client: &Client,
    base: &str,
    key: &str,
    body: &'static str,
    headers: &[(&str, &str)],
) -> JoinHandle<reqwest::Result<Response>> {
    let (client, base, key) = (client.clone(), base.to_owned(), key.to_owned());
    let headers = owned(headers);
    tokio::spawn(async move { post_to(&client, &base, Some(&key), body, &borrowed(&headers)).await })
}

/// What a test needs of one answer, read in full.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    /// `Idempotent-Replayed: true` was set.
    pub replayed: bool,
    pub retry_after: Option<String>,
    pub body: Bytes,
}

impl Answer {
    pub async fn read(response: Response) -> reqwest::Result<Answer> {
        let status = response.status().as_u16();
        let replayed = header(&response, "idempotent-replayed") == Some("true");
        let retry_after = header(&response, "retry-after").map(str::to_owned);
        let body = response.bytes().await?;
        Ok(Answer { status, replayed, retry_after, body })
    }
}

/// `count` POSTs with one key, all at once, spread round-robin over the servers at `bases`.
pub async fn post_concurrently(
    client: &Client,
    bases: &[String],
    count: usize,
    key: &str,
    body: &'static str,
    headers: &[(&str, &str)],
) -> Vec<Answer> {
    let tasks: Vec<_> = (0..count)
        .map(|i| {
            let (client, base, key) = (client.clone(), bases[i % bases.len()].clone(), key.to_owned());
            let headers = owned(headers);
            tokio::spawn(async move {
                let response = post_to(&client, &base, Some(&key), body, &borrowed(&headers)).await?;
                Answer::read(response).await
            })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.expect("task").expect("answer"));
    }
    answers
}

/// Concurrent requests with one key: each is a 201 (at most one of them the original, every body the same
/// order) or a 409 with `Retry-After: 1`.
pub fn assert_one_order(answers: &[Answer]) {
    let mut originals = 0;
    let mut bodies = Vec::new();
    for answer in answers {
        match answer.status {
            201 => {
                originals += usize::from(!answer.replayed);
                bodies.push(&answer.body);
            }
            409 => assert_eq!(answer.retry_after.as_deref(), Some("1")),
            other => panic!("unexpected status {other}: {:?}", answer.body),
        }
    }
    assert!(originals <= 1, "{originals} original answers");
    assert!(bodies.windows(2).all(|w| w[0] == w[1]), "all 201 bodies are the same order");
}

fn owned(headers: &[(&str, &str)]) -> Vec<(String, String)> {
    headers.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())).collect()
}

fn borrowed(headers: &[(String, String)]) -> Vec<(&str, &str)> {
    headers.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect()
}

/// Sends the request and reads the answer as JSON.
pub async fn json(request: RequestBuilder) -> serde_json::Value {
    request.send().await.expect("send").json().await.expect("json")
}

/// The store-level request `POST /api/orders` with `body` makes, for `account` and `key` at unix time `now`.
pub fn keyed_request(account: &str, key: &str, body: &str, now: i64) -> KeyedRequest {
    KeyedRequest {
        account: AccountId::parse(account).expect("account"),
        key: IdempotencyKey::parse(key).expect("key"),
        request_hash: fingerprint("POST", "/api/orders", body.as_bytes()),
        body: Bytes::from(body.to_owned()),
        now,
    }
}

/// The body of the key-row rows' stored answers, in bytes, summed, read straight from the SQLite file.
pub fn stored_bytes(db: &std::path::Path) -> i64 {
    count(db, "SELECT COALESCE(SUM(LENGTH(response_body) + LENGTH(response_headers)), 0) FROM idempotency_records")
}

/// Options that roll the transaction back after the work, as a crash before `COMMIT` would.
pub fn crash_before_commit() -> ProcessOptions {
    ProcessOptions { fail_before_commit: true, ..ProcessOptions::default() }
}

pub fn count(db: &std::path::Path, sql: &str) -> i64 {
    let conn = rusqlite::Connection::open(db).expect("open sqlite file");
    conn.query_row(sql, [], |row| row.get(0)).expect("count")
}

pub fn header<'a>(response: &'a Response, name: &str) -> Option<&'a str> {
    response.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Asserts a 201 that was not replayed: the work was done for this request.
pub fn assert_fresh(response: &Response) {
    assert_eq!(response.status(), 201);
    assert_eq!(header(response, "idempotent-replayed"), None);
}

/// Asserts a 201 replayed from the key's stored response.
pub fn assert_replayed(response: &Response) {
    assert_eq!(response.status(), 201);
    assert_eq!(header(response, "idempotent-replayed"), Some("true"));
}

/// Asserts a problem+json answer with the given status and code.
pub async fn assert_problem(response: Response, status: u16, code: &str) -> serde_json::Value {
    assert_eq!(response.status().as_u16(), status);
    assert_eq!(header(&response, "content-type"), Some("application/problem+json"));
    let body: serde_json::Value = response.json().await.expect("problem json");
    assert_eq!(body["status"], status);
    assert_eq!(body["code"], code, "{body}");
    body
}

pub mod key_status;
