//! The `otel` feature through the real exporter: the server's spans go over OTLP/HTTP (JSON) to a collector
//! this test runs on 127.0.0.1, and a request sent with a W3C `traceparent` finds its server span, its
//! phases and its provider call under that trace id, with hashes of the key and of the derived key, never
//! the keys. The order flow runs against the real payment provider and mail receiver binaries.
#![cfg(feature = "otel")]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::post;
use axum::Router;
use common::checkout::Downstream;
use common::processes::Process;
use common::{post_to, MUGS, SECRET};
use idempotent_fetch_server::{serve, Config};
use serde_json::Value;
use tracing_subscriber::layer::SubscriberExt;

/// An OTLP/HTTP collector: keeps every JSON body posted to `/v1/traces`.
struct Collector {
    url: String,
    exports: Arc<Mutex<Vec<Value>>>,
}

impl Collector {
    async fn start() -> Collector {
        let exports = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&exports);
        let app = Router::new().route(
            "/v1/traces",
            post(move |body: axum::body::Bytes| {
                let kept = Arc::clone(&kept);
                async move {
                    let export: Value = serde_json::from_slice(&body).expect("an OTLP JSON export");
                    kept.lock().expect("exports").push(export);
                    ([("content-type", "application/json")], "{}")
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await.expect("collector") });
        Collector { url, exports }
    }

    /// Every span received so far, flattened out of its resource and scope.
    fn spans(&self) -> Vec<Value> {
        let exports = self.exports.lock().expect("exports");
        let mut spans = Vec::new();
        for export in exports.iter() {
            for resource in export["resourceSpans"].as_array().into_iter().flatten() {
                for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
                    spans.extend(scope["spans"].as_array().into_iter().flatten().cloned());
                }
            }
        }
        spans
    }

    /// The whole of every export, as text.
    fn text(&self) -> String {
        self.exports.lock().expect("exports").iter().map(Value::to_string).collect()
    }
}

