//! The machine's exports in a real JavaScript engine: the cases both wasm-bindgen-test suites run
//! (`tests/wasm_browser.rs` in headless Chromium, `tests/wasm_node.rs` in Node).
//!
//! They call the exported `Engine` and `Machine` (`idempotent_fetch::wasm`) the way the driver does:
//! JavaScript numbers (NaN, fractions, negatives included), strings and booleans in, action numbers
//! out, a refused call `undefined` with its error in `lastError()` (`code * 256 + detail`). What only
//! a real engine can show: keys come from `crypto.getRandomValues` (the machine's `inline_js`, which
//! catches a throwing CSPRNG), and nothing the driver may pass traps the instance. The rules
//! themselves are covered natively (tests/core_*.rs); the JS API by the JS suites.
#![allow(dead_code)] // each suite uses the shared cases plus its own

use std::collections::HashSet;

use idempotent_fetch::wasm::{last_error, Engine, Machine};
use wasm_bindgen_test::*;

pub const ID: &str = "checkout:cart-42";
pub const NOW: f64 = 1_700_000_000_000.0;

pub const SEND: u32 = 1;
pub const WAIT: u32 = 2;
pub const WAIT_ONLINE: u32 = 3;
pub const DONE: u32 = 4;
pub const FAIL: u32 = 5;

pub fn fingerprint() -> String {
    "a1".repeat(32)
}

/// `Engine.create(...)` with today's defaults and the given jitter and header form.
pub fn engine_with(max_attempts: f64, jitter: f64, sf_header: bool) -> Engine {
    Engine::create(
        max_attempts,
        250.0,
        20_000.0,
        120_000.0,
        15_000.0,
        60_000.0,
        jitter,
        86_400_000.0,
        500.0,
        sf_header,
        None,
        None,
    )
    .unwrap_or_else(|| panic!("default options refused: {}", last_error()))
}

pub fn engine() -> Engine {
    engine_with(8.0, 3.0, false)
}

/// A call's result as `Err(lastError())` when it was refused (returned `undefined`).
pub fn checked<T>(result: Option<T>) -> Result<T, u32> {
    result.ok_or_else(last_error)
}

/// The error of a call that must be refused.
pub fn refused<T>(result: Option<T>) -> u32 {
    checked(result).err().unwrap_or_else(|| panic!("accepted"))
}

pub fn packed(code: u32, detail: u32) -> u32 {
    code * 256 + detail
}

#[path = "../oracle/canonical_v4.rs"]
mod canonical_v4;
use canonical_v4::is_canonical_v4;

fn load(engine: &Engine, m: &Machine) -> Result<Machine, u32> {
    checked(engine.load(
        ID,
        1.0,
        &m.intent_id(),
        &m.key(),
        &m.fingerprint(),
        m.created_at(),
        m.updated_at(),
        f64::from(m.attempts()),
        &m.state(),
        f64::from(m.last_status()),
        Some(m.uncertain()),
    ))
}

#[wasm_bindgen_test]
fn keys_come_from_the_platform_csprng_and_are_distinct_v4() {
    let engine = engine();
    let mut seen = HashSet::new();
    for i in 0..200 {
        let machine = engine.begin(&format!("intent-{i}"), &fingerprint(), NOW, false, None).expect("begin");
        let key = machine.key();
        assert!(is_canonical_v4(&key), "{key}");
        assert!(seen.insert(key.clone()), "duplicate key {key}");
        assert!(machine.dirty() && !machine.resumed());
        assert_eq!(machine.header(), key);
    }
}

/// The CSPRNG is called through the machine's own `inline_js`, which catches in JavaScript: a throwing
/// `crypto.getRandomValues` refuses `begin` with STORAGE 32 (never a zero key, never a JS exception
/// through the wasm frames), and the same engine works again once the CSPRNG does.
#[wasm_bindgen_test]
fn a_throwing_csprng_refuses_begin_with_storage_32() {
    use wasm_bindgen::JsCast;
    let engine = engine();
    let crypto = js_sys::Reflect::get(&js_sys::global(), &"crypto".into()).expect("read crypto");
    let throwing = js_sys::Function::new_no_args("throw new Error('no CSPRNG')");
    assert!(js_sys::Reflect::set(&crypto, &"getRandomValues".into(), &throwing).expect("replace getRandomValues"));
    let result = checked(engine.begin(ID, &fingerprint(), NOW, false, None)).err();
    js_sys::Reflect::delete_property(crypto.unchecked_ref::<js_sys::Object>(), &"getRandomValues".into())
        .expect("restore");
    assert_eq!(result, Some(packed(9, 32)), "STORAGE 32");
    let machine = engine.begin(ID, &fingerprint(), NOW, false, None).expect("the CSPRNG works again");
    assert!(is_canonical_v4(&machine.key()));
}

