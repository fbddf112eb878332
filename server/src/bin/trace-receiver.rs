//! `trace-receiver`: the OTLP/HTTP (JSON) trace receiver the demo exports to and draws its timelines from
//! (see `idempotent_fetch_server::services::traces`). Prints one `listening on URL` line on stdout.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;

/// Flags of `trace-receiver`.
#[derive(Debug, Parser)]
#[command(name = "trace-receiver", version, about = "Keeps the last traces exported to it over OTLP/HTTP (JSON)")]
struct Cli {
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:4318")]
    addr: SocketAddr,
}

#[tokio::main]
async fn main() -> ExitCode {
    idempotent_fetch_server::binary::init_tracing();
    let cli = Cli::parse();
    match idempotent_fetch_server::services::traces::start(cli.addr).await {
        Ok(service) => idempotent_fetch_server::binary::run_until_signal("trace-receiver", service).await,
        Err(error) => {
            eprintln!("trace-receiver: {error}");
            ExitCode::FAILURE
        }
    }
}
