//! Installers. Each one checks first and is a fast no-op when the tool is already there; each
//! prints what it does. They never run a second copy of an install that another process on this
//! machine is already doing: they wait for it, then check again.

use crate::process::{self, append_path, cmd, output, prepend_path, root, run, which, Result};
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

const WASM_TARGET: &str = "wasm32-unknown-unknown";
const NPM_TOOLS: &[&str] = &["wasm-opt", "tsc"];

pub(crate) fn step(name: &str) {
    println!("-- install: {name}");
}

/// What `cargo xtask install` does: everything the test layers need.
pub fn all() -> Result {
    toolchain()?;
    chromium()?;
    crate::engines::install()?;
    postgres()?;
    Ok(())
}

/// The wasm build toolchain (enough for `cargo xtask demo` and `size`).
pub fn toolchain() -> Result {
    setup_path();
    rust_target()?;
    wasm_bindgen_cli()?;
    wasm_pack()?;
    npm_tools()?;
    Ok(())
}

/// PATH for us and every child: tools/node_modules/.bin first (wasm-pack picks up wasm-opt from
/// PATH instead of downloading binaryen), then ~/.cargo/bin (where `cargo install` puts things).
pub fn setup_path() {
    let cargo_home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    if let Some(home) = cargo_home {
        // Appended: keep rustup's proxies first but make installed tools findable.
        append_path(&home.join("bin"));
    }
    prepend_path(&root().join("tools/node_modules/.bin"));
}

pub fn rust_target() -> Result {
    step(&format!("rust target {WASM_TARGET}"));
    let installed = output(Command::new("rustup").args(["target", "list", "--installed"]));
    match installed {
        Some(list) if list.lines().any(|l| l.trim() == WASM_TARGET) => {
            println!("   already installed");
            Ok(())
        }
        Some(_) => run(Command::new("rustup").args(["target", "add", WASM_TARGET])),
        None => {
            // No rustup (e.g. a distro rust): trust that the target exists, the build will tell.
            println!("   rustup not found; assuming {WASM_TARGET} is available");
            Ok(())
        }
    }
}

/// The exact version of `package` in Cargo.lock (an error when it is there in several versions).
pub fn locked_version(package: &str) -> Result<String> {
    let lock = fs::read_to_string(root().join("Cargo.lock")).map_err(|e| format!("cannot read Cargo.lock: {e}"))?;
    let mut versions: Vec<String> = Vec::new();
    for block in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            block.lines().find_map(|l| {
                let l = l.trim();
                let rest = l.strip_prefix(key)?.trim_start().strip_prefix('=')?.trim();
                Some(rest.trim_matches('"').to_string())
            })
        };
        if field("name").as_deref() == Some(package) {
            if let Some(v) = field("version") {
                versions.push(v);
            }
        }
    }
    match versions.len() {
        0 => Err(format!("package {package} not found in Cargo.lock")),
        1 => Ok(versions.remove(0)),
        _ => Err(format!("Cargo.lock has several {package} versions {versions:?}; pin one with `=`")),
    }
}

fn cargo_install_running(krate: &str) -> impl Fn(&str) -> bool + '_ {
    move |p: &str| {
        let words: Vec<&str> = p.split_whitespace().collect();
        words.iter().any(|w| w.ends_with("cargo")) && words.contains(&"install") && words.contains(&krate)
    }
}

pub fn wasm_bindgen_cli() -> Result {
    let want = locked_version("wasm-bindgen")?;
    step(&format!("wasm-bindgen-cli {want} (the wasm-bindgen version in Cargo.lock)"));
    let have = || output(Command::new("wasm-bindgen").arg("--version"));
    let ok =
        |v: &Option<String>| v.as_deref().map(|s| s.split_whitespace().nth(1) == Some(want.as_str())).unwrap_or(false);
    if ok(&have()) {
        println!("   already installed");
        return Ok(());
    }
    process::wait_while_running("cargo install wasm-bindgen-cli", cargo_install_running("wasm-bindgen-cli"));
    let now = have();
    if ok(&now) {
        println!("   installed by the other process");
        return Ok(());
    }
    if let Some(v) = now {
        println!("   found `{v}`, need {want}: reinstalling");
    }
    // No --locked: the CLI's own lock file pins crates that no longer build on current rustc.
    run(Command::new("cargo").args(["install", "wasm-bindgen-cli", "--version", &want, "--force"]))?;
    match have() {
        v if ok(&v) => Ok(()),
        v => Err(format!("wasm-bindgen --version printed {v:?} after install, expected {want}")),
    }
}

pub fn wasm_pack() -> Result {
    step("wasm-pack");
    let have = || output(Command::new("wasm-pack").arg("--version"));
    if let Some(v) = have() {
        println!("   already installed ({v})");
        return Ok(());
    }
    process::wait_while_running("cargo install wasm-pack", cargo_install_running("wasm-pack"));
    if let Some(v) = have() {
        println!("   installed by the other process ({v})");
        return Ok(());
    }
    run(Command::new("cargo").args(["install", "wasm-pack"]))?;
    have().map(|_| ()).ok_or_else(|| "wasm-pack --version fails after install".to_string())
}

fn mtime(p: &Path) -> Option<SystemTime> {
    p.metadata().and_then(|m| m.modified()).ok()
}

