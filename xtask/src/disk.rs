//! Free disk space, read with `df` where the build writes (the target directory) and where the tests
//! write (the temp directory). A full disk makes cargo or a browser fail with a message that names a
//! file, not the cause; printing the free space before every step and in a failing step's error makes
//! the cause plain in a CI log.

use crate::process::{cmd, output};
use crate::project::target_dir;
use std::env;
use std::path::Path;

/// Below this, a failing step's error says that the disk is nearly full.
const LOW_FREE_MB: u64 = 1024;

/// Free megabytes on the filesystem holding `path` (its nearest existing ancestor), from `df -Pk`.
fn free_mb(path: &Path) -> Option<u64> {
    let existing = path.ancestors().find(|p| p.exists())?;
    let out = output(cmd("df").arg("-Pk").arg(existing))?;
    let kb: u64 = out.lines().nth(1)?.split_whitespace().nth(3)?.parse().ok()?;
    Some(kb / 1024)
}

/// (place, free MB) for the target and the temp directory, where it can be read.
fn places() -> Vec<(&'static str, u64)> {
    let target = target_dir().ok();
    let tmp = env::temp_dir();
    [("target", target.as_deref()), ("tmp", Some(tmp.as_path()))]
        .into_iter()
        .filter_map(|(name, p)| Some((name, free_mb(p?)?)))
        .collect()
}

/// "target: N MB free, tmp: M MB free" (whichever can be read).
pub fn report() -> String {
    places().iter().map(|(name, mb)| format!("{name}: {mb} MB free")).collect::<Vec<_>>().join(", ")
}

/// Whether either place has less than `LOW_FREE_MB` free.
pub fn low() -> bool {
    places().iter().any(|(_, mb)| *mb < LOW_FREE_MB)
}
