//! Shared fakes for the native core tests: a virtual clock, a waiter that sleeps instantly, a
//! scripted transport, a seeded RNG, a recording observer and stores that record, fail or hold
//! raw JSON (a twin of localStorage, so tests can tamper with what is stored).
//!
//! Included by each `tests/core_*.rs` with `#[path = "core/support.rs"] mod support;`.
#![allow(dead_code)]

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use idempotent_fetch::legacy::ports::{
    AttemptEvent, AttemptRequest, Clock, HttpResponse, IntentStore, Interrupted, Observer, RandomSource, RetryEvent,
    StoreError, Transport, TransportError, Waiter,
};
use idempotent_fetch::legacy::{
    begin, send, BeginOptions, Definite, Fingerprint, IntentRecord, KeyHeaderForm, MemoryStore, RetryBudget,
    RetryPolicy, SendContext, SendError, ShouldRetryOverride,
};

/// A realistic start time (2023-11-14T22:13:20Z), so HTTP dates make sense.
pub const T0: u64 = 1_700_000_000_000;
/// One hour in ms.
pub const HOUR: u64 = 60 * 60 * 1000;
/// A day in ms (Stripe's key retention; the default TTL).
pub const DAY: u64 = 24 * HOUR;

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

impl Clock for VirtualClock {
    fn now_ms(&self) -> u64 {
        self.now()
    }
}

/// An ordered log shared by the fakes, to check what happened before what.
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
// Waiter

/// Sleeps by advancing the virtual clock. Can be offline until a virtual time, and can be
/// aborted: after `abort_after_sleeps` successful sleeps, the next sleep (or offline wait) is
/// `Interrupted`.
pub struct FakeWaiter {
    pub clock: VirtualClock,
    pub sleeps: RefCell<Vec<u64>>,
    /// `(asked max_ms, waited ms)` for every `wait_online`.
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

    fn should_abort(&self) -> bool {
        self.abort_after_sleeps.get().is_some_and(|k| self.sleeps.borrow().len() >= k)
    }
}

impl Waiter for FakeWaiter {
    async fn sleep(&self, ms: u64) -> Result<(), Interrupted> {
        if self.should_abort() {
            self.log.push("sleep interrupted");
            return Err(Interrupted);
        }
        self.sleeps.borrow_mut().push(ms);
        self.log.push(format!("sleep {ms}"));
        self.clock.advance(ms);
        Ok(())
    }

    fn is_online(&self) -> bool {
        let now = self.clock.now();
        !(self.offline_from.get() <= now && now < self.offline_until.get())
    }

    async fn wait_online(&self, max_ms: u64) -> Result<bool, Interrupted> {
        if self.should_abort() {
            self.log.push("wait_online interrupted");
            return Err(Interrupted);
        }
        let needed = if self.is_online() { 0 } else { self.offline_until.get() - self.clock.now() };
        let waited = needed.min(max_ms);
        self.clock.advance(waited);
        self.online_waits.borrow_mut().push((max_ms, waited));
        self.log.push(format!("wait_online {waited}"));
        Ok(self.is_online())
    }
}

// ---------------------------------------------------------------------------------------------
// Transport

/// A response: a status and headers (looked up case-insensitively).
#[derive(Clone, Debug, PartialEq, Eq)]
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
}

impl HttpResponse for FakeResponse {
    fn status(&self) -> u16 {
        self.status
    }
    fn header(&self, name: &str) -> Option<String> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone())
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
}

impl Transport for FakeTransport {
    type Response = FakeResponse;

