//! The workspace's binaries as real processes on 127.0.0.1: started with port 0, their URL read from the
//! one `listening on URL` line, killed when dropped.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A running binary; killed (SIGKILL) and reaped on drop.
pub struct Process {
    pub child: Child,
    pub url: String,
}

impl Process {
    /// Starts `exe` with `args` and `--addr 127.0.0.1:0`, and waits for its `listening on` line.
    pub fn start(exe: &str, args: &[&str]) -> Process {
        Process::start_at(exe, args, "127.0.0.1:0")
    }

    /// Like [`Process::start`] on a given address (a restart on the same port).
    pub fn start_at(exe: &str, args: &[&str], addr: &str) -> Process {
        let mut child = Command::new(exe)
            .args(["--addr", addr])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .env("RUST_LOG", "warn")
            .spawn()
            .expect("spawn");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).expect("read the listening line");
        let url = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("{exe}: {line:?}")).to_owned();
        Process { child, url }
    }

    /// The payment provider on `db`, faults enabled.
    pub fn provider(db: &Path) -> Process {
        Process::start(env!("CARGO_BIN_EXE_payment-provider"), &["--enable-faults", "--db", &db.to_string_lossy()])
    }

    /// The mail receiver on `db`, faults enabled.
    pub fn mailbox(db: &Path) -> Process {
        Process::start(env!("CARGO_BIN_EXE_mail-receiver"), &["--enable-faults", "--db", &db.to_string_lossy()])
    }

    /// The mail receiver on `db`, exporting its spans to the OTLP/HTTP collector at `otlp_endpoint`.
    pub fn mailbox_exporting(db: &Path, otlp_endpoint: &str) -> Process {
        let db = db.to_string_lossy();
        Process::start(env!("CARGO_BIN_EXE_mail-receiver"), &["--db", &db, "--otlp-endpoint", otlp_endpoint])
    }

    /// Waits for the process to end on its own (a crash fault); its exit status.
    pub fn wait_exit(&mut self, within: std::time::Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + within;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        None
    }

    /// The port it listens on.
    pub fn addr(&self) -> &str {
        self.url.strip_prefix("http://").unwrap_or(&self.url)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
