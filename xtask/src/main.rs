//! Project automation: `cargo xtask <command>`. Plain std, no dependencies. See xtask/README.md.

mod demo;
mod engines;
mod install;
mod process;
mod size;
mod test;

use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  test [LAYER...]       install missing tools, then run every test layer (what CI runs);
                        with letters (e.g. `test e f`) only those layers
  demo [--port 8080]    build pkg/web if stale and run the reference server on 127.0.0.1
  install               only install/check the tools (rust target, wasm-bindgen-cli, wasm-pack,
                        npm tools, chromium + chromedriver, postgresql)
  size                  gzip/brotli size of pkg/web (js glue + wasm)
  bench                 run benchmarks (benches/run.sh) if there are any
  help                  this text";

fn main() -> ExitCode {
    // Variables `cargo run` sets for xtask itself must not leak into the cargo/wasm-pack children.
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("CARGO_PKG_")
            || matches!(
                &*k,
                "CARGO_MANIFEST_DIR"
                    | "CARGO_MANIFEST_PATH"
                    | "CARGO_CRATE_NAME"
                    | "CARGO_BIN_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
            )
        {
            std::env::remove_var(&*k);
        }
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    match dispatch(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!();
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(args: &[String]) -> process::Result {
    let cmd = args.first().map(String::as_str).unwrap_or("help");
    let rest = &args[args.len().min(1)..];
    match cmd {
        "test" => test::test(rest),
        "install" => {
            no_args(cmd, rest)?;
            install::all()
        }
        "size" => {
            no_args(cmd, rest)?;
            size::report()
        }
        "demo" => demo::demo(parse_port(rest)?),
        "bench" => {
            no_args(cmd, rest)?;
            bench()
        }
        "help" | "-h" | "--help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command `{other}`\n\n{USAGE}")),
    }
}

fn no_args(cmd: &str, rest: &[String]) -> process::Result {
    if rest.is_empty() {
        Ok(())
    } else {
        Err(format!("`{cmd}` takes no arguments, got {rest:?}\n\n{USAGE}"))
    }
}

fn parse_port(rest: &[String]) -> process::Result<u16> {
    let mut port = 8080;
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        let v = if a == "--port" {
            it.next().ok_or("--port needs a value")?.clone()
        } else if let Some(v) = a.strip_prefix("--port=") {
            v.to_string()
        } else {
            return Err(format!("unknown argument `{a}` for demo\n\n{USAGE}"));
        };
        port = v.parse().map_err(|_| format!("bad port `{v}`"))?;
    }
    Ok(port)
}

fn bench() -> process::Result {
    let root = process::root();
    let script = root.join("benches/run.sh");
    if script.exists() {
        install::toolchain()?;
        process::run(process::cmd("bash").arg(script))
    } else if root.join("benches").exists() {
        println!("benches/ exists but has no run.sh: nothing to run");
        Ok(())
    } else {
        println!("no benchmarks yet");
        Ok(())
    }
}
