//! The native tests' reference driver: what `src/js/` does, in Rust, over a virtual clock.
//!
//! It performs the machine's actions the way the TypeScript driver does (save when dirty, send,
//! wait, wait for the network) with fakes: a virtual clock, a seeded random source, a scripted
//! transport, an offline/abort schedule, an observer, and a store of JSON text (a twin of
//! localStorage, so tests can tamper with what is stored). The JSON codec here plays the driver's
//! `record.ts`: it checks the field types; the machine checks the values.
//!
//! Included by each `tests/core_*.rs` with `#[path = "core/support.rs"] mod support;`.
#![allow(dead_code)]

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use idempotent_fetch::contract::{record_fields, State, NO_STATUS, RECORD_SLOTS};
use idempotent_fetch::machine::error::{code, field};
use idempotent_fetch::machine::{
    Action, Answer, Engine, Jitter, KeyStatus, Machine, Override, Policy, RandomFailed, RandomSource, Record,
    RetryReason, StoredFields, Sweep,
};
use serde_json::{json, Value};

/// A realistic start time (2023-11-14T22:13:20Z), so HTTP dates make sense.
pub const T0: u64 = 1_700_000_000_000;
/// One hour in ms.
pub const HOUR: u64 = 60 * 60 * 1000;
/// A day in ms (Stripe's key retention; the default TTL).
pub const DAY: u64 = 24 * HOUR;
/// The "code" of a send that never finished (the page was closed with the request in flight).
pub const HUNG: u8 = 0;

// ---------------------------------------------------------------------------------------------
// Clock and shared event log

/// Milliseconds since the epoch, moved only by the fakes. Clones share the same time.
#[derive(Clone, Debug)]
pub struct VirtualClock(Rc<Cell<u64>>);

impl VirtualClock {
    pub fn at(ms: u64) -> Self {
        Self(Rc::new(Cell::new(ms)))
    }
    pub fn now(&self) -> u64 {
        self.0.get()
    }
    pub fn advance(&self, ms: u64) {
        self.0.set(self.0.get() + ms);
    }
    pub fn set(&self, ms: u64) {
        self.0.set(ms);
    }
}

/// What happened, in order (saves, sends, sleeps), shared by the fakes of one test.
#[derive(Clone, Debug, Default)]
pub struct EventLog(Rc<RefCell<Vec<String>>>);

impl EventLog {
    pub fn push(&self, event: impl Into<String>) {
        self.0.borrow_mut().push(event.into());
    }
    pub fn events(&self) -> Vec<String> {
        self.0.borrow().clone()
    }
    pub fn position(&self, prefix: &str) -> Option<usize> {
        self.0.borrow().iter().position(|e| e.starts_with(prefix))
    }
}

// ---------------------------------------------------------------------------------------------
// Randomness

/// xorshift64*: deterministic per seed. Test-only (production uses the CSPRNG).
#[derive(Clone, Debug)]
pub struct SeededRandom(Cell<u64>);

impl SeededRandom {
    pub fn new(seed: u64) -> Self {
        // Never zero (xorshift's fixed point); mix the seed so nearby seeds differ.
        Self(Cell::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1))
    }
}

impl RandomSource for SeededRandom {
    fn fill(&self, bytes: &mut [u8]) -> Result<(), RandomFailed> {
        for chunk in bytes.chunks_mut(8) {
            let mut x = self.0.get();
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.0.set(x);
            let value = x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
            chunk.copy_from_slice(&value[..chunk.len()]);
        }
        Ok(())
    }
}

/// Always returns the same value from `next_u64` (to pin jitter at an extreme).
#[derive(Clone, Debug)]
pub struct FixedRandom(pub u64);

impl RandomSource for FixedRandom {
    fn fill(&self, bytes: &mut [u8]) -> Result<(), RandomFailed> {
        let value = self.0.to_le_bytes();
        for chunk in bytes.chunks_mut(8) {
            chunk.copy_from_slice(&value[..chunk.len()]);
        }
        Ok(())
    }
}

/// Works for `good` draws, then fails (`crypto.getRandomValues` throwing).
#[derive(Debug)]
pub struct FailingRandom {
    pub good: Cell<usize>,
    pub inner: SeededRandom,
}

impl FailingRandom {
    pub fn after(good: usize) -> Self {
        Self { good: Cell::new(good), inner: SeededRandom::new(1) }
    }
}

