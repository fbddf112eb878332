//! What ships, and its budgets: for each build of the core and each entry of the package, the files a
//! browser downloads for it, each compressed with `gzip -9` on its own (as a server sends them),
//! summed. The entries are those of `pkg/package.json`'s `exports` (package/build.mjs writes them; the
//! core's two builds are its `development` and default conditions), the parts loaded on demand the
//! files under `pkg/lazy/`. `benches/size.mjs` measures what an app's bundler makes of the package,
//! with brotli and the comparisons; these are the budgets that CI enforces.

use crate::process::{cmd, Result};
use std::fs;
use std::process::Stdio;

/// The built package.
const PKG: &str = "pkg";
/// The machine, downloaded with either build of the core.
const WASM: &str = "idempotent_fetch_bg.wasm";
/// The subpaths whose files are the core (with the `.wasm`): the page's entry and the service workers'.
const CORE: &[&str] = &[".", "./worker"];
/// The mark of the development build's files (package/build.mjs `fileOf`).
const DEVELOPMENT: &str = ".development.js";

/// The budget of each row, in gzip -9 bytes: what ships now plus a few bytes, so a change that adds
/// bytes says so in its commit (the figures are in BENCHMARKS.md "What ships"; their history is in
/// git). A row without a budget, or a budget without a row, fails the step.
pub const BUDGETS: &[(&str, u64)] = &[
    (". production", 22_210),
    (". development", 24_230),
    ("./worker production", 27_970),
    ("./worker development", 30_650),
    ("lazy parts production", 9_430),
    ("lazy parts development", 10_620),
    ("./watch", 2_026),
    ("./react", 2_210),
    ("./vue", 2_260),
    ("./svelte", 2_070),
    ("./tanstack", 1_268),
    ("./agent", 1_006),
    ("./sw", 1_398),
    ("./file", 1_372),
    ("./otel", 2_230),
];

/// One measured row: its name and files (paths under the repository root).
type Row = (String, Vec<String>);

/// The rows: each build of the core, each side entry, the lazy parts of each build.
fn rows() -> Result<Vec<Row>> {
    let path = format!("{PKG}/package.json");
    let text = fs::read_to_string(&path).map_err(|e| format!("{path}: {e} (build it: cargo xtask build)"))?;
    let manifest: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
    let exports = manifest["exports"].as_object().ok_or(format!("{path} has no exports"))?;
    let file = |value: &serde_json::Value, what: &str| -> Result<String> {
        let name = value.as_str().ok_or(format!("{path}: exports {what} is not a file"))?;
        Ok(format!("{PKG}/{}", name.trim_start_matches("./")))
    };
    let mut rows = Vec::new();
    for (subpath, conditions) in exports {
        if subpath == "./package.json" {
            continue;
        }
        if CORE.contains(&subpath.as_str()) {
            // "." names its builds under `import`; "./worker" directly.
            let builds = if conditions["import"].is_object() { &conditions["import"] } else { conditions };
            for (build, condition) in [("production", "default"), ("development", "development")] {
                let js = file(&builds[condition], &format!("{subpath} {condition}"))?;
                rows.push((format!("{subpath} {build}"), vec![format!("{PKG}/{WASM}"), js]));
            }
        } else {
            rows.push((subpath.clone(), vec![file(&conditions["import"]["default"], &format!("{subpath} import"))?]));
        }
    }
    let mut lazy: Vec<String> = fs::read_dir(format!("{PKG}/lazy"))
        .map_err(|e| format!("{PKG}/lazy: {e}"))?
        .filter_map(|entry| entry.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|name| name.ends_with(".js"))
        .map(|name| format!("{PKG}/lazy/{name}"))
        .collect();
    lazy.sort();
    let (development, production): (Vec<String>, Vec<String>) =
        lazy.into_iter().partition(|f| f.ends_with(DEVELOPMENT));
    rows.push(("lazy parts production".into(), production));
    rows.push(("lazy parts development".into(), development));
    Ok(rows)
}

/// The gzip -9 size of `file`.
fn gzip_size(file: &str) -> Result<u64> {
    match cmd("gzip").args(["-9", "-c", file]).stderr(Stdio::inherit()).output() {
        Ok(o) if o.status.success() => Ok(o.stdout.len() as u64),
        _ => Err(format!("gzip -9 -c {file} failed")),
    }
}

/// Print the table; an error when a row is past its budget, or a row and the budgets disagree.
pub fn check() -> Result {
    let rows = rows()?;
    let mut problems = Vec::new();
    println!("{:<26} {:>10} {:>10}  files", "what", "gzip -9 B", "budget");
    for (name, files) in &rows {
        let bytes = files.iter().map(|f| gzip_size(f)).sum::<Result<u64>>()?;
        let budget = BUDGETS.iter().find(|(n, _)| n == name).map(|b| b.1);
        println!("{name:<26} {bytes:>10} {:>10}  {}", budget.map_or("none".into(), |b| b.to_string()), files.join(" "));
        match budget {
            None => problems.push(format!("{name} has no budget")),
            Some(b) if bytes > b => problems.push(format!("{name} is {bytes} B gzip, past its budget of {b} B")),
            Some(_) => {}
        }
    }
    for (name, _) in BUDGETS {
        if !rows.iter().any(|(n, _)| n == name) {
            problems.push(format!("the budget of {name} names nothing the package ships"));
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} (xtask/src/size.rs BUDGETS): make it smaller, or change the budget in the same commit and say why",
        problems.join("; ")
    ))
}
