//! Fault injection for the demo and the fault tests. Only available when the server was started with
//! `--enable-faults` (otherwise `/api/faults` is 404 and `X-Fault` is ignored); only `POST /api/orders` is
//! affected.
//!
//! Two ways to switch faults on:
//! - At run time, for every request, with probabilities: `PUT /api/faults` with a [`FaultConfig`].
//! - Per request, deterministically: the `X-Fault` header, a comma-separated list of
//!   `fail-before-work`, `drop-after-commit`, `429`, `latency=MS`, `crash-before-commit`, `store-500`,
//!   `panic`, `crash-after-charge` and `crash-after-finish`. When the header is present the probabilistic
//!   configuration is ignored for that request.
//!
//! The `crash-*` switches are real crashes: the process ends at once ([`crash`]), at the moments the order
//! phases must survive (after the provider charged, after `finished` committed, after the mail receiver
//! accepted a message); whoever runs the server restarts it.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use axum::response::Response;
use futures_util::stream;
use serde::{Deserialize, Serialize};

use crate::problem::Problem;

/// The per-request fault header.
pub const FAULT_HEADER: &str = "x-fault";
/// Largest accepted `latencyMs` (and `latency=MS`).
pub const MAX_LATENCY_MS: u64 = 60_000;
/// Largest accepted `retryAfterSecs`.
pub const MAX_RETRY_AFTER_SECS: u64 = 3_600;

/// Probabilistic faults, as read and written by `GET/PUT /api/faults`.
///
/// # Default
/// Every probability 0 (no faults), `retryAfterSecs` 1, `latencyMs` 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct FaultConfig {
    /// Probability of answering 503 before touching the database.
    pub fail_before_work: f64,
    /// Probability of committing the order and then closing the connection without answering.
    pub drop_after_commit: f64,
    /// Probability of answering 429 with `Retry-After` before any work.
    pub status429: f64,
    /// The `Retry-After` seconds sent with 429 and 503.
    pub retry_after_secs: u64,
    /// Added latency, in milliseconds, while the key is in flight.
    pub latency_ms: u64,
    /// Probability of adding `latencyMs`.
    pub latency_probability: f64,
    /// Probability of storing a 500 as the key's answer instead of doing the work (as Stripe stores a
    /// failure): every retry with the key then gets that 500 replayed with `Idempotent-Replayed: true`.
    pub store500: f64,
    /// Probability of ending the process (`abort`) right after the provider charged, before `charged`
    /// commits (only with `--provider-url`).
    pub crash_after_charge: f64,
    /// Probability of ending the process right after `finished` commits, before the answer is written.
    pub crash_after_finish: f64,
    /// Probability of ending the process after the mail receiver accepted an outbox message, before it is
    /// marked delivered (only with `--mail-url`).
    pub crash_after_delivery: f64,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            fail_before_work: 0.0,
            drop_after_commit: 0.0,
            status429: 0.0,
            retry_after_secs: 1,
            latency_ms: 0,
            latency_probability: 0.0,
            store500: 0.0,
            crash_after_charge: 0.0,
            crash_after_finish: 0.0,
            crash_after_delivery: 0.0,
        }
    }
}

impl FaultConfig {
    /// Parses and validates a `PUT /api/faults` body. Missing fields take their defaults.
    pub fn from_json(body: &[u8]) -> Result<Self, Problem> {
        let config: FaultConfig = serde_json::from_slice(body)
            .map_err(|e| Problem::bad_request("invalid-fault-config", format!("Invalid fault config: {e}.")))?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every probability is in 0..=1 and the durations are bounded.
    pub fn validate(&self) -> Result<(), Problem> {
        for (name, p) in [
            ("failBeforeWork", self.fail_before_work),
            ("dropAfterCommit", self.drop_after_commit),
            ("status429", self.status429),
            ("latencyProbability", self.latency_probability),
            ("store500", self.store500),
            ("crashAfterCharge", self.crash_after_charge),
            ("crashAfterFinish", self.crash_after_finish),
            ("crashAfterDelivery", self.crash_after_delivery),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(Problem::bad_request(
                    "invalid-fault-config",
                    format!("{name} must be a probability between 0 and 1, got {p}."),
                ));
            }
        }
        if self.retry_after_secs > MAX_RETRY_AFTER_SECS {
            return Err(Problem::bad_request(
                "invalid-fault-config",
                format!("retryAfterSecs must be at most {MAX_RETRY_AFTER_SECS}."),
            ));
        }
        if self.latency_ms > MAX_LATENCY_MS {
            return Err(Problem::bad_request(
                "invalid-fault-config",
                format!("latencyMs must be at most {MAX_LATENCY_MS}."),
            ));
        }
        Ok(())
    }

    /// Rolls the dice for one request.
    fn roll(&self) -> FaultPlan {
        let hit = |p: f64| p > 0.0 && fastrand::f64() < p;
        FaultPlan {
            status429: hit(self.status429),
            fail_before_work: hit(self.fail_before_work),
            latency: (self.latency_ms > 0 && hit(self.latency_probability))
                .then(|| Duration::from_millis(self.latency_ms)),
            drop_after_commit: hit(self.drop_after_commit),
            crash_before_commit: false,
            store_500: hit(self.store500),
            panic: false,
            crash_after_charge: hit(self.crash_after_charge),
            crash_after_finish: hit(self.crash_after_finish),
            retry_after_secs: self.retry_after_secs,
        }
    }
}

