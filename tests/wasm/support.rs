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

use idempotent_fetch::contract::{
    code, exhausted, field, mismatch, protocol, request, Action, Event, Field, HeaderForm, Jitter, Opt, Override,
    Reason, Resumed, State, Sweep, NO_STATUS, OPTIONS, OPTION_COUNT, RECORD_SLOTS, RECORD_VERSION,
};
use idempotent_fetch::wasm::{last_error, Engine, Machine};
use wasm_bindgen_test::*;

pub const ID: &str = "checkout:cart-42";
pub const NOW: f64 = 1_700_000_000_000.0;

pub const SEND: u32 = Action::Send as u32;
pub const WAIT: u32 = Action::Wait as u32;
pub const WAIT_ONLINE: u32 = Action::WaitOnline as u32;
pub const DONE: u32 = Action::Done as u32;
pub const FAIL: u32 = Action::Fail as u32;

/// The stored record's version this build writes, as `Engine.load` takes it.
pub const VERSION: f64 = RECORD_VERSION as f64;
/// `Engine.load`'s number for no answer yet.
pub const NONE: f64 = NO_STATUS as f64;

/// `onResponse`'s last argument.
pub fn verdict(o: Override) -> u32 {
    o as u32
}

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

/// An option given by name, as the engine takes it (its index).
pub fn choice(index: u8) -> f64 {
    f64::from(index)
}

/// `Engine.create(...)` with the defaults and the given attempts, jitter and header form.
pub fn engine_with(max_attempts: f64, jitter: Jitter, form: HeaderForm) -> Engine {
    let o = options(&[
        (Opt::MaxAttempts, max_attempts),
        (Opt::Jitter, choice(jitter as u8)),
        (Opt::HeaderForm, choice(form as u8)),
    ]);
    create(o).unwrap_or_else(|| panic!("default options refused: {}", last_error()))
}

pub fn engine() -> Engine {
    engine_with(8.0, Jitter::None, HeaderForm::Raw)
}

/// The numbers of a stored record as `Engine.load` takes them (by `FIELD_*` number; the state, by
/// its index, pending).
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
    n[usize::from(field::STATE)] = f64::from(State::Pending as u8);
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
    /// FAIL: the error code and its detail.
    fn error(&self) -> (u8, u8) {
        (byte(self.field(Field::ErrorCode)), byte(self.field(Field::ErrorDetail)))
    }
    fn dirty(&self) -> bool {
        self.flag(Field::Dirty)
    }
    /// The record `begin` resumed (`None`: a number the contract does not know).
    fn resumed(&self) -> Option<Resumed> {
        Resumed::from_u8(self.field(Field::Resumed) as u8)
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
        State::from_u8(self.field(Field::State) as u8).map_or("?", State::text).to_owned()
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

/// `lastError()`'s number for an error code and its detail.
pub fn packed(code: u8, detail: u8) -> u32 {
    u32::from(code) * 256 + u32::from(detail)
}

/// A `Machine.get` number as the contract's `u8` (error codes and details).
pub fn byte(value: f64) -> u8 {
    value as u8
}

#[path = "../oracle/canonical_v4.rs"]
mod canonical_v4;
use canonical_v4::is_canonical_v4;

fn load(engine: &Engine, m: &Machine) -> Result<Machine, u32> {
    let status = if m.field(Field::LastStatus) == 0.0 { NONE } else { m.field(Field::LastStatus) };
    let mut numbers = record_numbers(
        VERSION,
        m.field(Field::CreatedAt),
        m.field(Field::UpdatedAt),
        m.field(Field::TotalAttempts),
        status,
        m.field(Field::Uncertain),
    );
    numbers[usize::from(field::STATE)] = m.field(Field::State);
    checked(engine.load(ID, ID, &m.key_or_header(false), &fingerprint(), &numbers))
}

#[wasm_bindgen_test]
fn keys_come_from_the_platform_csprng_and_are_distinct_v4() {
    let engine = engine();
    let mut seen = BTreeSet::new();
    for i in 0..200 {
        let machine = engine
            .begin(&format!("intent-{i}"), &fingerprint(), &fingerprint(), NOW, false, None, None, None)
            .expect("begin");
        let key = machine.key_or_header(false);
        assert!(is_canonical_v4(&key), "{key}");
        assert!(seen.insert(key.clone()), "duplicate key {key}");
        assert!(machine.dirty() && machine.resumed() == Some(Resumed::New));
        assert_eq!(machine.key_or_header(true), key);
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
    assert_eq!(result, Some(packed(code::STORAGE, field::CSPRNG)), "STORAGE CSPRNG");
    let machine =
        engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).expect("the CSPRNG works again");
    assert!(is_canonical_v4(&machine.key_or_header(false)));
}

#[wasm_bindgen_test]
fn the_sf_string_header_quotes_the_key() {
    let machine = engine_with(8.0, Jitter::Full, HeaderForm::SfString)
        .begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None)
        .unwrap();
    assert_eq!(machine.key_or_header(true), format!("\"{}\"", machine.key_or_header(false)));
}

