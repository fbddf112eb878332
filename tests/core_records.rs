//! What is stored and how it is checked when read back: the values of a stored record (the
//! machine's half of the codec; the driver checks the JSON types), keys, fingerprints, tampered
//! storage through the reference driver, the sweep, and the stable error numbers.
#![cfg(not(target_arch = "wasm32"))]

#[path = "core/support.rs"]
mod support;

use std::collections::HashSet;

use idempotent_fetch::contract::{record_fields, RECORD_SLOTS};
use idempotent_fetch::machine::error::{code, exhausted, field, protocol, request};
use idempotent_fetch::machine::record::{
    is_valid_intent_id, whole, MAX_SAFE_INTEGER, OLDEST_RECORD_VERSION, RECORD_VERSION,
};
use idempotent_fetch::machine::{fingerprint, Error, Key, OsRandom, State, StoredFields};
use serde_json::json;
use support::*;

const ID: &str = "checkout:cart-42";
const KEY: &str = "8e03978e-40d5-43e8-bc93-6894a57f9324";

fn fields() -> StoredFields<'static> {
    StoredFields {
        v: 1.0,
        id: ID,
        key: KEY,
        fingerprint: "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1",
        created_at: T0 as f64,
        updated_at: (T0 + 5) as f64,
        attempts: 2.0,
        state: f64::from(State::Pending as u8),
        last_status: 503.0,
        uncertain: 0.0,
        brought: 0.0,
    }
}

