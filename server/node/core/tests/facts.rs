//! The TypeScript side's facts (`server/node/src/facts.ts`) are the text generated from the Rust table
//! (`src/facts.rs`): this fails when they differ. `IF_BLESS=1` rewrites the file.
#![cfg(not(target_arch = "wasm32"))]

use std::path::Path;

use idempotent_endpoint_node_core::facts;

#[test]
fn the_generated_typescript_matches_the_facts_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../src/facts.ts");
    let expected = facts::typescript();
    if std::env::var_os("IF_BLESS").is_some() {
        if let Err(error) = std::fs::write(&path, &expected) {
            panic!("write {}: {error}", path.display());
        }
    }
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "{} differs from server/node/core/src/facts.rs: run \
         `IF_BLESS=1 cargo test -p idempotent-endpoint-node-core --test facts` and commit it",
        path.display()
    );
}
