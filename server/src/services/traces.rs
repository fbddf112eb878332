//! The trace receiver: an OpenTelemetry collector endpoint for the demo and its tests. `POST /v1/traces`
//! takes OTLP/HTTP export requests with JSON bodies (the reference server's exporter and the demo page's
//! send JSON; a protobuf body is answered 415), and keeps the spans of the last [`MAX_TRACES`] traces in
//! memory, in a process of its own, so a trace outlives the crashes and restarts of the server it shows.
//! `GET /traces/{trace_id}` answers one trace's spans, flattened and ordered by their start: what the demo
//! page draws as a timeline. Every answer allows any origin (CORS): the page that exports to it and reads
//! it is served from the reference server's origin. A demo and test tool, not a collector to run: it
//! forwards nothing and forgets everything when it stops.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use serde_json::{Map, Value};
use tower_http::cors::CorsLayer;

use super::RunningService;
use crate::problem::Problem;

/// The OTLP/HTTP path of trace exports.
pub const EXPORT_PATH: &str = "/v1/traces";
/// The traces kept: a new trace beyond them forgets the one that arrived first.
pub const MAX_TRACES: usize = 64;
/// The spans kept per trace: more of one trace are dropped (and counted in the export's answer).
pub const MAX_SPANS_PER_TRACE: usize = 2_000;

/// One span as `GET /traces/{trace_id}` answers it: OTLP's fields, its attributes as a plain JSON object
/// and its times in milliseconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReceivedSpan {
    /// The `service.name` of the resource that exported it.
    pub service: String,
    /// The span's name.
    pub name: String,
    /// OTLP's span kind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer (0 unspecified).
    pub kind: i64,
    /// 32 hex digits.
    pub trace_id: String,
    /// 16 hex digits.
    pub span_id: String,
    /// The parent's span id; `None` for a trace's root.
    pub parent_span_id: Option<String>,
    /// Start, in milliseconds since the Unix epoch.
    pub start_ms: f64,
    /// End, in milliseconds since the Unix epoch.
    pub end_ms: f64,
    /// The attributes, each as a JSON string, number, boolean or array.
    pub attributes: Map<String, Value>,
    /// The span events: `{ name, timeMs, attributes }`.
    pub events: Vec<Value>,
    /// OTLP's status code: 0 unset, 1 ok, 2 error.
    pub status_code: i64,
}

/// The traces received, oldest first.
#[derive(Debug, Default)]
struct Traces {
    order: VecDeque<String>,
    spans: HashMap<String, Vec<ReceivedSpan>>,
}

impl Traces {
    /// Keeps `span`; false if its trace is full.
    fn keep(&mut self, span: ReceivedSpan) -> bool {
        let trace_id = span.trace_id.clone();
        if !self.spans.contains_key(&trace_id) {
            if self.order.len() == MAX_TRACES {
                if let Some(oldest) = self.order.pop_front() {
                    self.spans.remove(&oldest);
                }
            }
            self.order.push_back(trace_id.clone());
        }
        let spans = self.spans.entry(trace_id).or_default();
        if spans.len() == MAX_SPANS_PER_TRACE {
            return false;
        }
        spans.push(span);
        true
    }
}

#[derive(Debug, Clone, Default)]
struct Receiver(Arc<Mutex<Traces>>);

impl Receiver {
    fn lock(&self) -> MutexGuard<'_, Traces> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Serves the receiver on `addr`.
pub async fn start(addr: SocketAddr) -> Result<RunningService, crate::ServeError> {
    let app = Router::new()
        .route(EXPORT_PATH, post(export))
        .route("/traces/{trace_id}", get(trace))
        .route("/health", get(|| async { Json(serde_json::json!({ "status": "ok" })) }))
        .layer(CorsLayer::permissive())
        .with_state(Receiver::default());
    Ok(RunningService::start(addr, app).await?)
}

/// `POST /v1/traces`: an `ExportTraceServiceRequest` in OTLP's JSON encoding; answers its
/// `ExportTraceServiceResponse` (with `partialSuccess` when spans were refused).
async fn export(State(receiver): State<Receiver>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json")));
    if !json {
        return Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
            "Unsupported media type",
            "This receiver takes OTLP/HTTP with JSON bodies (content-type: application/json) only.",
        )
        .into_response();
    }
    let request: Value = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => {
            return Problem::bad_request("invalid-export", format!("Not an OTLP JSON export request: {e}."))
                .into_response()
        }
    };
    let (spans, invalid) = flatten(&request);
    let mut refused = invalid;
    {
        let mut traces = receiver.lock();
        for span in spans {
            if !traces.keep(span) {
                refused += 1;
            }
        }
    }
    let answer = if refused == 0 {
        serde_json::json!({})
    } else {
        serde_json::json!({ "partialSuccess": { "rejectedSpans": refused.to_string(), "errorMessage": "spans without ids, or beyond the receiver's limits" } })
    };
    Json(answer).into_response()
}

