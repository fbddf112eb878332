//! The machine: one intent's record and its `send` loop, as a synchronous state machine.
//!
//! The driver feeds it events (start, an answer, a network error, a timeout, an abort, a wake-up,
//! the network coming back) with the current time, and performs the [`Action`] each event returns.
//! Rules it keeps (docs/ARCHITECTURE.md, "The protocol, client side"):
//! - the key never changes across attempts or page loads (it is only made by `Engine::begin`);
//! - the record is saved before every attempt and after every outcome (`dirty()` says when);
//! - a definite answer retires the key (state `succeeded` / `failed`);
//! - exhausted attempts, the deadline, the budget and an abort leave the intent `pending` with its key;
//! - an intent older than the key TTL is never re-sent silently (`EXPIRED`).

use alloc::rc::Rc;
use alloc::string::String;

use super::backoff::{uniform, Backoff, NoDelay};
use super::budget::RetryBudget;
use super::classify::{classify, is_replayed, Answer, Classification, FailureReason, RetryReason};
use super::error::{code, exhausted, field, protocol, Error};
use super::policy::Jitter;
use super::reconcile::Asked;
use super::record::{Record, State};
use super::shared::Shared;
use crate::contract::Resumed;

pub use crate::contract::Action;

/// Where the send loop stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No send running (before `start`, or after DONE / FAIL).
    Idle,
    /// An attempt is in flight.
    Sending,
    /// A backoff wait is running.
    Waiting,
    /// Waiting for the network to come back.
    Offline,
    /// Asking the server about the key.
    Reconciling,
}

/// One intent: its record, and the state of the `send` running on it.
pub struct Machine {
    pub(crate) shared: Rc<Shared>,
    pub(crate) record: Record,
    dirty: bool,
    resumed: Resumed,
    pub(crate) phase: Phase,
    /// Attempts sent by the current `send`.
    attempt: u32,
    pub(crate) deadline: u64,
    backoff: Backoff,
    last_retry_cost: Option<u32>,
    pub(crate) timeout_ms: u64,
    /// When the attempt in flight is given up (its start plus `timeout_ms`).
    attempt_ends: u64,
    delay_ms: u64,
    reason: Option<RetryReason>,
    pub(crate) status: u16,
    ok: bool,
    pub(crate) replayed: bool,
    error: Error,
    /// RECONCILE: what the machine would report without the server's answer.
    pub(crate) asked: Option<Asked>,
    /// The server was asked in this send (it is asked once, where the send would give up).
    pub(crate) reconciled: bool,
    /// After this WAIT, ask again instead of sending (a key past its lifetime still in flight).
    pub(crate) ask_after_wait: bool,
}

impl Machine {
    #[inline(never)] // one copy for begin and load (measured: docs/WASM-BOUNDARY.md, "Size")
    pub(crate) fn new(shared: Rc<Shared>, record: Record, dirty: bool, resumed: Resumed) -> Self {
        let backoff = Backoff::new(&shared.policy);
        Self {
            shared,
            record,
            dirty,
            resumed,
            phase: Phase::Idle,
            attempt: 0,
            deadline: 0,
            backoff,
            last_retry_cost: None,
            timeout_ms: 0,
            attempt_ends: 0,
            delay_ms: 0,
            reason: None,
            status: 0,
            ok: false,
            replayed: false,
            error: Error::new(0, 0),
            asked: None,
            reconciled: false,
            ask_after_wait: false,
        }
    }

    // --- the record -------------------------------------------------------------------------

    /// The record (for encoding and for `IntentInfo`).
    pub fn record(&self) -> &Record {
        &self.record
    }

    pub(crate) fn record_mut(&mut self) -> &mut Record {
        &mut self.record
    }

    pub(crate) fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    /// Whether the record changed since the last [`Machine::mark_saved`]: save it before acting.
    pub fn dirty(&self) -> bool {
        self.dirty
    }

    /// The driver saved the record.
    pub fn mark_saved(&mut self) {
        self.dirty = false;
    }

    /// Whether this machine holds a stored intent (resumed) rather than a new one.
    pub fn resumed(&self) -> bool {
        self.resumed != Resumed::New
    }

    /// Which record this machine resumed: none (a new key), the stored one or the claim.
    pub fn resumed_from(&self) -> Resumed {
        self.resumed
    }

