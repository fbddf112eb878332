//! Installers. Each checks first and is a fast no-op when its tool is there, prints what it does, and
//! waits for an install of the same thing that another process on this machine is already running.
//! Adding a tool is one call in `all` or `toolchain` (`cargo_tool` for crates, `apt_tool` for Debian).

use crate::process::{add_to_path, cmd, output, run, wait_for_other, Result};
use crate::project::{locked_version, root, TOOLS_DIR, TYPEDOC_DIR};
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Once;

const WASM_TARGET: &str = "wasm32-unknown-unknown";
/// Chromium's binary names in Debian and elsewhere, in the order searched; the tests get the one found
/// as CHROMIUM_PATH.
const CHROMIUM_NAMES: &[&str] = &["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"];
/// Where Debian puts PostgreSQL's server binaries (initdb, postgres are not on PATH there).
const DEBIAN_PG_ROOT: &str = "/usr/lib/postgresql";

/// The toolchain and Chromium: what every browser step needs before the other engines
/// (`steps::install_all` adds Firefox, WebKit and PostgreSQL).
pub fn toolchain_and_chromium() -> Result {
    toolchain()?;
    chromium()
}

/// The wasm build toolchain and the npm tools (enough for the gates, `build`, `demo` and `size`).
pub fn toolchain() -> Result {
    setup_path();
    rust_target()?;
    cargo_tool("wasm-bindgen-cli", "wasm-bindgen", Some(&locked_version("wasm-bindgen")?))?;
    cargo_tool("wasm-pack", "wasm-pack", None)?;
    npm_tools()
}

/// PATH for us and every child: the npm tools first (wasm-pack then uses that wasm-opt instead of
/// downloading binaryen, which fails here), ~/.cargo/bin last (where `cargo install` puts things).
fn setup_path() {
    let cargo_home = env::var_os("CARGO_HOME").map(PathBuf::from);
    if let Some(home) = cargo_home.or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo"))) {
        add_to_path(&home.join("bin"), false);
    }
    add_to_path(&root().join(TOOLS_DIR).join("node_modules/.bin"), true);
}

pub fn step(name: &str) {
    println!("-- install: {name}");
}

/// `rustup target add` is a quick no-op when the target is there.
fn rust_target() -> Result {
    step(&format!("rust target {WASM_TARGET}"));
    run(cmd("rustup").args(["target", "add", WASM_TARGET]))
}

/// `cargo install <krate>` unless `<bin> --version` prints `version` (any version when None).
/// No --locked: the CLIs' own lock files pin crates that no longer build on current rustc.
pub fn cargo_tool(krate: &str, bin: &str, version: Option<&str>) -> Result {
    step(&format!("{krate} {}", version.unwrap_or("(any version)")));
    let installed = || {
        let v = output(cmd(bin).arg("--version"));
        v.is_some_and(|v| version.is_none_or(|want| v.split_whitespace().nth(1) == Some(want)))
    };
    if installed() {
        return Ok(());
    }
    wait_for_other(&format!("cargo install {krate}"), &["-f", &format!("cargo install .*{krate}")]);
    if installed() {
        return Ok(());
    }
    let mut install = cmd("cargo");
    install.args(["install", krate, "--force"]);
    if let Some(v) = version {
        install.args(["--version", v]);
    }
    run(&mut install)?;
    installed().then_some(()).ok_or_else(|| format!("`{bin} --version` does not print {version:?} after the install"))
}

/// binaryen (wasm-opt), typescript (tsc), playwright-core, ... exactly as tools/package-lock.json says,
/// and TypeDoc as tools/typedoc/package-lock.json says.
fn npm_tools() -> Result {
    step("npm tools in tools/ (wasm-opt, tsc, playwright-core) and tools/typedoc/ (typedoc)");
    for dir in [TOOLS_DIR, TYPEDOC_DIR] {
        npm_ci_if_stale(Path::new(dir))?;
    }
    output(cmd("wasm-opt").arg("--version")).map(|_| ()).ok_or_else(|| "wasm-opt --version does not run".into())
}

