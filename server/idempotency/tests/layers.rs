//! This library's modules keep the layers named in `src/lib.rs`'s docs: every path a module writes that
//! names another module of the crate names one of its own layer or a lower one, the module graph has no
//! cycle, and every module is placed. The checker (`layering`) is shared with the reference server's
//! `tests/layers.rs`; its own tests are here, where it lives.

mod layering;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[test]
fn every_module_names_only_its_layer_or_lower_and_no_modules_form_a_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = layering::sources(&root);
    let layers = layering::layers_in_docs(&files[""]);
    assert!(!layers.is_empty(), "no `| layer | modules |` table in src/lib.rs");
    let problems = layering::problems(&layers, &files);
    assert!(problems.is_empty(), "layering broken:\n{}", problems.join("\n"));
}

fn tree(files: &[(&str, &str)]) -> BTreeMap<String, String> {
    files.iter().map(|(m, s)| (m.to_string(), s.to_string())).collect()
}

fn layers(rows: &[(&str, &[&str])]) -> layering::Layers {
    rows.iter().map(|(l, ms)| (l.to_string(), ms.iter().map(|m| m.to_string()).collect())).collect()
}

/// The checker proven on a planted violation: no `use` line anywhere, only an inline call and an `impl`
/// target naming a higher layer, and two modules naming each other.
#[test]
fn the_checker_reports_a_planted_inline_upward_path_an_impl_target_and_a_cycle() {
    let files = tree(&[
        ("", "pub mod a; pub mod b; pub mod low; pub mod x; pub mod y;"),
        ("a", "pub fn f() {}"),
        ("b", "pub trait T {}"),
        ("low", "pub struct S;\npub fn g() { crate::a::f(); }\nimpl crate::b::T for S {}\n"),
        ("x", "pub fn x() { super::y::y() }"),
        ("y", "pub fn y() { let _ = crate::x::x; }"),
    ]);
    let table = layers(&[("bottom", &["low", "x", "y"]), ("top", &["a", "b"])]);
    let problems = layering::problems(&table, &files);
    assert_eq!(
        problems,
        [
            "low (bottom) imports a (top), a higher layer: `crate::a::f`",
            "low (bottom) imports b (top), a higher layer: `crate::b::T`",
            "import cycle: x -> y -> x",
        ],
        "{problems:#?}"
    );
}

/// Every place a path can stand is read: `use` groups with nested braces and `self`, a glob of the parent,
/// types, patterns, trait bounds, macro arguments (`$crate` too), attributes and a path in an attribute's
/// string, a child module by name, the crate root's re-exports, and an inline test module's `super`. Doc
/// comments and a path to an external crate are not references.
#[test]
fn the_checker_reads_every_kind_of_path() {
    let files = tree(&[
        ("", "pub mod m; pub mod p; pub use m::Config;"),
        (
            "p",
            r#"
            //! See [`crate::doc_only`].
            pub mod child;
            use crate::{use_group::{a, nested::{b}}, use_self::{self}};
            pub(crate) use super::*;
            fn f(x: crate::in_type::T) -> Option<crate::in_generic::U> where X: crate::in_bound::B {
                let crate::in_pattern::P { .. } = x;
                format!("{}", crate::in_macro::NAME);
                macro_rules! m { () => { $crate::in_dollar::f() } }
                child::g();
                std::process::id();
                crate::Config::default();
                tokio::spawn(async {});
            }
            #[serde(with = "crate::in_attr_string")]
            #[derive(crate::in_attr::Derive)]
            struct S;
            #[cfg(test)]
            mod tests {
                use super::super::in_test_super;
            }
            "#,
        ),
    ]);
    let mut files = files;
    let named = [
        "m",
        "p::child",
        "use_group",
        "use_group::nested",
        "use_self",
        "in_type",
        "in_generic",
        "in_bound",
        "in_pattern",
        "in_macro",
        "in_dollar",
        "in_attr_string",
        "in_attr",
        "in_test_super",
    ];
    for module in named.iter().chain(&["doc_only"]) {
        files.entry(module.to_string()).or_default();
    }
    let references = layering::references(&files).expect("the tree parses");
    let found: BTreeSet<&str> = references["p"].iter().map(|r| r.target.as_str()).collect();
    assert_eq!(found, named.into_iter().collect::<BTreeSet<_>>());
}
