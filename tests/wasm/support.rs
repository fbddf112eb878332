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

use alloc::borrow::ToOwned;
use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use idempotent_fetch::contract::{code, field, protocol, Event, Field, Opt, OPTIONS, OPTION_COUNT, RECORD_SLOTS};
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

/// `Engine.create(options)` with one number per option (`OPT_*`).
pub fn create(options: [f64; OPTION_COUNT]) -> Option<Engine> {
    Engine::create(&options)
}

/// The shipped defaults (the contract's `OPTIONS`) with these edits.
pub fn options(edits: &[(Opt, f64)]) -> [f64; OPTION_COUNT] {
    let mut o = [0.0; OPTION_COUNT];
    for (value, spec) in o.iter_mut().zip(OPTIONS) {
        *value = spec.default as f64;
    }
    for &(opt, value) in edits {
        o[opt as usize] = value;
    }
    o
}

/// `Engine.create(...)` with the defaults and the given attempts, jitter and header form.
pub fn engine_with(max_attempts: f64, jitter: f64, sf_header: bool) -> Engine {
    let o = options(&[(Opt::MaxAttempts, max_attempts), (Opt::Jitter, jitter), (Opt::HeaderForm, sf_header.into())]);
    create(o).unwrap_or_else(|| panic!("default options refused: {}", last_error()))
}

pub fn engine() -> Engine {
    engine_with(8.0, 3.0, false)
}

/// The numbers of a stored record as `Engine.load` takes them (by `FIELD_*` number).
pub fn record_numbers(
    v: f64,
    created_at: f64,
    updated_at: f64,
    attempts: f64,
    last_status: f64,
    uncertain: f64,
) -> Vec<f64> {
    let mut n = vec![0.0; RECORD_SLOTS];
    n[usize::from(field::VERSION)] = v;
    n[usize::from(field::CREATED_AT)] = created_at;
    n[usize::from(field::UPDATED_AT)] = updated_at;
    n[usize::from(field::ATTEMPTS)] = attempts;
    n[usize::from(field::LAST_STATUS)] = last_status;
    n[usize::from(field::UNCERTAIN)] = uncertain;
    n
}

/// What the driver reads from a Machine, through its two real exports (`get` and `on`) only.
pub trait Driven {
    fn field(&self, field: Field) -> f64;
    fn event(&mut self, event: Event, now: f64, online: bool) -> u32;
    fn flag(&self, field: Field) -> bool {
        self.field(field) == 1.0
    }
    fn whole(&self, field: Field) -> u32 {
        self.field(field) as u32
    }
    fn dirty(&self) -> bool {
        self.flag(Field::Dirty)
    }
    fn resumed(&self) -> bool {
        self.flag(Field::Resumed)
    }
    fn uncertain(&self) -> bool {
        self.flag(Field::Uncertain)
    }
    fn ok(&self) -> bool {
        self.flag(Field::Ok)
    }
    fn replayed(&self) -> bool {
        self.flag(Field::Replayed)
    }
    fn state(&self) -> String {
        STATES[self.field(Field::State) as usize].to_owned()
    }
    fn start(&mut self, now: f64, online: bool) -> u32 {
        self.event(Event::Start, now, online)
    }
    fn on_network_error(&mut self, now: f64) -> u32 {
        self.event(Event::NetworkError, now, false)
    }
    fn on_timeout(&mut self, now: f64) -> u32 {
        self.event(Event::Timeout, now, false)
    }
    fn on_abort(&mut self, now: f64) -> u32 {
        self.event(Event::Abort, now, false)
    }
    fn on_wake(&mut self, now: f64, online: bool) -> u32 {
        self.event(Event::Wake, now, online)
    }
    fn on_online(&mut self, now: f64) -> u32 {
        self.event(Event::Online, now, false)
    }
    fn on_online_timeout(&mut self, now: f64) -> u32 {
        self.event(Event::OnlineTimeout, now, false)
    }
}

