//! Command-line flags and the server configuration they produce.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::faults::FaultConfig;
use crate::store::{PgOptions, PgTls, Synchronous};

/// The default `--db`.
pub const DEFAULT_DB: &str = "idempotent-fetch-demo.sqlite";

/// `idempotent-fetch-server` flags.
#[derive(Debug, Clone, Parser)]
#[command(name = "idempotent-fetch-server", version, about = "Reference server for idempotent-fetch")]
pub struct Cli {
    /// Address to listen on; port 0 picks a free port (printed as `listening on http://ADDR`).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// SQLite database file (`:memory:` for a throwaway in-memory database).
    #[arg(long, default_value = DEFAULT_DB)]
    pub db: String,
    /// SQLite durability: `full` syncs every commit (an order confirmed survives a power loss); `normal` is
    /// faster but a power loss can undo the last confirmed orders.
    #[arg(long, default_value = "full", value_parser = synchronous_parser())]
    pub sqlite_synchronous: Synchronous,
    /// PostgreSQL URL (`postgres://user@host:port/db`); when given, used instead of `--db`.
    #[arg(long)]
    pub database_url: Option<String>,
    /// PostgreSQL connections per server instance.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    pub pg_pool_size: u16,
    /// PostgreSQL `statement_timeout`, in milliseconds.
    #[arg(long, default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub pg_statement_timeout_ms: u64,
    /// PostgreSQL `idle_in_transaction_session_timeout`, in milliseconds.
    #[arg(long, default_value_t = 15_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub pg_idle_in_transaction_timeout_ms: u64,
    /// Require TLS (rustls) to PostgreSQL, verifying its certificate against the Mozilla roots or
    /// `--pg-ca-file`.
    #[arg(long)]
    pub pg_tls: bool,
    /// PEM file of the certificates to trust for PostgreSQL's TLS (implies `--pg-tls`).
    #[arg(long)]
    pub pg_ca_file: Option<PathBuf>,
    /// Directory of static files served at `/` (the demo page).
    #[arg(long)]
    pub www: Option<PathBuf>,
    /// Directory served at `/pkg/` (the wasm-pack `--target web` build).
    #[arg(long)]
    pub pkg: Option<PathBuf>,
    /// How long idempotency keys are remembered, in seconds.
    #[arg(long, default_value_t = 86_400)]
    pub retention_secs: u64,
    /// How often expired keys are deleted, in seconds.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub sweep_interval_secs: u64,
    /// Allowed CORS origin (repeatable; `*` for any). Without it no CORS headers are sent.
    #[arg(long = "cors-origin")]
    pub cors_origins: Vec<String>,
    /// Test and demo mode: `/api/faults`, the `X-Fault` header and sessions for a named account. Never on a
    /// server others can reach.
    #[arg(long)]
    pub enable_faults: bool,
    /// Secret (at least 32 bytes) that signs sessions; instances sharing a database should share it.
    /// Without it a random secret is drawn at start (sessions end with the process).
    #[arg(long, env = "IF_SESSION_SECRET", hide_env_values = true)]
    pub session_secret: Option<String>,
    /// Mark the session cookie `Secure` (when the server is reached over HTTPS).
    #[arg(long)]
    pub secure_cookie: bool,
    /// Largest request body, in bytes (413 above).
    #[arg(long, default_value_t = Limits::default().max_body_bytes)]
    pub max_body_bytes: usize,
    /// Time a client has to send a request's headers, in seconds (the connection is closed after).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout_secs: u64,
    /// Longest pause between two chunks of a request body, in seconds (408 after).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout_secs: u64,
    /// Longest time for a whole request, body included, in seconds (408 after).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout_secs: u64,
    /// Most API requests served at once (503 with `Retry-After` above; `/api/health` is not counted).
    #[arg(long, default_value_t = Limits::default().max_concurrent_requests, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_concurrent_requests: u32,
    /// Most open connections (more are closed at once).
    #[arg(long, default_value_t = Limits::default().max_connections, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Most open connections from one address (an IPv4 address or an IPv6 /64); more are closed at once.
    /// Behind a reverse proxy every client has the proxy's address: raise it to `--max-connections`.
    #[arg(long, default_value_t = Limits::default().max_connections_per_ip, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections_per_ip: u32,
    /// Most API requests in flight from one address (429 with `Retry-After` above).
    #[arg(long, default_value_t = Limits::default().max_requests_per_ip, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_requests_per_ip: u32,
    /// Largest request head (request line and headers) a connection may buffer, in bytes (431 above); at
    /// least 8192.
    #[arg(long, default_value_t = Limits::default().max_header_bytes, value_parser = header_bytes)]
    pub max_header_bytes: usize,
    /// Time a new connection has to send its first byte, in seconds (it is closed after).
    #[arg(long, default_value_t = Limits::default().first_byte_timeout.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub first_byte_timeout_secs: u64,
    /// Slowest accepted upload, in bytes per second: a body must arrive within `--body-timeout-secs`
    /// plus one second per this many bytes received (408 after).
    #[arg(long, default_value_t = Limits::default().min_upload_bytes_per_sec, value_parser = clap::value_parser!(u32).range(1..))]
    pub min_upload_bytes_per_sec: u32,
    /// Time the body of `POST /api/session` (at most 1 KiB) may take, in seconds (408 after).
    #[arg(long, default_value_t = Limits::default().session_body_timeout.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub session_body_timeout_secs: u64,
    /// `POST /api/orders` per second and account, sustained (429 with `Retry-After` above).
    #[arg(long, default_value_t = Limits::default().account_rate_per_sec, value_parser = clap::value_parser!(u32).range(1..))]
    pub account_rate_per_sec: u32,
    /// `POST /api/orders` an account may send at once before the rate applies.
    #[arg(long, default_value_t = Limits::default().account_burst, value_parser = clap::value_parser!(u32).range(1..))]
    pub account_burst: u32,
    /// Serve `GET /metrics` (Prometheus/OpenMetrics text) on this address, apart from the API: bind it
    /// to 127.0.0.1 or a private network the scraper is on. Without it there is no metrics endpoint.
    #[arg(long)]
    pub metrics_addr: Option<SocketAddr>,
    /// The OTLP/HTTP collector spans are exported to (e.g. `http://127.0.0.1:4318`; `/v1/traces` is
    /// appended). Needs the `otel` feature (a default one); without the flag nothing is exported.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// The payment provider and the mail receiver the order flow talks to.
    #[command(flatten)]
    pub checkout: CheckoutArgs,
}