#[wasm_bindgen_test]
fn the_sf_string_header_quotes_the_key() {
    let machine = engine_with(8.0, 0.0, true).begin(ID, &fingerprint(), NOW, false, None).unwrap();
    assert_eq!(machine.header(), format!("\"{}\"", machine.key()));
}

#[wasm_bindgen_test]
fn every_option_out_of_range_throws_its_index() {
    let good = [8.0, 250.0, 20_000.0, 120_000.0, 15_000.0, 60_000.0, 0.0, 86_400_000.0, 500.0];
    let bad: [&[f64]; 9] = [
        &[0.0, 1001.0, 1.5, -1.0, f64::NAN],
        &[-1.0, 0.5, f64::INFINITY, 2_592_000_001.0],
        &[100.0, f64::NAN, 2_592_000_001.0],
        &[-1.0, 1.25, f64::NAN],
        &[0.0, -5.0, 0.1],
        &[f64::NEG_INFINITY, 3.5],
        &[4.0, -1.0, 1.5, f64::NAN],
        &[0.0, 2_592_000_001.0, 0.5],
        &[-1.0, 1_000_001.0, 2.5],
    ];
    for (index, values) in bad.iter().enumerate() {
        for &value in *values {
            let mut o = good;
            o[index] = value;
            let result =
                checked(Engine::create(o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7], o[8], false, None, None));
            let err = result.err().unwrap_or_else(|| panic!("option {index} = {value} accepted"));
            assert_eq!(err, packed(7, index as u32), "option {index} = {value}");
        }
    }
}

#[wasm_bindgen_test]
fn a_send_runs_through_the_exports() {
    let engine = engine();
    let mut m = engine.begin(ID, &fingerprint(), NOW, false, None).unwrap();
    m.mark_saved();
    assert_eq!(m.start(NOW, true), SEND);
    assert!(m.dirty(), "saved before the attempt");
    assert_eq!((m.attempt(), m.total_attempts(), m.timeout_ms()), (1, 1, 15_000.0));
    m.mark_saved();
    assert_eq!(m.on_response(NOW + 10.0, 503, Some("2".into()), None, None, 0), WAIT);
    assert_eq!((m.delay_ms(), m.reason(), m.last_status()), (2_000.0, 3, 503));
    assert_eq!(engine.budget(), 495);
    assert_eq!(m.on_wake(NOW + 2_010.0, false), WAIT_ONLINE);
    assert_eq!(m.timeout_ms(), 120_000.0 - 2_010.0);
    assert_eq!(m.on_online(NOW + 3_000.0), SEND);
    assert_eq!(m.on_network_error(NOW + 3_100.0), WAIT);
    assert_eq!((m.delay_ms(), m.reason()), (500.0, 1), "no jitter: the second step");
    assert_eq!(m.on_wake(NOW + 3_600.0, true), SEND);
    assert_eq!(m.on_timeout(NOW + 18_600.0), WAIT);
    assert_eq!(m.reason(), 2);
    assert_eq!(m.on_wake(NOW + 19_600.0, true), SEND);
    let done = m.on_response(NOW + 19_700.0, 201, None, None, Some(" True ".into()), 0);
    assert_eq!(done, DONE);
    assert_eq!((m.status(), m.ok(), m.replayed(), m.attempt()), (201, true, true, 4));
    assert_eq!((m.state(), m.attempts()), ("succeeded".to_owned(), 4));
    assert_eq!(m.updated_at(), NOW + 19_700.0);
}

/// `get(field)`, the one export the driver reads the payload through, against the getters (docs/WASM-BOUNDARY.md "Fields").
fn fields(m: &Machine) -> [f64; 10] {
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(|f| m.get(f))
}

