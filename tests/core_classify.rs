//! Classification of answers (definite vs retried, server hints, caller override) and
//! `Retry-After`, both as pure functions and through the machine.
#![cfg(not(target_arch = "wasm32"))]

#[path = "core/support.rs"]
mod support;

use idempotent_fetch::machine::error::code;
use idempotent_fetch::machine::retry_after::{parse_http_date, parse_retry_after};
use idempotent_fetch::machine::{
    classify as classify_answer, Classification, FailureReason, Override, Policy as RetryPolicy, RetryReason,
    State as IntentState,
};
use proptest::prelude::*;
use support::*;

const ID: &str = "checkout:cart-42";
const NOW: u64 = T0;
const CAP: u64 = 60_000;

/// Classifies a scripted response the way the driver hands it over (headers by name, the
/// caller's `shouldRetry` verdict as an override).
fn classify(response: &FakeResponse, now: u64, cap: u64, caller: Option<ShouldRetry<'_>>) -> Classification {
    classify_answer(&response.answer(caller), now, cap)
}

fn classify_status(code: u16) -> Classification {
    classify(&FakeResponse::new(code), NOW, CAP, None)
}

fn http_date(ms: u64) -> String {
    httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
}

// ---------------------------------------------------------------------------------------------
// The status table

#[test]
fn every_2xx_is_success() {
    for code in [200, 201, 202, 204, 299] {
        assert_eq!(classify_status(code), Classification::Success, "{code}");
    }
}

#[test]
fn retried_statuses_are_retried_with_their_status_as_reason() {
    for code in [408, 409, 423, 425, 429, 500, 502, 503, 504] {
        assert_eq!(
            classify_status(code),
            Classification::Retry { reason: RetryReason::Status(code), after_ms: None },
            "{code}"
        );
    }
}

#[test]
fn other_4xx_and_501_are_definite_failures() {
    for code in [400, 401, 402, 403, 404, 410, 413, 501, 505] {
        assert_eq!(classify_status(code), Classification::Failure(FailureReason::Status(code)), "{code}");
    }
}

#[test]
fn status_422_is_key_mismatch() {
    assert_eq!(classify_status(422), Classification::Failure(FailureReason::KeyMismatch));
}

#[test]
fn stripe_should_retry_true_makes_a_definite_status_retried() {
    let response = FakeResponse::new(400).with("Stripe-Should-Retry", "true");
    assert!(matches!(
        classify(&response, NOW, CAP, None),
        Classification::Retry { reason: RetryReason::Status(400), .. }
    ));
}

#[test]
fn stripe_should_retry_false_makes_a_retried_status_definite() {
    let response = FakeResponse::new(503).with("stripe-should-retry", " false ");
    assert_eq!(classify(&response, NOW, CAP, None), Classification::Failure(FailureReason::Status(503)));
}

#[test]
fn malformed_stripe_should_retry_is_ignored() {
    for value in ["yes", "1", "TRUE!", ""] {
        let response = FakeResponse::new(503).with("Stripe-Should-Retry", value);
        assert!(matches!(classify(&response, NOW, CAP, None), Classification::Retry { .. }), "{value:?}");
    }
}

#[test]
fn caller_override_beats_the_server_hint_and_the_table() {
    let never: &dyn Fn(u16) -> Option<bool> = &|_| Some(false);
    let always: &dyn Fn(u16) -> Option<bool> = &|_| Some(true);
    let undecided: &dyn Fn(u16) -> Option<bool> = &|_| None;
    let hinted_retry = FakeResponse::new(503).with("Stripe-Should-Retry", "true");
    let hinted_final = FakeResponse::new(400).with("Stripe-Should-Retry", "false");
    assert_eq!(classify(&hinted_retry, NOW, CAP, Some(never)), Classification::Failure(FailureReason::Status(503)));
    assert!(matches!(classify(&hinted_final, NOW, CAP, Some(always)), Classification::Retry { .. }));
    // `None` falls through to the hint, then the table.
    assert!(matches!(classify(&hinted_retry, NOW, CAP, Some(undecided)), Classification::Retry { .. }));
    assert_eq!(classify(&hinted_final, NOW, CAP, Some(undecided)), Classification::Failure(FailureReason::Status(400)));
}

#[test]
fn success_cannot_be_overridden_into_a_retry() {
    let always: &dyn Fn(u16) -> Option<bool> = &|_| Some(true);
    let response = FakeResponse::new(200).with("Stripe-Should-Retry", "true");
    assert_eq!(classify(&response, NOW, CAP, Some(always)), Classification::Success);
}

