//! `GET /metrics` on its own listener (`--metrics-addr`): the [`crate::metrics`] text, with the gauges read
//! now from the in-flight set and the outbox table.
//!
//! **Exposure.** The endpoint is off unless `--metrics-addr` is given, and then it is not on the API's
//! address, so it is as private as the address it is bound to (127.0.0.1, or the network the scraper is
//! on). It names no key, account or message. A scrape costs one count over the undelivered outbox
//! messages (an indexed read) and a pass over this process's in-flight set; the listener has the
//! library's header deadline, and every request on it is that one read, so it cannot take the API's
//! slots or connections.

use std::net::SocketAddr;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use idempotent_endpoint::inflight::InFlightKeys;
use idempotent_endpoint::outbox;
use idempotent_endpoint::postgres::PgConnections;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::error::ServeError;
use crate::metrics::{Metrics, Snapshot, OPENMETRICS_CONTENT_TYPE};
use crate::store::Store;

/// What a scrape reads.
#[derive(Debug, Clone)]
pub struct Scrape {
    /// The counters, and the gauges' home.
    pub metrics: Metrics,
    /// The keys this process works on.
    pub in_flight: InFlightKeys,
    /// The database with the outbox.
    pub store: Store,
    /// Whether this server enqueues outbox messages (a mail receiver is configured).
    pub outbox: bool,
}

/// Binds `addr` and serves `GET /metrics` there until `stop` turns true; the address bound and the task.
pub async fn serve(
    addr: SocketAddr,
    scrape: Scrape,
    mut stop: watch::Receiver<bool>,
) -> Result<(SocketAddr, JoinHandle<()>), ServeError> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = Router::new().route("/metrics", get(metrics)).with_state(scrape);
    let task = tokio::spawn(idempotent_endpoint::serve::serve(
        listener,
        app,
        idempotent_endpoint::serve::ServeLimits::default(),
        async move {
            let _ = stop.wait_for(|stop| *stop).await;
        },
    ));
    Ok((bound, task))
}

/// `GET /metrics`.
async fn metrics(State(scrape): State<Scrape>) -> Response {
    let (outbox_backlog, outbox_oldest) = if scrape.outbox {
        match backlog(&scrape.store).await {
            Ok(backlog) => (Some(backlog.undelivered), backlog.oldest_age),
            Err(error) => {
                tracing::warn!(%error, "metrics: reading the outbox backlog failed");
                (None, None)
            }
        }
    } else {
        (None, None)
    };
    let snapshot = Snapshot {
        keys_in_flight: scrape.in_flight.len(),
        oldest_in_flight: scrape.in_flight.oldest_age(),
        outbox_backlog,
        outbox_oldest,
    };
    match scrape.metrics.encode(snapshot) {
        Ok(text) => ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], text).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// The outbox's backlog, from whichever backend holds it.
async fn backlog(store: &Store) -> Result<outbox::Backlog, idempotent_endpoint::StoreError> {
    match store {
        Store::Sqlite(store) => store.keys().with_conn(|conn| outbox::backlog_sqlite(conn)).await,
        Store::Postgres(store) => outbox::backlog_postgres(&*store.connection().await?).await,
    }
}
