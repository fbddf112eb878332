//! OTLP export of the server's spans (feature `otel`): the `tracing` spans go through
//! `tracing-opentelemetry` to an OpenTelemetry SDK tracer whose batch exporter posts OTLP/HTTP with JSON
//! bodies to `ENDPOINT/v1/traces` (`--otlp-endpoint`, or `OTEL_EXPORTER_OTLP_ENDPOINT`, as the OpenTelemetry
//! convention names it). The W3C trace-context propagator is installed, so a request's `traceparent` is
//! continued ([`crate::telemetry`]).

use std::time::Duration;

use axum::http::{Request, Response};
use bytes::Bytes;
use opentelemetry::trace::TracerProvider;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing_opentelemetry::OpenTelemetryLayer;
use tracing_subscriber::registry::LookupSpan;

use crate::error::ServeError;

/// The longest an export request may take.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The running export: flush it before the process ends ([`Export::shutdown`]). Clones share it.
#[derive(Debug, Clone)]
pub struct Export {
    provider: SdkTracerProvider,
}

impl Export {
    /// Sends every finished span not sent yet; blocks until the collector answered (call it from
    /// `spawn_blocking` in async code: the export itself runs on the tokio runtime).
    pub fn flush(&self) -> Result<(), ServeError> {
        self.provider.force_flush().map_err(|e| ServeError::Config(format!("OTLP export: {e}")))
    }

    /// Flushes and stops the exporter (blocking, like [`Export::flush`]).
    pub fn shutdown(self) -> Result<(), ServeError> {
        self.provider.shutdown().map_err(|e| ServeError::Config(format!("OTLP export: {e}")))
    }
}

/// The layer that exports spans to the OTLP/HTTP collector at `endpoint` (`http://host:4318`) as the
/// service `service_name`, and its [`Export`]. Call it inside a tokio runtime: the exporter's requests run
/// on it.
pub fn layer<S>(
    endpoint: &str,
    service_name: &'static str,
) -> Result<(OpenTelemetryLayer<S, SdkTracer>, Export), ServeError>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|_| ServeError::Config("the OTLP exporter needs a tokio runtime".to_owned()))?;
    let http = reqwest::Client::builder()
        .timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| ServeError::Config(format!("OTLP HTTP client: {e}")))?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpJson)
        .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
        .with_http_client(TokioHttp { http, runtime })
        .build()
        .map_err(|e| ServeError::Config(format!("OTLP exporter: {e}")))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().with_service_name(service_name).build())
        .build();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer(service_name));
    Ok((layer, Export { provider }))
}

/// The exporter's HTTP client: this crate's reqwest, each request spawned on the tokio runtime the
/// exporter was made in (the SDK's batch processor exports from a thread of its own, outside it).
#[derive(Debug, Clone)]
struct TokioHttp {
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for TokioHttp {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, opentelemetry_http::HttpError> {
        let http = self.http.clone();
        let sent = self.runtime.spawn(async move {
            let (parts, body) = request.into_parts();
            let response =
                http.request(parts.method, parts.uri.to_string()).headers(parts.headers).body(body).send().await?;
            let (status, headers) = (response.status(), response.headers().clone());
            let mut answer = Response::new(response.bytes().await?);
            *answer.status_mut() = status;
            *answer.headers_mut() = headers;
            Ok::<_, reqwest::Error>(answer)
        });
        Ok(sent.await??)
    }
}
