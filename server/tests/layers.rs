//! The reference server's modules in layers, lowest first: a module imports (`use crate::` and `use super::`
//! lines) only modules of its own layer or a lower one, and the imports within a layer form no cycle. Every
//! module must be in [`LAYERS`], so a new file is placed on purpose. docs/ARCHITECTURE.md shows the same
//! table.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Layers from the bottom: each entry is (layer, its modules). The protocol itself is the library
/// `idempotent-endpoint`, below all of them.
const LAYERS: &[(&str, &[&str])] = &[
    ("util", &["clock", "problem", "address"]),
    ("domain", &["keys", "orders", "protocol", "session", "inflight", "faults"]),
    ("store", &["store", "store::phases", "store::sqlite", "store::postgres", "sweep"]),
    ("flow", &["services", "services::mailbox", "services::provider", "checkout", "outbox", "config", "error"]),
    ("http", &["limits", "state", "auth", "upload", "idempotency", "key_status", "static_files", "routes"]),
    ("app", &["server", "binary"]),
];

/// Module path (`store::sqlite`) of a file under `src/`.
fn module_of(relative: &Path) -> String {
    let text = relative.with_extension("").to_string_lossy().replace(std::path::MAIN_SEPARATOR, "::");
    text.strip_suffix("::mod").unwrap_or(&text).to_owned()
}

/// The modules a file imports, from its `use crate::...;` and `use super::...;` items (test modules excluded).
fn imports(module: &str, source: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let code = source.split("#[cfg(test)]").next().unwrap_or(source);
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before = &rest[..at];
        rest = &rest[at + 4..];
        // Only items at the start of a line (after `pub`/`pub(crate)`), not the word "use" in a comment.
        let line_start = before.rsplit('\n').next().unwrap_or("").trim();
        if !(line_start.is_empty() || line_start == "pub" || line_start == "pub(crate)") {
            continue;
        }
        let Some(end) = rest.find(';') else { break };
        let item: String = rest[..end].chars().filter(|c| !c.is_whitespace()).collect();
        let (base, tail) = if let Some(tail) = item.strip_prefix("crate::") {
            (String::new(), tail.to_owned())
        } else if let Some(tail) = item.strip_prefix("super::") {
            (module.rsplit_once("::").map(|(parent, _)| format!("{parent}::")).unwrap_or_default(), tail.to_owned())
        } else {
            continue;
        };
        let paths: Vec<String> = match tail.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
            Some(group) => split_top_level(group),
            None => vec![tail],
        };
        for path in paths {
            let segments: Vec<&str> = path.split("::").collect();
            // The longest prefix that names a module: `store::phases::HeldKey` is `store::phases`.
            let target = (1..=segments.len().min(2))
                .rev()
                .map(|n| format!("{base}{}", segments[..n].join("::")))
                .find(|candidate| known.contains(candidate))
                .unwrap_or_else(|| base.trim_end_matches("::").to_owned());
            if !target.is_empty() && target != module {
                found.insert(target);
            }
        }
    }
    found
}

fn split_top_level(group: &str) -> Vec<String> {
    let (mut parts, mut depth, mut current) = (Vec::new(), 0, String::new());
    for c in group.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

fn sources(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
    for entry in fs::read_dir(dir).expect("read src").flatten() {
        let path = entry.path();
        if path.is_dir() && path.file_name().is_some_and(|n| n != "bin") {
            sources(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path.strip_prefix(root).expect("under src");
            let module = module_of(relative);
            if module != "lib" && module != "main" {
                out.insert(module, fs::read_to_string(&path).expect("read source"));
            }
        }
    }
}

#[test]
fn every_module_imports_only_its_layer_or_lower_and_no_layer_has_a_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    sources(&root, &root, &mut files);
    let layer_of: BTreeMap<&str, usize> =
        LAYERS.iter().enumerate().flat_map(|(i, (_, modules))| modules.iter().map(move |m| (*m, i))).collect();
    let known: BTreeSet<String> = files.keys().cloned().collect();
    let unplaced: Vec<&String> = known.iter().filter(|m| !layer_of.contains_key(m.as_str())).collect();
    assert!(unplaced.is_empty(), "modules missing from LAYERS (place them): {unplaced:?}");

    let mut problems = Vec::new();
    let mut graph: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (module, source) in &files {
        let own = layer_of[module.as_str()];
        for target in imports(module, source, &known) {
            let Some(&theirs) = layer_of.get(target.as_str()) else { continue };
            if theirs > own {
                problems.push(format!(
                    "{module} ({}) imports {target} ({}), a higher layer",
                    LAYERS[own].0, LAYERS[theirs].0
                ));
            } else if theirs == own {
                graph.entry(module.as_str()).or_default().insert(target);
            }
        }
    }
    // A cycle within a layer: depth-first search for a back edge.
    fn visit<'a>(
        node: &'a str,
        graph: &'a BTreeMap<&str, BTreeSet<String>>,
        state: &mut BTreeMap<&'a str, u8>,
        path: &mut Vec<&'a str>,
        cycles: &mut Vec<String>,
    ) {
        state.insert(node, 1);
        path.push(node);
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next.as_str()) {
                Some(1) => cycles.push(format!("{} -> {next}", path.join(" -> "))),
                Some(_) => {}
                None => visit(next, graph, state, path, cycles),
            }
        }
        path.pop();
        state.insert(node, 2);
    }
    let (mut state, mut cycles) = (BTreeMap::new(), Vec::new());
    for node in graph.keys() {
        if !state.contains_key(node) {
            visit(node, &graph, &mut state, &mut Vec::new(), &mut cycles);
        }
    }
    problems.extend(cycles.into_iter().map(|c| format!("import cycle: {c}")));
    assert!(problems.is_empty(), "layering broken:\n{}", problems.join("\n"));
}

#[test]
fn the_reader_sees_upward_imports_and_cycles() {
    let known: BTreeSet<String> =
        ["store", "store::phases", "keys", "checkout"].iter().map(|s| s.to_string()).collect();
    let source =
        "use crate::keys::IdempotencyKey;\nuse super::{phases::HeldKey, StoreError};\n// use crate::checkout;\n";
    let found = imports("store::sqlite", source, &known);
    assert_eq!(found, ["keys", "store", "store::phases"].iter().map(|s| s.to_string()).collect());
    let grouped = imports("x", "pub(crate) use crate::{checkout::{a, b}, keys};", &known);
    assert_eq!(grouped, ["checkout", "keys"].iter().map(|s| s.to_string()).collect());
}
