//! The library's default settings that the Node half (server/node) takes as they are, so that a Rust and a
//! Node service behave alike unless configured otherwise: how long a request body may take, and the
//! outbox worker's lease, poll, retry steps and batch.

use std::time::Duration;

/// How long a request's whole body may take to arrive before the 408 `body-timeout` (the default
/// `BodyDeadline`): enough for a body of axum's default limit over a slow mobile link, short enough that
/// slow uploads cannot pile up.
pub const BODY_DEADLINE: Duration = Duration::from_secs(10);

/// The outbox worker's claim on a message: every delivery must end within a third of it.
pub const OUTBOX_LEASE: Duration = Duration::from_secs(30);
/// How often an idle outbox worker looks for due messages.
pub const OUTBOX_POLL: Duration = Duration::from_millis(200);
/// The first retry's backoff step of a failed delivery.
pub const OUTBOX_BASE_DELAY: Duration = Duration::from_millis(200);
/// No retry of a delivery waits longer than this.
pub const OUTBOX_MAX_DELAY: Duration = Duration::from_secs(10);
/// Messages one pass of the worker claims.
pub const OUTBOX_BATCH: i64 = 64;
/// Deliveries in flight at once, at most.
pub const OUTBOX_CONCURRENCY: usize = 32;