#[wasm_bindgen_test]
fn get_reads_each_field_of_the_payload() {
    let engine = engine();
    let mut m = engine.begin(ID, &fingerprint(), NOW, false, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(fields(&m)[..5], [15_000.0, 0.0, 0.0, 1.0, 1.0], "SEND: timeout, attempt, totalAttempts");
    assert_eq!(m.on_response(NOW + 10.0, 503, Some("2".into()), None, None, 0), WAIT);
    assert_eq!(fields(&m)[1..4], [2_000.0, 3.0, 1.0], "WAIT: delay, reason (status), attempt");
    assert_eq!(m.on_wake(NOW + 2_010.0, true), SEND);
    assert_eq!(m.on_response(NOW + 2_020.0, 201, None, None, Some("true".into()), 0), DONE);
    assert_eq!(fields(&m)[3..8], [2.0, 2.0, 201.0, 1.0, 1.0], "DONE: attempt, total, status, ok, replayed");
    let record = [m.get(10), m.get(11), m.get(12), m.get(13), m.get(14)];
    assert_eq!(
        record,
        [NOW, NOW + 2_020.0, 201.0, 0.0, 1.0],
        "the record: createdAt, updatedAt, lastStatus, uncertain, dirty"
    );
    assert_eq!(record, [m.created_at(), m.updated_at(), m.last_status().into(), 0.0, 1.0]);
    m.mark_saved();
    assert_eq!(m.get(14), 0.0, "saved: not dirty");
    assert_eq!(m.get(15), 1.0, "state: succeeded");
    assert!(m.get(16).is_nan() && m.get(u32::MAX).is_nan(), "an unknown field is NaN");
    let mut f = engine.begin("if-get-fail", &fingerprint(), NOW, false, None).unwrap();
    assert_eq!(f.start(NOW, true), SEND);
    assert_eq!(f.on_abort(NOW + 5.0), FAIL);
    assert_eq!(fields(&f)[8..], [2.0, 0.0], "FAIL: aborted");
    assert_eq!(f.on_wake(NOW, true), FAIL);
    assert_eq!(fields(&f)[8..], [15.0, 2.0], "FAIL: out of order, with its detail");
    assert_eq!(f.get(15), 0.0, "state: pending (the key is kept)");
}

#[wasm_bindgen_test]
fn on_runs_each_event_of_the_send_loop() {
    let engine = engine();
    let mut m = engine.begin(ID, &fingerprint(), NOW, false, None).unwrap();
    assert_eq!(m.on(0, NOW, true), SEND, "0 start");
    assert_eq!(m.on(1, NOW + 10.0, false), WAIT, "1 network error");
    assert_eq!(m.get(2), 1.0);
    assert_eq!(m.on(4, NOW + 1_000.0, false), WAIT_ONLINE, "4 wake, offline");
    assert_eq!(m.on(5, NOW + 1_100.0, false), SEND, "5 online");
    assert_eq!(m.on(2, NOW + 16_100.0, false), WAIT, "2 timeout");
    assert_eq!(m.get(2), 2.0);
    assert_eq!(m.on(4, NOW + 17_000.0, false), WAIT_ONLINE);
    assert_eq!(m.on(6, NOW + 120_000.0, false), FAIL, "6 the deadline offline");
    assert_eq!(m.get(8), 1.0, "RETRIES_EXHAUSTED");
    assert_eq!(m.on(0, NOW + 130_000.0, true), SEND, "a send can start again");
    assert_eq!(m.on(3, NOW + 130_001.0, false), FAIL, "3 abort");
    assert_eq!(m.get(8), 2.0, "ABORTED");
    assert_eq!((m.on(7, NOW, true), m.on(u32::MAX, NOW, true)), (0, 0), "an unknown event is no action");
}

#[wasm_bindgen_test]
fn failures_carry_their_code_and_detail() {
    let engine = engine_with(2.0, 3.0, false);
    let mut m = engine.begin(ID, &fingerprint(), NOW, false, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_response(NOW, 500, None, None, None, 0), WAIT);
    assert_eq!(m.on_wake(NOW + 250.0, true), SEND);
    assert_eq!(m.on_response(NOW + 300.0, 500, None, None, None, 0), FAIL);
    assert_eq!((m.error_code(), m.error_detail(), m.attempt()), (1, 1, 2));
    assert_eq!(m.state(), "pending", "the key is kept");

    assert_eq!(m.start(NOW + 1_000.0, true), SEND, "a machine can start again");
    assert_eq!(m.on_response(NOW + 1_000.0, 422, None, None, None, 0), FAIL);
    assert_eq!((m.error_code(), m.state()), (3, "failed".to_owned()));

    let mut m = engine.begin("other", &fingerprint(), NOW, false, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_abort(NOW + 5.0), FAIL);
    assert_eq!((m.error_code(), m.error_detail(), m.attempt()), (2, 0, 1));
    assert_eq!(m.on_wake(NOW, true), FAIL, "out of order");
    assert_eq!((m.error_code(), m.error_detail()), (15, 2));
    assert_eq!(m.on_response(NOW, 200, None, None, None, 0), FAIL);
    assert_eq!((m.error_code(), m.error_detail()), (15, 1));
}

#[wasm_bindgen_test]
fn the_callers_override_and_the_server_hint_cross_as_numbers_and_strings() {
    let engine = engine();
    let mut m = engine.begin(ID, &fingerprint(), NOW, false, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_response(NOW, 503, None, None, None, 2), DONE, "override 2: definite");
    assert!(!m.ok());
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_response(NOW, 404, None, None, None, 1), WAIT, "override 1: retry");
    assert_eq!(m.on_wake(NOW + 250.0, true), SEND);
    assert_eq!(m.on_response(NOW, 503, None, Some("false".into()), None, 0), DONE, "Stripe-Should-Retry");
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_response(NOW, 503, Some("Sun, 06 Nov 1994 08:49:37 GMT".into()), None, None, 0), WAIT);
    assert_eq!(m.delay_ms(), 250.0, "a past date means now: the backoff");
}

