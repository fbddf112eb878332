//! Errors as two small numbers: a stable code and a detail. They cross the wasm boundary as the
//! number `code * 256 + detail`; the driver owns the messages (docs/WASM-BOUNDARY.md).

/// The stable error codes (`IdempotentFetchError.code` in JavaScript is the driver's name for each).
pub mod code {
    /// No definite answer within the attempts, the deadline or the retry budget; the key is kept.
    pub const RETRIES_EXHAUSTED: u8 = 1;
    /// The caller aborted; the key is kept.
    pub const ABORTED: u8 = 2;
    /// The server answered 422: this key was used with a different request.
    pub const KEY_MISMATCH: u8 = 3;
    /// The intent id was begun before with a different request.
    pub const INTENT_MISMATCH: u8 = 4;
    /// The stored key is older than `keyTtlMs`; the server may have forgotten it.
    pub const EXPIRED: u8 = 5;
    /// The body is a stream and cannot be sent twice (decided by the driver).
    pub const BODY_NOT_REPLAYABLE: u8 = 6;
    /// An option is out of range; the detail is the option's argument index in `Engine::new`.
    pub const INVALID_OPTIONS: u8 = 7;
    /// The intent id or the fingerprint is not usable.
    pub const INVALID_REQUEST: u8 = 8;
    /// A stored record is corrupt (the detail names the field), or the CSPRNG failed.
    pub const STORAGE: u8 = 9;
    /// The intent is not in storage any more (decided by the driver).
    pub const NOT_FOUND: u8 = 10;
    /// The server's key-status answer, when it is not "done" (the app's `reconcile()`): the detail
    /// says which ([`super::key_status`]).
    pub const KEY_STATUS: u8 = 11;
    /// The driver called the machine out of order (a bug in the driver, never the user's fault).
    pub const PROTOCOL: u8 = 15;
}

/// Details of [`code::RETRIES_EXHAUSTED`]: which limit ended the send.
pub mod exhausted {
    /// `maxAttempts` attempts were made.
    pub const MAX_ATTEMPTS: u8 = 1;
    /// `totalTimeoutMs` passed, or the next wait would pass it.
    pub const DEADLINE: u8 = 2;
    /// The client's retry budget is empty.
    pub const BUDGET: u8 = 3;
    /// The intent reached `maxTotalAttempts` across all its sends.
    pub const MAX_TOTAL_ATTEMPTS: u8 = 4;
}

/// Details of [`code::EXPIRED`].
pub mod expired {
    /// The server, asked, has no record of the key: past its retention that proves nothing.
    pub const UNKNOWN_TO_SERVER: u8 = 1;
}

/// Details of [`code::KEY_STATUS`].
pub mod key_status {
    /// The server could not be asked (no usable answer).
    pub const COULD_NOT_ASK: u8 = 1;
    /// A request with the key is in flight there.
    pub const IN_FLIGHT: u8 = 2;
    /// The server has no record of the key.
    pub const UNKNOWN: u8 = 3;
}

/// Details of [`code::INVALID_REQUEST`].
pub mod request {
    /// The intent id is empty, longer than 256 bytes, or holds control characters.
    pub const INTENT_ID: u8 = 1;
    /// The fingerprint is not 64 lowercase hex characters.
    pub const FINGERPRINT: u8 = 2;
}

/// Details of [`code::STORAGE`]: which record field failed validation, or the CSPRNG.
pub mod field {
    /// `v`: not the record version this build writes.
    pub const VERSION: u8 = 1;
    /// `id`: invalid, or not the id the record is stored under.
    pub const ID: u8 = 2;
    /// `key`: not a lowercase hyphenated UUID v4.
    pub const KEY: u8 = 3;
    /// `fingerprint`: not 64 lowercase hex characters.
    pub const FINGERPRINT: u8 = 4;
    /// `createdAt`: not a whole number of ms in range.
    pub const CREATED_AT: u8 = 5;
    /// `updatedAt`: not a whole number of ms in range, or before `createdAt`.
    pub const UPDATED_AT: u8 = 6;
    /// `attempts`: not a whole number in `0..=2^32-1`.
    pub const ATTEMPTS: u8 = 7;
    /// `state`: not one of the four states.
    pub const STATE: u8 = 8;
    /// `lastStatus`: not 0 (none) or an HTTP status `100..=599`.
    pub const LAST_STATUS: u8 = 9;
    /// The CSPRNG (`crypto.getRandomValues`) failed.
    pub const CSPRNG: u8 = 32;
}

/// Details of [`code::PROTOCOL`]: the call that came out of order.
pub mod protocol {
    /// An answer, network error or timeout while no attempt was in flight.
    pub const NOT_SENDING: u8 = 1;
    /// `onWake` while no backoff wait was running.
    pub const NOT_WAITING: u8 = 2;
    /// `onOnline` / `onOnlineTimeout` while not waiting for the network.
    pub const NOT_OFFLINE: u8 = 3;
    /// `start` or `ask` while a send is running.
    pub const NOT_IDLE: u8 = 4;
    /// `onKeyStatus` while the server was not being asked.
    pub const NOT_RECONCILING: u8 = 5;
}

/// A failure: a code from [`code`] and a detail whose meaning depends on the code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Error {
    /// The stable code.
    pub code: u8,
    /// The detail (0 when the code has none).
    pub detail: u8,
}

impl Error {
    /// An error of `code` with `detail`.
    pub const fn new(code: u8, detail: u8) -> Self {
        Self { code, detail }
    }

    /// The number thrown across the wasm boundary: `code * 256 + detail`.
    pub const fn packed(self) -> u32 {
        (self.code as u32) << 8 | self.detail as u32
    }
}