impl RandomSource for FailingRandom {
    fn fill(&self, bytes: &mut [u8]) -> Result<(), RandomFailed> {
        match self.good.get() {
            0 => Err(RandomFailed),
            n => {
                self.good.set(n - 1);
                self.inner.fill(bytes)
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Waiting: backoff sleeps, offline periods, the caller's abort

/// Sleeps by advancing the virtual clock. Can be offline during a window of virtual time, and can
/// be aborted: after `abort_after_sleeps` sleeps, the next sleep (or offline wait) is aborted.
pub struct FakeWaiter {
    pub clock: VirtualClock,
    pub sleeps: RefCell<Vec<u64>>,
    /// `(asked max_ms, waited ms)` for every wait for the network.
    pub online_waits: RefCell<Vec<(u64, u64)>>,
    /// Offline while `offline_from <= now < offline_until`.
    pub offline_from: Cell<u64>,
    pub offline_until: Cell<u64>,
    pub abort_after_sleeps: Cell<Option<usize>>,
    pub log: EventLog,
}

impl FakeWaiter {
    pub fn new(clock: VirtualClock, log: EventLog) -> Self {
        Self {
            clock,
            sleeps: RefCell::default(),
            online_waits: RefCell::default(),
            offline_from: Cell::new(0),
            offline_until: Cell::new(0),
            abort_after_sleeps: Cell::new(None),
            log,
        }
    }

    /// Offline for the next `ms` of virtual time.
    pub fn go_offline_for(&self, ms: u64) {
        self.go_offline_between(self.clock.now(), self.clock.now() + ms);
    }

    /// Offline during `[from, until)` of virtual time.
    pub fn go_offline_between(&self, from: u64, until: u64) {
        self.offline_from.set(from);
        self.offline_until.set(until);
    }

    pub fn abort_after(&self, sleeps: usize) {
        self.abort_after_sleeps.set(Some(sleeps));
    }

    pub fn sleeps(&self) -> Vec<u64> {
        self.sleeps.borrow().clone()
    }

    pub fn is_online(&self) -> bool {
        let now = self.clock.now();
        !(self.offline_from.get() <= now && now < self.offline_until.get())
    }

    fn should_abort(&self) -> bool {
        self.abort_after_sleeps.get().is_some_and(|k| self.sleeps.borrow().len() >= k)
    }
}

// ---------------------------------------------------------------------------------------------
// Transport

/// A scripted HTTP answer.
#[derive(Clone, Debug)]
pub struct FakeResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

impl FakeResponse {
    pub fn new(status: u16) -> Self {
        Self { status, headers: Vec::new() }
    }
    pub fn with(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
    /// A header by case-insensitive name, as `Headers.get` does.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    /// This response as the driver hands it to the machine: the headers it reads by name and the
    /// caller's `shouldRetry(status)` verdict as an override.
    pub fn answer(&self, should_retry: Option<ShouldRetry<'_>>) -> Answer<'_> {
        let caller = match should_retry.and_then(|decide| decide(self.status)) {
            Some(true) => Override::Retry,
            Some(false) => Override::Definite,
            None => Override::None,
        };
        Answer {
            status: self.status,
            retry_after: self.header("retry-after"),
            should_retry: self.header("stripe-should-retry"),
            replayed: self.header("idempotent-replayed"),
            caller,
        }
    }
}

/// One scripted outcome.
#[derive(Clone, Debug)]
pub enum Step {
    Respond(FakeResponse),
    Network,
    Timeout,
    Aborted,
    /// Takes this long (virtual ms) and then answers; past the attempt's timeout it times out.
    Slow(u64, FakeResponse),
    /// Never completes (the page is closed while the request is in flight).
    Hang,
}

pub fn status(code: u16) -> Step {
    Step::Respond(FakeResponse::new(code))
}

pub fn status_with(code: u16, headers: &[(&str, &str)]) -> Step {
    let mut response = FakeResponse::new(code);
    for (name, value) in headers {
        response = response.with(name, value);
    }
    Step::Respond(response)
}

/// What the transport saw on one attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub key_header_value: String,
    pub attempt: u32,
    pub timeout_ms: u64,
    /// Virtual time when the attempt started.
    pub at_ms: u64,
}

/// Plays a script of outcomes, then repeats `fallback` (200 unless changed). Every attempt may
/// also take `latency_ms` of virtual time (capped by its timeout, past which it times out).
pub struct FakeTransport {
    pub clock: VirtualClock,
    pub script: RefCell<VecDeque<Step>>,
    pub fallback: RefCell<Step>,
    pub latency_ms: Cell<u64>,
    pub seen: RefCell<Vec<Seen>>,
    pub log: EventLog,
}

impl FakeTransport {
    pub fn new(clock: VirtualClock, log: EventLog) -> Self {
        Self {
            clock,
            script: RefCell::default(),
            fallback: RefCell::new(status(200)),
            latency_ms: Cell::new(0),
            seen: RefCell::default(),
            log,
        }
    }
    pub fn script(&self, steps: impl IntoIterator<Item = Step>) {
        self.script.borrow_mut().extend(steps);
    }
    pub fn always(&self, step: Step) {
        *self.fallback.borrow_mut() = step;
    }
    pub fn calls(&self) -> usize {
        self.seen.borrow().len()
    }
    pub fn keys(&self) -> Vec<String> {
        self.seen.borrow().iter().map(|s| s.key_header_value.clone()).collect()
    }
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.borrow().clone()
    }

    /// Sends one attempt: the scripted step after its latency (a timeout past `timeout_ms`).
    fn send(&self, header: String, attempt: u32, timeout_ms: u64) -> Step {
        self.seen.borrow_mut().push(Seen { key_header_value: header, attempt, timeout_ms, at_ms: self.clock.now() });
        self.log.push(format!("send attempt={attempt}"));
        let step = self.script.borrow_mut().pop_front().unwrap_or_else(|| self.fallback.borrow().clone());
        let (latency, step) = match step {
            Step::Slow(ms, response) => (ms, Step::Respond(response)),
            Step::Hang => return Step::Hang,
            other => (self.latency_ms.get(), other),
        };
        if latency > timeout_ms {
            self.clock.advance(timeout_ms);
            return Step::Timeout;
        }
        self.clock.advance(latency);
        step
    }
}

// ---------------------------------------------------------------------------------------------
// Observer (the driver's events)

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenRetry {
    pub key: String,
    pub attempt: u32,
    pub delay_ms: u64,
    pub reason: RetryReason,
    pub status: Option<u16>,
}

#[derive(Default)]
pub struct RecordingObserver {
    /// `(key, attempt, total_attempts)`.
    pub attempts: RefCell<Vec<(String, u32, u32)>>,
    /// The keys the machine asked the server about (RECONCILE), in order.
    pub asks: RefCell<Vec<String>>,
    pub retries: RefCell<Vec<SeenRetry>>,
    pub offline: RefCell<Vec<String>>,
}

impl RecordingObserver {
    pub fn retries(&self) -> Vec<SeenRetry> {
        self.retries.borrow().clone()
    }
}

// ---------------------------------------------------------------------------------------------
// Storage: JSON text per intent id, like localStorage

/// Records as JSON strings. Saves are logged and can start failing (quota, blocked storage).
#[derive(Clone, Default)]
pub struct JsonStore {
    pub raw: Rc<RefCell<BTreeMap<String, String>>>,
    pub log: EventLog,
    pub saves: Rc<Cell<usize>>,
    pub fail_after: Rc<Cell<Option<usize>>>,
}

/// Why the store could not give a record back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadError {
    /// Not JSON, or a field of the wrong type, missing or unknown (the driver's type check).
    Malformed(String),
    /// The machine rejected a value: `STORAGE` with this field.
    Field(u8),
}

impl JsonStore {
    pub fn new(log: EventLog) -> Self {
        Self { log, ..Self::default() }
    }
    pub fn raw(&self, id: &str) -> Option<String> {
        self.raw.borrow().get(id).cloned()
    }
    pub fn set_raw(&self, id: &str, text: &str) {
        self.raw.borrow_mut().insert(id.to_owned(), text.to_owned());
    }
    pub fn remove(&self, id: &str) {
        self.raw.borrow_mut().remove(id);
    }
    pub fn ids(&self) -> Vec<String> {
        self.raw.borrow().keys().cloned().collect()
    }
    /// Rewrites the stored JSON of `id` through `edit`.
    pub fn tamper(&self, id: &str, edit: impl FnOnce(&mut Value)) {
        let mut value: Value = serde_json::from_str(&self.raw(id).expect("stored")).expect("stored JSON");
        edit(&mut value);
        self.set_raw(id, &value.to_string());
    }
    /// The first `n` saves from now succeed, later ones fail.
    pub fn fail_saves_after(&self, n: usize) {
        self.fail_after.set(Some(self.saves.get() + n));
    }
    /// Saves a machine's record (the driver's encoder); `Err` when storage refuses.
    pub fn save(&self, machine: &Machine) -> Result<(), ()> {
        let record = machine.record();
        let n = self.saves.get();
        self.saves.set(n + 1);
        if self.fail_after.get().is_some_and(|limit| n >= limit) {
            self.log.push(format!("save FAILED attempts={}", record.attempts));
            return Err(());
        }
        self.log.push(format!("save attempts={} state={}", record.attempts, record.state.as_str()));
        self.set_raw(&record.id, &encode(machine));
        Ok(())
    }
    /// Loads `id` into a machine of `engine` (the driver's decoder, then `Engine::load`).
    pub fn load(&self, engine: &Engine, id: &str) -> Result<Option<Machine>, LoadError> {
        let Some(text) = self.raw(id) else { return Ok(None) };
        decode(engine, id, &text).map(Some)
    }
}

/// The record as the driver writes it (src/js/record.ts, `encodeRecord`, over the contract table):
/// each field from the machine's `Field` its row names, the version (1 here) and the ids the
/// driver's own, a state by name, an optional field only while it holds a value.
pub fn encode(machine: &Machine) -> String {
    let record = machine.record();
    let mut object = serde_json::Map::new();
    for row in record_fields() {
        let value = match row.read {
            None => match row.number {
                field::VERSION => json!(1),
                field::ID => json!(record.id),
                field::KEY => json!(record.key.as_str()),
                field::FINGERPRINT => json!(record.fingerprint),
                _ => panic!("the driver keeps no value for {}", row.name),
            },
            Some(read) => {
                let n = machine.field(read);
                if row.kind.ends_with('?') && n == 0.0 {
                    continue;
                }
                match row.kind.trim_end_matches('?') {
                    "string" => json!(State::from_u8(n as u8).expect("a state").text()),
                    "boolean" => json!(n == 1.0),
                    _ => json!(n as u64),
                }
            }
        };
        object.insert(row.name.to_owned(), value);
    }
    Value::Object(object).to_string()
}

/// The driver's type check (JSON, an object, the table's fields and their JSON types), then the
/// machine (src/js/record.ts, `decodeRecord`).
pub fn decode(engine: &Engine, id: &str, text: &str) -> Result<Machine, LoadError> {
    let malformed = |what: &str| LoadError::Malformed(what.to_owned());
    let value: Value = serde_json::from_str(text).map_err(|_| malformed("not JSON"))?;
    let object = value.as_object().ok_or_else(|| malformed("not an object"))?;
    if let Some(unknown) = object.keys().find(|k| k.as_str() != "request" && !record_fields().any(|row| row.name == *k))
    {
        return Err(LoadError::Malformed(format!("unknown field {unknown}")));
    }
    let mut strings = BTreeMap::new();
    let mut numbers = [0.0; RECORD_SLOTS];
    for row in record_fields() {
        let slot = usize::from(row.number);
        match (object.get(row.name), row.kind) {
            (None | Some(Value::Null), "number?") => numbers[slot] = f64::from(NO_STATUS),
            (None | Some(Value::Null), "boolean?") => numbers[slot] = 0.0,
            (Some(Value::String(text)), "string") => {
                // The state crosses as its index (the driver's `STATES.indexOf`, -1 unknown).
                if row.number == field::STATE {
                    numbers[slot] = State::ALL.iter().position(|s| s.text() == text).map_or(-1.0, |i| i as f64);
                }
                strings.insert(row.number, text.as_str());
            }
            (Some(Value::Number(n)), "number" | "number?") => {
                numbers[slot] = n.as_f64().ok_or_else(|| malformed(row.name))?
            }
            (Some(Value::Bool(b)), "boolean?") => numbers[slot] = f64::from(u8::from(*b)),
            _ => return Err(malformed(row.name)),
        }
    }
    let string = |number| strings.get(&number).copied().unwrap_or_default();
    let fields = StoredFields::from_slots(string(field::ID), string(field::KEY), string(field::FINGERPRINT), &numbers);
    engine.load(id, &fields).map_err(|e| {
        assert_eq!(e.code, code::STORAGE, "load throws only STORAGE");
        LoadError::Field(e.detail)
    })
}

// ---------------------------------------------------------------------------------------------
// Outcomes as the driver reports them

/// A definite answer (the driver resolves with the Response).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Done {
    pub status: u16,
    pub ok: bool,
    pub replayed: bool,
    /// Attempts made by this `send`.
    pub attempts: u32,
    pub key: String,
    /// An earlier attempt may have reached the server: the app must reconcile.
    pub uncertain: bool,
}

/// An error (the driver rejects with `IdempotentFetchError`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub code: u8,
    pub detail: u8,
    pub key: Option<String>,
    /// Attempts made by this `send`.
    pub attempts: u32,
    pub last_status: Option<u16>,
}

impl Failure {
    fn new(code: u8, detail: u8) -> Self {
        Self { code, detail, key: None, attempts: 0, last_status: None }
    }
    fn of(machine: &Machine) -> Self {
        let error = machine.error();
        Self {
            code: error.code,
            detail: error.detail,
            key: Some(machine.record().key.as_str().to_owned()),
            attempts: machine.attempt(),
            last_status: status_of(machine.record()),
        }
    }
}

/// `lastStatus` as an option.
pub fn status_of(record: &Record) -> Option<u16> {
    (record.last_status != 0).then_some(record.last_status)
}

/// The caller's `shouldRetry(status)`: `Some(true)` retry, `Some(false)` definite, `None` default.
pub type ShouldRetry<'a> = &'a dyn Fn(u16) -> Option<bool>;

// ---------------------------------------------------------------------------------------------
// The rig: one "page load" of a client

/// An engine and the driver's fakes over a virtual clock. `reload()` makes a new page load over
/// the same store and clock (fresh engine and budget, transport, waiter, observer).
pub struct Rig {
    pub clock: VirtualClock,
    pub log: EventLog,
    pub store: JsonStore,
    pub waiter: FakeWaiter,
    pub transport: FakeTransport,
    pub observer: RecordingObserver,
    /// The policy the engine is made with (on first use; change it before begin/send).
    pub policy: Policy,
    pub seed: u64,
    /// Replaces the seeded random source when set before first use.
    pub random: RefCell<Option<Box<dyn RandomSource>>>,
    /// The server's key-status answers, one per RECONCILE: `(status, the stored answer's status or
    /// the Retry-After seconds)`; none left: could not ask.
    pub key_statuses: RefCell<VecDeque<(KeyStatus, u16)>>,
    engine: RefCell<Option<Rc<Engine>>>,
}

/// A deterministic policy for machine tests: no jitter, so delays are exactly the schedule.
pub fn plain_policy() -> Policy {
    Policy { jitter: Jitter::None, ..Policy::default() }
}

impl Rig {
    /// A fresh client over an empty store, seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        let log = EventLog::default();
        Self::with_store(seed, VirtualClock::at(T0), log.clone(), JsonStore::new(log))
    }

