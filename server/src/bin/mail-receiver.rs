//! `mail-receiver`: the mail receiver the reference server's outbox delivers to (see
//! `idempotent_fetch_server::services::mailbox`). Prints one `listening on URL` line on stdout.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;

/// Flags of `mail-receiver`.
#[derive(Debug, Parser)]
#[command(name = "mail-receiver", version, about = "A mail receiver that stores each message once by its id")]
struct Cli {
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:8082")]
    addr: SocketAddr,
    /// SQLite file of the messages (`:memory:` for a throwaway one).
    #[arg(long, default_value = "mail-receiver.sqlite")]
    db: String,
    /// `GET/PUT /faults` (503 outages). Tests and demos only.
    #[arg(long)]
    enable_faults: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    idempotent_fetch_server::binary::init_tracing();
    let cli = Cli::parse();
    match idempotent_fetch_server::services::mailbox::start(cli.addr, &cli.db, cli.enable_faults).await {
        Ok(service) => idempotent_fetch_server::binary::run_until_signal("mail-receiver", service).await,
        Err(error) => {
            eprintln!("mail-receiver: {error}");
            ExitCode::FAILURE
        }
    }
}
