//! The engine: one per client. It holds the policy, the client-wide retry budget and the randomness,
//! and makes the intent-level decisions: create or resume (`begin`), read back (`load`), and the sweep.

use alloc::boxed::Box;
use alloc::rc::Rc;
use core::cell::Cell;

use super::budget::RetryBudget;
use super::error::{code, field, mismatch, request, Error};
use super::fingerprint;
use super::key::Key;
use super::policy::Policy;
use super::random::RandomSource;
use super::record::{is_valid_intent_id, Record, State, StoredFields};
use crate::contract::Resumed;

/// `begin_with`'s `INTENT_MISMATCH` detail for a candidate whose key is not the one brought
/// (`begin_from` names the candidate in its place).
const KEY_MISMATCH: u8 = mismatch::KEY_STORED;
use super::send::Machine;
use super::shared::Shared;

/// The client-wide half of the machine: policy, retry budget, randomness.
pub struct Engine {
    shared: Rc<Shared>,
}

pub use crate::contract::Sweep;

impl Engine {
    /// An engine over a checked `policy`; `INVALID_OPTIONS` with the option's index otherwise.
    pub fn new(policy: Policy, random: Box<dyn RandomSource>) -> Result<Self, Error> {
        policy.validate().map_err(|index| Error::new(code::INVALID_OPTIONS, index))?;
        Ok(Self::with_checked(policy, random))
    }

    /// An engine over a policy already checked (`Policy::checked`).
    pub(crate) fn with_checked(policy: Policy, random: Box<dyn RandomSource>) -> Self {
        let budget = Cell::new(RetryBudget::new(policy.retry_budget));
        Self { shared: Rc::new(Shared { policy, budget, random }) }
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
        self.begin_with(intent_id, fingerprint, fingerprint, now_ms, replace, None, stored, Resumed::Stored)
    }

    /// [`Engine::begin`] with two candidates: `stored`, the record this tab's storage holds, and
    /// `claimed`, the record of the key claimed for this intent across tabs (the claims database),
    /// either of which may be missing. The claim wins when its key differs from the stored one (another
    /// tab's write has not reached this storage yet); with the same key the stored record is fresher
    /// (attempts, state). A machine resumed from the claim is dirty (this storage lacks the record); its
    /// field `Resumed` says which candidate it resumed.
    ///
    /// `stored_fingerprint` is what the stored record's fingerprint is compared with (the driver's
    /// hash of the request for that record's version); a new key's record gets `fingerprint`.
    /// `brought`: the key the app brings for a new record ([`Key::brought`]; `INVALID_REQUEST` with
    /// [`request::KEY`] when malformed); a candidate with another key is a mismatch unless replaced.
    /// `INTENT_MISMATCH`'s detail names the candidate whose key the request does not match:
    /// [`mismatch::STORED`] or [`mismatch::CLAIMED`], or whose key is not the one brought:
    /// [`mismatch::KEY_STORED`] or [`mismatch::KEY_CLAIMED`].
    #[allow(clippy::too_many_arguments)]
    pub fn begin_from(
        &self,
        intent_id: &str,
        fingerprint: &str,
        stored_fingerprint: &str,
        now_ms: u64,
        replace: bool,
        brought: Option<&str>,
        stored: Option<&Machine>,
        claimed: Option<&Machine>,
    ) -> Result<Machine, Error> {
        let newer = claimed.filter(|c| stored.is_none_or(|s| s.record().key != c.record().key));
        let (candidate, compare, which, from) = match newer {
            Some(claimed) => (Some(claimed), fingerprint, mismatch::CLAIMED, Resumed::Claimed),
            None => (stored, stored_fingerprint, mismatch::STORED, Resumed::Stored),
        };
        // begin_with's detail: 0 for another request, KEY_MISMATCH for another key; named here.
        let name =
            |detail| if detail == KEY_MISMATCH { which + mismatch::KEY_STORED - mismatch::STORED } else { which };
        self.begin_with(intent_id, compare, fingerprint, now_ms, replace, brought, candidate, from).map_err(|e| {
            if e.code == code::INTENT_MISMATCH {
                Error::new(e.code, name(e.detail))
            } else {
                e
            }
        })
    }

    /// [`Engine::begin`], comparing the stored record with `compare` (and its key with `brought`)
    /// and giving a new key's record `fingerprint` and the brought key, if any; `from` says which
    /// candidate `stored` is (the claim's resumed machine is dirty: this storage lacks the record).
    #[allow(clippy::too_many_arguments)]
    fn begin_with(
        &self,
        intent_id: &str,
        compare: &str,
        fingerprint: &str,
        now_ms: u64,
        replace: bool,
        brought: Option<&str>,
        stored: Option<&Machine>,
        from: Resumed,
    ) -> Result<Machine, Error> {
        if !is_valid_intent_id(intent_id) {
            return Err(Error::new(code::INVALID_REQUEST, request::INTENT_ID));
        }
        // `compare` is only compared with a stored fingerprint, which is valid: an invalid one never matches.
        if !fingerprint::is_valid(fingerprint) {
            return Err(Error::new(code::INVALID_REQUEST, request::FINGERPRINT));
        }
        let brought = match brought {
            Some(text) => Some(Key::brought(text).ok_or(Error::new(code::INVALID_REQUEST, request::KEY))?),
            None => None,
        };
        if let Some(stored) = stored.filter(|_| !replace) {
            let record = stored.record();
            if record.id != intent_id {
                return Err(Error::new(code::STORAGE, field::ID));
            }
            let same_request = record.fingerprint == compare;
            if same_request || record.state != State::Failed || record.uncertain {
                if !same_request {
                    return Err(Error::new(code::INTENT_MISMATCH, 0));
                }
                if brought.as_ref().is_some_and(|key| *key != record.key) {
                    return Err(Error::new(code::INTENT_MISMATCH, KEY_MISMATCH));
                }
                let mut record = record.clone();
                let stale =
                    record.state == State::Pending && record.is_older_than(self.shared.policy.key_ttl_ms, now_ms);
                if stale {
                    record.state = State::Expired;
                    record.touch(now_ms);
                }
                // Resumed from the claim: dirty, since this tab's storage lacks the record.
                let dirty = stale || from == Resumed::Claimed;
                return Ok(Machine::new(self.shared.clone(), record, dirty, from));
            }
        }
        let (key, brought) = match brought {
            Some(key) => (key, true),
            None => (Key::generate(&*self.shared.random).map_err(|_| Error::new(code::STORAGE, field::CSPRNG))?, false),
        };
        let record = Record { brought, ..Record::new(intent_id, key, fingerprint, now_ms) };
        Ok(Machine::new(self.shared.clone(), record, true, Resumed::New))
    }

    /// A machine over a record read back from storage under `intent_id` (values checked: `STORAGE`
    /// with the field otherwise). Not dirty: it is what storage holds.
    pub fn load(&self, intent_id: &str, fields: &StoredFields<'_>) -> Result<Machine, Error> {
        let record = fields.validate(intent_id)?;
        Ok(Machine::new(self.shared.clone(), record, false, Resumed::Stored))
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
