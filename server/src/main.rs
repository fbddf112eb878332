//! `idempotent-fetch-server`: see `--help` and the README.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::Parser;
use idempotent_fetch_server::{serve, Cli, Config};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .init();
    let cli = Cli::parse();
    let server = match serve(Config::from(cli)).await {
        Ok(server) => server,
        Err(error) => {
            eprintln!("idempotent-fetch-server: {error}");
            return ExitCode::FAILURE;
        }
    };
    // Exactly one line on stdout, flushed, so harnesses can read the real port.
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "listening on {}", server.url());
    let _ = stdout.flush();
    drop(stdout);

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

/// Resolves on Ctrl-C or (on Unix) SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
