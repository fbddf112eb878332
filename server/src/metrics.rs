//! The numbers an operator asks about, in the Prometheus/OpenMetrics text format (`GET /metrics` on
//! `--metrics-addr`, see [`crate::scrape`]).
//!
//! Counters are counted where things happen (the order handler, key settling, the outbox worker, the
//! sweep); gauges are set at scrape time from what holds them (the in-flight set, the outbox table).
//! No metric has a key, an account or a message id as a label: the label values are a fixed handful, so a
//! scrape is small whatever the traffic, and it tells nothing about any one customer.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::clock::unix_now;

/// The content type of the OpenMetrics text format.
pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the protocol decided for one `POST /api/orders` with a well-formed key (the `decision` label of
/// `idempotency_decisions_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The work ran and its answer was stored (whatever its status).
    Fresh,
    /// The stored answer was replayed (`Idempotent-Replayed: true`).
    Replay,
    /// 422: the key came with another request.
    Mismatch,
    /// 409: the key's first request is still being worked on.
    InFlight,
    /// 410: the key was fenced.
    Fenced,
}

impl Decision {
    /// The label value, and the span attribute `idempotency.decision`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Fresh => "fresh",
            Decision::Replay => "replay",
            Decision::Mismatch => "mismatch",
            Decision::InFlight => "in_flight",
            Decision::Fenced => "fenced",
        }
    }
}

type Labels = Vec<(&'static str, &'static str)>;
/// A gauge of seconds (fractional).
type Seconds = Gauge<f64, AtomicU64>;

/// The values read at scrape time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Snapshot {
    /// Keys this process is working on.
    pub keys_in_flight: usize,
    /// How long the oldest of them has been in flight.
    pub oldest_in_flight: Option<Duration>,
    /// Outbox messages not delivered yet; `None` when the outbox could not be read (or is not used).
    pub outbox_backlog: Option<u64>,
    /// How long the oldest undelivered message has waited.
    pub outbox_oldest: Option<Duration>,
}

/// The server's metrics. Cloning shares them.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    decisions: Family<Labels, Counter>,
    fences: Counter,
    delivery_attempts: Family<Labels, Counter>,
    keys_in_flight: Gauge,
    oldest_in_flight: Seconds,
    sweep_lag: Seconds,
    outbox_backlog: Gauge,
    outbox_oldest: Seconds,
    /// When the sweep last succeeded (unix seconds); the start of the process until it has.
    last_sweep: AtomicI64,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric at zero.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let decisions = Family::<Labels, Counter>::default();
        registry.register(
            "idempotency_decisions",
            "POST /api/orders with a well-formed key, by decision: fresh, replay, mismatch (422), in_flight (409), fenced (410)",
            decisions.clone(),
        );
        let fences = Counter::default();
        registry.register("idempotency_fences", "Key settlements answered fenced", fences.clone());
        let delivery_attempts = Family::<Labels, Counter>::default();
        registry.register(
            "outbox_delivery_attempts",
            "Outbox delivery attempts by this process, by result: delivered or failed",
            delivery_attempts.clone(),
        );
        let keys_in_flight = Gauge::default();
        registry.register("idempotency_keys_in_flight", "Keys this process is working on", keys_in_flight.clone());
        let oldest_in_flight = Seconds::default();
        registry.register(
            "idempotency_oldest_in_flight_age_seconds",
            "How long the oldest key this process is working on has been in flight (0: none)",
            oldest_in_flight.clone(),
        );
        let sweep_lag = Seconds::default();
        registry.register(
            "idempotency_sweep_lag_seconds",
            "Time since this process's retention sweep last succeeded (since the start until it has)",
            sweep_lag.clone(),
        );
        let outbox_backlog = Gauge::default();
        registry.register("outbox_backlog_messages", "Outbox messages not delivered yet", outbox_backlog.clone());
        let outbox_oldest = Seconds::default();
        registry.register(
            "outbox_oldest_message_age_seconds",
            "How long the oldest undelivered outbox message has waited (0: none)",
            outbox_oldest.clone(),
        );
        Metrics {
            inner: Arc::new(Inner {
                registry,
                decisions,
                fences,
                delivery_attempts,
                keys_in_flight,
                oldest_in_flight,
                sweep_lag,
                outbox_backlog,
                outbox_oldest,
                last_sweep: AtomicI64::new(unix_now()),
            }),
        }
    }

    /// Counts one decision.
    pub fn decided(&self, decision: Decision) {
        self.inner.decisions.get_or_create(&vec![("decision", decision.as_str())]).inc();
    }

    /// Counts one settlement answered fenced.
    pub fn fenced(&self) {
        self.inner.fences.inc();
    }

    /// Counts one outbox delivery attempt and whether it went through.
    pub fn delivery_attempted(&self, delivered: bool) {
        let result = if delivered { "delivered" } else { "failed" };
        self.inner.delivery_attempts.get_or_create(&vec![("result", result)]).inc();
    }

    /// Notes a successful retention sweep now.
    pub fn swept(&self) {
        self.inner.last_sweep.store(unix_now(), Ordering::Relaxed);
    }

    /// The OpenMetrics text of every metric, with the gauges set from `snapshot`.
    pub fn encode(&self, snapshot: Snapshot) -> Result<String, std::fmt::Error> {
        let inner = &self.inner;
        inner.keys_in_flight.set(i64::try_from(snapshot.keys_in_flight).unwrap_or(i64::MAX));
        inner.oldest_in_flight.set(snapshot.oldest_in_flight.unwrap_or_default().as_secs_f64());
        let since_sweep = unix_now().saturating_sub(inner.last_sweep.load(Ordering::Relaxed)).max(0);
        inner.sweep_lag.set(since_sweep as f64);
        inner.outbox_backlog.set(snapshot.outbox_backlog.map_or(0, |n| i64::try_from(n).unwrap_or(i64::MAX)));
        inner.outbox_oldest.set(snapshot.outbox_oldest.unwrap_or_default().as_secs_f64());
        let mut text = String::new();
        encode(&mut text, &inner.registry)?;
        Ok(text)
    }
}

/// The mail receiver's `GET /metrics` text: `inbox_redeliveries_refused_total`, the re-deliveries its
/// inbox refused as duplicates (read from its table at scrape time, so it survives restarts).
pub fn inbox_text(redeliveries_refused: u64) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::default();
    let refused = Counter::<u64>::default();
    refused.inc_by(redeliveries_refused);
    registry.register(
        "inbox_redeliveries_refused",
        "Deliveries of a message id already received, refused (answered as duplicates, nothing stored)",
        refused,
    );
    let mut text = String::new();
    encode(&mut text, &registry)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_decisions_by_label_and_sets_gauges_at_encoding() {
        let metrics = Metrics::new();
        metrics.decided(Decision::Replay);
        metrics.decided(Decision::Replay);
        metrics.decided(Decision::Mismatch);
        metrics.delivery_attempted(false);
        let text = metrics
            .encode(Snapshot { keys_in_flight: 3, outbox_backlog: Some(7), ..Snapshot::default() })
            .expect("encodes");
        assert!(text.contains("idempotency_decisions_total{decision=\"replay\"} 2\n"), "{text}");
        assert!(text.contains("idempotency_decisions_total{decision=\"mismatch\"} 1\n"), "{text}");
        assert!(text.contains("outbox_delivery_attempts_total{result=\"failed\"} 1\n"), "{text}");
        assert!(text.contains("idempotency_keys_in_flight 3\n"), "{text}");
        assert!(text.contains("outbox_backlog_messages 7\n"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
