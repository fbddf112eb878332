//! Protocol edge cases, as machine rules: a replayed answer is definite, Retry-After is
//! spread above itself (no herd), an attempt that may have reached the server makes a later plain
//! 4xx `uncertain`, and an intent's attempts can be bounded across sends.
#![cfg(not(target_arch = "wasm32"))]

#[path = "core/support.rs"]
mod support;

use std::collections::BTreeSet;

use idempotent_fetch::machine::error::{code, exhausted, field};
use idempotent_fetch::machine::{Jitter, Policy, State};
use support::*;

const ID: &str = "checkout:cart-42";

// ---------------------------------------------------------------------------------------------
// A replayed answer is definite

#[test]
fn a_replayed_5xx_is_definite_and_retires_the_key() {
    for value in ["true", "True", " TRUE ", "true\t"] {
        let rig = Rig::new(1);
        let key = rig.begin_checkout(ID);
        let budget = rig.budget();
        rig.transport.always(status_with(500, &[("Idempotent-Replayed", value)]));
        let done = rig.send(ID).unwrap_or_else(|e| panic!("{value:?}: {e:?}"));
        assert_eq!((done.status, done.ok, done.replayed, done.attempts), (500, false, true, 1), "{value:?}");
        assert_eq!(done.key, key);
        assert!(!done.uncertain, "the server told us what it stored");
        assert_eq!(rig.transport.calls(), 1, "{value:?}: never retried");
        assert_eq!(rig.budget(), budget, "no retry paid");
        let record = rig.record(ID);
        assert_eq!((record.state, record.last_status), (State::Failed, 500));
    }
}

#[test]
fn a_replay_header_that_does_not_say_true_changes_nothing() {
    for value in ["false", "1", "yes", ""] {
        let rig = Rig::new(2);
        rig.begin_checkout(ID);
        rig.transport.script([status_with(503, &[("Idempotent-Replayed", value)])]);
        let done = rig.send(ID).unwrap();
        assert_eq!((done.status, done.attempts, done.replayed), (200, 2, false), "{value:?}");
    }
}

#[test]
fn a_replay_beats_the_callers_override_and_the_server_hint() {
    let rig = Rig::new(3);
    rig.begin_checkout(ID);
    rig.transport.always(status_with(503, &[("Idempotent-Replayed", "true"), ("Stripe-Should-Retry", "true")]));
    let always: ShouldRetry<'_> = &|_| Some(true);
    let done = rig.send_with(ID, Some(always)).unwrap();
    assert_eq!((done.status, done.ok, done.replayed, done.attempts), (503, false, true, 1));
}

#[test]
fn a_replayed_2xx_resolves_as_before_and_a_replayed_422_is_still_key_mismatch() {
    let rig = Rig::new(4);
    rig.begin_checkout(ID);
    rig.transport.script([status_with(201, &[("Idempotent-Replayed", "true")])]);
    let done = rig.send(ID).unwrap();
    assert_eq!((done.status, done.ok, done.replayed), (201, true, true));

    let rig = Rig::new(5);
    rig.begin_checkout(ID);
    rig.transport.script([status_with(422, &[("Idempotent-Replayed", "true")])]);
    assert_eq!(rig.send(ID).unwrap_err().code, code::KEY_MISMATCH);
}

#[test]
fn after_a_replayed_failure_a_changed_request_gets_a_new_key() {
    let rig = Rig::new(6);
    let old = rig.begin_checkout(ID);
    // The first attempt's answer is lost; the retry gets the stored 500, replayed.
    rig.transport.script([Step::Network, status_with(500, &[("Idempotent-Replayed", "true")])]);
    let done = rig.send(ID).unwrap();
    assert!(done.replayed && !done.ok && !done.uncertain, "{done:?}");
    let new = rig.begin(ID, &changed_checkout()).unwrap();
    assert_ne!(new.key.as_str(), old, "the UI offers a new attempt with a new intent");
}

// ---------------------------------------------------------------------------------------------
// Retry-After with jitter above it

