//! Retention: key rows older than the retention window are deleted, by the library's sweep
//! (`idempotent_endpoint::sqlite::sweep_in`, `postgres::sweep`).
//!
//! A periodic task calls [`sweep_once`]; tests call it directly. After a key is swept (or merely expired:
//! the library treats rows older than the window as absent), a request with that key is new again and does
//! the work again. Orders are business records and are never swept. Deleting by `created_at` is
//! idempotent, so every server instance may run the sweep against a shared database.

use std::time::Duration;

use tokio::sync::watch;

use crate::metrics::Metrics;
use crate::store::{Store, StoreError};

/// Deletes key rows created more than `retention` ago; returns how many.
pub async fn sweep_once(store: &Store, retention: Duration) -> Result<u64, StoreError> {
    store.sweep(retention).await
}

/// Sweeps every `interval` until `shutdown` turns true; each success is noted in `metrics`.
pub async fn run(
    store: Store,
    retention: Duration,
    interval: Duration,
    metrics: Metrics,
    shutdown: watch::Receiver<bool>,
) {
    idempotent_endpoint::periodic::every(interval, shutdown, || async {
        let swept = sweep_once(&store, retention).await;
        if swept.is_ok() {
            metrics.swept();
        }
        match swept {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, "swept expired idempotency keys"),
            Err(error) => tracing::warn!(%error, "sweep failed"),
        }
    })
    .await;
}
