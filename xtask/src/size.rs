//! `cargo xtask size`: compressed size of what a browser downloads (pkg/index.js + the wasm), and its budget.

use crate::process::{cmd, output_bytes, root, which, Result};
use std::fs;
use std::path::Path;

pub const FILES: &[&str] = &["pkg/idempotent_fetch_bg.wasm", "pkg/index.js"];

/// The size step fails when the sum of the gzip -9 sizes of `FILES` grows past this: 26,871 B measured on
/// 2026-11-30 at 10:20 UTC (the package of a19a526), plus about 2 %. Lower it when the package shrinks.
pub const SIZE_BUDGET_BYTES: u64 = 27_500;

fn gzip9(p: &Path) -> Result<u64> {
    Ok(output_bytes(cmd("gzip").arg("-9").arg("-c").arg(p))?.len() as u64)
}

fn brotli11(p: &Path) -> Result<u64> {
    Ok(output_bytes(cmd("brotli").args(["-q", "11", "-c"]).arg(p))?.len() as u64)
}

/// file, raw bytes, gzip -9 bytes, brotli -q 11 bytes (None without the brotli CLI).
type Row = (String, u64, u64, Option<u64>);

/// Print the table. Errors if pkg/ has not been built, or when the total is past `SIZE_BUDGET_BYTES`.
pub fn report() -> Result {
    let has_brotli = which("brotli").is_some();
    let mut rows: Vec<Row> = Vec::new();
    for f in FILES {
        let p = root().join(f);
        let raw = fs::metadata(&p)
            .map_err(|e| format!("{f}: {e} (build it first: cargo xtask test, or node package/build.mjs)"))?
            .len();
        let br = if has_brotli { Some(brotli11(&p)?) } else { None };
        rows.push((f.to_string(), raw, gzip9(&p)?, br));
    }
    let sum = |f: fn(&Row) -> u64| rows.iter().map(f).sum::<u64>();
    let total = (
        "total".to_string(),
        sum(|r| r.1),
        sum(|r| r.2),
        if has_brotli { Some(sum(|r| r.3.unwrap_or(0))) } else { None },
    );
    println!("{:<36} {:>10} {:>10} {:>14}", "file", "raw B", "gzip -9 B", "brotli -q11 B");
    for r in rows.iter().chain(std::iter::once(&total)) {
        let br = r.3.map(|b| b.to_string()).unwrap_or_else(|| "-".into());
        println!("{:<36} {:>10} {:>10} {:>14}", r.0, r.1, r.2, br);
    }
    if !has_brotli {
        println!("(brotli column skipped: no `brotli` CLI on PATH; `apt-get install brotli` adds it)");
    }
    if total.2 > SIZE_BUDGET_BYTES {
        return Err(format!(
            "the package grew past its budget: {} B gzip > SIZE_BUDGET_BYTES = {SIZE_BUDGET_BYTES} B (xtask/src/size.rs)",
            total.2
        ));
    }
    println!("within the budget: {} B gzip <= {SIZE_BUDGET_BYTES} B", total.2);
    Ok(())
}
