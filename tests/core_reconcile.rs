//! Reconciliation: where a send would give up with a key it cannot explain (expired, exhausted after
//! attempts that may have reached the server, an uncertain failure), the machine asks the server
//! about the key when the app configured how, and follows its answer (done / in flight / unknown).
#![cfg(not(target_arch = "wasm32"))]

#[path = "core/support.rs"]
mod support;

use idempotent_fetch::machine::error::{code, exhausted, expired, protocol};
use idempotent_fetch::machine::{Action, Answer, Engine, KeyStatus, Policy, State};
use support::*;

const ID: &str = "checkout:cart-42";
const DAY: u64 = 24 * 60 * 60 * 1000;

/// A client that asks (`statusUrl` or `reconcile` configured), with `max_attempts` per send.
fn asking(seed: u64, max_attempts: u32) -> Rig {
    let mut rig = Rig::new(seed);
    rig.policy = Policy { max_attempts, reconcile: true, ..plain_policy() };
    rig
}

fn statuses(rig: &Rig, answers: impl IntoIterator<Item = (KeyStatus, u16)>) {
    rig.key_statuses.borrow_mut().extend(answers);
}

#[test]
fn an_exhausted_send_whose_answers_were_lost_resolves_with_the_servers_stored_answer() {
    let rig = asking(1, 2);
    let key = rig.begin_checkout(ID);
    rig.transport.script([Step::Network, Step::Timeout]);
    statuses(&rig, [(KeyStatus::Done, 201)]);
    let done = rig.send(ID).expect("the stored answer");
    assert_eq!((done.status, done.ok, done.replayed, done.uncertain), (201, true, true, false));
    assert_eq!(*rig.observer.asks.borrow(), vec![key.clone()], "asked once, about the intent's key");
    assert_eq!(rig.transport.calls(), 2, "nothing more was sent");
    assert_eq!(rig.record(ID).state, State::Succeeded, "retired like a replayed answer");
    assert_eq!(rig.record(ID).key.as_str(), key);
}

#[test]
fn without_a_way_to_ask_an_exhausted_send_gives_up_as_before() {
    let mut rig = Rig::new(2);
    rig.policy = Policy { max_attempts: 2, ..plain_policy() };
    rig.begin_checkout(ID);
    rig.transport.script([Step::Network, Step::Network]);
    let failure = rig.send(ID).unwrap_err();
    assert_eq!((failure.code, failure.detail), (code::RETRIES_EXHAUSTED, exhausted::MAX_ATTEMPTS));
    assert!(rig.observer.asks.borrow().is_empty());
}

#[test]
fn attempts_that_never_reached_the_server_are_not_worth_asking_about() {
    let rig = asking(3, 2);
    rig.begin_checkout(ID);
    rig.transport.script([status(429), status(429)]);
    let failure = rig.send(ID).unwrap_err();
    assert_eq!(failure.code, code::RETRIES_EXHAUSTED);
    assert!(rig.observer.asks.borrow().is_empty(), "a 429 is answered before any work");
}

#[test]
fn a_key_the_server_never_saw_is_sent_once_more_with_the_same_key() {
    let rig = asking(4, 2);
    let key = rig.begin_checkout(ID);
    rig.transport.script([Step::Network, Step::Network, status(201)]);
    statuses(&rig, [(KeyStatus::Unknown, 0)]);
    let done = rig.send(ID).expect("the resend's answer");
    assert_eq!((done.status, done.ok, done.replayed), (201, true, false));
    assert_eq!(rig.transport.keys(), vec![key.clone(), key.clone(), key], "the same key, one attempt more");
}

