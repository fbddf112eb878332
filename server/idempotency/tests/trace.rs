//! One trace from the request to the receiver (feature `otel`): a request span continues a client's
//! `traceparent` and enqueues a message in its transaction; the outbox worker claims it and delivers it over
//! real HTTP on 127.0.0.1 to a receiver whose inbox takes the delivery's `traceparent`. The spans, kept by
//! OpenTelemetry's in-memory exporter, share the client's trace id: the delivery span is a child of the
//! request's span and linked to it, the receipt's span a child of the delivery's. A key a request claimed
//! and left unfinished (on a key table made before its `traceparent` column, which install adds) is
//! finished by a completer whose span is a child of that request's. On SQLite, and on a throwaway
//! PostgreSQL cluster (`#[ignore]`d: `cargo test -p idempotent-endpoint --features otel --test
//! trace -- --ignored`).
#![cfg(feature = "otel")]

#[path = "../../tests/common/pg_cluster.rs"]
mod pg_cluster;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use idempotent_endpoint::inbox::{self, SqliteInbox};
use idempotent_endpoint::outbox::{self, Message, Worker};
use idempotent_endpoint::phases::{self, completion_span, Begun, Held};
use idempotent_endpoint::sqlite::SqliteKeys;
use idempotent_endpoint::trace_context::{self, TraceParent};
use idempotent_endpoint::{IdempotencyKey, KeyedRequest, Outcome, StoredResponse, IDEMPOTENCY_KEY_HEADER};
use opentelemetry::trace::{SpanKind, TracerProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tokio_postgres::NoTls;
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

const HOUR: Duration = Duration::from_secs(3600);

/// The spans of every test in this binary: one global subscriber, since the stores run their work on
/// blocking threads; each test reads only its own trace.
fn exporter() -> &'static InMemorySpanExporter {
    static EXPORTER: OnceLock<(InMemorySpanExporter, SdkTracerProvider)> = OnceLock::new();
    &EXPORTER
        .get_or_init(|| {
            let exporter = InMemorySpanExporter::default();
            let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
            let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("trace-test"));
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
                .expect("the only subscriber");
            (exporter, provider)
        })
        .0
}

/// The finished spans of trace `trace_id`.
fn spans_of(trace_id: u128) -> Vec<SpanData> {
    let spans = exporter().get_finished_spans().expect("finished spans");
    spans.into_iter().filter(|s| u128::from_be_bytes(s.span_context.trace_id().to_bytes()) == trace_id).collect()
}

/// The receiver's inbox, on either database.
#[derive(Clone)]
enum Receiver {
    Sqlite(SqliteInbox),
    Postgres(Arc<tokio::sync::Mutex<tokio_postgres::Client>>),
}

