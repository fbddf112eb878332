//! Serving: the accept loop (connection caps, server-wide and per address, the time to the first byte, and
//! hyper with a timer for the header-read timeout and a small header buffer), graceful shutdown, and the
//! background sweep.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;
use tower::ServiceExt;

use crate::address::AddressSlots;
use crate::config::{Config, Database, MIN_HEADER_BYTES};
use crate::error::ServeError;
use crate::faults::Faults;
use crate::session::SessionKey;
use crate::state::{account_limiter, AppState};
use crate::store::{self, Store};
use idempotent_endpoint::inflight::InFlightKeys;

/// How long [`RunningServer::shutdown`] waits for open connections before cutting them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Opens the configured database and applies the schema; the library remembers key rows for `retention`.
pub async fn open_store(database: &Database, retention: Duration) -> Result<Store, ServeError> {
    match database {
        Database::Sqlite(path, synchronous) => {
            Ok(Store::Sqlite(store::SqliteStore::open(path.clone(), *synchronous, retention).await?))
        }
        Database::Postgres(url, options) => {
            Ok(Store::Postgres(store::PostgresStore::connect(url, options, retention).await?))
        }
    }
}

/// A server running in the background of the current tokio runtime.
#[derive(Debug)]
pub struct RunningServer {
    addr: SocketAddr,
    store: Store,
    faults: Option<Faults>,
    sessions: SessionKey,
    shutdown: watch::Sender<bool>,
    server: JoinHandle<()>,
    background: Vec<JoinHandle<()>>,
    metrics_addr: Option<SocketAddr>,
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

    /// Where `GET /metrics` is served (with the real port), if it is (`--metrics-addr`).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The store (tests use it to sweep or inspect).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The fault switchboard (`None` without `--enable-faults`).
    pub fn faults(&self) -> Option<&Faults> {
        self.faults.as_ref()
    }

    /// The key that signs this server's sessions (tests issue sessions with it).
    pub fn sessions(&self) -> &SessionKey {
        &self.sessions
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
    pub async fn wait(self) -> Result<(), ServeError> {
        let joined = self.server.await;
        for task in &self.background {
            task.abort();
        }
        match joined {
            Ok(()) => Ok(()),
            Err(join) if join.is_cancelled() => Ok(()),
            Err(join) => Err(ServeError::Io(std::io::Error::other(join.to_string()))),
        }
    }
}

/// Opens the database, binds `config.addr`, and serves in the background. Returns once listening.
pub async fn serve(config: Config) -> Result<RunningServer, ServeError> {
    let store = open_store(&config.database, config.retention).await?;
    serve_with_store(config, store).await
}

/// Like [`serve`], with an already opened store (several servers may share one).
pub async fn serve_with_store(config: Config, store: Store) -> Result<RunningServer, ServeError> {
    let faults = match &config.faults {
        Some(initial) => {
            initial.validate().map_err(|p| ServeError::Config(p.detail))?;
            tracing::warn!("faults ENABLED (--enable-faults): /api/faults, X-Fault and named sessions are on");
            Some(Faults::new(initial.clone()))
        }
        None => {
            tracing::info!("faults disabled: /api/faults is 404 and X-Fault is ignored");
            None
        }
    };
    let sessions = match &config.session_secret {
        Some(secret) => SessionKey::from_secret(secret.as_bytes()),
        None => {
            tracing::info!("no --session-secret: sessions are signed with a random secret and end with this process");
            SessionKey::random()
        }
    }
    .map_err(|e| ServeError::Config(e.to_string()))?;
    let limiter = Arc::new(account_limiter(&config.limits));
    let checkout = config.checkout.clone().map(crate::checkout::Checkout::new).transpose()?;
    let state = AppState {
        store: store.clone(),
        faults: faults.clone(),
        in_flight: InFlightKeys::default(),
        retention: config.retention,
        sessions: sessions.clone(),
        secure_cookie: config.secure_cookie,
        limiter: Arc::clone(&limiter),
        api_slots: crate::limits::ApiSlots::new(&config.limits),
        checkout: checkout.clone(),
        metrics: crate::metrics::Metrics::new(),
    };
    let metrics = state.metrics.clone();
    let scrape = crate::scrape::Scrape {
        metrics: metrics.clone(),
        in_flight: state.in_flight.clone(),
        store: store.clone(),
        outbox: checkout.as_ref().is_some_and(|c| c.config().mail_url.is_some()),
    };
    let app = crate::routes::router(state, &config)?;
    let listener = TcpListener::bind(config.addr).await?;
    let addr = listener.local_addr()?;

    let (shutdown, rx) = watch::channel(false);
    let server = tokio::spawn(accept_loop(listener, app, config.clone(), rx.clone()));
    let metrics_listener = match config.metrics_addr {
        Some(addr) => Some(crate::scrape::serve(addr, scrape, rx.clone()).await?),
        None => None,
    };
    let sweeper =
        tokio::spawn(crate::sweep::run(store.clone(), config.retention, config.sweep_interval, metrics.clone(), rx));
    // The limiter keeps a bucket per account seen; forget the idle ones now and then.
    let forget = tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_secs(60));
        loop {
            ticker.tick().await;
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    });
    let mut background = vec![sweeper, forget];
    let metrics_addr = metrics_listener.map(|(addr, task)| {
        background.push(task);
        addr
    });
    if let Some(checkout) = checkout {
        background.extend(spawn_workers(&store, &checkout, faults.as_ref(), &metrics, &shutdown));
    }
    Ok(RunningServer { addr, store, faults, sessions, shutdown, server, background, metrics_addr })
}

