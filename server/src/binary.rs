//! What every binary of the workspace shares: logging to stderr, one `listening on URL` line on stdout,
//! and stopping on Ctrl-C or SIGTERM.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

use crate::services::RunningService;

/// The `service.name` of the server's exported spans.
pub const SERVER_SERVICE_NAME: &str = "idempotent-fetch-server";
/// The `service.name` of the mail receiver's exported spans.
pub const MAIL_RECEIVER_SERVICE_NAME: &str = "mail-receiver";
/// The `service.name` of the payment provider's exported spans.
pub const PROVIDER_SERVICE_NAME: &str = "payment-provider";

/// Logs to stderr, filtered by `RUST_LOG` (default `info`).
pub fn init_tracing() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .init();
}

/// [`init_tracing`], and with `otlp_endpoint` the spans exported there too as the service `service` (a
/// build with the `otel` feature); stop the returned export with [`stop_export`] before exiting. Call it
/// inside the tokio runtime. `RUST_LOG` filters the log only: every span at `info` and above is exported
/// whatever it says.
#[cfg(feature = "otel")]
pub fn init_tracing_exporting(
    otlp_endpoint: Option<&str>,
    service: &'static str,
) -> Result<Option<crate::otel::Export>, crate::ServeError> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let Some(endpoint) = otlp_endpoint else {
        init_tracing();
        return Ok(None);
    };
    use tracing_subscriber::Layer;
    let (otlp, export) = crate::otel::layer(endpoint, service)?;
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")));
    tracing_subscriber::registry()
        .with(log)
        .with(otlp.with_filter(tracing_subscriber::filter::LevelFilter::INFO))
        .init();
    Ok(Some(export))
}

/// [`init_tracing`]; a build without the `otel` feature exports nothing, and says so if asked to.
#[cfg(not(feature = "otel"))]
pub fn init_tracing_exporting(
    otlp_endpoint: Option<&str>,
    _service: &'static str,
) -> Result<Option<std::convert::Infallible>, crate::ServeError> {
    init_tracing();
    if otlp_endpoint.is_some() {
        tracing::warn!("--otlp-endpoint ignored: this build has no `otel` feature");
    }
    Ok(None)
}

/// Sends the last spans of the binary `name` and stops the export (the export blocks on the runtime's
/// other threads, so it runs on the blocking pool); an error is printed.
#[cfg(feature = "otel")]
pub async fn stop_export(name: &str, export: Option<crate::otel::Export>) {
    if let Some(export) = export {
        if let Ok(Err(error)) = tokio::task::spawn_blocking(move || export.shutdown()).await {
            eprintln!("{name}: {error}");
        }
    }
}

/// Nothing is exported without the `otel` feature.
#[cfg(not(feature = "otel"))]
pub async fn stop_export(_name: &str, _export: Option<std::convert::Infallible>) {}

/// Prints exactly one `listening on URL` line on stdout, flushed, so harnesses can read the real port.
pub fn print_listening(url: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "listening on {url}");
    let _ = stdout.flush();
}

/// Serves `service` until Ctrl-C or SIGTERM, then stops it gracefully.
pub async fn run_until_signal(name: &str, service: RunningService) -> ExitCode {
    print_listening(&service.url());
    shutdown_signal().await;
    tracing::info!("shutting down");
    match service.shutdown().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{name}: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Resolves on Ctrl-C or (on Unix) SIGTERM.
pub async fn shutdown_signal() {
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
