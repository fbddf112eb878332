//! `idempotent-fetch-server`: see `--help` and the README.

use std::process::ExitCode;

use clap::Parser;
use idempotent_fetch_server::binary::{init_tracing, print_listening, shutdown_signal};
use idempotent_fetch_server::{serve, Cli, Config};

#[tokio::main]
async fn main() -> ExitCode {
    init_tracing();
    let cli = Cli::parse();
    let server = match serve(Config::from(cli)).await {
        Ok(server) => server,
        Err(error) => {
            eprintln!("idempotent-fetch-server: {error}");
            return ExitCode::FAILURE;
        }
    };
    print_listening(&server.url());

    let stop = server.shutdown_handle();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down");
        let _ = stop.send(true);
    });
    match server.wait().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("idempotent-fetch-server: {error}");
            ExitCode::FAILURE
        }
    }
}