#[wasm_bindgen_test]
fn every_option_out_of_range_throws_its_index() {
    let bad: [(Opt, &[f64]); OPTION_COUNT] = [
        (Opt::MaxAttempts, &[0.0, 1001.0, 1.5, -1.0, f64::NAN]),
        (Opt::BaseDelayMs, &[-1.0, 0.5, f64::INFINITY, 2_592_000_001.0]),
        (Opt::MaxDelayMs, &[100.0, f64::NAN, 2_592_000_001.0]),
        (Opt::TotalTimeoutMs, &[-1.0, 1.25, f64::NAN]),
        (Opt::AttemptTimeoutMs, &[0.0, -5.0, 0.1]),
        (Opt::MaxRetryAfterMs, &[f64::NEG_INFINITY, 3.5]),
        (Opt::Jitter, &[4.0, -1.0, 1.5, f64::NAN]),
        (Opt::KeyTtlMs, &[0.0, 2_592_000_001.0, 0.5]),
        (Opt::RetryBudget, &[-1.0, 1_000_001.0, 2.5]),
        (Opt::HeaderForm, &[2.0, -1.0, 0.5]),
        (Opt::MaxTotalAttempts, &[0.5, 1_000_001.0, -1.0, f64::NAN]),
        (Opt::Reconcile, &[2.0, -1.0, 0.5]),
        (Opt::ReplayStatus, &[600.0, -1.0, 409.5, f64::NAN]),
    ];
    let covered: BTreeSet<u8> = bad.iter().map(|&(opt, _)| opt as u8).collect();
    assert_eq!(covered.len(), OPTION_COUNT, "every option once");
    for (opt, values) in bad {
        for &value in values {
            let o = options(&[(opt, value)]);
            let result = checked(create(o));
            let err = result.err().unwrap_or_else(|| panic!("{opt:?} = {value} accepted"));
            assert_eq!(err, packed(code::INVALID_OPTIONS, opt as u8), "{opt:?} = {value}");
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
    assert_eq!(m.on_response(NOW + 10.0, 503, Some("2"), None, None, verdict(Override::None)), WAIT);
    let reason = Reason::Status as u32;
    assert_eq!((m.field(Field::DelayMs), m.whole(Field::Reason), m.whole(Field::LastStatus)), (2_000.0, reason, 503));
    assert_eq!(engine.budget(), 495);
    assert_eq!(m.on_wake(NOW + 2_010.0, false), WAIT_ONLINE);
    assert_eq!(m.field(Field::TimeoutMs), 120_000.0 - 2_010.0);
    assert_eq!(m.on_online(NOW + 3_000.0), SEND);
    assert_eq!(m.on_network_error(NOW + 3_100.0), WAIT);
    let reason = Reason::Network as u32;
    assert_eq!((m.field(Field::DelayMs), m.whole(Field::Reason)), (500.0, reason), "no jitter: the second step");
    assert_eq!(m.on_wake(NOW + 3_600.0, true), SEND);
    assert_eq!(m.on_timeout(NOW + 18_600.0), WAIT);
    assert_eq!(m.whole(Field::Reason), Reason::Timeout as u32);
    assert_eq!(m.on_wake(NOW + 19_600.0, true), SEND);
    let done = m.on_response(NOW + 19_700.0, 201, None, None, Some(" True "), verdict(Override::None));
    assert_eq!(done, DONE);
    assert_eq!((m.whole(Field::Status), m.ok(), m.replayed(), m.whole(Field::Attempt)), (201, true, true, 4));
    assert_eq!((m.state(), m.whole(Field::TotalAttempts)), (State::Succeeded.text().to_owned(), 4));
    assert_eq!(m.field(Field::UpdatedAt), NOW + 19_700.0);
}

/// The action's payload and outcome, in `F_*` order.
const PAYLOAD: [Field; 10] = [
    Field::TimeoutMs,
    Field::DelayMs,
    Field::Reason,
    Field::Attempt,
    Field::TotalAttempts,
    Field::Status,
    Field::Ok,
    Field::Replayed,
    Field::ErrorCode,
    Field::ErrorDetail,
];

/// `get(field)`, the one export the driver reads the payload through (docs/WASM-BOUNDARY.md "Fields").
fn fields(m: &Machine) -> [f64; 10] {
    PAYLOAD.map(|f| m.get(f as u32))
}

#[wasm_bindgen_test]
fn get_reads_each_field_of_the_payload() {
    let engine = engine();
    let none = verdict(Override::None);
    let mut m = engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(fields(&m)[..5], [15_000.0, 0.0, 0.0, 1.0, 1.0], "SEND: timeout, attempt, totalAttempts");
    assert_eq!(m.on_response(NOW + 10.0, 503, Some("2"), None, None, none), WAIT);
    let status = f64::from(Reason::Status as u8);
    assert_eq!(fields(&m)[1..4], [2_000.0, status, 1.0], "WAIT: delay, reason (status), attempt");
    assert_eq!(m.on_wake(NOW + 2_010.0, true), SEND);
    assert_eq!(m.on_response(NOW + 2_020.0, 201, None, None, Some("true"), none), DONE);
    assert_eq!(fields(&m)[3..8], [2.0, 2.0, 201.0, 1.0, 1.0], "DONE: attempt, total, status, ok, replayed");
    let record = [Field::CreatedAt, Field::UpdatedAt, Field::LastStatus, Field::Uncertain, Field::Dirty]
        .map(|f| m.get(f as u32));
    assert_eq!(
        record,
        [NOW, NOW + 2_020.0, 201.0, 0.0, 1.0],
        "the record: createdAt, updatedAt, lastStatus, uncertain, dirty"
    );
    m.mark_saved();
    assert_eq!(m.get(Field::Dirty as u32), 0.0, "saved: not dirty");
    assert_eq!(m.get(Field::State as u32), f64::from(State::Succeeded as u8), "state: succeeded");
    assert!(m.get(Field::ALL.len() as u32).is_nan() && m.get(u32::MAX).is_nan(), "an unknown field is NaN");
    let mut f = engine.begin("if-get-fail", &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    assert_eq!(f.start(NOW, true), SEND);
    assert_eq!(f.on_abort(NOW + 5.0), FAIL);
    assert_eq!(fields(&f)[8..], [code::ABORTED.into(), 0.0], "FAIL: aborted");
    assert_eq!(f.on_wake(NOW, true), FAIL);
    let out_of_order: [f64; 2] = [code::INTERNAL.into(), protocol::NOT_WAITING.into()];
    assert_eq!(fields(&f)[8..], out_of_order, "FAIL: out of order, with its detail");
    assert_eq!(f.get(Field::State as u32), f64::from(State::Pending as u8), "state: pending (the key is kept)");
}

#[wasm_bindgen_test]
fn on_runs_each_event_of_the_send_loop() {
    let engine = engine();
    let on = |m: &mut Machine, event: Event, now: f64, online: bool| m.on(event as u32, now, online);
    let reason = |m: &Machine| m.get(Field::Reason as u32);
    let error = |m: &Machine| byte(m.get(Field::ErrorCode as u32));
    let mut m = engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    assert_eq!(on(&mut m, Event::Start, NOW, true), SEND, "start");
    assert_eq!(on(&mut m, Event::NetworkError, NOW + 10.0, false), WAIT, "network error");
    assert_eq!(reason(&m), f64::from(Reason::Network as u8));
    assert_eq!(on(&mut m, Event::Wake, NOW + 1_000.0, false), WAIT_ONLINE, "wake, offline");
    assert_eq!(on(&mut m, Event::Online, NOW + 1_100.0, false), SEND, "online");
    assert_eq!(on(&mut m, Event::Timeout, NOW + 16_100.0, false), WAIT, "timeout");
    assert_eq!(reason(&m), f64::from(Reason::Timeout as u8));
    assert_eq!(on(&mut m, Event::Wake, NOW + 17_000.0, false), WAIT_ONLINE);
    assert_eq!(on(&mut m, Event::OnlineTimeout, NOW + 120_000.0, false), FAIL, "the deadline offline");
    assert_eq!(error(&m), code::RETRIES_EXHAUSTED);
    assert_eq!(on(&mut m, Event::Start, NOW + 130_000.0, true), SEND, "a send can start again");
    assert_eq!(on(&mut m, Event::Abort, NOW + 130_001.0, false), FAIL, "abort");
    assert_eq!(error(&m), code::ABORTED);
    for event in [Event::ALL.len() as u32, u32::MAX] {
        assert_eq!(m.on(event, NOW, true), FAIL, "an unknown event is a bug");
        assert_eq!(m.error(), (code::INTERNAL, protocol::UNKNOWN_EVENT), "INTERNAL, unknown event");
    }
}

#[wasm_bindgen_test]
fn failures_carry_their_code_and_detail() {
    let engine = engine_with(2.0, Jitter::None, HeaderForm::Raw);
    let mut m = engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_response(NOW, 500, None, None, None, verdict(Override::None)), WAIT);
    assert_eq!(m.on_wake(NOW + 250.0, true), SEND);
    assert_eq!(m.on_response(NOW + 300.0, 500, None, None, None, verdict(Override::None)), FAIL);
    assert_eq!((m.error(), m.whole(Field::Attempt)), ((code::RETRIES_EXHAUSTED, exhausted::MAX_ATTEMPTS), 2));
    assert_eq!(m.state(), State::Pending.text(), "the key is kept");

    assert_eq!(m.start(NOW + 1_000.0, true), SEND, "a machine can start again");
    assert_eq!(m.on_response(NOW + 1_000.0, 422, None, None, None, verdict(Override::None)), FAIL);
    assert_eq!((m.error().0, m.state()), (code::KEY_MISMATCH, State::Failed.text().to_owned()));

    let mut m = engine.begin("other", &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_abort(NOW + 5.0), FAIL);
    assert_eq!((m.error(), m.whole(Field::Attempt)), ((code::ABORTED, 0), 1));
    assert_eq!(m.on_wake(NOW, true), FAIL, "out of order");
    assert_eq!(m.error(), (code::INTERNAL, protocol::NOT_WAITING));
    assert_eq!(m.on_response(NOW, 200, None, None, None, verdict(Override::None)), FAIL);
    assert_eq!(m.error(), (code::INTERNAL, protocol::NOT_SENDING));
}

#[wasm_bindgen_test]
fn the_callers_override_and_the_server_hint_cross_as_numbers_and_strings() {
    let engine = engine();
    let mut m = engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_response(NOW, 503, None, None, None, verdict(Override::Definite)), DONE, "override: definite");
    assert!(!m.ok());
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_response(NOW, 404, None, None, None, verdict(Override::Retry)), WAIT, "override: retry");
    assert_eq!(m.on_wake(NOW + 250.0, true), SEND);
    assert_eq!(
        m.on_response(NOW, 503, None, Some("false"), None, verdict(Override::None)),
        DONE,
        "Stripe-Should-Retry"
    );
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(
        m.on_response(NOW, 503, Some("Sun, 06 Nov 1994 08:49:37 GMT"), None, None, verdict(Override::None)),
        WAIT
    );
    assert_eq!(m.field(Field::DelayMs), 250.0, "a past date means now: the backoff");
}

