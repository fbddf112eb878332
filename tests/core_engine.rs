//! The machine's protocol rules (docs/ARCHITECTURE.md, "The protocol, client side"), driven by the reference
//! driver in `core/support.rs`: one key per intent, kept across attempts, reloads, aborts and
//! exhaustion; offline waits; expiry; persistence order.
#![cfg(not(target_arch = "wasm32"))]

#[path = "core/support.rs"]
mod support;

use idempotent_fetch::machine::error::{code, exhausted, field, mismatch, request};
use idempotent_fetch::machine::{Key, Policy, RetryReason, State};
use support::*;

const ID: &str = "checkout:cart-42";

// ---------------------------------------------------------------------------------------------
// One key per intent

#[test]
fn same_key_on_every_attempt() {
    let rig = Rig::new(1);
    let key = rig.begin_checkout(ID);
    rig.transport.script([status(503), Step::Network, Step::Timeout, status(500), status(201)]);

    let done = rig.send(ID).expect("definite answer");

    assert_eq!(rig.transport.calls(), 5);
    assert!(rig.transport.keys().iter().all(|k| *k == key), "keys sent: {:?}", rig.transport.keys());
    assert_eq!(done.key, key);
    assert_eq!((done.status, done.ok, done.attempts), (201, true, 5));
    let retries = rig.observer.retries();
    assert_eq!(retries.len(), 4);
    assert!(retries.iter().all(|r| r.key == key));
}

#[test]
fn key_is_a_valid_v4_in_the_raw_header_form_by_default() {
    let rig = Rig::new(2);
    let key = rig.begin_checkout(ID);
    rig.send(ID).unwrap();
    assert!(Key::parse(&key).is_some());
    assert_eq!(rig.transport.keys(), vec![key]);
}

#[test]
fn sf_string_header_form_quotes_the_key_on_every_attempt() {
    let mut rig = Rig::new(3);
    rig.policy.sf_header = true;
    let key = rig.begin_checkout(ID);
    rig.transport.script([status(503)]);
    rig.send(ID).unwrap();
    assert_eq!(rig.transport.keys(), vec![format!("\"{key}\""), format!("\"{key}\"")]);
}

#[test]
fn same_key_after_reload_and_attempts_accumulate() {
    let mut first = Rig::new(4);
    first.policy = Policy { max_attempts: 3, ..plain_policy() };
    let key = first.begin_checkout(ID);
    first.transport.always(Step::Network);
    let err = first.send(ID).unwrap_err();
    assert_eq!(err.code, code::RETRIES_EXHAUSTED);
    assert_eq!(first.record(ID).attempts, 3);

    // The page reloads: a new client (other RNG seed) over the same storage.
    let second = first.reload(999);
    let resumed = second.begin(ID, &checkout()).unwrap();
    assert_eq!(resumed.key.as_str(), key, "a reload must resume the stored key");
    assert_eq!(resumed.attempts, 3);
    assert_eq!(resumed.state, State::Pending);

    let done = second.send(ID).unwrap();
    assert_eq!(done.key, key);
    assert_eq!(done.attempts, 1, "attempts of this send");
    assert_eq!(second.transport.keys(), vec![key.clone()]);
    let record = second.record(ID);
    assert_eq!((record.attempts, record.state), (4, State::Succeeded));
    assert_eq!(second.observer.attempts.borrow()[0], (key, 1, 4), "total_attempts counts earlier page loads");
}

#[test]
fn page_closed_mid_attempt_then_reload_resends_the_same_key() {
    let first = Rig::new(5);
    let key = first.begin_checkout(ID);
    first.transport.script([Step::Hang]);
    // The request goes out and never answers: the tab is closed with it in flight.
    assert_eq!(first.send(ID).unwrap_err().code, HUNG);
    assert_eq!(first.transport.calls(), 1);
    let stored = first.record(ID);
    assert_eq!((stored.attempts, stored.state), (1, State::Pending), "saved before the request went out");

    let second = first.reload(6);
    assert_eq!(second.begin_checkout(ID), key);
    second.send(ID).unwrap();
    assert_eq!(second.transport.keys(), vec![key]);
    assert_eq!(second.record(ID).attempts, 2);
}

#[test]
fn begin_twice_in_one_page_returns_the_same_key() {
    let rig = Rig::new(7);
    assert_eq!(rig.begin_checkout(ID), rig.begin_checkout(ID));
}