    /// A new page load over the same storage and clock (same policy).
    pub fn reload(&self, seed: u64) -> Self {
        let mut rig = Self::with_store(seed, self.clock.clone(), self.log.clone(), self.store.clone());
        rig.policy = self.policy.clone();
        rig
    }

    pub fn with_store(seed: u64, clock: VirtualClock, log: EventLog, store: JsonStore) -> Self {
        Self {
            waiter: FakeWaiter::new(clock.clone(), log.clone()),
            transport: FakeTransport::new(clock.clone(), log.clone()),
            clock,
            log,
            store,
            observer: RecordingObserver::default(),
            policy: plain_policy(),
            seed,
            random: RefCell::new(None),
            key_statuses: RefCell::new(VecDeque::new()),
            engine: RefCell::new(None),
        }
    }

    /// The page's engine (made on first use from `policy`).
    pub fn engine(&self) -> Rc<Engine> {
        self.engine
            .borrow_mut()
            .get_or_insert_with(|| {
                let random = self.random.borrow_mut().take().unwrap_or_else(|| Box::new(SeededRandom::new(self.seed)));
                Rc::new(Engine::new(self.policy.clone(), random).expect("valid test policy"))
            })
            .clone()
    }

    pub fn budget(&self) -> u32 {
        self.engine().budget()
    }

