//! The transactional outbox's delivery worker: the `finished` transaction enqueues an order's confirmation
//! in the library's outbox (`outbox_messages`); this worker (one in every server instance) is the library's
//! [`idempotent_endpoint::outbox::Worker`] over that table: it claims due messages, sends each to the mail
//! receiver with its message id, and marks it delivered. Delivery is at least once (a crash between the
//! receiver's answer and the mark sends the message again) and the receiver stores a message once per id,
//! so the confirmation arrives exactly once. A failed delivery is retried with the client crate's capped
//! exponential backoff with full jitter, so a receiver outage only delays messages.
//!
//! A claim lasts one key lease (`--key-lease-ms`), three times as long as a delivery may take (the HTTP
//! client's timeout is a third of the lease), so two instances never send one message at the same moment;
//! a claim left by a crashed instance runs out and the message is claimed again.

use std::time::Duration;

use idempotent_endpoint::outbox::{Message, Worker};
use tokio::sync::watch;

use crate::checkout::Checkout;
use crate::faults::{crash, Faults};
use crate::metrics::Metrics;
use crate::store::Store;

/// How often the worker looks for due messages.
pub const POLL: Duration = Duration::from_millis(200);
/// The first retry's backoff step, in milliseconds.
pub const BASE_DELAY_MS: u64 = 200;
/// No retry waits longer than this, in milliseconds.
pub const MAX_DELAY_MS: u64 = 10_000;
/// Messages claimed at once.
const BATCH: i64 = 16;

/// The worker's settings for a key lease of `lease`.
fn worker(lease: Duration) -> Worker {
    Worker {
        lease,
        poll: POLL,
        base_delay: Duration::from_millis(BASE_DELAY_MS),
        max_delay: Duration::from_millis(MAX_DELAY_MS),
        batch: BATCH,
        ..Worker::default()
    }
}

/// The wait before the next attempt of a message that failed `attempts` times: the library's outbox
/// schedule (the client crate's full-jitter backoff) from [`BASE_DELAY_MS`] up to [`MAX_DELAY_MS`].
pub fn retry_delay_ms(attempts: i64) -> u64 {
    let delay = worker(Duration::from_millis(MAX_DELAY_MS)).retry_delay(attempts);
    u64::try_from(delay.as_millis()).unwrap_or(MAX_DELAY_MS)
}

/// Delivers due messages every [`POLL`] until `shutdown` turns true; each attempt is counted in `metrics`.
pub async fn run(
    store: Store,
    checkout: Checkout,
    faults: Option<Faults>,
    metrics: Metrics,
    shutdown: watch::Receiver<bool>,
) {
    let lease = checkout.config().key_lease;
    let deliver = move |message: Message| {
        let (checkout, faults, metrics) = (checkout.clone(), faults.clone(), metrics.clone());
        async move {
            let sent = checkout.deliver(&message).await;
            metrics.delivery_attempted(sent.is_ok());
            sent?;
            if faults.is_some_and(|f| {
                let p = f.get().crash_after_delivery;
                p > 0.0 && fastrand::f64() < p
            }) {
                crash("after the mail receiver accepted a message, before it is marked delivered");
            }
            Ok(())
        }
    };
    match store {
        Store::Sqlite(store) => worker(lease).run(store.keys().clone(), deliver, shutdown).await,
        Store::Postgres(store) => worker(lease).run(store, deliver, shutdown).await,
    }
}
