//! The persisted intent record: what survives a page reload, and the checks of its values when it
//! is read back (the driver parses the JSON and checks the field types; the values are checked here).

use alloc::string::String;

use super::error::{code, field, Error};
use super::fingerprint;
use super::key::{owned, Key};

pub use crate::contract::{OLDEST_RECORD_VERSION, RECORD_VERSION};

/// Longest intent id accepted, in UTF-8 bytes (ids are app-chosen strings such as `"checkout:cart-42"`).
pub const MAX_INTENT_ID_LEN: usize = 256;

/// Largest integer a JavaScript number holds exactly: the bound of every stored time.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

pub use crate::contract::State;

impl State {
    /// The lowercase name used in storage and in JavaScript.
    pub fn as_str(self) -> &'static str {
        self.text()
    }

    /// Whether a definite answer ended the intent.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

/// One user intent and its idempotency key. The version `v` is the driver's (it names how the
/// fingerprint was made); the machine checks it is one this build reads.
#[derive(Debug, PartialEq, Eq)]
pub struct Record {
    /// The app's name for the intent, e.g. `"checkout:cart-42"`.
    pub id: String,
    /// The idempotency key.
    pub key: Key,
    /// Hex HMAC-SHA-256 of the request under the namespace's secret (from the driver; an unkeyed
    /// SHA-256 in version-1 records).
    pub fingerprint: String,
    /// When the intent began, ms since the epoch.
    pub created_at: u64,
    /// Last change, ms since the epoch (never before `created_at`).
    pub updated_at: u64,
    /// Attempts across every `send`, including earlier page loads.
    pub attempts: u32,
    /// Where it stands.
    pub state: State,
    /// HTTP status of the last answer, 0 when there was none.
    pub last_status: u16,
    /// Whether an attempt may have reached the server without a known outcome (it was sent, then a
    /// network error, a timeout, an abort or a 5xx followed). Cleared by a 2xx or a replayed answer.
    /// A later plain 4xx then cannot tell whether the work was done: the result says `uncertain`,
    /// and the intent cannot be re-begun with another request until the app discards it.
    pub uncertain: bool,
    /// The key was brought by the app (`begin`'s `key`), not minted here: validated as such.
    pub brought: bool,
}

/// A stored record's fields as the driver read them from JSON (type-checked, values unchecked).
/// Numbers are JavaScript numbers, so any `f64` may arrive; [`StoredFields::validate`] checks them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StoredFields<'a> {
    /// `v`.
    pub v: f64,
    /// `id`.
    pub id: &'a str,
    /// `key`.
    pub key: &'a str,
    /// `fingerprint`.
    pub fingerprint: &'a str,
    /// `createdAt`.
    pub created_at: f64,
    /// `updatedAt`.
    pub updated_at: f64,
    /// `attempts`.
    pub attempts: f64,
    /// `state`: its index in [`State::ALL`] (the driver maps the stored name; an unknown name is -1).
    pub state: f64,
    /// `lastStatus` (`null` or absent in JSON is [`crate::contract::NO_STATUS`] here; 0 is no status and refused).
    pub last_status: f64,
    /// `uncertain`: 1 or 0 (JSON true or false; absent in records written before it existed: 0).
    pub uncertain: f64,
    /// `brought`: 1 or 0 (JSON true or false; absent: 0, a minted key).
    pub brought: f64,
}

impl<'a> StoredFields<'a> {
    /// The fields as `Engine.load` takes them: the strings, and the numbers by [`field`] number
    /// (`numbers[field::CREATED_AT]`, ...; the state as its index; slot 0 unused), so the boundary
    /// names no field.
    pub fn from_slots(
        id: &'a str,
        key: &'a str,
        fingerprint: &'a str,
        numbers: &[f64; crate::contract::RECORD_SLOTS],
    ) -> Self {
        let number = |field: u8| numbers[usize::from(field)];
        Self {
            v: number(field::VERSION),
            id,
            key,
            fingerprint,
            created_at: number(field::CREATED_AT),
            updated_at: number(field::UPDATED_AT),
            attempts: number(field::ATTEMPTS),
            state: number(field::STATE),
            last_status: number(field::LAST_STATUS),
            uncertain: number(field::UNCERTAIN),
            brought: number(field::BROUGHT),
        }
    }
}

