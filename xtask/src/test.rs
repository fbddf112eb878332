//! `cargo xtask test`: install what is missing, then run every test layer in order, stopping at
//! the first failure. A layer whose files do not exist yet is SKIPPED with a note; a layer whose
//! files exist always runs. To add a layer: write `fn my_layer(cx: &mut Cx) -> Result<Outcome>`
//! and add it to `LAYERS` (see xtask/README.md).

use crate::demo::build_pkg;
use crate::install;
use crate::process::{cargo, cmd, root, run, spawn_and_wait_for_line, Result};
use crate::size;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub enum Outcome {
    Ran,
    Skipped(String),
}

/// State shared by the layers (things built once and reused).
#[derive(Default)]
pub struct Cx {
    server_bin: Option<PathBuf>,
}

type Layer = (&'static str, fn(&mut Cx) -> Result<Outcome>);

pub const LAYERS: &[Layer] = &[
    ("a. native tests (cargo test --workspace)", native_tests),
    ("b. wasm32 release build", wasm_build),
    ("c. wasm-pack packages (web, nodejs, bundler)", packages),
    ("d. size report", size_report),
    ("e. wasm-bindgen-test (headless chrome, node)", wasm_tests),
    ("f. JS tests (tests/js)", js_tests),
    ("g. TypeScript types (tests/ts)", ts_check),
    ("h. browser end-to-end (www/tests)", e2e_tests),
    ("i. fault suite (tests/fault/run.mjs)", fault_suite),
    ("j. benches", benches),
];

fn exists(rel: &str) -> bool {
    root().join(rel).exists()
}

fn skip(why: impl Into<String>) -> Result<Outcome> {
    Ok(Outcome::Skipped(why.into()))
}

fn native_tests(_: &mut Cx) -> Result<Outcome> {
    run(cargo().args(["test", "--workspace", "--exclude", "xtask"]))?;
    Ok(Outcome::Ran)
}

fn wasm_build(_: &mut Cx) -> Result<Outcome> {
    run(cargo().args(["build", "--release", "--target", "wasm32-unknown-unknown", "-p", "idempotent-fetch"]))?;
    Ok(Outcome::Ran)
}

fn packages(_: &mut Cx) -> Result<Outcome> {
    for (target, out) in [("web", "pkg/web"), ("nodejs", "pkg/node"), ("bundler", "pkg/bundler")] {
        build_pkg(target, out)?;
    }
    Ok(Outcome::Ran)
}

fn size_report(_: &mut Cx) -> Result<Outcome> {
    size::report()?;
    Ok(Outcome::Ran)
}

/// tests/wasm/ (wasm_bindgen_test) in headless Chrome and in Node, against the JS test server.
fn wasm_tests(_: &mut Cx) -> Result<Outcome> {
    if !exists("tests/wasm") {
        return skip("tests/wasm/ does not exist yet");
    }
    write_webdriver_json()?;
    let _server = if exists("tests/support/test-server.mjs") {
        let (guard, line) = spawn_and_wait_for_line(
            "test-server",
            cmd("node").arg("tests/support/test-server.mjs"),
            "listening on ",
            Duration::from_secs(30),
        )?;
        let url = line
            .split("listening on ")
            .nth(1)
            .map(|s| s.trim().trim_end_matches('/').to_string())
            .filter(|s| s.starts_with("http"))
            .ok_or_else(|| format!("cannot parse the test server URL from {line:?}"))?;
        println!("   IF_TEST_SERVER={url}");
        env::set_var("IF_TEST_SERVER", &url);
        Some(guard)
    } else {
        println!("   note: tests/support/test-server.mjs does not exist; IF_TEST_SERVER is not set");
        None
    };
    if env::var_os("WASM_BINDGEN_TEST_TIMEOUT").is_none() {
        env::set_var("WASM_BINDGEN_TEST_TIMEOUT", "120");
    }
    let driver = env::var_os("CHROMEDRIVER").ok_or("CHROMEDRIVER is not set (install::chromium sets it)")?;
    crate::engines::wasm_browser_tests_per_engine(&driver)?;
    run(cmd("wasm-pack").args(["test", "--node", "--release"]))?;
    Ok(Outcome::Ran)
    // `_server` is dropped here, or on any `?` above: the test server never outlives the layer.
}

pub fn write_webdriver_json() -> Result {
    let want = r#"{
  "goog:chromeOptions": {
    "args": [
      "--headless=new",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--disable-quic"
    ]
  }
}
"#;
    let p = root().join("webdriver.json");
    if fs::read_to_string(&p).ok().as_deref() != Some(want) {
        fs::write(&p, want).map_err(|e| format!("write webdriver.json: {e}"))?;
        println!("   wrote webdriver.json");
    }
    Ok(())
}

