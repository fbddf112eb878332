//! The reference server of [idempotent-fetch]: the server half of the Idempotency-Key protocol.
//!
//! `POST /api/orders` with an `Idempotency-Key` creates an order at most once per `(account, key)`:
//! the key row, the order and the stored response are committed in one transaction, and a retry with the
//! same key replays the stored response byte for byte (`Idempotent-Replayed: true`). See the README for the
//! endpoints, the account header, fault injection, retention and CORS.
//!
//! Start it in-process (as the tests do) with [`serve`]:
//!
//! ```no_run
//! # async fn demo() -> Result<(), idempotent_fetch_server::ServeError> {
//! use idempotent_fetch_server::{serve, Config};
//! let server = serve(Config::sqlite(":memory:")).await?;
//! println!("listening on {}", server.url());
//! server.shutdown().await?;
//! # Ok(()) }
//! ```
//!
//! [idempotent-fetch]: https://github.com/idempotent-fetch/idempotent-fetch
#![deny(missing_docs)]

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio::task::JoinHandle;

pub mod config;
pub mod faults;
pub mod idempotency;
pub mod keys;
pub mod orders;
pub mod problem;
pub mod routes;
pub mod store;
pub mod sweep;

pub use config::{Cli, Config, Database};
pub use faults::{FaultConfig, Faults};
pub use store::Store;

/// How long [`RunningServer::shutdown`] waits for open connections before cutting them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Errors starting or running the server.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Binding or serving failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The database could not be opened or migrated.
    #[error("database: {0}")]
    Store(#[from] store::StoreError),
    /// A flag has an unusable value.
    #[error("configuration: {0}")]
    Config(String),
}

/// Current unix time in seconds.
pub fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)).unwrap_or(0)
}

/// Opens the configured database and applies the schema.
pub async fn open_store(database: &Database) -> Result<Store, ServeError> {
    match database {
        Database::Sqlite(path) => {
            let path = path.clone();
            let store = tokio::task::spawn_blocking(move || store::SqliteStore::open(path))
                .await
                .map_err(|e| store::StoreError::Task(e.to_string()))??;
            Ok(Store::Sqlite(store))
        }
        Database::Postgres(url) => Ok(Store::Postgres(store::PostgresStore::connect(url).await?)),
    }
}

/// A server running in the background of the current tokio runtime.
#[derive(Debug)]
pub struct RunningServer {
    addr: SocketAddr,
    store: Store,
    faults: Faults,
    shutdown: watch::Sender<bool>,
    server: JoinHandle<std::io::Result<()>>,
    sweeper: JoinHandle<()>,
}

impl RunningServer {
    /// The address actually bound (with the real port when the config asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The store (tests use it to sweep or inspect).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The fault switchboard.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// A handle that starts a graceful shutdown when sent `true` (or dropped along with this server).
    pub fn shutdown_handle(&self) -> watch::Sender<bool> {
        self.shutdown.clone()
    }

    /// Stops accepting connections, lets open requests finish (at most [`SHUTDOWN_GRACE`]), stops the sweep.
    pub async fn shutdown(self) -> Result<(), ServeError> {
        let _ = self.shutdown.send(true);
        self.wait().await
    }

    /// Waits until the server stops (after a shutdown was requested through a handle).
    pub async fn wait(mut self) -> Result<(), ServeError> {
        let mut stopping = self.shutdown.subscribe();
        let result = tokio::select! {
            joined = &mut self.server => joined,
            _ = async {
                let _ = stopping.wait_for(|stop| *stop).await;
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            } => {
                tracing::warn!("connections still open after the grace period; closing them");
                self.server.abort();
                Ok(Ok(()))
            }
        };
        self.sweeper.abort();
        match result {
            Ok(served) => Ok(served?),
            Err(join) if join.is_cancelled() => Ok(()),
            Err(join) => Err(ServeError::Io(std::io::Error::other(join.to_string()))),
        }
    }
}

/// Opens the database, binds `config.addr`, and serves in the background. Returns once listening.
pub async fn serve(config: Config) -> Result<RunningServer, ServeError> {
    let store = open_store(&config.database).await?;
    serve_with_store(config, store).await
}

/// Like [`serve`], with an already opened store (several servers may share one).
pub async fn serve_with_store(config: Config, store: Store) -> Result<RunningServer, ServeError> {
    let faults = Faults::new(config.faults.clone());
    faults.get().validate().map_err(|p| ServeError::Config(p.detail))?;
    let state = routes::AppState {
        store: store.clone(),
        faults: faults.clone(),
        in_flight: idempotency::InFlight::default(),
        retention: config.retention,
    };
    let app = routes::router(state, &config)?;
    let listener = tokio::net::TcpListener::bind(config.addr).await?;
    let addr = listener.local_addr()?;

    let (shutdown, rx) = watch::channel(false);
    let mut stop = rx.clone();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|stop| *stop).await;
            })
            .await
    });
    let sweeper = tokio::spawn(sweep::run(store.clone(), config.retention, config.sweep_interval, rx));
    Ok(RunningServer { addr, store, faults, shutdown, server, sweeper })
}
