//! `cargo xtask test` and `cargo xtask gates`: the gates (fast, first), then the test layers, in order,
//! stopping at the first failure. A step whose files are missing fails: nothing is skipped. Adding a
//! step is one function and one line in `STEPS` (see xtask/README.md).

use crate::disk;
use crate::install;
use crate::process::{cargo, cmd, free_port, run, spawn_listening, Result};
use crate::project::{
    build_api_docs, ensure_demo_tracing, ensure_node_server, ensure_package, root, server_binary, APP_TS_DIRS,
    LIBRARY_PACKAGE, NODE_SERVER_DIR, NODE_SERVER_DOCS_CONFIG, PACKAGE_DIR, SERVER_PACKAGE, TOOLS_DIR, TSCONFIGS,
    TYPEDOC_DIR, WWW_DIR,
};
use crate::size;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A step: its name on the command line, what it does, whether it is a gate, and how to run it.
struct Step(&'static str, &'static str, bool, fn() -> Result);

const GATE: bool = true;
const LAYER: bool = false;

const STEPS: &[Step] = &[
    Step("fmt", "cargo fmt --check", GATE, fmt),
    Step("clippy", "clippy -D warnings", GATE, clippy),
    Step("doc", "rustdoc -D warnings", GATE, doc),
    Step("tsc", "tsc --strict over every tsconfig", GATE, tsc),
    Step("typedoc", "API reference, all exports documented", GATE, || build_api_docs().map(|_| ())),
    Step("a", "native tests (cargo test --workspace)", LAYER, native_tests),
    Step("b", "wasm32 release build", LAYER, wasm_build),
    Step("c", "npm package (pkg/)", LAYER, ensure_package),
    Step("d", "size budget", LAYER, size::check),
    Step("e", "wasm-bindgen-test (headless chrome, node)", LAYER, wasm_tests),
    Step("f", "JS tests (tests/js)", LAYER, || node_tests("tests/js")),
    Step("g", "Node server half (server/node)", LAYER, node_server_tests),
    Step("h", "browser end-to-end (www/tests)", LAYER, || node_tests("www/tests")),
    Step("i", "fault suite (tests/fault/run.mjs)", LAYER, fault_suite),
];

/// Rust workspaces besides the root one (their own Cargo.lock), formatted and linted too.
const OTHER_WORKSPACES: &[&str] = &["benches/backoff-sim/Cargo.toml"];

fn fmt() -> Result {
    run(cargo().args(["fmt", "--all", "--check"]))?;
    OTHER_WORKSPACES.iter().try_for_each(|m| run(cargo().args(["fmt", "--all", "--check", "--manifest-path", m])))
}

/// The wasm crate's browser code compiles for wasm32 only, so it is linted and documented for both.
const WASM_CRATE: [&str; 4] = ["-p", "idempotent-fetch", "--target", "wasm32-unknown-unknown"];

fn clippy() -> Result {
    let lint = |args: &[&str]| run(cargo().arg("clippy").args(args).args(["--all-targets", "--", "-D", "warnings"]));
    lint(&["--workspace"])?;
    // The server's `otel` feature is a default one: its build without it is linted too.
    lint(&["-p", SERVER_PACKAGE, "--no-default-features"])?;
    lint(&WASM_CRATE)?;
    OTHER_WORKSPACES.iter().try_for_each(|m| lint(&["--manifest-path", m]))
}

fn doc() -> Result {
    let rustdoc = |args: &[&str]| run(cargo().args(["doc", "--no-deps"]).args(args).env("RUSTDOCFLAGS", "-D warnings"));
    rustdoc(&["--workspace"])?;
    rustdoc(&WASM_CRATE)
}