    /// `client.begin`: load what is stored, create or resume, save when the machine says so.
    pub fn begin(&self, id: &str, fingerprint: &str) -> Result<Record, Failure> {
        self.begin_with(id, fingerprint, false)
    }

    pub fn begin_with(&self, id: &str, fingerprint: &str, replace: bool) -> Result<Record, Failure> {
        self.begin_keyed(id, fingerprint, None, replace)
    }

    /// `client.begin(id, request, { key, replace })`: as `begin_with`, with a key the app brings,
    /// through the engine's `begin_from` (no claim).
    pub fn begin_brought(&self, id: &str, fingerprint: &str, key: &str, replace: bool) -> Result<Record, Failure> {
        self.begin_keyed(id, fingerprint, Some(key), replace)
    }

    /// Load what is stored, create or resume (with the brought key, if any), save when the machine says so.
    fn begin_keyed(
        &self,
        id: &str,
        fingerprint: &str,
        brought: Option<&str>,
        replace: bool,
    ) -> Result<Record, Failure> {
        let engine = self.engine();
        let stored = if replace { None } else { self.load_machine(id)? };
        let stored_key = stored.as_ref().map(|m| m.record().key.as_str().to_owned());
        let now = self.clock.now();
        let begun = match brought {
            Some(key) => {
                engine.begin_from(id, fingerprint, fingerprint, now, replace, Some(key), stored.as_ref(), None)
            }
            None => engine.begin(id, fingerprint, now, replace, stored.as_ref()),
        };
        let machine = begun.map_err(|e| {
            let mut failure = Failure::new(e.code, e.detail);
            failure.key = stored_key;
            failure
        })?;
        if machine.dirty() {
            self.store.save(&machine).map_err(|()| Failure::new(code::STORAGE, 0))?;
        }
        Ok(machine.record().clone())
    }

