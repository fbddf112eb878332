//! `idempotent-fetch-server`: see `--help` and the README.

use std::process::ExitCode;

use clap::Parser;
use idempotent_fetch_server::binary::{init_tracing_exporting, print_listening, shutdown_signal, SERVER_SERVICE_NAME};
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
    #[cfg(feature = "otel")]
    if let Some(export) = export {
        // The last spans, sent before the process ends (the export blocks on the runtime's other threads).
        if let Ok(Err(error)) = tokio::task::spawn_blocking(move || export.shutdown()).await {
            eprintln!("idempotent-fetch-server: {error}");
        }
    }
    #[cfg(not(feature = "otel"))]
    let _ = export;
    match stopped {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("idempotent-fetch-server: {error}");
            ExitCode::FAILURE
        }
    }
}
