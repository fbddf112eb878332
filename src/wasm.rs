//! The JavaScript exports: `Engine` and `Machine` (docs/WASM-BOUNDARY.md is the contract).
//!
//! Thin shims over [`crate::machine`]: numbers, booleans and strings in and out. A refused call
//! returns `undefined` and leaves its error in [`last_error`], the number `code * 256 + detail`:
//! not thrown, because a `Result<_, JsValue>` costs every fallible export a multi-value shim and the
//! glue an externref round trip (docs/WASM-BOUNDARY.md, "Size"). JavaScript numbers may be anything
//! (NaN, fractions, negatives), so every option is range-checked here and times are clamped by `as`
//! (never a panic).

use alloc::string::String;
use core::sync::atomic::{AtomicU32, Ordering};

use wasm_bindgen::prelude::*;

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
#[wasm_bindgen(js_name = lastError)]
pub fn last_error() -> u32 {
    LAST_ERROR.load(Ordering::Relaxed)
}

// The CSPRNG, caught in JavaScript: a throw from `crypto.getRandomValues` (no Web Crypto) becomes
// `false` here, so no JS exception crosses the wasm frames and no externref table is needed.
// getrandom's `wasm_js` backend does the same with wasm-bindgen's `catch`, which ships the externref
// table and its glue (docs/WASM-BOUNDARY.md, "Size").
#[wasm_bindgen(
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

/// An option given as a JavaScript number: a whole number in `[0, max]`, else `INVALID_OPTIONS`
/// with the option's argument index.
fn option(x: f64, max: u64, index: u8) -> Result<u64, m::Error> {
    m::record::whole(x, max).ok_or(m::Error::new(m::code::INVALID_OPTIONS, index))
}

/// One client's engine: the policy and the client-wide retry budget.
#[wasm_bindgen]
pub struct Engine(m::Engine);

#[wasm_bindgen]
impl Engine {
    /// Range-checks the options (the driver did the type checks and defaults); `undefined` with
    /// [`last_error`] `INVALID_OPTIONS * 256 + index` naming the first argument out of range.
    /// `maxTotalAttempts` may be left out (`undefined`: no limit; 0 also means none); `reconcile`
    /// (the app configured how to ask the server about a key) too (`undefined`: no).
    #[allow(clippy::too_many_arguments)]
    pub fn create(
        max_attempts: f64,
        base_delay_ms: f64,
        max_delay_ms: f64,
        total_timeout_ms: f64,
        attempt_timeout_ms: f64,
        max_retry_after_ms: f64,
        jitter: f64,
        key_ttl_ms: f64,
        retry_budget: f64,
        sf_header: bool,
        max_total_attempts: Option<f64>,
        reconcile: Option<bool>,
    ) -> Option<Engine> {
        let policy = (|| {
            use m::policy::{option as i, MAX_ATTEMPTS_LIMIT, MAX_DURATION_MS, MAX_RETRY_BUDGET, MAX_TOTAL_ATTEMPTS};
            let jitter = option(jitter, 3, i::JITTER)?;
            Ok(Policy {
                max_attempts: option(max_attempts, MAX_ATTEMPTS_LIMIT.into(), i::MAX_ATTEMPTS)? as u32,
                base_delay_ms: option(base_delay_ms, MAX_DURATION_MS, i::BASE_DELAY_MS)?,
                max_delay_ms: option(max_delay_ms, MAX_DURATION_MS, i::MAX_DELAY_MS)?,
                total_timeout_ms: option(total_timeout_ms, MAX_DURATION_MS, i::TOTAL_TIMEOUT_MS)?,
                attempt_timeout_ms: option(attempt_timeout_ms, MAX_DURATION_MS, i::ATTEMPT_TIMEOUT_MS)?,
                max_retry_after_ms: option(max_retry_after_ms, MAX_DURATION_MS, i::MAX_RETRY_AFTER_MS)?,
                jitter: m::Jitter::from_index(jitter as u32).unwrap_or_default(),
                key_ttl_ms: option(key_ttl_ms, MAX_DURATION_MS, i::KEY_TTL_MS)?,
                retry_budget: option(retry_budget, MAX_RETRY_BUDGET.into(), i::RETRY_BUDGET)? as u32,
                sf_header,
                max_total_attempts: match max_total_attempts {
                    Some(n) => option(n, MAX_TOTAL_ATTEMPTS.into(), i::MAX_TOTAL_ATTEMPTS)? as u32,
                    None => 0,
                },
                reconcile: reconcile == Some(true),
            })
        })();
        match policy.and_then(|policy| m::Engine::new(policy, alloc::boxed::Box::new(WebCrypto))) {
            Ok(engine) => Some(Engine(engine)),
            Err(error) => refuse(error),
        }
    }