/// The states by `F_STATE`, as the driver names them.
const STATES: [&str; 4] = ["pending", "succeeded", "failed", "expired"];

impl Driven for Machine {
    fn field(&self, field: Field) -> f64 {
        self.get(field as u32)
    }
    fn event(&mut self, event: Event, now: f64, online: bool) -> u32 {
        self.on(event as u32, now, online)
    }
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
    let status = if m.field(Field::LastStatus) == 0.0 { -1.0 } else { m.field(Field::LastStatus) };
    let numbers = record_numbers(
        2.0,
        m.field(Field::CreatedAt),
        m.field(Field::UpdatedAt),
        m.field(Field::TotalAttempts),
        status,
        m.field(Field::Uncertain),
    );
    checked(engine.load(ID, ID, &m.key_or_header(None), &fingerprint(), &m.state(), &numbers))
}

#[wasm_bindgen_test]
fn keys_come_from_the_platform_csprng_and_are_distinct_v4() {
    let engine = engine();
    let mut seen = BTreeSet::new();
    for i in 0..200 {
        let machine = engine
            .begin(&format!("intent-{i}"), &fingerprint(), &fingerprint(), NOW, false, None, None, None)
            .expect("begin");
        let key = machine.key_or_header(None);
        assert!(is_canonical_v4(&key), "{key}");
        assert!(seen.insert(key.clone()), "duplicate key {key}");
        assert!(machine.dirty() && !machine.resumed());
        assert_eq!(machine.key_or_header(Some(true)), key);
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
    let result = checked(engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None)).err();
    js_sys::Reflect::delete_property(crypto.unchecked_ref::<js_sys::Object>(), &"getRandomValues".into())
        .expect("restore");
    assert_eq!(result, Some(packed(9, 32)), "STORAGE 32");
    let machine =
        engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).expect("the CSPRNG works again");
    assert!(is_canonical_v4(&machine.key_or_header(None)));
}

#[wasm_bindgen_test]
fn the_sf_string_header_quotes_the_key() {
    let machine =
        engine_with(8.0, 0.0, true).begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    assert_eq!(machine.key_or_header(Some(true)), format!("\"{}\"", machine.key_or_header(None)));
}

#[wasm_bindgen_test]
fn every_option_out_of_range_throws_its_index() {
    let good = options(&[]);
    let bad: [&[f64]; OPTION_COUNT] = [
        &[0.0, 1001.0, 1.5, -1.0, f64::NAN],
        &[-1.0, 0.5, f64::INFINITY, 2_592_000_001.0],
        &[100.0, f64::NAN, 2_592_000_001.0],
        &[-1.0, 1.25, f64::NAN],
        &[0.0, -5.0, 0.1],
        &[f64::NEG_INFINITY, 3.5],
        &[4.0, -1.0, 1.5, f64::NAN],
        &[0.0, 2_592_000_001.0, 0.5],
        &[-1.0, 1_000_001.0, 2.5],
        &[2.0, -1.0, 0.5],
        &[0.5, 1_000_001.0, -1.0, f64::NAN],
        &[2.0, -1.0, 0.5],
        &[600.0, -1.0, 409.5, f64::NAN],
    ];
    for (index, values) in bad.iter().enumerate() {
        for &value in *values {
            let mut o = good;
            o[index] = value;
            let result = checked(create(o));
            let err = result.err().unwrap_or_else(|| panic!("option {index} = {value} accepted"));
            assert_eq!(err, packed(7, index as u32), "option {index} = {value}");
        }
    }
}