#[wasm_bindgen_test]
fn stored_records_load_or_throw_the_field() {
    let engine = engine();
    let m = engine.begin(ID, &fingerprint(), NOW, false, None).unwrap();
    let loaded = load(&engine, &m).expect("its own record loads");
    assert_eq!((loaded.key(), loaded.dirty(), loaded.resumed()), (m.key(), false, true));

    let key = m.key();
    let fp = fingerprint();
    // Each refusal read right after its call: `lastError()` is the last refused call's.
    let cases: [(u32, Result<Machine, u32>); 9] = [
        (1, checked(engine.load(ID, 2.0, ID, &key, &fp, NOW, NOW, 0.0, "pending", 0.0, None))),
        (2, checked(engine.load(ID, 1.0, "other", &key, &fp, NOW, NOW, 0.0, "pending", 0.0, None))),
        (
            3,
            checked(engine.load(
                ID,
                1.0,
                ID,
                "8E03978E-40D5-43E8-BC93-6894A57F9324",
                &fp,
                NOW,
                NOW,
                0.0,
                "pending",
                0.0,
                None,
            )),
        ),
        (4, checked(engine.load(ID, 1.0, ID, &key, "zz", NOW, NOW, 0.0, "pending", 0.0, None))),
        (5, checked(engine.load(ID, 1.0, ID, &key, &fp, f64::NAN, NOW, 0.0, "pending", 0.0, None))),
        (6, checked(engine.load(ID, 1.0, ID, &key, &fp, NOW, NOW - 1.0, 0.0, "pending", 0.0, None))),
        (7, checked(engine.load(ID, 1.0, ID, &key, &fp, NOW, NOW, -1.0, "pending", 0.0, None))),
        (8, checked(engine.load(ID, 1.0, ID, &key, &fp, NOW, NOW, 0.0, "done", 0.0, None))),
        (9, checked(engine.load(ID, 1.0, ID, &key, &fp, NOW, NOW, 0.0, "pending", 600.0, None))),
    ];
    for (field, result) in cases {
        let err = result.err().unwrap_or_else(|| panic!("field {field} accepted"));
        assert_eq!(err, packed(9, field), "field {field}");
    }
}

#[wasm_bindgen_test]
fn begin_resumes_refuses_or_renews_against_the_stored_record() {
    let engine = engine();
    let m = engine.begin(ID, &fingerprint(), NOW, false, None).unwrap();
    let key = m.key();
    let stored = load(&engine, &m).unwrap();
    let again = engine.begin(ID, &fingerprint(), NOW + 1.0, false, Some(stored)).unwrap();
    assert_eq!((again.key(), again.resumed(), again.dirty()), (key.clone(), true, false));

    let stored = load(&engine, &m).unwrap();
    let err = refused(engine.begin(ID, &"b2".repeat(32), NOW, false, Some(stored)));
    assert_eq!(err, packed(4, 0), "INTENT_MISMATCH");

    let stored = load(&engine, &m).unwrap();
    let replaced = engine.begin(ID, &"b2".repeat(32), NOW, true, Some(stored)).unwrap();
    assert_ne!(replaced.key(), key);

    assert_eq!(refused(engine.begin("", &fingerprint(), NOW, false, None)), packed(8, 1));
    assert_eq!(refused(engine.begin(ID, "nope", NOW, false, None)), packed(8, 2));
}

