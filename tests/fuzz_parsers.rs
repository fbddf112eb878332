//! Property fuzzing of everything the shipped machine reads from outside: `Retry-After` values and
//! the other answer headers (server), stored record values (browser storage, which a user, an
//! extension or another version of the library may have written), keys, fingerprints, intent ids,
//! and the driver's calls themselves (JavaScript controls them: any number, any order). Each gets
//! arbitrary input plus structure-aware input (near-valid values with one thing changed); nothing
//! may panic (a panic traps the wasm instance), and what is accepted must satisfy the invariants
//! the rest relies on (a key is safe in a header, a wait is capped, a record is self-consistent).
//! The HTTP-date parser is checked against httpdate (the crate it replaces) as an oracle, and the
//! key parser against uuid.
//!
//! Volume: `FUZZ_CASES` cases per property (default 1,000 so `cargo test` stays quick; the figures
//! in FAULTS.md come from `FUZZ_CASES=250000 cargo test --release --test fuzz_parsers`).
//! The JSON type checks in front of the value checks are the driver's (`src/js/`), covered by the
//! tampered-storage rows of tests/fault/bad-input-cases.mjs.
#![cfg(not(target_arch = "wasm32"))]

use std::time::{Duration, UNIX_EPOCH};

use idempotent_fetch::machine::classify::is_replayed;
use idempotent_fetch::machine::error::code;
use idempotent_fetch::machine::record::{is_valid_intent_id, whole, MAX_SAFE_INTEGER};
use idempotent_fetch::machine::retry_after::{parse_http_date, parse_retry_after};
use idempotent_fetch::machine::{
    classify, fingerprint, Action, Answer, Classification, Engine, Jitter, Key, Machine, Override, Policy,
    RandomFailed, RandomSource, State, StoredFields,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};

fn cases() -> u32 {
    std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000)
}

fn config() -> Config {
    Config {
        cases: cases(),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        max_shrink_iters: 10_000,
        ..Config::default()
    }
}

#[path = "oracle/canonical_v4.rs"]
mod canonical_v4;
use canonical_v4::is_canonical_v4;

const VALID_KEY: &str = "8e03978e-40d5-43e8-bc93-6894a57f9324";
const VALID_FINGERPRINT: &str = "cbdda195dbcc57208bc7490ca55b156e07f24018a7c4c69d7b026e031fc3a2ea";
const ID: &str = "checkout:cart-42";

/// Text that looks like a key: a valid one with a few characters replaced, inserted or removed.
fn near_key() -> impl Strategy<Value = String> {
    let edit = (
        0usize..40,
        prop::sample::select(vec!['0', '4', '8', 'a', 'b', 'f', 'F', 'g', '-', '{', '\r', '\n', ' ', '"', 'é', '\0']),
        0u8..3,
    );
    prop::collection::vec(edit, 0..4).prop_map(|edits| {
        let mut chars: Vec<char> = VALID_KEY.chars().collect();
        for (at, c, op) in edits {
            let at = at.min(chars.len());
            match op {
                0 if at < chars.len() => chars[at] = c,
                1 => chars.insert(at, c),
                _ if at < chars.len() => {
                    chars.remove(at);
                }
                _ => {}
            }
        }
        chars.into_iter().collect()
    })
}

fn http_date(secs: u64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs))
}

/// The other two RFC 9110 forms of a time, made from its IMF-fixdate.
fn obsolete_forms(secs: u64) -> [String; 2] {
    let imf = http_date(secs); // "Sun, 06 Nov 1994 08:49:37 GMT"
    let (wd, day, month, year, time) = (&imf[0..3], &imf[5..7], &imf[8..11], &imf[12..16], &imf[17..25]);
    let long = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
        .into_iter()
        .find(|d| d.starts_with(wd))
        .expect("a weekday");
    let asctime_day = match day.strip_prefix('0') {
        Some(digit) => format!(" {digit}"),
        None => day.to_owned(),
    };
    [format!("{long}, {day}-{month}-{} {time} GMT", &year[2..]), format!("{wd} {month} {asctime_day} {time} {year}")]
}

