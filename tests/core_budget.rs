//! The client-wide retry budget (a token bucket): unit behaviour, and how the machine spends and
//! refills it without ever minting a new key.
#![cfg(not(target_arch = "wasm32"))]

#[path = "core/support.rs"]
mod support;

use idempotent_fetch::machine::budget::{
    DEFAULT_CAPACITY, SUCCESS_INCREMENT, THROTTLING_RETRY_COST, TRANSIENT_RETRY_COST,
};
use idempotent_fetch::machine::error::{code, exhausted};
use idempotent_fetch::machine::{RetryBudget, RetryReason, State};
use support::*;

const ID: &str = "checkout:cart-42";

// ---------------------------------------------------------------------------------------------
// The bucket

#[test]
fn default_bucket_is_full_with_aws_standard_numbers() {
    let budget = RetryBudget::default();
    assert_eq!(budget.tokens(), DEFAULT_CAPACITY);
    assert_eq!((DEFAULT_CAPACITY, THROTTLING_RETRY_COST, TRANSIENT_RETRY_COST, SUCCESS_INCREMENT), (500, 5, 10, 1));
}

#[test]
fn throttling_retries_cost_less_than_transient_ones() {
    assert_eq!(RetryBudget::cost(RetryReason::Status(429)), THROTTLING_RETRY_COST);
    assert_eq!(RetryBudget::cost(RetryReason::Status(503)), THROTTLING_RETRY_COST);
    assert_eq!(RetryBudget::cost(RetryReason::Status(409)), THROTTLING_RETRY_COST);
    assert_eq!(RetryBudget::cost(RetryReason::Status(500)), TRANSIENT_RETRY_COST);
    assert_eq!(RetryBudget::cost(RetryReason::Network), TRANSIENT_RETRY_COST);
    assert_eq!(RetryBudget::cost(RetryReason::Timeout), TRANSIENT_RETRY_COST);
}

#[test]
fn a_full_bucket_pays_for_fifty_transient_retries_then_refuses_without_taking_anything() {
    let mut budget = RetryBudget::default();
    for _ in 0..50 {
        assert_eq!(budget.try_acquire(RetryReason::Network), Some(TRANSIENT_RETRY_COST));
    }
    assert_eq!(budget.tokens(), 0);
    assert_eq!(budget.try_acquire(RetryReason::Network), None);
    assert_eq!(budget.tokens(), 0);

    let mut budget = RetryBudget::new(7);
    assert_eq!(budget.try_acquire(RetryReason::Timeout), None);
    assert_eq!(budget.tokens(), 7, "a refused retry takes nothing");
    assert_eq!(budget.try_acquire(RetryReason::Status(429)), Some(5));
    assert_eq!(budget.tokens(), 2);
}

#[test]
fn successes_refill_up_to_capacity() {
    let mut budget = RetryBudget::new(30);
    budget.try_acquire(RetryReason::Network);
    budget.try_acquire(RetryReason::Network);
    assert_eq!(budget.tokens(), 10);
    budget.on_success(Some(TRANSIENT_RETRY_COST));
    assert_eq!(budget.tokens(), 20, "a success after a retry refunds that retry");
    budget.on_success(None);
    assert_eq!(budget.tokens(), 21, "a first-attempt success adds one");
    for _ in 0..100 {
        budget.on_success(Some(TRANSIENT_RETRY_COST));
    }
    assert_eq!(budget.tokens(), 30, "never above capacity");
}

#[test]
fn zero_capacity_disables_retries() {
    let mut budget = RetryBudget::new(0);
    assert_eq!(budget.try_acquire(RetryReason::Status(429)), None);
    budget.on_success(None);
    assert_eq!(budget.tokens(), 0);
}

// ---------------------------------------------------------------------------------------------
// Through the engine

#[test]
fn budget_exhaustion_is_retries_exhausted_and_keeps_the_pending_intent_and_its_key() {
    let mut rig = Rig::new(1);
    rig.policy.retry_budget = 25;
    let key = rig.begin_checkout(ID);
    rig.transport.always(status(500));
    let err = rig.send(ID).unwrap_err();
    assert_eq!(err.code, code::RETRIES_EXHAUSTED);
    assert_eq!(err.detail, exhausted::BUDGET);
    assert_eq!((err.attempts, err.last_status), (3, Some(500)), "two paid retries, the third refused");
    assert_eq!(err.key.as_deref(), Some(key.as_str()));
    assert_eq!(rig.budget(), 5);
    assert_eq!(rig.waiter.sleeps().len(), 2, "no sleep for the refused retry");
    let record = rig.record(ID);
    assert_eq!((record.state, record.key.as_str(), record.attempts), (State::Pending, key.as_str(), 3));
}

#[test]
fn a_later_send_after_budget_exhaustion_reuses_the_key() {
    let mut rig = Rig::new(2);
    rig.policy.retry_budget = 0;
    let key = rig.begin_checkout(ID);
    rig.transport.script([status(503)]);
    let err = rig.send(ID).unwrap_err();
    assert_eq!((err.detail, err.attempts), (exhausted::BUDGET, 1));
    let done = rig.send(ID).unwrap();
    assert_eq!(done.key, key);
    assert_eq!(rig.transport.keys(), vec![key.clone(), key]);
}

#[test]
fn the_budget_is_shared_by_every_intent_of_a_client() {
    let mut rig = Rig::new(3);
    rig.policy.retry_budget = 20;
    rig.begin_checkout("a");
    rig.begin_checkout("b");
    rig.transport.always(Step::Network);
    assert_eq!(rig.send("a").unwrap_err().detail, exhausted::BUDGET);
    let calls_for_a = rig.transport.calls();
    assert_eq!(calls_for_a, 3);
    // The outage drained the bucket: the next intent still gets its first attempt, but fails fast.
    let err = rig.send("b").unwrap_err();
    assert_eq!((err.detail, err.attempts), (exhausted::BUDGET, 1));
    assert_eq!(rig.transport.calls(), calls_for_a + 1);
}

#[test]
fn success_after_a_retry_refunds_its_cost() {
    let mut rig = Rig::new(4);
    rig.policy.retry_budget = 100;
    rig.begin_checkout(ID);
    rig.transport.script([status(500), status(429), status(200)]);
    rig.send(ID).unwrap();
    // 100 - 10 (after 500) - 5 (after 429) + 5 (refund of the last retry).
    assert_eq!(rig.budget(), 90);
}

#[test]
fn first_attempt_successes_refill_a_drained_budget() {
    let mut rig = Rig::new(5);
    rig.policy.retry_budget = 10;
    rig.begin_checkout("drain");
    rig.transport.script([Step::Network, Step::Network]);
    assert_eq!(rig.send("drain").unwrap_err().detail, exhausted::BUDGET);
    assert_eq!(rig.budget(), 0);
    for i in 0..10 {
        let id = format!("ok-{i}");
        rig.begin_checkout(&id);
        rig.send(&id).unwrap();
    }
    assert_eq!(rig.budget(), 10);
    // Refilled: a retry can be paid again.
    rig.transport.script([status(500)]);
    assert_eq!(rig.send("drain").unwrap().attempts, 2);
}

#[test]
fn throttled_retries_spend_half_as_much() {
    let mut rig = Rig::new(6);
    rig.policy.retry_budget = 20;
    rig.begin_checkout(ID);
    rig.transport.always(status(429));
    let err = rig.send(ID).unwrap_err();
    assert_eq!((err.detail, err.attempts), (exhausted::BUDGET, 5), "four 5-token retries");
}