/// The value of `span`'s attribute `key`, as text (string or integer values).
fn attribute(span: &Value, key: &str) -> Option<String> {
    let value = &span["attributes"].as_array()?.iter().find(|a| a["key"] == key)?["value"];
    value["stringValue"].as_str().map(str::to_owned).or_else(|| match &value["intValue"] {
        Value::String(n) => Some(n.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    })
}

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";
const REPLAY_TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";
const BINARY_TRACE_ID: &str = "5b8aa5a2d2c872e8321cf37308d69df2";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_requests_spans_continue_its_traceparent_through_the_otlp_exporter() {
    let collector = Collector::start().await;
    let (layer, export) =
        idempotent_fetch_server::otel::layer(&collector.url, idempotent_fetch_server::binary::SERVER_SERVICE_NAME)
            .expect("exporter");
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).expect("the only subscriber");

    let downstream = Downstream::start();
    let server = serve(Config {
        session_secret: Some(SECRET.to_owned()),
        checkout: Some(downstream.config()),
        ..Config::sqlite(":memory:")
    })
    .await
    .expect("server");
    let client = reqwest::Client::new();
    let key = "otel-trace-key-0001";
    let traceparent = format!("00-{TRACE_ID}-{PARENT_ID}-01");
    let created = post_to(&client, &server.url(), Some(key), MUGS, &[("traceparent", &traceparent)]).await;
    assert_eq!(created.expect("post").status(), 201);
    let replay_parent = format!("00-{REPLAY_TRACE_ID}-{PARENT_ID}-01");
    let replayed = post_to(&client, &server.url(), Some(key), MUGS, &[("traceparent", &replay_parent)]).await;
    assert_eq!(replayed.expect("post").status(), 201);

    let charges = downstream.charges().await;
    let derived = charges.first().and_then(|c| c["idempotencyKey"].as_str()).expect("one charge").to_owned();
    let key_hash = idempotent_endpoint::key_hash(key);
    let derived_hash = idempotent_endpoint::key_hash(&derived);

    // The batch exporter sends on its own schedule; a flush sends now.
    let mut spans = Vec::new();
    for _ in 0..50 {
        let flushing = export.clone();
        tokio::task::spawn_blocking(move || flushing.flush()).await.expect("join").expect("flush");
        spans = collector.spans();
        let server_span = spans.iter().any(|s| s["traceId"] == TRACE_ID && s["name"] == "POST /api/orders");
        let replay_span = spans.iter().any(|s| s["traceId"] == REPLAY_TRACE_ID);
        if server_span && replay_span {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let in_trace: Vec<&Value> = spans.iter().filter(|s| s["traceId"] == TRACE_ID).collect();
    let request = in_trace.iter().find(|s| s["name"] == "POST /api/orders").expect("the server span in the trace");
    assert_eq!(request["parentSpanId"], PARENT_ID, "a child of the client's span: {request}");
    assert_eq!(request["kind"], 2, "SPAN_KIND_SERVER: {request}");
    assert_eq!(attribute(request, "http.request.method").as_deref(), Some("POST"));
    assert_eq!(attribute(request, "http.route").as_deref(), Some("/api/orders"));
    assert_eq!(attribute(request, "http.response.status_code").as_deref(), Some("201"));
    assert_eq!(attribute(request, "idempotency.decision").as_deref(), Some("fresh"));
    assert_eq!(attribute(request, "idempotency.key_hash").as_deref(), Some(key_hash.as_str()));

    let phases: Vec<String> = in_trace
        .iter()
        .filter(|s| s["name"] == "idempotency.phase")
        .filter_map(|s| attribute(s, "idempotency.phase"))
        .collect();
    for phase in ["begin", "charge_started", "charged", "finished"] {
        assert!(phases.iter().any(|p| p == phase), "phase {phase} in the trace: {phases:?}");
    }
    let call = in_trace.iter().find(|s| s["name"] == "POST" && s["kind"] == 3).expect("the provider call (CLIENT)");
    assert_eq!(attribute(call, "idempotency.derived_key_hash").as_deref(), Some(derived_hash.as_str()));
    assert_eq!(attribute(call, "http.response.status_code").as_deref(), Some("201"));

    let replay = spans
        .iter()
        .find(|s| s["traceId"] == REPLAY_TRACE_ID && s["name"] == "POST /api/orders")
        .expect("the replay's server span in its own trace");
    assert_eq!(attribute(replay, "idempotency.decision").as_deref(), Some("replay"));

    let everything = collector.text();
    assert!(!everything.contains(key), "a key in the export");
    assert!(!everything.contains(&derived), "a derived key in the export");
    server.shutdown().await.expect("shutdown");
    tokio::task::spawn_blocking(move || export.shutdown()).await.expect("join").expect("exporter shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_exports_to_its_otlp_endpoint_and_sends_the_last_spans_when_stopped() {
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("binary.sqlite").to_string_lossy().into_owned();
    let args = ["--db", db.as_str(), "--session-secret", SECRET, "--otlp-endpoint", collector.url.as_str()];
    let mut server = Process::start(env!("CARGO_BIN_EXE_idempotent-fetch-server"), &args);
    let traceparent = format!("00-{BINARY_TRACE_ID}-{PARENT_ID}-01");
    let client = reqwest::Client::new();
    let created = post_to(&client, &server.url, Some("otel-binary-key"), MUGS, &[("traceparent", &traceparent)]).await;
    assert_eq!(created.expect("post").status(), 201);

    // Stopped well before the batch exporter's own schedule would send: the shutdown must flush.
    let stopped = std::process::Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(stopped.success());
    let exit = server.wait_exit(Duration::from_secs(15)).expect("the server exits");
    assert!(exit.success(), "{exit:?}");
    let spans = collector.spans();
    let request = spans
        .iter()
        .find(|s| s["traceId"] == BINARY_TRACE_ID && s["name"] == "POST /api/orders")
        .unwrap_or_else(|| panic!("the server span, exported by the exiting binary: {spans:?}"));
    assert_eq!(request["parentSpanId"], PARENT_ID);
    assert!(spans.iter().any(|s| s["traceId"] == BINARY_TRACE_ID && s["name"] == "idempotency.transaction"));
}
