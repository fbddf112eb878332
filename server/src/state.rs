//! What every handler shares.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::config::Limits;
use crate::faults::Faults;
use crate::limits::ApiSlots;
use crate::session::SessionKey;
use crate::store::Store;
use idempotent_endpoint::inflight::InFlightKeys;

/// Per-account rate of `POST /api/orders` (a keyed token bucket).
pub type AccountLimiter = DefaultKeyedRateLimiter<String>;

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The database.
    pub store: Store,
    /// The fault switchboard; `None` unless the server runs with `--enable-faults`.
    pub faults: Option<Faults>,
    /// Keys this process is working on (the library's set, scoped by the account).
    pub in_flight: InFlightKeys,
    /// Key retention.
    pub retention: Duration,
    /// Signs and verifies sessions.
    pub sessions: SessionKey,
    /// `Secure` session cookies.
    pub secure_cookie: bool,
    /// Orders per account and second.
    pub limiter: Arc<AccountLimiter>,
    /// The API's concurrency slots (the readiness check reads them).
    pub api_slots: ApiSlots,
    /// The order flow through a payment provider and a mail receiver; `None`: one transaction per order.
    pub checkout: Option<crate::checkout::Checkout>,
    /// The counters of `GET /metrics`.
    pub metrics: crate::metrics::Metrics,
}

/// The per-account limiter for `limits`.
pub fn account_limiter(limits: &Limits) -> AccountLimiter {
    let rate = NonZeroU32::new(limits.account_rate_per_sec).unwrap_or(NonZeroU32::MIN);
    let burst = NonZeroU32::new(limits.account_burst).unwrap_or(NonZeroU32::MIN);
    RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst))
}