#[test]
fn new_intent_id_gets_a_new_key() {
    let rig = Rig::new(8);
    let a = rig.begin_checkout("checkout:cart-42");
    let b = rig.begin_checkout("checkout:cart-43");
    assert_ne!(a, b);
    rig.send("checkout:cart-42").unwrap();
    rig.send("checkout:cart-43").unwrap();
    assert_eq!(rig.transport.keys(), vec![a, b]);
}

#[test]
fn changed_request_is_intent_mismatch_naming_the_old_key() {
    let rig = Rig::new(9);
    let key = rig.begin_checkout(ID);
    let err = rig.begin(ID, &changed_checkout()).unwrap_err();
    assert_eq!(err.code, code::INTENT_MISMATCH);
    assert_eq!(err.key.as_deref(), Some(key.as_str()), "the driver names the old key");
    let record = rig.record(ID);
    assert_eq!((record.key.as_str(), record.fingerprint), (key.as_str(), checkout()), "old intent untouched");
}

#[test]
fn changed_request_after_success_is_intent_mismatch() {
    let rig = Rig::new(10);
    let key = rig.begin_checkout(ID);
    rig.send(ID).unwrap();
    let err = rig.begin(ID, &changed_checkout()).unwrap_err();
    assert_eq!(err.code, code::INTENT_MISMATCH);
    assert_eq!(err.key.as_deref(), Some(key.as_str()));
}

#[test]
fn replace_true_mints_a_new_key_for_a_changed_request() {
    let rig = Rig::new(11);
    let old = rig.begin_checkout(ID);
    let new = rig.begin_with(ID, &changed_checkout(), true).unwrap();
    assert_ne!(new.key.as_str(), old);
    assert_eq!((new.state, new.attempts), (State::Pending, 0));
    assert_eq!(rig.record(ID).key, new.key);
    assert_eq!(rig.record(ID).fingerprint, changed_checkout());
}

#[test]
fn failed_intent_with_changed_request_gets_a_new_key() {
    let rig = Rig::new(12);
    let old = rig.begin_checkout(ID);
    rig.transport.script([status(400)]);
    let done = rig.send(ID).unwrap();
    assert!(!done.ok);
    assert_eq!(rig.record(ID).state, State::Failed);

    let new = rig.begin(ID, &changed_checkout()).unwrap();
    assert_ne!(new.key.as_str(), old, "the user fixed the request: a new intent");
    assert_eq!((new.state, new.attempts, new.last_status), (State::Pending, 0, 0));
}

#[test]
fn succeeded_intent_with_same_request_reuses_the_key() {
    let rig = Rig::new(13);
    let key = rig.begin_checkout(ID);
    rig.send(ID).unwrap();
    let again = rig.begin(ID, &checkout()).unwrap();
    assert_eq!((again.key.as_str(), again.state), (key.as_str(), State::Succeeded));

    // Sending it again carries the same key; the server replays its stored answer.
    rig.transport.script([status_with(200, &[("Idempotent-Replayed", "true")])]);
    let done = rig.send(ID).unwrap();
    assert_eq!(done.key, key);
    assert!(done.replayed);
    assert_eq!(rig.transport.keys(), vec![key.clone(), key]);
}

#[test]
fn invalid_intent_ids_are_rejected() {
    let rig = Rig::new(14);
    for id in ["", "a\nb", "tab\there", &"x".repeat(257)] {
        let err = rig.begin(id, &checkout()).unwrap_err();
        assert_eq!(err.code, code::INVALID_REQUEST, "id {id:?}");
    }
    assert!(rig.begin(&"x".repeat(256), &checkout()).is_ok());
}

#[test]
fn send_of_an_unknown_intent_is_not_found() {
    let rig = Rig::new(15);
    let err = rig.send("never-begun").unwrap_err();
    assert_eq!(err.code, code::NOT_FOUND);
    assert_eq!(rig.transport.calls(), 0);
}

// ---------------------------------------------------------------------------------------------
// Definite answers

