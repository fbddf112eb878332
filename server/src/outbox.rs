//! The transactional outbox's delivery worker: the `finished` transaction writes an order's confirmation
//! into the `outbox` table; this worker (one in every server instance) claims due messages, sends each to
//! the mail receiver with its message id, and marks it delivered. Delivery is at least once (a crash
//! between the receiver's answer and the mark sends the message again) and the receiver stores a message
//! once per id, so the confirmation arrives exactly once. A failed delivery is retried with the client
//! crate's capped exponential backoff with full jitter, so a receiver outage only delays messages.
//!
//! A claim lasts one key lease (`--key-lease-ms`), three times as long as a delivery may take (the HTTP
//! client's timeout is a third of the lease), so two instances never send one message at the same moment;
//! a claim left by a crashed instance runs out and the message is claimed again.

use std::time::Duration;

use tokio::sync::watch;

use crate::checkout::Checkout;
use crate::clock::{unix_now, unix_now_ms};
use crate::faults::{crash, Faults};
use crate::store::Store;

/// How often the worker looks for due messages.
pub const POLL: Duration = Duration::from_millis(200);
/// The first retry's backoff step, in milliseconds.
pub const BASE_DELAY_MS: u64 = 200;
/// No retry waits longer than this, in milliseconds.
pub const MAX_DELAY_MS: u64 = 10_000;
/// Messages claimed per pass.
const BATCH: i64 = 16;

/// The wait before the next attempt of a message that failed `attempts` times: the library's outbox
/// schedule (the client crate's full-jitter backoff) from [`BASE_DELAY_MS`] up to [`MAX_DELAY_MS`].
pub fn retry_delay_ms(attempts: i64) -> u64 {
    let worker = idempotent_endpoint::outbox::Worker {
        base_delay: Duration::from_millis(BASE_DELAY_MS),
        max_delay: Duration::from_millis(MAX_DELAY_MS),
        ..idempotent_endpoint::outbox::Worker::default()
    };
    u64::try_from(worker.retry_delay(attempts).as_millis()).unwrap_or(MAX_DELAY_MS)
}

/// Delivers due messages every [`POLL`] until `shutdown` turns true.
pub async fn run(store: Store, checkout: Checkout, faults: Option<Faults>, mut shutdown: watch::Receiver<bool>) {
    let mut ticker = tokio::time::interval(POLL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                deliver_once(&store, &checkout, faults.as_ref()).await;
            }
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    return;
                }
            }
        }
    }
}

/// One pass: claims the due messages and delivers them; how many were delivered.
pub async fn deliver_once(store: &Store, checkout: &Checkout, faults: Option<&Faults>) -> usize {
    let now_ms = unix_now_ms();
    let claim_ms = i64::try_from(checkout.config().key_lease.as_millis()).unwrap_or(i64::MAX);
    let claimed = match store.claim_outbox(now_ms, now_ms.saturating_add(claim_ms), BATCH).await {
        Ok(claimed) => claimed,
        Err(error) => {
            tracing::warn!(%error, "outbox: claiming messages failed");
            return 0;
        }
    };
    let mut delivered = 0;
    for message in claimed {
        match checkout.deliver(&message.payload).await {
            Ok(()) => {
                if faults.is_some_and(|f| {
                    let p = f.get().crash_after_delivery;
                    p > 0.0 && fastrand::f64() < p
                }) {
                    crash("after the mail receiver accepted a message, before it is marked delivered");
                }
                match store.outbox_delivered(&message.id, unix_now()).await {
                    Ok(()) => delivered += 1,
                    // The claim runs out and the message is sent again; the receiver refuses the duplicate.
                    Err(error) => tracing::warn!(id = message.id, %error, "outbox: marking delivered failed"),
                }
            }
            Err(why) => {
                let wait = i64::try_from(retry_delay_ms(message.attempts)).unwrap_or(i64::MAX);
                tracing::info!(id = message.id, attempts = message.attempts, wait, why, "outbox: delivery failed");
                if let Err(error) = store.outbox_retry(&message.id, unix_now_ms().saturating_add(wait)).await {
                    tracing::warn!(id = message.id, %error, "outbox: scheduling a retry failed");
                }
            }
        }
    }
    delivered
}