#[test]
fn retry_reasons_have_boundary_numbers_and_know_throttling() {
    assert_eq!(RetryReason::Network.index(), 1);
    assert_eq!(RetryReason::Timeout.index(), 2);
    assert_eq!(RetryReason::Status(409).index(), 3);
    assert_eq!(Override::from_index(1), Override::Retry);
    assert_eq!(Override::from_index(2), Override::Definite);
    for n in [0, 3, 255, u32::MAX] {
        assert_eq!(Override::from_index(n), Override::None, "{n}");
    }
    for code in [429, 409, 503] {
        assert!(RetryReason::Status(code).is_throttling(), "{code}");
    }
    for reason in [RetryReason::Status(500), RetryReason::Network, RetryReason::Timeout] {
        assert!(!reason.is_throttling(), "{reason:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// The same rows through the engine

#[test]
fn engine_retries_each_retried_status_with_the_same_key() {
    for code in [408, 409, 423, 425, 429, 500, 502, 503, 504] {
        let rig = Rig::new(u64::from(code));
        let key = rig.begin_checkout(ID);
        rig.transport.script([status(code)]);
        let done = rig.send(ID).unwrap_or_else(|e| panic!("{code}: {e:?}"));
        assert_eq!((done.status, done.attempts), (200, 2), "{code}");
        assert_eq!(rig.transport.keys(), vec![key.clone(), key], "{code}");
    }
}

#[test]
fn engine_ends_on_each_definite_status_after_one_attempt() {
    for code in [400, 401, 403, 404, 501] {
        let rig = Rig::new(u64::from(code));
        rig.begin_checkout(ID);
        rig.transport.always(status(code));
        let done = rig.send(ID).unwrap_or_else(|e| panic!("{code}: {e:?}"));
        assert_eq!((done.status, done.ok, done.attempts), (code, false, 1), "{code}");
        assert_eq!(rig.record(ID).state, IntentState::Failed, "{code}");
    }
}

#[test]
fn engine_turns_422_into_key_mismatch_and_fails_the_intent() {
    let rig = Rig::new(1);
    let key = rig.begin_checkout(ID);
    rig.transport.always(status(422));
    let err = rig.send(ID).unwrap_err();
    assert_eq!(err.code, code::KEY_MISMATCH);
    assert_eq!((err.key.as_deref(), err.attempts, err.last_status), (Some(key.as_str()), 1, Some(422)));
    assert_eq!(rig.transport.calls(), 1);
    let record = rig.record(ID);
    assert_eq!((record.state, record.last_status), (IntentState::Failed, 422));
}

#[test]
fn engine_retries_network_errors_and_timeouts() {
    let rig = Rig::new(2);
    let key = rig.begin_checkout(ID);
    rig.transport.script([Step::Network, Step::Timeout, Step::Slow(20_000, FakeResponse::new(200))]);
    let done = rig.send(ID).unwrap();
    assert_eq!((done.status, done.attempts), (200, 4));
    assert_eq!(rig.transport.keys(), vec![key; 4]);
}

#[test]
fn engine_honours_stripe_should_retry_false_on_503() {
    let rig = Rig::new(3);
    rig.begin_checkout(ID);
    rig.transport.script([status_with(503, &[("Stripe-Should-Retry", "false")])]);
    let done = rig.send(ID).unwrap();
    assert_eq!((done.status, done.ok, done.attempts), (503, false, 1));
    assert_eq!(rig.record(ID).state, IntentState::Failed);
}

#[test]
fn engine_honours_stripe_should_retry_true_on_400() {
    let rig = Rig::new(4);
    rig.begin_checkout(ID);
    rig.transport.script([status_with(400, &[("Stripe-Should-Retry", "true")])]);
    let done = rig.send(ID).unwrap();
    assert_eq!((done.status, done.attempts), (200, 2));
}

#[test]
fn engine_caller_override_beats_the_hint() {
    let rig = Rig::new(5);
    rig.begin_checkout(ID);
    rig.transport.script([status_with(503, &[("Stripe-Should-Retry", "true")])]);
    let only_502: &dyn Fn(u16) -> Option<bool> = &|status| Some(status == 502);
    let done = rig.send_with(ID, Some(only_502)).unwrap();
    assert_eq!((done.status, done.ok, done.attempts), (503, false, 1));

    let rig = Rig::new(6);
    rig.begin_checkout(ID);
    rig.transport.script([status(404)]);
    let retry_404: &dyn Fn(u16) -> Option<bool> = &|status| (status == 404).then_some(true);
    let done = rig.send_with(ID, Some(retry_404)).unwrap();
    assert_eq!((done.status, done.attempts), (200, 2));
}

// ---------------------------------------------------------------------------------------------
// Retry-After

#[test]
fn retry_after_seconds() {
    assert_eq!(parse_retry_after("0", NOW, CAP), Some(0));
    assert_eq!(parse_retry_after("7", NOW, CAP), Some(7_000));
    assert_eq!(parse_retry_after(" 12 ", NOW, CAP), Some(12_000));
    assert_eq!(parse_retry_after("120", NOW, CAP), Some(CAP), "capped");
    assert_eq!(parse_retry_after("99999999999999999999999999", NOW, CAP), Some(CAP), "saturates, capped");
}

#[test]
fn retry_after_http_date() {
    assert_eq!(parse_retry_after(&http_date(NOW + 30_000), NOW, CAP), Some(30_000));
    assert_eq!(parse_retry_after(&http_date(NOW + 3_600_000), NOW, CAP), Some(CAP), "capped");
    assert_eq!(parse_retry_after(&http_date(NOW - 30_000), NOW, CAP), Some(0), "a past date means now");
    // Sub-second "now": the date has whole seconds, so it can be up to 1 s behind.
    assert_eq!(parse_retry_after("Tue, 14 Nov 2023 22:13:50 GMT", NOW + 400, CAP), Some(29_600));
}

#[test]
fn retry_after_accepts_the_three_rfc_9110_date_forms() {
    // RFC 9110 §5.6.7's example, in each form.
    let sunday = 784_111_777_000;
    assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), Some(sunday));
    assert_eq!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), Some(sunday));
    assert_eq!(parse_http_date("Sun Nov  6 08:49:37 1994"), Some(sunday));
    assert_eq!(parse_http_date("Sun Nov 06 08:49:37 1994"), Some(sunday));
    // RFC 850 two-digit years: 70-99 are 19xx, 00-69 are 20xx (as httpdate reads them).
    assert_eq!(parse_http_date("Thursday, 01-Jan-70 00:00:00 GMT"), Some(0));
    assert_eq!(parse_http_date("Tuesday, 14-Nov-23 22:13:20 GMT"), Some(T0));
    // Leap days, and the last second of a day.
    assert_eq!(parse_http_date("Thu, 29 Feb 2024 12:00:00 GMT"), Some(1_709_208_000_000));
    assert_eq!(parse_http_date("Fri, 31 Dec 9999 23:59:59 GMT"), Some(253_402_300_799_000));
    for value in ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"] {
        assert_eq!(parse_retry_after(value, sunday - 5_000, CAP), Some(5_000), "{value}");
    }
}

