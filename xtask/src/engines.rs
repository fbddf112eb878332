//! The three browser engines every browser suite runs in: their installers, and the
//! per-engine loop the test layers use. The engine logic itself (launching, driving pages) lives in
//! tests/support/browsers.mjs; xtask only installs the browsers, sets where they are, and runs each
//! browser test file once per engine with `IF_BROWSER=<engine>`, counting passes per engine.

use crate::install::{apt_tool, cargo_tool, find};
use crate::process::{cmd, free_port, run, spawn_listening, Result};
use crate::project::root;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// Every engine, in the order the layers run them. `IF_ENGINES=firefox,webkit` narrows a local run.
pub const ENGINES: &[&str] = &["chromium", "firefox", "webkit"];

/// The engines this run covers: `IF_ENGINES` (comma-separated) or all of them.
pub fn selected() -> Result<Vec<&'static str>> {
    let Ok(list) = env::var("IF_ENGINES") else { return Ok(ENGINES.to_vec()) };
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let engine =
            ENGINES.iter().find(|e| **e == name).ok_or_else(|| format!("IF_ENGINES: unknown engine `{name}`"))?;
        out.push(*engine);
    }
    Ok(out)
}

/// Firefox ESR + geckodriver and WebKitGTK's WebDriver + MiniBrowser + Xvfb (Chromium has its own
/// installer in install.rs).
pub fn install() -> Result {
    firefox()?;
    geckodriver()?;
    webkit()?;
    Ok(())
}

/// Debian's firefox-esr; sets FIREFOX_PATH (a valid one already set counts).
fn firefox() -> Result {
    let path = apt_tool(&["firefox-esr"], || find("FIREFOX_PATH", &["firefox-esr", "firefox"]))?;
    println!("   FIREFOX_PATH={}", path.display());
    env::set_var("FIREFOX_PATH", path);
    Ok(())
}

/// geckodriver built from crates.io (Mozilla publishes it there); sets GECKODRIVER.
fn geckodriver() -> Result {
    cargo_tool("geckodriver", "geckodriver", None)?;
    let path = find("GECKODRIVER", &["geckodriver"]).ok_or("geckodriver is not on PATH after cargo install")?;
    println!("   GECKODRIVER={}", path.display());
    env::set_var("GECKODRIVER", path);
    Ok(())
}

/// MiniBrowser, the small WebKitGTK browser WebKitWebDriver launches (Debian keeps it in the libdir).
fn minibrowser() -> Option<PathBuf> {
    let given = env::var_os("MINIBROWSER_PATH").map(PathBuf::from).filter(|p| p.is_file());
    given.or_else(|| {
        let arches = fs::read_dir("/usr/lib").ok()?.flatten().map(|e| e.path());
        let mut found: Vec<PathBuf> = arches
            .flat_map(|arch| ["webkit2gtk-4.1", "webkitgtk-6.0"].map(|v| arch.join(v).join("MiniBrowser")))
            .filter(|p| p.is_file())
            .collect();
        found.sort();
        found.into_iter().next()
    })
}

/// WebKitGTK's WebKitWebDriver + MiniBrowser (Debian webkit2gtk-driver) and Xvfb (MiniBrowser
/// needs a display; there is no headless mode). Sets WEBKIT_DRIVER, MINIBROWSER_PATH, XVFB_PATH.
fn webkit() -> Result {
    let found = || Some((find("WEBKIT_DRIVER", &["WebKitWebDriver"])?, minibrowser()?, find("XVFB_PATH", &["Xvfb"])?));
    let (driver, mini, xvfb) = apt_tool(&["webkit2gtk-driver", "xvfb"], found)?;
    println!(
        "   WEBKIT_DRIVER={}\n   MINIBROWSER_PATH={}\n   XVFB_PATH={}",
        driver.display(),
        mini.display(),
        xvfb.display()
    );
    env::set_var("WEBKIT_DRIVER", driver);
    env::set_var("MINIBROWSER_PATH", mini);
    env::set_var("XVFB_PATH", xvfb);
    Ok(())
}

/// Whether a Node test file drives a browser (it imports tests/support/browsers.mjs): such a file
/// runs once per engine.
pub fn is_browser_file(file: &Path) -> bool {
    fs::read_to_string(file).map(|s| s.contains("support/browsers.mjs")).unwrap_or(false)
}

