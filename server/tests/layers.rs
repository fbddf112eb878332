//! The reference server's modules keep the layers named in `src/lib.rs`'s docs (lowest first): every path a
//! module writes that names another module of the crate (a `use` item, an inline `crate::a::f()`, an `impl`
//! target, a macro's argument) names one of its own layer or a lower one; the module graph has no cycle;
//! every module is placed, so a new file is placed on purpose. docs/ARCHITECTURE.md shows the same table.
//! The checker is the library's (`idempotent-endpoint`'s `tests/layering`), proven there on a planted
//! violation.

#[path = "../idempotency/tests/layering/mod.rs"]
mod layering;

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