/// `GET /traces/{trace_id}`: `{ traceId, spans }`, the spans by start time; 404 for a trace not kept.
async fn trace(State(receiver): State<Receiver>, Path(trace_id): Path<String>) -> Response {
    let trace_id = trace_id.to_ascii_lowercase();
    let spans = receiver.lock().spans.get(&trace_id).cloned();
    match spans {
        Some(mut spans) => {
            spans.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
            Json(serde_json::json!({ "traceId": trace_id, "spans": spans })).into_response()
        }
        None => Problem::new(
            StatusCode::NOT_FOUND,
            "trace-not-found",
            "Trace not found",
            "No span of this trace was received (or it was forgotten for newer ones).",
        )
        .into_response(),
    }
}

/// Every span of an export request, and how many spans had no valid ids.
pub fn flatten(request: &Value) -> (Vec<ReceivedSpan>, usize) {
    let mut spans = Vec::new();
    let mut invalid = 0;
    for resource in array(request, "resourceSpans") {
        let resource_attributes = attributes(resource.get("resource").unwrap_or(&Value::Null));
        let service = resource_attributes.get("service.name").and_then(Value::as_str).unwrap_or("unknown_service");
        for scope in array(resource, "scopeSpans") {
            for span in array(scope, "spans") {
                match received(service, span) {
                    Some(span) => spans.push(span),
                    None => invalid += 1,
                }
            }
        }
    }
    (spans, invalid)
}

fn received(service: &str, span: &Value) -> Option<ReceivedSpan> {
    let trace_id = hex_id(span.get("traceId"), 32)?;
    let span_id = hex_id(span.get("spanId"), 16)?;
    let events = array(span, "events")
        .map(|event| {
            serde_json::json!({
                "name": event.get("name").and_then(Value::as_str).unwrap_or(""),
                "timeMs": millis(event.get("timeUnixNano")),
                "attributes": attributes(event),
            })
        })
        .collect();
    Some(ReceivedSpan {
        service: service.to_owned(),
        name: span.get("name").and_then(Value::as_str).unwrap_or("").to_owned(),
        kind: integer(span.get("kind")).unwrap_or(0),
        trace_id,
        span_id,
        parent_span_id: hex_id(span.get("parentSpanId"), 16),
        start_ms: millis(span.get("startTimeUnixNano")),
        end_ms: millis(span.get("endTimeUnixNano")),
        attributes: attributes(span),
        events,
        status_code: span.get("status").and_then(|s| integer(s.get("code"))).unwrap_or(0),
    })
}

/// The elements of the array `field` of `value` (none when missing).
fn array<'a>(value: &'a Value, field: &str) -> impl Iterator<Item = &'a Value> {
    value.get(field).and_then(Value::as_array).into_iter().flatten()
}

/// An id in OTLP JSON's hex form, lower-cased; `None` when absent, empty, all zeros or not `len` hex digits.
fn hex_id(value: Option<&Value>, len: usize) -> Option<String> {
    let id = value?.as_str()?.to_ascii_lowercase();
    let valid = id.len() == len && id.bytes().all(|b| b.is_ascii_hexdigit()) && id.bytes().any(|b| b != b'0');
    valid.then_some(id)
}

/// An integer that OTLP JSON writes as a number or, for 64-bit fields, as a decimal string.
fn integer(value: Option<&Value>) -> Option<i64> {
    match value? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// A `*UnixNano` field in milliseconds (0 when missing); whole milliseconds and the rest are converted
/// apart, so a time in nanoseconds since 1970 (beyond f64's exact integers) keeps its milliseconds exact.
fn millis(value: Option<&Value>) -> f64 {
    let nanos = match value {
        Some(Value::Number(n)) => n.as_u64().or_else(|| n.as_f64().map(|f| f as u64)),
        Some(Value::String(s)) => s.parse::<u64>().ok(),
        _ => None,
    };
    nanos.map_or(0.0, |n| (n / 1_000_000) as f64 + (n % 1_000_000) as f64 / 1e6)
}

/// The `attributes` of `value` (a list of OTLP `KeyValue`s) as a plain JSON object.
fn attributes(value: &Value) -> Map<String, Value> {
    array(value, "attributes")
        .filter_map(|kv| Some((kv.get("key")?.as_str()?.to_owned(), plain(kv.get("value")?))))
        .collect()
}

/// An OTLP `AnyValue` as plain JSON.
fn plain(value: &Value) -> Value {
    if let Some(s) = value.get("stringValue") {
        return s.clone();
    }
    if let Some(b) = value.get("boolValue") {
        return b.clone();
    }
    if let Some(i) = value.get("intValue") {
        return integer(Some(i)).map_or(Value::Null, Value::from);
    }
    if let Some(d) = value.get("doubleValue") {
        return d.clone();
    }
    if let Some(values) = value.get("arrayValue") {
        return Value::Array(array(values, "values").map(plain).collect());
    }
    if let Some(values) = value.get("kvlistValue") {
        return Value::Object(attributes(&serde_json::json!({ "attributes": values.get("values") })));
    }
    value.get("bytesValue").cloned().unwrap_or(Value::Null)
}