struct Row {
    layer: String,
    engine: String,
    pass: u64,
    fail: u64,
    skip: u64,
    secs: f64,
}

static ROWS: Mutex<Vec<Row>> = Mutex::new(Vec::new());

/// `node --test files` with IF_BROWSER=engine (None: the plain Node files), printing the spec
/// output as usual and recording the TAP totals for the summary. Fails like `run` on a failed test.
pub fn node_test(layer: &str, engine: Option<&str>, files: &[PathBuf]) -> Result {
    let file_safe: String = layer.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    let tap =
        env::temp_dir().join(format!("xtask-{}-{file_safe}-{}.tap", std::process::id(), engine.unwrap_or("node")));
    let mut c = cmd("node");
    c.args(["--test", "--test-reporter=spec", "--test-reporter-destination=stdout", "--test-reporter=tap"])
        .arg(format!("--test-reporter-destination={}", tap.display()));
    for f in files {
        c.arg(f.strip_prefix(root()).unwrap_or(f));
    }
    match engine {
        Some(e) => {
            println!("---- {layer} in {e}");
            c.env("IF_BROWSER", e);
        }
        None => {
            c.env_remove("IF_BROWSER");
        }
    }
    let start = Instant::now();
    let result = run(&mut c);
    let text = fs::read_to_string(&tap).unwrap_or_default();
    let _ = fs::remove_file(&tap);
    // The runner's closing TAP comments: `# pass N`, `# fail N`, `# skipped N` (whole run).
    let total = |key: &str| {
        text.lines().rev().find_map(|l| l.strip_prefix(&format!("# {key} "))?.trim().parse::<u64>().ok()).unwrap_or(0)
    };
    if let Ok(mut rows) = ROWS.lock() {
        rows.push(Row {
            layer: layer.to_string(),
            engine: engine.unwrap_or("node").to_string(),
            pass: total("pass"),
            fail: total("fail"),
            skip: total("skipped") + total("todo"),
            secs: start.elapsed().as_secs_f64(),
        });
    }
    result
}

/// Runs `files` (a layer's Node test files): the plain ones once, the browser ones once per engine.
pub fn node_tests_per_engine(layer: &str, files: &[PathBuf]) -> Result {
    let (browser, plain): (Vec<PathBuf>, Vec<PathBuf>) = files.iter().cloned().partition(|f| is_browser_file(f));
    if !plain.is_empty() {
        node_test(layer, None, &plain)?;
    }
    if !browser.is_empty() {
        for engine in selected()? {
            node_test(layer, Some(engine), &browser)?;
        }
    }
    Ok(())
}

/// Records a step that is not a node:test run (wasm-pack test, the fault harness) for one engine.
pub fn record(layer: &str, engine: &str, passed: bool, secs: f64) {
    if let Ok(mut rows) = ROWS.lock() {
        let (pass, fail) = if passed { (1, 0) } else { (0, 1) };
        rows.push(Row { layer: layer.to_string(), engine: engine.to_string(), pass, fail, skip: 0, secs });
    }
}

/// The per-engine table printed after the layer summary: tests passed/failed/skipped and seconds.
pub fn print_summary() {
    let Ok(rows) = ROWS.lock() else { return };
    if rows.is_empty() {
        return;
    }
    println!();
    println!("==== per engine (node:test counts; wasm-pack/fault runs count as one)");
    println!("{:<10} {:<10} {:>6} {:>6} {:>6} {:>9}", "layer", "engine", "pass", "fail", "skip", "seconds");
    for r in rows.iter() {
        println!("{:<10} {:<10} {:>6} {:>6} {:>6} {:>9.1}", r.layer, r.engine, r.pass, r.fail, r.skip, r.secs);
    }
    let mut engines: Vec<&str> = Vec::new();
    for r in rows.iter() {
        if !engines.contains(&r.engine.as_str()) {
            engines.push(&r.engine);
        }
    }
    for e in engines {
        let of = rows.iter().filter(|r| r.engine == e);
        let (p, f, s, t) = of.fold((0, 0, 0, 0.0), |a, r| (a.0 + r.pass, a.1 + r.fail, a.2 + r.skip, a.3 + r.secs));
        println!("{:<10} {e:<10} {p:>6} {f:>6} {s:>6} {t:>9.1}", "total");
    }
}