#[test]
fn the_resend_after_unknown_is_the_last_attempt_and_the_server_is_asked_once_per_send() {
    let rig = asking(5, 2);
    rig.begin_checkout(ID);
    rig.transport.script([Step::Network, Step::Network, Step::Network]);
    statuses(&rig, [(KeyStatus::Unknown, 0)]);
    let failure = rig.send(ID).unwrap_err();
    assert_eq!(
        (failure.code, failure.detail, failure.attempts),
        (code::RETRIES_EXHAUSTED, exhausted::MAX_ATTEMPTS, 3),
        "the limit that ended the send, and every request with the key (the question is none)"
    );
    assert_eq!(rig.transport.calls(), 3);
    assert_eq!(rig.observer.asks.borrow().len(), 1);
    assert_eq!(rig.record(ID).state, State::Pending, "the key is kept for a later send");
}

#[test]
fn a_server_that_cannot_be_asked_leaves_the_send_exhausted_with_its_key() {
    let rig = asking(6, 2);
    let key = rig.begin_checkout(ID);
    rig.transport.script([Step::Network, Step::Network]);
    statuses(&rig, [(KeyStatus::CouldNotAsk, 0)]);
    let failure = rig.send(ID).unwrap_err();
    assert_eq!(
        (failure.code, failure.detail, failure.key),
        (code::RETRIES_EXHAUSTED, exhausted::MAX_ATTEMPTS, Some(key))
    );
    assert_eq!(rig.record(ID).state, State::Pending);
}

#[test]
fn in_flight_waits_its_retry_after_then_sends_the_same_key_again() {
    let rig = asking(7, 2);
    let key = rig.begin_checkout(ID);
    rig.transport.script([Step::Network, Step::Network, status_with(201, &[("idempotent-replayed", "true")])]);
    statuses(&rig, [(KeyStatus::InFlight, 3)]);
    let done = rig.send(ID).expect("the replayed answer");
    assert_eq!((done.status, done.replayed), (201, true));
    assert_eq!(rig.waiter.sleeps().last(), Some(&3_000), "Retry-After of the status answer");
    assert_eq!(rig.transport.keys(), vec![key.clone(), key.clone(), key]);
}

#[test]
fn an_expired_key_resolves_through_the_server_without_being_sent() {
    let rig = asking(8, 8);
    rig.begin_checkout(ID);
    rig.transport.script([Step::Network]);
    rig.clock.advance(DAY + 1);
    statuses(&rig, [(KeyStatus::Done, 201)]);
    let done = rig.send(ID).expect("the stored answer of the expired key");
    assert_eq!((done.status, done.ok, done.replayed, done.attempts), (201, true, true, 0));
    assert_eq!(rig.transport.calls(), 0, "an expired key is never re-sent");
    assert_eq!(rig.record(ID).state, State::Succeeded);
}

#[test]
fn an_expired_key_the_server_does_not_know_is_expired_with_a_detail_that_says_so() {
    let rig = asking(9, 8);
    rig.begin_checkout(ID);
    rig.clock.advance(DAY + 1);
    statuses(&rig, [(KeyStatus::Unknown, 0)]);
    let failure = rig.send(ID).unwrap_err();
    assert_eq!((failure.code, failure.detail), (code::EXPIRED, expired::UNKNOWN_TO_SERVER));
    assert_eq!(rig.transport.calls(), 0);
    assert_eq!(rig.record(ID).state, State::Expired);
    // Could not ask: plain EXPIRED.
    statuses(&rig, [(KeyStatus::CouldNotAsk, 0)]);
    let failure = rig.send(ID).unwrap_err();
    assert_eq!((failure.code, failure.detail), (code::EXPIRED, 0));
}

#[test]
fn an_expired_key_still_in_flight_is_asked_about_again_never_sent() {
    let rig = asking(10, 8);
    rig.begin_checkout(ID);
    rig.clock.advance(DAY + 1);
    statuses(&rig, [(KeyStatus::InFlight, 2), (KeyStatus::InFlight, 2), (KeyStatus::Done, 402)]);
    let done = rig.send(ID).expect("the stored answer");
    assert_eq!((done.status, done.ok, done.replayed), (402, false, true));
    assert_eq!(rig.observer.asks.borrow().len(), 3);
    assert_eq!(rig.waiter.sleeps(), vec![2_000, 2_000]);
    assert_eq!(rig.transport.calls(), 0);
    assert_eq!(rig.record(ID).state, State::Failed);
}

