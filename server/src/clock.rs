//! Wall-clock time in the unit the database stores (unix seconds).

use std::time::{SystemTime, UNIX_EPOCH};

/// Current unix time in seconds.
pub fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)).unwrap_or(0)
}