    async fn send(&self, attempt: AttemptRequest<'_>) -> Result<FakeResponse, TransportError> {
        let at_ms = self.clock.now();
        self.seen.borrow_mut().push(Seen {
            key_header_value: attempt.key_header_value.to_owned(),
            attempt: attempt.attempt,
            timeout_ms: attempt.timeout_ms,
            at_ms,
        });
        self.log.push(format!("send attempt={}", attempt.attempt));
        let step = self.script.borrow_mut().pop_front().unwrap_or_else(|| self.fallback.borrow().clone());
        if matches!(step, Step::Hang) {
            std::future::pending::<()>().await;
        }
        let (latency, step) = match step {
            Step::Slow(ms, response) => (ms, Step::Respond(response)),
            other => (self.latency_ms.get(), other),
        };
        if latency > attempt.timeout_ms {
            self.clock.advance(attempt.timeout_ms);
            return Err(TransportError::Timeout);
        }
        self.clock.advance(latency);
        match step {
            Step::Respond(response) => Ok(response),
            Step::Network => Err(TransportError::Network("connection reset".into())),
            Step::Timeout => Err(TransportError::Timeout),
            Step::Aborted => Err(TransportError::Aborted),
            Step::Slow(..) | Step::Hang => unreachable!(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Randomness

/// xorshift64*: deterministic per seed. Test-only (production uses the CSPRNG).
#[derive(Clone, Debug)]
pub struct SeededRandom(u64);

impl SeededRandom {
    pub fn new(seed: u64) -> Self {
        // Never zero (xorshift's fixed point); mix the seed so nearby seeds differ.
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
}

impl RandomSource for SeededRandom {
    fn fill(&mut self, bytes: &mut [u8]) -> Result<(), getrandom::Error> {
        for chunk in bytes.chunks_mut(8) {
            let mut x = self.0;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.0 = x;
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
    fn fill(&mut self, bytes: &mut [u8]) -> Result<(), getrandom::Error> {
        let value = self.0.to_le_bytes();
        for chunk in bytes.chunks_mut(8) {
            chunk.copy_from_slice(&value[..chunk.len()]);
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Observer

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenRetry {
    pub key: String,
    pub attempt: u32,
    pub delay_ms: u64,
    pub reason: String,
    pub status: Option<u16>,
}

#[derive(Default)]
pub struct RecordingObserver {
    /// `(key, attempt, total_attempts)`.
    pub attempts: RefCell<Vec<(String, u32, u32)>>,
    pub retries: RefCell<Vec<SeenRetry>>,
    pub offline: RefCell<Vec<String>>,
}

impl RecordingObserver {
    pub fn retries(&self) -> Vec<SeenRetry> {
        self.retries.borrow().clone()
    }
}

impl Observer for RecordingObserver {
    fn on_attempt(&self, event: &AttemptEvent<'_>) {
        self.attempts.borrow_mut().push((event.key.to_owned(), event.attempt, event.total_attempts));
    }
    fn on_retry(&self, event: &RetryEvent<'_>) {
        self.retries.borrow_mut().push(SeenRetry {
            key: event.key.to_owned(),
            attempt: event.attempt,
            delay_ms: event.delay_ms,
            reason: event.reason.to_owned(),
            status: event.status,
        });
    }
    fn on_offline(&self, key: &str) {
        self.offline.borrow_mut().push(key.to_owned());
    }
}

// ---------------------------------------------------------------------------------------------
// Stores

/// A MemoryStore that logs every save into the event log and can start failing: the first
/// `fail_after` saves succeed, later ones fail with `Unavailable`.
#[derive(Clone)]
pub struct RecordingStore {
    pub inner: MemoryStore,
    pub log: EventLog,
    pub saves: Rc<Cell<usize>>,
    pub fail_after: Rc<Cell<Option<usize>>>,
}

impl RecordingStore {
    pub fn new(inner: MemoryStore, log: EventLog) -> Self {
        Self { inner, log, saves: Rc::default(), fail_after: Rc::default() }
    }
    pub fn fail_saves_after(&self, n: usize) {
        self.fail_after.set(Some(self.saves.get() + n));
    }
}

impl IntentStore for RecordingStore {
    async fn load(&self, intent_id: &str) -> Result<Option<IntentRecord>, StoreError> {
        self.inner.load(intent_id).await
    }
    async fn save(&self, record: &IntentRecord) -> Result<(), StoreError> {
        let n = self.saves.get();
        self.saves.set(n + 1);
        if self.fail_after.get().is_some_and(|limit| n >= limit) {
            self.log.push(format!("save FAILED attempts={}", record.attempts));
            return Err(StoreError::Unavailable("QuotaExceededError".into()));
        }
        self.log.push(format!("save attempts={} state={}", record.attempts, record.state.as_str()));
        self.inner.save(record).await
    }
    async fn remove(&self, intent_id: &str) -> Result<(), StoreError> {
        self.inner.remove(intent_id).await
    }
    async fn list(&self) -> Result<Vec<IntentRecord>, StoreError> {
        self.inner.list().await
    }
}

/// Records as JSON strings, like localStorage: tests can tamper with the raw text. Reads parse
/// with serde_json and validate, so a tampered entry is `Corrupt`.
#[derive(Clone, Default)]
pub struct JsonStore {
    pub raw: Rc<RefCell<BTreeMap<String, String>>>,
}

impl JsonStore {
    pub fn raw(&self, id: &str) -> Option<String> {
        self.raw.borrow().get(id).cloned()
    }
    pub fn set_raw(&self, id: &str, text: &str) {
        self.raw.borrow_mut().insert(id.to_owned(), text.to_owned());
    }
    /// Rewrites the stored JSON of `id` through `edit`.
    pub fn tamper(&self, id: &str, edit: impl FnOnce(&mut serde_json::Value)) {
        let mut value: serde_json::Value = serde_json::from_str(&self.raw(id).expect("stored")).unwrap();
        edit(&mut value);
        self.set_raw(id, &value.to_string());
    }
    fn parse(id: &str, text: &str) -> Result<IntentRecord, StoreError> {
        use idempotent_fetch::legacy::RecordError;
        let record: IntentRecord =
            serde_json::from_str(text).map_err(|e| StoreError::Corrupt(RecordError::Malformed(e.to_string())))?;
        record.validate(Some(id))?;
        Ok(record)
    }
}

impl IntentStore for JsonStore {
    async fn load(&self, intent_id: &str) -> Result<Option<IntentRecord>, StoreError> {
        match self.raw(intent_id) {
            Some(text) => Self::parse(intent_id, &text).map(Some),
            None => Ok(None),
        }
    }
    async fn save(&self, record: &IntentRecord) -> Result<(), StoreError> {
        let text = serde_json::to_string(record).map_err(|e| StoreError::Unavailable(e.to_string()))?;
        self.raw.borrow_mut().insert(record.id.clone(), text);
        Ok(())
    }
    async fn remove(&self, intent_id: &str) -> Result<(), StoreError> {
        self.raw.borrow_mut().remove(intent_id);
        Ok(())
    }
    async fn list(&self) -> Result<Vec<IntentRecord>, StoreError> {
        let raw = self.raw.borrow().clone();
        Ok(raw.iter().filter_map(|(id, text)| Self::parse(id, text).ok()).collect())
    }
}

// ---------------------------------------------------------------------------------------------
// The rig: one "page load" of a client

/// Everything `begin`/`send` need, wired together over a virtual clock. `reload()` makes a new
/// page load over the same store and clock (fresh transport, waiter, budget, observer).
pub struct Rig<S = RecordingStore> {
    pub clock: VirtualClock,
    pub log: EventLog,
    pub store: S,
    pub waiter: FakeWaiter,
    pub transport: FakeTransport,
    pub random: RefCell<SeededRandom>,
    pub budget: RefCell<RetryBudget>,
    pub observer: RecordingObserver,
    pub policy: RetryPolicy,
    pub key_ttl_ms: u64,
    pub header_form: KeyHeaderForm,
}

/// A deterministic policy for engine tests: no jitter, so delays are exactly the schedule.
pub fn plain_policy() -> RetryPolicy {
    RetryPolicy { jitter: idempotent_fetch::legacy::Jitter::None, ..RetryPolicy::default() }
}

impl Rig<RecordingStore> {
    /// A fresh client over an empty recording memory store, seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        let log = EventLog::default();
        let store = RecordingStore::new(MemoryStore::new(), log.clone());
        Self::with_store(seed, VirtualClock::at(T0), log, store)
    }

    /// A new page load over the same storage and clock.
    pub fn reload(&self, seed: u64) -> Self {
        let store = RecordingStore::new(self.store.inner.clone(), self.log.clone());
        let mut rig = Self::with_store(seed, self.clock.clone(), self.log.clone(), store);
        rig.policy = self.policy.clone();
        rig.key_ttl_ms = self.key_ttl_ms;
        rig
    }

    pub fn memory(&self) -> &MemoryStore {
        &self.store.inner
    }
}

impl<S: IntentStore> Rig<S> {
    pub fn with_store(seed: u64, clock: VirtualClock, log: EventLog, store: S) -> Self {
        Self {
            waiter: FakeWaiter::new(clock.clone(), log.clone()),
            transport: FakeTransport::new(clock.clone(), log.clone()),
            clock,
            log,
            store,
            random: RefCell::new(SeededRandom::new(seed)),
            budget: RefCell::new(RetryBudget::default()),
            observer: RecordingObserver::default(),
            policy: plain_policy(),
            key_ttl_ms: DAY,
            header_form: KeyHeaderForm::Raw,
        }
    }

    pub fn options(&self) -> BeginOptions {
        BeginOptions { key_ttl_ms: self.key_ttl_ms, ..BeginOptions::default() }
    }

    pub fn begin(&self, id: &str, fingerprint: &Fingerprint) -> Result<IntentRecord, SendError> {
        self.begin_with(id, fingerprint, &self.options())
    }

    pub fn begin_with(
        &self,
        id: &str,
        fingerprint: &Fingerprint,
        options: &BeginOptions,
    ) -> Result<IntentRecord, SendError> {
        futures::executor::block_on(begin(&self.store, &self.clock, &self.random, id, fingerprint, options))
    }

    pub fn send(&self, id: &str) -> Result<Definite<FakeResponse>, SendError> {
        self.send_with(id, None)
    }

    pub fn send_with(
        &self,
        id: &str,
        should_retry: Option<ShouldRetryOverride<'_>>,
    ) -> Result<Definite<FakeResponse>, SendError> {
        let ctx = SendContext {
            transport: &self.transport,
            store: &self.store,
            waiter: &self.waiter,
            clock: &self.clock,
            random: &self.random,
            budget: &self.budget,
            observer: &self.observer,
            policy: &self.policy,
            key_ttl_ms: self.key_ttl_ms,
            header_form: self.header_form,
            should_retry,
        };
        futures::executor::block_on(send(&ctx, id))
    }

    /// Begins `id` with the standard checkout request and returns its key.
    pub fn begin_checkout(&self, id: &str) -> String {
        self.begin(id, &checkout()).expect("begin").key
    }

    pub fn load(&self, id: &str) -> Result<Option<IntentRecord>, StoreError> {
        futures::executor::block_on(self.store.load(id))
    }

    pub fn record(&self, id: &str) -> IntentRecord {
        self.load(id).expect("load").expect("record stored")
    }
}

/// The standard request of these tests.
pub fn checkout() -> Fingerprint {
    Fingerprint::of("POST", "/api/orders", br#"{"cart":"42","amount":1999}"#)
}

/// The same intent with a changed body (the user edited the cart).
pub fn changed_checkout() -> Fingerprint {
    Fingerprint::of("POST", "/api/orders", br#"{"cart":"42","amount":2999}"#)
}
