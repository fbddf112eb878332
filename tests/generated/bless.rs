//! The check shared by the tests of generated files (`tests/contract.rs`, `tests/abi_exports.rs`): the
//! committed file must be the generated text; with `IF_BLESS` set the file is rewritten first.

use std::path::Path;

/// Fails unless `relative` (from the repository root) holds `expected`; `IF_BLESS=1 cargo test --test
/// <test>` rewrites it. `source` names what the text is generated from, for the failure message.
pub fn check_generated(relative: &str, expected: &str, source: &str, test: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    if std::env::var_os("IF_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create the file's folder");
        std::fs::write(&path, expected).expect("write the generated file");
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "{relative} differs from {source}: run `IF_BLESS=1 cargo test --test {test}` and commit it"
    );
}
