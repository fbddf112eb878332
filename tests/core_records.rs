//! What is stored and how it is checked when read back: intent records (validation and serde),
//! keys, fingerprints, the memory store, tampered storage, and the sweep.
#![cfg(all(not(target_arch = "wasm32"), feature = "legacy-web"))]

#[path = "core/support.rs"]
mod support;

use std::collections::HashSet;

use idempotent_fetch::legacy::intent::{PersistedRequest, RECORD_VERSION};
use idempotent_fetch::legacy::ports::{IntentStore, OsRandom, StoreError};
use idempotent_fetch::legacy::{
    sweep, ErrorCode, ExhaustedReason, Fingerprint, IdempotencyKey, IntentRecord, IntentState, MemoryStore,
    RecordError, RetryPolicy, SendError,
};
use serde_json::json;
use support::*;

const ID: &str = "checkout:cart-42";
const KEY: &str = "8e03978e-40d5-43e8-bc93-6894a57f9324";

fn record() -> IntentRecord {
    let key = IdempotencyKey::parse(KEY).unwrap();
    let mut record = IntentRecord::new(ID, &key, &checkout(), T0);
    record.updated_at = T0 + 5;
    record.attempts = 2;
    record.last_status = Some(503);
    record
}

fn record_json() -> serde_json::Value {
    serde_json::to_value(record()).unwrap()
}

fn from_json(value: serde_json::Value) -> Result<IntentRecord, serde_json::Error> {
    serde_json::from_value(value)
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    futures::executor::block_on(future)
}

// ---------------------------------------------------------------------------------------------
// Record format

#[test]
fn record_serializes_to_the_documented_camel_case_fields_and_nothing_else() {
    let value = record_json();
    let mut fields: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(fields, ["attempts", "createdAt", "fingerprint", "id", "key", "lastStatus", "state", "updatedAt", "v"]);
    assert_eq!(value["v"], json!(RECORD_VERSION));
    assert_eq!(value["state"], json!("pending"));
    assert_eq!(value["key"], json!(KEY));
}

#[test]
fn record_round_trips_through_json() {
    let original = record();
    let back: IntentRecord = serde_json::from_str(&serde_json::to_string(&original).unwrap()).unwrap();
    assert_eq!(back, original);
    assert_eq!(back.validate(Some(ID)).unwrap().as_str(), KEY);
}

#[test]
fn request_is_persisted_only_when_opted_in() {
    let stored = serde_json::to_string(&record()).unwrap();
    assert!(!stored.contains("request") && !stored.contains("amount"), "{stored}");

    let mut opted_in = record();
    opted_in.request = Some(PersistedRequest {
        method: "POST".into(),
        url: "/api/orders".into(),
        headers: vec![("content-type".into(), "application/json".into())],
        body: Some(b"{}".to_vec()),
    });
    let text = serde_json::to_string(&opted_in).unwrap();
    let back: IntentRecord = serde_json::from_str(&text).unwrap();
    assert_eq!(back, opted_in);
}

#[test]
fn a_fresh_record_is_pending_with_no_attempts() {
    let key = IdempotencyKey::parse(KEY).unwrap();
    let fresh = IntentRecord::new(ID, &key, &checkout(), T0);
    assert_eq!((fresh.state, fresh.attempts, fresh.last_status), (IntentState::Pending, 0, None));
    assert_eq!((fresh.created_at, fresh.updated_at), (T0, T0));
    assert!(fresh.validate(Some(ID)).is_ok());
}

#[test]
fn intent_states_have_lowercase_names_and_know_which_are_terminal() {
    let states = [
        (IntentState::Pending, "pending", false),
        (IntentState::Succeeded, "succeeded", true),
        (IntentState::Failed, "failed", true),
        (IntentState::Expired, "expired", false),
    ];
    for (state, name, terminal) in states {
        assert_eq!(state.as_str(), name);
        assert_eq!(serde_json::to_value(state).unwrap(), json!(name));
        assert_eq!(state.is_terminal(), terminal);
    }
}

