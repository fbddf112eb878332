//! The machine's calling protocol, driven directly (no reference driver): which action each event
//! returns, when the record is dirty, what each action carries, and calls out of order.
#![cfg(not(target_arch = "wasm32"))]

#[path = "core/support.rs"]
mod support;

use idempotent_fetch::contract::{Field, Resumed};
use idempotent_fetch::machine::error::{code, exhausted, protocol};
use idempotent_fetch::machine::{Action, Answer, Engine, Machine, Policy, RetryReason, State};
use support::*;

const ID: &str = "checkout:cart-42";

fn engine(policy: Policy) -> Engine {
    Engine::new(policy, Box::new(SeededRandom::new(7))).expect("valid policy")
}

fn begun(engine: &Engine) -> Machine {
    let mut machine = engine.begin(ID, &checkout(), T0, false, None).expect("begin");
    assert!(machine.dirty(), "a new intent must be saved before anything else");
    machine.mark_saved();
    machine
}

fn answer(status: u16) -> Answer<'static> {
    Answer { status, ..Answer::default() }
}

#[test]
fn an_engine_refuses_an_invalid_policy_with_the_option_index() {
    let bad = Policy { max_attempts: 0, ..Policy::default() };
    let err = Engine::new(bad, Box::new(SeededRandom::new(1))).err().expect("refused");
    assert_eq!((err.code, err.detail), (code::INVALID_OPTIONS, 0));
    let engine = engine(Policy { retry_budget: 42, ..plain_policy() });
    assert_eq!(engine.budget(), 42);
    assert_eq!(engine.policy().retry_budget, 42);
}

#[test]
fn each_event_dirties_the_record_when_it_changes_it() {
    let engine = engine(plain_policy());
    let mut m = begun(&engine);
    assert_eq!(m.start(T0, true), Action::Send);
    assert!(m.dirty(), "attempt counted: save before sending");
    assert_eq!((m.attempt(), m.record().attempts, m.timeout_ms()), (1, 1, 15_000));
    m.mark_saved();
    assert_eq!(m.on_network_error(T0 + 5), Action::Wait);
    assert!(m.dirty(), "outcome recorded: save before waiting");
    assert_eq!((m.delay_ms(), m.reason()), (250, Some(RetryReason::Network)));
    m.mark_saved();
    assert_eq!(m.on_wake(T0 + 255, false), Action::WaitOnline);
    assert!(!m.dirty(), "going offline changes nothing stored");
    assert_eq!(m.timeout_ms(), 120_000 - 255, "wait at most until the deadline");
    assert_eq!(m.on_online(T0 + 1_000), Action::Send);
    assert!(m.dirty());
    assert_eq!((m.attempt(), m.record().attempts, m.record().updated_at), (2, 2, T0 + 1_000));
    m.mark_saved();
    assert_eq!(m.on_response(T0 + 1_100, &answer(201)), Action::Done);
    assert!(m.dirty());
    assert_eq!((m.status(), m.ok(), m.record().state, m.record().last_status), (201, true, State::Succeeded, 201));
}

#[test]
fn starting_offline_waits_for_the_network_then_times_out_at_the_deadline() {
    let engine = engine(Policy { total_timeout_ms: 10_000, ..plain_policy() });
    let mut m = begun(&engine);
    assert_eq!(m.start(T0, false), Action::WaitOnline);
    assert_eq!((m.timeout_ms(), m.attempt(), m.dirty()), (10_000, 0, false));
    assert_eq!(m.on_online_timeout(T0 + 10_000), Action::Fail);
    assert_eq!((m.error().code, m.error().detail, m.attempt()), (code::RETRIES_EXHAUSTED, exhausted::DEADLINE, 0));
}

#[test]
fn coming_online_after_the_deadline_sends_nothing() {
    let engine = engine(Policy { total_timeout_ms: 10_000, ..plain_policy() });
    let mut m = begun(&engine);
    assert_eq!(m.start(T0, false), Action::WaitOnline);
    assert_eq!(m.on_online(T0 + 10_000), Action::Fail);
    assert_eq!(m.error().detail, exhausted::DEADLINE);
    assert_eq!(m.record().attempts, 0);
}

