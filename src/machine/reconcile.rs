//! Reconciliation: asking the server what became of a key, where the machine would otherwise give up
//! with a key it cannot explain (docs/ARCHITECTURE.md, "Reconciliation").
//!
//! The server answers the key-status protocol (README, "Your server"): **done** with its stored
//! answer, **in flight**, or **unknown** (no record of the key: within its retention the request never
//! arrived). The driver performs the GET (or the app's `reconcile` callback) and reports one of
//! [`KeyStatus`]; the rules of what follows are here, in [`Machine::on_key_status`].

use super::classify::{Answer, RetryReason};
use super::error::{code, expired, protocol};
use super::record::State;
use super::retry_after::parse_retry_after;
use super::send::{Action, Machine, Phase};

pub use crate::contract::KeyStatus;

impl KeyStatus {
    /// The boundary's number; anything unknown is [`KeyStatus::CouldNotAsk`].
    pub fn from_index(index: u32) -> Self {
        u8::try_from(index).ok().and_then(Self::from_u8).unwrap_or(Self::CouldNotAsk)
    }
}

/// Why the machine asked: what it would have reported without an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Asked {
    /// `start` found the key older than `keyTtlMs`: `EXPIRED`.
    Expired,
    /// The send ran out (`RETRIES_EXHAUSTED` with this detail) after attempts that may have reached
    /// the server.
    Exhausted(u8),
    /// A definite, non-replayed failure after an attempt that may have reached the server.
    Uncertain,
    /// The app asked (`reconcile()`): nothing to fall back to.
    Explicit,
    /// The server answered with the app's `replayStatus`: the key is done, its status unseen.
    Replay,
}

/// Without a `Retry-After`, how long an in-flight key is given before the next step.
pub const IN_FLIGHT_WAIT_MS: u64 = 1_000;

impl Machine {
    /// Asks the server about the key on the app's request (`reconcile()`), whatever the state:
    /// RECONCILE, then [`Machine::on_key_status`]. Only between sends.
    pub fn ask(&mut self, now_ms: u64) -> Action {
        if self.phase != Phase::Idle {
            return self.fail(code::INTERNAL, protocol::NOT_IDLE);
        }
        self.reset_send(now_ms);
        self.ask_server(Asked::Explicit)
    }

    /// An answer with the app's `replayStatus`: the server replayed what it stored for the key.
    /// Servers that answer so store only requests they completed, so the intent succeeded; the key
    /// status, when the app configured how to ask, tells the original status.
    pub(crate) fn replay_by_status(&mut self, now_ms: u64) -> Action {
        self.replayed = true;
        self.record.uncertain = false;
        if self.may_ask() {
            return self.ask_server(Asked::Replay);
        }
        self.give_up(now_ms, Asked::Replay)
    }

    /// RECONCILE instead of giving up, when the app configured how to ask; once per send.
    #[inline(never)] // called from every place that asks: one copy
    pub(crate) fn ask_server(&mut self, asked: Asked) -> Action {
        self.asked = Some(asked);
        self.reconciled = true;
        self.phase = Phase::Reconciling;
        self.timeout_ms = self.shared.policy.attempt_timeout_ms;
        Action::Reconcile
    }

    /// Whether to ask before giving up with `asked` (configured, not yet asked in this send).
    pub(crate) fn may_ask(&self) -> bool {
        self.shared.policy.reconcile && !self.reconciled
    }