// ---------------------------------------------------------------------------------------------
// Validation of tampered records

fn invalid(edit: impl FnOnce(&mut IntentRecord)) -> RecordError {
    let mut r = record();
    edit(&mut r);
    r.validate(Some(ID)).unwrap_err()
}

#[test]
fn validate_rejects_a_future_version() {
    assert_eq!(invalid(|r| r.v = 2), RecordError::UnsupportedVersion(2));
    assert_eq!(invalid(|r| r.v = 0), RecordError::UnsupportedVersion(0));
}

#[test]
fn validate_rejects_keys_that_could_inject_or_are_not_v4() {
    let bad_keys = [
        "8e03978e-40d5-43e8-bc93-6894a57f9324\r\nX-Evil: 1", // header injection
        "8e03978e-40d5-43e8-bc93-6894a57f9324\n",
        "8E03978E-40D5-43E8-BC93-6894A57F9324", // uppercase
        "8e03978e-40d5-13e8-bc93-6894a57f9324", // version 1
        "8e03978e-40d5-43e8-7c93-6894a57f9324", // NCS variant
        "8e03978e40d543e8bc936894a57f9324",     // simple form
        "{8e03978e-40d5-43e8-bc93-6894a57f9324}",
        "urn:uuid:8e03978e-40d5-43e8-bc93-6894a57f9324",
        " 8e03978e-40d5-43e8-bc93-6894a57f9324",
        "00000000-0000-0000-0000-000000000000",
        "",
        "not-a-key",
        "\"8e03978e-40d5-43e8-bc93-6894a57f9324\"",
    ];
    for key in bad_keys {
        assert_eq!(invalid(|r| r.key = key.into()), RecordError::BadKey, "{key:?}");
    }
}

#[test]
fn validate_rejects_a_bad_fingerprint() {
    for fingerprint in ["", "abc", &"g".repeat(64), &"A".repeat(64), &"a".repeat(63), &"a".repeat(65)] {
        assert_eq!(invalid(|r| r.fingerprint = fingerprint.into()), RecordError::BadFingerprint, "{fingerprint:?}");
    }
}

#[test]
fn validate_rejects_an_id_mismatch_or_a_bad_id() {
    assert_eq!(invalid(|r| r.id = "checkout:cart-43".into()), RecordError::BadId);
    assert_eq!(record().validate(Some("other-slot")).unwrap_err(), RecordError::BadId);
    let mut r = record();
    r.id = String::new();
    assert_eq!(r.validate(None).unwrap_err(), RecordError::BadId);
    r.id = "x\u{0}y".into();
    assert_eq!(r.validate(None).unwrap_err(), RecordError::BadId);
    r.id = "x".repeat(257);
    assert_eq!(r.validate(None).unwrap_err(), RecordError::BadId);
}

#[test]
fn validate_rejects_updated_before_created() {
    assert_eq!(invalid(|r| r.updated_at = r.created_at - 1), RecordError::BadTimes);
}

#[test]
fn validate_rejects_a_status_that_is_not_http() {
    assert_eq!(invalid(|r| r.last_status = Some(999)), RecordError::BadStatus(999));
    assert_eq!(invalid(|r| r.last_status = Some(99)), RecordError::BadStatus(99));
    assert_eq!(invalid(|r| r.last_status = Some(0)), RecordError::BadStatus(0));
    let mut ok = record();
    for status in [100, 599] {
        ok.last_status = Some(status);
        assert!(ok.validate(Some(ID)).is_ok());
    }
}

// ---------------------------------------------------------------------------------------------
// Serde of tampered records

#[test]
fn serde_accepts_a_future_version_for_validate_to_reject() {
    let mut value = record_json();
    value["v"] = json!(2);
    let parsed = from_json(value).unwrap();
    assert_eq!(parsed.validate(Some(ID)).unwrap_err(), RecordError::UnsupportedVersion(2));
}