/// Parses `--max-header-bytes`: a number of bytes, at least [`MIN_HEADER_BYTES`].
fn header_bytes(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n >= MIN_HEADER_BYTES => Ok(n),
        Ok(_) => Err(format!("at least {MIN_HEADER_BYTES}")),
        Err(e) => Err(e.to_string()),
    }
}

/// Where keys and orders are stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    /// An SQLite file, or `:memory:`, with its durability.
    Sqlite(String, Synchronous),
    /// A PostgreSQL connection URL and settings.
    Postgres(String, PgOptions),
}

/// The smallest `max_header_bytes`: hyper cannot read a connection with a smaller buffer.
pub const MIN_HEADER_BYTES: usize = 8192;

/// Timeouts and limits that keep one client from taking the server.
///
/// # Default
/// 64 KiB bodies; 3 s to the first byte of a connection, 10 s for the headers, 10 s between body chunks,
/// uploads of at least 1 KiB/s after the first 10 s, 2 s for a session request's body, 30 s per request;
/// 16 KiB of request head; 256 API requests at once, 64 from one address; 1,024 connections, 128 from one
/// address; 50 orders per second and account with bursts of 200.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Time to send the request headers.
    pub header_timeout: Duration,
    /// Longest pause between body chunks.
    pub body_timeout: Duration,
    /// Longest whole request.
    pub request_timeout: Duration,
    /// Most API requests at once.
    pub max_concurrent_requests: u32,
    /// Most open connections.
    pub max_connections: u32,
    /// Most open connections from one address.
    pub max_connections_per_ip: u32,
    /// Most API requests in flight from one address.
    pub max_requests_per_ip: u32,
    /// Largest request head a connection buffers (at least [`MIN_HEADER_BYTES`]).
    pub max_header_bytes: usize,
    /// Time a new connection has to send its first byte.
    pub first_byte_timeout: Duration,
    /// Slowest accepted upload: a body gets `body_timeout` plus one second per this many bytes received.
    pub min_upload_bytes_per_sec: u32,
    /// Time the body of `POST /api/session` may take.
    pub session_body_timeout: Duration,
    /// Sustained `POST /api/orders` per second and account.
    pub account_rate_per_sec: u32,
    /// Burst of `POST /api/orders` per account.
    pub account_burst: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 64 * 1024,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_concurrent_requests: 256,
            max_connections: 1024,
            max_connections_per_ip: 128,
            max_requests_per_ip: 64,
            max_header_bytes: 16 * 1024,
            first_byte_timeout: Duration::from_secs(3),
            min_upload_bytes_per_sec: 1024,
            session_body_timeout: Duration::from_secs(2),
            account_rate_per_sec: 50,
            account_burst: 200,
        }
    }
}

