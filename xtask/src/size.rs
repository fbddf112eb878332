//! What ships, and its budget: the files a browser downloads, each compressed with `gzip -9` on its
//! own (as a server sends them), summed. `benches/size.mjs` measures what an app's bundler makes of
//! the package, with brotli and the comparisons; this is the budget that CI enforces.

use crate::process::{cmd, Result};
use std::fs;
use std::process::Stdio;

/// The files measured (built by `cargo xtask build`).
pub const SHIPPED_FILES: &[&str] = &["pkg/idempotent_fetch_bg.wasm", "pkg/index.js"];

/// The size step fails when the sum of the gzip -9 sizes of `SHIPPED_FILES` grows past this: what ships
/// plus a small margin, so a change that adds bytes says so in its commit (the figures are in
/// BENCHMARKS.md "What ships"; the history of this number is in git).
pub const SIZE_BUDGET_BYTES: u64 = 26_197;

/// (file, raw bytes, gzip -9 bytes) for each shipped file.
fn measure() -> Result<Vec<(&'static str, u64, u64)>> {
    SHIPPED_FILES
        .iter()
        .map(|&f| {
            let raw = fs::metadata(f).map_err(|e| format!("{f}: {e} (build it: cargo xtask build)"))?.len();
            let out = cmd("gzip").args(["-9", "-c", f]).stderr(Stdio::inherit()).output();
            match out {
                Ok(o) if o.status.success() => Ok((f, raw, o.stdout.len() as u64)),
                _ => Err(format!("gzip -9 -c {f} failed")),
            }
        })
        .collect()
}

/// Print the table; an error when the total is past `SIZE_BUDGET_BYTES`.
pub fn check() -> Result {
    let rows = measure()?;
    println!("{:<40} {:>10} {:>10}", "file", "raw B", "gzip -9 B");
    for (f, raw, gz) in &rows {
        println!("{f:<40} {raw:>10} {gz:>10}");
    }
    let total: u64 = rows.iter().map(|r| r.2).sum();
    println!("{:<40} {:>10} {total:>10}  (budget {SIZE_BUDGET_BYTES})", "total", rows.iter().map(|r| r.1).sum::<u64>());
    if total > SIZE_BUDGET_BYTES {
        return Err(format!(
            "the package is {total} B gzip, past SIZE_BUDGET_BYTES = {SIZE_BUDGET_BYTES} (xtask/src/size.rs): \
             make it smaller, or raise the budget in the same commit and say why"
        ));
    }
    Ok(())
}
