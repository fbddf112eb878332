//! `cargo xtask demo [--port 8080]`: build the package and the page's tracing bundle if stale, then run the
//! reference server with a payment provider, a mail receiver and a trace receiver next to it (ports
//! `port + 1`, `port + 2` and `port + 3`), restarting the server whenever it crashes (the demo page's "crash
//! after the charge" fault ends it on purpose). The server, the provider and the mail receiver export their
//! spans over OTLP/HTTP to the trace receiver, and so does the page opened with `?traces=` (the address
//! printed), which draws them.

use crate::install;
use crate::process::{cmd, spawn_listening, ChildGuard, Result};
use crate::project::{ensure_demo_tracing, server_binary, PACKAGE_DIR, WWW_DIR};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

pub fn demo(port: u16) -> Result {
    install::toolchain()?;
    ensure_demo_tracing()?;
    std::fs::create_dir_all("target").map_err(|e| format!("mkdir target: {e}"))?;
    let server = server_binary()?;
    let sibling = |name: &str| server.with_file_name(name);
    let (provider_port, mail_port, traces_port) =
        (port.saturating_add(1), port.saturating_add(2), port.saturating_add(3));
    // SIGINT, SIGTERM or SIGHUP: the loop below notices, stops the server, and the guards stop the
    // provider and the receivers. A signal sent to xtask alone (a process manager's SIGTERM) never
    // reaches the children by itself. A handler (unlike ignoring the signal) is reset to the default
    // in the child on exec.
    static STOPPED: AtomicBool = AtomicBool::new(false);
    ctrlc::set_handler(|| STOPPED.store(true, Ordering::SeqCst)).map_err(|e| format!("cannot handle signals: {e}"))?;
    let service = |bin: &Path, port: u16, args: &[&str]| {
        let addr = format!("127.0.0.1:{port}");
        let mut c = cmd(bin);
        c.args(["--addr", &addr]).args(args);
        spawn_listening(&bin.to_string_lossy(), &mut c, port)
    };
    let traces_url = format!("http://127.0.0.1:{traces_port}");
    let _traces = service(&sibling("trace-receiver"), traces_port, &[])?;
    let provider_args =
        ["--enable-faults", "--db", "target/demo-provider.sqlite", "--otlp-endpoint", traces_url.as_str()];
    let _provider = service(&sibling("payment-provider"), provider_port, &provider_args)?;
    let mail_args = ["--enable-faults", "--db", "target/demo-mail.sqlite", "--otlp-endpoint", traces_url.as_str()];
    let _mailbox = service(&sibling("mail-receiver"), mail_port, &mail_args)?;
    let addr = format!("127.0.0.1:{port}");
    // One session secret for every restart of this run, so the page's session survives a crash (without
    // one the server draws a new secret at each start and the shopper would be signed out).
    let secret = session_secret()?;
    let provider_url = format!("http://127.0.0.1:{provider_port}");
    let mail_url = format!("http://127.0.0.1:{mail_port}");
    println!("== demo at http://{addr}/  (Ctrl-C stops it)");
    println!("   traced, with each payment's timeline: http://{addr}/?traces={traces_url}");
    println!("   payment provider {provider_url}/charges, mail receiver {mail_url}/messages, trace receiver {traces_url}/v1/traces");
    let mut restarts = 0;
    loop {
        let mut server_cmd = cmd(&server);
        server_cmd.args([
            "--enable-faults",
            "--addr",
            &addr,
            "--db",
            "target/demo.sqlite",
            "--www",
            WWW_DIR,
            "--pkg",
            PACKAGE_DIR,
            "--provider-url",
            &provider_url,
            "--mail-url",
            &mail_url,
            "--otlp-endpoint",
            &traces_url,
            // A key left by a crash is taken over after its lease: short, so the page finishes soon after
            // the server is back.
            "--key-lease-ms",
            "3000",
        ]);
        server_cmd.env("IF_SESSION_SECRET", &secret);
        let child = server_cmd.spawn().map_err(|e| format!("cannot start {}: {e}", server.display()))?;
        let mut guard = ChildGuard::new("the server", child);
        let status = loop {
            if STOPPED.load(Ordering::SeqCst) {
                drop(guard);
                println!("== demo stopped");
                return Ok(());
            }
            match guard.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => std::thread::sleep(std::time::Duration::from_millis(100)),
                Err(e) => return Err(format!("cannot watch the server: {e}")),
            }
        };
        // Ctrl-C in a terminal reaches the server too, which may end before this loop looks.
        if status.success() || STOPPED.load(Ordering::SeqCst) {
            println!("== demo stopped");
            return Ok(());
        }
        // A crash (a crash fault aborts the process): start it again on the same file and port, as a
        // process supervisor would; the page's retries then find it back.
        restarts += 1;
        if restarts > 1000 {
            return Err(format!("the server keeps crashing ({status}); giving up"));
        }
        println!("== the server ended ({status}); restarting it (restart {restarts})");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// 32 bytes from the kernel's CSPRNG, hex.
fn session_secret() -> Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("no session secret from /dev/urandom: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
