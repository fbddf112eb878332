//! What every machine of one engine shares: the policy, the client-wide retry budget and the
//! randomness. Its own module so that the engine (which makes machines) and the send loop (which uses
//! the shared state) both depend on it, not on each other.

use alloc::boxed::Box;
use core::cell::Cell;

use super::budget::RetryBudget;
use super::policy::Policy;
use super::random::RandomSource;

/// What every machine of one engine shares.
pub(crate) struct Shared {
    pub(crate) policy: Policy,
    pub(crate) budget: Cell<RetryBudget>,
    pub(crate) random: Box<dyn RandomSource>,
}