#[test]
fn success_reports_status_attempts_key_and_retires_the_intent() {
    let rig = Rig::new(16);
    let key = rig.begin_checkout(ID);
    rig.transport.script([status(502), status(200)]);
    let done = rig.send(ID).unwrap();
    assert_eq!((done.status, done.ok, done.replayed, done.attempts), (200, true, false, 2));
    assert_eq!(done.key, key);
    let record = rig.record(ID);
    assert_eq!((record.state, record.last_status, record.attempts), (State::Succeeded, 200, 2));
}

#[test]
fn definite_failure_is_returned_as_a_response_and_retires_the_intent() {
    let rig = Rig::new(17);
    rig.begin_checkout(ID);
    rig.transport.script([status(402)]);
    let done = rig.send(ID).unwrap();
    assert_eq!((done.status, done.ok, done.attempts), (402, false, 1));
    assert_eq!(rig.transport.calls(), 1);
    let record = rig.record(ID);
    assert_eq!((record.state, record.last_status), (State::Failed, 402));
}

// ---------------------------------------------------------------------------------------------
// Abort

#[test]
fn abort_during_a_request_keeps_the_key_and_a_later_send_reuses_it() {
    let rig = Rig::new(18);
    let key = rig.begin_checkout(ID);
    rig.transport.script([status(503), Step::Aborted]);
    let err = rig.send(ID).unwrap_err();
    assert_eq!(err.code, code::ABORTED);
    assert_eq!((err.key.as_deref(), err.attempts, err.last_status), (Some(key.as_str()), 2, Some(503)));
    let record = rig.record(ID);
    assert_eq!((record.state, record.attempts), (State::Pending, 2));

    rig.send(ID).unwrap();
    assert_eq!(rig.transport.keys(), vec![key.clone(), key.clone(), key]);
}

#[test]
fn abort_during_a_backoff_sleep_keeps_the_key_and_a_later_send_reuses_it() {
    let rig = Rig::new(19);
    let key = rig.begin_checkout(ID);
    rig.waiter.abort_after(1);
    rig.transport.always(status(503));
    let err = rig.send(ID).unwrap_err();
    assert_eq!(err.code, code::ABORTED);
    assert_eq!((err.attempts, err.last_status), (2, Some(503)));
    assert_eq!(err.key.as_deref(), Some(key.as_str()));
    assert_eq!(rig.transport.calls(), 2, "nothing is sent after the abort");
    let record = rig.record(ID);
    assert_eq!((record.state, record.attempts, record.last_status), (State::Pending, 2, 503));

    let later = rig.reload(20);
    later.send(ID).unwrap();
    assert_eq!(later.transport.keys(), vec![key]);
}

#[test]
fn abort_while_waiting_to_come_online_is_aborted_without_sending() {
    let rig = Rig::new(21);
    let key = rig.begin_checkout(ID);
    rig.waiter.go_offline_for(60_000);
    rig.waiter.abort_after(0);
    let err = rig.send(ID).unwrap_err();
    assert_eq!((err.code, err.attempts), (code::ABORTED, 0));
    assert_eq!(err.key.as_deref(), Some(key.as_str()));
    assert_eq!(rig.transport.calls(), 0);
    assert_eq!(rig.record(ID).state, State::Pending);
}

// ---------------------------------------------------------------------------------------------
// Exhaustion and deadline

#[test]
fn exhausted_attempts_keep_the_key_and_a_later_send_reuses_it() {
    let mut rig = Rig::new(22);
    rig.policy = Policy { max_attempts: 4, ..plain_policy() };
    let key = rig.begin_checkout(ID);
    rig.transport.always(status(503));
    let err = rig.send(ID).unwrap_err();
    assert_eq!(err.code, code::RETRIES_EXHAUSTED);
    assert_eq!(err.detail, exhausted::MAX_ATTEMPTS);
    assert_eq!((err.attempts, err.last_status), (4, Some(503)));
    assert_eq!(err.key.as_deref(), Some(key.as_str()));
    assert_eq!(rig.waiter.sleeps().len(), 3, "no sleep after the last attempt");
    let record = rig.record(ID);
    assert_eq!((record.state, record.attempts, record.last_status), (State::Pending, 4, 503));

    // Giving up never mints a new key: begin resumes it, "Try again" sends it.
    assert_eq!(rig.begin_checkout(ID), key);
    rig.transport.always(status(200));
    let done = rig.send(ID).unwrap();
    assert_eq!((done.key.as_str(), done.attempts), (key.as_str(), 1));
    assert!(rig.transport.keys().iter().all(|k| *k == key));
    assert_eq!(rig.record(ID).attempts, 5);
}