/// The field a tampered record is rejected for.
fn rejected(edit: impl FnOnce(&mut StoredFields<'static>)) -> u8 {
    let mut f = fields();
    edit(&mut f);
    let err = f.validate(ID).expect_err("tampered record accepted");
    assert_eq!(err.code, code::STORAGE);
    err.detail
}

// ---------------------------------------------------------------------------------------------
// Record values

#[test]
fn a_valid_record_reads_back_with_every_value() {
    let record = fields().validate(ID).unwrap();
    assert_eq!((record.id.as_str(), record.key.as_str()), (ID, KEY));
    assert_eq!((record.created_at, record.updated_at, record.attempts), (T0, T0 + 5, 2));
    assert_eq!((record.state, record.last_status), (State::Pending, 503));
    assert_eq!((OLDEST_RECORD_VERSION, RECORD_VERSION), (1, 2));
}

#[test]
fn every_record_field_reads_back_as_the_driver_loaded_it() {
    // The numbers `Engine.load` takes (by FIELD_* slot) and the ones the driver writes back (each
    // field from the `Field` its row names) agree for every field of the table, each holding a value.
    let mut numbers = [0.0; RECORD_SLOTS];
    for (slot, value) in [
        (field::VERSION, 1.0),
        (field::CREATED_AT, T0 as f64),
        (field::UPDATED_AT, (T0 + 5) as f64),
        (field::ATTEMPTS, 2.0),
        (field::STATE, f64::from(State::Failed as u8)),
        (field::LAST_STATUS, 503.0),
        (field::UNCERTAIN, 1.0),
        (field::BROUGHT, 1.0),
    ] {
        numbers[usize::from(slot)] = value;
    }
    let fingerprint = "a1".repeat(32);
    let engine = idempotent_fetch::machine::Engine::new(Default::default(), Box::new(OsRandom)).unwrap();
    let machine = engine.load(ID, &StoredFields::from_slots(ID, KEY, &fingerprint, &numbers)).unwrap();
    assert_eq!(machine.stored_numbers(1), numbers);
    // Every record field the machine keeps is read by a Field (only the driver's own are not).
    let own: Vec<&str> = record_fields().filter(|row| row.read.is_none()).map(|row| row.name).collect();
    assert_eq!(own, ["v", "id", "key", "fingerprint"]);
}

#[test]
fn intent_states_have_lowercase_names_and_know_which_are_terminal() {
    let states = [
        (State::Pending, "pending", false),
        (State::Succeeded, "succeeded", true),
        (State::Failed, "failed", true),
        (State::Expired, "expired", false),
    ];
    for (state, name, terminal) in states {
        assert_eq!(state.as_str(), name);
        assert_eq!(state.is_terminal(), terminal);
    }
}

#[test]
fn validate_rejects_another_version() {
    for v in [0.0, 3.0, 1.5, -1.0, f64::NAN, f64::INFINITY] {
        assert_eq!(rejected(|f| f.v = v), field::VERSION, "{v}");
    }
}

#[test]
fn validate_rejects_keys_that_could_inject_or_are_not_v4() {
    let bad_keys = [
        "8e03978e-40d5-43e8-bc93-6894a57f9324\r\nX-Evil: 1", // header injection
        "8e03978e-40d5-43e8-bc93-6894a57f9324\n",
        "8E03978E-40D5-43E8-BC93-6894A57F9324", // uppercase
        "8e03978e-40d5-13e8-bc93-6894a57f9324", // version 1
        "8e03978e-40d5-43e8-7c93-6894a57f9324", // NCS variant
        "8e03978e-40d5-43e8-cc93-6894a57f9324", // Microsoft variant
        "8e03978e40d543e8bc936894a57f9324",     // simple form
        "{8e03978e-40d5-43e8-bc93-6894a57f9324}",
        "urn:uuid:8e03978e-40d5-43e8-bc93-6894a57f9324",
        " 8e03978e-40d5-43e8-bc93-6894a57f9324",
        "8e03978e_40d5-43e8-bc93-6894a57f9324",
        "00000000-0000-0000-0000-000000000000",
        "",
        "not-a-key",
        "\"8e03978e-40d5-43e8-bc93-6894a57f9324\"",
    ];
    for key in bad_keys {
        assert_eq!(rejected(|f| f.key = key), field::KEY, "{key:?}");
    }
}

#[test]
fn validate_rejects_a_bad_fingerprint() {
    let bad: [&'static str; 6] = [
        "",
        "abc",
        "gggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggg",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    ];
    for fingerprint in bad {
        assert_eq!(rejected(|f| f.fingerprint = fingerprint), field::FINGERPRINT, "{fingerprint:?}");
    }
}

#[test]
fn validate_rejects_an_id_mismatch_or_a_bad_id() {
    assert_eq!(rejected(|f| f.id = "checkout:cart-43"), field::ID);
    assert_eq!(fields().validate("other-slot").unwrap_err(), Error::new(code::STORAGE, field::ID));
    for id in ["", "x\u{0}y", "a\nb"] {
        let mut f = fields();
        f.id = id;
        assert_eq!(f.validate(id).unwrap_err().detail, field::ID, "{id:?}");
    }
    let long = "x".repeat(257);
    let mut f = fields();
    f.id = &long;
    assert_eq!(f.validate(&long).unwrap_err().detail, field::ID);
}

#[test]
fn validate_rejects_impossible_times_and_counts() {
    assert_eq!(rejected(|f| f.updated_at = f.created_at - 1.0), field::UPDATED_AT);
    for bad in [-1.0, 0.5, f64::NAN, f64::INFINITY, (MAX_SAFE_INTEGER + 1) as f64 * 2.0] {
        assert_eq!(rejected(|f| f.created_at = bad), field::CREATED_AT, "{bad}");
        assert_eq!(rejected(|f| f.updated_at = bad), field::UPDATED_AT, "{bad}");
    }
    for bad in [-1.0, 1.5, 4_294_967_296.0, f64::NAN] {
        assert_eq!(rejected(|f| f.attempts = bad), field::ATTEMPTS, "{bad}");
    }
    let mut f = fields();
    f.attempts = f64::from(u32::MAX);
    assert_eq!(f.validate(ID).unwrap().attempts, u32::MAX);
}

#[test]
fn validate_rejects_an_unknown_state() {
    // The driver maps the stored name to its index in `STATES`, -1 for a name it does not know.
    for state in [-1.0, State::ALL.len() as f64, 0.5, f64::NAN, 256.0] {
        assert_eq!(rejected(|f| f.state = state), field::STATE, "{state:?}");
    }
}

#[test]
fn validate_rejects_a_status_that_is_not_http() {
    // 0 is no HTTP status: "none" is NO_STATUS (-1), what the driver passes for JSON null.
    for status in [999.0, 99.0, 600.0, 1.0, 0.0, -2.0, 200.5, 70_000.0, f64::NAN] {
        assert_eq!(rejected(|f| f.last_status = status), field::LAST_STATUS, "{status}");
    }
    for (status, read) in [(-1.0, 0), (100.0, 100), (599.0, 599)] {
        let mut f = fields();
        f.last_status = status;
        assert_eq!(f.validate(ID).map(|r| r.last_status), Ok(read), "{status}");
    }
}

#[test]
fn whole_numbers_are_exact_and_in_range() {
    assert_eq!(whole(0.0, 10), Some(0));
    assert_eq!(whole(-0.0, 10), Some(0));
    assert_eq!(whole(10.0, 10), Some(10));
    assert_eq!(whole(MAX_SAFE_INTEGER as f64, u64::MAX), Some(MAX_SAFE_INTEGER));
    for bad in [11.0, -1.0, 0.1, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        assert_eq!(whole(bad, 10), None, "{bad}");
    }
    for beyond_exact in [2f64.powi(53), 2f64.powi(64), f64::MAX] {
        assert_eq!(whole(beyond_exact, u64::MAX), None, "{beyond_exact}");
    }
}

#[test]
fn intent_ids_are_1_to_256_bytes_without_control_characters() {
    assert!(is_valid_intent_id("checkout:cart-42"));
    assert!(is_valid_intent_id(&"x".repeat(256)));
    assert!(is_valid_intent_id("panier:élan"));
    // Around the C1 controls (UTF-8 0xC2 0x80 to 0xC2 0x9F): no-break space and the cent sign are not controls.
    assert!(is_valid_intent_id("nbsp\u{a0}cent\u{a2}~\u{7e}"));
    for id in ["", "a\nb", "tab\there", "nul\u{0}", "del\u{7f}", "c1\u{85}", "c1\u{80}", "c1\u{9f}", "end\u{1f}"] {
        assert!(!is_valid_intent_id(id), "{id:?}");
    }
    assert!(!is_valid_intent_id(&"x".repeat(257)));
}

// ---------------------------------------------------------------------------------------------
// Stored JSON through the reference driver

#[test]
fn the_driver_writes_the_documented_fields_and_nothing_else() {
    // A new record: every required field of the table, no optional one (none holds a value yet).
    let rig = Rig::new(1);
    let key = rig.begin_checkout(ID);
    let value: serde_json::Value = serde_json::from_str(&rig.store.raw(ID).unwrap()).unwrap();
    let names: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
    let mut required: Vec<&str> = record_fields().filter(|row| !row.kind.ends_with('?')).map(|row| row.name).collect();
    required.sort_unstable();
    assert_eq!(names, required);
    assert_eq!(
        required,
        ["attempts", "createdAt", "fingerprint", "id", "key", "state", "updatedAt", "v"],
        "the documented required fields"
    );
    assert_eq!(value["v"], json!(1));
    assert_eq!(value["state"], json!("pending"));
    assert_eq!(value["key"], json!(key));
    assert_eq!(value.get("lastStatus"), None, "no status yet: left out");
}

#[test]
fn a_record_copied_into_another_slot_is_rejected() {
    let rig = Rig::new(5);
    rig.begin_checkout(ID);
    // Tampered storage: the record of one intent appears under another intent's slot.
    rig.store.set_raw("checkout:cart-43", &rig.store.raw(ID).unwrap());
    assert_eq!(rig.load("checkout:cart-43").unwrap_err(), LoadError::Field(field::ID));
    assert_eq!(rig.send("checkout:cart-43").unwrap_err().code, code::STORAGE);
    assert_eq!(rig.transport.calls(), 0);
}

#[test]
fn reload_resumes_the_same_key() {
    let mut first = Rig::new(1);
    first.policy.max_attempts = 2;
    let key = first.begin_checkout(ID);
    first.transport.always(status(503));
    assert_eq!(first.send(ID).unwrap_err().detail, exhausted::MAX_ATTEMPTS);
    assert!(first.store.raw(ID).unwrap().contains(&key));

    let second = first.reload(2);
    assert_eq!(second.begin_checkout(ID), key);
    second.send(ID).unwrap();
    assert_eq!(second.transport.keys(), vec![key]);
    assert_eq!(second.record(ID).attempts, 3);
}

#[test]
fn tampering_is_rejected_and_nothing_is_sent() {
    type Tamper = Box<dyn Fn(&mut serde_json::Value)>;
    let tamperings: Vec<(&str, Tamper, LoadError)> = vec![
        ("future version", Box::new(|v| v["v"] = json!(3)), LoadError::Field(field::VERSION)),
        ("CRLF key", Box::new(|v| v["key"] = json!(format!("{KEY}\r\nX: 1"))), LoadError::Field(field::KEY)),
        ("uppercase key", Box::new(|v| v["key"] = json!(KEY.to_uppercase())), LoadError::Field(field::KEY)),
        (
            "v1 key",
            Box::new(|v| v["key"] = json!("8e03978e-40d5-11e8-bc93-6894a57f9324")),
            LoadError::Field(field::KEY),
        ),
        ("junk key", Box::new(|v| v["key"] = json!("<script>")), LoadError::Field(field::KEY)),
        ("bad fingerprint", Box::new(|v| v["fingerprint"] = json!("00")), LoadError::Field(field::FINGERPRINT)),
        ("id mismatch", Box::new(|v| v["id"] = json!("checkout:cart-43")), LoadError::Field(field::ID)),
        ("time travel", Box::new(|v| v["updatedAt"] = json!(0)), LoadError::Field(field::UPDATED_AT)),
        ("negative attempts", Box::new(|v| v["attempts"] = json!(-1)), LoadError::Field(field::ATTEMPTS)),
        ("state", Box::new(|v| v["state"] = json!("done")), LoadError::Field(field::STATE)),
        ("status 999", Box::new(|v| v["lastStatus"] = json!(999)), LoadError::Field(field::LAST_STATUS)),
        ("unknown field", Box::new(|v| v["cardNumber"] = json!("4242")), LoadError::Malformed("".into())),
        (
            "missing field",
            Box::new(|v| drop(v.as_object_mut().unwrap().remove("key"))),
            LoadError::Malformed("".into()),
        ),
        ("wrong type", Box::new(|v| v["createdAt"] = json!("yesterday")), LoadError::Malformed("".into())),
    ];
    for (name, tamper, expected) in tamperings {
        let rig = Rig::new(3);
        rig.begin_checkout(ID);
        rig.store.tamper(ID, |v| tamper(v));
        match (rig.load(ID), &expected) {
            (Err(LoadError::Malformed(_)), LoadError::Malformed(_)) => {}
            (got, _) => assert_eq!(got.map(|_| ()), Err(expected.clone()), "{name}"),
        }
        let err = rig.send(ID).unwrap_err();
        assert_eq!(err.code, code::STORAGE, "{name}");
        assert_eq!(rig.transport.calls(), 0, "{name}: sent");
        assert_eq!(rig.begin(ID, &checkout()).unwrap_err().code, code::STORAGE, "{name}: begin");
    }
}

#[test]
fn garbage_is_rejected() {
    let rig = Rig::new(4);
    for text in ["", "{", "null", "\"a string\"", "{\"v\":1}", "[]"] {
        rig.store.set_raw(ID, text);
        assert_eq!(rig.send(ID).unwrap_err().code, code::STORAGE, "{text:?}");
    }
    assert_eq!(rig.transport.calls(), 0);
}

#[test]
fn begin_refuses_a_stored_record_of_another_intent() {
    // The driver hands `begin` what it loaded; a record of another id is a driver or storage bug.
    let rig = Rig::new(6);
    rig.begin_checkout("a");
    let engine = rig.engine();
    let other = rig.store.load(&engine, "a").unwrap().unwrap();
    let err = engine.begin("b", &checkout(), T0, false, Some(&other)).err().unwrap();
    assert_eq!(err, Error::new(code::STORAGE, field::ID));
    // With `replace` the stored record does not matter.
    assert!(engine.begin("b", &checkout(), T0, true, Some(&other)).is_ok());
}

#[test]
fn begin_rejects_a_malformed_fingerprint() {
    let rig = Rig::new(7);
    for fingerprint in ["", "zz", &"A1".repeat(32), &"a1".repeat(33)] {
        let err = rig.begin(ID, fingerprint).unwrap_err();
        assert_eq!((err.code, err.detail), (code::INVALID_REQUEST, request::FINGERPRINT), "{fingerprint:?}");
    }
    let err = rig.begin("", "zz").unwrap_err();
    assert_eq!(err.detail, request::INTENT_ID, "the id is checked first");
}

// ---------------------------------------------------------------------------------------------
// Keys

#[test]
fn generated_keys_are_distinct_canonical_v4() {
    let mut seen = HashSet::new();
    for _ in 0..1000 {
        let key = Key::generate(&OsRandom).unwrap();
        let uuid = uuid::Uuid::parse_str(key.as_str()).unwrap();
        assert_eq!(uuid.get_version_num(), 4);
        assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122);
        assert_eq!(Key::parse(key.as_str()), Some(key.clone()));
        assert!(key.as_str().bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase() || b == b'-'));
        assert!(seen.insert(key.as_str().to_owned()), "duplicate key {key:?}");
    }
}