#[test]
fn a_hundred_clients_given_the_same_retry_after_spread_over_a_window() {
    let mut delays = Vec::new();
    for seed in 0..100 {
        let mut rig = Rig::new(seed);
        rig.policy = Policy { jitter: Jitter::Full, ..Policy::default() };
        rig.begin_checkout(ID);
        rig.transport.script([status_with(503, &[("Retry-After", "1")])]);
        rig.send(ID).unwrap();
        delays.push(rig.waiter.sleeps()[0]);
    }
    // after + U(0, min(after, first step 250 ms)): in [1000, 1250], never below what the server asked.
    assert!(delays.iter().all(|&d| (1_000..=1_250).contains(&d)), "{delays:?}");
    let distinct: BTreeSet<u64> = delays.iter().copied().collect();
    assert!(distinct.len() >= 60, "only {} distinct instants of 100: {delays:?}", distinct.len());
    let (min, max) = (delays.iter().min().unwrap(), delays.iter().max().unwrap());
    assert!(max - min >= 200, "spread over {} ms only", max - min);
    let early = delays.iter().filter(|&&d| d < 1_125).count();
    assert!((25..=75).contains(&early), "{early} of 100 in the first half of the window");
}

#[test]
fn without_jitter_retry_after_is_honoured_exactly() {
    let rig = Rig::new(7);
    rig.begin_checkout(ID);
    rig.transport.script([status_with(429, &[("Retry-After", "3")])]);
    rig.send(ID).unwrap();
    assert_eq!(rig.waiter.sleeps(), vec![3_000]);
}

#[test]
fn a_retry_after_shorter_than_the_backoff_step_is_spread_over_itself_and_never_beats_the_backoff() {
    // Retry-After 1 s against a 4 s first step: after + U(0, 1 s) in [1 s, 2 s], or the (jittered)
    // backoff when that is longer.
    let ceilings = [(Jitter::Full, 0, 4_000), (Jitter::Equal, 2_000, 4_000), (Jitter::Decorrelated, 4_000, 12_000)];
    for (jitter, floor, ceiling) in ceilings {
        let mut spread = BTreeSet::new();
        for seed in 0..40 {
            let mut rig = Rig::new(seed);
            rig.policy = Policy { jitter, base_delay_ms: 4_000, max_delay_ms: 20_000, ..Policy::default() };
            rig.begin_checkout(ID);
            rig.transport.script([status_with(503, &[("Retry-After", "1")])]);
            rig.send(ID).unwrap();
            let first = rig.waiter.sleeps()[0];
            assert!(first >= 1_000.max(floor) && first <= ceiling.max(2_000), "{jitter:?}: {first}");
            spread.insert(first);
        }
        assert!(spread.len() >= 20, "{jitter:?}: {spread:?}");
    }
}

