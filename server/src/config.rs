//! Command-line flags and the server configuration they produce.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::faults::FaultConfig;

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
    /// PostgreSQL URL (`postgres://user@host:port/db`); when given, used instead of `--db`.
    #[arg(long)]
    pub database_url: Option<String>,
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
}

/// Where keys and orders are stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    /// An SQLite file, or `:memory:`.
    Sqlite(String),
    /// A PostgreSQL connection URL.
    Postgres(String),
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
    /// Initial fault configuration (default: no faults).
    pub faults: FaultConfig,
}

impl Config {
    /// A configuration for tests: `127.0.0.1:0`, the given SQLite path, 24 h retention, no faults.
    pub fn sqlite(path: impl Into<String>) -> Self {
        Config {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            database: Database::Sqlite(path.into()),
            www: None,
            pkg: None,
            retention: Duration::from_secs(86_400),
            sweep_interval: Duration::from_secs(60),
            cors_origins: Vec::new(),
            faults: FaultConfig::default(),
        }
    }

    /// Like [`Config::sqlite`], with a PostgreSQL URL.
    pub fn postgres(url: impl Into<String>) -> Self {
        Config { database: Database::Postgres(url.into()), ..Config::sqlite(":memory:") }
    }
}

impl From<Cli> for Config {
    fn from(cli: Cli) -> Self {
        Config {
            addr: cli.addr,
            database: match cli.database_url {
                Some(url) => Database::Postgres(url),
                None => Database::Sqlite(cli.db),
            },
            www: cli.www,
            pkg: cli.pkg,
            retention: Duration::from_secs(cli.retention_secs),
            sweep_interval: Duration::from_secs(cli.sweep_interval_secs),
            cors_origins: cli.cors_origins,
            faults: FaultConfig::default(),
        }
    }
}