#[test]
fn keys_come_from_the_random_source() {
    assert_eq!(Key::generate(&FixedRandom(0)).unwrap().as_str(), "00000000-0000-4000-8000-000000000000");
    assert_eq!(Key::generate(&FixedRandom(u64::MAX)).unwrap().as_str(), "ffffffff-ffff-4fff-bfff-ffffffffffff");
    assert!(Key::generate(&FailingRandom::after(0)).is_err());
}

#[test]
fn key_header_forms() {
    let key = Key::parse(KEY).unwrap();
    assert_eq!(key.as_str(), KEY);
    assert_eq!(key.header(false), KEY);
    assert_eq!(key.header(true), format!("\"{KEY}\""));
}

#[test]
fn key_parse_rejects_non_canonical_text() {
    for text in
        [&KEY.to_uppercase(), "8e03978e40d543e8bc936894a57f9324", "8e03978e-40d5-53e8-bc93-6894a57f9324", "x", ""]
    {
        assert_eq!(Key::parse(text), None, "{text:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Fingerprints (computed by the driver; checked and compared here)

#[test]
fn fingerprint_must_be_64_lowercase_hex() {
    let good = "cbdda195dbcc57208bc7490ca55b156e07f24018a7c4c69d7b026e031fc3a2ea";
    assert!(fingerprint::is_valid(good));
    assert!(!fingerprint::is_valid(&good.to_uppercase()));
    assert!(!fingerprint::is_valid(&good[1..]));
    assert!(!fingerprint::is_valid(&format!("{good}0")));
    assert!(!fingerprint::is_valid(""));
    assert!(!fingerprint::is_valid(&good.replace('c', "g")));
}

// ---------------------------------------------------------------------------------------------
// Sweep

fn stored(rig: &Rig, id: &str, state: &str, created_at: u64) {
    let key = Key::generate(&OsRandom).unwrap();
    let value = json!({
        "v": 1, "id": id, "key": key.as_str(), "fingerprint": checkout(), "createdAt": created_at,
        "updatedAt": created_at, "attempts": 1, "state": state, "lastStatus": null,
    });
    rig.store.set_raw(id, &value.to_string());
}

#[test]
fn sweep_removes_old_terminal_records_expires_old_pending_and_keeps_young_ones() {
    let rig = Rig::new(1);
    let now = T0 + 10 * DAY;
    let old = now - DAY - 1;
    let young = now - DAY + HOUR;
    stored(&rig, "old-succeeded", "succeeded", old);
    stored(&rig, "old-failed", "failed", old);
    stored(&rig, "old-pending", "pending", old);
    stored(&rig, "old-expired", "expired", old);
    stored(&rig, "young-succeeded", "succeeded", young);
    stored(&rig, "young-failed", "failed", young);
    stored(&rig, "young-pending", "pending", young);
    stored(&rig, "exactly-ttl", "succeeded", now - DAY);

    rig.clock.set(now);
    assert_eq!(rig.sweep(), (2, 1));

    let state = |id: &str| rig.load(id).unwrap().map(|r| r.state);
    assert_eq!(state("old-succeeded"), None);
    assert_eq!(state("old-failed"), None);
    assert_eq!(state("old-pending"), Some(State::Expired), "kept so the app can reconcile");
    assert_eq!(rig.record("old-pending").updated_at, now);
    assert_eq!(state("old-expired"), Some(State::Expired));
    assert_eq!(state("young-succeeded"), Some(State::Succeeded));
    assert_eq!(state("young-failed"), Some(State::Failed));
    assert_eq!(state("young-pending"), Some(State::Pending));
    assert_eq!(state("exactly-ttl"), Some(State::Succeeded));

    // A second sweep has nothing left to do.
    assert_eq!(rig.sweep(), (0, 0));
}

#[test]
fn sweep_leaves_corrupt_records_alone() {
    let rig = Rig::new(2);
    stored(&rig, "old-succeeded", "succeeded", T0);
    rig.store.set_raw("bad", "{\"v\":1,\"key\":\"junk\"}");
    rig.clock.set(T0 + 2 * DAY);
    assert_eq!(rig.sweep(), (1, 0));
    assert!(rig.store.raw("bad").is_some());
}

#[test]
fn sweep_marks_the_expired_record_dirty_for_the_driver() {
    let rig = Rig::new(3);
    stored(&rig, "p", "pending", T0);
    let engine = rig.engine();
    let mut machine = rig.store.load(&engine, "p").unwrap().unwrap();
    assert!(!machine.dirty(), "a loaded record is what storage holds");
    assert_eq!(engine.sweep(&mut machine, T0 + DAY), idempotent_fetch::machine::Sweep::Keep);
    assert!(!machine.dirty());
    assert_eq!(engine.sweep(&mut machine, T0 + DAY + 1), idempotent_fetch::machine::Sweep::Expired);
    assert!(machine.dirty());
    assert_eq!(machine.record().updated_at, T0 + DAY + 1);
}

// ---------------------------------------------------------------------------------------------
// Error numbers (the driver's messages are keyed by them: they never change)

#[test]
fn error_codes_and_details_have_stable_numbers() {
    let codes = [
        (code::RETRIES_EXHAUSTED, 1),
        (code::ABORTED, 2),
        (code::KEY_MISMATCH, 3),
        (code::INTENT_MISMATCH, 4),
        (code::EXPIRED, 5),
        (code::BODY_NOT_REPLAYABLE, 6),
        (code::INVALID_OPTIONS, 7),
        (code::INVALID_REQUEST, 8),
        (code::STORAGE, 9),
        (code::NOT_FOUND, 10),
        (code::INTERNAL, 15),
    ];
    for (code, number) in codes {
        assert_eq!(code, number);
    }
    assert_eq!((exhausted::MAX_ATTEMPTS, exhausted::DEADLINE, exhausted::BUDGET), (1, 2, 3));
    assert_eq!((request::INTENT_ID, request::FINGERPRINT), (1, 2));
    let fields = [
        field::VERSION,
        field::ID,
        field::KEY,
        field::FINGERPRINT,
        field::CREATED_AT,
        field::UPDATED_AT,
        field::ATTEMPTS,
        field::STATE,
        field::LAST_STATUS,
    ];
    assert_eq!(fields, [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert_eq!(field::CSPRNG, 32);
    assert_eq!((protocol::NOT_SENDING, protocol::NOT_WAITING, protocol::NOT_OFFLINE), (1, 2, 3));
    assert_eq!(Error::new(code::STORAGE, field::CSPRNG).packed(), 9 * 256 + 32);
    assert_eq!(Error::new(code::INVALID_OPTIONS, 0).packed(), 7 * 256);
}

#[test]
fn validate_rejects_an_uncertain_flag_that_is_not_1_or_0() {
    for uncertain in [2.0, 0.5, -1.0, f64::NAN] {
        assert_eq!(rejected(|f| f.uncertain = uncertain), field::UNCERTAIN, "{uncertain}");
    }
    for (uncertain, read) in [(0.0, false), (1.0, true)] {
        let mut f = fields();
        f.uncertain = uncertain;
        assert_eq!(f.validate(ID).map(|r| r.uncertain), Ok(read), "{uncertain}");
    }
}
