//! The contract between the machine and the TypeScript driver, in one table: every number that
//! crosses the wasm boundary (events, actions, fields, error codes and their details, the stored
//! record's fields, the options with their defaults and ranges).
//!
//! The driver's side is generated from this file: `src/js/generated/contract.ts` holds one plain
//! `const` per entry, and the error codes' names as a `const enum` (esbuild inlines both, so nothing
//! is added to what ships). The file is committed;
//! `tests/contract.rs` fails when it differs from `typescript()`, and
//! `IF_BLESS=1 cargo test --test contract` rewrites it. To add an option, add its row here (the driver
//! reads names, defaults and ranges from the generated table). To add a record field, add its row to
//! `field` (name, JSON kind, the [`Field`] it is written from), then give the machine its value: the
//! `Record` member, its line in `StoredFields` (`from_slots`, `validate`) and the `Field` the driver
//! reads it by; the slot count, the driver's decoding and encoding and the stored JSON follow from
//! the row.

/// `""` when no literal is given, else the literal.
macro_rules! or_empty {
    () => {
        ""
    };
    ($s:literal) => {
        $s
    };
}

/// `#[repr(u8)]` enums, each with its TypeScript prefix and, optionally, the TypeScript names of the
/// array of its items' names (the spelling users and storage see) and of the union type of those
/// names (a public type of the driver).
macro_rules! enums {
    ($(
        $(#[doc = $doc:literal])*
        enum $name:ident: $prefix:literal $(, names $names:literal)? $(, type $ty:literal)? {
            $( $(#[doc = $vdoc:literal])* $variant:ident = $value:literal $($text:literal)? ),* $(,)?
        }
    )*) => {
        $(
            $(#[doc = $doc])*
            #[repr(u8)]
            #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
            pub enum $name {
                $( $(#[doc = $vdoc])* $variant = $value, )*
            }

            impl $name {
                /// Every item, in order.
                pub const ALL: &'static [Self] = &[$(Self::$variant),*];

                /// The item's name as users and storage spell it (empty when the table gives none).
                pub const fn text(self) -> &'static str {
                    match self {
                        $( Self::$variant => or_empty!($($text)?), )*
                    }
                }

                /// The item numbered `n` at the boundary.
                pub const fn from_u8(n: u8) -> Option<Self> {
                    match n {
                        $( $value => Some(Self::$variant), )*
                        _ => None,
                    }
                }
            }
        )*

        /// The enums, for the TypeScript generator.
        #[cfg(not(target_arch = "wasm32"))]
        const ENUMS: &[Group] = &[$(
            Group {
                name: stringify!($name),
                doc: &[$($doc),*],
                prefix: $prefix,
                names: or_empty!($($names)?),
                ty: or_empty!($($ty)?),
                kinds: "",
                reads: "",
                items: &[$( Item {
                    name: stringify!($variant),
                    value: $value,
                    doc: &[$($vdoc),*],
                    text: or_empty!($($text)?),
                    kind: "",
                    read: -1,
                } ),*],
            }
        ),*];
    };
}

/// `-1` when no [`Field`] is given, else that field's number (for the generator only).
#[cfg(not(target_arch = "wasm32"))]
macro_rules! field_or_none {
    () => {
        -1
    };
    ($field:ident) => {
        Field::$field as i16
    };
}

/// Modules of `u8` constants (error codes and details: `Error` keeps them as numbers), with the same
/// TypeScript options as [`enums`] plus the names of an array of item kinds and of an array of the
/// [`Field`] each item is read by (`Machine.get`; -1 for none).
macro_rules! consts {
    ($(
        $(#[doc = $doc:literal])*
        mod $name:ident: $prefix:literal $(, names $names:literal)? $(, type $ty:literal)? $(, kinds $kinds:literal)? $(, reads $reads:literal)? {
            $( $(#[doc = $vdoc:literal])* $item:ident = $value:literal $($text:literal $($kind:literal $($read:ident)?)?)? ),* $(,)?
        }
    )*) => {
        $(
            $(#[doc = $doc])*
            pub mod $name {
                $( $(#[doc = $vdoc])* pub const $item: u8 = $value; )*

                /// The numbers of the items the table gives a name, in order (for [`super::field`]:
                /// the stored record's fields, so its slot count follows from the table).
                pub const NAMED: &[u8] = &[$($( { let _: &str = $text; $value }, )?)*];
            }
        )*

        /// The constant modules, for the TypeScript generator.
        #[cfg(not(target_arch = "wasm32"))]
        const CONSTS: &[Group] = &[$(
            Group {
                name: stringify!($name),
                doc: &[$($doc),*],
                prefix: $prefix,
                names: or_empty!($($names)?),
                ty: or_empty!($($ty)?),
                kinds: or_empty!($($kinds)?),
                reads: or_empty!($($reads)?),
                items: &[$( Item {
                    name: stringify!($item),
                    value: $value,
                    doc: &[$($vdoc),*],
                    text: or_empty!($($text)?),
                    kind: or_empty!($($($kind)?)?),
                    read: field_or_none!($($($($read)?)?)?),
                } ),*],
            }
        ),*];
    };
}

/// A list of statuses and its test, a `match` (no search of the list in the shipped wasm).
macro_rules! statuses {
    ($(#[doc = $doc:literal])* $name:ident, $is:ident = $($status:literal)|+) => {
        $(#[doc = $doc])*
        pub const $name: &[u16] = &[$($status),+];

        #[doc = concat!("Whether `status` is one of [`", stringify!($name), "`].")]
        pub const fn $is(status: u16) -> bool {
            matches!(status, $($status)|+)
        }
    };
}

/// The Engine's options: an enum of their indexes ([`Opt`]) and their specs ([`OPTIONS`]).
macro_rules! options {
    ($( $(#[doc = $doc:literal])* $variant:ident = $value:literal, $path:literal, $min:expr, $max:expr, $default:expr $(, $choices:literal)? ; )*) => {
        /// The Engine's options by index: the order of `Engine.create`'s array and the detail of
        /// `INVALID_OPTIONS`.
        #[repr(u8)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Opt {
            $( $(#[doc = $doc])* $variant = $value, )*
        }

        /// Every option's spec, by [`Opt`] index.
        pub const OPTIONS: &[OptionSpec] = &[$(
            OptionSpec {
                #[cfg(not(target_arch = "wasm32"))]
                path: $path,
                min: $min,
                max: $max,
                default: $default,
                #[cfg(not(target_arch = "wasm32"))]
                choices: or_empty!($($choices)?),
                #[cfg(not(target_arch = "wasm32"))]
                variant: stringify!($variant),
                #[cfg(not(target_arch = "wasm32"))]
                doc: &[$($doc),*],
            }
        ),*];
    };
}

/// One option of the Engine: where users set it, its accepted range and its default (whole numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionSpec {
    /// The option as users write it (`retry.maxAttempts`, `keyTtlMs`).
    #[cfg(not(target_arch = "wasm32"))]
    pub path: &'static str,
    /// Smallest value accepted.
    pub min: u64,
    /// Largest value accepted.
    pub max: u64,
    /// The value when users leave the option out.
    pub default: u64,
    /// For an option users give by name: the generated array of names (the value is its index).
    #[cfg(not(target_arch = "wasm32"))]
    pub choices: &'static str,
    /// The [`Opt`] variant's name (for the generator).
    #[cfg(not(target_arch = "wasm32"))]
    pub variant: &'static str,
    /// The [`Opt`] variant's doc (for the generator).
    #[cfg(not(target_arch = "wasm32"))]
    pub doc: &'static [&'static str],
}

/// Upper bound of any duration option (about 30 days), so no arithmetic overflows.
pub const MAX_DURATION_MS: u64 = 30 * 24 * 60 * 60 * 1000;
/// The default key lifetime: Stripe keeps keys for 24 hours.
pub const DEFAULT_KEY_TTL_MS: u64 = 24 * 60 * 60 * 1000;
/// The stored record's version this build writes: 2, a fingerprint keyed with the namespace's secret.
pub const RECORD_VERSION: u8 = 2;
/// The oldest record version still read: 1, an unkeyed SHA-256 fingerprint (the driver matches it
/// with the unkeyed hash).
pub const OLDEST_RECORD_VERSION: u8 = 1;
/// `Engine.load`'s number for a `lastStatus` of JSON `null` (no answer yet) or absent.
pub const NO_STATUS: i8 = -1;
/// Statuses retried with the same key. 423 Locked: some server libraries answer a key still in
/// flight so (after waiting for it), like 409 elsewhere.
pub const RETRIED_STATUSES: &[u16] = &[408, 409, 423, 425, 429, 500, 502, 503, 504];
/// The retried statuses that say a request with the key is still being processed: when a send runs
/// out of attempts on one, the driver's message says the server may hold the answer.
pub const IN_FLIGHT_STATUSES: &[u16] = &[409, 423];
statuses! {
    /// The retried statuses by which the server pushes back (a rate limit, a key in flight,
    /// overload): a retry after one costs the retry budget the throttling cost, not the transient one.
    THROTTLING_STATUSES, is_throttling_status = 409 | 423 | 429 | 503
}

options! {
    /// Attempts per `send`, including the first: requests sent with the key (a question about the
    /// key is not one).
    MaxAttempts = 0, "retry.maxAttempts", 1, 1_000, 8;
    /// The first backoff step, in ms.
    BaseDelayMs = 1, "retry.baseDelayMs", 0, MAX_DURATION_MS, 250;
    /// The longest single wait, in ms (at least `baseDelayMs`).
    MaxDelayMs = 2, "retry.maxDelayMs", 0, MAX_DURATION_MS, 20_000;
    /// A `send` gives up (keeping the key) after this many ms.
    TotalTimeoutMs = 3, "retry.totalTimeoutMs", 0, MAX_DURATION_MS, 120_000;
    /// One attempt is abandoned after this many ms.
    AttemptTimeoutMs = 4, "retry.attemptTimeoutMs", 1, MAX_DURATION_MS, 15_000;
    /// `Retry-After` is honoured up to this many ms.
    MaxRetryAfterMs = 5, "retry.maxRetryAfterMs", 0, MAX_DURATION_MS, 60_000;
    /// How backoff delays are randomised: given by name (`JITTERS`), the engine takes its index.
    Jitter = 6, "retry.jitter", 0, 3, 0, "JITTERS";
    /// Keys older than this many ms are reported expired rather than re-sent.
    KeyTtlMs = 7, "keyTtlMs", 1, MAX_DURATION_MS, DEFAULT_KEY_TTL_MS;
    /// The retry budget's capacity (0: no retries).
    RetryBudget = 8, "retryBudget", 0, 1_000_000, 500;
    /// The key header's form: given by name (`HEADER_FORMS`), the engine takes its index.
    HeaderForm = 9, "headerForm", 0, 1, 0, "HEADER_FORMS";
    /// Attempts of one intent across every `send` and reload; reaching it rejects
    /// `RETRIES_EXHAUSTED` (reason `maxTotalAttempts`, the key kept). 0: no limit.
    MaxTotalAttempts = 10, "retry.maxTotalAttempts", 0, 1_000_000, 0;
    /// 1 when the app configured how to ask the server about a key (set by the driver from that
    /// configuration, not an option of its own): the machine then asks where it would give up.
    Reconcile = 11, "", 0, 1, 0;
    /// The status a server answers replays with instead of its stored one (`replayStatus`, set by
    /// the driver after its own check; 0: none): such an answer is the stored outcome of the key.
    ReplayStatus = 12, "", 0, 599, 0;
}

enums! {
    /// What the driver does next: the number every call of the send loop returns.
    enum Action: "" {
        /// Send an attempt with the key header, abandoning it after field `TimeoutMs`.
        Send = 1,
        /// Wait field `DelayMs`, then event `Wake`.
        Wait = 2,
        /// Offline: wait for the network at most field `TimeoutMs`, then event `Online` or `OnlineTimeout`.
        WaitOnline = 3,
        /// A definite answer: resolve with the response (fields `Status`, `Ok`, `Replayed`).
        Done = 4,
        /// Give up with fields `ErrorCode` and `ErrorDetail` (the key is kept unless the error says otherwise).
        Fail = 5,
        /// Ask the server what became of the key (its key-status answer, within field `TimeoutMs`),
        /// then `onKeyStatus`.
        Reconcile = 6,
    }

    /// The send loop's events other than an answer (`Machine.on`).
    enum Event: "EV_" {
        /// Begins a send (deadline = now + totalTimeoutMs); reads `online`.
        Start = 0,
        /// The attempt failed below HTTP.
        NetworkError = 1,
        /// The attempt's timeout fired.
        Timeout = 2,
        /// The caller aborted.
        Abort = 3,
        /// A WAIT elapsed; reads `online`.
        Wake = 4,
        /// The network came back during WAIT_ONLINE.
        Online = 5,
        /// WAIT_ONLINE reached the deadline.
        OnlineTimeout = 6,
        /// The app asks the server about the key (`reconcile()`, between sends).
        Ask = 7,
    }

    /// The numbers `Machine.get` reads (booleans as 1/0; NaN for an unknown field).
    enum Field: "F_" {
        /// SEND: the attempt's timeout; WAIT_ONLINE: ms left until the deadline.
        TimeoutMs = 0,
        /// WAIT: the delay.
        DelayMs = 1,
        /// WAIT: why, a `Reason`.
        Reason = 2,
        /// Attempts of this send, including the one in flight.
        Attempt = 3,
        /// Attempts across every send of the intent (the record's `attempts`).
        TotalAttempts = 4,
        /// DONE: the answer's status.
        Status = 5,
        /// DONE: whether the status is 2xx.
        Ok = 6,
        /// DONE: whether the server replayed a stored answer.
        Replayed = 7,
        /// FAIL: the error code.
        ErrorCode = 8,
        /// FAIL: the error's detail.
        ErrorDetail = 9,
        /// The record: when the intent began (ms since the epoch).
        CreatedAt = 10,
        /// The record: its last change (ms since the epoch).
        UpdatedAt = 11,
        /// The record: the last answer's status (0: none, stored as JSON null).
        LastStatus = 12,
        /// The record: whether an attempt may have reached the server without a known outcome.
        Uncertain = 13,
        /// The record changed since the last `markSaved()`: save it before anything else.
        Dirty = 14,
        /// The record's state, a `State`.
        State = 15,
        /// Which record the `begin` that made this machine resumed, a `Resumed` (0: a new key).
        Resumed = 16,
        /// The record: its key was brought by the app (`begin`'s `key`), not minted here.
        Brought = 17,
    }

    /// Which record `begin` resumed (field `Resumed`): whether the intent's key existed before, and where.
    enum Resumed: "RESUMED_" {
        /// None: a new key.
        New = 0,
        /// The record this tab's storage holds (also every machine `Engine.load` makes).
        Stored = 1,
        /// The record of the key claimed across tabs (this storage lacks it: the machine is dirty).
        Claimed = 2,
    }

    /// Why a WAIT retries (field `Reason`).
    enum Reason: "REASON_" {
        /// No retry yet.
        None = 0,
        /// A network error.
        Network = 1,
        /// The attempt timed out.
        Timeout = 2,
        /// A retried status (field `LastStatus`).
        Status = 3,
        /// The server, asked about the key, said a request with it is still being processed.
        InFlight = 4,
    }

    /// Where an intent stands.
    enum State: "STATE_", names "STATES", type "IntentState" {
        /// Not yet definitely answered: the key is kept and the next `send` reuses it.
        Pending = 0 "pending",
        /// A 2xx answer; the key is retired.
        Succeeded = 1 "succeeded",
        /// A definite failure (a 4xx other than the retried ones); the key is retired.
        Failed = 2 "failed",
        /// Pending for longer than the key TTL: the server may have forgotten the key, so it is not re-sent.
        Expired = 3 "expired",
    }

    /// How a backoff delay is randomised. `exp = min(cap, base * 2^n)` for the n-th retry.
    enum Jitter: "JITTER_", names "JITTERS", type "Jitter" {
        /// `uniform(0, exp)`: the default; fewest calls under contention.
        Full = 0 "full",
        /// `exp/2 + uniform(0, exp/2)`: never retries immediately.
        Equal = 1 "equal",
        /// `min(cap, uniform(base, previous * 3))`: spreads out without a fixed schedule.
        Decorrelated = 2 "decorrelated",
        /// `exp` exactly: plain capped exponential backoff (every client retries in lockstep).
        None = 3 "none",
    }

    /// The key header's form (option `HeaderForm`).
    enum HeaderForm: "HEADER_", names "HEADER_FORMS", type "HeaderForm" {
        /// The raw key (Stripe: `Idempotency-Key: <uuid>`).
        Raw = 0 "raw",
        /// The IETF draft's sf-string (`"<uuid>"`).
        SfString = 1 "sf-string",
    }

    /// The caller's `shouldRetry(status)` verdict (`onResponse`'s last argument).
    enum Override: "OVERRIDE_" {
        /// Keep the built-in classification (`undefined`).
        None = 0,
        /// Retry with the same key (`true`).
        Retry = 1,
        /// A definite answer (`false`).
        Definite = 2,
    }

    /// What the server said of the key (`onKeyStatus`), and the detail of [`code::KEY_STATUS`] (never
    /// `Done` there).
    enum KeyStatus: "KEY_" {
        /// No usable answer (a network error, a timeout, a 5xx, HTML, a body not of the protocol's
        /// shape): never taken for "unknown".
        CouldNotAsk = 0,
        /// The key's request was done; its stored answer comes with it.
        Done = 1,
        /// A request with the key is being processed.
        InFlight = 2,
        /// The server has no record of the key.
        Unknown = 3,
    }

    /// What the sweep decided for one stored record.
    enum Sweep: "SWEEP_" {
        /// Not older than the TTL, or already expired: leave it.
        Keep = 0,
        /// A retired key (succeeded or failed) older than the TTL: delete the record.
        Remove = 1,
        /// A pending intent older than the TTL, now marked expired: save it (and tell the app).
        Expired = 2,
    }
}

consts! {
    /// The stable error codes, each with its name in `IdempotentFetchError.code` (never match on
    /// messages; README, "Errors"). Some are decided by the driver alone, never by the machine.
    mod code: "E_", type "ErrorCode" {
        /// No definite answer within the attempts, the deadline or the retry budget; the key is kept.
        RETRIES_EXHAUSTED = 1 "RETRIES_EXHAUSTED",
        /// The caller aborted; the key is kept.
        ABORTED = 2 "ABORTED",
        /// The server answered 422: this key was used with a different request.
        KEY_MISMATCH = 3 "KEY_MISMATCH",
        /// The intent id was begun before with a different request.
        INTENT_MISMATCH = 4 "INTENT_MISMATCH",
        /// The stored key is older than `keyTtlMs`; the server may have forgotten it.
        EXPIRED = 5 "EXPIRED",
        /// The body is a stream and cannot be sent twice (decided by the driver).
        BODY_NOT_REPLAYABLE = 6 "BODY_NOT_REPLAYABLE",
        /// An option is out of range; the detail is its [`super::Opt`] index.
        INVALID_OPTIONS = 7 "INVALID_OPTIONS",
        /// The intent id or the fingerprint is not usable.
        INVALID_REQUEST = 8 "INVALID_REQUEST",
        /// A stored record is corrupt (the detail names the field), or the CSPRNG failed.
        STORAGE = 9 "STORAGE",
        /// The intent is not in storage any more (decided by the driver).
        NOT_FOUND = 10 "NOT_FOUND",
        /// The server's key-status answer, when it is not "done" (the app's `reconcile()`): the detail
        /// is the [`super::KeyStatus`] it gave. Users see `RECONCILE_FAILED`.
        KEY_STATUS = 11 "RECONCILE_FAILED",
        /// The body is larger than `maxBodyBytes` (decided by the driver).
        BODY_TOO_LARGE = 12 "BODY_TOO_LARGE",
        /// `requireDurable`, and storage fell back to memory (decided by the driver).
        NOT_DURABLE = 13 "NOT_DURABLE",
        /// A bug: the driver called the machine out of order (the detail says how), or met an action it
        /// does not know. Never the user's fault.
        INTERNAL = 15 "INTERNAL",
    }

    /// Details of [`code::RETRIES_EXHAUSTED`]: which limit ended the send.
    mod exhausted: "EXHAUSTED_", names "EXHAUSTED_REASONS", type "ExhaustedReason" {
        /// `maxAttempts` attempts were made.
        MAX_ATTEMPTS = 1 "maxAttempts",
        /// `totalTimeoutMs` passed, or the next wait would pass it.
        DEADLINE = 2 "deadline",
        /// The client's retry budget is empty.
        BUDGET = 3 "budget",
        /// The intent reached `maxTotalAttempts` across all its sends.
        MAX_TOTAL_ATTEMPTS = 4 "maxTotalAttempts",
    }

    /// Details of [`code::EXPIRED`].
    mod expired: "EXPIRED_" {
        /// The server, asked, has no record of the key: past its retention that proves nothing.
        UNKNOWN_TO_SERVER = 1,
    }

    /// Details of [`code::INTENT_MISMATCH`]: whose key the request does not match (`Engine.begin`).
    mod mismatch: "MISMATCH_" {
        /// The record this tab's storage holds.
        STORED = 1,
        /// The record of the key claimed across tabs.
        CLAIMED = 2,
        /// The record this tab's storage holds has another key than the one brought.
        KEY_STORED = 3,
        /// The record of the key claimed across tabs has another key than the one brought.
        KEY_CLAIMED = 4,
    }

    /// Details of [`code::INVALID_REQUEST`].
    mod request: "REQUEST_" {
        /// The intent id is empty, longer than 256 bytes, or holds control characters.
        INTENT_ID = 1,
        /// The fingerprint is not 64 lowercase hex characters.
        FINGERPRINT = 2,
        /// A brought key is not 16 to 255 URL-unreserved characters (`A-Z a-z 0-9 - . _ ~`).
        KEY = 3,
    }

    /// Details of [`code::STORAGE`]: the stored record's fields, by the number `Engine.load` takes
    /// them at and the detail that names the one that failed validation; or the CSPRNG. The kinds
    /// are the JSON types the driver checks ("?": may be absent or null, and written only when it
    /// holds a value: 0 or false is left out). The last column is the [`Field`] the driver
    /// writes the field from (`Machine.get`; a `string` read so is a state name); the fields without
    /// one are the driver's own (the version, and the ids it keeps). A field added here is counted,
    /// checked for its type, given to `Engine.load` and written to storage with no other edit in
    /// the driver.
    mod field: "FIELD_", names "RECORD_FIELDS", kinds "RECORD_KINDS", reads "RECORD_READS" {
        /// `v`: not a record version this build reads.
        VERSION = 1 "v" "number",
        /// `id`: invalid, or not the id the record is stored under.
        ID = 2 "id" "string",
        /// `key`: not a lowercase hyphenated UUID v4 (a brought key: not 16 to 255 URL-unreserved
        /// characters).
        KEY = 3 "key" "string",
        /// `fingerprint`: not 64 lowercase hex characters.
        FINGERPRINT = 4 "fingerprint" "string",
        /// `createdAt`: not a whole number of ms in range.
        CREATED_AT = 5 "createdAt" "number" CreatedAt,
        /// `updatedAt`: not a whole number of ms in range, or before `createdAt`.
        UPDATED_AT = 6 "updatedAt" "number" UpdatedAt,
        /// `attempts`: not a whole number in `0..=2^32-1`.
        ATTEMPTS = 7 "attempts" "number" TotalAttempts,
        /// `state`: not one of the four states.
        STATE = 8 "state" "string" State,
        /// `lastStatus`: not an HTTP status `100..=599` (null or absent: none).
        LAST_STATUS = 9 "lastStatus" "number?" LastStatus,
        /// `uncertain`: not a boolean (absent: false).
        UNCERTAIN = 10 "uncertain" "boolean?" Uncertain,
        /// `brought`: not a boolean (absent: the key was minted here).
        BROUGHT = 11 "brought" "boolean?" Brought,
        /// The CSPRNG (`crypto.getRandomValues`) failed.
        CSPRNG = 32,
    }

    /// Details of [`code::INTERNAL`]: the call that came out of order.
    mod protocol: "PROTOCOL_" {
        /// An answer, network error or timeout while no attempt was in flight.
        NOT_SENDING = 1,
        /// Event `Wake` while no backoff wait was running.
        NOT_WAITING = 2,
        /// Event `Online` / `OnlineTimeout` while not waiting for the network.
        NOT_OFFLINE = 3,
        /// `start` or `ask` while a send is running.
        NOT_IDLE = 4,
        /// `onKeyStatus` while the server was not being asked.
        NOT_RECONCILING = 5,
        /// An event number the machine does not know.
        UNKNOWN_EVENT = 6,
        /// An action number the driver does not know.
        UNKNOWN_ACTION = 7,
    }
}

/// The number of options (the length of `Engine.create`'s array).
pub const OPTION_COUNT: usize = OPTIONS.len();
/// The length of `Engine.load`'s array of numbers: one slot per record field, by [`field`] number
/// (slot 0 unused), so a field added to the table's `field` rows is counted with no other edit.
pub const RECORD_SLOTS: usize = record_slots(field::NAMED);

/// One past the last record field's number; refuses (at compile time) record fields that are not
/// numbered one after another from [`field::VERSION`], since `Engine.load` and the driver index
/// both the array of numbers and `RECORD_FIELDS` by that number.
const fn record_slots(named: &[u8]) -> usize {
    assert!(!named.is_empty() && named[0] == field::VERSION, "the record's first field is its version");
    let mut i = 1;
    while i < named.len() {
        assert!(named[i] == named[i - 1] + 1, "record fields are numbered one after another");
        i += 1;
    }
    named[named.len() - 1] as usize + 1
}

/// A group of the table as the generator reads it.
#[cfg(not(target_arch = "wasm32"))]
struct Group {
    name: &'static str,
    doc: &'static [&'static str],
    prefix: &'static str,
    names: &'static str,
    ty: &'static str,
    kinds: &'static str,
    reads: &'static str,
    items: &'static [Item],
}

/// One entry of a [`Group`].
#[cfg(not(target_arch = "wasm32"))]
struct Item {
    name: &'static str,
    value: u8,
    doc: &'static [&'static str],
    text: &'static str,
    kind: &'static str,
    read: i16,
}

/// `NetworkError` -> `NETWORK_ERROR`; names already in upper case stay.
#[cfg(not(target_arch = "wasm32"))]
fn screaming(name: &str) -> alloc::string::String {
    let mut out = alloc::string::String::new();
    for (i, c) in name.char_indices() {
        if c.is_ascii_lowercase() {
            out.push(c.to_ascii_uppercase());
        } else {
            if i > 0 && c.is_ascii_uppercase() && name[..i].chars().last().is_some_and(|p| p.is_ascii_lowercase()) {
                out.push('_');
            }
            out.push(c);
        }
    }
    out
}

/// A doc comment from rustdoc lines (the leading space of each line dropped).
#[cfg(not(target_arch = "wasm32"))]
fn doc(lines: &[&str], indent: &str) -> alloc::string::String {
    let text: alloc::vec::Vec<&str> = lines.iter().map(|line| line.strip_prefix(' ').unwrap_or(line)).collect();
    if text.is_empty() {
        return alloc::string::String::new();
    }
    // Rust intra-doc links read as plain names in TypeScript.
    let text = text
        .join(" ")
        .replace("[`super::Opt`]", "`OPT_*`")
        .replace("[`super::", "`")
        .replace("[`code::", "`E_")
        .replace("[`", "`")
        .replace("`]", "`");
    alloc::format!("{indent}/** {text} */\n")
}

/// One stored record field as the table gives it (for native rigs that stand in for the driver).
#[cfg(not(target_arch = "wasm32"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordField {
    /// Its `FIELD_*` number: the slot of `Engine.load`'s numbers and the `STORAGE` detail.
    pub number: u8,
    /// Its name in the stored JSON.
    pub name: &'static str,
    /// Its JSON type ("?": may be absent or null, and written only when it holds a value).
    pub kind: &'static str,
    /// The [`Field`] it is written from; `None` for the driver's own (the version and the ids).
    pub read: Option<Field>,
}

/// The stored record's fields, in the stored order (the `field` rows that have a name).
#[cfg(not(target_arch = "wasm32"))]
pub fn record_fields() -> impl Iterator<Item = RecordField> {
    // The field rows are the one group whose rows name what they are written from.
    let fields = CONSTS.iter().filter(|group| !group.reads.is_empty()).flat_map(|group| group.items.iter());
    fields.filter(|item| !item.text.is_empty()).map(|item| RecordField {
        number: item.value,
        name: item.text,
        kind: item.kind,
        read: u8::try_from(item.read).ok().and_then(Field::from_u8),
    })
}

/// An option's default as users write it: the name of a choice (`"full"`), else the number.
#[cfg(not(target_arch = "wasm32"))]
pub fn option_default(spec: &OptionSpec) -> alloc::string::String {
    let names = ENUMS.iter().find(|group| !spec.choices.is_empty() && group.names == spec.choices);
    match names.and_then(|group| group.items.iter().find(|item| u64::from(item.value) == spec.default)) {
        Some(item) => alloc::format!("\"{}\"", item.text),
        None => alloc::format!("{}", spec.default),
    }
}

/// The public `RetryOptions` interface from the `retry.` rows of [`OPTIONS`]: each one's doc, range
/// and `@default` (the API reference's), and for a choice the union type of its names.
#[cfg(not(target_arch = "wasm32"))]
fn retry_options(out: &mut alloc::string::String) {
    use core::fmt::Write;
    out.push_str("\n/** How one `send` retries: attempts, backoff, jitter, timeouts (the `retry.` options). */\nexport interface RetryOptions {\n");
    for spec in OPTIONS {
        let Some(name) = spec.path.strip_prefix("retry.") else { continue };
        let choice = ENUMS.iter().find(|group| !spec.choices.is_empty() && group.names == spec.choices);
        let text = doc(spec.doc, "");
        let text = text.trim_start_matches("/** ").trim_end_matches(" */\n");
        let range = if choice.is_some() {
            alloc::string::String::new()
        } else {
            alloc::format!(" A whole number from {} to {}.", spec.min, spec.max)
        };
        let _ = write!(
            out,
            "  /**\n   * {text}{range}\n   * @default {}\n   */\n  {name}?: {};\n",
            option_default(spec),
            choice.map_or("number", |group| group.ty)
        );
    }
    out.push_str("}\n");
}

/// The TypeScript side of the contract: the text of `src/js/generated/contract.ts`.
#[cfg(not(target_arch = "wasm32"))]
pub fn typescript() -> alloc::string::String {
    use core::fmt::Write;
    let mut out = alloc::string::String::from(
        "// Generated from src/contract.rs by `IF_BLESS=1 cargo test --test contract`: do not edit.\n\
         // The numbers the wasm machine and the driver exchange (docs/WASM-BOUNDARY.md).\n",
    );
    for group in ENUMS.iter().chain(CONSTS) {
        let _ = write!(
            out,
            "\n// {}: {}\n",
            group.name,
            doc(group.doc, "").trim_start_matches("/** ").trim_end_matches(" */\n")
        );
        for item in group.items {
            out.push_str(&doc(item.doc, ""));
            let _ = writeln!(out, "export const {}{} = {};", group.prefix, screaming(item.name), item.value);
        }
        let named: alloc::vec::Vec<&Item> = group.items.iter().filter(|item| !item.text.is_empty()).collect();
        if !group.ty.is_empty() {
            let union = named.iter().map(|item| alloc::format!("\"{}\"", item.text)).collect::<alloc::vec::Vec<_>>();
            out.push_str(&doc(group.doc, ""));
            let _ = writeln!(out, "export type {} = {};", group.ty, union.join(" | "));
        }
        if !group.ty.is_empty() && group.names.is_empty() {
            // The names by item without an array of them (the error codes): a `const enum`, whose
            // members esbuild inlines as the strings, so the driver spells each name from here and
            // ships no table.
            let _ = writeln!(
                out,
                "/** The `{}` of each `{}*` item, by the item's name (the driver's machine-code -> name map; inlined, no table ships). */\nexport const enum {}Name {{",
                group.ty, group.prefix, group.ty
            );
            for item in &named {
                let _ = writeln!(
                    out,
                    "  /** `{}{}`'s name. */\n  {} = \"{}\",",
                    group.prefix,
                    screaming(item.name),
                    screaming(item.name),
                    item.text
                );
            }
            out.push_str("}\n");
        }
        if !group.names.is_empty() {
            // Indexed from the first named item's number, which the driver subtracts.
            let first = named[0].value;
            assert!(named.iter().enumerate().all(|(i, item)| item.value as usize == first as usize + i));
            let list = |f: fn(&Item) -> &str| {
                named.iter().map(|item| alloc::format!("\"{}\"", f(item))).collect::<alloc::vec::Vec<_>>().join(", ")
            };
            let _ = writeln!(
                out,
                "/** The names of `{}` from {}{} on. */",
                group.name,
                group.prefix,
                screaming(named[0].name)
            );
            let _ = writeln!(out, "export const {} = [{}] as const;", group.names, list(|item| item.text));
            if !group.kinds.is_empty() {
                let _ = writeln!(out, "/** The JSON type of each of `{}`. */", group.names);
                let _ = writeln!(out, "export const {} = [{}] as const;", group.kinds, list(|item| item.kind));
            }
            if !group.reads.is_empty() {
                // The driver names a string it reads as a number through `STATES`: the one such field.
                assert!(named.iter().all(|item| item.read < 0 || item.kind != "string" || item.text == "state"));
                let reads = named.iter().map(|item| alloc::format!("{}", item.read)).collect::<alloc::vec::Vec<_>>();
                let _ = writeln!(
                    out,
                    "/** The `F_*` field `Machine.get` reads each of `{}` by (-1: the driver's own). */",
                    group.names
                );
                let _ = writeln!(out, "export const {} = [{}] as const;", group.reads, reads.join(", "));
            }
        }
    }
    out.push_str("\n// Opt: the Engine's options by index: the order of `Engine.create`'s array and the detail of `INVALID_OPTIONS`.\n");
    for (i, spec) in OPTIONS.iter().enumerate() {
        out.push_str(&doc(spec.doc, ""));
        let _ = writeln!(out, "export const OPT_{} = {i};", screaming(spec.variant));
    }
    out.push_str(
        "/** Every option as `[name as users write it, min, max, default, names when given by name]`, by `OPT_*`. */\n\
         export const OPTIONS: readonly (readonly [string, number, number, number, (readonly string[])?])[] = [\n",
    );
    for spec in OPTIONS {
        let choices =
            if spec.choices.is_empty() { alloc::string::String::new() } else { alloc::format!(", {}", spec.choices) };
        let _ = writeln!(out, "  [\"{}\", {}, {}, {}{choices}],", spec.path, spec.min, spec.max, spec.default);
    }
    out.push_str("];\n");
    retry_options(&mut out);
    let _ = write!(
        out,
        "\n/** The stored record's version this build writes (2: a fingerprint keyed with the namespace's secret). */\n\
         export const RECORD_VERSION = {RECORD_VERSION};\n\
         /** `Engine.load`'s number for a `lastStatus` that is null or absent. */\n\
         export const NO_STATUS = {NO_STATUS};\n\
         /** The retried statuses that say a request with the key is still being processed. */\n\
         export const IN_FLIGHT_STATUSES: readonly number[] = {IN_FLIGHT_STATUSES:?};\n\
         /** The length of `Engine.load`'s array of numbers (one slot per `FIELD_*`). */\n\
         export const RECORD_SLOTS = {RECORD_SLOTS};\n"
    );
    out
}