    /// The server's answer about the key (after RECONCILE). `stored`: with [`KeyStatus::Done`], the
    /// stored answer's status (the driver marks it replayed); with [`KeyStatus::InFlight`], the status
    /// answer's `Retry-After`.
    pub fn on_key_status(&mut self, now_ms: u64, status: KeyStatus, stored: &Answer<'_>) -> Action {
        let (Phase::Reconciling, Some(asked)) = (self.phase, self.asked) else {
            return self.fail(code::INTERNAL, protocol::NOT_RECONCILING);
        };
        match status {
            // Exactly as a replayed definite answer: the server stored that outcome for the key.
            KeyStatus::Done => self.stored_answer(now_ms, stored.status),
            KeyStatus::InFlight => {
                let after = stored
                    .retry_after
                    .and_then(|v| parse_retry_after(v, now_ms, self.shared.policy.max_retry_after_ms));
                self.in_flight(now_ms, asked, after.unwrap_or(IN_FLIGHT_WAIT_MS))
            }
            KeyStatus::Unknown => match asked {
                // Past the retention "unknown" proves nothing: the work may have been done and forgotten.
                Asked::Expired => self.fail(code::EXPIRED, expired::UNKNOWN_TO_SERVER),
                // Within it the request never arrived: sending it once more with the key is safe.
                Asked::Exhausted(_) => self.resend_once(now_ms),
                // The work was not done: the failure stands, and it is certain now.
                Asked::Uncertain => {
                    self.record.uncertain = false;
                    self.outcome(now_ms);
                    self.give_up(now_ms, asked)
                }
                Asked::Explicit => self.fail(code::KEY_STATUS, KeyStatus::Unknown as u8),
                // The replay already said the key is done: an answer that contradicts it adds nothing.
                Asked::Replay => self.give_up(now_ms, asked),
            },
            KeyStatus::CouldNotAsk => match asked {
                Asked::Explicit => self.fail(code::KEY_STATUS, KeyStatus::CouldNotAsk as u8),
                _ => self.give_up(now_ms, asked),
            },
        }
    }

    /// What the machine would have reported without asking.
    fn give_up(&mut self, now_ms: u64, asked: Asked) -> Action {
        match asked {
            Asked::Expired => self.fail(code::EXPIRED, 0),
            Asked::Exhausted(detail) => self.fail(code::RETRIES_EXHAUSTED, detail),
            Asked::Uncertain => {
                self.record.state = State::Failed;
                self.done(false)
            }
            Asked::Explicit => self.fail(code::KEY_STATUS, KeyStatus::CouldNotAsk as u8),
            Asked::Replay => {
                self.replayed = true;
                self.record.state = State::Succeeded;
                self.outcome(now_ms);
                self.done(true)
            }
        }
    }

    /// The server's stored answer for the key, taken as a replayed definite answer.
    fn stored_answer(&mut self, now_ms: u64, status: u16) -> Action {
        self.outcome(now_ms);
        self.record.last_status = if (100..=599).contains(&status) { status } else { 0 };
        self.record.uncertain = false;
        self.status = status;
        self.replayed = true;
        if (200..=299).contains(&status) {
            self.record.state = State::Succeeded;
            self.done(true)
        } else if status == 422 {
            self.record.state = State::Failed;
            self.fail(code::KEY_MISMATCH, 0)
        } else {
            self.record.state = State::Failed;
            self.done(false)
        }
    }

    /// A request with the key is in flight at the server: wait, then (within the key's lifetime)
    /// send again with the same key, which the server answers once it is done; past it, ask again.
    fn in_flight(&mut self, now_ms: u64, asked: Asked, after_ms: u64) -> Action {
        match asked {
            Asked::Explicit => self.fail(code::KEY_STATUS, KeyStatus::InFlight as u8),
            Asked::Replay => self.give_up(now_ms, asked),
            Asked::Expired => {
                if now_ms.saturating_add(after_ms) >= self.deadline {
                    return self.fail(code::EXPIRED, 0);
                }
                self.ask_after_wait = true;
                self.wait(after_ms, RetryReason::InFlight)
            }
            Asked::Exhausted(_) | Asked::Uncertain => {
                // One more attempt after the wait, even past the send's deadline.
                self.deadline = now_ms
                    .saturating_add(after_ms)
                    .saturating_add(self.shared.policy.attempt_timeout_ms)
                    .saturating_add(1);
                self.wait(after_ms, RetryReason::InFlight)
            }
        }
    }

    /// The server never saw the key: one more attempt with it, whatever limit ended the send.
    fn resend_once(&mut self, now_ms: u64) -> Action {
        self.deadline = now_ms.saturating_add(self.shared.policy.attempt_timeout_ms).saturating_add(1);
        self.next_attempt(now_ms, true)
    }
}