#[test]
fn deadline_reached_is_retries_exhausted_with_reason_deadline() {
    let mut rig = Rig::new(23);
    rig.policy = Policy {
        max_attempts: 100,
        base_delay_ms: 1_000,
        max_delay_ms: 1_000,
        total_timeout_ms: 10_000,
        ..plain_policy()
    };
    let key = rig.begin_checkout(ID);
    rig.transport.always(status(500));
    rig.transport.latency_ms.set(1_500);
    let start = rig.clock.now();
    let err = rig.send(ID).unwrap_err();
    assert_eq!((err.code, err.detail), (code::RETRIES_EXHAUSTED, exhausted::DEADLINE));
    assert_eq!(err.key.as_deref(), Some(key.as_str()));
    assert!(err.attempts >= 3 && err.attempts < 100, "attempts {}", err.attempts);
    assert!(rig.clock.now() - start <= 10_000, "ran {} ms past start", rig.clock.now() - start);
    assert_eq!(rig.record(ID).state, State::Pending);
}

#[test]
fn retry_after_beyond_the_deadline_gives_up_instead_of_sleeping_past_it() {
    let mut rig = Rig::new(24);
    rig.policy = Policy { total_timeout_ms: 30_000, ..plain_policy() };
    rig.begin_checkout(ID);
    rig.transport.script([status_with(503, &[("Retry-After", "45")])]);
    let err = rig.send(ID).unwrap_err();
    assert_eq!(err.detail, exhausted::DEADLINE);
    assert_eq!(err.attempts, 1);
    assert!(rig.waiter.sleeps().is_empty());
}

#[test]
fn attempt_timeout_is_passed_to_the_transport_and_capped_by_the_remaining_time() {
    let mut rig = Rig::new(25);
    rig.policy = Policy { total_timeout_ms: 20_000, attempt_timeout_ms: 15_000, ..plain_policy() };
    rig.begin_checkout(ID);
    // The first attempt hangs until its timeout; the second has only what is left of the deadline.
    rig.transport.script([Step::Slow(60_000, FakeResponse::new(200)), status(200)]);
    let done = rig.send(ID).unwrap();
    assert_eq!(done.attempts, 2);
    let seen = rig.transport.seen();
    assert_eq!(seen[0].timeout_ms, 15_000);
    assert_eq!(rig.waiter.sleeps(), vec![250]);
    assert_eq!(seen[1].timeout_ms, 20_000 - 15_000 - 250);
}

#[test]
fn zero_total_timeout_sends_nothing() {
    let mut rig = Rig::new(26);
    rig.policy = Policy { total_timeout_ms: 0, ..plain_policy() };
    rig.begin_checkout(ID);
    let err = rig.send(ID).unwrap_err();
    assert_eq!((err.code, err.detail, err.attempts), (code::RETRIES_EXHAUSTED, exhausted::DEADLINE, 0));
    assert_eq!(rig.transport.calls(), 0);
}

#[test]
fn retry_events_report_the_delay_actually_slept_and_the_reason() {
    let rig = Rig::new(27);
    let key = rig.begin_checkout(ID);
    rig.transport.script([status(503), Step::Network, Step::Timeout, status(200)]);
    rig.send(ID).unwrap();
    let retries = rig.observer.retries();
    let delays: Vec<u64> = retries.iter().map(|r| r.delay_ms).collect();
    assert_eq!(delays, rig.waiter.sleeps());
    assert_eq!(delays, vec![250, 500, 1_000], "no jitter: exactly base * 2^n");
    assert_eq!(
        retries[0],
        SeenRetry { key: key.clone(), attempt: 1, delay_ms: 250, reason: RetryReason::Status(503), status: Some(503) }
    );
    assert_eq!((retries[1].reason, retries[1].status), (RetryReason::Network, None));
    assert_eq!((retries[2].reason, retries[2].status), (RetryReason::Timeout, None));
}

// ---------------------------------------------------------------------------------------------
// Offline

