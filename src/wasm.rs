//! The JavaScript boundary: `Engine` and `Machine` (docs/WASM-BOUNDARY.md is the contract), exported
//! as plain wasm functions by `src/wasm/abi.rs` for the driver's own glue (src/js/abi.ts).
//!
//! Thin shims over [`crate::machine`]: numbers, booleans and strings in and out. A refused call
//! returns `undefined` and leaves its error in [`last_error`], the number `code * 256 + detail`:
//! not thrown, because a `Result<_, JsValue>` costs every fallible export a multi-value shim and the
//! glue an externref round trip (docs/WASM-BOUNDARY.md, "Size"). JavaScript numbers may be anything
//! (NaN, fractions, negatives), so every option is range-checked here and times are clamped by `as`
//! (never a panic).

use alloc::string::String;
use core::sync::atomic::{AtomicU32, Ordering};

use crate::contract::{field, Event, Field};
use crate::machine::{self as m, Answer, Override, Policy, StoredFields};

/// The error of the last call that returned `undefined` (wasm32 without threads: one caller at a time).
static LAST_ERROR: AtomicU32 = AtomicU32::new(0);

/// Keeps `error` for [`last_error`]; the refused call returns `None` (`undefined` in JavaScript).
fn refuse<T>(error: m::Error) -> Option<T> {
    LAST_ERROR.store(error.packed(), Ordering::Relaxed);
    None
}

/// The error of the last `Engine.create`, `begin` or `load` that returned `undefined`: the number
/// `code * 256 + detail` (the driver throws it and maps it to its messages).
pub fn last_error() -> u32 {
    LAST_ERROR.load(Ordering::Relaxed)
}

mod abi;

// The CSPRNG, caught in JavaScript (the glue's `fillRandom`): a throw from `crypto.getRandomValues`
// (no Web Crypto) becomes 0 here, so no JS exception crosses the wasm frames.
#[cfg(not(feature = "harness"))]
#[link(wasm_import_module = "idempotent_fetch")]
extern "C" {
    #[link_name = "fillRandom"]
    fn fill_random_import(bytes: *mut u8, len: usize) -> u32;
}

#[cfg(not(feature = "harness"))]
fn fill_random(bytes: &mut [u8]) -> bool {
    // SAFETY: the import writes at most `len` bytes at `bytes`, a live exclusive borrow.
    unsafe { fill_random_import(bytes.as_mut_ptr(), bytes.len()) != 0 }
}

// The wasm-bindgen-test suites run without the driver's glue: the same call through wasm-bindgen.
#[cfg(feature = "harness")]
#[wasm_bindgen::prelude::wasm_bindgen(
    inline_js = "export function fillRandom(b){try{crypto.getRandomValues(b);return true}catch(e){return false}}"
)]
extern "C" {
    #[wasm_bindgen(js_name = fillRandom)]
    fn fill_random(bytes: &mut [u8]) -> bool;
}

/// `crypto.getRandomValues`: the engine's randomness in JavaScript engines.
struct WebCrypto;

impl m::RandomSource for WebCrypto {
    fn fill(&self, bytes: &mut [u8]) -> Result<(), m::RandomFailed> {
        fill_random(bytes).then_some(()).ok_or(m::RandomFailed)
    }
}

/// A time from JavaScript (`Date.now()`): `as` saturates NaN and negatives to 0.
fn ms(now_ms: f64) -> u64 {
    now_ms as u64
}

/// One client's engine: the policy and the client-wide retry budget.
pub struct Engine(m::Engine);

impl Engine {
    /// Range-checks the options, one number per option by its `OPT_*` index (the contract's
    /// `OPTIONS`: the driver did the type checks and defaults); `undefined` with [`last_error`]
    /// `INVALID_OPTIONS * 256 + index` naming the first option out of range (`Policy::validate`).
    pub fn create(options: &[f64]) -> Option<Engine> {
        let mut values = [0; m::policy::OPTION_COUNT];
        for (index, value) in values.iter_mut().enumerate() {
            let x = options.get(index).copied().unwrap_or(f64::NAN);
            match m::record::whole(x, m::record::MAX_SAFE_INTEGER) {
                Some(v) => *value = v,
                None => return refuse(m::Error::new(m::code::INVALID_OPTIONS, index as u8)),
            }
        }
        match Policy::checked(&values) {
            Ok(policy) => Some(Engine(m::Engine::with_checked(policy, alloc::boxed::Box::new(WebCrypto)))),
            Err(index) => refuse(m::Error::new(m::code::INVALID_OPTIONS, index)),
        }
    }

    /// Tokens left in the client-wide retry budget.
    pub fn budget(&self) -> u32 {
        self.0.budget()
    }