#[test]
fn an_abort_keeps_the_key_wherever_it_comes() {
    let engine = engine(plain_policy());
    // While offline.
    let mut m = begun(&engine);
    assert_eq!(m.start(T0, false), Action::WaitOnline);
    assert_eq!(m.on_abort(T0 + 1), Action::Fail);
    assert_eq!((m.error().code, m.attempt(), m.dirty()), (code::ABORTED, 0, false));
    // While waiting.
    assert_eq!(m.start(T0, true), Action::Send);
    assert_eq!(m.on_timeout(T0 + 15_000), Action::Wait);
    m.mark_saved();
    assert_eq!(m.on_abort(T0 + 15_001), Action::Fail);
    assert_eq!((m.error().code, m.attempt(), m.dirty()), (code::ABORTED, 1, false));
    // In flight: the outcome is recorded.
    assert_eq!(m.start(T0 + 20_000, true), Action::Send);
    m.mark_saved();
    assert_eq!(m.on_abort(T0 + 20_001), Action::Fail);
    assert!(m.dirty());
    assert_eq!((m.record().state, m.record().attempts, m.record().updated_at), (State::Pending, 2, T0 + 20_001));
}

#[test]
fn calls_out_of_order_are_a_protocol_failure_and_change_nothing_stored() {
    let engine = engine(plain_policy());
    let mut m = begun(&engine);
    let before = m.record().clone();
    type Call = fn(&mut Machine) -> Action;
    let calls: [(Call, u8); 6] = [
        (|m| m.on_response(T0, &answer(200)), protocol::NOT_SENDING),
        (|m| m.on_network_error(T0), protocol::NOT_SENDING),
        (|m| m.on_timeout(T0), protocol::NOT_SENDING),
        (|m| m.on_wake(T0, true), protocol::NOT_WAITING),
        (|m| m.on_online(T0), protocol::NOT_OFFLINE),
        (|m| m.on_online_timeout(T0), protocol::NOT_OFFLINE),
    ];
    for (call, detail) in calls {
        assert_eq!(call(&mut m), Action::Fail);
        assert_eq!((m.error().code, m.error().detail), (code::INTERNAL, detail));
    }
    assert_eq!(m.record(), &before);
    assert!(!m.dirty());
    // After DONE, a second answer is out of order too.
    assert_eq!(m.start(T0, true), Action::Send);
    assert_eq!(m.on_response(T0, &answer(200)), Action::Done);
    assert_eq!(m.on_response(T0, &answer(500)), Action::Fail);
    assert_eq!(m.error().code, code::INTERNAL);
    assert_eq!(m.record().state, State::Succeeded);
}

#[test]
fn a_new_start_is_a_fresh_send_with_its_own_deadline_and_attempts() {
    let engine = engine(Policy { max_attempts: 2, ..plain_policy() });
    let mut m = begun(&engine);
    assert_eq!(m.start(T0, true), Action::Send);
    assert_eq!(m.on_response(T0, &answer(500)), Action::Wait);
    assert_eq!(m.on_wake(T0 + 250, true), Action::Send);
    assert_eq!(m.on_response(T0 + 300, &answer(500)), Action::Fail);
    assert_eq!(m.error().detail, exhausted::MAX_ATTEMPTS);
    // "Try again": two more attempts, the record keeps counting.
    assert_eq!(m.start(T0 + 60_000, true), Action::Send);
    assert_eq!((m.attempt(), m.record().attempts, m.status()), (1, 3, 0));
    assert_eq!(m.on_response(T0 + 60_000, &answer(500)), Action::Wait);
    assert_eq!(m.delay_ms(), 250, "the backoff starts over");
}

#[test]
fn resumed_and_dirty_say_what_begin_did() {
    let engine = engine(plain_policy());
    let m = begun(&engine);
    assert!(!m.resumed());
    let again = engine.begin(ID, &checkout(), T0 + 1, false, Some(&m)).unwrap();
    assert!(again.resumed() && !again.dirty(), "resumed as stored: nothing to save");
    assert_eq!(again.record(), m.record());
    let expired = engine.begin(ID, &checkout(), T0 + DAY + 1, false, Some(&m)).unwrap();
    assert!(expired.resumed() && expired.dirty(), "marked expired: save it");
    assert_eq!(expired.record().state, State::Expired);
    let replaced = engine.begin(ID, &checkout(), T0 + 2, true, Some(&m)).unwrap();
    assert!(!replaced.resumed() && replaced.dirty());
    assert_ne!(replaced.record().key, m.record().key);
}

