//! The wall clock: `Date.now()`.

use crate::legacy::ports::Clock;

/// `Date.now()` (milliseconds since the epoch).
#[derive(Clone, Copy, Debug, Default)]
pub struct DateClock;

impl Clock for DateClock {
    fn now_ms(&self) -> u64 {
        let now = js_sys::Date::now();
        // Date.now() is a non-negative integer in every real engine; clamp anything else.
        if now.is_finite() && now > 0.0 {
            now as u64
        } else {
            0
        }
    }
}