#[test]
fn offline_waits_for_the_network_without_spending_attempts() {
    let rig = Rig::new(28);
    let key = rig.begin_checkout(ID);
    rig.waiter.go_offline_for(30_000);
    let start = rig.clock.now();
    let done = rig.send(ID).unwrap();
    assert_eq!(done.attempts, 1);
    let seen = rig.transport.seen();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].at_ms >= start + 30_000, "sent while offline");
    assert_eq!(*rig.observer.offline.borrow(), vec![key]);
    assert_eq!(rig.record(ID).attempts, 1);
    assert!(rig.waiter.sleeps().is_empty(), "waited for `online`, not by backoff sleeps");
}

#[test]
fn going_offline_between_attempts_pauses_without_spending_attempts() {
    let mut rig = Rig::new(29);
    rig.policy = Policy { max_attempts: 3, ..plain_policy() };
    rig.begin_checkout(ID);
    // Offline from just after the first attempt for a minute (longer than every backoff).
    rig.waiter.go_offline_between(T0 + 1, T0 + 60_000);
    rig.transport.latency_ms.set(10);
    rig.transport.script([Step::Network]);
    let done = rig.send(ID).unwrap();
    assert_eq!(done.attempts, 2);
    let seen = rig.transport.seen();
    assert!(seen.iter().all(|s| s.at_ms < T0 + 1 || s.at_ms >= T0 + 60_000), "sent while offline: {seen:?}");
}

#[test]
fn offline_past_the_deadline_exhausts_with_reason_deadline() {
    let mut rig = Rig::new(30);
    rig.policy = Policy { total_timeout_ms: 120_000, ..plain_policy() };
    let key = rig.begin_checkout(ID);
    rig.waiter.go_offline_for(10 * 60_000);
    let start = rig.clock.now();
    let err = rig.send(ID).unwrap_err();
    assert_eq!((err.code, err.detail, err.attempts), (code::RETRIES_EXHAUSTED, exhausted::DEADLINE, 0));
    assert_eq!(err.key.as_deref(), Some(key.as_str()));
    assert_eq!(rig.transport.calls(), 0);
    assert_eq!(rig.clock.now() - start, 120_000, "waits exactly until the deadline");
    assert_eq!(rig.record(ID).state, State::Pending);
}

// ---------------------------------------------------------------------------------------------
// Expiry

#[test]
fn pending_intent_older_than_the_ttl_fails_expired_and_is_never_sent() {
    let rig = Rig::new(31);
    let key = rig.begin_checkout(ID);
    rig.clock.advance(DAY + 1);
    let err = rig.send(ID).unwrap_err();
    assert_eq!(err.code, code::EXPIRED);
    assert_eq!(err.key.as_deref(), Some(key.as_str()));
    assert_eq!(rig.transport.calls(), 0);
    assert_eq!(rig.record(ID).state, State::Expired);
    // And it stays expired.
    assert_eq!(rig.send(ID).unwrap_err().code, code::EXPIRED);
    assert_eq!(rig.transport.calls(), 0);
}

#[test]
fn pending_intent_exactly_at_the_ttl_is_still_sent() {
    let rig = Rig::new(32);
    rig.begin_checkout(ID);
    rig.clock.advance(DAY);
    assert!(rig.send(ID).is_ok());
}

#[test]
fn begin_on_an_old_pending_intent_returns_it_expired() {
    let first = Rig::new(33);
    let key = first.begin_checkout(ID);
    first.clock.advance(2 * DAY);
    let second = first.reload(34);
    let record = second.begin(ID, &checkout()).unwrap();
    assert_eq!((record.state, record.key.as_str()), (State::Expired, key.as_str()));
    assert_eq!(second.record(ID).state, State::Expired, "persisted");
    assert_eq!(second.send(ID).unwrap_err().code, code::EXPIRED);
    assert_eq!(second.transport.calls(), 0);

    // The app reconciled with its server and starts over explicitly.
    let fresh = second.begin_with(ID, &checkout(), true).unwrap();
    assert_ne!(fresh.key.as_str(), key);
    second.send(ID).unwrap();
    assert_eq!(second.transport.keys(), vec![fresh.key.as_str().to_owned()]);
}

// ---------------------------------------------------------------------------------------------
// Persistence

#[test]
fn record_is_persisted_before_the_first_attempt() {
    let rig = Rig::new(35);
    rig.begin_checkout(ID);
    rig.send(ID).unwrap();
    let saved = rig.log.position("save attempts=1 state=pending").expect("saved with attempts=1");
    let sent = rig.log.position("send attempt=1").expect("sent");
    assert!(saved < sent, "events: {:?}", rig.log.events());
}