#[test]
fn an_uncertain_failure_asks_and_the_servers_answer_decides() {
    // The first attempt may have done the work; the second got a 404 (a gateway): the server knows.
    let rig = asking(11, 8);
    rig.begin_checkout(ID);
    rig.transport.script([Step::Timeout, status(404)]);
    statuses(&rig, [(KeyStatus::Done, 201)]);
    let done = rig.send(ID).expect("the stored answer");
    assert_eq!((done.status, done.ok, done.replayed, done.uncertain), (201, true, true, false));
    // Unknown: the work was not done; the 404 stands and is certain now.
    let other = asking(12, 8);
    other.begin_checkout(ID);
    other.transport.script([Step::Timeout, status(404)]);
    statuses(&other, [(KeyStatus::Unknown, 0)]);
    let done = other.send(ID).expect("the 404");
    assert_eq!((done.status, done.ok, done.uncertain), (404, false, false));
    assert_eq!(other.record(ID).state, State::Failed);
    // Could not ask: the 404, still uncertain.
    let third = asking(13, 8);
    third.begin_checkout(ID);
    third.transport.script([Step::Timeout, status(404)]);
    let done = third.send(ID).expect("the 404");
    assert_eq!((done.status, done.uncertain), (404, true));
}

#[test]
fn a_stored_422_is_key_mismatch() {
    let rig = asking(14, 1);
    rig.begin_checkout(ID);
    rig.transport.script([Step::Network]);
    statuses(&rig, [(KeyStatus::Done, 422)]);
    assert_eq!(rig.send(ID).unwrap_err().code, code::KEY_MISMATCH);
}

fn machine_rig() -> (Engine, idempotent_fetch::machine::Machine) {
    let engine =
        Engine::new(Policy { reconcile: true, ..plain_policy() }, Box::new(SeededRandom::new(15))).expect("policy");
    let mut machine = engine.begin(ID, &checkout(), T0, false, None).expect("begin");
    machine.mark_saved();
    (engine, machine)
}

#[test]
fn the_apps_own_ask_resolves_a_done_key_and_reports_the_others() {
    let (_engine, mut m) = machine_rig();
    assert_eq!(m.ask(T0), Action::Reconcile);
    assert_eq!(m.timeout_ms(), 15_000, "the status request is bounded like an attempt");
    assert_eq!(m.on_key_status(T0 + 5, KeyStatus::Done, &Answer { status: 201, ..Answer::default() }), Action::Done);
    assert_eq!((m.status(), m.ok(), m.replayed(), m.record().state), (201, true, true, State::Succeeded));
    // The detail is the answer itself: one table of key statuses (src/contract.rs).
    for status in [KeyStatus::InFlight, KeyStatus::Unknown, KeyStatus::CouldNotAsk] {
        let (_engine, mut m) = machine_rig();
        assert_eq!(m.ask(T0), Action::Reconcile);
        assert_eq!(m.on_key_status(T0 + 5, status, &Answer::default()), Action::Fail);
        assert_eq!((m.error().code, m.error().detail), (code::KEY_STATUS, status as u8));
        assert_eq!(m.record().state, State::Pending, "nothing learnt: the intent is unchanged");
    }
}

