//! One place for each fact about the repository: where things are, how the package is built, which
//! TypeScript projects are checked, how the server is built. Paths are relative to the repository
//! root, which `main` makes the working directory.

use crate::process::{cargo, cmd, output, run, Result};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::SystemTime;

/// The repository root (the parent of xtask/), absolute. `cargo run` sets CARGO_MANIFEST_DIR for the
/// run too, and that one is read first: with a target directory shared by several checkouts
/// (`CARGO_TARGET_DIR`), the binary cargo runs may have been built in another checkout, whose path the
/// compile-time value holds.
pub fn root() -> PathBuf {
    let xtask =
        std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    xtask.parent().map_or_else(|| xtask.clone(), Path::to_path_buf)
}

/// The one npm package (browsers, bundlers, workers, Node), built by `package/build.mjs`.
pub const PACKAGE_DIR: &str = "pkg";
/// Everything the package is built from: it is rebuilt when one of these is newer than it.
pub const PACKAGE_INPUTS: &[&str] = &["src", "package", "Cargo.toml", "Cargo.lock"];
/// Every TypeScript project; the `tsc` gate runs `tsc -p <it> --strict --noEmit` on each, and fails
/// on a `.ts` file outside their directories.
pub const TSCONFIGS: &[&str] = &[
    "src/js/tsconfig.json",
    "src/js/node/tsconfig.json",
    "src/js/check/tsconfig.json",
    "tests/ts/tsconfig.json",
    "server/node/tsconfig.json",
];
/// Apps with their own TypeScript dependencies (installed by the test that builds them), whose own
/// type check (`tsc -b`, `vue-tsc -b`, `svelte-check`) runs there (tests/js/package.test.mjs), so
/// the `tsc` gate leaves their files to it (the Next.js example: `next build` in
/// server/node/test/next.test.mjs).
pub const APP_TS_DIRS: &[&str] = &[
    "tests/package/react-app",
    "tests/package/vue-app",
    "tests/package/svelte-app",
    "tests/package/tanstack-app",
    "server/node/examples/next-checkout",
];
/// The server library's Node half (npm package `idempotent-endpoint`): its own npm dependencies
/// (package-lock.json), built by its build.mjs into dist/, tested by the `*.test.mjs` under test/.
pub const NODE_SERVER_DIR: &str = "server/node";
/// Everything the Node half's dist/ is built from: it is rebuilt when one of these is newer than it.
pub const NODE_SERVER_INPUTS: &[&str] = &[
    "server/node/src",
    "server/node/core",
    "server/node/build.mjs",
    "server/node/package.json",
    "server/node/tsconfig.json",
    "server/idempotency/src",
    "server/idempotency/Cargo.toml",
];
/// The Node half's TypeDoc options (every export documented; checked with `--emit none`).
pub const NODE_SERVER_DOCS_CONFIG: &str = "tsconfig.docs.json";
/// The demo page and its end-to-end tests.
pub const WWW_DIR: &str = "www";
/// The demo page's tracing bundle (the OpenTelemetry SDK, its OTLP/HTTP exporter and the package's `/otel`
/// entry), written by `www/build-tracing.mjs` (not committed).
pub const DEMO_TRACING_BUNDLE: &str = "www/tracing.js";
/// Everything that bundle is built from.
pub const DEMO_TRACING_INPUTS: &[&str] =
    &["www/tracing.mjs", "www/build-tracing.mjs", "pkg/otel.js", "tools/package-lock.json"];
/// The npm tools (wasm-opt, tsc, playwright-core), pinned in tools/package.json.
pub const TOOLS_DIR: &str = "tools";
/// TypeDoc and the TypeScript it reads the sources with (tools/typedoc/package.json: its own folder,
/// because TypeDoc needs the compiler API that the TypeScript 7 of TOOLS_DIR does not have).
pub const TYPEDOC_DIR: &str = "tools/typedoc";
/// The API reference's TypeScript project and TypeDoc options (entry points, validation).
pub const API_DOCS_CONFIG: &str = "src/js/tsconfig.docs.json";
/// Where `cargo xtask docs` writes the API reference, under cargo's target directory (not committed).
pub const API_DOCS_OUT: &str = "api";
/// The reference server's package and the cargo profile its tests and the demo use.
pub const SERVER_PACKAGE: &str = "idempotent-fetch-server";
/// The example app built on the server library alone (`examples/invite`).
pub const EXAMPLE_PACKAGE: &str = "invite-example";
/// The server library's package (`server/idempotency`): its PostgreSQL tests are `#[ignore]`d like the server's.
pub const LIBRARY_PACKAGE: &str = "idempotent-endpoint";
pub const SERVER_PROFILE: &str = "server";

/// Build the npm package into pkg/: every command line is in package/build.mjs (package/README.md).
pub fn build_package() -> Result {
    run(cmd("node").arg(root().join("package/build.mjs")))
}