#[test]
fn a_failing_csprng_while_spreading_retry_after_is_an_error() {
    let mut rig = Rig::new(8);
    rig.policy = Policy { jitter: Jitter::Full, ..Policy::default() };
    // The key (one fill), the backoff draw, then the spread fails.
    *rig.random.borrow_mut() = Some(Box::new(FailingRandom::after(2)));
    rig.begin_checkout(ID);
    rig.transport.script([status_with(503, &[("Retry-After", "1")])]);
    let err = rig.send(ID).unwrap_err();
    assert_eq!((err.code, err.detail, err.attempts), (code::STORAGE, field::CSPRNG, 1));
    assert!(rig.waiter.sleeps().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Uncertain attempts

#[test]
fn a_4xx_after_an_attempt_that_may_have_reached_the_server_is_uncertain() {
    let cases =
        [("network error", Step::Network), ("timeout", Step::Timeout), ("5xx", status(500)), ("503", status(503))];
    for (name, first) in cases {
        let rig = Rig::new(9);
        let key = rig.begin_checkout(ID);
        rig.transport.script([first, status(404)]);
        let done = rig.send(ID).unwrap();
        assert_eq!((done.status, done.ok, done.attempts, done.uncertain), (404, false, 2, true), "{name}");
        let record = rig.record(ID);
        assert_eq!((record.state, record.uncertain), (State::Failed, true), "{name}");

        // The user edits the cart and pays again: not with a new key while the first may exist.
        let err = rig.begin(ID, &changed_checkout()).unwrap_err();
        assert_eq!(err.code, code::INTENT_MISMATCH, "{name}");
        assert_eq!(err.key.as_deref(), Some(key.as_str()), "{name}: the driver names the old key");
        // The same request resumes the same key; the app can also discard/replace explicitly.
        assert_eq!(rig.begin_checkout(ID), key, "{name}");
        assert_ne!(rig.begin_with(ID, &changed_checkout(), true).unwrap().key.as_str(), key, "{name}");
    }
}

#[test]
fn an_abort_in_flight_makes_the_intent_uncertain_across_sends_and_reloads() {
    let rig = Rig::new(10);
    let key = rig.begin_checkout(ID);
    rig.transport.script([Step::Aborted]);
    assert_eq!(rig.send(ID).unwrap_err().code, code::ABORTED);
    assert!(rig.record(ID).uncertain, "persisted");

    let later = rig.reload(11);
    later.transport.script([status(403)]);
    let done = later.send(ID).unwrap();
    assert_eq!((done.status, done.attempts, done.uncertain), (403, 1, true));
    assert_eq!(later.begin(ID, &changed_checkout()).unwrap_err().key.as_deref(), Some(key.as_str()));
}

#[test]
fn a_plain_4xx_on_the_first_attempt_is_certain() {
    let rig = Rig::new(12);
    let old = rig.begin_checkout(ID);
    rig.transport.script([status(400)]);
    let done = rig.send(ID).unwrap();
    assert!(!done.uncertain);
    assert_ne!(rig.begin(ID, &changed_checkout()).unwrap().key.as_str(), old);
}

#[test]
fn retried_4xx_statuses_and_aborts_before_sending_leave_it_certain() {
    let rig = Rig::new(13);
    rig.begin_checkout(ID);
    // 429 and 409 are answers: the server refused (or is still working on) the attempt.
    rig.transport.script([status(429), status(408), status(400)]);
    assert!(!rig.send(ID).unwrap().uncertain);

    let rig = Rig::new(14);
    rig.begin_checkout(ID);
    rig.waiter.go_offline_for(60_000);
    rig.waiter.abort_after(0);
    assert_eq!(rig.send(ID).unwrap_err().code, code::ABORTED);
    assert!(!rig.record(ID).uncertain, "nothing was sent");
}

#[test]
fn a_2xx_clears_uncertainty() {
    let rig = Rig::new(15);
    rig.begin_checkout(ID);
    rig.transport.script([Step::Timeout, status(201)]);
    let done = rig.send(ID).unwrap();
    assert!(done.ok && !done.uncertain);
    assert!(!rig.record(ID).uncertain);
}

// ---------------------------------------------------------------------------------------------
// maxTotalAttempts across sends

#[test]
fn max_total_attempts_bounds_an_intent_across_sends_and_reloads() {
    let mut rig = Rig::new(16);
    rig.policy = Policy { max_attempts: 8, max_total_attempts: 3, ..plain_policy() };
    let key = rig.begin_checkout(ID);
    rig.transport.always(status(503));
    let err = rig.send(ID).unwrap_err();
    assert_eq!((err.code, err.detail, err.attempts), (code::RETRIES_EXHAUSTED, exhausted::MAX_TOTAL_ATTEMPTS, 3));
    assert_eq!(err.key.as_deref(), Some(key.as_str()), "the key is kept");
    assert_eq!(rig.waiter.sleeps().len(), 2, "no wait after the last allowed attempt");

    let later = rig.reload(17);
    let err = later.send(ID).unwrap_err();
    assert_eq!((err.detail, err.attempts), (exhausted::MAX_TOTAL_ATTEMPTS, 0));
    assert_eq!(later.transport.calls(), 0, "nothing more is sent for this intent");
    let record = later.record(ID);
    assert_eq!((record.state, record.attempts), (State::Pending, 3));
}

#[test]
fn max_total_attempts_zero_is_no_limit() {
    let mut rig = Rig::new(18);
    rig.policy = Policy { max_attempts: 2, max_total_attempts: 0, ..plain_policy() };
    rig.begin_checkout(ID);
    rig.transport.always(Step::Network);
    for _ in 0..5 {
        assert_eq!(rig.send(ID).unwrap_err().detail, exhausted::MAX_ATTEMPTS);
    }
    assert_eq!(rig.record(ID).attempts, 10);
}
