//! The engine: one per client. It holds the policy, the client-wide retry budget and the randomness,
//! and makes the intent-level decisions: create or resume (`begin`), read back (`load`), and the sweep.

use alloc::boxed::Box;
use alloc::rc::Rc;
use core::cell::Cell;

use super::budget::RetryBudget;
use super::error::{code, field, request, Error};
use super::fingerprint;
use super::key::Key;
use super::policy::Policy;
use super::random::RandomSource;
use super::record::{is_valid_intent_id, Record, State, StoredFields};
use super::send::Machine;
use super::shared::Shared;

/// The client-wide half of the machine: policy, retry budget, randomness.
pub struct Engine {
    shared: Rc<Shared>,
}

/// What the sweep decided for one stored record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sweep {
    /// Not older than the TTL, or already expired: leave it.
    Keep = 0,
    /// A retired key (succeeded or failed) older than the TTL: delete the record.
    Remove = 1,
    /// A pending intent older than the TTL, now marked expired: save it (and tell the app).
    Expired = 2,
}

impl Engine {
    /// An engine over a checked `policy`; `INVALID_OPTIONS` with the option's index otherwise.
    pub fn new(policy: Policy, random: Box<dyn RandomSource>) -> Result<Self, Error> {
        policy.validate().map_err(|index| Error::new(code::INVALID_OPTIONS, index))?;
        let budget = Cell::new(RetryBudget::new(policy.retry_budget));
        Ok(Self { shared: Rc::new(Shared { policy, budget, random }) })
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.shared.policy
    }

    /// Tokens left in the client-wide retry budget.
    pub fn budget(&self) -> u32 {
        self.shared.budget.get().tokens()
    }

    /// Creates the intent, or resumes `stored` (the record read from storage under this id, if any):
    ///
    /// - no record, or `replace`: a new key (the machine is dirty: save it before anything else);
    /// - a pending or terminal record with the same fingerprint: resumed with its key;
    /// - a pending or succeeded (or expired) record with another fingerprint: `INTENT_MISMATCH`;
    /// - a failed record with another fingerprint: the user changed the request after a definite
    ///   failure, so the old key is retired and a new one made; unless the record is `uncertain`
    ///   (an earlier attempt may have done the work): then `INTENT_MISMATCH` until the app discards it;
    /// - a pending record older than the TTL: marked expired (dirty) and returned; sending it fails `EXPIRED`.
    pub fn begin(
        &self,
        intent_id: &str,
        fingerprint: &str,
        now_ms: u64,
        replace: bool,
        stored: Option<&Machine>,
    ) -> Result<Machine, Error> {
        if !is_valid_intent_id(intent_id) {
            return Err(Error::new(code::INVALID_REQUEST, request::INTENT_ID));
        }
        if !fingerprint::is_valid(fingerprint) {
            return Err(Error::new(code::INVALID_REQUEST, request::FINGERPRINT));
        }
        if let Some(stored) = stored.filter(|_| !replace) {
            let record = stored.record();
            if record.id != intent_id {
                return Err(Error::new(code::STORAGE, field::ID));
            }
            let same_request = record.fingerprint == fingerprint;
            if same_request || record.state != State::Failed || record.uncertain {
                if !same_request {
                    return Err(Error::new(code::INTENT_MISMATCH, 0));
                }
                let mut record = record.clone();
                let stale =
                    record.state == State::Pending && record.is_older_than(self.shared.policy.key_ttl_ms, now_ms);
                if stale {
                    record.state = State::Expired;
                    record.touch(now_ms);
                }
                return Ok(Machine::new(self.shared.clone(), record, stale, true));
            }
        }
        let key = Key::generate(&*self.shared.random).map_err(|_| Error::new(code::STORAGE, field::CSPRNG))?;
        Ok(Machine::new(self.shared.clone(), Record::new(intent_id, key, fingerprint, now_ms), true, false))
    }

    /// A machine over a record read back from storage under `intent_id` (values checked: `STORAGE`
    /// with the field otherwise). Not dirty: it is what storage holds.
    pub fn load(&self, intent_id: &str, fields: &StoredFields<'_>) -> Result<Machine, Error> {
        let record = fields.validate(intent_id)?;
        Ok(Machine::new(self.shared.clone(), record, false, true))
    }

    /// The sweep's rule for one record at `now_ms`: terminal records older than the TTL are removed;
    /// stale pending ones are marked expired (kept, so the app can reconcile them with its server).
    pub fn sweep(&self, machine: &mut Machine, now_ms: u64) -> Sweep {
        let ttl = self.shared.policy.key_ttl_ms;
        let record = machine.record_mut();
        if !record.is_older_than(ttl, now_ms) {
            return Sweep::Keep;
        }
        match record.state {
            State::Succeeded | State::Failed => Sweep::Remove,
            State::Pending => {
                record.state = State::Expired;
                record.touch(now_ms);
                machine.mark_dirty();
                Sweep::Expired
            }
            State::Expired => Sweep::Keep,
        }
    }
}