#[test]
fn record_is_saved_after_every_attempt_and_before_every_retry() {
    let rig = Rig::new(36);
    rig.begin_checkout(ID);
    rig.transport.script([status(503), status(200)]);
    rig.send(ID).unwrap();
    let events = rig.log.events();
    let sent_1 = rig.log.position("send attempt=1").unwrap();
    let sent_2 = rig.log.position("send attempt=2").unwrap();
    let sleep = rig.log.position("sleep").unwrap();
    assert!(events[sent_1 + 1..sleep].iter().any(|e| e.starts_with("save attempts=1")), "{events:?}");
    assert!(events[sleep..sent_2].iter().any(|e| e.starts_with("save attempts=2")), "{events:?}");
    assert!(events[sent_2..].iter().any(|e| e == "save attempts=2 state=succeeded"), "{events:?}");
}

#[test]
fn save_failing_before_the_first_attempt_is_storage_and_nothing_is_sent() {
    let rig = Rig::new(37);
    rig.begin_checkout(ID);
    rig.store.fail_saves_after(0);
    let err = rig.send(ID).unwrap_err();
    assert_eq!(err.code, code::STORAGE);
    assert_eq!(rig.transport.calls(), 0);
}

#[test]
fn save_failing_on_begin_is_storage() {
    let rig = Rig::new(38);
    rig.store.fail_saves_after(0);
    let err = rig.begin(ID, &checkout()).unwrap_err();
    assert_eq!(err.code, code::STORAGE);
    assert!(rig.store.raw(ID).is_none());
}

#[test]
fn save_failing_after_an_attempt_stops_retrying_with_storage_and_keeps_progress() {
    let rig = Rig::new(39);
    let key = rig.begin_checkout(ID);
    rig.store.fail_saves_after(1);
    rig.transport.always(status(503));
    let err = rig.send(ID).unwrap_err();
    assert_eq!(err.code, code::STORAGE);
    assert_eq!((err.key.as_deref(), err.attempts, err.last_status), (Some(key.as_str()), 1, Some(503)));
    assert_eq!(rig.transport.calls(), 1, "no retry that could not be recorded");
}

#[test]
fn corrupt_stored_record_is_storage_and_nothing_is_sent() {
    let rig = Rig::new(40);
    rig.begin_checkout(ID);
    rig.store.tamper(ID, |r| r["key"] = "8e03978e-40d5-43e8-bc93-6894a57f9324\r\nX-Evil: 1".into());
    let err = rig.send(ID).unwrap_err();
    assert_eq!((err.code, err.detail), (code::STORAGE, field::KEY));
    assert_eq!(rig.transport.calls(), 0);
    assert_eq!(rig.begin(ID, &checkout()).unwrap_err().code, code::STORAGE);
}

#[test]
fn succeeded_intent_older_than_the_ttl_is_not_resent_with_its_old_key() {
    // The server may have forgotten the key: re-sending it could do the work twice.
    let rig = Rig::new(41);
    let key = rig.begin_checkout(ID);
    rig.send(ID).unwrap();
    rig.clock.advance(DAY + 1);
    assert_eq!(rig.begin_checkout(ID), key);
    let err = rig.send(ID).unwrap_err();
    assert_eq!(err.code, code::EXPIRED);
    assert_eq!(err.key.as_deref(), Some(key.as_str()));
    assert_eq!(rig.transport.calls(), 1, "only the original attempt");
}

#[test]
fn failed_intent_older_than_the_ttl_is_not_resent_with_its_old_key() {
    let rig = Rig::new(42);
    rig.begin_checkout(ID);
    rig.transport.script([status(400)]);
    rig.send(ID).unwrap();
    rig.clock.advance(DAY + 1);
    assert_eq!(rig.send(ID).unwrap_err().code, code::EXPIRED);
    assert_eq!(rig.transport.calls(), 1);
}

#[test]
fn replayed_definite_failure_reports_replayed() {
    let rig = Rig::new(43);
    rig.begin_checkout(ID);
    rig.transport.script([status_with(402, &[("Idempotent-Replayed", "true")])]);
    let done = rig.send(ID).unwrap();
    assert_eq!((done.status, done.ok, done.replayed), (402, false, true));
}