#[test]
fn serde_rejects_unknown_fields() {
    for (field, val) in [("body", json!("card=4242")), ("Key", json!(KEY)), ("extra", json!(null))] {
        let mut value = record_json();
        value[field] = val;
        assert!(from_json(value).is_err(), "unknown field {field} accepted");
    }
}

#[test]
fn serde_rejects_missing_required_fields() {
    for field in ["v", "id", "key", "fingerprint", "createdAt", "updatedAt", "attempts", "state"] {
        let mut value = record_json();
        value.as_object_mut().unwrap().remove(field);
        assert!(from_json(value).is_err(), "missing {field} accepted");
    }
}

#[test]
fn serde_treats_missing_optional_fields_as_absent() {
    let mut value = record_json();
    value.as_object_mut().unwrap().remove("lastStatus");
    assert_eq!(from_json(value).unwrap().last_status, None);
}

#[test]
fn serde_rejects_wrong_types_and_out_of_range_values() {
    let cases = [
        ("state", json!("done")),
        ("state", json!("Pending")),
        ("attempts", json!(-1)),
        ("attempts", json!(1.5)),
        ("lastStatus", json!(70_000)),
        ("createdAt", json!("yesterday")),
        ("key", json!(42)),
        ("v", json!("1")),
    ];
    for (field, val) in cases {
        let mut value = record_json();
        value[field] = val.clone();
        assert!(from_json(value).is_err(), "{field} = {val} accepted");
    }
    assert!(serde_json::from_str::<IntentRecord>("not json").is_err());
    assert!(serde_json::from_str::<IntentRecord>("[]").is_err());
}

#[test]
fn serde_accepts_a_status_999_for_validate_to_reject() {
    let mut value = record_json();
    value["lastStatus"] = json!(999);
    assert_eq!(from_json(value).unwrap().validate(Some(ID)).unwrap_err(), RecordError::BadStatus(999));
}

#[test]
fn serde_plus_validate_reject_a_key_with_crlf() {
    let mut value = record_json();
    value["key"] = json!(format!("{KEY}\r\nSet-Cookie: x=1"));
    assert_eq!(from_json(value).unwrap().validate(Some(ID)).unwrap_err(), RecordError::BadKey);
}

// ---------------------------------------------------------------------------------------------
// Stores

#[test]
fn memory_store_load_of_a_tampered_record_is_corrupt() {
    let store = MemoryStore::new();
    let mut tampered = record();
    tampered.key = KEY.to_uppercase();
    store.put(tampered);
    assert_eq!(block_on(store.load(ID)), Err(StoreError::Corrupt(RecordError::BadKey)));
}

#[test]
fn a_record_copied_into_another_slot_is_corrupt() {
    let store = JsonStore::default();
    let rig = json_rig(5, &store, &VirtualClock::at(T0));
    rig.begin_checkout(ID);
    // Tampered storage: the record of one intent appears under another intent's slot.
    store.set_raw("checkout:cart-43", &store.raw(ID).unwrap());
    assert_eq!(rig.load("checkout:cart-43"), Err(StoreError::Corrupt(RecordError::BadId)));
    assert_eq!(rig.send("checkout:cart-43").unwrap_err().code, ErrorCode::Storage);
    assert_eq!(rig.transport.calls(), 0);
}

#[test]
fn memory_store_list_skips_corrupt_records_and_clones_share_data() {
    let store = MemoryStore::new();
    let other_tab = store.clone();
    store.put(record());
    let mut bad = record();
    bad.id = "bad".into();
    bad.v = 2;
    other_tab.put(bad);
    assert_eq!(store.all().len(), 2);
    let listed = block_on(store.list()).unwrap();
    assert_eq!(listed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), vec![ID]);
    block_on(other_tab.remove(ID)).unwrap();
    block_on(other_tab.remove("missing")).unwrap();
    assert!(store.get(ID).is_none());
}

