//! Shared helpers: a real server on 127.0.0.1 with a real SQLite file in a temp dir.
#![allow(dead_code)]

use std::path::PathBuf;

use idempotent_fetch_server::{serve, Config, RunningServer};
use reqwest::{Client, Response};

pub const MUGS: &str = r#"{"items":[{"sku":"mug","qty":2}]}"#;
pub const GRINDER: &str = r#"{"items":[{"sku":"grinder","qty":1}]}"#;

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
        adjust(&mut config);
        let server = serve(config).await.expect("server starts");
        TestServer {
            server,
            client: Client::new(),
            db,
            _dir: dir,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.server.url(), path)
    }

    /// `POST /api/orders` with the given key (None: no header) and extra headers.
    pub async fn post(
        &self,
        key: Option<&str>,
        body: &str,
        headers: &[(&str, &str)],
    ) -> reqwest::Result<Response> {
        post_to(&self.client, &self.server.url(), key, body, headers).await
    }

    /// Rows in `orders` (all accounts), read straight from the SQLite file.
    pub fn count_orders(&self) -> i64 {
        count(&self.db, "SELECT COUNT(*) FROM orders")
    }

    /// Rows in `idempotency_keys`, read straight from the SQLite file.
    pub fn count_keys(&self) -> i64 {
        count(&self.db, "SELECT COUNT(*) FROM idempotency_keys")
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
    let mut request = client
        .post(format!("{base}/api/orders"))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await
}

pub fn count(db: &std::path::Path, sql: &str) -> i64 {
    let conn = rusqlite::Connection::open(db).expect("open sqlite file");
    conn.query_row(sql, [], |row| row.get(0)).expect("count")
}

pub fn header<'a>(response: &'a Response, name: &str) -> Option<&'a str> {
    response.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Asserts a problem+json answer with the given status and code.
pub async fn assert_problem(response: Response, status: u16, code: &str) -> serde_json::Value {
    assert_eq!(response.status().as_u16(), status);
    assert_eq!(
        header(&response, "content-type"),
        Some("application/problem+json")
    );
    let body: serde_json::Value = response.json().await.expect("problem json");
    assert_eq!(body["status"], status);
    assert_eq!(body["code"], code, "{body}");
    body
}
