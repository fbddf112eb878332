//! The layer checker both crates' `tests/layers.rs` run: it parses every source file of a crate with `syn`
//! and reads every path that names a module of the crate (`crate::`, `super::`, `self::`, `$crate::`, and a
//! child module by name): in `use` trees and their nested groups, in expressions, types, patterns, `impl`
//! targets and trait bounds, in macro invocations and in attributes. Doc comments are prose, not code, and are
//! not read. A line-based reader of `use` items misses the inline `crate::a::f()` and `impl crate::b::T for`
//! that tie modules together just as firmly, so this one reads the syntax tree.
//!
//! The layers are read from a table in the crate's `lib.rs` docs (`| layer | modules |`, lowest first, each
//! module in backticks), so the documented table is the one enforced. A module may name only modules of its
//! own layer or a lower one; the module graph has no strongly connected component of more than one module (no
//! cycle, within a layer or across); every module is placed in the table.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// Layers from the bottom: each entry is (layer, its modules).
pub type Layers = Vec<(String, Vec<String>)>;

/// The crate's sources by module path (`store::sqlite`); the crate root (`lib.rs`) is `""`. `main.rs` and
/// `src/bin` are other crates (their `crate::` is the binary) and are left out.
pub fn sources(src: &Path) -> BTreeMap<String, String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
        for entry in fs::read_dir(dir).expect("read src").flatten() {
            let path = entry.path();
            if path.is_dir() && path.file_name().is_some_and(|n| n != "bin") {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(root).expect("under src");
                let text = relative.with_extension("").to_string_lossy().replace(std::path::MAIN_SEPARATOR, "::");
                let module = text.strip_suffix("::mod").unwrap_or(&text);
                if module == "main" {
                    continue;
                }
                let module = if module == "lib" { "" } else { module };
                out.insert(module.to_owned(), fs::read_to_string(&path).expect("read source"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, src, &mut out);
    out
}

/// The layer table of a crate root's docs: the rows after `| layer | modules |`, each module in backticks.
pub fn layers_in_docs(lib: &str) -> Layers {
    let rows = lib
        .lines()
        .map(|line| line.trim_start_matches("//!").trim())
        .skip_while(|line| !line.starts_with("| layer | modules |"))
        .skip(1)
        .take_while(|line| line.starts_with('|'))
        .filter(|line| !line.starts_with("|-") && !line.starts_with("| -"));
    rows.map(|row| {
        let cells: Vec<&str> = row.trim_matches('|').splitn(2, '|').map(str::trim).collect();
        let modules = cells.get(1).unwrap_or(&"").split('`').skip(1).step_by(2).map(str::to_owned).collect();
        (cells[0].to_owned(), modules)
    })
    .collect()
}

/// One reference from a module to another: the module it names and the path as written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Reference {
    /// The module named (the longest module prefix of the resolved path).
    pub target: String,
    /// The path as written in the source, for the message.
    pub path: String,
}

/// Every reference each module makes to another module of the crate. A source that does not parse is an
/// error: the checker must not pass a file it could not read.
pub fn references(files: &BTreeMap<String, String>) -> Result<BTreeMap<String, BTreeSet<Reference>>, String> {
    let known: BTreeSet<&str> = files.keys().map(String::as_str).collect();
    let reexports = match files.get("") {
        Some(root) => root_reexports(root)?,
        None => BTreeMap::new(),
    };
    let mut out = BTreeMap::new();
    for (module, source) in files.iter().filter(|(m, _)| !m.is_empty()) {
        let file = syn::parse_file(source).map_err(|e| format!("{module}: {e}"))?;
        let mut collector = Collector { module: segments(module), paths: Vec::new() };
        collector.visit_file(&file);
        let mut found = BTreeSet::new();
        for (absolute, written) in collector.paths {
            if let Some(target) = module_of(&absolute, &known, &reexports) {
                if target != *module {
                    found.insert(Reference { target, path: written });
                }
            }
        }
        out.insert(module.clone(), found);
    }
    Ok(out)
}

/// Everything wrong with a crate's layering, one line each; empty when it keeps its layers.
pub fn problems(layers: &Layers, files: &BTreeMap<String, String>) -> Vec<String> {
    let layer_of: BTreeMap<&str, usize> =
        layers.iter().enumerate().flat_map(|(i, (_, modules))| modules.iter().map(move |m| (m.as_str(), i))).collect();
    let mut problems: Vec<String> = files
        .keys()
        .filter(|m| !m.is_empty() && !layer_of.contains_key(m.as_str()))
        .map(|m| format!("module missing from the layer table (place it): {m}"))
        .collect();
    problems.extend(
        layer_of
            .keys()
            .filter(|m| !files.contains_key(**m))
            .map(|m| format!("the layer table names no such module: {m}")),
    );
    let references = match references(files) {
        Ok(references) => references,
        Err(e) => return vec![format!("unreadable source: {e}")],
    };
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (module, refs) in &references {
        let own = layer_of.get(module.as_str());
        for reference in refs {
            graph.entry(module.as_str()).or_default().insert(reference.target.as_str());
            let (Some(&own), Some(&theirs)) = (own, layer_of.get(reference.target.as_str())) else { continue };
            if theirs > own {
                problems.push(format!(
                    "{module} ({}) imports {} ({}), a higher layer: `{}`",
                    layers[own].0, reference.target, layers[theirs].0, reference.path
                ));
            }
        }
    }
    for component in strongly_connected(&graph) {
        problems.push(format!("import cycle: {}", cycle_in(&component, &graph).join(" -> ")));
    }
    problems
}

/// The strongly connected components of more than one module (Tarjan's algorithm).
fn strongly_connected<'a>(graph: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<BTreeSet<&'a str>> {
    struct Tarjan<'g, 'a> {
        graph: &'g BTreeMap<&'a str, BTreeSet<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        components: Vec<BTreeSet<&'a str>>,
    }
    impl<'a> Tarjan<'_, 'a> {
        fn connect(&mut self, node: &'a str) {
            let index = self.index.len();
            self.index.insert(node, index);
            self.low.insert(node, index);
            self.stack.push(node);
            self.on_stack.insert(node);
            for &next in self.graph.get(node).into_iter().flatten() {
                if !self.index.contains_key(next) {
                    self.connect(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = BTreeSet::new();
                while let Some(member) = self.stack.pop() {
                    self.on_stack.remove(member);
                    component.insert(member);
                    if member == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    self.components.push(component);
                }
            }
        }
    }
    let mut tarjan = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for &node in graph.keys() {
        if !tarjan.index.contains_key(node) {
            tarjan.connect(node);
        }
    }
    tarjan.components
}

/// A shortest cycle through the component's first module, for the message (`a -> b -> a`).
fn cycle_in<'a>(component: &BTreeSet<&'a str>, graph: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<&'a str> {
    let start = *component.first().expect("a component has members");
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for &next in graph.get(node).into_iter().flatten().filter(|n| component.contains(*n)) {
            if next == start {
                let mut cycle = vec![start, node];
                let mut at = node;
                while at != start {
                    at = came_from[at];
                    cycle.push(at);
                }
                cycle.reverse();
                return cycle;
            }
            if !came_from.contains_key(next) {
                came_from.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    component.iter().copied().collect()
}

fn segments(module: &str) -> Vec<String> {
    module.split("::").filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

/// The module a resolved path names: its longest prefix that is a module of the crate, through the crate
/// root's re-exports (`crate::Config` is `config::Config`). `None` for a path that does not start at a module of
/// the crate (an external crate, a local item).
fn module_of(absolute: &[String], known: &BTreeSet<&str>, reexports: &BTreeMap<String, Vec<String>>) -> Option<String> {
    let longest = (1..=absolute.len()).rev().map(|n| absolute[..n].join("::")).find(|m| known.contains(m.as_str()));
    match longest {
        Some(module) => Some(module),
        None => {
            let first = absolute.first()?;
            let through = reexports.get(first)?;
            let mut resolved = through.clone();
            resolved.extend(absolute[1..].iter().cloned());
            if resolved.first() == absolute.first() {
                return None;
            }
            module_of(&resolved, known, reexports)
        }
    }
}

/// The crate root's `use` items: each name it brings in (or renames) and the crate path it stands for.
fn root_reexports(root: &str) -> Result<BTreeMap<String, Vec<String>>, String> {
    let file = syn::parse_file(root).map_err(|e| format!("lib.rs: {e}"))?;
    let mut out = BTreeMap::new();
    for item in &file.items {
        if let syn::Item::Use(item) = item {
            let mut leaves = Vec::new();
            use_leaves(&item.tree, Vec::new(), &mut leaves);
            for (path, name) in leaves {
                if let (Some(name), Some(absolute)) = (name, resolve(&path, &[])) {
                    out.insert(name, absolute);
                }
            }
        }
    }
    Ok(out)
}

/// The leaves of a `use` tree: each full path and the name it binds (`None` for a glob).
fn use_leaves(tree: &syn::UseTree, prefix: Vec<String>, out: &mut Vec<(Vec<String>, Option<String>)>) {
    let with = |segment: String| {
        let mut path = prefix.clone();
        path.push(segment);
        path
    };
    match tree {
        syn::UseTree::Path(p) => use_leaves(&p.tree, with(p.ident.to_string()), out),
        syn::UseTree::Name(n) if n.ident == "self" => {
            let name = prefix.last().cloned();
            out.push((prefix.clone(), name));
        }
        syn::UseTree::Name(n) => out.push((with(n.ident.to_string()), Some(n.ident.to_string()))),
        syn::UseTree::Rename(r) => out.push((with(r.ident.to_string()), Some(r.rename.to_string()))),
        syn::UseTree::Glob(_) => out.push((prefix.clone(), None)),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| use_leaves(t, prefix.clone(), out)),
    }
}

/// A path as written, resolved from the crate root, when it starts at the crate (`crate`, `$crate`), at a
/// module relative to `module` (`self`, `super`), or at a child module of `module` by name (`store::x` in
/// the crate root, `phases::X` in `store`). A single-segment path is a local item, never a module reference,
/// unless it starts with one of those keywords.
fn resolve(path: &[String], module: &[String]) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut base: Vec<String> = match first.as_str() {
        "crate" | "$crate" => Vec::new(),
        "self" | "super" => module.to_vec(),
        _ if path.len() > 1 && first.chars().next().is_some_and(|c| c.is_lowercase()) => {
            let mut relative = module.to_vec();
            relative.extend(path.iter().cloned());
            return Some(relative);
        }
        _ => return None,
    };
    let mut rest = &path[1..];
    if first == "super" {
        base.pop()?;
    }
    while let Some(next) = rest.first() {
        match next.as_str() {
            "super" => {
                base.pop()?;
            }
            "self" => {}
            _ => break,
        }
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// Walks one file's syntax tree and collects each path that may name a module, resolved from the crate root.
struct Collector {
    /// The module being read: the file's module, then any inline `mod name { .. }` inside it.
    module: Vec<String>,
    paths: Vec<(Vec<String>, String)>,
}

impl Collector {
    fn add(&mut self, path: Vec<String>) {
        let written = path.join("::");
        if let Some(absolute) = resolve(&path, &self.module) {
            self.paths.push((absolute, written));
        }
    }

    /// Paths inside unparsed tokens (a macro's arguments, an attribute's list): each run of
    /// `ident :: ident :: ..`, and a string literal that is a path (`#[serde(with = "crate::x")]`).
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(group) => self.tokens(group.stream()),
                TokenTree::Literal(literal) => {
                    let text = literal.to_string();
                    if let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
                        if let Ok(path) = syn::parse_str::<syn::Path>(inner) {
                            self.add(path.segments.iter().map(|s| s.ident.to_string()).collect());
                        }
                    }
                }
                TokenTree::Ident(ident) => {
                    let dollar = i > 0 && matches!(&trees[i - 1], TokenTree::Punct(p) if p.as_char() == '$');
                    let mut path =
                        vec![if dollar && ident == "crate" { "$crate".to_owned() } else { ident.to_string() }];
                    // A run continues past a preceding `::` only when it started there: `x::y` after `::` is the
                    // tail of a path already read.
                    let continues = i >= 2
                        && matches!(&trees[i - 1], TokenTree::Punct(p) if p.as_char() == ':')
                        && matches!(&trees[i - 2], TokenTree::Punct(p) if p.as_char() == ':');
                    while let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)), Some(TokenTree::Ident(next))) =
                        (trees.get(i + 1), trees.get(i + 2), trees.get(i + 3))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        path.push(next.to_string());
                        i += 3;
                    }
                    if !continues {
                        self.add(path);
                    }
                }
                TokenTree::Punct(_) => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        for attribute in &item.attrs {
            self.visit_attribute(attribute);
        }
        if let Some((_, items)) = &item.content {
            self.module.push(item.ident.to_string());
            for item in items {
                self.visit_item(item);
            }
            self.module.pop();
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        for attribute in &item.attrs {
            self.visit_attribute(attribute);
        }
        let mut leaves = Vec::new();
        use_leaves(&item.tree, Vec::new(), &mut leaves);
        for (path, _) in leaves {
            // `use super::*` names the parent, `use crate::store::{self}` names `store`: a whole path may be a
            // single keyword-led segment here, unlike in an expression.
            let keyword_only = path.len() == 1 && matches!(path[0].as_str(), "crate" | "self" | "super");
            if path.len() > 1 || keyword_only {
                self.add(path);
            }
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.add(path.segments.iter().map(|s| s.ident.to_string()).collect());
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
        visit::visit_macro(self, mac);
    }

    fn visit_attribute(&mut self, attribute: &'ast syn::Attribute) {
        if attribute.path().is_ident("doc") {
            return;
        }
        if let syn::Meta::List(list) = &attribute.meta {
            self.tokens(list.tokens.clone());
        }
        visit::visit_attribute(self, attribute);
    }
}