#[test]
fn send_over_a_tampered_memory_record_is_storage_and_nothing_is_sent() {
    let rig = Rig::new(1);
    rig.begin_checkout(ID);
    let mut tampered = rig.memory().get(ID).unwrap();
    tampered.fingerprint = "zz".into();
    rig.memory().put(tampered);
    let err = rig.send(ID).unwrap_err();
    assert_eq!(err.code, ErrorCode::Storage);
    assert!(err.message.contains("corrupt"), "{}", err.message);
    assert_eq!(rig.transport.calls(), 0);
}

fn json_rig(seed: u64, store: &JsonStore, clock: &VirtualClock) -> Rig<JsonStore> {
    Rig::with_store(seed, clock.clone(), EventLog::default(), store.clone())
}

#[test]
fn json_store_reload_resumes_the_same_key() {
    let store = JsonStore::default();
    let clock = VirtualClock::at(T0);
    let mut first = json_rig(1, &store, &clock);
    first.policy = RetryPolicy { max_attempts: 2, ..plain_policy() };
    let key = first.begin_checkout(ID);
    first.transport.always(status(503));
    assert_eq!(first.send(ID).unwrap_err().exhausted, Some(ExhaustedReason::MaxAttempts));
    assert!(store.raw(ID).unwrap().contains(&key));

    let second = json_rig(2, &store, &clock);
    assert_eq!(second.begin_checkout(ID), key);
    second.send(ID).unwrap();
    assert_eq!(second.transport.keys(), vec![key]);
    assert_eq!(second.record(ID).attempts, 3);
}

#[test]
fn json_store_tampering_is_rejected_and_nothing_is_sent() {
    type Tamper = Box<dyn Fn(&mut serde_json::Value)>;
    let tamperings: Vec<(&str, Tamper)> = vec![
        ("future version", Box::new(|v| v["v"] = json!(2))),
        ("CRLF key", Box::new(|v| v["key"] = json!(format!("{KEY}\r\nX: 1")))),
        ("uppercase key", Box::new(|v| v["key"] = json!(KEY.to_uppercase()))),
        ("v1 key", Box::new(|v| v["key"] = json!("8e03978e-40d5-11e8-bc93-6894a57f9324"))),
        ("junk key", Box::new(|v| v["key"] = json!("<script>"))),
        ("bad fingerprint", Box::new(|v| v["fingerprint"] = json!("00"))),
        ("id mismatch", Box::new(|v| v["id"] = json!("checkout:cart-43"))),
        ("time travel", Box::new(|v| v["updatedAt"] = json!(0))),
        ("status 999", Box::new(|v| v["lastStatus"] = json!(999))),
        ("unknown field", Box::new(|v| v["cardNumber"] = json!("4242424242424242"))),
        ("missing field", Box::new(|v| drop(v.as_object_mut().unwrap().remove("key")))),
    ];
    for (name, tamper) in tamperings {
        let store = JsonStore::default();
        let rig = json_rig(3, &store, &VirtualClock::at(T0));
        rig.begin_checkout(ID);
        store.tamper(ID, |v| tamper(v));
        assert!(matches!(rig.load(ID), Err(StoreError::Corrupt(_))), "{name}: load accepted it");
        let err = rig.send(ID).unwrap_err();
        assert_eq!(err.code, ErrorCode::Storage, "{name}");
        assert_eq!(rig.transport.calls(), 0, "{name}: sent");
        assert_eq!(rig.begin(ID, &checkout()).unwrap_err().code, ErrorCode::Storage, "{name}: begin");
    }
}

#[test]
fn json_store_garbage_is_rejected() {
    let store = JsonStore::default();
    let rig = json_rig(4, &store, &VirtualClock::at(T0));
    for text in ["", "{", "null", "\"a string\"", "{\"v\":1}"] {
        store.set_raw(ID, text);
        assert_eq!(rig.send(ID).unwrap_err().code, ErrorCode::Storage, "{text:?}");
    }
    assert_eq!(rig.transport.calls(), 0);
}

