//! Retention: how long a key is remembered.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The retention the library's examples use: a day, the window a client's retries and a person's return
/// to the page fit in.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

/// The cutoff (unix seconds) at `now`: key rows created before it are expired. An expired row counts as
/// absent (a request with its key is new again) even before a sweep deletes it.
pub fn expired_before(now: i64, retention: Duration) -> i64 {
    now.saturating_sub(i64::try_from(retention.as_secs()).unwrap_or(i64::MAX))
}

/// The current unix time in seconds (0 if the clock is before 1970).
pub fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The current unix time in milliseconds (0 if the clock is before 1970).
pub fn unix_now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