#[wasm_bindgen_test]
fn stored_records_load_or_throw_the_field() {
    let engine = engine();
    let m = engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    let loaded = load(&engine, &m).expect("its own record loads");
    assert_eq!(
        (loaded.key_or_header(false), loaded.dirty(), loaded.resumed()),
        (m.key_or_header(false), false, Some(Resumed::Stored))
    );

    let key = m.key_or_header(false);
    let fp = fingerprint();
    // Each refusal read right after its call: `lastError()` is the last refused call's.
    let ok = || record_numbers(VERSION, NOW, NOW, 0.0, NONE, 0.0);
    let with = |slot: u8, value: f64| {
        let mut n = ok();
        n[usize::from(slot)] = value;
        n
    };
    let upper = "8E03978E-40D5-43E8-BC93-6894A57F9324";
    let cases: [(u8, Result<Machine, u32>); 12] = [
        (field::VERSION, checked(engine.load(ID, ID, &key, &fp, &with(field::VERSION, VERSION + 1.0)))),
        (field::ID, checked(engine.load(ID, "other", &key, &fp, &ok()))),
        (field::KEY, checked(engine.load(ID, ID, upper, &fp, &ok()))),
        (field::FINGERPRINT, checked(engine.load(ID, ID, &key, "zz", &ok()))),
        (field::CREATED_AT, checked(engine.load(ID, ID, &key, &fp, &with(field::CREATED_AT, f64::NAN)))),
        (field::UPDATED_AT, checked(engine.load(ID, ID, &key, &fp, &with(field::UPDATED_AT, NOW - 1.0)))),
        (field::ATTEMPTS, checked(engine.load(ID, ID, &key, &fp, &with(field::ATTEMPTS, -1.0)))),
        (field::STATE, checked(engine.load(ID, ID, &key, &fp, &with(field::STATE, -1.0)))),
        (field::LAST_STATUS, checked(engine.load(ID, ID, &key, &fp, &with(field::LAST_STATUS, 600.0)))),
        (field::LAST_STATUS, checked(engine.load(ID, ID, &key, &fp, &with(field::LAST_STATUS, 0.0)))),
        (field::UNCERTAIN, checked(engine.load(ID, ID, &key, &fp, &with(field::UNCERTAIN, 2.0)))),
        (field::VERSION, checked(engine.load(ID, ID, &key, &fp, &ok()[..3]))),
    ];
    for (field, result) in cases {
        let err = result.err().unwrap_or_else(|| panic!("field {field} accepted"));
        assert_eq!(err, packed(code::STORAGE, field), "field {field}");
    }
}