/// Everything [`crate::serve`] needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to bind (port 0: any free port).
    pub addr: SocketAddr,
    /// The database.
    pub database: Database,
    /// Static files at `/`.
    pub www: Option<PathBuf>,
    /// Static files at `/pkg/`.
    pub pkg: Option<PathBuf>,
    /// Key retention.
    pub retention: Duration,
    /// Sweep period.
    pub sweep_interval: Duration,
    /// CORS origins (`*` for any; empty: no CORS).
    pub cors_origins: Vec<String>,
    /// The fault switchboard's initial configuration, `None` without `--enable-faults`.
    pub faults: Option<FaultConfig>,
    /// The session secret; `None`: random per start.
    pub session_secret: Option<String>,
    /// `Secure` session cookies.
    pub secure_cookie: bool,
    /// Timeouts and limits.
    pub limits: Limits,
    /// The order flow in phases through a payment provider (and a mail receiver); `None`: one transaction.
    pub checkout: Option<CheckoutConfig>,
    /// Where `GET /metrics` is served; `None`: nowhere.
    pub metrics_addr: Option<SocketAddr>,
}

impl Config {
    /// A configuration for tests: `127.0.0.1:0`, the given SQLite path (synchronous FULL), 24 h retention,
    /// faults enabled (none active), a random session secret, default limits.
    pub fn sqlite(path: impl Into<String>) -> Self {
        Config {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            database: Database::Sqlite(path.into(), Synchronous::Full),
            www: None,
            pkg: None,
            retention: Duration::from_secs(86_400),
            sweep_interval: Duration::from_secs(60),
            cors_origins: Vec::new(),
            faults: Some(FaultConfig::default()),
            session_secret: None,
            secure_cookie: false,
            limits: Limits::default(),
            checkout: None,
            metrics_addr: None,
        }
    }

    /// Like [`Config::sqlite`], with a PostgreSQL URL and default settings.
    pub fn postgres(url: impl Into<String>) -> Self {
        Config { database: Database::Postgres(url.into(), PgOptions::default()), ..Config::sqlite(":memory:") }
    }
}

/// `--sqlite-synchronous`: `full` or `normal`, into the library's setting.
fn synchronous_parser() -> impl clap::builder::TypedValueParser<Value = Synchronous> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(["full", "normal"]).map(|name| match name.as_str() {
        "normal" => Synchronous::Normal,
        _ => Synchronous::Full,
    })
}

