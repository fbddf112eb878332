//! The TypeScript side's facts (`server/node/src/facts.ts`) are the text generated from the Rust table
//! (`src/facts.rs`): this fails when they differ (`IF_BLESS=1` rewrites the file), and when another
//! TypeScript source of the package spells one of the table's strings itself.
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

/// Every string value of the table (statements, names), flattened.
fn texts(facts: Vec<facts::Fact>, out: &mut Vec<String>) {
    for fact in facts {
        match fact.value {
            facts::FactValue::Text(text) => out.push(text),
            facts::FactValue::Group(members) => texts(members, out),
            facts::FactValue::Number(_) => {}
        }
    }
}

#[test]
fn no_typescript_source_spells_a_fact_of_the_table_itself() {
    // A hand copy of a statement or a name (a string literal with its value) would drift from the Rust
    // without any test noticing: the sources read them from facts.ts instead. Quoted strings only: a name
    // in a doc comment's backticks is prose.
    let mut values = Vec::new();
    texts(facts::constants(), &mut values);
    texts(facts::names(), &mut values);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../src");
    let Ok(entries) = std::fs::read_dir(&src) else { panic!("read {}", src.display()) };
    let mut copies = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        if !name.ends_with(".ts") || name == "facts.ts" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for value in &values {
            for quote in ['"', '\''] {
                if text.contains(&format!("{quote}{value}{quote}")) {
                    copies.push(format!("{name}: {quote}{value}{quote}"));
                }
            }
        }
    }
    assert!(copies.is_empty(), "read these from facts.ts (`core.constants`, the header names):\n{}", copies.join("\n"));
}
