//! Running commands: loudly (`run`, echoing `$ cmd`), quietly (`output`), or in the background under
//! a guard that kills the child when dropped, so a server never outlives a failing step.

use std::env;
use std::ffi::OsStr;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

pub type Result<T = ()> = std::result::Result<T, String>;

/// A new command; it runs in the repository root, which `main` made the working directory.
pub fn cmd(program: impl AsRef<OsStr>) -> Command {
    Command::new(program)
}

/// The cargo that runs us (so `cargo +toolchain xtask` keeps its toolchain), else `cargo`.
pub fn cargo() -> Command {
    cmd(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

fn describe(c: &Command) -> String {
    let words = std::iter::once(c.get_program()).chain(c.get_args()).map(OsStr::to_string_lossy);
    words
        .map(|w| if w.is_empty() || w.contains(' ') { format!("'{w}'") } else { w.into_owned() })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Print `$ cmd` and run it with inherited stdio; an error if it cannot start or exits non-zero.
pub fn run(c: &mut Command) -> Result {
    println!("$ {}", describe(c));
    let status = c.status().map_err(|e| format!("cannot start `{}`: {e}", describe(c)))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{}` failed ({status})", describe(c)))
    }
}

/// Trimmed stdout of a quiet run that exits 0; None when it cannot start or fails.
pub fn output(c: &mut Command) -> Option<String> {
    let out = c.stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Put `dir` on PATH (first or last, once) for this process and, by inheritance, every child.
pub fn add_to_path(dir: &Path, first: bool) {
    let mut dirs: Vec<_> = env::split_paths(&env::var_os("PATH").unwrap_or_default()).filter(|d| d != dir).collect();
    if first {
        dirs.insert(0, dir.to_path_buf());
    } else {
        dirs.push(dir.to_path_buf());
    }
    if let Ok(path) = env::join_paths(dirs) {
        env::set_var("PATH", path);
    }
}

/// Wait (saying so every ~30 s) while another process matching `pgrep <pgrep_args>` runs, so two
/// runs on one machine never do the same install at once. Without pgrep there is nothing to wait for.
pub fn wait_for_other(what: &str, pgrep_args: &[&str]) {
    let mut waited = 0;
    while output(cmd("pgrep").args(pgrep_args)).is_some() {
        if waited % 30 == 0 {
            println!("   waiting for another {what} to finish");
        }
        thread::sleep(Duration::from_secs(5));
        waited += 5;
    }
}

/// Kills (and reaps) a background child when dropped.
pub struct ChildGuard {
    name: String,
    child: Child,
}

impl ChildGuard {
    /// Guards `child` (named `name` in messages): it is killed when the guard is dropped.
    pub fn new(name: &str, child: Child) -> Self {
        Self { name: name.to_string(), child }
    }

    /// The child's exit status when it has ended.
    pub fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        self.child.try_wait()
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            println!("   stopping {} (pid {})", self.name, self.child.id());
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// A port on 127.0.0.1 that was free a moment ago (for a server we are about to start).
pub fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    listener.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// Start `c` in the background and wait up to 30 s until 127.0.0.1:`port` accepts connections.
pub fn spawn_listening(name: &str, c: &mut Command, port: u16) -> Result<ChildGuard> {
    println!("$ {} &", describe(c));
    let child = c.stdin(Stdio::null()).spawn().map_err(|e| format!("cannot start `{}`: {e}", describe(c)))?;
    let mut guard = ChildGuard::new(name, child);
    for _ in 0..300 {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(guard);
        }
        if let Ok(Some(status)) = guard.child.try_wait() {
            return Err(format!("{name} exited ({status}) before listening on port {port}"));
        }
        thread::sleep(Duration::from_millis(100));
    }
    Err(format!("{name} does not listen on port {port} after 30 s"))
}