#[test]
fn calls_out_of_order_are_protocol_failures_and_an_abort_while_asking_keeps_the_key() {
    let (_engine, mut m) = machine_rig();
    assert_eq!(m.on_key_status(T0, KeyStatus::Done, &Answer { status: 201, ..Answer::default() }), Action::Fail);
    assert_eq!((m.error().code, m.error().detail), (code::INTERNAL, protocol::NOT_RECONCILING));
    assert_eq!(m.start(T0, true), Action::Send);
    assert_eq!(m.ask(T0), Action::Fail, "not while a send runs");
    assert_eq!((m.error().code, m.error().detail), (code::INTERNAL, protocol::NOT_IDLE));
    let (_engine, mut m) = machine_rig();
    assert_eq!(m.ask(T0), Action::Reconcile);
    assert_eq!(m.on_abort(T0 + 1), Action::Fail);
    assert_eq!(m.error().code, code::ABORTED);
    assert!(!m.record().uncertain, "asking sends nothing");
}

/// A client of a server that answers replays with 409 and the stored body (`replayStatus: 409`).
fn replaying(seed: u64, reconcile: bool) -> Rig {
    let mut rig = Rig::new(seed);
    rig.policy = Policy { replay_status: 409, reconcile, ..plain_policy() };
    rig
}

#[test]
fn an_answer_with_the_replay_status_is_the_keys_success_not_a_failure() {
    let rig = replaying(30, false);
    rig.begin_checkout(ID);
    // The first answer (the 201 of the order) was lost; the retry gets the server's replay.
    rig.transport.script([Step::Network, status(409)]);
    let done = rig.send(ID).expect("the replay finishes the intent");
    assert_eq!((done.status, done.ok, done.replayed, done.uncertain), (409, true, true, false));
    assert_eq!(rig.record(ID).state, State::Succeeded, "retired as the order that exists");
    assert_eq!(rig.transport.calls(), 2);
}

#[test]
fn without_the_replay_status_a_409_is_still_in_progress() {
    let mut rig = Rig::new(31);
    rig.policy = Policy { max_attempts: 2, ..plain_policy() };
    rig.begin_checkout(ID);
    rig.transport.script([status(409), status(409)]);
    let failure = rig.send(ID).unwrap_err();
    assert_eq!(failure.code, code::RETRIES_EXHAUSTED);
}

#[test]
fn with_a_way_to_ask_a_replay_status_answer_reports_the_original_status() {
    let rig = replaying(32, true);
    let key = rig.begin_checkout(ID);
    rig.transport.script([Step::Network, status(409)]);
    statuses(&rig, [(KeyStatus::Done, 201)]);
    let done = rig.send(ID).expect("the stored answer");
    assert_eq!((done.status, done.ok, done.replayed), (201, true, true));
    assert_eq!(*rig.observer.asks.borrow(), vec![key]);
    assert_eq!(rig.record(ID).state, State::Succeeded);
}

#[test]
fn a_replay_status_answer_stays_a_success_when_the_key_status_says_nothing_usable() {
    for answer in [KeyStatus::Unknown, KeyStatus::InFlight, KeyStatus::CouldNotAsk] {
        let rig = replaying(33, true);
        rig.begin_checkout(ID);
        rig.transport.script([Step::Network, status(409)]);
        statuses(&rig, [(answer, 0)]);
        let done = rig.send(ID).expect("the replay stands");
        assert_eq!((done.status, done.ok, done.replayed), (409, true, true), "{answer:?}");
        assert_eq!(rig.record(ID).state, State::Succeeded, "{answer:?}");
        assert_eq!(rig.transport.calls(), 2, "{answer:?}: nothing more was sent");
    }
}

#[test]
fn the_attempt_after_an_in_flight_answer_ends_the_send_with_the_limit_that_ended_it_first() {
    let rig = asking(34, 2);
    rig.begin_checkout(ID);
    rig.transport.script([Step::Network, Step::Network, Step::Network]);
    statuses(&rig, [(KeyStatus::InFlight, 1)]);
    let failure = rig.send(ID).unwrap_err();
    assert_eq!(
        (failure.code, failure.detail, failure.attempts),
        (code::RETRIES_EXHAUSTED, exhausted::MAX_ATTEMPTS, 3),
        "not the deadline of that one attempt"
    );
    assert_eq!(rig.observer.asks.borrow().len(), 1);
}