/// Retry-After-like text: digits, signs, fractions, whitespace, dates (valid, shifted, broken).
fn retry_after_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{0,80}",
        "[ \t]{0,3}[-+]?[0-9]{0,25}(\\.[0-9]{0,5})?[ \t]{0,3}",
        (0u64..=253_402_300_799).prop_map(http_date),
        (0u64..=253_402_300_799, 0usize..2).prop_map(|(secs, form)| obsolete_forms(secs)[form].clone()),
        "(Mon|Tue|Wed|Thu|Fri|Sat|Sun|Foo), [0-9]{1,3} (Jan|Feb|Dec|Xyz) [0-9]{1,6} [0-9]{1,3}:[0-9]{1,3}:[0-9]{1,3} (GMT|UTC|)",
        "(Sunday|Monday|Tuesday), [0-9]{2}-(Nov|Feb|Jan)-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT",
        "(Sun|Mon|Tue) (Nov|Feb|Jan) [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4}",
        any::<String>(),
        prop::collection::vec(any::<u8>(), 0..100).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
    ]
}

/// Numbers as JavaScript may pass them: anything, with the edges likely.
fn js_number() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        prop::sample::select(vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            99.0,
            100.0,
            599.0,
            600.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            4_294_967_295.0,
            4_294_967_296.0,
            MAX_SAFE_INTEGER as f64,
            (MAX_SAFE_INTEGER + 1) as f64,
            1.7e12,
        ]),
        (0u64..2_000_000_000_000).prop_map(|n| n as f64),
    ]
}

fn text_or(valid: &'static str) -> impl Strategy<Value = String> {
    prop_oneof![Just(valid.to_owned()), any::<String>(), "[ -~]{0,70}"]
}

/// A stored record's values, each valid or arbitrary.
fn stored_values() -> impl Strategy<Value = (Vec<f64>, Vec<String>)> {
    // The last number is the state's index (the driver's `STATES.indexOf`: -1 for an unknown name).
    let state = prop_oneof![(0..State::ALL.len()).prop_map(|i| i as f64), Just(-1.0), js_number()];
    let numbers = (prop::collection::vec(js_number(), 6), state).prop_map(|(mut n, state)| {
        n.push(state);
        n
    });
    let strings = (
        text_or(ID),
        prop_oneof![Just(VALID_KEY.to_owned()), near_key(), any::<String>()],
        prop_oneof![Just(VALID_FINGERPRINT.to_owned()), "[0-9a-fA-F]{62,66}", any::<String>()],
    )
        .prop_map(|(id, key, fp)| vec![id, key, fp]);
    (numbers, strings)
}

/// Checks a machine's record against every invariant a stored record must keep, by reading it
/// back through the validation (what the driver would write must load again).
fn check_record(machine: &Machine, engine: &Engine) -> Result<(), TestCaseError> {
    let r = machine.record();
    prop_assert!(is_canonical_v4(r.key.as_str()));
    prop_assert!(r.updated_at >= r.created_at);
    prop_assert!(r.last_status == 0 || (100..=599).contains(&r.last_status));
    let numbers = machine.stored_numbers(1);
    let fields = StoredFields::from_slots(&r.id, r.key.as_str(), &r.fingerprint, &numbers);
    let back = engine.load(&r.id, &fields);
    // Times beyond 2^53 cannot be stored exactly by JavaScript; the driver only passes Date.now().
    if r.updated_at <= MAX_SAFE_INTEGER {
        prop_assert!(back.is_ok(), "the machine's own record does not load: {:?}", back.err());
    }
    Ok(())
}

/// A random source that is the CSPRNG's stand-in (seeded, deterministic).
struct Seeded(std::cell::Cell<u64>);

impl RandomSource for Seeded {
    fn fill(&self, bytes: &mut [u8]) -> Result<(), RandomFailed> {
        for b in bytes {
            let x = self.0.get().wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            self.0.set(x);
            *b = (x >> 56) as u8;
        }
        Ok(())
    }
}