/// `tsc --strict` over every project in TSCONFIGS (they may import the built package), and no
/// TypeScript file left outside them.
fn tsc() -> Result {
    let mut dirs: Vec<&Path> = TSCONFIGS.iter().filter_map(|t| Path::new(t).parent()).collect();
    dirs.extend(APP_TS_DIRS.iter().map(Path::new));
    let mut outside = Vec::new();
    walk(Path::new("."), &mut |p| {
        let ts = [".ts", ".mts", ".cts"].iter().any(|e| p.to_string_lossy().ends_with(e));
        if ts && !p.to_string_lossy().ends_with(".d.ts") && !dirs.iter().any(|d| p.starts_with(Path::new(".").join(d)))
        {
            outside.push(p.display().to_string());
        }
    });
    if !outside.is_empty() {
        return Err(format!("TypeScript outside every tsconfig in TSCONFIGS (xtask/src/project.rs): {outside:?}"));
    }
    ensure_package()?;
    // The Node half's project imports its generated wasm glue and its npm dependencies' types.
    ensure_node_server()?;
    let tsc = root().join(TOOLS_DIR).join("node_modules/.bin/tsc");
    TSCONFIGS.iter().try_for_each(|t| run(cmd(&tsc).args(["-p", t, "--strict", "--noEmit"])))
}

/// Every file under `dir` (sorted), skipping dependencies, build output and hidden folders.
fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if p.is_dir() && !name.starts_with('.') && !["node_modules", "target", "pkg"].contains(&name.as_str()) {
            walk(&p, f);
        } else if p.is_file() {
            f(&p);
        }
    }
}

fn native_tests() -> Result {
    run(cargo().args(["test", "--workspace", "--exclude", "xtask"]))?;
    // The server's #[ignore]d tests need PostgreSQL, which the installers provide.
    run(cargo().args(["test", "-p", SERVER_PACKAGE, "-p", LIBRARY_PACKAGE, "--", "--ignored"]))
}

/// The module as the package links it: Cargo.toml lists only `rlib` (the wasm-bindgen-test suites link
/// the crate without its panic handler), so the cdylib is asked for here, as package/build.mjs does.
fn wasm_build() -> Result {
    run(cargo().args(["rustc", "--release", "--lib", "--crate-type", "cdylib"]).args(WASM_CRATE))
}

fn require(path: &str) -> Result {
    match Path::new(path).exists() {
        true => Ok(()),
        false => {
            Err(format!("{path} does not exist: remove its step from STEPS (xtask/src/steps.rs) if that is meant"))
        }
    }
}

/// tests/wasm (wasm_bindgen_test) in headless Chrome (options in webdriver.json) and in Node, against
/// the JS test server (tests/support/test-server.mjs, on the port given in PORT).
fn wasm_tests() -> Result {
    require("tests/wasm")?;
    let port = free_port()?;
    let mut server = cmd("node");
    server.arg("tests/support/test-server.mjs").env("PORT", port.to_string());
    let _server = spawn_listening("test-server", &mut server, port)?;
    let url = format!("http://127.0.0.1:{port}");
    println!("   IF_TEST_SERVER={url}");
    env::set_var("IF_TEST_SERVER", url);
    if env::var_os("WASM_BINDGEN_TEST_TIMEOUT").is_none() {
        env::set_var("WASM_BINDGEN_TEST_TIMEOUT", "120");
    }
    let driver = env::var_os("CHROMEDRIVER").ok_or("CHROMEDRIVER is not set (install::chromium sets it)")?;
    crate::engines::wasm_browser_tests_per_engine(&driver)?;
    run(cmd("wasm-pack").args(["test", "--node", "--release"]))
    // `_server` is dropped here, or on any `?` above: the test server never outlives the step.
}

/// What every Node-driven step gets (xtask/README.md, "Env-var contract").
fn node_env() -> Result {
    let modules = root().join(TOOLS_DIR).join("node_modules");
    let mut node_path = vec![modules.clone()];
    node_path
        .extend(env::split_paths(&env::var_os("NODE_PATH").unwrap_or_default()).filter(|p| !p.as_os_str().is_empty()));
    env::set_var("NODE_PATH", env::join_paths(node_path).map_err(|e| e.to_string())?);
    env::set_var("IF_TOOLS_DIR", root().join(TOOLS_DIR));
    env::set_var("IF_PLAYWRIGHT_CORE", modules.join("playwright-core/index.mjs"));
    env::set_var("IF_PKG", root().join(PACKAGE_DIR));
    env::set_var("IF_WWW_DIR", root().join(WWW_DIR));
    env::set_var("IF_SERVER_BIN", server_binary()?);
    // The demo page's traced tests import it.
    ensure_demo_tracing()
}