/// Field `Resumed` names the record `begin` resumed, so the driver takes the right one's request:
/// a new key, this tab's stored record, or the claim across tabs.
#[test]
fn field_resumed_names_the_record_begin_resumed() {
    let engine = engine(plain_policy());
    let fp = checkout();
    let (mine, theirs) = (begun(&engine), begun(&engine));
    assert_ne!(mine.record().key, theirs.record().key);
    let begin = |stored: Option<&Machine>, claimed: Option<&Machine>, replace: bool| {
        engine.begin_from(ID, &fp, &fp, T0 + 5, replace, None, stored, claimed).expect("begin")
    };
    let from = |m: &Machine| (m.resumed_from(), m.field(Field::Resumed), m.resumed(), m.dirty());
    let new = (Resumed::New, 0.0, false, true);
    let stored = (Resumed::Stored, 1.0, true, false);
    let claimed = (Resumed::Claimed, 2.0, true, true);
    assert_eq!(from(&begin(None, None, false)), new, "nothing before: a new key");
    assert_eq!(from(&begin(Some(&mine), None, false)), stored, "only the stored record");
    let m = begin(None, Some(&theirs), false);
    assert_eq!((from(&m), &m.record().key), (claimed, &theirs.record().key), "only the claim");
    let m = begin(Some(&mine), Some(&theirs), false);
    assert_eq!((from(&m), &m.record().key), (claimed, &theirs.record().key), "another key claimed: the claim");
    let m = begin(Some(&mine), Some(&mine), false);
    assert_eq!((from(&m), &m.record().key), (stored, &mine.record().key), "the same key: the fresher stored record");
    assert_eq!(from(&begin(Some(&mine), Some(&theirs), true)), new, "replaced: a new key");
    let expired = engine.begin_from(ID, &fp, &fp, T0 + DAY + 1, false, None, Some(&mine), None).expect("begin");
    assert_eq!(from(&expired), (Resumed::Stored, 1.0, true, true), "the stored record, marked expired");
    let mut failed = begun(&engine);
    assert_eq!(failed.start(T0, true), Action::Send);
    assert_eq!(failed.on_response(T0, &answer(422)), Action::Fail);
    let other = "b2".repeat(32);
    let renewed = engine.begin_from(ID, &other, &other, T0 + 5, false, None, Some(&failed), None).expect("begin");
    assert_eq!(from(&renewed), new, "another request after a definite failure: a new key");
}

#[test]
fn an_opaque_answer_is_a_definite_failure_that_stores_no_status() {
    let engine = engine(plain_policy());
    let mut m = begun(&engine);
    assert_eq!(m.start(T0, true), Action::Send);
    assert_eq!(m.on_response(T0, &answer(0)), Action::Done);
    assert_eq!((m.status(), m.ok(), m.record().last_status, m.record().state), (0, false, 0, State::Failed));
}

#[test]
fn an_answer_held_at_the_attempts_end_is_a_timeout_and_the_same_key_is_sent_again() {
    let engine = engine(plain_policy());
    let mut m = begun(&engine);
    let key = m.header();
    assert_eq!(m.start(T0, true), Action::Send);
    let ends = T0 + m.timeout_ms();
    m.mark_saved();
    // The timer fired first: whatever Response the engine hands over is not an answer.
    assert_eq!(m.on_response(ends, &answer(201)), Action::Wait);
    assert_eq!(m.reason(), Some(RetryReason::Timeout));
    assert!(m.dirty());
    assert_eq!((m.record().state, m.record().uncertain, m.status()), (State::Pending, true, 0));
    assert_eq!(m.on_wake(ends + m.delay_ms(), true), Action::Send);
    assert_eq!(m.header(), key, "a timed-out answer never mints a key");
    let second_ends = ends + m.delay_ms() + m.timeout_ms();
    // One millisecond before its end the same answer is definite.
    assert_eq!(m.on_response(second_ends - 1, &answer(201)), Action::Done);
    assert_eq!((m.ok(), m.record().state, m.record().uncertain), (true, State::Succeeded, false));
}

#[test]
fn an_answer_held_at_the_total_deadline_is_a_timeout_that_ends_the_send() {
    let engine = engine(Policy { attempt_timeout_ms: 10_000, total_timeout_ms: 4_000, ..plain_policy() });
    let mut m = begun(&engine);
    assert_eq!(m.start(T0, true), Action::Send);
    assert_eq!(m.timeout_ms(), 4_000, "the attempt ends with the deadline");
    assert_eq!(m.on_response(T0 + 4_000, &answer(201)), Action::Fail);
    assert_eq!((m.error().code, m.error().detail), (code::RETRIES_EXHAUSTED, exhausted::DEADLINE));
    assert!(m.record().uncertain, "the server may have done the work");
    assert_eq!(m.record().state, State::Pending, "the key stays for a later send");
}