/// `POST /messages`: one delivery through the inbox, with the delivery's `traceparent`.
async fn receive(State(receiver): State<Receiver>, headers: HeaderMap, _body: Bytes) -> Response {
    let id = headers.get(IDEMPOTENCY_KEY_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let traceparent = trace_context::header(&headers).map(str::to_owned);
    let answer = || StoredResponse::json(StatusCode::CREATED, &serde_json::json!({ "received": true }));
    let received = match receiver {
        Receiver::Sqlite(inbox) => {
            inbox.receive("sender".to_owned(), id, traceparent, move |_| Ok::<_, String>(answer())).await
        }
        Receiver::Postgres(client) => {
            let mut client = client.lock().await;
            let tx = client.transaction().await.expect("begin");
            let received = inbox::receive_postgres(&tx, "sender", &id, traceparent.as_deref(), HOUR, |_| {
                Box::pin(async move { Ok::<_, String>(answer()) })
            })
            .await;
            tx.commit().await.expect("commit");
            received
        }
    };
    match received {
        Ok(received) => received.into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// Serves the receiver on 127.0.0.1; its `/messages` URL.
async fn serve_receiver(receiver: Receiver) -> String {
    let app = Router::new().route("/messages", post(receive)).with_state(receiver);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/messages", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await.expect("receiver") });
    url
}

/// The request's span, continuing the client's `traceparent`.
fn request_span(client_traceparent: &str) -> tracing::Span {
    let span = tracing::info_span!("request", otel.kind = "server");
    trace_context::continue_from(&span, client_traceparent);
    span
}

/// Delivers every due message to `url` once, sending its id and [`outbox::delivery_traceparent`].
async fn deliver_all<S: outbox::OutboxStore>(store: &S, url: &str) {
    let http = reqwest::Client::new();
    let deliver = |message: Message| {
        let (http, url) = (http.clone(), url.to_owned());
        async move {
            let mut request = http.post(url).header(IDEMPOTENCY_KEY_HEADER, &message.id).body(message.payload.clone());
            if let Some(traceparent) = outbox::delivery_traceparent(&message) {
                request = request.header(trace_context::TRACEPARENT_HEADER, traceparent);
            }
            let response = request.send().await.map_err(|e| e.to_string())?;
            response.status().is_success().then_some(()).ok_or_else(|| format!("status {}", response.status()))
        }
    };
    let pass = Worker::default().deliver_once(store, &deliver).await.expect("deliver");
    assert_eq!((pass.claimed, pass.delivered), (1, 1), "{pass:?}");
}

/// The request's, the delivery's and the receipt's spans of trace `trace_id`: one trace, each a child of
/// the one before, the delivery linked to the request; and the message stored with the request's context.
fn assert_one_trace(trace_id: u128, client_span: u64, stored: Option<String>) {
    let spans = spans_of(trace_id);
    let named = |name: &str| {
        spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
            let names: Vec<_> = spans.iter().map(|s| s.name.to_string()).collect();
            panic!("a span {name} in the trace {trace_id:032x}: {names:?}")
        })
    };
    let (request, delivery, receipt) = (named("request"), named("outbox.deliver"), named("inbox.receive"));
    assert_eq!(u64::from_be_bytes(request.parent_span_id.to_bytes()), client_span);
    let stored = stored.and_then(|s| TraceParent::parse(&s)).expect("the message's traceparent");
    assert_eq!(stored.trace_id, trace_id);
    assert_eq!(stored.span_id.to_be_bytes(), request.span_context.span_id().to_bytes(), "the request's span");
    assert_eq!(delivery.parent_span_id, request.span_context.span_id(), "the delivery is the request's child");
    assert_eq!(delivery.span_kind, SpanKind::Producer);
    assert!(
        delivery.links.iter().any(|l| l.span_context.span_id() == request.span_context.span_id()),
        "the delivery links to the message's creation context"
    );
    assert_eq!(receipt.parent_span_id, delivery.span_context.span_id(), "the receipt is the delivery's child");
    assert_eq!(receipt.span_kind, SpanKind::Consumer);
}

/// A client's `traceparent` with a trace id of the test's own.
fn client_traceparent(trace_id: u128, span_id: u64) -> String {
    TraceParent { trace_id, span_id, flags: 1 }.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_message_carries_the_requests_trace_to_the_receivers_inbox() {
    exporter();
    let (trace_id, client_span) = (0x5b8a_a5a2_d2c8_72e8_321c_f373_08d6_9df2, 0x00f0_67aa_0ba9_02b7);
    let dir = tempfile::tempdir().expect("dir");
    let keys = SqliteKeys::open(dir.path().join("sender.sqlite"), HOUR).expect("sender");
    let inbox = SqliteInbox::open(dir.path().join("receiver.sqlite"), HOUR).expect("receiver");
    let url = serve_receiver(Receiver::Sqlite(inbox)).await;

    let message = Message::new("trace-test", &"hello").expect("message");
    let id = message.id.clone();
    keys.with_conn(move |conn| {
        let tx = conn.transaction()?;
        outbox::enqueue_sqlite(&tx, &message)?;
        Ok(tx.commit()?)
    })
    .instrument(request_span(&client_traceparent(trace_id, client_span)))
    .await
    .expect("enqueue");
    let stored: Option<String> = keys
        .with_conn(move |c| {
            Ok(c.query_row("SELECT traceparent FROM outbox_messages WHERE id = ?1", [id], |r| r.get(0))?)
        })
        .await
        .expect("stored");

    deliver_all(&keys, &url).await;
    assert_one_trace(trace_id, client_span, stored);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL's binaries"]
async fn postgres_a_message_carries_the_requests_trace_to_the_receivers_inbox() {
    exporter();
    let (trace_id, client_span) = (0x0af7_6519_16cd_43dd_8448_eb21_1c80_319c, 0x00f0_67aa_0ba9_02b8);
    let cluster = pg_cluster::Cluster::start(pg_cluster::bin_dir(), pg_cluster::Cluster::FAST).expect("cluster");
    let connect = || async {
        let (client, connection) = tokio_postgres::connect(&cluster.url("postgres"), NoTls).await.expect("connect");
        tokio::spawn(connection);
        client
    };
    let mut sender = connect().await;
    idempotent_endpoint::postgres::install(&sender).await.expect("install");
    let receiver = connect().await;
    inbox::install_postgres(&receiver).await.expect("install the inbox");
    let url = serve_receiver(Receiver::Postgres(Arc::new(tokio::sync::Mutex::new(receiver)))).await;

    let message = Message::new("trace-test", &"hello").expect("message");
    async {
        let tx = sender.transaction().await.expect("begin");
        outbox::enqueue_postgres(&tx, &message).await.expect("enqueue");
        tx.commit().await.expect("commit");
    }
    .instrument(request_span(&client_traceparent(trace_id, client_span)))
    .await;
    let stored: Option<String> = sender
        .query_one("SELECT traceparent FROM outbox_messages WHERE id = $1", &[&message.id])
        .await
        .expect("stored")
        .get(0);

    deliver_all(&Arc::new(sender), &url).await;
    assert_one_trace(trace_id, client_span, stored);
}

/// The key table as versions before `traceparent` made it: `install` adds the column.
const OLD_KEY_TABLE: &str = "
CREATE TABLE idempotency_records (
    scope            TEXT    NOT NULL,
    key              TEXT    NOT NULL,
    fingerprint      TEXT    NOT NULL,
    status_code      INTEGER NULL,
    response_headers TEXT    NULL,
    response_body    TEXT    NULL,
    created_at       BIGINT  NOT NULL,
    recovery_point   TEXT    NOT NULL DEFAULT 'finished',
    row_id           TEXT    NULL,
    lock_token       TEXT    NULL,
    locked_until     BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (scope, key)
);
";

/// A phased request with key `key`.
fn keyed(key: &str) -> KeyedRequest {
    KeyedRequest {
        scope: "shop".to_owned(),
        key: IdempotencyKey::parse(key).expect("key"),
        fingerprint: idempotent_endpoint::fingerprint("POST", "/pay", b"{}"),
    }
}

/// A lease that has run out by the time the completer looks.
const SHORT_LEASE: Duration = Duration::from_millis(1);

/// The completer's span of trace `trace_id`: a child of the span that claimed the key (the request's), linked
/// to it, with the finish step under it; the row kept the request's context.
fn assert_completion_in_trace(trace_id: u128, client_span: u64, held: &Held) {
    let spans = spans_of(trace_id);
    let names: Vec<_> = spans.iter().map(|s| s.name.to_string()).collect();
    let named = |name: &str| spans.iter().find(|s| s.name == name);
    let request = named("request").unwrap_or_else(|| panic!("the request in {trace_id:032x}: {names:?}"));
    let complete =
        named("idempotency.complete").unwrap_or_else(|| panic!("the completion in {trace_id:032x}: {names:?}"));
    assert_eq!(u64::from_be_bytes(request.parent_span_id.to_bytes()), client_span);
    let kept = held.traceparent.as_deref().and_then(TraceParent::parse).expect("the row's traceparent");
    assert_eq!((kept.trace_id, kept.span_id.to_be_bytes()), (trace_id, request.span_context.span_id().to_bytes()));
    assert_eq!(complete.parent_span_id, request.span_context.span_id(), "the completion is the request's child");
    assert!(
        complete.links.iter().any(|l| l.span_context.span_id() == request.span_context.span_id()),
        "the completion links to the claiming request"
    );
    let finish = spans
        .iter()
        .find(|s| s.name == "idempotency.phase" && s.parent_span_id == complete.span_context.span_id())
        .unwrap_or_else(|| panic!("the finish step under the completion: {names:?}"));
    assert!(finish
        .attributes
        .iter()
        .any(|kv| kv.key.as_str() == "idempotency.phase" && kv.value.as_str() == "finished"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_the_completer_continues_the_trace_of_the_request_that_claimed_the_key() {
    exporter();
    let (trace_id, client_span) = (0x7c1e_9a40_52d3_4b8f_a061_2e5d_93c4_b7a1, 0x00f0_67aa_0ba9_02c1);
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("phases.sqlite");
    idempotent_endpoint::sqlite::rusqlite::Connection::open(&path)
        .expect("old database")
        .execute_batch(OLD_KEY_TABLE)
        .expect("old table");
    let keys = SqliteKeys::open(&path, HOUR).expect("open upgrades the table");

    // The request claims the key and "crashes": its lease runs out with the row at `started`.
    let span = request_span(&client_traceparent(trace_id, client_span));
    let begun = keys.begin(keyed("completer-trace-sqlite-01"), SHORT_LEASE).instrument(span).await;
    assert!(matches!(begun, Ok(Begun::Held(_))), "{begun:?}");
    tokio::time::sleep(Duration::from_millis(20)).await;

    // The completer, outside any request, takes it over and finishes it in its span.
    let mut taken = keys.unfinished(10, HOUR).await.expect("unfinished");
    let held = taken.pop().expect("the key left behind");
    let answer = || StoredResponse::json(StatusCode::CREATED, &"done");
    let finished =
        keys.finish(held.clone(), move |_| Ok::<_, String>(answer())).instrument(completion_span(&held)).await;
    assert!(matches!(finished, Ok(Outcome::Fresh(_))), "{finished:?}");
    assert_completion_in_trace(trace_id, client_span, &held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL's binaries"]
async fn postgres_the_completer_continues_the_trace_of_the_request_that_claimed_the_key() {
    exporter();
    let (trace_id, client_span) = (0x1d4f_6b02_8e37_45a9_b3c8_0f71_d2e6_5a94, 0x00f0_67aa_0ba9_02c2);
    let cluster = pg_cluster::Cluster::start(pg_cluster::bin_dir(), pg_cluster::Cluster::FAST).expect("cluster");
    let (mut client, connection) = tokio_postgres::connect(&cluster.url("postgres"), NoTls).await.expect("connect");
    tokio::spawn(connection);
    client.batch_execute(OLD_KEY_TABLE).await.expect("old table");
    idempotent_endpoint::postgres::install(&client).await.expect("install upgrades the table");
    idempotent_endpoint::postgres::install(&client).await.expect("install again");

    let span = request_span(&client_traceparent(trace_id, client_span));
    let begun = phases::postgres::begin(&mut client, &keyed("completer-trace-pg-0001"), HOUR, SHORT_LEASE)
        .instrument(span)
        .await;
    assert!(matches!(begun, Ok(Begun::Held(_))), "{begun:?}");
    tokio::time::sleep(Duration::from_millis(20)).await;

    let mut taken = phases::postgres::unfinished(&mut client, 10, HOUR).await.expect("unfinished");
    let held = taken.pop().expect("the key left behind");
    let span = completion_span(&held);
    let finished = phases::postgres::finish(&mut client, held.clone(), |_| {
        Box::pin(async { Ok::<_, String>(StoredResponse::json(StatusCode::CREATED, &"done")) })
    })
    .instrument(span)
    .await;
    assert!(matches!(finished, Ok(Outcome::Fresh(_))), "{finished:?}");
    assert_completion_in_trace(trace_id, client_span, &held);
}