#[wasm_bindgen_test]
fn a_send_runs_through_the_exports() {
    let engine = engine();
    let mut m = engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    m.mark_saved();
    assert_eq!(m.start(NOW, true), SEND);
    assert!(m.dirty(), "saved before the attempt");
    assert_eq!((m.whole(Field::Attempt), m.whole(Field::TotalAttempts), m.field(Field::TimeoutMs)), (1, 1, 15_000.0));
    m.mark_saved();
    assert_eq!(m.on_response(NOW + 10.0, 503, Some("2".into()), None, None, 0), WAIT);
    assert_eq!((m.field(Field::DelayMs), m.whole(Field::Reason), m.whole(Field::LastStatus)), (2_000.0, 3, 503));
    assert_eq!(engine.budget(), 495);
    assert_eq!(m.on_wake(NOW + 2_010.0, false), WAIT_ONLINE);
    assert_eq!(m.field(Field::TimeoutMs), 120_000.0 - 2_010.0);
    assert_eq!(m.on_online(NOW + 3_000.0), SEND);
    assert_eq!(m.on_network_error(NOW + 3_100.0), WAIT);
    assert_eq!((m.field(Field::DelayMs), m.whole(Field::Reason)), (500.0, 1), "no jitter: the second step");
    assert_eq!(m.on_wake(NOW + 3_600.0, true), SEND);
    assert_eq!(m.on_timeout(NOW + 18_600.0), WAIT);
    assert_eq!(m.whole(Field::Reason), 2);
    assert_eq!(m.on_wake(NOW + 19_600.0, true), SEND);
    let done = m.on_response(NOW + 19_700.0, 201, None, None, Some(" True ".into()), 0);
    assert_eq!(done, DONE);
    assert_eq!((m.whole(Field::Status), m.ok(), m.replayed(), m.whole(Field::Attempt)), (201, true, true, 4));
    assert_eq!((m.state(), m.whole(Field::TotalAttempts)), ("succeeded".to_owned(), 4));
    assert_eq!(m.field(Field::UpdatedAt), NOW + 19_700.0);
}

/// `get(field)`, the one export the driver reads the payload through, against the getters (docs/WASM-BOUNDARY.md "Fields").
fn fields(m: &Machine) -> [f64; 10] {
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(|f| m.get(f))
}

#[wasm_bindgen_test]
fn get_reads_each_field_of_the_payload() {
    let engine = engine();
    let mut m = engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
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
    assert_eq!(
        record,
        [m.field(Field::CreatedAt), m.field(Field::UpdatedAt), m.whole(Field::LastStatus).into(), 0.0, 1.0]
    );
    m.mark_saved();
    assert_eq!(m.get(14), 0.0, "saved: not dirty");
    assert_eq!(m.get(15), 1.0, "state: succeeded");
    assert!(m.get(Field::ALL.len() as u32).is_nan() && m.get(u32::MAX).is_nan(), "an unknown field is NaN");
    let mut f = engine.begin("if-get-fail", &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
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
    let mut m = engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
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
    for event in [Event::ALL.len() as u32, u32::MAX] {
        assert_eq!(m.on(event, NOW, true), FAIL, "an unknown event is a bug");
        let error = (m.whole(Field::ErrorCode), m.whole(Field::ErrorDetail));
        assert_eq!(error, (code::INTERNAL.into(), protocol::UNKNOWN_EVENT.into()), "INTERNAL, unknown event");
    }
}

#[wasm_bindgen_test]
fn failures_carry_their_code_and_detail() {
    let engine = engine_with(2.0, 3.0, false);
    let mut m = engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_response(NOW, 500, None, None, None, 0), WAIT);
    assert_eq!(m.on_wake(NOW + 250.0, true), SEND);
    assert_eq!(m.on_response(NOW + 300.0, 500, None, None, None, 0), FAIL);
    assert_eq!((m.whole(Field::ErrorCode), m.whole(Field::ErrorDetail), m.whole(Field::Attempt)), (1, 1, 2));
    assert_eq!(m.state(), "pending", "the key is kept");

    assert_eq!(m.start(NOW + 1_000.0, true), SEND, "a machine can start again");
    assert_eq!(m.on_response(NOW + 1_000.0, 422, None, None, None, 0), FAIL);
    assert_eq!((m.whole(Field::ErrorCode), m.state()), (3, "failed".to_owned()));

    let mut m = engine.begin("other", &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_abort(NOW + 5.0), FAIL);
    assert_eq!((m.whole(Field::ErrorCode), m.whole(Field::ErrorDetail), m.whole(Field::Attempt)), (2, 0, 1));
    assert_eq!(m.on_wake(NOW, true), FAIL, "out of order");
    assert_eq!((m.whole(Field::ErrorCode), m.whole(Field::ErrorDetail)), (15, 2));
    assert_eq!(m.on_response(NOW, 200, None, None, None, 0), FAIL);
    assert_eq!((m.whole(Field::ErrorCode), m.whole(Field::ErrorDetail)), (15, 1));
}