#[wasm_bindgen_test]
fn sweep_and_expiry_through_the_exports() {
    let engine = engine();
    let mut m = engine.begin(ID, &fingerprint(), NOW, false, None).unwrap();
    m.mark_saved();
    assert_eq!(engine.sweep(&mut m, NOW + 86_400_000.0), 0);
    assert_eq!(engine.sweep(&mut m, NOW + 86_400_001.0), 2);
    assert!(m.dirty());
    assert_eq!(m.state(), "expired");
    assert_eq!(m.start(NOW + 86_400_002.0, true), FAIL);
    assert_eq!(m.error_code(), 5);
}

#[wasm_bindgen_test]
fn hostile_numbers_never_trap() {
    let engine = engine_with(3.0, 0.0, false);
    let mut m = engine.begin(ID, &fingerprint(), f64::NAN, false, None).unwrap();
    for now in [f64::NAN, -1.0, f64::INFINITY, f64::NEG_INFINITY, 1e300, -0.0, 0.5] {
        let _ = m.start(now, true);
        let _ = m.on_response(now, 65_535, Some("\u{0}".into()), Some("".into()), Some("x".into()), u32::MAX);
        let _ = m.on_network_error(now);
        let _ = m.on_wake(now, false);
        let _ = m.on_online(now);
        let _ = m.on_online_timeout(now);
        let _ = m.on_timeout(now);
        let _ = m.on_abort(now);
        let _ = engine.sweep(&mut m, now);
    }
    assert!(is_canonical_v4(&m.key()));
    assert!(m.updated_at() >= m.created_at());
}

#[wasm_bindgen_test]
fn issue_13_rules_cross_the_boundary() {
    // maxTotalAttempts: an optional trailing argument (undefined: no limit).
    let engine =
        Engine::create(8.0, 0.0, 0.0, 120_000.0, 15_000.0, 60_000.0, 3.0, 86_400_000.0, 500.0, false, Some(2.0), None)
            .expect("options");
    let bad =
        Engine::create(8.0, 0.0, 0.0, 120_000.0, 15_000.0, 60_000.0, 3.0, 86_400_000.0, 500.0, false, Some(0.5), None);
    assert_eq!(refused(bad), packed(7, 10));

    let mut m = engine.begin(ID, &fingerprint(), NOW, false, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_network_error(NOW + 1.0), WAIT);
    assert!(m.uncertain(), "sent, then no answer");
    assert_eq!(m.on_wake(NOW + 2.0, true), SEND);
    assert_eq!(m.on_response(NOW + 3.0, 500, None, None, None, 0), FAIL);
    assert_eq!((m.error_code(), m.error_detail()), (1, 4), "maxTotalAttempts");

    // Replayed: definite, certain.
    let engine = engine_with(8.0, 3.0, false);
    let mut m = engine.begin(ID, &fingerprint(), NOW, false, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_timeout(NOW + 1.0), WAIT);
    assert_eq!(m.on_wake(NOW + 300.0, true), SEND);
    assert_eq!(m.on_response(NOW + 400.0, 500, None, None, Some("true".into()), 1), DONE);
    assert!(m.replayed() && !m.ok() && !m.uncertain());

    // Uncertain is stored and read back; a plain 4xx then says so.
    let mut m = engine.begin("u", &fingerprint(), NOW, false, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_abort(NOW + 1.0), FAIL);
    let (key, fp) = (m.key(), m.fingerprint());
    let stored =
        engine.load("u", 1.0, "u", &key, &fp, m.created_at(), m.updated_at(), 1.0, "pending", 0.0, Some(true)).unwrap();
    assert!(stored.uncertain());
    let mut again = engine.begin("u", &fp, NOW + 10.0, false, Some(stored)).unwrap();
    assert_eq!(again.start(NOW + 10.0, true), SEND);
    assert_eq!(again.on_response(NOW + 11.0, 404, None, None, None, 0), DONE);
    assert!(again.uncertain() && !again.ok());
}