/// The API reference (TypeDoc over the public entries) into `<target>/api/`, failing on any warning:
/// an exported item without a doc comment, a broken `{@link}`. Returns the folder it wrote.
pub fn build_api_docs() -> Result<PathBuf> {
    let out = target_dir()?.join(API_DOCS_OUT);
    let typedoc = root().join(TYPEDOC_DIR).join("node_modules/.bin/typedoc");
    run(cmd(typedoc).args(["--tsconfig", API_DOCS_CONFIG, "--logLevel", "Warn", "--out"]).arg(&out))?;
    println!("   API reference: {}", out.join("index.html").display());
    Ok(out)
}

/// Build the package unless every file of it is newer than every input (fast when nothing changed).
pub fn ensure_package() -> Result {
    match up_to_date(PACKAGE_DIR, PACKAGE_INPUTS) {
        true => {
            println!("   the package is newer than {PACKAGE_INPUTS:?}: not rebuilt");
            Ok(())
        }
        false => build_package(),
    }
}

/// The demo page's tracing bundle, built after the package unless newer than every input.
pub fn ensure_demo_tracing() -> Result {
    ensure_package()?;
    match up_to_date(DEMO_TRACING_BUNDLE, DEMO_TRACING_INPUTS) {
        true => Ok(()),
        false => run(cmd("node").arg(root().join("www/build-tracing.mjs"))),
    }
}

/// The Node half (server/node): its npm dependencies as its package-lock.json says (installed when missing
/// or older than the lock), and dist/ built by its build.mjs unless newer than every input.
pub fn ensure_node_server() -> Result {
    crate::install::npm_ci_if_stale(Path::new(NODE_SERVER_DIR))?;
    let dist = format!("{NODE_SERVER_DIR}/dist");
    match up_to_date(&dist, NODE_SERVER_INPUTS) {
        true => {
            println!("   {dist} is newer than {NODE_SERVER_INPUTS:?}: not rebuilt");
            Ok(())
        }
        false => run(cmd("node").arg(root().join(NODE_SERVER_DIR).join("build.mjs"))),
    }
}

/// Whether every file under `out` is newer than every file of `inputs` (false when `out` is missing or empty).
fn up_to_date(out: &str, inputs: &[&str]) -> bool {
    let built = mtimes(Path::new(out)).into_iter().min();
    let changed = inputs.iter().flat_map(|p| mtimes(Path::new(p))).max();
    matches!((built, changed), (Some(built), Some(changed)) if built > changed)
}

/// Modification times of `p` and of every file under it.
fn mtimes(p: &Path) -> Vec<SystemTime> {
    match fs::read_dir(p) {
        Ok(dir) => dir.flatten().flat_map(|e| mtimes(&e.path())).collect(),
        Err(_) => fs::metadata(p).and_then(|m| m.modified()).into_iter().collect(),
    }
}

/// Build the reference server (once per run) and return its binary's absolute path.
pub fn server_binary() -> Result<PathBuf> {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    if let Some(p) = BUILT.get() {
        return Ok(p.clone());
    }
    let p = build_server()?;
    Ok(BUILT.get_or_init(|| p).clone())
}

/// `cargo build` of the reference server (and of the example app on the server library, which the test
/// that drives it finds beside the server binary); the server binary's path.
fn build_server() -> Result<PathBuf> {
    run(cargo().args(["build", "--profile", SERVER_PROFILE, "-p", SERVER_PACKAGE, "-p", EXAMPLE_PACKAGE]))?;
    let p = target_dir()?.join(SERVER_PROFILE).join(SERVER_PACKAGE);
    if !p.is_file() {
        return Err(format!("server binary not found at {}", p.display()));
    }
    Ok(p)
}

/// `cargo metadata` of the workspace (with dependencies: the resolved versions of Cargo.lock).
fn metadata() -> Result<&'static Value> {
    static META: OnceLock<Value> = OnceLock::new();
    if let Some(m) = META.get() {
        return Ok(m);
    }
    let json = output(cargo().args(["metadata", "--format-version", "1"])).ok_or("`cargo metadata` failed")?;
    let value = serde_json::from_str(&json).map_err(|e| format!("cargo metadata: {e}"))?;
    Ok(META.get_or_init(|| value))
}

/// Cargo's target directory (honours CARGO_TARGET_DIR and .cargo/config).
pub fn target_dir() -> Result<PathBuf> {
    metadata()?["target_directory"].as_str().map(PathBuf::from).ok_or_else(|| "no target_directory".into())
}

/// The one version of `package` in Cargo.lock (an error when there are several: pin it with `=`).
pub fn locked_version(package: &str) -> Result<String> {
    let packages = metadata()?["packages"].as_array().ok_or("cargo metadata has no packages")?;
    let mut versions = packages.iter().filter(|p| p["name"] == package).filter_map(|p| p["version"].as_str());
    match (versions.next(), versions.next()) {
        (Some(v), None) => Ok(v.to_string()),
        (None, _) => Err(format!("{package} is not in Cargo.lock")),
        (Some(_), Some(_)) => Err(format!("Cargo.lock has several {package} versions; pin one with `=`")),
    }
}
