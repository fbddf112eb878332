//! The TypeScript side of the contract (`src/js/generated/contract.ts`) is the text generated from
//! the Rust table (`src/contract.rs`): this fails when they differ. `IF_BLESS=1` rewrites the file.
#![cfg(not(target_arch = "wasm32"))]

use std::path::Path;

#[test]
fn the_generated_typescript_matches_the_contract_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/js/generated/contract.ts");
    let expected = idempotent_fetch::contract::typescript();
    if std::env::var_os("IF_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create src/js/generated");
        std::fs::write(&path, &expected).expect("write contract.ts");
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "{} differs from src/contract.rs: run `IF_BLESS=1 cargo test --test contract` and commit it",
        path.display()
    );
}

#[test]
fn every_option_default_is_within_its_range() {
    for spec in idempotent_fetch::contract::OPTIONS {
        assert!(spec.min <= spec.default && spec.default <= spec.max, "{spec:?}");
    }
    assert_eq!(idempotent_fetch::machine::Policy::default().validate(), Ok(()));
}

#[test]
fn the_record_slots_cover_every_record_field_and_nothing_else() {
    use idempotent_fetch::contract::{field, RECORD_SLOTS};
    // `Engine.load` reads one slot per record field by its number: a field past the count would be
    // read out of bounds, a count past the fields would make the driver send slots nobody reads.
    assert_eq!(RECORD_SLOTS, usize::from(field::VERSION) + field::NAMED.len());
    assert!(field::NAMED.iter().all(|&n| usize::from(n) < RECORD_SLOTS), "{:?}", field::NAMED);
    assert!(usize::from(field::CSPRNG) >= RECORD_SLOTS, "the CSPRNG detail is not a record field");
    let ts = idempotent_fetch::contract::typescript();
    let fields = ts.lines().find(|l| l.starts_with("export const RECORD_FIELDS")).expect("RECORD_FIELDS");
    assert_eq!(fields.matches('"').count() / 2, field::NAMED.len(), "{fields}");
    assert!(ts.contains(&format!("export const RECORD_SLOTS = {RECORD_SLOTS};")));
}

/// The numbers of three digits in `text` (HTTP statuses), in order.
fn statuses(text: &str) -> Vec<u16> {
    text.split(|c: char| !c.is_ascii_digit()).filter(|w| w.len() == 3).filter_map(|w| w.parse().ok()).collect()
}

/// The line of `path` (from the repository root) that holds `marker`.
fn line_of(path: &str, marker: &str) -> String {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).expect("read");
    text.lines()
        .find(|line| line.contains(marker))
        .unwrap_or_else(|| panic!("{path}: no line with {marker}"))
        .to_owned()
}

#[test]
fn the_docs_list_the_statuses_the_machine_retries_and_charges_as_throttling() {
    use idempotent_fetch::contract::{IN_FLIGHT_STATUSES, RETRIED_STATUSES, THROTTLING_STATUSES};
    use idempotent_fetch::machine::RetryReason;
    for status in 100..=599 {
        let throttling = THROTTLING_STATUSES.contains(&status);
        assert_eq!(RetryReason::Status(status).is_throttling(), throttling, "{status}");
        assert!(!throttling || RETRIED_STATUSES.contains(&status), "{status} is charged but never retried");
        assert!(!IN_FLIGHT_STATUSES.contains(&status) || throttling, "{status}: a key in flight is pushing back");
    }
    let sorted = |list: &[u16]| {
        let mut list = list.to_vec();
        list.sort_unstable();
        list
    };
    // The README's options table and classification table, and the budget's own table.
    let budget_row = line_of("README.md", "| `retryBudget` |");
    let description = budget_row.split('|').nth(3).expect("the description column");
    assert_eq!(sorted(&statuses(description)), sorted(THROTTLING_STATUSES), "{budget_row}");
    assert_eq!(statuses(&line_of("README.md", "| network error, attempt timeout,")), RETRIED_STATUSES);
    assert_eq!(statuses(&line_of("src/machine/budget.rs", "a retry after throttling")), THROTTLING_STATUSES);
    let ts = idempotent_fetch::contract::typescript();
    assert!(ts.contains(&format!("IN_FLIGHT_STATUSES: readonly number[] = {IN_FLIGHT_STATUSES:?};")));
}
