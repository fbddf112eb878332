//! `serve::serve` against real sockets: a request is answered, a client that sends part of its request head
//! is disconnected soon after the header timeout, and a shutdown lets an open request finish before `serve`
//! returns.
#![cfg(feature = "serve")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use idempotent_endpoint::serve::{serve, ServeLimits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

const HEADER_TIMEOUT: Duration = Duration::from_millis(400);
/// Scheduling slack on a loaded 2-core machine; far below how long a stalled client would otherwise stay.
const MARGIN: Duration = Duration::from_millis(1500);
/// How long the slow route takes: it is in progress when the shutdown is asked for.
const SLOW: Duration = Duration::from_millis(500);

/// `/` answers at once; `/slow` after [`SLOW`], and sets `slow_done` just before it answers.
fn app(slow_done: Arc<AtomicBool>) -> Router {
    Router::new().route("/", get(|| async { "ok" })).route(
        "/slow",
        get(|| async move {
            tokio::time::sleep(SLOW).await;
            slow_done.store(true, Ordering::SeqCst);
            "slow ok"
        }),
    )
}

/// A running server: its address, the sender that asks it to shut down, the task that ends when `serve`
/// returned, and whether `/slow` finished.
struct Running {
    addr: std::net::SocketAddr,
    stop: oneshot::Sender<()>,
    served: tokio::task::JoinHandle<()>,
    slow_done: Arc<AtomicBool>,
}

async fn start() -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let limits = ServeLimits { header_timeout: HEADER_TIMEOUT, shutdown_grace: Duration::from_secs(5) };
    let slow_done = Arc::new(AtomicBool::new(false));
    let served = tokio::spawn(serve(listener, app(slow_done.clone()), limits, async {
        let _ = stopped.await;
    }));
    Running { addr, stop, served, slow_done }
}

/// Writes `head`, then reads until the server closes the connection; returns what it answered and when.
async fn exchange(addr: std::net::SocketAddr, head: &str) -> (String, Duration) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let sent = Instant::now();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the connection was still open 10 s after the request head");
    (String::from_utf8_lossy(&answer).into_owned(), sent.elapsed())
}

#[tokio::test]
async fn a_request_is_answered() {
    let server = start().await;
    let (answer, _) = exchange(server.addr, "GET / HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("ok"), "{answer}");
}

#[tokio::test]
async fn a_request_head_that_stalls_is_closed_after_the_header_timeout() {
    let server = start().await;
    let (answer, took) = exchange(server.addr, "GET / HTTP/1.1\r\nhost: te").await;
    assert!(!answer.contains("200"), "a stalled head got an answer: {answer}");
    assert!(
        took >= HEADER_TIMEOUT.saturating_sub(Duration::from_millis(50)),
        "closed after {took:?}, before the timeout"
    );
    assert!(took < HEADER_TIMEOUT + MARGIN, "closed only after {took:?}");
}

#[tokio::test]
async fn a_shutdown_lets_an_open_request_finish_and_then_returns() {
    let Running { addr, stop, served, slow_done } = start().await;
    let slow = tokio::spawn(exchange(addr, "GET /slow HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n"));
    tokio::time::sleep(SLOW / 5).await;
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), served).await.expect("serve did not return").unwrap();
    assert!(slow_done.load(Ordering::SeqCst), "serve returned before the open request finished");
    assert!(TcpStream::connect(addr).await.is_err(), "still accepting after the shutdown");
    let (answer, _) = slow.await.unwrap();
    assert!(answer.ends_with("slow ok"), "the open request was cut off: {answer}");
}