    /// Begins `id` with the standard checkout request and returns its key.
    pub fn begin_checkout(&self, id: &str) -> String {
        self.begin(id, &checkout()).expect("begin").key.as_str().to_owned()
    }

    fn load_machine(&self, id: &str) -> Result<Option<Machine>, Failure> {
        self.store.load(&self.engine(), id).map_err(|e| match e {
            LoadError::Malformed(_) => Failure::new(code::STORAGE, 0),
            LoadError::Field(detail) => Failure::new(code::STORAGE, detail),
        })
    }

    /// `client.send(id)` with no `shouldRetry`.
    pub fn send(&self, id: &str) -> Result<Done, Failure> {
        self.send_with(id, None)
    }

    /// `client.send(id)`: load the record, then perform the machine's actions until DONE or FAIL.
    pub fn send_with(&self, id: &str, should_retry: Option<ShouldRetry<'_>>) -> Result<Done, Failure> {
        let Some(mut machine) = self.load_machine(id)? else {
            return Err(Failure::new(code::NOT_FOUND, 0));
        };
        let action = machine.start(self.clock.now(), self.waiter.is_online());
        self.drive(&mut machine, action, should_retry)
    }

    /// The driver's loop.
    pub fn drive(
        &self,
        machine: &mut Machine,
        mut action: Action,
        should_retry: Option<ShouldRetry<'_>>,
    ) -> Result<Done, Failure> {
        loop {
            if machine.dirty() {
                let saved = self.store.save(machine);
                machine.mark_saved();
                // Before an attempt or a retry a failed save stops the send (an attempt that cannot
                // be recorded is not made); after a definite answer or an error, that outcome wins.
                if saved.is_err() && matches!(action, Action::Send | Action::Wait | Action::WaitOnline) {
                    let mut failure = Failure::of(machine);
                    failure.code = code::STORAGE;
                    failure.detail = 0;
                    return Err(failure);
                }
            }
            let key = machine.record().key.as_str().to_owned();
            action = match action {
                Action::Send => {
                    self.observer.attempts.borrow_mut().push((key, machine.attempt(), machine.record().attempts));
                    match self.transport.send(machine.header(), machine.attempt(), machine.timeout_ms()) {
                        Step::Hang => return Err(Failure::new(HUNG, 0)),
                        Step::Respond(response) => {
                            machine.on_response(self.clock.now(), &response.answer(should_retry))
                        }
                        Step::Network => machine.on_network_error(self.clock.now()),
                        Step::Timeout => machine.on_timeout(self.clock.now()),
                        Step::Aborted => machine.on_abort(self.clock.now()),
                        Step::Slow(..) => unreachable!("resolved by the transport"),
                    }
                }
                Action::Reconcile => {
                    self.observer.asks.borrow_mut().push(key);
                    self.log.push("reconcile");
                    let (kind, n) = self.key_statuses.borrow_mut().pop_front().unwrap_or((KeyStatus::CouldNotAsk, 0));
                    let seconds = n.to_string();
                    let answer = match kind {
                        KeyStatus::InFlight => Answer { retry_after: Some(&seconds), ..Answer::default() },
                        _ => Answer { status: n, ..Answer::default() },
                    };
                    machine.on_key_status(self.clock.now(), kind, &answer)
                }
                Action::Wait => {
                    let reason = machine.reason().expect("a WAIT has a reason");
                    let status = matches!(reason, RetryReason::Status(_)).then(|| machine.record().last_status);
                    let delay_ms = machine.delay_ms();
                    self.observer.retries.borrow_mut().push(SeenRetry {
                        key,
                        attempt: machine.attempt(),
                        delay_ms,
                        reason,
                        status,
                    });
                    if self.waiter.should_abort() {
                        self.log.push("sleep interrupted");
                        machine.on_abort(self.clock.now())
                    } else {
                        self.waiter.sleeps.borrow_mut().push(delay_ms);
                        self.log.push(format!("sleep {delay_ms}"));
                        self.clock.advance(delay_ms);
                        machine.on_wake(self.clock.now(), self.waiter.is_online())
                    }
                }
                Action::WaitOnline => {
                    self.observer.offline.borrow_mut().push(key);
                    if self.waiter.should_abort() {
                        self.log.push("wait_online interrupted");
                        machine.on_abort(self.clock.now())
                    } else {
                        let max_ms = machine.timeout_ms();
                        let needed = self.waiter.offline_until.get().saturating_sub(self.clock.now());
                        let waited = needed.min(max_ms);
                        self.clock.advance(waited);
                        self.waiter.online_waits.borrow_mut().push((max_ms, waited));
                        self.log.push(format!("wait_online {waited}"));
                        if self.waiter.is_online() {
                            machine.on_online(self.clock.now())
                        } else {
                            machine.on_online_timeout(self.clock.now())
                        }
                    }
                }
                Action::Done => {
                    return Ok(Done {
                        status: machine.status(),
                        ok: machine.ok(),
                        replayed: machine.replayed(),
                        attempts: machine.attempt(),
                        key,
                        uncertain: machine.uncertain(),
                    })
                }
                Action::Fail => return Err(Failure::of(machine)),
            };
        }
    }

