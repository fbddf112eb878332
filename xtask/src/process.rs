//! Small process helpers: run a command loudly, capture output quietly, find binaries on PATH,
//! and a guard that kills a background child when dropped.

use std::env;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

pub type Result<T = ()> = std::result::Result<T, String>;

/// Repository root (the parent of xtask/).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask has a parent dir").to_path_buf()
}

/// A new `Command` that runs in the repository root.
pub fn cmd<S: AsRef<OsStr>>(program: S) -> Command {
    let mut c = Command::new(program);
    c.current_dir(root());
    c
}

/// The cargo that runs us (so `cargo +toolchain xtask` keeps its toolchain), else `cargo`.
pub fn cargo() -> Command {
    cmd(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

pub fn describe(c: &Command) -> String {
    let mut s = c.get_program().to_string_lossy().into_owned();
    for a in c.get_args() {
        let a = a.to_string_lossy();
        if a.is_empty() || a.contains(' ') {
            s.push_str(&format!(" '{a}'"));
        } else {
            s.push(' ');
            s.push_str(&a);
        }
    }
    s
}

/// Print `$ cmd` and run it with inherited stdio; Err if it cannot start or exits non-zero.
pub fn run(c: &mut Command) -> Result {
    println!("$ {}", describe(c));
    let status = c.status().map_err(|e| format!("cannot start `{}`: {e}", describe(c)))?;
    check(status, c)
}

pub fn check(status: ExitStatus, c: &Command) -> Result {
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{}` failed ({status})", describe(c)))
    }
}

/// Run quietly and return trimmed stdout if it exits 0; None if it cannot run or fails.
pub fn output(c: &mut Command) -> Option<String> {
    let out = c.stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Stdout bytes of a successful run (used for piping a file through gzip/brotli).
pub fn output_bytes(c: &mut Command) -> Result<Vec<u8>> {
    let out = c
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot start `{}`: {e}", describe(c)))?;
    if !out.status.success() {
        return Err(format!("`{}` failed ({})", describe(c), out.status));
    }
    Ok(out.stdout)
}

/// First executable called `name` on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = env::var_os("PATH")?;
    env::split_paths(&path).map(|d| d.join(name)).find(|p| is_executable(p))
}

pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// Put `dir` first on PATH for this process and, by inheritance, every child.
pub fn prepend_path(dir: &Path) {
    let old = env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = env::split_paths(&old).filter(|d| d != dir).collect();
    dirs.insert(0, dir.to_path_buf());
    env::set_var("PATH", env::join_paths(dirs).expect("PATH entries are joinable"));
}

/// Put `dir` last on PATH (unless it is already on it) for this process and every child.
pub fn append_path(dir: &Path) {
    let old = env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = env::split_paths(&old).collect();
    if !dirs.iter().any(|d| d == dir) {
        dirs.push(dir.to_path_buf());
        env::set_var("PATH", env::join_paths(dirs).expect("PATH entries are joinable"));
    }
}

/// Command lines (argv joined by spaces) of all other processes, from /proc.
pub fn other_processes() -> Vec<String> {
    let me = std::process::id().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.chars().all(|c| c.is_ascii_digit()) && n != me
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|b| !b.is_empty())
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// Wait (printing now and then) while another process matching `pred` runs.
pub fn wait_while_running(what: &str, pred: impl Fn(&str) -> bool) {
    let mut waited = 0u64;
    loop {
        let busy: Vec<String> = other_processes().into_iter().filter(|p| pred(p)).collect();
        if busy.is_empty() {
            if waited > 0 {
                println!("   ... the other {what} finished after ~{waited}s");
            }
            return;
        }
        if waited % 30 == 0 {
            let first: String = busy[0].chars().take(120).collect();
            println!("   waiting for another process ({what}) to finish: {first}");
        }
        thread::sleep(Duration::from_secs(5));
        waited += 5;
    }
}

/// Kills (and reaps) a background child when dropped, so servers never outlive a failing step.
pub struct ChildGuard {
    pub name: String,
    child: Child,
}

impl ChildGuard {
    pub fn new(name: &str, child: Child) -> Self {
        Self { name: name.to_string(), child }
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

/// Spawn `c` with stdout piped, wait up to `timeout` for a stdout line containing `marker`, and
/// return (guard, that line). Other stdout lines are echoed with a prefix; stdout keeps being
/// drained in a thread so the child never blocks on a full pipe.
pub fn spawn_and_wait_for_line(
    name: &str,
    c: &mut Command,
    marker: &str,
    timeout: Duration,
) -> Result<(ChildGuard, String)> {
    println!("$ {} &", describe(c));
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start `{}`: {e}", describe(c)))?;
    let stdout = child.stdout.take().expect("stdout was piped");
    let guard = ChildGuard::new(name, child);
    let (tx, rx) = mpsc::channel::<String>();
    let marker_owned = marker.to_string();
    let prefix = name.to_string();
    thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if !sent && line.contains(&marker_owned) {
                sent = true;
                let _ = tx.send(line);
            } else {
                println!("   [{prefix}] {line}");
            }
        }
    });
    match rx.recv_timeout(timeout) {
        Ok(line) => Ok((guard, line)),
        Err(_) => Err(format!(
            "{name} did not print a line containing {marker:?} within {}s (or it exited)",
            timeout.as_secs()
        )),
    }
}