#[wasm_bindgen_test]
fn begin_resumes_refuses_or_renews_against_the_stored_record() {
    let engine = engine();
    let m = engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    let key = m.key_or_header(false);
    let stored = load(&engine, &m).unwrap();
    let again = engine.begin(ID, &fingerprint(), &fingerprint(), NOW + 1.0, false, None, Some(&stored), None).unwrap();
    assert_eq!(
        (again.key_or_header(false), again.resumed(), again.dirty()),
        (key.clone(), Some(Resumed::Stored), false)
    );

    let stored = load(&engine, &m).unwrap();
    let err = refused(engine.begin(ID, &"b2".repeat(32), &"b2".repeat(32), NOW, false, None, Some(&stored), None));
    assert_eq!(err, packed(code::INTENT_MISMATCH, mismatch::STORED), "INTENT_MISMATCH with the stored record");

    let stored = load(&engine, &m).unwrap();
    let replaced = engine.begin(ID, &"b2".repeat(32), &"b2".repeat(32), NOW, true, None, Some(&stored), None).unwrap();
    assert_ne!(replaced.key_or_header(false), key);

    assert_eq!(
        refused(engine.begin("", &fingerprint(), &fingerprint(), NOW, false, None, None, None)),
        packed(code::INVALID_REQUEST, request::INTENT_ID)
    );
    assert_eq!(
        refused(engine.begin(ID, "nope", "nope", NOW, false, None, None, None)),
        packed(code::INVALID_REQUEST, request::FINGERPRINT)
    );
}