impl StoredFields<'_> {
    /// Checks every value of a record read back from storage under `intent_id`; the error is
    /// `STORAGE` with the failing field ([`field`]) as its detail.
    pub fn validate(&self, intent_id: &str) -> Result<Record, Error> {
        let bad = |detail| Error::new(code::STORAGE, detail);
        if whole(self.v, RECORD_VERSION.into()).is_none_or(|v| v < OLDEST_RECORD_VERSION.into()) {
            return Err(bad(field::VERSION));
        }
        if !is_valid_intent_id(self.id) || self.id != intent_id {
            return Err(bad(field::ID));
        }
        let brought = whole(self.brought, 1).ok_or(bad(field::BROUGHT))? == 1;
        let key = if brought { Key::brought(self.key) } else { Key::parse(self.key) }.ok_or(bad(field::KEY))?;
        if !fingerprint::is_valid(self.fingerprint) {
            return Err(bad(field::FINGERPRINT));
        }
        let created_at = whole(self.created_at, MAX_SAFE_INTEGER).ok_or(bad(field::CREATED_AT))?;
        let updated_at =
            whole(self.updated_at, MAX_SAFE_INTEGER).filter(|&t| t >= created_at).ok_or(bad(field::UPDATED_AT))?;
        let attempts = whole(self.attempts, u32::MAX.into()).ok_or(bad(field::ATTEMPTS))?;
        let state = whole(self.state, u8::MAX.into()).and_then(|n| State::from_u8(n as u8)).ok_or(bad(field::STATE))?;
        let last_status = if self.last_status == f64::from(crate::contract::NO_STATUS) {
            0
        } else {
            whole(self.last_status, 599).filter(|&s| s >= 100).ok_or(bad(field::LAST_STATUS))?
        };
        let uncertain = whole(self.uncertain, 1).ok_or(bad(field::UNCERTAIN))? == 1;
        Ok(Record {
            id: owned(self.id),
            key,
            fingerprint: owned(self.fingerprint),
            created_at,
            updated_at,
            attempts: attempts as u32,
            state,
            last_status: last_status as u16,
            uncertain,
            brought,
        })
    }
}

impl Record {
    /// A fresh pending record.
    pub fn new(id: &str, key: Key, fingerprint: &str, now_ms: u64) -> Self {
        Self {
            id: owned(id),
            key,
            fingerprint: owned(fingerprint),
            created_at: now_ms,
            updated_at: now_ms,
            attempts: 0,
            state: State::Pending,
            last_status: 0,
            uncertain: false,
            brought: false,
        }
    }

    /// Whether the key is older than `ttl_ms` at `now_ms`.
    pub fn is_older_than(&self, ttl_ms: u64, now_ms: u64) -> bool {
        now_ms.saturating_sub(self.created_at) > ttl_ms
    }

    /// Records a change at `now_ms` (a clock that went backwards never makes `updated_at < created_at`).
    pub fn touch(&mut self, now_ms: u64) {
        self.updated_at = now_ms.max(self.created_at);
    }
}

/// Intent ids are 1 to 256 bytes with no control characters (Unicode's Cc: U+0000 to U+001F and
/// U+007F to U+009F).
#[inline(never)] // one copy for begin and load
pub fn is_valid_intent_id(id: &str) -> bool {
    // On the UTF-8 bytes instead of decoding chars: U+0080 to U+009F are 0xC2 followed by 0x80 to
    // 0x9F, and 0xC2 is always a lead byte in a `str`.
    let b = id.as_bytes();
    let control =
        |(i, &c): (usize, &u8)| c < 0x20 || c == 0x7f || (c == 0xc2 && b.get(i + 1).is_some_and(|&n| n < 0xa0));
    !id.is_empty() && id.len() <= MAX_INTENT_ID_LEN && !b.iter().enumerate().any(control)
}

/// `x` as a whole number in `[0, max]`, or `None` (NaN, infinities, fractions, negatives, too big).
pub fn whole(x: f64, max: u64) -> Option<u64> {
    // `as` saturates (NaN -> 0), so the round trip rejects everything that is not exactly a u64.
    let n = x as u64;
    (n as f64 == x && n <= max && n <= MAX_SAFE_INTEGER).then_some(n)
}

// Not derived: the strings are copied by `owned` (one out-of-line copy, not one inlined per field).
impl Clone for Record {
    fn clone(&self) -> Self {
        Self { id: owned(&self.id), key: self.key.clone(), fingerprint: owned(&self.fingerprint), ..*self }
    }
}