/// Test files under `dir` by node's default naming patterns (`*.test.mjs`, `*-test.js`,
/// `*_test.cjs`, `test-*.mjs`, `test.js`, anything under a `test/` folder), skipping node_modules.
pub fn node_test_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(d: &Path, in_test_dir: bool, out: &mut Vec<PathBuf>) {
        let Ok(rd) = fs::read_dir(d) else { return };
        let mut entries: Vec<_> = rd.flatten().map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if p.is_dir() {
                if name != "node_modules" && !name.starts_with('.') {
                    walk(&p, in_test_dir || name == "test", out);
                }
                continue;
            }
            let Some((stem, ext)) = name.rsplit_once('.') else { continue };
            if !matches!(ext, "js" | "mjs" | "cjs") {
                continue;
            }
            let is_test = in_test_dir
                || stem == "test"
                || stem.ends_with(".test")
                || stem.ends_with("-test")
                || stem.ends_with("_test")
                || stem.starts_with("test-");
            if is_test {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, false, &mut out);
    out
}

/// Environment every Node-driven layer gets (see README: "Env-var contract"). Every one of them
/// starts the reference server somewhere (tests/js: tabs, package), so each gets IF_SERVER_BIN.
fn node_env(cx: &mut Cx) -> Result {
    let tools = root().join("tools");
    let nm = tools.join("node_modules");
    let node_path = match env::var_os("NODE_PATH") {
        Some(old) if !old.is_empty() => {
            let mut v = vec![nm.clone()];
            v.extend(env::split_paths(&old));
            env::join_paths(v).map_err(|e| e.to_string())?
        }
        _ => nm.clone().into_os_string(),
    };
    env::set_var("NODE_PATH", node_path);
    env::set_var("IF_TOOLS_DIR", &tools);
    env::set_var("IF_PLAYWRIGHT_CORE", nm.join("playwright-core/index.mjs"));
    env::set_var("IF_PKG_WEB", root().join("pkg/web"));
    env::set_var("IF_PKG_NODE", root().join("pkg/node"));
    env::set_var("IF_WWW_DIR", root().join("www"));
    env::set_var("IF_SERVER_BIN", server_bin(cx)?);
    Ok(())
}

/// Build the release server once and return the binary's absolute path.
fn server_bin(cx: &mut Cx) -> Result<PathBuf> {
    if let Some(p) = &cx.server_bin {
        return Ok(p.clone());
    }
    run(cargo().args(["build", "-p", "idempotent-fetch-server", "--release"]))?;
    let p = target_dir()?.join("release/idempotent-fetch-server");
    if !p.exists() {
        return Err(format!("server binary not found at {}", p.display()));
    }
    println!("   IF_SERVER_BIN={}", p.display());
    cx.server_bin = Some(p.clone());
    Ok(p)
}

/// Cargo's target directory, asked from cargo (honours CARGO_TARGET_DIR and config).
pub fn target_dir() -> Result<PathBuf> {
    let out = crate::process::output(cargo().args(["metadata", "--format-version", "1", "--no-deps"]))
        .ok_or("cargo metadata failed")?;
    let key = "\"target_directory\":\"";
    let start = out.find(key).ok_or("no target_directory in cargo metadata")? + key.len();
    let end = out[start..].find('"').ok_or("bad cargo metadata")? + start;
    Ok(PathBuf::from(out[start..end].replace("\\\\", "\\")))
}