/// `node --test` over every `*.test.mjs` under `dir`.
fn node_tests(dir: &str) -> Result {
    require(dir)?;
    node_env()?;
    let mut files = Vec::new();
    walk(Path::new(dir), &mut |p| files.extend(p.to_string_lossy().ends_with(".test.mjs").then(|| p.to_path_buf())));
    if files.is_empty() {
        return Err(format!("{dir} has no *.test.mjs file"));
    }
    // Browser test files run once per engine (IF_BROWSER), the rest once.
    crate::engines::node_tests_per_engine(dir, &files)
}

/// The Node half: built (with its npm dependencies), every export documented (TypeDoc), then `node --test`
/// over its `*.test.mjs` against a PostgreSQL of their own (IF_PG_BINDIR), PGlite, and the browser
/// package's conformance check (IF_PKG) run against its dev server.
fn node_server_tests() -> Result {
    ensure_package()?;
    ensure_node_server()?;
    let typedoc = root().join(TYPEDOC_DIR).join("node_modules/.bin/typedoc");
    let docs = ["--tsconfig", NODE_SERVER_DOCS_CONFIG, "--logLevel", "Warn", "--emit", "none"];
    run(cmd(typedoc).current_dir(NODE_SERVER_DIR).args(docs))?;
    let tests = format!("{NODE_SERVER_DIR}/test");
    require(&tests)?;
    let mut files = Vec::new();
    walk(Path::new(&tests), &mut |p| files.extend(p.to_string_lossy().ends_with(".test.mjs").then(|| p.to_path_buf())));
    if files.is_empty() {
        return Err(format!("{tests} has no *.test.mjs file"));
    }
    run(cmd("node").arg("--test").args(files).env("IF_PKG", root().join(PACKAGE_DIR)))
}

fn fault_suite() -> Result {
    require("tests/fault/run.mjs")?;
    node_env()?;
    crate::engines::fault_suite_per_engine()
}

/// `cargo xtask gates`: the tools they need, then the gates only.
pub fn gates() -> Result {
    install::toolchain()?;
    run_steps(STEPS.iter().filter(|s| s.2).collect())
}

/// `cargo xtask test [STEP...]`: every tool, then every step, or only the named ones.
pub fn test(only: &[String]) -> Result {
    if let Some(o) = only.iter().find(|o| !STEPS.iter().any(|s| s.0 == o.as_str())) {
        let names: Vec<&str> = STEPS.iter().map(|s| s.0).collect();
        return Err(format!("unknown step `{o}`; the steps are {}", names.join(" ")));
    }
    install_all()?;
    // A full run builds every test binary once: incremental caches would only take disk (see the dev
    // profile in Cargo.toml). A caller's own setting wins.
    if env::var_os("CARGO_INCREMENTAL").is_none() {
        env::set_var("CARGO_INCREMENTAL", "0");
    }
    run_steps(STEPS.iter().filter(|s| only.is_empty() || only.iter().any(|o| o == s.0)).collect())
}

fn run_steps(steps: Vec<&Step>) -> Result {
    let t0 = Instant::now();
    let mut done = Vec::new();
    for Step(key, name, _, f) in &steps {
        println!("\n==== {key}. {name}   ({})", disk::report());
        let start = Instant::now();
        let result = f();
        done.push((key, name, start.elapsed().as_secs_f64(), result.is_ok()));
        if let Err(e) = result {
            summary(&done, t0);
            let full =
                if disk::low() { format!(" (the disk is nearly full: {})", disk::report()) } else { String::new() };
            return Err(format!("step `{key}. {name}` failed{full}: {e}"));
        }
    }
    summary(&done, t0);
    println!("{} passed, 0 failed", done.len());
    Ok(())
}

fn summary(done: &[(&&str, &&str, f64, bool)], t0: Instant) {
    println!("\n==== summary\n{:<56} {:>8}  result", "step", "seconds");
    for (key, name, secs, ok) in done {
        println!("{:<56} {secs:>8.1}  {}", format!("{key}. {name}"), if *ok { "passed" } else { "FAILED" });
    }
    println!("(total {:.1}s)", t0.elapsed().as_secs_f64());
    crate::engines::print_summary();
}

/// What `cargo xtask install` and `test` do: everything the steps need (here, above both `install`
/// and `engines`, so neither imports the other back).
pub fn install_all() -> Result {
    install::toolchain_and_chromium()?;
    crate::engines::install()?;
    install::postgres()
}