/// One call the driver may make, with arbitrary arguments.
#[derive(Clone, Debug)]
enum Call {
    Start(u64, bool),
    Response(u64, u16, Option<String>, Option<String>, Option<String>, u32),
    Network(u64),
    Timeout(u64),
    Abort(u64),
    Wake(u64, bool),
    Online(u64),
    OnlineTimeout(u64),
    MarkSaved,
}

fn time() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..1_000_000, Just(0u64), Just(u64::MAX), any::<u64>()]
}

fn header() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop_oneof![retry_after_text(), Just("true".to_owned()), Just(" TRUE ".to_owned())])
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        (time(), any::<bool>()).prop_map(|(t, o)| Call::Start(t, o)),
        (time(), any::<u16>(), header(), header(), header(), any::<u32>())
            .prop_map(|(t, s, a, b, c, o)| Call::Response(t, s, a, b, c, o)),
        time().prop_map(Call::Network),
        time().prop_map(Call::Timeout),
        time().prop_map(Call::Abort),
        (time(), any::<bool>()).prop_map(|(t, o)| Call::Wake(t, o)),
        time().prop_map(Call::Online),
        time().prop_map(Call::OnlineTimeout),
        Just(Call::MarkSaved),
    ]
}

proptest! {
    #![proptest_config(config())]

    // ---- Retry-After and the HTTP-date parser ----

    #[test]
    fn retry_after_never_panics_and_is_capped(text in retry_after_text(), now in any::<u64>(), cap in prop_oneof![Just(0u64), 0u64..120_000, Just(u64::MAX)]) {
        if let Some(ms) = parse_retry_after(&text, now, cap) {
            prop_assert!(ms <= cap, "{:?} -> {} over the cap {}", text, ms, cap);
            let trimmed = text.trim_ascii();
            prop_assert!(!trimmed.is_empty() && trimmed.len() <= 64);
        }
    }

    #[test]
    fn http_dates_agree_with_httpdate(text in retry_after_text()) {
        let expected = httpdate::parse_http_date(&text)
            .ok()
            .map(|t| t.duration_since(UNIX_EPOCH).expect("after the epoch").as_millis() as u64);
        prop_assert_eq!(parse_http_date(&text), expected, "{:?}", text);
    }

    #[test]
    fn retry_after_seconds_are_exact(secs in any::<u64>(), pad in "[ \t]{0,2}", cap in any::<u64>()) {
        let text = format!("{pad}{secs}{pad}");
        prop_assert_eq!(parse_retry_after(&text, 0, cap), Some(secs.saturating_mul(1000).min(cap)));
    }

    #[test]
    fn retry_after_dates_wait_until_then(when in 0u64..=253_402_300_799, now_secs in 0u64..=253_402_300_799, cap in any::<u64>()) {
        let expected = when.saturating_sub(now_secs).saturating_mul(1000).min(cap);
        let [rfc850, asctime] = obsolete_forms(when);
        for text in [http_date(when), asctime] {
            prop_assert_eq!(parse_retry_after(&text, now_secs * 1000, cap), Some(expected), "{}", text);
        }
        // RFC 850 has two-digit years: 1970-2069 only.
        let year = 1970 + when / 31_556_952;
        if (1971..2069).contains(&year) {
            prop_assert_eq!(parse_retry_after(&rfc850, now_secs * 1000, cap), Some(expected), "{}", rfc850);
        }
    }

    // ---- the other answer headers ----

    #[test]
    fn answer_headers_never_panic_and_2xx_always_succeeds(
        status in any::<u16>(),
        retry_after in header(),
        should_retry in header(),
        replayed in header(),
        caller in any::<u32>(),
        now in any::<u64>(),
        cap in any::<u64>(),
    ) {
        let answer = Answer {
            status,
            retry_after: retry_after.as_deref(),
            should_retry: should_retry.as_deref(),
            replayed: replayed.as_deref(),
            caller: Override::from_index(caller),
        };
        let verdict = classify(&answer, now, cap);
        if (200..=299).contains(&status) {
            prop_assert_eq!(verdict, Classification::Success);
        }
        if let Classification::Retry { after_ms: Some(ms), .. } = verdict {
            prop_assert!(ms <= cap);
        }
        let said_true = replayed.as_deref().is_some_and(|v| v.trim_ascii().eq_ignore_ascii_case("true"));
        prop_assert_eq!(is_replayed(replayed.as_deref()), said_true);
    }

    // ---- keys, fingerprints, ids, numbers ----

    #[test]
    fn key_parse_accepts_only_canonical_v4(text in prop_oneof![near_key(), any::<String>(), "[0-9a-fA-F-]{30,40}"]) {
        let by_uuid = uuid::Uuid::try_parse(&text).ok().filter(|u| {
            u.get_version_num() == 4 && u.get_variant() == uuid::Variant::RFC4122 && u.hyphenated().to_string() == text
        });
        match Key::parse(&text) {
            Some(key) => {
                prop_assert!(is_canonical_v4(&text), "accepted {:?}", text);
                prop_assert!(by_uuid.is_some(), "uuid refuses {:?}", text);
                prop_assert_eq!(key.as_str(), text.as_str());
                prop_assert_eq!(key.header(true), format!("\"{text}\""));
                prop_assert!(key.as_str().bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'));
            }
            None => prop_assert!(by_uuid.is_none(), "refused canonical {:?}", text),
        }
    }

    #[test]
    fn generated_keys_parse(seed in any::<u64>()) {
        let key = Key::generate(&Seeded(std::cell::Cell::new(seed))).expect("a key");
        prop_assert!(Key::parse(key.as_str()).is_some(), "{:?}", key);
    }

    #[test]
    fn fingerprint_accepts_only_64_lowercase_hex(text in prop_oneof![any::<String>(), "[0-9a-fA-F]{62,66}", "[0-9a-f]{64}"]) {
        let well_formed = text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        prop_assert_eq!(fingerprint::is_valid(&text), well_formed);
    }

    #[test]
    fn intent_ids(id in prop_oneof![any::<String>(), "[\\x00-\\x21\\x7e-\\u{a1}\\u{100}a]{0,8}"]) {
        let ok = is_valid_intent_id(&id);
        prop_assert_eq!(ok, !id.is_empty() && id.len() <= 256 && !id.chars().any(char::is_control));
    }

    #[test]
    fn whole_numbers(x in js_number(), max in any::<u64>()) {
        if let Some(n) = whole(x, max) {
            prop_assert!(n <= max && n <= MAX_SAFE_INTEGER);
            prop_assert_eq!(n as f64, x);
        } else {
            prop_assert!(!(x.is_finite() && x.fract() == 0.0 && x >= 0.0 && x <= max as f64 && x <= MAX_SAFE_INTEGER as f64) || x as u64 > max);
        }
    }

    // ---- stored records ----

    #[test]
    fn stored_record_values(
        (numbers, strings) in stored_values(),
        slot in text_or(ID),
    ) {
        let engine = Engine::new(Policy::default(), Box::new(Seeded(std::cell::Cell::new(1)))).expect("policy");
        let fields = StoredFields {
            v: if numbers[0].is_nan() { 1.0 } else { numbers[0] },
            id: &strings[0],
            key: &strings[1],
            fingerprint: &strings[2],
            created_at: numbers[1],
            updated_at: numbers[2],
            attempts: numbers[3],
            state: numbers[6],
            last_status: numbers[4],
            uncertain: numbers[5],
            brought: 0.0,
        };
        match engine.load(&slot, &fields) {
            Ok(machine) => {
                let r = machine.record();
                prop_assert_eq!(r.id.as_str(), slot.as_str());
                prop_assert!(is_valid_intent_id(&r.id));
                prop_assert_eq!(r.key.as_str(), fields.key);
                prop_assert_eq!(r.created_at as f64, fields.created_at);
                prop_assert_eq!(f64::from(r.state as u8), fields.state);
                prop_assert!(!machine.dirty());
                check_record(&machine, &engine)?;
            }
            Err(e) => prop_assert_eq!(e.code, code::STORAGE),
        }
    }

    // ---- the driver's calls: any order, any arguments ----

    #[test]
    fn any_sequence_of_calls_keeps_the_record_valid_and_the_key(
        calls in prop::collection::vec(call(), 0..40),
        max_attempts in 1u32..6,
        jitter in 0u32..4,
        budget in 0u32..100,
        seed in any::<u64>(),
        fingerprint_changes in any::<bool>(),
    ) {
        let policy = Policy {
            max_attempts,
            jitter: Jitter::from_index(jitter).expect("0..4"),
            retry_budget: budget,
            total_timeout_ms: 100_000,
            ..Policy::default()
        };
        let engine = Engine::new(policy, Box::new(Seeded(std::cell::Cell::new(seed)))).expect("policy");
        let mut machine = engine.begin(ID, VALID_FINGERPRINT, 1_000, false, None).expect("begin");
        let key = machine.record().key.clone();
        let mut total = 0u32;
        for call in calls {
            let action = match call {
                Call::Start(t, online) => Some(machine.start(t, online)),
                Call::Response(t, status, a, b, c, o) => {
                    let answer = Answer { status, retry_after: a.as_deref(), should_retry: b.as_deref(), replayed: c.as_deref(), caller: Override::from_index(o) };
                    Some(machine.on_response(t, &answer))
                }
                Call::Network(t) => Some(machine.on_network_error(t)),
                Call::Timeout(t) => Some(machine.on_timeout(t)),
                Call::Abort(t) => Some(machine.on_abort(t)),
                Call::Wake(t, online) => Some(machine.on_wake(t, online)),
                Call::Online(t) => Some(machine.on_online(t)),
                Call::OnlineTimeout(t) => Some(machine.on_online_timeout(t)),
                Call::MarkSaved => {
                    machine.mark_saved();
                    None
                }
            };
            if action == Some(Action::Send) {
                total += 1;
                prop_assert!(machine.dirty(), "saved before every attempt");
                prop_assert!(machine.timeout_ms() >= 1);
                prop_assert!(machine.attempt() <= max_attempts);
            }
            if action == Some(Action::Wait) {
                prop_assert!(machine.dirty(), "saved after every outcome");
            }
            prop_assert_eq!(&machine.record().key, &key, "the key never changes");
            prop_assert_eq!(machine.record().attempts, total);
            check_record(&machine, &engine)?;
        }
        // Whatever happened, begin on what would be stored resumes the same key or refuses.
        let fingerprint = if fingerprint_changes { "b2".repeat(32) } else { VALID_FINGERPRINT.to_owned() };
        let numbers = machine.stored_numbers(1);
        let stored = engine.load(ID, &StoredFields::from_slots(ID, key.as_str(), VALID_FINGERPRINT, &numbers));
        if let Ok(stored) = stored {
            let state = stored.record().state;
            match engine.begin(ID, &fingerprint, 2_000, false, Some(&stored)) {
                Ok(again) if again.record().key != key => prop_assert!(fingerprint_changes && state == State::Failed),
                Ok(_) => prop_assert!(!fingerprint_changes),
                Err(e) => prop_assert_eq!(e.code, code::INTENT_MISMATCH),
            }
        }
    }
}

#[test]
fn the_valid_record_is_accepted() {
    let engine = Engine::new(Policy::default(), Box::new(Seeded(std::cell::Cell::new(1)))).expect("policy");
    let fields = StoredFields {
        v: 1.0,
        id: ID,
        key: VALID_KEY,
        fingerprint: VALID_FINGERPRINT,
        created_at: 1_700_000_000_000.0,
        updated_at: 1_700_000_000_500.0,
        attempts: 2.0,
        state: f64::from(State::Pending as u8),
        last_status: 503.0,
        uncertain: 0.0,
        brought: 0.0,
    };
    let machine = engine.load(ID, &fields).expect("valid");
    assert_eq!(machine.record().state, State::Pending);
}
