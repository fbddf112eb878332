//! The services the order flow talks to beyond its database, as real separate processes: a payment
//! provider ([`provider`], itself an Idempotency-Key server) and a mail receiver ([`mailbox`], which
//! stores each message once by its id). Each runs as its own binary (`payment-provider`, `mail-receiver`)
//! with its own SQLite file; the tests, the fault suite and the demo start them on 127.0.0.1. Beside
//! them, the demo's trace receiver ([`traces`], binary `trace-receiver`), which keeps the spans exported
//! to it in memory.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::Connection;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::store::StoreError;

pub mod mailbox;
pub mod provider;
pub mod traces;

/// A service's SQLite connection, shared by its handlers and used from the blocking pool.
#[derive(Debug, Clone)]
pub(crate) struct Db(Arc<Mutex<Connection>>);

impl Db {
    /// Opens (creating if needed) the database at `path` and applies `schema`.
    pub(crate) fn open(path: impl AsRef<Path>, schema: &str) -> Result<Self, StoreError> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(idempotent_endpoint::sqlite::BUSY_TIMEOUT)?;
        let _mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
        conn.execute_batch("PRAGMA synchronous = FULL;")?;
        conn.execute_batch(schema)?;
        Ok(Db(Arc::new(Mutex::new(conn))))
    }

    /// Runs `f` with the connection on the blocking pool.
    pub(crate) async fn run<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let conn = Arc::clone(&self.0);
        tokio::task::spawn_blocking(move || f(&mut lock(&conn))).await.map_err(|e| StoreError::Task(e.to_string()))?
    }
}

fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A service listening in the background of the current tokio runtime.
#[derive(Debug)]
pub struct RunningService {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: JoinHandle<std::io::Result<()>>,
}

impl RunningService {
    /// Binds `addr` and serves `app` until [`RunningService::shutdown`].
    pub async fn start(addr: SocketAddr, app: axum::Router) -> std::io::Result<RunningService> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (stop, mut rx) = watch::channel(false);
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.wait_for(|stop| *stop).await;
                })
                .await
        });
        Ok(RunningService { addr, stop, task })
    }

    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops and waits for the open connections.
    pub async fn shutdown(self) -> std::io::Result<()> {
        let _ = self.stop.send(true);
        self.task.await.map_err(std::io::Error::other)?
    }

    /// Waits until the service stops (it never does on its own; a binary waits here until killed).
    pub async fn wait(self) -> std::io::Result<()> {
        self.task.await.map_err(std::io::Error::other)?
    }
}

/// A probability from a fault body: 0..=1.
pub(crate) fn probability(name: &str, p: f64) -> Result<f64, crate::problem::Problem> {
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(crate::problem::Problem::bad_request(
            "invalid-fault-config",
            format!("{name} must be a probability between 0 and 1, got {p}."),
        ))
    }
}

/// True with probability `p`.
pub(crate) fn hit(p: f64) -> bool {
    p > 0.0 && fastrand::f64() < p
}