    /// Tokens left in the client-wide retry budget.
    pub fn budget(&self) -> u32 {
        self.0.budget()
    }

    /// Create-or-resume (see `machine::Engine::begin`). `stored` is what `load` made from storage;
    /// it is consumed. `undefined` when refused (the error in [`last_error`]).
    pub fn begin(
        &self,
        intent_id: &str,
        fingerprint: &str,
        now_ms: f64,
        replace: bool,
        stored: Option<Machine>,
    ) -> Option<Machine> {
        // By value: wasm-bindgen has no optional borrowed class argument. The JS object of `stored`
        // is emptied by the call (the driver names the old key from the record it parsed).
        let stored = stored.as_ref().map(|machine| &machine.0);
        self.0.begin(intent_id, fingerprint, ms(now_ms), replace, stored).map_or_else(refuse, |m| Some(Machine(m)))
    }

    /// Validates a stored record's values (the driver parsed the JSON and checked the types);
    /// `undefined` when refused, [`last_error`] `STORAGE * 256 + field`. `uncertain` may be left out (records from before it: false).
    #[allow(clippy::too_many_arguments)]
    pub fn load(
        &self,
        intent_id: &str,
        v: f64,
        id: &str,
        key: &str,
        fingerprint: &str,
        created_at: f64,
        updated_at: f64,
        attempts: f64,
        state: &str,
        last_status: f64,
        uncertain: Option<bool>,
    ) -> Option<Machine> {
        let uncertain = uncertain.unwrap_or(false);
        let fields =
            StoredFields { v, id, key, fingerprint, created_at, updated_at, attempts, state, last_status, uncertain };
        self.0.load(intent_id, &fields).map_or_else(refuse, |m| Some(Machine(m)))
    }

    /// The sweep's rule for one record: 0 keep, 1 remove, 2 now expired (save it, emit `expired`).
    pub fn sweep(&self, record: &mut Machine, now_ms: f64) -> u32 {
        self.0.sweep(&mut record.0, ms(now_ms)) as u32
    }
}

/// One intent's record and its `send` loop. Every event returns an action number
/// (1 SEND, 2 WAIT, 3 WAIT_ONLINE, 4 DONE, 5 FAIL); save the record first when `dirty()`.
#[wasm_bindgen]
pub struct Machine(m::Machine);

#[wasm_bindgen]
impl Machine {
    /// The idempotency key; with `header` true, the key header's value (raw, or sf-string if the
    /// engine says so). One export for both strings: each export costs its glue in the JavaScript
    /// users download.
    #[wasm_bindgen(js_name = key)]
    pub fn key_or_header(&self, header: Option<bool>) -> String {
        if header == Some(true) {
            self.0.header()
        } else {
            self.key()
        }
    }

    /// The driver saved the record.
    #[wasm_bindgen(js_name = markSaved)]
    pub fn mark_saved(&mut self) {
        self.0.mark_saved();
    }