impl From<Cli> for Config {
    fn from(cli: Cli) -> Self {
        let pg = PgOptions {
            pool_size: usize::from(cli.pg_pool_size),
            statement_timeout: Duration::from_millis(cli.pg_statement_timeout_ms),
            idle_in_transaction_timeout: Duration::from_millis(cli.pg_idle_in_transaction_timeout_ms),
            tls: if cli.pg_tls || cli.pg_ca_file.is_some() {
                PgTls::Required { ca_file: cli.pg_ca_file }
            } else {
                PgTls::Disabled
            },
        };
        Config {
            addr: cli.addr,
            database: match cli.database_url {
                Some(url) => Database::Postgres(url, pg),
                None => Database::Sqlite(cli.db, cli.sqlite_synchronous),
            },
            www: cli.www,
            pkg: cli.pkg,
            retention: Duration::from_secs(cli.retention_secs),
            sweep_interval: Duration::from_secs(cli.sweep_interval_secs),
            cors_origins: cli.cors_origins,
            faults: cli.enable_faults.then(FaultConfig::default),
            session_secret: cli.session_secret,
            secure_cookie: cli.secure_cookie,
            limits: Limits {
                max_body_bytes: cli.max_body_bytes,
                header_timeout: Duration::from_secs(cli.header_timeout_secs),
                body_timeout: Duration::from_secs(cli.body_timeout_secs),
                request_timeout: Duration::from_secs(cli.request_timeout_secs),
                max_concurrent_requests: cli.max_concurrent_requests,
                max_connections: cli.max_connections,
                max_connections_per_ip: cli.max_connections_per_ip,
                max_requests_per_ip: cli.max_requests_per_ip,
                max_header_bytes: cli.max_header_bytes,
                first_byte_timeout: Duration::from_secs(cli.first_byte_timeout_secs),
                min_upload_bytes_per_sec: cli.min_upload_bytes_per_sec,
                session_body_timeout: Duration::from_secs(cli.session_body_timeout_secs),
                account_rate_per_sec: cli.account_rate_per_sec,
                account_burst: cli.account_burst,
            },
            checkout: cli.checkout.into_config(),
            metrics_addr: cli.metrics_addr,
        }
    }
}

/// The default `--key-lease-ms`.
pub const DEFAULT_KEY_LEASE: Duration = Duration::from_secs(10);

/// The order-flow flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CheckoutArgs {
    /// Charge every order through this payment provider (`http://host:port`, a `payment-provider`), in
    /// atomic phases. Without it an order is one transaction and nothing leaves the database.
    #[arg(long)]
    pub provider_url: Option<String>,
    /// Send each order's confirmation through this mail receiver (`http://host:port`, a `mail-receiver`),
    /// by the transactional outbox.
    #[arg(long, requires = "provider_url")]
    pub mail_url: Option<String>,
    /// How long a request (or the completer) holds an unfinished key before another may take it over, in
    /// milliseconds. Provider and mail calls time out at a third of it, so a holder is done before it ends.
    #[arg(long, default_value_t = DEFAULT_KEY_LEASE.as_millis() as u64, value_parser = clap::value_parser!(u64).range(300..=600_000))]
    pub key_lease_ms: u64,
}

impl CheckoutArgs {
    /// The configuration, `None` without `--provider-url`.
    pub fn into_config(self) -> Option<CheckoutConfig> {
        let provider_url = self.provider_url?;
        Some(CheckoutConfig {
            provider_url,
            mail_url: self.mail_url,
            key_lease: Duration::from_millis(self.key_lease_ms),
        })
    }
}

/// Where the order flow charges and confirms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckoutConfig {
    /// The payment provider's base URL.
    pub provider_url: String,
    /// The mail receiver's base URL; `None`: no confirmations.
    pub mail_url: Option<String>,
    /// How long a holder keeps an unfinished key.
    pub key_lease: Duration,
}