    /// `client.sweep()`: every stored record through the machine's rule; corrupt ones are left alone.
    /// Returns `(removed, newly_expired)`.
    pub fn sweep(&self) -> (u32, u32) {
        let engine = self.engine();
        let (mut removed, mut expired) = (0, 0);
        for id in self.store.ids() {
            let Ok(Some(mut machine)) = self.store.load(&engine, &id) else { continue };
            match engine.sweep(&mut machine, self.clock.now()) {
                Sweep::Keep => {}
                Sweep::Remove => {
                    self.store.remove(&id);
                    removed += 1;
                }
                Sweep::Expired => {
                    self.store.save(&machine).expect("save");
                    expired += 1;
                }
            }
        }
        (removed, expired)
    }

    /// The stored record of `id` (through the driver's decoder and the machine's checks).
    pub fn load(&self, id: &str) -> Result<Option<Record>, LoadError> {
        Ok(self.store.load(&self.engine(), id)?.map(|m| m.record().clone()))
    }

    /// The stored record of `id`, which must exist and be valid.
    pub fn record(&self, id: &str) -> Record {
        self.load(id).expect("load").expect("record stored")
    }
}

/// The standard request of these tests (a fingerprint as the driver computes it: 64 hex digits).
pub fn checkout() -> String {
    "a1".repeat(32)
}

/// The same intent with a changed body (the user edited the cart).
pub fn changed_checkout() -> String {
    "b2".repeat(32)
}

/// A STORAGE field detail, for readable assertions.
pub const FIELD_KEY: u8 = field::KEY;
