//! `cargo xtask demo [--port 8080]`: build the package if stale, then run the reference server.

use crate::install;
use crate::process::{cargo, run, Result};
use crate::project::{ensure_package, SERVER_PACKAGE, SERVER_PROFILE, WEB_PACKAGE, WWW_DIR};
use std::sync::atomic::{AtomicBool, Ordering};

pub fn demo(port: u16) -> Result {
    install::toolchain()?;
    ensure_package()?;
    std::fs::create_dir_all("target").map_err(|e| format!("mkdir target: {e}"))?;
    let addr = format!("127.0.0.1:{port}");
    // Ctrl-C reaches the server through the terminal's process group; xtask must only not die first.
    // A handler (unlike ignoring the signal) is reset to the default in the child on exec.
    static STOPPED: AtomicBool = AtomicBool::new(false);
    ctrlc::set_handler(|| STOPPED.store(true, Ordering::SeqCst)).map_err(|e| format!("cannot handle Ctrl-C: {e}"))?;
    println!("== demo at http://{addr}/  (Ctrl-C stops it)");
    let served = run(cargo().args(["run", "--profile", SERVER_PROFILE, "-p", SERVER_PACKAGE, "--"]).args([
        "--enable-faults",
        "--addr",
        &addr,
        "--db",
        "target/demo.sqlite",
        "--www",
        WWW_DIR,
        "--pkg",
        WEB_PACKAGE,
    ]));
    if STOPPED.load(Ordering::SeqCst) {
        println!("== demo stopped");
        return Ok(());
    }
    served
}
