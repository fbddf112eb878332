//! The facts the TypeScript side of the Node half reads as values, in one table: the PostgreSQL
//! statements, the protocol's numbers, the header names and the names of the core's answers.
//!
//! `server/node/src/facts.ts` is generated from this file (a plain `const` per fact, the statements and
//! numbers as one `constants` object with its `Constants` interface, the answer names as union types).
//! The file is committed; `tests/facts.rs` fails when it differs from [`typescript`] or when another
//! source in server/node/src spells one of the table's strings in quotes, and
//! `IF_BLESS=1 cargo test -p idempotent-endpoint-node-core --test facts` rewrites it. To give the
//! TypeScript a new fact, add its row here and bless: nothing is copied by hand.

use std::fmt::Write;

use idempotent_endpoint::{
    defaults, inbox_sql, outbox_sql, phases, phases_sql, postgres_sql, DEFAULT_RETENTION, FENCED_FINGERPRINT,
    IDEMPOTENCY_KEY_HEADER, MAX_STORED_BODY_BYTES, REPLAYED_HEADER,
};

use crate::{messages, DECISIONS, REFUSALS};

/// One fact: its name in TypeScript, what it is (the doc comment there), its value.
pub struct Fact {
    /// The member or constant name in TypeScript.
    pub name: &'static str,
    /// What it is, one sentence or two, naming the Rust item it comes from.
    pub doc: &'static str,
    /// Its value.
    pub value: FactValue,
}

/// The value of a [`Fact`].
pub enum FactValue {
    /// A string (a statement, a name).
    Text(String),
    /// A whole number.
    Number(u64),
    /// Facts of one kind, as one object (the statements of one Rust module).
    Group(Vec<Fact>),
}

fn text(name: &'static str, doc: &'static str, value: impl Into<String>) -> Fact {
    Fact { name, doc, value: FactValue::Text(value.into()) }
}

fn number(name: &'static str, doc: &'static str, value: u64) -> Fact {
    Fact { name, doc, value: FactValue::Number(value) }
}

fn group(name: &'static str, doc: &'static str, facts: Vec<Fact>) -> Fact {
    Fact { name, doc, value: FactValue::Group(facts) }
}