#[wasm_bindgen_test]
fn the_callers_override_and_the_server_hint_cross_as_numbers_and_strings() {
    let engine = engine();
    let mut m = engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_response(NOW, 503, None, None, None, 2), DONE, "override 2: definite");
    assert!(!m.ok());
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_response(NOW, 404, None, None, None, 1), WAIT, "override 1: retry");
    assert_eq!(m.on_wake(NOW + 250.0, true), SEND);
    assert_eq!(m.on_response(NOW, 503, None, Some("false".into()), None, 0), DONE, "Stripe-Should-Retry");
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_response(NOW, 503, Some("Sun, 06 Nov 1994 08:49:37 GMT".into()), None, None, 0), WAIT);
    assert_eq!(m.field(Field::DelayMs), 250.0, "a past date means now: the backoff");
}

#[wasm_bindgen_test]
fn stored_records_load_or_throw_the_field() {
    let engine = engine();
    let m = engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    let loaded = load(&engine, &m).expect("its own record loads");
    assert_eq!((loaded.key_or_header(None), loaded.dirty(), loaded.resumed()), (m.key_or_header(None), false, true));

    let key = m.key_or_header(None);
    let fp = fingerprint();
    // Each refusal read right after its call: `lastError()` is the last refused call's.
    let ok = || record_numbers(2.0, NOW, NOW, 0.0, -1.0, 0.0);
    let with = |slot: u8, value: f64| {
        let mut n = ok();
        n[usize::from(slot)] = value;
        n
    };
    let upper = "8E03978E-40D5-43E8-BC93-6894A57F9324";
    let cases: [(u8, Result<Machine, u32>); 12] = [
        (1, checked(engine.load(ID, ID, &key, &fp, "pending", &with(field::VERSION, 3.0)))),
        (2, checked(engine.load(ID, "other", &key, &fp, "pending", &ok()))),
        (3, checked(engine.load(ID, ID, upper, &fp, "pending", &ok()))),
        (4, checked(engine.load(ID, ID, &key, "zz", "pending", &ok()))),
        (5, checked(engine.load(ID, ID, &key, &fp, "pending", &with(field::CREATED_AT, f64::NAN)))),
        (6, checked(engine.load(ID, ID, &key, &fp, "pending", &with(field::UPDATED_AT, NOW - 1.0)))),
        (7, checked(engine.load(ID, ID, &key, &fp, "pending", &with(field::ATTEMPTS, -1.0)))),
        (8, checked(engine.load(ID, ID, &key, &fp, "done", &ok()))),
        (9, checked(engine.load(ID, ID, &key, &fp, "pending", &with(field::LAST_STATUS, 600.0)))),
        (9, checked(engine.load(ID, ID, &key, &fp, "pending", &with(field::LAST_STATUS, 0.0)))),
        (10, checked(engine.load(ID, ID, &key, &fp, "pending", &with(field::UNCERTAIN, 2.0)))),
        (1, checked(engine.load(ID, ID, &key, &fp, "pending", &ok()[..3]))),
    ];
    for (field, result) in cases {
        let err = result.err().unwrap_or_else(|| panic!("field {field} accepted"));
        assert_eq!(err, packed(9, field.into()), "field {field}");
    }
}

