//! The glue's `Exports` interface (`src/js/generated/abi.ts`) is generated from the signatures of the
//! module's exports (`pub extern "C" fn` in `src/wasm/abi.rs`): this fails when they differ, and
//! `IF_BLESS=1` rewrites the file. Each parameter's Rust type names its TypeScript type (`TYPES`), so
//! a signature is stated once, in Rust.
#![cfg(not(target_arch = "wasm32"))]

use std::fmt::Write;
use std::path::Path;

#[path = "generated/bless.rs"]
mod bless;

/// Each Rust type an export takes or returns, and its type in the glue.
const TYPES: &[(&str, &str)] = &[
    ("u32", "number"),
    ("usize", "number"),
    ("f64", "number"),
    ("*mut u8", "number"),
    ("Flag", "boolean"),
    ("Length", "Length"),
    ("*mut Engine", "Handle"),
    ("*mut Machine", "Handle"),
    ("MaybeMachine", "Handle | undefined"),
];

/// One export: its doc comment's lines, name, parameters (name, Rust type) and return type.
struct Export {
    doc: Vec<String>,
    name: String,
    params: Vec<(String, String)>,
    returns: Option<String>,
}

/// Every `pub extern "C" fn` of `source`, in order.
fn exports(source: &str) -> Vec<Export> {
    const MARK: &str = "pub extern \"C\" fn ";
    let mut out = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find(MARK) {
        // The doc comment: the `///` lines right above, attributes between them skipped.
        let doc = rest[..at]
            .trim_end()
            .lines()
            .rev()
            .map(str::trim)
            .take_while(|line| line.starts_with("///") || line.starts_with("#["))
            .filter_map(|line| line.strip_prefix("///"))
            .map(|line| line.trim().to_owned())
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let signature = &rest[at + MARK.len()..];
        let open = signature.find('(').expect("an export's parameter list");
        let close = signature.find(')').expect("the end of an export's parameter list");
        let body = signature.find('{').expect("an export's body");
        let params = signature[open + 1..close]
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (name, ty) = p.split_once(':').expect("a parameter `name: Type`");
                (name.trim().to_owned(), ty.trim().to_owned())
            })
            .collect();
        let returns = signature[close + 1..body].trim().strip_prefix("->").map(|t| t.trim().to_owned());
        out.push(Export { doc, name: signature[..open].trim().to_owned(), params, returns });
        rest = &signature[body..];
    }
    out
}

/// The glue's type for a Rust type of the ABI.
fn ts_type(rust: &str, export: &str) -> &'static str {
    TYPES
        .iter()
        .find(|(r, _)| *r == rust)
        .map(|(_, ts)| *ts)
        .unwrap_or_else(|| panic!("{export} uses `{rust}`: add its TypeScript type to TYPES in tests/abi_exports.rs"))
}

/// `snake_case` (a trailing `_` that avoids a keyword dropped) as `camelCase`.
fn camel(name: &str) -> String {
    let mut out = String::new();
    for (i, part) in name.trim_end_matches('_').split('_').enumerate() {
        let mut chars = part.chars();
        if i > 0 {
            out.extend(chars.next().map(|c| c.to_ascii_uppercase()));
        }
        out.extend(chars);
    }
    out
}

/// The text of `src/js/generated/abi.ts`.
fn typescript(exports: &[Export]) -> String {
    let mut out = String::from(
        "// Generated from src/wasm/abi.rs by `IF_BLESS=1 cargo test --test abi_exports`: do not edit.\n\
         // The module's exports as the glue (src/js/abi.ts) calls them (docs/WASM-BOUNDARY.md, \"The ABI\").\n\n\
         /** An `Engine` or `Machine` as the glue holds it: the address of its box in the module, 0 for none. */\n\
         export type Handle = number;\n\
         /** A string's UTF-8 byte length in the module's scratch buffer, -1 when absent. */\n\
         export type Length = number;\n\n\
         /** The module's exports: every value a number (handles, lengths, 0/1 booleans). */\n\
         export interface Exports {\n  \
         /** The module's memory (the scratch buffer and every string the module returns are in it). */\n  \
         readonly memory: WebAssembly.Memory;\n",
    );
    for export in exports {
        if !export.doc.is_empty() {
            let _ = writeln!(out, "  /** {} */", export.doc.join(" "));
        }
        let params = export
            .params
            .iter()
            .map(|(name, ty)| format!("{}: {}", camel(name), ts_type(ty, &export.name)))
            .collect::<Vec<_>>()
            .join(", ");
        let returns = export.returns.as_deref().map_or("void", |ty| ts_type(ty, &export.name));
        let _ = writeln!(out, "  {}({params}): {returns};", export.name);
    }
    out.push_str("}\n");
    out
}

#[test]
fn the_glue_interface_matches_the_exports() {
    let source = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/wasm/abi.rs"))
        .expect("read src/wasm/abi.rs");
    let found = exports(&source);
    assert!(found.len() >= 10, "found only {} exports in src/wasm/abi.rs: has the parser's mark changed?", found.len());
    bless::check_generated(
        "src/js/generated/abi.ts",
        &typescript(&found),
        "the exports of src/wasm/abi.rs",
        "abi_exports",
    );
}

#[test]
fn the_parser_reads_a_signature_over_several_lines_with_its_doc() {
    let source = "/// Does a thing.\n/// Two lines.\n#[no_mangle]\npub extern \"C\" fn do_it(\n    handle: *mut Machine,\n    now_ms: f64,\n    override_: Flag,\n) -> u32 {\n    0\n}\n#[no_mangle]\npub extern \"C\" fn other(len: Length) {}\n";
    let found = exports(source);
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].doc, ["Does a thing.", "Two lines."]);
    let text = typescript(&found);
    assert!(
        text.contains(
            "  /** Does a thing. Two lines. */\n  do_it(handle: Handle, nowMs: number, override: boolean): number;\n"
        ),
        "{text}"
    );
    assert!(text.contains("  other(len: Length): void;\n"), "{text}");
}