    /// Create-or-resume, every choice made here (see `machine::Engine::begin_from`): `stored` is what
    /// `load` made of this tab's storage, `claimed` of the intent's cross-tab claim (the glue hands
    /// both over: `engine_begin` frees them).
    /// `storedFingerprint` is compared with the stored record (the hash for its version). Field
    /// `Resumed` says which record was resumed (a `Resumed`: none, the stored one or the claim); `Dirty`,
    /// whether to save first. `undefined` when
    /// refused (the error in [`last_error`]; `INTENT_MISMATCH`'s detail names the candidate).
    #[allow(clippy::too_many_arguments)]
    pub fn begin(
        &self,
        intent_id: &str,
        fingerprint: &str,
        stored_fingerprint: &str,
        now_ms: f64,
        replace: bool,
        key: Option<&str>,
        stored: Option<&Machine>,
        claimed: Option<&Machine>,
    ) -> Option<Machine> {
        let (stored, claimed) = (stored.map(|m| &m.0), claimed.map(|m| &m.0));
        self.0
            .begin_from(intent_id, fingerprint, stored_fingerprint, ms(now_ms), replace, key, stored, claimed)
            .map_or_else(refuse, |m| Some(Machine(m)))
    }

    /// Validates a stored record's values (the driver parsed the JSON and checked the types): the
    /// strings, and the numbers in one array by `FIELD_*` number (the state as its index in
    /// `STATES`, -1 for an unknown name; `lastStatus` null or absent: `NO_STATUS`; `uncertain` 1/0,
    /// absent 0). `undefined` when refused, [`last_error`] `STORAGE * 256 + field`.
    pub fn load(&self, intent_id: &str, id: &str, key: &str, fingerprint: &str, numbers: &[f64]) -> Option<Machine> {
        // Too short an array is the driver's bug: refused like a record whose version is missing.
        let Some(numbers) = numbers.get(..crate::contract::RECORD_SLOTS).and_then(|n| n.try_into().ok()) else {
            return refuse(m::Error::new(m::code::STORAGE, field::VERSION));
        };
        let fields = StoredFields::from_slots(id, key, fingerprint, numbers);
        self.0.load(intent_id, &fields).map_or_else(refuse, |m| Some(Machine(m)))
    }

    /// The sweep's rule for one record: 0 keep, 1 remove, 2 now expired (save it, emit `expired`).
    pub fn sweep(&self, record: &mut Machine, now_ms: f64) -> u32 {
        self.0.sweep(&mut record.0, ms(now_ms)) as u32
    }
}

/// One intent's record and its `send` loop. Every event returns an action number
/// (1 SEND, 2 WAIT, 3 WAIT_ONLINE, 4 DONE, 5 FAIL); save the record first when `dirty()`.
pub struct Machine(m::Machine);

impl Machine {
    /// The idempotency key; with `header` true, the key header's value (raw, or sf-string if the
    /// engine says so). One export for both strings: each export costs its glue in the JavaScript
    /// users download.
    pub fn key_or_header(&self, header: bool) -> String {
        if header {
            self.0.header()
        } else {
            crate::machine::key::owned(self.0.record().key.as_str())
        }
    }

    /// The driver saved the record.
    pub fn mark_saved(&mut self) {
        self.0.mark_saved();
    }

    /// One number of the action's payload or outcome, or of the record, by `F_*` field (booleans as
    /// 1/0); NaN for an unknown field. One export instead of a getter per field: each export costs
    /// its glue in the JavaScript users download.
    pub fn get(&self, field: u32) -> f64 {
        u8::try_from(field).ok().and_then(Field::from_u8).map_or(f64::NAN, |field| self.0.field(field))
    }

    /// The attempt got an answer. `override_`: the caller's `shouldRetry(status)`: 0 none, 1 retry,
    /// 2 definite. Header values as `Headers.get` returns them (`undefined` when absent).
    pub fn on_response(
        &mut self,
        now_ms: f64,
        status: u16,
        retry_after: Option<&str>,
        stripe_should_retry: Option<&str>,
        replayed: Option<&str>,
        override_: u32,
    ) -> u32 {
        let answer = Answer {
            status,
            retry_after,
            should_retry: stripe_should_retry,
            replayed,
            caller: Override::from_index(override_),
        };
        self.0.on_response(ms(now_ms), &answer) as u32
    }

    /// The server's key-status answer after RECONCILE: `kind` a `KEY_*` status (`status`: the stored
    /// answer's when done; `retryAfter`: the status answer's `Retry-After` when in flight).
    pub fn on_key_status(&mut self, now_ms: f64, kind: u32, status: u16, retry_after: Option<&str>) -> u32 {
        let answer = Answer { status, retry_after, ..Answer::default() };
        self.0.on_key_status(ms(now_ms), m::KeyStatus::from_index(kind), &answer) as u32
    }

    /// An event of the send loop other than an answer, by `EV_*` number; `online` is read by start
    /// and wake. Returns the action; an unknown event is FAIL `INTERNAL`. One export instead of one
    /// per event: each export costs its glue in the JavaScript users download.
    pub fn on(&mut self, event: u32, now_ms: f64, online: bool) -> u32 {
        let now = ms(now_ms);
        let action = match u8::try_from(event).ok().and_then(Event::from_u8) {
            Some(Event::Start) => self.0.start(now, online),
            Some(Event::NetworkError) => self.0.on_network_error(now),
            Some(Event::Timeout) => self.0.on_timeout(now),
            Some(Event::Abort) => self.0.on_abort(now),
            Some(Event::Wake) => self.0.on_wake(now, online),
            Some(Event::Online) => self.0.on_online(now),
            Some(Event::OnlineTimeout) => self.0.on_online_timeout(now),
            Some(Event::Ask) => self.0.ask(now),
            None => self.0.on_unknown_event(),
        };
        action as u32
    }
}