    /// One number of the action's payload or outcome, by field (docs/WASM-BOUNDARY.md "Fields"):
    /// 0 timeoutMs, 1 delayMs, 2 reason, 3 attempt, 4 totalAttempts, 5 status, 6 ok, 7 replayed,
    /// 8 errorCode, 9 errorDetail, and of the record 10 createdAt, 11 updatedAt, 12 lastStatus (0 = none),
    /// 13 uncertain, 14 dirty, 15 state (0 pending, 1 succeeded, 2 failed, 3 expired) (booleans as 1/0;
    /// the record's attempts are field 4); NaN for any other
    /// field. One export instead of fifteen getters: each export costs its glue in the JavaScript users
    /// download.
    pub fn get(&self, field: u32) -> f64 {
        match field {
            0 => self.timeout_ms(),
            1 => self.delay_ms(),
            2 => self.reason().into(),
            3 => self.attempt().into(),
            4 => self.total_attempts().into(),
            5 => self.status().into(),
            6 => u8::from(self.ok()).into(),
            7 => u8::from(self.replayed()).into(),
            8 => self.error_code().into(),
            9 => self.error_detail().into(),
            10 => self.created_at(),
            11 => self.updated_at(),
            12 => self.last_status().into(),
            13 => u8::from(self.uncertain()).into(),
            14 => u8::from(self.dirty()).into(),
            15 => match self.0.record().state {
                m::record::State::Pending => 0.0,
                m::record::State::Succeeded => 1.0,
                m::record::State::Failed => 2.0,
                m::record::State::Expired => 3.0,
            },
            _ => f64::NAN,
        }
    }

    /// The attempt got an answer. `override_`: the caller's `shouldRetry(status)`: 0 none, 1 retry,
    /// 2 definite. Header values as `Headers.get` returns them (`undefined` when absent).
    #[wasm_bindgen(js_name = onResponse)]
    pub fn on_response(
        &mut self,
        now_ms: f64,
        status: u16,
        retry_after: Option<String>,
        stripe_should_retry: Option<String>,
        replayed: Option<String>,
        override_: u32,
    ) -> u32 {
        let answer = Answer {
            status,
            retry_after: retry_after.as_deref(),
            should_retry: stripe_should_retry.as_deref(),
            replayed: replayed.as_deref(),
            caller: Override::from_index(override_),
        };
        self.0.on_response(ms(now_ms), &answer) as u32
    }

    /// The server's key-status answer after RECONCILE: `kind` 0 could not ask, 1 done (`status`: the
    /// stored answer's), 2 in flight (`retryAfter`: the status answer's `Retry-After`), 3 unknown.
    #[wasm_bindgen(js_name = onKeyStatus)]
    pub fn on_key_status(&mut self, now_ms: f64, kind: u32, status: u16, retry_after: Option<String>) -> u32 {
        let answer = Answer { status, retry_after: retry_after.as_deref(), ..Answer::default() };
        self.0.on_key_status(ms(now_ms), m::KeyStatus::from_index(kind), &answer) as u32
    }

    /// An event of the send loop other than an answer, by number (docs/WASM-BOUNDARY.md "Events"):
    /// 0 start (deadline = now + totalTimeoutMs), 1 network error, 2 the attempt's timeout, 3 the
    /// caller aborted, 4 a WAIT elapsed, 5 the network came back (WAIT_ONLINE), 6 WAIT_ONLINE reached
    /// the deadline, 7 the app asks the server about the key (`reconcile()`, between sends). `online`
    /// is read by 0 and 4. Returns the action; 0 (no action) for an unknown event. One export instead
    /// of eight: each export costs its glue in the JavaScript users download.
    pub fn on(&mut self, event: u32, now_ms: f64, online: bool) -> u32 {
        match event {
            7 => self.0.ask(ms(now_ms)) as u32,
            0 => self.start(now_ms, online),
            1 => self.on_network_error(now_ms),
            2 => self.on_timeout(now_ms),
            3 => self.on_abort(now_ms),
            4 => self.on_wake(now_ms, online),
            5 => self.on_online(now_ms),
            6 => self.on_online_timeout(now_ms),
            _ => 0,
        }
    }
}

/// What the driver reaches through [`Machine::get`] and [`Machine::on`] (the Rust tests call these
/// directly): not exported one by one, so the JavaScript glue stays small.
impl Machine {
    /// The idempotency key.
    pub fn key(&self) -> String {
        String::from(self.0.record().key.as_str())
    }

    /// The key header's value (raw, or sf-string if the engine says so).
    pub fn header(&self) -> String {
        self.0.header()
    }

    /// The intent id.
    pub fn intent_id(&self) -> String {
        self.0.record().id.clone()
    }