#[wasm_bindgen_test]
fn begin_resumes_refuses_or_renews_against_the_stored_record() {
    let engine = engine();
    let m = engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    let key = m.key_or_header(None);
    let stored = load(&engine, &m).unwrap();
    let again = engine.begin(ID, &fingerprint(), &fingerprint(), NOW + 1.0, false, None, Some(stored), None).unwrap();
    assert_eq!((again.key_or_header(None), again.resumed(), again.dirty()), (key.clone(), true, false));

    let stored = load(&engine, &m).unwrap();
    let err = refused(engine.begin(ID, &"b2".repeat(32), &"b2".repeat(32), NOW, false, None, Some(stored), None));
    assert_eq!(err, packed(4, 1), "INTENT_MISMATCH with the stored record");

    let stored = load(&engine, &m).unwrap();
    let replaced = engine.begin(ID, &"b2".repeat(32), &"b2".repeat(32), NOW, true, None, Some(stored), None).unwrap();
    assert_ne!(replaced.key_or_header(None), key);

    assert_eq!(refused(engine.begin("", &fingerprint(), &fingerprint(), NOW, false, None, None, None)), packed(8, 1));
    assert_eq!(refused(engine.begin(ID, "nope", "nope", NOW, false, None, None, None)), packed(8, 2));
}

/// The two candidates of `begin`: this tab's stored record and the intent's cross-tab claim.
#[wasm_bindgen_test]
fn begin_weighs_the_stored_record_against_the_claim() {
    let engine = engine();
    let fp = fingerprint();
    let begin = |stored: Option<Machine>, claimed: Option<Machine>, fp: &str| {
        checked(engine.begin(ID, fp, fp, NOW + 5.0, false, None, stored, claimed))
    };
    let mine = engine.begin(ID, &fp, &fp, NOW, false, None, None, None).unwrap();
    let theirs = engine.begin(ID, &fp, &fp, NOW, false, None, None, None).unwrap();
    let (my_key, their_key) = (mine.key_or_header(None), theirs.key_or_header(None));
    assert!(!mine.resumed() && mine.dirty(), "a new key: not resumed, save it");

    // Only a claim (another tab's write has not reached this storage): its key, resumed, and dirty.
    let m = begin(None, Some(load(&engine, &theirs).unwrap()), &fp).unwrap();
    assert_eq!((m.key_or_header(None), m.resumed(), m.dirty()), (their_key.clone(), true, true));
    // Another key in the claim than in storage: the claim is newer.
    let m = begin(Some(load(&engine, &mine).unwrap()), Some(load(&engine, &theirs).unwrap()), &fp).unwrap();
    assert_eq!((m.key_or_header(None), m.resumed(), m.dirty()), (their_key.clone(), true, true));
    // The same key: the stored record is fresher, nothing to save.
    let m = begin(Some(load(&engine, &mine).unwrap()), Some(load(&engine, &mine).unwrap()), &fp).unwrap();
    assert_eq!((m.key_or_header(None), m.resumed(), m.dirty()), (my_key.clone(), true, false));
    // Only stored: resumed, not dirty.
    let m = begin(Some(load(&engine, &mine).unwrap()), None, &fp).unwrap();
    assert_eq!((m.key_or_header(None), m.resumed(), m.dirty()), (my_key, true, false));

    // A different request: the detail names whose key it does not match.
    let other = "b2".repeat(32);
    let err = begin(Some(load(&engine, &mine).unwrap()), Some(load(&engine, &theirs).unwrap()), &other).err();
    assert_eq!(err, Some(packed(4, 2)), "INTENT_MISMATCH with the claim");
    let err = begin(Some(load(&engine, &mine).unwrap()), Some(load(&engine, &mine).unwrap()), &other).err();
    assert_eq!(err, Some(packed(4, 1)), "INTENT_MISMATCH with the stored record");
    // A claim of another intent is refused like a stored one.
    let stranger = engine.begin("another", &fp, &fp, NOW, false, None, None, None).unwrap();
    let numbers = record_numbers(2.0, NOW, NOW, 0.0, -1.0, 0.0);
    let stranger = engine.load("another", "another", &stranger.key_or_header(None), &fp, "pending", &numbers).unwrap();
    assert_eq!(begin(None, Some(stranger), &fp).err(), Some(packed(9, 2)), "STORAGE id");
}