    /// The key header value: the raw key, or the sf-string form if the engine is configured so.
    pub fn header(&self) -> String {
        self.record.key.header(self.shared.policy.sf_header)
    }

    // --- what the last action carries ---------------------------------------------------------

    /// SEND: this attempt's timeout; WAIT_ONLINE: how long until the deadline.
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms
    }

    /// WAIT: how long to wait.
    pub fn delay_ms(&self) -> u64 {
        self.delay_ms
    }

    /// WAIT: why the last attempt is retried.
    pub fn reason(&self) -> Option<RetryReason> {
        self.reason
    }

    /// Attempts sent by the current (or last) `send`, including the one in flight.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// DONE: the answer's status.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// DONE: whether the status is 2xx.
    pub fn ok(&self) -> bool {
        self.ok
    }

    /// DONE: whether the server said it replayed a stored answer (`Idempotent-Replayed: true`).
    pub fn replayed(&self) -> bool {
        self.replayed
    }

    /// FAIL: the error.
    pub fn error(&self) -> Error {
        self.error
    }

    /// Whether an attempt may have reached the server without a known outcome (see
    /// [`Record::uncertain`]); on DONE with a 4xx, the app must reconcile with its server.
    pub fn uncertain(&self) -> bool {
        self.record.uncertain
    }

    // --- events -------------------------------------------------------------------------------

    /// Starts a `send` at `now_ms`: checks the key's age, sets the deadline, then sends or waits
    /// for the network.
    pub fn start(&mut self, now_ms: u64, online: bool) -> Action {
        if self.phase != Phase::Idle {
            return self.fail(code::INTERNAL, protocol::NOT_IDLE);
        }
        self.reset_send(now_ms);
        // Any state: re-sending a succeeded or failed intent past the TTL could also do the work twice.
        if self.record.state == State::Expired || self.record.is_older_than(self.shared.policy.key_ttl_ms, now_ms) {
            // Terminal records stay terminal (the sweep removes them); pending ones become expired.
            if self.record.state == State::Pending {
                self.record.state = State::Expired;
                self.record.touch(now_ms);
                self.dirty = true;
            }
            // An unanswered key past its lifetime: the server may know what became of it.
            if self.record.state == State::Expired && self.may_ask() {
                return self.ask_server(Asked::Expired);
            }
            return self.fail(code::EXPIRED, 0);
        }
        self.next_attempt(now_ms, online)
    }

    /// A new send (or `ask`) at `now_ms`: its counters, deadline, backoff and reconciliation reset.
    #[inline(never)] // start and ask: one copy (measured)
    pub(crate) fn reset_send(&mut self, now_ms: u64) {
        let policy = &self.shared.policy;
        self.attempt = 0;
        self.status = 0;
        self.reason = None;
        self.replayed = false;
        self.asked = None;
        self.reconciled = false;
        self.ask_after_wait = false;
        self.deadline = now_ms.saturating_add(policy.total_timeout_ms);
        self.backoff = Backoff::new(policy);
        self.last_retry_cost = None;
    }

    /// The attempt got an HTTP answer, its body read (`now_ms`: when the driver holds the whole
    /// answer). An answer held only at or after the attempt's end is a timeout, never a definite
    /// answer: by then the driver has aborted the fetch, and an engine may still hand over a
    /// Response whose body the abort killed (docs/ARCHITECTURE.md, "An answer that races its
    /// timer"). Retrying with the same key is safe: the server replays what it stored.
    pub fn on_response(&mut self, now_ms: u64, answer: &Answer<'_>) -> Action {
        if self.phase != Phase::Sending {
            return self.fail(code::INTERNAL, protocol::NOT_SENDING);
        }
        if now_ms >= self.attempt_ends {
            return self.failed_attempt(now_ms, RetryReason::Timeout);
        }
        self.outcome(now_ms);
        let status = answer.status;
        // Only what a stored record may hold (an opaque response has status 0): anything else
        // would make the stored record unreadable, and its key lost.
        self.record.last_status = if (100..=599).contains(&status) { status } else { 0 };
        self.status = status;
        if status != 0 && status == self.shared.policy.replay_status {
            return self.replay_by_status(now_ms);
        }
        self.replayed = is_replayed(answer.replayed);
        if self.replayed {
            // The server answered from what it stored for this key: the outcome is known.
            self.record.uncertain = false;
        } else if status >= 500 {
            // A 5xx may come after the work was committed (a crash before the answer).
            self.record.uncertain = true;
        }
        match classify(answer, now_ms, self.shared.policy.max_retry_after_ms) {
            Classification::Success => {
                let mut budget = self.shared.budget.get();
                budget.on_success(self.last_retry_cost);
                self.shared.budget.set(budget);
                self.record.state = State::Succeeded;
                self.record.uncertain = false;
                self.done(true)
            }
            Classification::Failure(FailureReason::KeyMismatch) => {
                self.record.state = State::Failed;
                self.fail(code::KEY_MISMATCH, 0)
            }
            Classification::Failure(FailureReason::Status(_)) => {
                // An earlier attempt may have done the work: the server's stored answer tells.
                if self.record.uncertain && !self.replayed && self.may_ask() {
                    return self.ask_server(Asked::Uncertain);
                }
                self.record.state = State::Failed;
                self.done(false)
            }
            Classification::Retry { reason, after_ms } => self.retry(now_ms, reason, after_ms),
        }
    }

    /// The attempt failed below HTTP (connection refused or reset, DNS, CORS, ...).
    pub fn on_network_error(&mut self, now_ms: u64) -> Action {
        self.failed_attempt(now_ms, RetryReason::Network)
    }

    /// The attempt's timeout fired (the driver aborted the fetch).
    pub fn on_timeout(&mut self, now_ms: u64) -> Action {
        self.failed_attempt(now_ms, RetryReason::Timeout)
    }

    /// The caller aborted (during an attempt or a wait). The key is kept.
    pub fn on_abort(&mut self, now_ms: u64) -> Action {
        if self.phase == Phase::Sending {
            self.outcome(now_ms);
            // The request was on its way: the server may have done the work.
            self.record.uncertain = true;
        }
        self.fail(code::ABORTED, 0)
    }

    /// A WAIT elapsed: the next attempt (or WAIT_ONLINE when offline).
    pub fn on_wake(&mut self, now_ms: u64, online: bool) -> Action {
        if self.phase != Phase::Waiting {
            return self.fail(code::INTERNAL, protocol::NOT_WAITING);
        }
        if self.ask_after_wait {
            self.ask_after_wait = false;
            return self.ask_server(Asked::Expired);
        }
        self.next_attempt(now_ms, online)
    }

    /// The network came back during WAIT_ONLINE.
    pub fn on_online(&mut self, now_ms: u64) -> Action {
        if self.phase != Phase::Offline {
            return self.fail(code::INTERNAL, protocol::NOT_OFFLINE);
        }
        self.next_attempt(now_ms, true)
    }

    /// WAIT_ONLINE reached the deadline without the network coming back.
    pub fn on_online_timeout(&mut self, _now_ms: u64) -> Action {
        if self.phase != Phase::Offline {
            return self.fail(code::INTERNAL, protocol::NOT_OFFLINE);
        }
        self.exhausted(exhausted::DEADLINE)
    }

    // --- the rules ----------------------------------------------------------------------------

    #[inline(never)] // shared by start, onWake and onOnline (measured)
    pub(crate) fn next_attempt(&mut self, now_ms: u64, online: bool) -> Action {
        if now_ms >= self.deadline {
            return self.exhausted(exhausted::DEADLINE);
        }
        if self.at_total_limit() {
            return self.exhausted(exhausted::MAX_TOTAL_ATTEMPTS);
        }
        if !online {
            self.phase = Phase::Offline;
            self.timeout_ms = self.deadline - now_ms;
            return Action::WaitOnline;
        }
        self.attempt = self.attempt.saturating_add(1);
        self.record.attempts = self.record.attempts.saturating_add(1);
        self.record.state = State::Pending;
        // Saved before sending: a reload during this attempt must find the key.
        self.outcome(now_ms);
        self.phase = Phase::Sending;
        self.timeout_ms = self.shared.policy.attempt_timeout_ms.min(self.deadline - now_ms).max(1);
        self.attempt_ends = now_ms.saturating_add(self.timeout_ms);
        Action::Send
    }

    fn failed_attempt(&mut self, now_ms: u64, reason: RetryReason) -> Action {
        if self.phase != Phase::Sending {
            return self.fail(code::INTERNAL, protocol::NOT_SENDING);
        }
        self.outcome(now_ms);
        self.status = 0;
        // Sent, then no answer: the server may have done the work.
        self.record.uncertain = true;
        self.retry(now_ms, reason, None)
    }

    /// After a retryable outcome: the next delay, unless attempts, deadline or budget say stop.
    #[inline(never)] // one copy for the answer and the other events
    fn retry(&mut self, now_ms: u64, reason: RetryReason, after_ms: Option<u64>) -> Action {
        self.reason = Some(reason);
        if self.at_total_limit() {
            // No wait before an attempt that will not be made (as after the last of maxAttempts).
            return self.exhausted(exhausted::MAX_TOTAL_ATTEMPTS);
        }
        let backoff_ms = match self.backoff.next_delay(&*self.shared.random) {
            Ok(ms) => ms,
            Err(NoDelay::Exhausted) => return self.exhausted(exhausted::MAX_ATTEMPTS),
            Err(NoDelay::RandomFailed) => return self.fail(code::STORAGE, field::CSPRNG),
        };
        let delay = match after_ms {
            None => backoff_ms,
            // Honour Retry-After, spread above it so that every client told the same thing does
            // not come back in the same millisecond: after + U(0, min(after, this step)), never
            // below the backoff. `Jitter::None` keeps the lockstep it asks for.
            Some(after) => {
                let spread = match self.backoff.jitter() {
                    Jitter::None => 0,
                    _ => match uniform(&*self.shared.random, 0, after.min(self.backoff.last_exp())) {
                        Ok(ms) => ms,
                        Err(_) => return self.fail(code::STORAGE, field::CSPRNG),
                    },
                };
                after.saturating_add(spread).max(backoff_ms)
            }
        };
        if now_ms.saturating_add(delay) >= self.deadline {
            return self.exhausted(exhausted::DEADLINE);
        }
        let mut budget: RetryBudget = self.shared.budget.get();
        let Some(cost) = budget.try_acquire(reason) else {
            return self.exhausted(exhausted::BUDGET);
        };
        self.shared.budget.set(budget);
        self.last_retry_cost = Some(cost);
        self.wait(delay, reason)
    }

    /// WAIT `delay_ms` because of `reason`, then `on_wake`.
    pub(crate) fn wait(&mut self, delay_ms: u64, reason: RetryReason) -> Action {
        self.reason = Some(reason);
        self.phase = Phase::Waiting;
        self.delay_ms = delay_ms;
        Action::Wait
    }

    /// The send ran out with `detail`: asks the server first when an attempt may have reached it.
    #[inline(never)] // called from every limit: one copy
    fn exhausted(&mut self, detail: u8) -> Action {
        if self.record.uncertain && self.may_ask() {
            return self.ask_server(Asked::Exhausted(detail));
        }
        self.fail(code::RETRIES_EXHAUSTED, detail)
    }

    /// Whether the intent used every attempt `maxTotalAttempts` allows (0: no limit).
    fn at_total_limit(&self) -> bool {
        let max_total = self.shared.policy.max_total_attempts;
        max_total != 0 && self.record.attempts >= max_total
    }

    /// The record changed at `now_ms`: touch it and mark it for saving.
    #[inline(never)] // called from every event: one copy (measured)
    pub(crate) fn outcome(&mut self, now_ms: u64) {
        self.record.touch(now_ms);
        self.dirty = true;
    }

    /// An event number the machine does not know (from the boundary): FAIL `INTERNAL`, a driver bug.
    pub fn on_unknown_event(&mut self) -> Action {
        self.fail(code::INTERNAL, protocol::UNKNOWN_EVENT)
    }

    #[inline(never)] // called from every rule: one copy (measured)
    pub(crate) fn fail(&mut self, code: u8, detail: u8) -> Action {
        self.error = Error::new(code, detail);
        self.phase = Phase::Idle;
        Action::Fail
    }

    #[inline(never)] // called from every definite answer: one copy (measured)
    pub(crate) fn done(&mut self, ok: bool) -> Action {
        self.ok = ok;
        self.phase = Phase::Idle;
        Action::Done
    }
}
