//! `cargo xtask demo [--port 8080]`: build pkg/web if stale, then run the reference server.

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

fn pkg_web_stale() -> bool {
    let wasm = root().join("pkg/web/idempotent_fetch_bg.wasm");
    let Some(built) = newest_mtime(&wasm) else { return true };
    ["src", "Cargo.toml", "Cargo.lock"].iter().filter_map(|p| newest_mtime(&root().join(p))).any(|t| t > built)
}

pub fn build_pkg(target: &str, out: &str) -> Result {
    run(crate::process::cmd("wasm-pack").args([
        "build",
        "--release",
        "--target",
        target,
        "--out-dir",
        out,
        "--out-name",
        "idempotent_fetch",
    ]))
}

extern "C" {
    fn signal(signum: i32, handler: usize) -> usize;
}
const SIGINT: i32 = 2;
extern "C" fn on_sigint(_: i32) {}

pub fn demo(port: u16) -> Result {
    install::toolchain()?;
    if pkg_web_stale() {
        println!("== pkg/web is missing or older than src/: building it");
        build_pkg("web", "pkg/web")?;
    } else {
        println!("== pkg/web is up to date");
    }
    fs::create_dir_all(root().join("target")).map_err(|e| format!("mkdir target: {e}"))?;
    let addr = format!("127.0.0.1:{port}");
    let mut c = cargo();
    c.args(["run", "--profile", "server", "-p", "idempotent-fetch-server", "--"]).args([
        "--enable-faults",
        "--addr",
        &addr,
        "--db",
        "target/demo.sqlite",
        "--www",
        "www",
        "--pkg",
        "pkg/web",
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