#[wasm_bindgen_test]
fn sweep_and_expiry_through_the_exports() {
    let engine = engine();
    let mut m = engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    m.mark_saved();
    assert_eq!(engine.sweep(&mut m, NOW + 86_400_000.0), 0);
    assert_eq!(engine.sweep(&mut m, NOW + 86_400_001.0), 2);
    assert!(m.dirty());
    assert_eq!(m.state(), "expired");
    assert_eq!(m.start(NOW + 86_400_002.0, true), FAIL);
    assert_eq!(m.whole(Field::ErrorCode), 5);
}

#[wasm_bindgen_test]
fn hostile_numbers_never_trap() {
    let engine = engine_with(3.0, 0.0, false);
    let mut m = engine.begin(ID, &fingerprint(), &fingerprint(), f64::NAN, false, None, None, None).unwrap();
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
    assert!(is_canonical_v4(&m.key_or_header(None)));
    assert!(m.field(Field::UpdatedAt) >= m.field(Field::CreatedAt));
}

#[wasm_bindgen_test]
fn replays_uncertainty_and_total_attempts_cross_the_boundary() {
    // maxTotalAttempts: an optional trailing argument (undefined: no limit).
    let limits = [(Opt::BaseDelayMs, 0.0), (Opt::MaxDelayMs, 0.0), (Opt::Jitter, 3.0)];
    let engine = create(options(&[limits.as_slice(), &[(Opt::MaxTotalAttempts, 2.0)]].concat())).expect("options");
    let bad = create(options(&[(Opt::MaxTotalAttempts, 0.5)]));
    assert_eq!(refused(bad), packed(7, 10));
    assert_eq!(refused(Engine::create(&options(&[])[..10])), packed(7, 10), "an option left out");

    let mut m = engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_network_error(NOW + 1.0), WAIT);
    assert!(m.uncertain(), "sent, then no answer");
    assert_eq!(m.on_wake(NOW + 2.0, true), SEND);
    assert_eq!(m.on_response(NOW + 3.0, 500, None, None, None, 0), FAIL);
    assert_eq!((m.whole(Field::ErrorCode), m.whole(Field::ErrorDetail)), (1, 4), "maxTotalAttempts");

    // Replayed: definite, certain.
    let engine = engine_with(8.0, 3.0, false);
    let mut m = engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_timeout(NOW + 1.0), WAIT);
    assert_eq!(m.on_wake(NOW + 300.0, true), SEND);
    assert_eq!(m.on_response(NOW + 400.0, 500, None, None, Some("true".into()), 1), DONE);
    assert!(m.replayed() && !m.ok() && !m.uncertain());

    // Uncertain is stored and read back; a plain 4xx then says so.
    let mut m = engine.begin("u", &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_abort(NOW + 1.0), FAIL);
    let (key, fp) = (m.key_or_header(None), fingerprint());
    let numbers = record_numbers(2.0, m.field(Field::CreatedAt), m.field(Field::UpdatedAt), 1.0, -1.0, 1.0);
    let stored = engine.load("u", "u", &key, &fp, "pending", &numbers).unwrap();
    assert!(stored.uncertain());
    let mut again = engine.begin("u", &fp, &fp, NOW + 10.0, false, None, Some(stored), None).unwrap();
    assert_eq!(again.start(NOW + 10.0, true), SEND);
    assert_eq!(again.on_response(NOW + 11.0, 404, None, None, None, 0), DONE);
    assert!(again.uncertain() && !again.ok());
}