fn node_test(dir: &str) -> Result<Option<String>> {
    let files = node_test_files(&root().join(dir));
    if files.is_empty() {
        return Ok(Some(format!("{dir} has no test files (name them *.test.mjs)")));
    }
    // Browser test files run once per engine (IF_BROWSER), the rest once.
    crate::engines::node_tests_per_engine(dir, &files)?;
    Ok(None)
}

fn js_tests(cx: &mut Cx) -> Result<Outcome> {
    if !exists("tests/js") {
        return skip("tests/js/ does not exist yet");
    }
    node_env(cx)?;
    match node_test("tests/js")? {
        Some(why) => skip(why),
        None => Ok(Outcome::Ran),
    }
}

fn ts_check(_: &mut Cx) -> Result<Outcome> {
    if !exists("tests/ts") {
        return skip("tests/ts/ does not exist yet");
    }
    run(cmd(root().join("tools/node_modules/.bin/tsc")).args(["-p", "tests/ts/tsconfig.json", "--noEmit"]))?;
    Ok(Outcome::Ran)
}

fn e2e_tests(cx: &mut Cx) -> Result<Outcome> {
    if !exists("www/tests") {
        return skip("www/tests/ does not exist yet");
    }
    node_env(cx)?;
    match node_test("www/tests")? {
        Some(why) => skip(why),
        None => Ok(Outcome::Ran),
    }
}

fn fault_suite(cx: &mut Cx) -> Result<Outcome> {
    if !exists("tests/fault/run.mjs") {
        return skip("tests/fault/run.mjs does not exist yet");
    }
    node_env(cx)?;
    crate::engines::fault_suite_per_engine()?;
    Ok(Outcome::Ran)
}

fn benches(_: &mut Cx) -> Result<Outcome> {
    if exists("benches") {
        skip("benches run separately: cargo xtask bench")
    } else {
        skip("benches/ does not exist yet")
    }
}

/// `only`: layer letters to run (empty = all), e.g. `cargo xtask test e f`.
pub fn test(only: &[String]) -> Result {
    for o in only {
        if !LAYERS.iter().any(|(name, _)| name.starts_with(&format!("{o}. "))) {
            return Err(format!("unknown layer `{o}` (layers are a..j, see xtask/README.md)"));
        }
    }
    let t0 = Instant::now();
    println!("==== cargo xtask test: install what is missing");
    install::all()?;
    let mut cx = Cx::default();
    let mut rows: Vec<(&str, String, f64)> = Vec::new();
    let mut failure: Option<(String, String)> = None;
    for (name, f) in LAYERS {
        if !only.is_empty() && !only.iter().any(|o| name.starts_with(&format!("{o}. "))) {
            rows.push((name, "skipped: not selected".into(), 0.0));
            continue;
        }
        println!();
        println!("==== {name}");
        let start = Instant::now();
        let res = f(&mut cx);
        let secs = start.elapsed().as_secs_f64();
        match res {
            Ok(Outcome::Ran) => rows.push((name, "ran".into(), secs)),
            Ok(Outcome::Skipped(why)) => {
                println!("SKIPPED: {why}");
                rows.push((name, format!("skipped: {why}"), secs));
            }
            Err(e) => {
                rows.push((name, "FAILED".into(), secs));
                failure = Some((name.to_string(), e));
                break;
            }
        }
    }
    println!();
    println!("==== summary");
    println!("{:<48} {:>8}  result", "step", "seconds");
    for (name, result, secs) in &rows {
        println!("{name:<48} {secs:>8.1}  {result}");
    }
    println!("(total {:.1}s including installs)", t0.elapsed().as_secs_f64());
    crate::engines::print_summary();
    if let Some((name, e)) = failure {
        return Err(format!("step `{name}` failed: {e}"));
    }
    let ran = rows.iter().filter(|r| r.1 == "ran").count();
    println!("{ran} passed, 0 failed");
    Ok(())
}
