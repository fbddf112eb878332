//! The demo's trace receiver (`services::traces`): an OTLP/HTTP export with a JSON body is kept per trace
//! and answered back flattened (attributes as plain values, times in milliseconds, spans by start); the
//! encodings of both exporters the demo uses are read (64-bit integers as strings or as numbers); a
//! protobuf body is 415; the oldest trace is forgotten beyond the limit; any origin may read it (CORS).

use idempotent_fetch_server::services::traces::{self, EXPORT_PATH, MAX_TRACES};
use reqwest::Client;
use serde_json::{json, Value};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

fn span(trace_id: &str, span_id: &str, parent: &str, name: &str, start_nanos: Value) -> Value {
    json!({
        "traceId": trace_id, "spanId": span_id, "parentSpanId": parent, "name": name, "kind": 3,
        "startTimeUnixNano": start_nanos, "endTimeUnixNano": "1700000000250000000",
        "attributes": [
            { "key": "http.request.resend_count", "value": { "intValue": "2" } },
            { "key": "http.response.status_code", "value": { "intValue": 503 } },
            { "key": "idempotent_fetch.replayed", "value": { "boolValue": false } },
            { "key": "url.full", "value": { "stringValue": "http://127.0.0.1/api/orders" } },
        ],
        "events": [{ "name": "idempotent_fetch.retry", "timeUnixNano": "1700000000200000000",
            "attributes": [{ "key": "reason", "value": { "stringValue": "status-503" } }] }],
        "status": { "code": 2 },
    })
}

fn export(service: &str, spans: Vec<Value>) -> Value {
    json!({ "resourceSpans": [{
        "resource": { "attributes": [{ "key": "service.name", "value": { "stringValue": service } }] },
        "scopeSpans": [{ "scope": { "name": "test" }, "spans": spans }],
    }] })
}

async fn post(client: &Client, url: &str, body: &Value) -> reqwest::Response {
    client.post(format!("{url}{EXPORT_PATH}")).json(body).send().await.expect("export")
}

#[tokio::test]
async fn an_export_is_kept_per_trace_and_answered_back_flat() {
    let receiver = traces::start("127.0.0.1:0".parse().expect("addr")).await.expect("receiver");
    let url = receiver.url();
    let client = Client::new();

    // Two exports of one trace from two services, the later-starting span first.
    let later = span(TRACE, "00f067aa0ba902b7", "", "idempotent-fetch intent", json!("1700000000100000000"));
    assert_eq!(post(&client, &url, &export("page", vec![later])).await.status(), 200);
    let earlier = span(TRACE, "b7ad6b7169203331", "00f067aa0ba902b7", "POST", json!(1_700_000_000_000_000_000u64));
    let other = span("0af7651916cd43dd8448eb211c80319c", "b9c7c989f97918e1", "", "other", json!("1"));
    let answer = post(&client, &url, &export("server", vec![earlier, other])).await;
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.json::<Value>().await.expect("json"), json!({}));

    let trace = client.get(format!("{url}/traces/{}", TRACE.to_uppercase())).send().await.expect("get");
    assert_eq!(trace.status(), 200);
    let trace: Value = trace.json().await.expect("json");
    assert_eq!(trace["traceId"], TRACE);
    let spans = trace["spans"].as_array().expect("spans");
    assert_eq!(spans.len(), 2, "{trace}");
    let [first, second] = [&spans[0], &spans[1]];
    assert_eq!([&first["name"], &first["service"]], [&json!("POST"), &json!("server")], "by start time");
    assert_eq!(first["parentSpanId"], "00f067aa0ba902b7");
    assert_eq!(second["parentSpanId"], Value::Null, "an empty parent is a root");
    assert_eq!(first["startMs"], json!(1_700_000_000_000.0));
    assert_eq!(first["endMs"], json!(1_700_000_000_250.0));
    assert_eq!(
        first["attributes"],
        json!({ "http.request.resend_count": 2, "http.response.status_code": 503, "idempotent_fetch.replayed": false,
            "url.full": "http://127.0.0.1/api/orders" })
    );
    assert_eq!(
        first["events"],
        json!([{ "name": "idempotent_fetch.retry", "timeMs": 1_700_000_000_200.0, "attributes": { "reason": "status-503" } }])
    );
    assert_eq!([&first["kind"], &first["statusCode"]], [&json!(3), &json!(2)]);

    // A span without a valid id is refused and counted; the rest of its export is kept.
    let broken = span("not-hex", "b7ad6b7169203331", "", "broken", json!("1"));
    let answer: Value = post(&client, &url, &export("page", vec![broken])).await.json().await.expect("json");
    assert_eq!(answer["partialSuccess"]["rejectedSpans"], "1");

    let unknown = client.get(format!("{url}/traces/{}", "1".repeat(32))).send().await.expect("get");
    assert_eq!(unknown.status(), 404);
    let protobuf = client
        .post(format!("{url}{EXPORT_PATH}"))
        .header("content-type", "application/x-protobuf")
        .body(vec![0x0a, 0x00])
        .send()
        .await
        .expect("post");
    assert_eq!(protobuf.status(), 415);
    receiver.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn the_oldest_trace_is_forgotten_beyond_the_limit_and_any_origin_may_read() {
    let receiver = traces::start("127.0.0.1:0".parse().expect("addr")).await.expect("receiver");
    let url = receiver.url();
    let client = Client::new();
    let trace_id = |n: usize| format!("{:032x}", n + 1);
    for n in 0..=MAX_TRACES {
        let one = span(&trace_id(n), "b7ad6b7169203331", "", "span", json!("1"));
        assert_eq!(post(&client, &url, &export("page", vec![one])).await.status(), 200);
    }
    let status = |n: usize| {
        let client = client.clone();
        let url = format!("{url}/traces/{}", trace_id(n));
        async move { client.get(url).header("origin", "http://127.0.0.1:8080").send().await.expect("get") }
    };
    assert_eq!(status(0).await.status(), 404, "the first trace was forgotten");
    let kept = status(1).await;
    assert_eq!(kept.status(), 200);
    assert_eq!(kept.headers().get("access-control-allow-origin").and_then(|v| v.to_str().ok()), Some("*"));
    assert_eq!(status(MAX_TRACES).await.status(), 200);
    receiver.shutdown().await.expect("shutdown");
}