#[test]
fn a_failing_csprng_is_an_error_not_a_fixed_key() {
    let rig = Rig::new(44);
    *rig.random.borrow_mut() = Some(Box::new(FailingRandom::after(0)));
    let err = rig.begin(ID, &checkout()).unwrap_err();
    assert_eq!((err.code, err.detail), (code::STORAGE, field::CSPRNG));
    assert!(rig.store.raw(ID).is_none());
}

#[test]
fn a_failing_csprng_during_a_retry_is_an_error_not_a_zero_delay() {
    let mut rig = Rig::new(47);
    rig.policy.jitter = idempotent_fetch::machine::Jitter::Full;
    // One good draw (the key's 16 bytes are one fill), then the CSPRNG fails.
    *rig.random.borrow_mut() = Some(Box::new(FailingRandom::after(1)));
    let key = rig.begin_checkout(ID);
    rig.transport.always(status(503));
    let err = rig.send(ID).unwrap_err();
    assert_eq!((err.code, err.detail, err.attempts), (code::STORAGE, field::CSPRNG, 1));
    assert_eq!(err.key.as_deref(), Some(key.as_str()));
    assert!(rig.waiter.sleeps().is_empty(), "never a zero delay");
    assert_eq!(rig.record(ID).state, State::Pending, "the key is kept");
}

#[test]
fn a_status_outside_100_to_599_never_makes_the_stored_record_unreadable() {
    // An opaque (no-cors) fetch response has status 0; a broken proxy may send anything.
    for code in [0u16, 99, 600, 999] {
        let rig = Rig::new(45);
        let key = rig.begin_checkout(ID);
        rig.transport.script([status(code)]);
        let _ = rig.send(ID);
        let record = rig.load(ID).unwrap_or_else(|e| panic!("status {code}: stored record unreadable: {e:?}"));
        assert_eq!(record.expect("stored").key.as_str(), key, "status {code}");
        assert!(rig.begin(ID, &checkout()).is_ok(), "status {code}");
    }
}

#[test]
fn clock_moving_backwards_keeps_the_record_valid() {
    let rig = Rig::new(46);
    let key = rig.begin_checkout(ID);
    rig.clock.set(T0 - HOUR); // the user fixed their system clock
    rig.transport.script([status(503)]);
    rig.send(ID).unwrap();
    let record = rig.record(ID);
    assert!(record.updated_at >= record.created_at);
    assert_eq!(record.key.as_str(), key);
}

mod invariants {
    use super::*;
    use proptest::prelude::*;

