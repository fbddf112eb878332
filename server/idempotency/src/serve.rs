//! Serving a router the way an endpoint on the open internet needs (the README's "Serving"): every request
//! head within a deadline, and a shutdown that lets open requests finish.
//!
//! `axum::serve` has no header-read timeout: a socket that sends nothing, or dribbles its headers, holds a
//! task for as long as it likes. [`serve`] runs hyper's HTTP/1 connection directly with hyper's
//! `header_read_timeout`, which also bounds an idle keep-alive connection. The body has its own deadline in
//! the extractors ([`crate::BodyDeadline`]).

use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// The bounds [`serve`] puts on connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeLimits {
    /// A client sends its whole request head within this, or the connection is closed; the same bound
    /// closes a keep-alive connection that stays idle.
    pub header_timeout: Duration,
    /// How long open requests may run once the shutdown future resolved.
    pub shutdown_grace: Duration,
}

impl Default for ServeLimits {
    /// A 5-second request head and a 10-second grace.
    fn default() -> Self {
        ServeLimits { header_timeout: Duration::from_secs(5), shutdown_grace: Duration::from_secs(10) }
    }
}

/// Serves `app` on `listener` (HTTP/1) until `shutdown` resolves, then stops accepting and lets open requests
/// finish for at most [`ServeLimits::shutdown_grace`]. A failed accept (out of file descriptors and the
/// like) is logged and retried after a short pause instead of ending the server.
///
/// ```no_run
/// # async fn run(app: axum::Router) -> std::io::Result<()> {
/// use idempotent_endpoint::serve::{serve, shutdown_signal, ServeLimits};
///
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// serve(listener, app, ServeLimits::default(), shutdown_signal()).await;
/// # Ok(())
/// # }
/// ```
pub async fn serve(listener: TcpListener, app: Router, limits: ServeLimits, shutdown: impl Future<Output = ()>) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Waits a little instead of spinning on an error that persists for a while.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let connection = http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // A connection's error (a reset, a head past its deadline) concerns that client only.
            let _ = connection.await;
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(limits.shutdown_grace, graceful.shutdown()).await;
}

/// Resolves on Ctrl-C, or on SIGTERM on Unix (what a process manager sends to stop a server).
pub async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => return interrupt.await.unwrap_or(()),
        };
        tokio::select! { _ = interrupt => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}