/// Accepts connections until `stop` turns true, then lets open connections finish (at most
/// [`SHUTDOWN_GRACE`]).
///
/// Before a connection is served: the server-wide cap and its address's share of connections (over either
/// it is closed at once rather than queued), then its first byte within `first_byte_timeout` (an idle
/// socket is closed instead of holding a slot). hyper then reads the request head into a buffer of at most
/// `max_header_bytes` (431 above), within `header_timeout` (also between keep-alive requests).
async fn accept_loop(listener: TcpListener, app: axum::Router, config: Config, mut stop: watch::Receiver<bool>) {
    let limits = config.limits;
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_header_bytes.max(MIN_HEADER_BYTES))
        .keep_alive(true);
    let connections = Arc::new(Semaphore::new(usize::try_from(limits.max_connections).unwrap_or(usize::MAX)));
    let per_address = AddressSlots::new(limits.max_connections_per_ip);
    let graceful = GracefulShutdown::new();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: wait a little instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = stopped(&mut stop) => break,
        };
        let (Ok(permit), Some(address_slot)) =
            (Arc::clone(&connections).try_acquire_owned(), per_address.try_take(peer.ip()))
        else {
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        // Handlers read the peer through axum's `ConnectInfo`, as with `into_make_service_with_connect_info`.
        let service = TowerToHyperService::new(app.clone().map_request(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            request
        }));
        let (http, watcher) = (http.clone(), graceful.watcher());
        tokio::spawn(async move {
            if first_byte_within(&stream, limits.first_byte_timeout).await {
                let _ = watcher.watch(http.serve_connection(TokioIo::new(stream), service)).await;
            }
            drop((permit, address_slot));
        });
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(SHUTDOWN_GRACE) => {
            tracing::warn!("connections still open after the grace period; closing them");
        }
    }
}

/// Whether the client sent something within `within` (peeked, so hyper still reads it).
async fn first_byte_within(stream: &TcpStream, within: Duration) -> bool {
    let mut byte = [0_u8; 1];
    matches!(tokio::time::timeout(within, stream.peek(&mut byte)).await, Ok(Ok(n)) if n > 0)
}

/// Resolves once a shutdown was requested (or the sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// Starts this instance's completer and, with a mail receiver, its outbox worker.
fn spawn_workers(
    store: &Store,
    checkout: &crate::checkout::Checkout,
    faults: Option<&crate::faults::Faults>,
    metrics: &crate::metrics::Metrics,
    shutdown: &watch::Sender<bool>,
) -> Vec<JoinHandle<()>> {
    // A quarter of the lease: a key left by a crash waits at most about 1.25 leases for its completion.
    let interval = (checkout.config().key_lease / 4).max(Duration::from_millis(50));
    let mut tasks = vec![tokio::spawn(crate::checkout::run_completer(
        store.clone(),
        checkout.clone(),
        interval,
        shutdown.subscribe(),
    ))];
    if checkout.config().mail_url.is_some() {
        tasks.push(tokio::spawn(crate::outbox::run(
            store.clone(),
            checkout.clone(),
            faults.cloned(),
            metrics.clone(),
            shutdown.subscribe(),
        )));
    }
    tasks
}
