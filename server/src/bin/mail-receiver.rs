//! `mail-receiver`: the mail receiver the reference server's outbox delivers to (see
//! `idempotent_fetch_server::services::mailbox`). Prints one `listening on URL` line on stdout.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use idempotent_fetch_server::binary;

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
    /// Export the spans (each delivery's `inbox.receive`, continuing the sender's `traceparent`) over
    /// OTLP/HTTP (JSON) to this collector, e.g. `http://127.0.0.1:4318`. Only in a build with the `otel`
    /// feature; without the flag nothing is exported.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    otlp_endpoint: Option<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let export = match binary::init_tracing_exporting(cli.otlp_endpoint.as_deref(), binary::MAIL_RECEIVER_SERVICE_NAME)
    {
        Ok(export) => export,
        Err(error) => {
            eprintln!("mail-receiver: {error}");
            return ExitCode::FAILURE;
        }
    };
    let code = match idempotent_fetch_server::services::mailbox::start(cli.addr, &cli.db, cli.enable_faults).await {
        Ok(service) => binary::run_until_signal("mail-receiver", service).await,
        Err(error) => {
            eprintln!("mail-receiver: {error}");
            ExitCode::FAILURE
        }
    };
    // The last spans, sent before the process ends.
    binary::stop_export("mail-receiver", export).await;
    code
}