/// A duration in whole milliseconds, as the TypeScript's options take it.
fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Lossless for every count the table holds (they are far below 2^53, JavaScript's exact integers).
fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// The members of `constants`: the statements the endpoint, the outbox and the inbox run, and the
/// protocol's numbers.
pub fn constants() -> Vec<Fact> {
    vec![
        group(
            "sql",
            "The key rows' statements (the Rust library's module `postgres_sql`, the very same text), `$1`... parameters.",
            vec![
                text("schema", "The key table and its indexes (`SCHEMA`).", postgres_sql::SCHEMA),
                text(
                    "claimKey",
                    "Takes the key's in-flight mark without waiting and, holding it, inserts the key row or replaces an expired one; one row `{ held, claimed }` (`CLAIM_KEY`).",
                    postgres_sql::CLAIM_KEY,
                ),
                text("lockHeld", "Whether any session holds the key's in-flight mark (`LOCK_HELD`).", postgres_sql::LOCK_HELD),
                text("selectRow", "The key row's fingerprint and answer (`SELECT_ROW`).", postgres_sql::SELECT_ROW),
                text("selectLiveRow", "The key row within the retention (`SELECT_LIVE_ROW`).", postgres_sql::SELECT_LIVE_ROW),
                text("storeAnswer", "Stores the work's answer on the key row (`STORE_ANSWER`).", postgres_sql::STORE_ANSWER),
                text(
                    "setLockTimeout",
                    "The lock timeout for the rest of the transaction (`SET_LOCK_TIMEOUT`).",
                    postgres_sql::SET_LOCK_TIMEOUT,
                ),
                text("sweep", "Deletes key rows past the retention (`SWEEP`).", postgres_sql::SWEEP),
            ],
        ),
        group(
            "outbox",
            "The outbox's statements (the Rust library's module `outbox_sql`, the very same text).",
            vec![
                text("schema", "The outbox table (`SCHEMA`).", outbox_sql::SCHEMA),
                text("enqueue", "Writes a message in the caller's transaction (`ENQUEUE`).", outbox_sql::ENQUEUE),
                text("claim", "Claims due messages with `FOR UPDATE SKIP LOCKED` (`CLAIM`).", outbox_sql::CLAIM),
                text("retry", "Schedules one message's next attempt (`RETRY`).", outbox_sql::RETRY),
                text("mark", "A pass's marks in one statement (`MARK`).", outbox_sql::MARK),
                text("backlog", "Undelivered messages and the oldest's enqueue time (`BACKLOG`).", outbox_sql::BACKLOG),
            ],
        ),
        group(
            "inbox",
            "The inbox's statements (the Rust library's module `inbox_sql`, the very same text).",
            vec![
                text("schema", "The inbox table (`SCHEMA`).", inbox_sql::SCHEMA),
                text("forgetExpired", "Deletes the record if it expired (`FORGET_EXPIRED`).", inbox_sql::FORGET_EXPIRED),
                text("insert", "Inserts the record unless one exists (`INSERT`).", inbox_sql::INSERT),
                text("selectAnswer", "The record's answer columns (`SELECT_ANSWER`).", inbox_sql::SELECT_ANSWER),
                text("storeAnswer", "Stores the work's answer on the record (`STORE_ANSWER`).", inbox_sql::STORE_ANSWER),
                text("sweep", "Deletes records past the retention (`SWEEP`).", inbox_sql::SWEEP),
                text("savepoint", "The savepoint the record and the work run in (`SAVEPOINT`).", inbox_sql::SAVEPOINT),
            ],
        ),
        group(
            "phases",
            "The atomic phases' statements (the Rust library's module `phases_sql`, the very same text) and the points at either end.",
            vec![
                text("started", "The recovery point of a new row (`phases::STARTED`).", phases::STARTED),
                text("finished", "The recovery point of a row with its answer (`phases::FINISHED`).", phases::FINISHED),
                text("forgetExpired", "Deletes the key's row if it expired (`postgres_sql::FORGET_EXPIRED`).", postgres_sql::FORGET_EXPIRED),
                text("insertStarted", "Inserts a new row at the first point, held (`INSERT_STARTED`).", phases_sql::INSERT_STARTED),
                text("selectForBegin", "The existing row, locked for the decision (`SELECT_FOR_BEGIN`).", phases_sql::SELECT_FOR_BEGIN),
                text("takeOver", "Takes a row over with a new lease (`TAKE_OVER`).", phases_sql::TAKE_OVER),
                text("checkLease", "The lease token of an unfinished row, locked (`CHECK_LEASE`).", phases_sql::CHECK_LEASE),
                text("advance", "Moves the row to a point, renewing the lease (`ADVANCE`).", phases_sql::ADVANCE),
                text("finish", "Stores the answer and ends the lease (`FINISH`).", phases_sql::FINISH),
                text("release", "Ends a lease at once (`RELEASE`).", phases_sql::RELEASE),
                text("abandon", "Deletes a held row still at the first point (`ABANDON`).", phases_sql::ABANDON),
                text("unfinished", "The completer's query (`UNFINISHED`).", phases_sql::UNFINISHED),
                text(
                    "setKeyLockTimeout",
                    "Bounds the transaction's waits for a key row, keeping the session's own `lock_timeout` (`postgres_sql::SET_KEY_LOCK_TIMEOUT`).",
                    postgres_sql::SET_KEY_LOCK_TIMEOUT,
                ),
            ],
        ),
        number(
            "retryRandomBytes",
            "How many random bytes the outbox's retry delay draws from at most.",
            count(messages::RANDOM_BYTES),
        ),
        text(
            "settleLockTimeout",
            "The `lock_timeout` a settle waits for a key row held by another transaction (`postgres_sql::settle_lock_timeout`).",
            postgres_sql::settle_lock_timeout(),
        ),
        text(
            "lockNotAvailable",
            "The SQLSTATE of a statement that gave up waiting for a lock (`postgres_sql::LOCK_NOT_AVAILABLE`).",
            postgres_sql::LOCK_NOT_AVAILABLE,
        ),
        text(
            "queryCanceled",
            "The SQLSTATE of a statement the session's `statement_timeout` ended (`postgres_sql::QUERY_CANCELED`).",
            postgres_sql::QUERY_CANCELED,
        ),
        text(
            "keyLockTimeout",
            "How long a phase's statement waits for a key row another transaction holds (`postgres_sql::key_lock_timeout`).",
            postgres_sql::key_lock_timeout(),
        ),
        text("fencedFingerprint", "The fingerprint stored on a fence row (`FENCED_FINGERPRINT`).", FENCED_FINGERPRINT),
        number(
            "defaultRetentionSecs",
            "The default retention of a key row, in seconds (`DEFAULT_RETENTION`).",
            DEFAULT_RETENTION.as_secs(),
        ),
        number(
            "maxStoredBodyBytes",
            "The largest answer body a key row stores, in bytes (`MAX_STORED_BODY_BYTES`).",
            count(MAX_STORED_BODY_BYTES),
        ),
        number(
            "bodyTimeoutMs",
            "How long a request's whole body may take to arrive by default, in milliseconds (`defaults::BODY_DEADLINE`).",
            millis(defaults::BODY_DEADLINE),
        ),
        group(
            "outboxWorker",
            "The outbox worker's defaults (the Rust library's module `defaults`, as its `outbox::Worker` has them).",
            vec![
                number("leaseMs", "The claim on a message, in ms (`OUTBOX_LEASE`).", millis(defaults::OUTBOX_LEASE)),
                number("pollMs", "How often an idle worker looks, in ms (`OUTBOX_POLL`).", millis(defaults::OUTBOX_POLL)),
                number("baseDelayMs", "The first retry's backoff step, in ms (`OUTBOX_BASE_DELAY`).", millis(defaults::OUTBOX_BASE_DELAY)),
                number("maxDelayMs", "The longest retry wait, in ms (`OUTBOX_MAX_DELAY`).", millis(defaults::OUTBOX_MAX_DELAY)),
                number("batch", "Messages per pass (`OUTBOX_BATCH`).", u64::try_from(defaults::OUTBOX_BATCH).unwrap_or(0)),
                number("concurrency", "Deliveries at once, at most (`OUTBOX_CONCURRENCY`).", count(defaults::OUTBOX_CONCURRENCY)),
            ],
        ),
        number(
            "maxKeyChars",
            "The longest key, in characters (`key::MAX_KEY_CHARS`).",
            count(idempotent_endpoint::key::MAX_KEY_CHARS),
        ),
    ]
}

/// The names the TypeScript spells as plain constants: the protocol's header names.
pub fn names() -> Vec<Fact> {
    vec![
        text(
            "IDEMPOTENCY_KEY_HEADER",
            "The request header that carries the key, lowercase (`IDEMPOTENCY_KEY_HEADER`); the outbox sends a message's id in it too.",
            IDEMPOTENCY_KEY_HEADER,
        ),
        text(
            "REPLAYED_HEADER",
            "The header marking a replayed answer, lowercase (`REPLAYED_HEADER`).",
            REPLAYED_HEADER,
        ),
    ]
}

/// A union type of names the core answers with or takes: its TypeScript name, doc and members.
pub struct Union {
    /// The type's name.
    pub name: &'static str,
    /// What it is.
    pub doc: &'static str,
    /// Its members, in order.
    pub members: &'static [&'static str],
}

