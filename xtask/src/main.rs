//! Project automation: `cargo xtask <command>`. See xtask/README.md.

mod demo;
mod disk;
mod engines;
mod install;
mod process;
mod project;
mod size;
mod steps;

use process::Result;
use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  test [STEP...]        install missing tools, then run the gates and every test layer (what CI runs);
                        with step names (e.g. `test clippy e f`) only those
  gates                 only the gates (fmt, clippy, doc, tsc, typedoc): the fast check before a commit
  build                 build the npm package (pkg/)
  docs                  the API reference (TypeDoc) into target/api/; fails on an undocumented public item
  demo [--port 8080]    build the package if stale and run the reference server on 127.0.0.1
  install               only install/check the tools
  size                  gzip -9 size of each build and entry; fails past a budget
  bench                 run every benchmark (benches/run.sh)
  help                  this text";

fn main() -> ExitCode {
    // Variables `cargo run` sets for xtask itself must not leak into the cargo/wasm-pack children.
    for (k, _) in std::env::vars() {
        if k.starts_with("CARGO_PKG_")
            || k.starts_with("CARGO_MANIFEST_")
            || k.starts_with("CARGO_BIN_")
            || ["CARGO_CRATE_NAME", "CARGO_PRIMARY_PACKAGE"].contains(&k.as_str())
        {
            std::env::remove_var(k);
        }
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Every path in xtask is relative to the repository root.
    let in_root = std::env::set_current_dir(project::root()).map_err(|e| format!("cannot enter the repository: {e}"));
    match in_root.and_then(|()| dispatch(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("\nxtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(args: &[String]) -> Result {
    let (cmd, rest) = args.split_first().map(|(c, r)| (c.as_str(), r)).unwrap_or(("help", &[]));
    let no_args = || if rest.is_empty() { Ok(()) } else { Err(format!("`{cmd}` takes no arguments\n\n{USAGE}")) };
    match cmd {
        "test" => steps::test(rest),
        "gates" => no_args().and_then(|()| steps::gates()),
        "build" => no_args().and_then(|()| install::toolchain()).and_then(|()| project::build_package()),
        "docs" => no_args().and_then(|()| install::toolchain()).and_then(|()| project::build_api_docs()).map(|_| ()),
        "install" => no_args().and_then(|()| steps::install_all()),
        "size" => no_args().and_then(|()| size::check()),
        "demo" => demo::demo(parse_port(rest)?),
        "bench" => no_args()
            .and_then(|()| steps::install_all())
            .and_then(|()| process::run(process::cmd("bash").arg(project::root().join("benches/run.sh")))),
        "help" | "-h" | "--help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command `{other}`\n\n{USAGE}")),
    }
}

fn parse_port(rest: &[String]) -> Result<u16> {
    let value = match rest {
        [] => return Ok(8080),
        [flag, v] if flag == "--port" => v.as_str(),
        [arg] if arg.starts_with("--port=") => &arg["--port=".len()..],
        _ => return Err(format!("demo takes only --port N\n\n{USAGE}")),
    };
    value.parse().map_err(|_| format!("bad port `{value}`"))
}
