//! The TypeScript side of the contract (`src/js/generated/contract.ts`) is the text generated from
//! the Rust table (`src/contract.rs`): this fails when they differ. `IF_BLESS=1` rewrites the file.
#![cfg(not(target_arch = "wasm32"))]

use std::path::Path;

#[path = "generated/bless.rs"]
mod bless;

#[test]
fn the_generated_typescript_matches_the_contract_table() {
    let expected = idempotent_fetch::contract::typescript();
    bless::check_generated("src/js/generated/contract.ts", &expected, "src/contract.rs", "contract");
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

/// The quoted names of the generated union `export type <name> = "a" | "b";`.
fn union(ts: &str, name: &str) -> Vec<String> {
    let line = ts.lines().find(|l| l.starts_with(&format!("export type {name} = "))).expect("the union");
    line.split('"').skip(1).step_by(2).map(str::to_owned).collect()
}

/// The text between `start` and the next `end` in `text`.
fn section<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let from = text.find(start).unwrap_or_else(|| panic!("no {start}")) + start.len();
    &text[from..from + text[from..].find(end).unwrap_or(text.len() - from)]
}

#[test]
fn the_readme_lists_every_error_code_and_exhausted_reason_of_the_table() {
    let ts = idempotent_fetch::contract::typescript();
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).expect("README");
    let table = section(&readme, "| code | meaning | the key |", "\n\n");
    let mut listed: Vec<String> = table
        .lines()
        .skip(2)
        .flat_map(|row| row.split('|').nth(1).unwrap_or("").split('/').map(|c| c.trim().trim_matches('`').to_owned()))
        .collect();
    let mut codes = union(&ts, "ErrorCode");
    listed.sort();
    codes.sort();
    assert_eq!(listed, codes, "README \"Errors\" against the table's code names");
    let reasons = union(&ts, "ExhaustedReason").iter().map(|r| format!("\"{r}\"")).collect::<Vec<_>>().join(" | ");
    assert!(readme.contains(&format!("(`{reasons}` for `RETRIES_EXHAUSTED`)")), "README: the reasons are {reasons}");
}

#[test]
fn every_option_default_in_the_docs_is_the_tables() {
    use idempotent_fetch::contract::{option_default, OPTIONS};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let options_ts = std::fs::read_to_string(root.join("src/js/options.ts")).expect("options.ts");
    let generated = idempotent_fetch::contract::typescript();
    for spec in OPTIONS.iter().filter(|spec| !spec.path.is_empty()) {
        let default = option_default(spec);
        // The README's options table: the default column.
        let row = line_of("README.md", &format!("| `{}` |", spec.path));
        let column = row.split('|').nth(2).expect("a default column").trim();
        let words: Vec<&str> = column.split(|c: char| !(c.is_ascii_alphanumeric() || c == '"' || c == '-')).collect();
        assert!(words.contains(&default.as_str()), "README {}: {column:?}, the table says {default}", spec.path);
        // The API reference: the option's doc comment ends with `@default <value>` (the retry options
        // are generated; the others are ClientOptions' own members).
        let (source, name) = match spec.path.strip_prefix("retry.") {
            Some(name) => (generated.as_str(), name),
            None => (options_ts.as_str(), spec.path),
        };
        let member = source.find(&format!("\n  {name}?: ")).unwrap_or_else(|| panic!("no member {name}"));
        let comment = &source[source[..member].rfind("/**").expect("a doc comment")..member];
        assert!(
            comment.contains(&format!("@default {default} */")) || comment.contains(&format!("@default {default}\n")),
            "{name}: {comment}"
        );
    }
}