#[test]
fn http_dates_that_do_not_exist_or_name_the_wrong_weekday_are_rejected() {
    for value in [
        "Mon, 06 Nov 1994 08:49:37 GMT",  // 6 Nov 1994 was a Sunday
        "Monday, 06-Nov-94 08:49:37 GMT", // same
        "Mon Nov  6 08:49:37 1994",       // same
        "Thu, 29 Feb 2023 12:00:00 GMT",  // 2023 is not a leap year
        "Wed, 31 Apr 2024 12:00:00 GMT",  // April has 30 days
        "Sun, 06 Nov 1994 24:00:00 GMT",  // hour 24
        "Sun, 06 Nov 1994 08:60:00 GMT",  // minute 60
        "Sun, 06 Nov 1994 08:49:60 GMT",  // leap second
        "Sun, 06 Nov 1994 08:49:37 UTC",  // only GMT
        "Sun, 06 nov 1994 08:49:37 GMT",  // month names are case-sensitive
        "Wed, 31 Dec 1969 23:59:59 GMT",  // before the epoch
        "Sun,  6 Nov 1994 08:49:37 GMT",  // IMF-fixdate has two-digit days
        "Sun, 06 Nov 1994 08:49:37 GMT ", // 30 bytes (the caller trims; the parser does not)
        "Sunday, 06-Nov-1994 08:49:37 GMT",
        "Sun Nov 6 08:49:37 1994",
        "Sunday 06-Nov-94 08:49:37 GMT",
        ",",
        "",
    ] {
        assert_eq!(parse_http_date(value), None, "{value:?}");
    }
}

