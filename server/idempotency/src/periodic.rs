//! A background task's loop: one pass every interval until shutdown.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;

/// Runs `pass` every `interval` (the first at once; a pass that overruns delays the next one rather than
/// bunching them) until `shutdown` turns true or its sender is dropped. A pass in progress finishes first.
pub async fn every<F, Fut>(interval: Duration, mut shutdown: watch::Receiver<bool>, mut pass: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => pass().await,
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    return;
                }
            }
        }
    }
}