/// The two candidates of `begin`: this tab's stored record and the intent's cross-tab claim.
#[wasm_bindgen_test]
fn begin_weighs_the_stored_record_against_the_claim() {
    let engine = engine();
    let fp = fingerprint();
    let begin = |stored: Option<Machine>, claimed: Option<Machine>, fp: &str| {
        checked(engine.begin(ID, fp, fp, NOW + 5.0, false, None, stored.as_ref(), claimed.as_ref()))
    };
    let mine = engine.begin(ID, &fp, &fp, NOW, false, None, None, None).unwrap();
    let theirs = engine.begin(ID, &fp, &fp, NOW, false, None, None, None).unwrap();
    let (my_key, their_key) = (mine.key_or_header(false), theirs.key_or_header(false));
    assert!(mine.resumed() == Some(Resumed::New) && mine.dirty(), "a new key: not resumed, save it");

    // Only a claim (another tab's write has not reached this storage): its key, resumed, and dirty.
    let m = begin(None, Some(load(&engine, &theirs).unwrap()), &fp).unwrap();
    assert_eq!((m.key_or_header(false), m.resumed(), m.dirty()), (their_key.clone(), Some(Resumed::Claimed), true));
    // Another key in the claim than in storage: the claim is newer.
    let m = begin(Some(load(&engine, &mine).unwrap()), Some(load(&engine, &theirs).unwrap()), &fp).unwrap();
    assert_eq!((m.key_or_header(false), m.resumed(), m.dirty()), (their_key.clone(), Some(Resumed::Claimed), true));
    // The same key: the stored record is fresher, nothing to save.
    let m = begin(Some(load(&engine, &mine).unwrap()), Some(load(&engine, &mine).unwrap()), &fp).unwrap();
    assert_eq!((m.key_or_header(false), m.resumed(), m.dirty()), (my_key.clone(), Some(Resumed::Stored), false));
    // Only stored: resumed, not dirty.
    let m = begin(Some(load(&engine, &mine).unwrap()), None, &fp).unwrap();
    assert_eq!((m.key_or_header(false), m.resumed(), m.dirty()), (my_key, Some(Resumed::Stored), false));

    // A different request: the detail names whose key it does not match.
    let other = "b2".repeat(32);
    let err = begin(Some(load(&engine, &mine).unwrap()), Some(load(&engine, &theirs).unwrap()), &other).err();
    assert_eq!(err, Some(packed(code::INTENT_MISMATCH, mismatch::CLAIMED)), "INTENT_MISMATCH with the claim");
    let err = begin(Some(load(&engine, &mine).unwrap()), Some(load(&engine, &mine).unwrap()), &other).err();
    assert_eq!(err, Some(packed(code::INTENT_MISMATCH, mismatch::STORED)), "INTENT_MISMATCH with the stored record");
    // A claim of another intent is refused like a stored one.
    let stranger = engine.begin("another", &fp, &fp, NOW, false, None, None, None).unwrap();
    let numbers = record_numbers(VERSION, NOW, NOW, 0.0, NONE, 0.0);
    let stranger = engine.load("another", "another", &stranger.key_or_header(false), &fp, &numbers).unwrap();
    assert_eq!(begin(None, Some(stranger), &fp).err(), Some(packed(code::STORAGE, field::ID)), "STORAGE id");
}

