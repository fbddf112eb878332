//! `idempotent-fetch-server`: see `--help` and the README.

use std::process::ExitCode;

use clap::Parser;
use idempotent_fetch_server::binary::{
    init_tracing_exporting, print_listening, shutdown_signal, stop_export, SERVER_SERVICE_NAME,
};
use idempotent_fetch_server::{serve, Cli, Config};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let export = match init_tracing_exporting(cli.otlp_endpoint.as_deref(), SERVER_SERVICE_NAME) {
        Ok(export) => export,
        Err(error) => {
            eprintln!("idempotent-fetch-server: {error}");
            return ExitCode::FAILURE;
        }
    };
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
    let stopped = server.wait().await;
    // The last spans, sent before the process ends.
    stop_export("idempotent-fetch-server", export).await;
    match stopped {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("idempotent-fetch-server: {error}");
            ExitCode::FAILURE
        }
    }
}