/// The faults to apply to one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// Answer 429 with `Retry-After` before any work.
    pub status429: bool,
    /// Answer 503 before touching the database.
    pub fail_before_work: bool,
    /// Hold the key in flight this long before the work.
    pub latency: Option<Duration>,
    /// Commit, then close the connection without an answer.
    pub drop_after_commit: bool,
    /// Roll the transaction back after the work, as if the process died before `COMMIT`; answer 500.
    pub crash_before_commit: bool,
    /// Store a 500 as the key's answer instead of the work (a fresh key only); replayed on every retry.
    pub store_500: bool,
    /// Panic in the handler after the key entered the in-flight set (a bug): answered 500, nothing stored.
    pub panic: bool,
    /// End the process right after the provider charged, before `charged` commits.
    pub crash_after_charge: bool,
    /// End the process right after `finished` commits, before the answer is written.
    pub crash_after_finish: bool,
    /// `Retry-After` seconds for 429 and 503.
    pub retry_after_secs: u64,
}

impl FaultPlan {
    /// Parses an `X-Fault` header value.
    pub fn parse_header(value: &str, retry_after_secs: u64) -> Result<Self, Problem> {
        let mut plan = FaultPlan { retry_after_secs, ..FaultPlan::default() };
        for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match item {
                "fail-before-work" => plan.fail_before_work = true,
                "drop-after-commit" => plan.drop_after_commit = true,
                "429" => plan.status429 = true,
                "crash-before-commit" => plan.crash_before_commit = true,
                "store-500" => plan.store_500 = true,
                "panic" => plan.panic = true,
                "crash-after-charge" => plan.crash_after_charge = true,
                "crash-after-finish" => plan.crash_after_finish = true,
                other => {
                    let ms = other
                        .strip_prefix("latency=")
                        .and_then(|ms| ms.parse::<u64>().ok())
                        .filter(|ms| *ms <= MAX_LATENCY_MS)
                        .ok_or_else(|| {
                            Problem::bad_request(
                                "invalid-fault-header",
                                format!(
                                    "Unknown X-Fault item {other:?}; use fail-before-work, drop-after-commit, \
                                     429, crash-before-commit, store-500, panic, crash-after-charge, crash-after-finish or \
                                     latency=MS \
                                     (MS <= {MAX_LATENCY_MS})."
                                ),
                            )
                        })?;
                    plan.latency = Some(Duration::from_millis(ms));
                }
            }
        }
        Ok(plan)
    }
}

/// Ends the process at once, as a power cut or `kill -9` would: no unwinding, no destructors, no answer,
/// no graceful shutdown. Only reached through a switch above, which only `--enable-faults` turns on.
pub fn crash(at: &str) -> ! {
    tracing::error!("injected crash {at}: aborting the process");
    std::process::abort()
}

/// The run-time fault switchboard shared by the handlers.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    config: Arc<RwLock<FaultConfig>>,
}

impl Faults {
    /// A switchboard starting with `config`.
    pub fn new(config: FaultConfig) -> Self {
        Faults { config: Arc::new(RwLock::new(config)) }
    }

    /// The current configuration.
    pub fn get(&self) -> FaultConfig {
        self.config.read().map(|c| c.clone()).unwrap_or_else(|p| p.into_inner().clone())
    }

    /// Replaces the configuration (already validated).
    pub fn set(&self, config: FaultConfig) {
        match self.config.write() {
            Ok(mut guard) => *guard = config,
            Err(poisoned) => *poisoned.into_inner() = config,
        }
    }

    /// The plan for one request: from `X-Fault` if present, else from the dice.
    pub fn plan(&self, headers: &HeaderMap) -> Result<FaultPlan, Problem> {
        let config = self.get();
        match headers.get(FAULT_HEADER) {
            Some(value) => {
                let text = value
                    .to_str()
                    .map_err(|_| Problem::bad_request("invalid-fault-header", "X-Fault must be ASCII."))?;
                FaultPlan::parse_header(text, config.retry_after_secs)
            }
            None => Ok(config.roll()),
        }
    }
}

/// A response whose body fails at once: hyper then closes the connection without sending anything
/// (the status line is still buffered when the body errors), so the client sees a network error after
/// the order was committed: the case retries with the same key exist for.
pub fn dropped_connection() -> Response {
    let failing = stream::once(async { Err::<Bytes, std::io::Error>(std::io::Error::other("dropAfterCommit fault")) });
    Response::new(Body::from_stream(failing))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_header() {
        let plan = FaultPlan::parse_header("429, latency=250,drop-after-commit", 2);
        assert_eq!(
            plan.ok(),
            Some(FaultPlan {
                status429: true,
                latency: Some(Duration::from_millis(250)),
                drop_after_commit: true,
                retry_after_secs: 2,
                ..FaultPlan::default()
            })
        );
        assert!(FaultPlan::parse_header("explode", 1).is_err());
        assert!(FaultPlan::parse_header("latency=-1", 1).is_err());
        assert!(FaultPlan::parse_header("latency=999999", 1).is_err());
    }

    #[test]
    fn validates_config() {
        assert!(FaultConfig::from_json(br#"{"failBeforeWork":0.3,"status429":1}"#).is_ok());
        assert!(FaultConfig::from_json(br#"{"failBeforeWork":1.5}"#).is_err());
        assert!(FaultConfig::from_json(br#"{"dropAfterCommit":-0.1}"#).is_err());
        assert!(FaultConfig::from_json(br#"{"latencyMs":-5}"#).is_err());
        assert!(FaultConfig::from_json(br#"{"bogus":1}"#).is_err());
        assert!(FaultConfig::from_json(br#"{"store500":2}"#).is_err());
        assert_eq!(FaultConfig::from_json(b"{}").ok(), Some(FaultConfig::default()));
    }

    #[test]
    fn zero_config_never_faults() {
        let config = FaultConfig::default();
        for _ in 0..1000 {
            assert_eq!(config.roll(), FaultPlan { retry_after_secs: 1, ..FaultPlan::default() });
        }
    }
}