#[wasm_bindgen_test]
fn sweep_and_expiry_through_the_exports() {
    let engine = engine();
    let mut m = engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    m.mark_saved();
    assert_eq!(engine.sweep(&mut m, NOW + 86_400_000.0), Sweep::Keep as u32);
    assert_eq!(engine.sweep(&mut m, NOW + 86_400_001.0), Sweep::Expired as u32);
    assert!(m.dirty());
    assert_eq!(m.state(), State::Expired.text());
    assert_eq!(m.start(NOW + 86_400_002.0, true), FAIL);
    assert_eq!(m.error().0, code::EXPIRED);
}

#[wasm_bindgen_test]
fn hostile_numbers_never_trap() {
    let engine = engine_with(3.0, Jitter::Full, HeaderForm::Raw);
    let mut m = engine.begin(ID, &fingerprint(), &fingerprint(), f64::NAN, false, None, None, None).unwrap();
    for now in [f64::NAN, -1.0, f64::INFINITY, f64::NEG_INFINITY, 1e300, -0.0, 0.5] {
        let _ = m.start(now, true);
        let _ = m.on_response(now, 65_535, Some("\u{0}"), Some(""), Some("x"), u32::MAX);
        let _ = m.on_network_error(now);
        let _ = m.on_wake(now, false);
        let _ = m.on_online(now);
        let _ = m.on_online_timeout(now);
        let _ = m.on_timeout(now);
        let _ = m.on_abort(now);
        let _ = engine.sweep(&mut m, now);
    }
    assert!(is_canonical_v4(&m.key_or_header(false)));
    assert!(m.field(Field::UpdatedAt) >= m.field(Field::CreatedAt));
}