/// binaryen (wasm-opt), typescript (tsc), playwright-core: pinned in tools/package.json.
pub fn npm_tools() -> Result {
    step("npm tools in tools/ (wasm-opt, tsc, playwright-core)");
    let tools = root().join("tools");
    let lock = tools.join("package-lock.json");
    // npm writes node_modules/.package-lock.json after every successful install.
    let installed = tools.join("node_modules/.package-lock.json");
    let bins_present = NPM_TOOLS.iter().all(|b| tools.join("node_modules/.bin").join(b).exists())
        && tools.join("node_modules/playwright-core/package.json").exists();
    let up_to_date = match (mtime(&installed), mtime(&lock)) {
        (Some(i), Some(l)) => i >= l,
        _ => false,
    };
    if bins_present && up_to_date {
        println!("   already installed");
    } else {
        process::wait_while_running("npm install in tools/", |p| {
            (p.contains("npm install") || p.contains("npm ci")) && p.contains("tools")
        });
        // With a lock: `npm ci` (exact, fails loudly if package.json and the lock disagree:
        // after editing package.json run `npm install` in tools/ and commit the lock).
        let sub = if lock.exists() { "ci" } else { "install" };
        run(cmd("npm").current_dir(&tools).args([sub, "--no-audit", "--no-fund"]))?;
    }
    let v = output(Command::new("wasm-opt").arg("--version"))
        .ok_or("wasm-opt --version does not run (tools/node_modules/.bin is on PATH)")?;
    println!("   {v}");
    Ok(())
}

/// The same names tests/support/chromium.mjs searches when run without the xtask.
const CHROMIUM_NAMES: &[&str] = &["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"];

/// `var` when it names an existing path, else `search()`.
fn env_path_or(var: &str, search: impl FnOnce() -> Option<PathBuf>) -> Option<PathBuf> {
    env::var_os(var).map(PathBuf::from).filter(|p| p.exists()).or_else(search)
}

/// Chromium and chromedriver from Debian when missing. The source of truth for where they are: on
/// success sets CHROMIUM_PATH (Playwright, tests/support/chromium.mjs) and CHROMEDRIVER (wasm-pack
/// test) for every layer, keeping valid ones already set.
pub fn chromium() -> Result {
    step("chromium + chromedriver (Debian)");
    let found = || {
        let chromium = env_path_or("CHROMIUM_PATH", || CHROMIUM_NAMES.iter().find_map(|n| which(n)));
        Some((chromium?, env_path_or("CHROMEDRIVER", || which("chromedriver"))?))
    };
    let (c, d) = match found() {
        Some(both) => {
            println!("   already installed");
            both
        }
        None => {
            apt_install(&["chromium", "chromium-driver"])?;
            found().ok_or("chromium or chromedriver not found after install")?
        }
    };
    println!("   {} / {}", c.display(), d.display());
    env::set_var("CHROMIUM_PATH", &c);
    env::set_var("CHROMEDRIVER", &d);
    Ok(())
}

/// Directory holding initdb: on PATH, or Debian's /usr/lib/postgresql/<ver>/bin (newest).
pub fn pg_bindir() -> Option<PathBuf> {
    if let Some(p) = which("initdb") {
        return fs::canonicalize(&p).unwrap_or(p).parent().map(Path::to_path_buf);
    }
    let mut dirs: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let ver = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((ver, bin))
        })
        .collect();
    dirs.sort();
    dirs.pop().map(|(_, b)| b)
}

/// PostgreSQL server binaries; on success puts them on PATH and sets IF_PG_TESTS=1, IF_PG_BINDIR.
pub fn postgres() -> Result {
    step("PostgreSQL (initdb/postgres for the server tests)");
    if pg_bindir().is_some() {
        println!("   already installed");
    } else {
        apt_install(&["postgresql"])?;
    }
    let bin = pg_bindir().ok_or("initdb not found after installing postgresql")?;
    println!("   {}", bin.display());
    if which("initdb").is_none() {
        // Appended, not prepended: Debian's bindir also has psql etc. that we don't want to shadow.
        append_path(&bin);
    }
    env::set_var("IF_PG_TESTS", "1");
    env::set_var("IF_PG_BINDIR", &bin);
    Ok(())
}

static APT_UPDATED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn apt_busy(p: &str) -> bool {
    let prog = p.split_whitespace().next().unwrap_or("");
    let base = prog.rsplit('/').next().unwrap_or(prog);
    matches!(base, "apt-get" | "apt" | "dpkg" | "unattended-upgrade" | "aptitude")
}

fn apt(args: &[&str]) -> Command {
    let is_root = output(Command::new("id").arg("-u")).as_deref() == Some("0");
    let mut c = if is_root {
        Command::new("apt-get")
    } else {
        let mut c = Command::new("sudo");
        c.arg("-E").arg("apt-get");
        c
    };
    // Let apt itself wait for the dpkg lock too (apt >= 1.9.11), in case someone grabs it between
    // our check and our start.
    c.args(["-o", "DPkg::Lock::Timeout=900"]).args(args);
    c.env("DEBIAN_FRONTEND", "noninteractive");
    c
}

pub fn apt_install(pkgs: &[&str]) -> Result {
    process::wait_while_running("apt-get/dpkg", apt_busy);
    if !APT_UPDATED.swap(true, std::sync::atomic::Ordering::SeqCst) {
        run(&mut apt(&["update"]))?;
    }
    let mut args = vec!["install", "-y"];
    args.extend_from_slice(pkgs);
    run(&mut apt(&args))
}