// ---------------------------------------------------------------------------------------------
// Keys

#[test]
fn generated_keys_are_distinct_canonical_v4() {
    let mut random = OsRandom;
    let mut seen = HashSet::new();
    for _ in 0..1000 {
        let key = IdempotencyKey::generate(&mut random).unwrap();
        let uuid = uuid::Uuid::parse_str(key.as_str()).unwrap();
        assert_eq!(uuid.get_version_num(), 4);
        assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122);
        assert_eq!(IdempotencyKey::parse(key.as_str()), Ok(key.clone()));
        assert!(key.as_str().bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase() || b == b'-'));
        assert!(seen.insert(key.to_string()), "duplicate key {key}");
    }
}

#[test]
fn key_parse_round_trips_and_displays_as_itself() {
    let key = IdempotencyKey::parse(KEY).unwrap();
    assert_eq!(key.as_str(), KEY);
    assert_eq!(key.to_string(), KEY);
    assert_eq!(IdempotencyKey::parse(&key.to_string()), Ok(key));
}

#[test]
fn key_sf_string_form_is_quoted() {
    let key = IdempotencyKey::parse(KEY).unwrap();
    assert_eq!(key.as_sf_string(), format!("\"{KEY}\""));
}

#[test]
fn key_parse_rejects_non_canonical_text() {
    for text in
        [&KEY.to_uppercase(), "8e03978e40d543e8bc936894a57f9324", "8e03978e-40d5-53e8-bc93-6894a57f9324", "x", ""]
    {
        assert!(IdempotencyKey::parse(text).is_err(), "{text:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Fingerprints

#[test]
fn fingerprint_is_sha256_of_method_url_body() {
    assert_eq!(
        Fingerprint::of("POST", "/api/orders", br#"{"a":1}"#).as_str(),
        "cbdda195dbcc57208bc7490ca55b156e07f24018a7c4c69d7b026e031fc3a2ea"
    );
}

#[test]
fn fingerprint_differs_on_method_url_and_body() {
    let base = Fingerprint::of("POST", "/api/orders", b"{}");
    assert_ne!(base, Fingerprint::of("PUT", "/api/orders", b"{}"));
    assert_ne!(base, Fingerprint::of("POST", "/api/orders/2", b"{}"));
    assert_ne!(base, Fingerprint::of("POST", "/api/orders", b"{ }"));
    assert_ne!(base, Fingerprint::of("POST", "/api/orders", b""));
}

#[test]
fn fingerprint_is_case_insensitive_on_the_method_only() {
    assert_eq!(Fingerprint::of("post", "/api/orders", b"{}"), Fingerprint::of("POST", "/api/orders", b"{}"));
    assert_eq!(Fingerprint::of("PoSt", "/api/orders", b"{}"), Fingerprint::of("POST", "/api/orders", b"{}"));
    assert_ne!(Fingerprint::of("POST", "/API/orders", b"{}"), Fingerprint::of("POST", "/api/orders", b"{}"));
}

#[test]
fn fingerprint_parse_accepts_only_64_lowercase_hex() {
    let fingerprint = checkout();
    assert_eq!(fingerprint.as_str().len(), 64);
    assert_eq!(Fingerprint::parse(fingerprint.as_str()), Some(fingerprint.clone()));
    assert_eq!(Fingerprint::parse(&fingerprint.as_str().to_uppercase()), None);
    assert_eq!(Fingerprint::parse(&fingerprint.as_str()[1..]), None);
    assert_eq!(Fingerprint::parse(""), None);
}

// ---------------------------------------------------------------------------------------------
// Sweep

fn stored(store: &MemoryStore, id: &str, state: IntentState, created_at: u64) {
    let key = IdempotencyKey::generate(&mut OsRandom).unwrap();
    let mut r = IntentRecord::new(id, &key, &checkout(), created_at);
    r.state = state;
    store.put(r);
}

#[test]
fn sweep_removes_old_terminal_records_expires_old_pending_and_keeps_young_ones() {
    let store = MemoryStore::new();
    let now = T0 + 10 * DAY;
    let old = now - DAY - 1;
    let young = now - DAY + HOUR;
    stored(&store, "old-succeeded", IntentState::Succeeded, old);
    stored(&store, "old-failed", IntentState::Failed, old);
    stored(&store, "old-pending", IntentState::Pending, old);
    stored(&store, "old-expired", IntentState::Expired, old);
    stored(&store, "young-succeeded", IntentState::Succeeded, young);
    stored(&store, "young-failed", IntentState::Failed, young);
    stored(&store, "young-pending", IntentState::Pending, young);

    let clock = VirtualClock::at(now);
    assert_eq!(block_on(sweep(&store, &clock, DAY)), Ok((2, 1)));

    let state = |id: &str| store.get(id).map(|r| r.state);
    assert_eq!(state("old-succeeded"), None);
    assert_eq!(state("old-failed"), None);
    assert_eq!(state("old-pending"), Some(IntentState::Expired), "kept so the app can reconcile");
    assert_eq!(store.get("old-pending").unwrap().updated_at, now);
    assert_eq!(state("old-expired"), Some(IntentState::Expired));
    assert_eq!(state("young-succeeded"), Some(IntentState::Succeeded));
    assert_eq!(state("young-failed"), Some(IntentState::Failed));
    assert_eq!(state("young-pending"), Some(IntentState::Pending));

    // A second sweep has nothing left to do.
    assert_eq!(block_on(sweep(&store, &clock, DAY)), Ok((0, 0)));
}

#[test]
fn sweep_leaves_corrupt_records_alone() {
    let store = MemoryStore::new();
    stored(&store, "old-succeeded", IntentState::Succeeded, T0);
    let mut bad = store.get("old-succeeded").unwrap();
    bad.id = "bad".into();
    bad.key = "junk".into();
    store.put(bad);
    let clock = VirtualClock::at(T0 + 2 * DAY);
    assert_eq!(block_on(sweep(&store, &clock, DAY)), Ok((1, 0)));
    assert!(store.get("bad").is_some());
}

// ---------------------------------------------------------------------------------------------
// Error codes

#[test]
fn error_codes_and_reasons_have_stable_strings() {
    let codes = [
        (ErrorCode::RetriesExhausted, "RETRIES_EXHAUSTED"),
        (ErrorCode::Aborted, "ABORTED"),
        (ErrorCode::KeyMismatch, "KEY_MISMATCH"),
        (ErrorCode::IntentMismatch, "INTENT_MISMATCH"),
        (ErrorCode::Expired, "EXPIRED"),
        (ErrorCode::BodyNotReplayable, "BODY_NOT_REPLAYABLE"),
        (ErrorCode::InvalidOptions, "INVALID_OPTIONS"),
        (ErrorCode::InvalidRequest, "INVALID_REQUEST"),
        (ErrorCode::Storage, "STORAGE"),
        (ErrorCode::NotFound, "NOT_FOUND"),
    ];
    for (code, text) in codes {
        assert_eq!(code.as_str(), text);
    }
    assert_eq!(ExhaustedReason::MaxAttempts.as_str(), "maxAttempts");
    assert_eq!(ExhaustedReason::Deadline.as_str(), "deadline");
    assert_eq!(ExhaustedReason::Budget.as_str(), "budget");
    let err = SendError::new(ErrorCode::Expired, "too old").with_key(KEY);
    assert_eq!(err.to_string(), "EXPIRED: too old");
    assert_eq!(err.key.as_deref(), Some(KEY));
}