#[wasm_bindgen_test]
fn replays_uncertainty_and_total_attempts_cross_the_boundary() {
    // maxTotalAttempts: an optional trailing argument (undefined: no limit).
    let limits = [(Opt::BaseDelayMs, 0.0), (Opt::MaxDelayMs, 0.0), (Opt::Jitter, choice(Jitter::None as u8))];
    let engine = create(options(&[limits.as_slice(), &[(Opt::MaxTotalAttempts, 2.0)]].concat())).expect("options");
    let bad = create(options(&[(Opt::MaxTotalAttempts, 0.5)]));
    assert_eq!(refused(bad), packed(code::INVALID_OPTIONS, Opt::MaxTotalAttempts as u8));
    let short = &options(&[])[..Opt::MaxTotalAttempts as usize];
    let left_out = packed(code::INVALID_OPTIONS, Opt::MaxTotalAttempts as u8);
    assert_eq!(refused(Engine::create(short)), left_out, "an option left out");

    let mut m = engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_network_error(NOW + 1.0), WAIT);
    assert!(m.uncertain(), "sent, then no answer");
    assert_eq!(m.on_wake(NOW + 2.0, true), SEND);
    assert_eq!(m.on_response(NOW + 3.0, 500, None, None, None, verdict(Override::None)), FAIL);
    assert_eq!(m.error(), (code::RETRIES_EXHAUSTED, exhausted::MAX_TOTAL_ATTEMPTS), "maxTotalAttempts");

    // Replayed: definite, certain.
    let engine = engine_with(8.0, Jitter::None, HeaderForm::Raw);
    let mut m = engine.begin(ID, &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_timeout(NOW + 1.0), WAIT);
    assert_eq!(m.on_wake(NOW + 300.0, true), SEND);
    assert_eq!(m.on_response(NOW + 400.0, 500, None, None, Some("true"), verdict(Override::Retry)), DONE);
    assert!(m.replayed() && !m.ok() && !m.uncertain());

    // Uncertain is stored and read back; a plain 4xx then says so.
    let mut m = engine.begin("u", &fingerprint(), &fingerprint(), NOW, false, None, None, None).unwrap();
    assert_eq!(m.start(NOW, true), SEND);
    assert_eq!(m.on_abort(NOW + 1.0), FAIL);
    let (key, fp) = (m.key_or_header(false), fingerprint());
    let numbers = record_numbers(VERSION, m.field(Field::CreatedAt), m.field(Field::UpdatedAt), 1.0, NONE, 1.0);
    let stored = engine.load("u", "u", &key, &fp, &numbers).unwrap();
    assert!(stored.uncertain());
    let mut again = engine.begin("u", &fp, &fp, NOW + 10.0, false, None, Some(&stored), None).unwrap();
    assert_eq!(again.start(NOW + 10.0, true), SEND);
    assert_eq!(again.on_response(NOW + 11.0, 404, None, None, None, verdict(Override::None)), DONE);
    assert!(again.uncertain() && !again.ok());
}