#[test]
fn bogus_retry_after_is_ignored() {
    for value in
        ["", "   ", "-5", "1.5", "5s", "soon", "+5", "0x10", "Tue, 31 Feb 2023 25:00:00 GMT", "٣", &"9".repeat(65)]
    {
        assert_eq!(parse_retry_after(value, NOW, CAP), None, "{value:?}");
    }
}

#[test]
fn retry_after_is_attached_to_retried_statuses_only() {
    let busy = FakeResponse::new(429).with("Retry-After", "3");
    assert_eq!(
        classify(&busy, NOW, CAP, None),
        Classification::Retry { reason: RetryReason::Status(429), after_ms: Some(3_000) }
    );
    let capped = FakeResponse::new(503).with("retry-after", "3600");
    assert_eq!(
        classify(&capped, NOW, 5_000, None),
        Classification::Retry { reason: RetryReason::Status(503), after_ms: Some(5_000) }
    );
    let definite = FakeResponse::new(400).with("Retry-After", "3");
    assert_eq!(classify(&definite, NOW, CAP, None), Classification::Failure(FailureReason::Status(400)));
}

#[test]
fn engine_waits_at_least_retry_after_seconds() {
    let rig = Rig::new(7);
    rig.begin_checkout(ID);
    rig.transport.script([status_with(429, &[("Retry-After", "7")])]);
    rig.send(ID).unwrap();
    assert_eq!(rig.waiter.sleeps(), vec![7_000]);
}

#[test]
fn engine_waits_at_least_until_a_retry_after_date() {
    let rig = Rig::new(8);
    rig.begin_checkout(ID);
    rig.transport.latency_ms.set(1_000);
    // 20 s after the request started, i.e. 19 s after the answer arrives.
    rig.transport.script([status_with(503, &[("Retry-After", &http_date(T0 + 20_000))])]);
    rig.send(ID).unwrap();
    assert_eq!(rig.waiter.sleeps(), vec![19_000]);
    assert!(rig.transport.seen()[1].at_ms >= T0 + 20_000);
}

#[test]
fn engine_caps_retry_after_at_max_retry_after() {
    let mut rig = Rig::new(9);
    rig.policy = RetryPolicy { max_retry_after_ms: 10_000, ..plain_policy() };
    rig.begin_checkout(ID);
    rig.transport.script([status_with(503, &[("Retry-After", "3600")])]);
    rig.send(ID).unwrap();
    assert_eq!(rig.waiter.sleeps(), vec![10_000]);
}

#[test]
fn engine_uses_its_backoff_when_it_is_longer_than_retry_after() {
    let mut rig = Rig::new(10);
    rig.policy = RetryPolicy { base_delay_ms: 4_000, ..plain_policy() };
    rig.begin_checkout(ID);
    rig.transport.script([status_with(503, &[("Retry-After", "1")])]);
    rig.send(ID).unwrap();
    assert_eq!(rig.waiter.sleeps(), vec![4_000]);
}

#[test]
fn engine_ignores_a_bogus_retry_after() {
    let rig = Rig::new(11);
    rig.begin_checkout(ID);
    rig.transport
        .script([status_with(503, &[("Retry-After", "in a while")]), status_with(503, &[("Retry-After", "-1")])]);
    rig.send(ID).unwrap();
    assert_eq!(rig.waiter.sleeps(), vec![250, 500], "plain backoff");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn retry_after_never_panics_and_never_exceeds_the_cap(value in any::<String>(), now in any::<u64>(), cap in any::<u64>()) {
        if let Some(ms) = parse_retry_after(&value, now, cap) {
            prop_assert!(ms <= cap);
        }
    }

    #[test]
    fn retry_after_header_like_strings_never_exceed_the_cap(
        value in "[ 0-9A-Za-z,:+-.]{0,70}",
        now in any::<u64>(),
        cap in 0u64..=3_600_000,
    ) {
        if let Some(ms) = parse_retry_after(&value, now, cap) {
            prop_assert!(ms <= cap);
        }
    }

    #[test]
    fn retry_after_seconds_round_trip(seconds in 0u64..100_000, cap in 0u64..200_000_000) {
        prop_assert_eq!(parse_retry_after(&seconds.to_string(), NOW, cap), Some((seconds * 1000).min(cap)));
    }

    #[test]
    fn retry_after_dates_round_trip(ahead_s in 0u64..200_000, cap in 0u64..200_000_000) {
        let date = http_date(NOW + ahead_s * 1000);
        prop_assert_eq!(parse_retry_after(&date, NOW, cap), Some((ahead_s * 1000).min(cap)));
    }
}