/// The fault harness (`tests/fault/run.mjs --ci`): in Chromium the whole CI pass (Node and browser
/// intents, the PostgreSQL pass, the `kill -9` runs of examples/invite and of the inbox, the bad-input
/// matrix); in the other engines its browser share
/// (`--browser-only`: browser intents and the matrix's browser rows).
pub fn fault_suite_per_engine() -> Result {
    for engine in selected()? {
        println!("---- fault suite in {engine}");
        let mut c = cmd("node");
        c.args(["tests/fault/run.mjs", "--ci"]).env("IF_BROWSER", engine);
        if engine != "chromium" {
            c.arg("--browser-only");
        }
        let start = Instant::now();
        let result = run(&mut c);
        record("fault", engine, result.is_ok(), start.elapsed().as_secs_f64());
        result?;
    }
    Ok(())
}

/// The wasm-bindgen-test browser suite in each engine. Chromium and Firefox through `wasm-pack
/// test` (chromedriver / geckodriver). WebKit: wasm-bindgen-test-runner speaks to "safaridriver",
/// whose new-session request asks for no capabilities; WebKitWebDriver answers that with its
/// default browser, MiniBrowser in automation mode, so the runner drives WebKitGTK when pointed at
/// a running WebKitWebDriver (SAFARIDRIVER_REMOTE) on a private Xvfb display.
pub fn wasm_browser_tests_per_engine(chromedriver: &std::ffi::OsStr) -> Result {
    for engine in selected()? {
        println!("---- wasm-bindgen-test in {engine}");
        let start = Instant::now();
        let result = match engine {
            "chromium" => run(cmd("wasm-pack")
                .args(["test", "--headless", "--chrome", "--chromedriver"])
                .arg(chromedriver)
                .arg("--release")),
            "firefox" => {
                let driver =
                    env::var_os("GECKODRIVER").ok_or("GECKODRIVER is not set (engines::geckodriver sets it)")?;
                run(cmd("wasm-pack")
                    .args(["test", "--headless", "--firefox", "--geckodriver"])
                    .arg(driver)
                    .arg("--release"))
            }
            _ => wasm_tests_in_webkit(),
        };
        record("wasm", engine, result.is_ok(), start.elapsed().as_secs_f64());
        result?;
    }
    Ok(())
}

fn wasm_tests_in_webkit() -> Result {
    let xvfb = env::var_os("XVFB_PATH").ok_or("XVFB_PATH is not set (engines::webkit sets it)")?;
    let driver = env::var_os("WEBKIT_DRIVER").ok_or("WEBKIT_DRIVER is not set (engines::webkit sets it)")?;
    // Xvfb listens on TCP 6000+N here only so that spawn_listening can tell when it is up.
    let n = (90..200).find(|n| !Path::new(&format!("/tmp/.X{n}-lock")).exists()).unwrap_or(99);
    let display = format!(":{n}");
    let mut x = cmd(&xvfb);
    x.args([display.as_str(), "-screen", "0", "1280x1024x24", "-listen", "tcp"]).stderr(std::process::Stdio::null());
    let _x = spawn_listening("Xvfb", &mut x, 6000 + n)?;
    let port = free_port()?;
    let mut d = cmd(&driver);
    d.arg(format!("--port={port}")).env("DISPLAY", &display).stdout(std::process::Stdio::null());
    let _d = spawn_listening("WebKitWebDriver", &mut d, port)?;
    let runner = which::which("wasm-bindgen-test-runner").map_err(|e| format!("wasm-bindgen-test-runner: {e}"))?;
    run(cmd("cargo")
        .args(["test", "--release", "--target", "wasm32-unknown-unknown", "--test", "wasm_browser"])
        .env("CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER", runner)
        .env("SAFARIDRIVER_REMOTE", format!("http://127.0.0.1:{port}"))
        .env("DISPLAY", &display))
    // `_d` and `_x` are dropped here, or on any `?` above: neither outlives the step.
}