    fn any_step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0u16..1000).prop_map(status),
            2 => prop::sample::select(vec![408u16, 409, 423, 425, 429, 500, 502, 503, 504]).prop_map(status),
            1 => (0u16..1000, "[ -~]{0,12}").prop_map(|(code, v)| status_with(code, &[("Retry-After", &v)])),
            1 => (0u16..1000, prop::sample::select(vec!["true", "false", "x"]))
                .prop_map(|(code, v)| status_with(code, &[("Stripe-Should-Retry", v)])),
            1 => Just(Step::Network),
            1 => Just(Step::Timeout),
            1 => Just(Step::Aborted),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        /// Whatever the network does, over several sends and reloads: the stored record stays
        /// readable, the key never changes, and attempts add up.
        #[test]
        fn key_is_stable_and_record_stays_valid_whatever_the_transport_does(
            seed in any::<u64>(),
            sends in prop::collection::vec(prop::collection::vec(any_step(), 0..8), 1..4),
            max_attempts in 1u32..6,
        ) {
            let mut rig = Rig::new(seed);
            rig.policy = Policy { max_attempts, ..plain_policy() };
            let key = rig.begin_checkout(ID);
            let mut total = 0usize;
            for (n, script) in sends.iter().enumerate() {
                let mut page = rig.reload(seed.wrapping_add(n as u64 + 1));
                page.policy = Policy { max_attempts, ..plain_policy() };
                page.transport.script(script.iter().cloned());
                page.transport.always(Step::Network);
                let before = page.record(ID).state;
                let result = page.send(ID);
                total += page.transport.calls();
                prop_assert!(page.transport.keys().iter().all(|k| *k == key));
                let record = page.load(ID).map_err(|e| TestCaseError::fail(format!("{e:?}")))?.expect("stored");
                prop_assert_eq!(record.key.as_str(), key.as_str());
                prop_assert_eq!(record.attempts as usize, total);
                match result {
                    Ok(done) => {
                        prop_assert_eq!(&done.key, &key);
                        let state = if done.ok { State::Succeeded } else { State::Failed };
                        prop_assert_eq!(record.state, state);
                    }
                    Err(err) => {
                        prop_assert_eq!(err.key.as_deref(), Some(key.as_str()));
                        let expected = if err.code == code::KEY_MISMATCH { State::Failed } else { State::Pending };
                        prop_assert!(record.state == expected || (page.transport.calls() == 0 && record.state == before));
                    }
                }
                rig = page;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A key the app brings

const BROUGHT: &str = "cs_test_a1B2c3D4e5F6g7H8i9J0";

#[test]
fn a_brought_key_is_sent_as_given_and_reused_after_a_reload() {
    let mut first = Rig::new(60);
    first.policy.max_attempts = 2;
    let record = first.begin_brought(ID, &checkout(), BROUGHT, false).expect("begin");
    assert_eq!((record.key.as_str(), record.brought), (BROUGHT, true));
    first.transport.always(status(503));
    let failure = first.send(ID).expect_err("no answer");
    assert_eq!(failure.code, code::RETRIES_EXHAUSTED, "{failure:?}");
    assert_eq!(first.transport.keys(), vec![BROUGHT.to_owned(), BROUGHT.to_owned()]);
    let rig = first.reload(64);
    // After the reload: the stored record (marked brought) validates and resumes, with or without
    // the key brought again.
    let again = rig.begin_brought(ID, &checkout(), BROUGHT, false).expect("resume with the same key");
    assert_eq!(again.key.as_str(), BROUGHT);
    let plain = rig.begin(ID, &checkout()).expect("resume without bringing it");
    assert_eq!(plain.key.as_str(), BROUGHT);
}

#[test]
fn a_malformed_brought_key_is_refused_before_anything_is_stored() {
    let rig = Rig::new(61);
    let long = "k".repeat(256);
    for bad in [
        "abcdefghij12345",
        "has space in it!!",
        "quote\"inside-the-key",
        "crlf\r\nX-Evil: 1-abcdef",
        "ümlaut-key-abcdefgh",
        &long,
    ] {
        let failure = rig.begin_brought(ID, &checkout(), bad, false).expect_err(bad);
        assert_eq!((failure.code, failure.detail), (code::INVALID_REQUEST, request::KEY), "{bad:?}");
    }
    assert!(rig.begin_brought(ID, &checkout(), &"k".repeat(255), false).is_ok(), "255 characters are accepted");
    assert!(rig.begin_brought("other", &checkout(), "0123456789abcdef", false).is_ok(), "16 characters are accepted");
}

#[test]
fn another_key_for_a_begun_intent_is_refused_unless_replaced() {
    let rig = Rig::new(62);
    let minted = rig.begin_checkout(ID);
    let failure = rig.begin_brought(ID, &checkout(), BROUGHT, false).expect_err("another key");
    assert_eq!((failure.code, failure.detail), (code::INTENT_MISMATCH, mismatch::KEY_STORED));
    assert_eq!(failure.key.as_deref(), Some(minted.as_str()), "the message can name the old key");
    let replaced = rig.begin_brought(ID, &checkout(), BROUGHT, true).expect("replace");
    assert_eq!(replaced.key.as_str(), BROUGHT);
    let other = rig.begin_brought(ID, &checkout(), "another-key-0123456789", false).expect_err("a second brought key");
    assert_eq!((other.code, other.detail), (code::INTENT_MISMATCH, mismatch::KEY_STORED));
}

#[test]
fn a_stored_key_of_the_brought_form_validates_only_when_marked_brought() {
    let rig = Rig::new(63);
    rig.begin_brought(ID, &checkout(), BROUGHT, false).expect("begin");
    let text = rig.store.raw(ID).expect("stored");
    assert!(text.contains("\"brought\":true"), "{text}");
    // The mark removed: the key is held to the minted form (a UUID v4) and refused.
    rig.store.set_raw(ID, &text.replace(",\"brought\":true", ""));
    let failure = rig.begin(ID, &checkout()).expect_err("unmarked");
    assert_eq!((failure.code, failure.detail), (code::STORAGE, field::KEY));
}