/// The names of the core's answers that the TypeScript matches on.
pub const UNIONS: &[Union] = &[
    Union {
        name: "Decision",
        doc: "The decision for a request whose key row exists (`decide`): replay the stored answer, 422 for another request, 409 while in flight, 410 for a fence.",
        members: &DECISIONS,
    },
    Union {
        name: "RefusalKind",
        doc: "Input refused before any key row is written (`problemAnswer`).",
        members: &REFUSALS,
    },
];

/// A string as a TypeScript literal: JSON's escaping, which TypeScript reads the same.
fn literal(value: &str) -> String {
    serde_json::Value::String(value.to_owned()).to_string()
}

fn doc(out: &mut String, indent: &str, text: &str) {
    let _ = writeln!(out, "{indent}/** {text} */");
}

fn interface(out: &mut String, facts: &[Fact], indent: &str) {
    for fact in facts {
        doc(out, indent, fact.doc);
        match &fact.value {
            FactValue::Text(_) => {
                let _ = writeln!(out, "{indent}readonly {}: string;", fact.name);
            }
            FactValue::Number(_) => {
                let _ = writeln!(out, "{indent}readonly {}: number;", fact.name);
            }
            FactValue::Group(members) => {
                let _ = writeln!(out, "{indent}readonly {}: {{", fact.name);
                interface(out, members, &format!("{indent}  "));
                let _ = writeln!(out, "{indent}}};");
            }
        }
    }
}

fn object(out: &mut String, facts: &[Fact], indent: &str) {
    for fact in facts {
        match &fact.value {
            FactValue::Text(value) => {
                let _ = writeln!(out, "{indent}{}: {},", fact.name, literal(value));
            }
            FactValue::Number(value) => {
                let _ = writeln!(out, "{indent}{}: {value},", fact.name);
            }
            FactValue::Group(members) => {
                let _ = writeln!(out, "{indent}{}: {{", fact.name);
                object(out, members, &format!("{indent}  "));
                let _ = writeln!(out, "{indent}}},");
            }
        }
    }
}

/// The text of `server/node/src/facts.ts`.
pub fn typescript() -> String {
    let mut out = String::from(
        "// Generated from server/node/core/src/facts.rs by\n\
         // `IF_BLESS=1 cargo test -p idempotent-endpoint-node-core --test facts`: do not edit.\n\
         // The Rust library's statements, numbers and names, as the Node half reads them.\n\n",
    );
    let constants = constants();
    doc(&mut out, "", "The PostgreSQL statements (the Rust library's, the very same text; each member names its constant) and the protocol's numbers.");
    out.push_str("export interface Constants {\n");
    interface(&mut out, &constants, "  ");
    out.push_str("}\n\n");
    doc(&mut out, "", "The statements and numbers.");
    out.push_str("export const constants: Constants = {\n");
    object(&mut out, &constants, "  ");
    out.push_str("};\n");
    for fact in names() {
        out.push('\n');
        doc(&mut out, "", fact.doc);
        match &fact.value {
            FactValue::Text(value) => {
                let _ = writeln!(out, "export const {} = {};", fact.name, literal(value));
            }
            FactValue::Number(value) => {
                let _ = writeln!(out, "export const {} = {value};", fact.name);
            }
            FactValue::Group(members) => {
                let _ = writeln!(out, "export const {} = {{", fact.name);
                object(&mut out, members, "  ");
                out.push_str("} as const;\n");
            }
        }
    }
    for union in UNIONS {
        out.push('\n');
        doc(&mut out, "", union.doc);
        let members: Vec<String> = union.members.iter().map(|m| literal(m)).collect();
        let _ = writeln!(out, "export type {} = {};", union.name, members.join(" | "));
    }
    out
}
