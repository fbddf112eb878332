//! `payment-provider`: the payment provider the reference server charges (see
//! `idempotent_fetch_server::services::provider`). Prints one `listening on URL` line on stdout.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;

/// Flags of `payment-provider`.
#[derive(Debug, Parser)]
#[command(name = "payment-provider", version, about = "A payment provider speaking the Idempotency-Key protocol")]
struct Cli {
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:8081")]
    addr: SocketAddr,
    /// SQLite file of the charges (`:memory:` for a throwaway one).
    #[arg(long, default_value = "payment-provider.sqlite")]
    db: String,
    /// `GET/PUT /faults` (503 before charging, dropped answers after, latency). Tests and demos only.
    #[arg(long)]
    enable_faults: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    idempotent_fetch_server::binary::init_tracing();
    let cli = Cli::parse();
    match idempotent_fetch_server::services::provider::start(cli.addr, &cli.db, cli.enable_faults).await {
        Ok(service) => idempotent_fetch_server::binary::run_until_signal("payment-provider", service).await,
        Err(error) => {
            eprintln!("payment-provider: {error}");
            ExitCode::FAILURE
        }
    }
}
