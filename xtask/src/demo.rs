//! `cargo xtask demo [--port 8080]`: build the package (pkg/) if stale, then run the reference server.

use crate::install;
use crate::process::{cargo, describe, root, run, Result};
use std::fs;
use std::path::Path;
use std::time::SystemTime;

/// Newest modification time of any file under `p` (or of `p` itself).
pub fn newest_mtime(p: &Path) -> Option<SystemTime> {
    let meta = fs::metadata(p).ok()?;
    if meta.is_file() {
        return meta.modified().ok();
    }
    fs::read_dir(p).ok()?.flatten().filter_map(|e| newest_mtime(&e.path())).max()
}

fn package_stale() -> bool {
    let Some(built) = newest_mtime(&root().join("pkg/package.json")) else { return true };
    ["src", "package", "Cargo.toml", "Cargo.lock"]
        .iter()
        .filter_map(|p| newest_mtime(&root().join(p)))
        .any(|t| t > built)
}

/// Build the npm package into pkg/: every command line is in package/build.mjs (package/README.md).
pub fn build_package() -> Result {
    run(crate::process::cmd("node").arg(root().join("package/build.mjs")))
}

extern "C" {
    fn signal(signum: i32, handler: usize) -> usize;
}
const SIGINT: i32 = 2;
extern "C" fn on_sigint(_: i32) {}

pub fn demo(port: u16) -> Result {
    install::toolchain()?;
    if package_stale() {
        println!("== pkg/ is missing or older than src/ or package/: building it");
        build_package()?;
    } else {
        println!("== pkg/ is up to date");
    }
    fs::create_dir_all(root().join("target")).map_err(|e| format!("mkdir target: {e}"))?;
    let addr = format!("127.0.0.1:{port}");
    let mut c = cargo();
    c.args(["run", "--release", "-p", "idempotent-fetch-server", "--"]).args([
        "--addr",
        &addr,
        "--db",
        "target/demo.sqlite",
        "--www",
        "www",
        "--pkg",
        "pkg",
    ]);
    println!("== demo at http://{addr}/  (Ctrl-C stops it)");
    println!("$ {}", describe(&c));
    // Ctrl-C reaches the server through the terminal's process group; we only must not die
    // first. A handler (unlike SIG_IGN) is reset to default in the child on exec.
    unsafe {
        signal(SIGINT, on_sigint as extern "C" fn(i32) as usize);
    }
    let status = c.status().map_err(|e| format!("cannot start cargo: {e}"))?;
    use std::os::unix::process::ExitStatusExt;
    let code = status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(1));
    if code != 0 {
        println!("server exited with {status}");
    }
    std::process::exit(code);
}