/// `npm ci` in `dir` unless its node_modules is newer than its package-lock.json.
pub fn npm_ci_if_stale(dir: &Path) -> Result {
    let mtime = |p: &Path| p.metadata().and_then(|m| m.modified()).ok();
    // npm writes node_modules/.package-lock.json after every successful install.
    let installed = mtime(&dir.join("node_modules/.package-lock.json"));
    if installed.is_none() || installed < mtime(&dir.join("package-lock.json")) {
        run(cmd("npm").current_dir(dir).args(["ci", "--no-audit", "--no-fund"]))?;
    }
    Ok(())
}

/// `var` when it names an existing file, else the first of `names` on PATH.
pub fn find(var: &str, names: &[&str]) -> Option<PathBuf> {
    let given = env::var_os(var).map(PathBuf::from).filter(|p| p.is_file());
    given.or_else(|| names.iter().find_map(|n| which::which(n).ok()))
}

/// Run `found`; when it finds nothing, install `packages` from Debian and run it again.
pub fn apt_tool<T>(packages: &[&str], found: impl Fn() -> Option<T>) -> Result<T> {
    step(&format!("{} (Debian)", packages.join(" + ")));
    if let Some(t) = found() {
        return Ok(t);
    }
    apt_install(packages)?;
    found().ok_or_else(|| format!("still missing after apt-get install {}", packages.join(" ")))
}

/// Chromium and chromedriver; sets CHROMIUM_PATH (Playwright) and CHROMEDRIVER (wasm-pack test).
fn chromium() -> Result {
    let found = || Some((find("CHROMIUM_PATH", CHROMIUM_NAMES)?, find("CHROMEDRIVER", &["chromedriver"])?));
    let (browser, driver) = apt_tool(&["chromium", "chromium-driver"], found)?;
    println!("   CHROMIUM_PATH={}\n   CHROMEDRIVER={}", browser.display(), driver.display());
    env::set_var("CHROMIUM_PATH", browser);
    env::set_var("CHROMEDRIVER", driver);
    Ok(())
}

/// The directory holding initdb: on PATH, else Debian's newest `/usr/lib/postgresql/<version>/bin`.
fn pg_bindir() -> Option<PathBuf> {
    if let Ok(p) = which::which("initdb") {
        return fs::canonicalize(&p).unwrap_or(p).parent().map(Path::to_path_buf);
    }
    let versions = fs::read_dir(DEBIAN_PG_ROOT).ok()?.flatten();
    let bindirs = versions.filter_map(|e| Some((e.file_name().to_str()?.parse::<u32>().ok()?, e.path().join("bin"))));
    bindirs.filter(|(_, bin)| bin.join("initdb").is_file()).max().map(|(_, bin)| bin)
}

/// PostgreSQL; the one lookup of its binaries: IF_PG_BINDIR tells the tests where they are (also put
/// on PATH, last), and IF_PG_TESTS=1.
/// PostgreSQL from Debian unless it is there (the server's PostgreSQL tests).
pub fn postgres() -> Result {
    let bin = apt_tool(&["postgresql"], pg_bindir)?;
    println!("   IF_PG_BINDIR={}", bin.display());
    add_to_path(&bin, false);
    env::set_var("IF_PG_BINDIR", bin);
    env::set_var("IF_PG_TESTS", "1");
    Ok(())
}

/// `apt-get install -y` (through sudo unless root), after one `apt-get update` per run.
fn apt_install(packages: &[&str]) -> Result {
    let apt = |args: &[&str]| {
        let root = output(cmd("id").arg("-u")).as_deref() == Some("0");
        let mut c = if root { cmd("apt-get") } else { cmd("sudo") };
        if !root {
            c.args(["-E", "apt-get"]);
        }
        // apt waits for the dpkg lock itself; the lists lock of `update` is waited for below.
        c.args(["-o", "DPkg::Lock::Timeout=900"]).args(args).env("DEBIAN_FRONTEND", "noninteractive");
        c
    };
    wait_for_other("apt-get/dpkg", &["-x", "apt|apt-get|dpkg"]);
    static UPDATED: Once = Once::new();
    let mut updated = Ok(());
    UPDATED.call_once(|| updated = run(&mut apt(&["update"])));
    updated?;
    run(&mut apt(&[&["install", "-y"], packages].concat()))
}
