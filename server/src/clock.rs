//! Wall-clock time in the units the database stores (unix seconds; milliseconds for leases): the library's.

pub use idempotent_endpoint::retention::{unix_now, unix_now_ms};
