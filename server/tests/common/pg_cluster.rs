//! A throwaway PostgreSQL cluster on 127.0.0.1 for the `#[ignore]`d PostgreSQL tests and the load benchmark
//! (included by both with `#[path]`). Binaries: `IF_PG_BINDIR`, PATH, then `/usr/lib/postgresql/*/bin`. As
//! root, the cluster runs as the `postgres` user (or `nobody`) through `runuser`, since PostgreSQL refuses
//! to run as root.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

fn loud(message: &str) {
    // Written to the real stderr (not captured by the test harness) so nobody misses it.
    let _ = writeln!(std::io::stderr(), "\n!!!!!!!!!! {message} !!!!!!!!!!\n");
}

/// The directory holding `initdb`, `pg_ctl` and `postgres`, if any.
fn find_bin_dir() -> Option<PathBuf> {
    let has_all = |dir: &Path| ["initdb", "pg_ctl", "postgres"].iter().all(|b| dir.join(b).is_file());
    if let Some(path) = std::env::var_os("PATH") {
        if let Some(dir) = std::env::split_paths(&path).find(|d| has_all(d)) {
            return Some(dir);
        }
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|d| has_all(d))
        .collect();
    versions.sort_by_key(|d| {
        d.parent().and_then(|v| v.file_name()).and_then(|v| v.to_str()).and_then(|v| v.parse::<u32>().ok()).unwrap_or(0)
    });
    versions.pop()
}

/// The PostgreSQL binaries, or a failure saying how to get them.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("IF_PG_BINDIR").map(PathBuf::from) {
        return dir;
    }
    match find_bin_dir() {
        Some(dir) => dir,
        None => panic!(
            "initdb/pg_ctl/postgres were not found in IF_PG_BINDIR, on PATH or in /usr/lib/postgresql/*/bin \
             (apt-get install -y postgresql, or `cargo xtask install`)"
        ),
    }
}

fn output(command: &mut Command) -> Result<String, String> {
    let out = command.output().map_err(|e| format!("{command:?}: {e}"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{command:?} failed ({}): {text}", out.status))
    }
}

/// A throwaway PostgreSQL cluster on 127.0.0.1, stopped on drop.
pub struct Cluster {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    run_as: Option<String>,
    dir: tempfile::TempDir,
}

impl Cluster {
    /// Settings for tests: no fsync (durability is not what they check).
    pub const FAST: &'static str = "-c fsync=off";
    /// Settings for benchmarks: durable commits, like SQLite's `synchronous=FULL`.
    pub const DURABLE: &'static str = "-c fsync=on -c synchronous_commit=on";

    /// `initdb`s a cluster in a temp dir and starts it on 127.0.0.1 with `settings` (`-c name=value ...`).
    pub fn start(bin: PathBuf, settings: &str) -> Result<Cluster, String> {
        let dir = tempfile::Builder::new().prefix("ifpg").tempdir().map_err(|e| e.to_string())?;
        let is_root = output(Command::new("id").arg("-u"))?.trim() == "0";
        let run_as = if is_root {
            let user = if output(Command::new("id").args(["-u", "postgres"])).is_ok() { "postgres" } else { "nobody" };
            let uid: u32 = output(Command::new("id").args(["-u", user]))?.trim().parse().map_err(|e| format!("{e}"))?;
            let gid: u32 = output(Command::new("id").args(["-g", user]))?.trim().parse().map_err(|e| format!("{e}"))?;
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).map_err(|e| format!("chown: {e}"))?;
            Some(user.to_owned())
        } else {
            None
        };
        let data = dir.path().join("data");
        let mut cluster = Cluster { bin, data, port: 0, run_as, dir };
        output(cluster.command("initdb").arg("-D").arg(&cluster.data).args([
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ]))?;
        let mut last_error = String::new();
        for _ in 0..3 {
            cluster.port = free_port()?;
            let options = format!(
                "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200 {settings}",
                cluster.port,
                cluster.dir.path().display()
            );
            let log = cluster.dir.path().join("postgres.log");
            match output(
                cluster
                    .command("pg_ctl")
                    .arg("-D")
                    .arg(&cluster.data)
                    .arg("-l")
                    .arg(&log)
                    .args(["-w", "-t", "30", "-o", &options, "start"]),
            ) {
                Ok(_) => return Ok(cluster),
                Err(e) => last_error = format!("{e}\n{}", std::fs::read_to_string(&log).unwrap_or_default()),
            }
        }
        Err(last_error)
    }

    fn command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        match &self.run_as {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(program);
                command
            }
            None => Command::new(program),
        }
    }

    /// `postgres://postgres@127.0.0.1:PORT/DB`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let stopped = output(self.command("pg_ctl").arg("-D").arg(&self.data).args(["-m", "immediate", "-w", "stop"]));
        if let Err(e) = stopped {
            loud(&format!("could not stop the test PostgreSQL cluster: {e}"));
        }
    }
}

fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(listener.local_addr().map_err(|e| e.to_string())?.port())
}