    /// Whether `begin` resumed the stored intent (or `load` read it) rather than making a new one.
    pub fn resumed(&self) -> bool {
        self.0.resumed()
    }

    /// SEND: the attempt's timeout; WAIT_ONLINE: ms left until the deadline.
    pub fn timeout_ms(&self) -> f64 {
        self.0.timeout_ms() as f64
    }

    /// WAIT: how long to wait.
    pub fn delay_ms(&self) -> f64 {
        self.0.delay_ms() as f64
    }

    /// WAIT: why (1 network, 2 timeout, 3 status: see `lastStatus()`); 0 before any retry.
    pub fn reason(&self) -> u32 {
        self.0.reason().map_or(0, m::RetryReason::index)
    }

    /// Attempts of the current send, including the one in flight.
    pub fn attempt(&self) -> u32 {
        self.0.attempt()
    }

    /// Attempts across every send (= `attempts()`).
    pub fn total_attempts(&self) -> u32 {
        self.0.record().attempts
    }

    /// DONE: the answer's status.
    pub fn status(&self) -> u32 {
        self.0.status().into()
    }

    /// DONE: whether the status is 2xx.
    pub fn ok(&self) -> bool {
        self.0.ok()
    }

    /// DONE: whether the server said it replayed a stored answer.
    pub fn replayed(&self) -> bool {
        self.0.replayed()
    }

    /// FAIL: the error code.
    pub fn error_code(&self) -> u32 {
        self.0.error().code.into()
    }

    /// FAIL: the error's detail.
    pub fn error_detail(&self) -> u32 {
        self.0.error().detail.into()
    }

    /// Starts a send (deadline = now + totalTimeoutMs).
    pub fn start(&mut self, now_ms: f64, online: bool) -> u32 {
        self.0.start(ms(now_ms), online) as u32
    }

    /// The attempt failed below HTTP.
    pub fn on_network_error(&mut self, now_ms: f64) -> u32 {
        self.0.on_network_error(ms(now_ms)) as u32
    }

    /// The attempt's timeout fired.
    pub fn on_timeout(&mut self, now_ms: f64) -> u32 {
        self.0.on_timeout(ms(now_ms)) as u32
    }

    /// The caller aborted.
    pub fn on_abort(&mut self, now_ms: f64) -> u32 {
        self.0.on_abort(ms(now_ms)) as u32
    }

    /// A WAIT elapsed.
    pub fn on_wake(&mut self, now_ms: f64, online: bool) -> u32 {
        self.0.on_wake(ms(now_ms), online) as u32
    }

    /// The network came back during WAIT_ONLINE.
    pub fn on_online(&mut self, now_ms: f64) -> u32 {
        self.0.on_online(ms(now_ms)) as u32
    }

    /// WAIT_ONLINE reached the deadline offline.
    pub fn on_online_timeout(&mut self, now_ms: f64) -> u32 {
        self.0.on_online_timeout(ms(now_ms)) as u32
    }

    /// When the intent began (ms since the epoch).
    pub fn created_at(&self) -> f64 {
        self.0.record().created_at as f64
    }

    /// Last change (ms since the epoch).
    pub fn updated_at(&self) -> f64 {
        self.0.record().updated_at as f64
    }

    /// Attempts across every send, including earlier page loads.
    pub fn attempts(&self) -> u32 {
        self.0.record().attempts
    }

    /// The status of the last answer, 0 when there was none.
    pub fn last_status(&self) -> u32 {
        self.0.record().last_status.into()
    }

    /// Whether an attempt may have reached the server without a known outcome (stored as
    /// `uncertain`; on DONE with a 4xx the result says so).
    pub fn uncertain(&self) -> bool {
        self.0.uncertain()
    }

    /// Whether the record changed since the last `markSaved()`.
    pub fn dirty(&self) -> bool {
        self.0.dirty()
    }

    /// The request fingerprint.
    pub fn fingerprint(&self) -> String {
        self.0.record().fingerprint.clone()
    }

    /// `"pending" | "succeeded" | "failed" | "expired"`.
    pub fn state(&self) -> String {
        String::from(self.0.record().state.as_str())
    }
}
