//! The extractor's body deadline against real sockets: clients that send their headers and then trickle
//! the body are answered 408 and disconnected soon after the deadline, while a normal request is answered.

use std::time::{Duration, Instant};

use axum::routing::post;
use axum::{Extension, Router};
use idempotent_endpoint::{BodyDeadline, Idempotent};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const DEADLINE: Duration = Duration::from_millis(600);
/// Scheduling slack on a loaded 2-core machine; far below the time a trickled body would take.
const MARGIN: Duration = Duration::from_millis(1500);
const SLOW_CLIENTS: usize = 200;
/// The slow bodies' declared length; one byte goes out every `TRICKLE`, so a whole body would take minutes.
const SLOW_BODY_LEN: usize = 1000;
const TRICKLE: Duration = Duration::from_millis(100);

async fn echo_len(request: Idempotent) -> String {
    request.body.len().to_string()
}

async fn server() -> std::net::SocketAddr {
    let app = Router::new().route("/echo", post(echo_len)).layer(Extension(BodyDeadline(DEADLINE)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// What a slow client saw: the answer's bytes and how long after its headers the server closed the socket.
struct Slow {
    answer: String,
    closed_after: Duration,
}

/// Sends the headers, then one body byte every `TRICKLE` until the server closes the connection.
async fn slow_upload(addr: std::net::SocketAddr, n: usize) -> Slow {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let head = format!(
        "POST /echo HTTP/1.1\r\nhost: {addr}\r\nidempotency-key: slow-{n}\r\ncontent-type: application/json\r\n\
         content-length: {SLOW_BODY_LEN}\r\n\r\n"
    );
    write.write_all(head.as_bytes()).await.unwrap();
    let sent = Instant::now();
    let trickle = tokio::spawn(async move {
        for _ in 0..SLOW_BODY_LEN {
            tokio::time::sleep(TRICKLE).await;
            if write.write_all(b" ").await.is_err() {
                return;
            }
        }
    });
    let mut answer = Vec::new();
    let mut buf = [0_u8; 4096];
    // Until end of stream (or a reset, when the server closed with trickled bytes unread); a connection still
    // open well past the limit the test asserts is given up on, so a failure does not wait for the trickle.
    let read_all = async {
        while let Ok(n @ 1..) = read.read(&mut buf).await {
            answer.extend_from_slice(&buf[..n]);
        }
    };
    let _ = tokio::time::timeout(DEADLINE + 2 * MARGIN, read_all).await;
    let closed_after = sent.elapsed();
    trickle.abort();
    Slow { answer: String::from_utf8_lossy(&answer).into_owned(), closed_after }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_get_408_and_are_disconnected_while_normal_requests_are_answered() {
    let addr = server().await;
    let slow: Vec<_> = (0..SLOW_CLIENTS).map(|n| tokio::spawn(slow_upload(addr, n))).collect();

    // With every slow upload open, a normal request is answered.
    tokio::time::sleep(DEADLINE / 3).await;
    let normal = reqwest::Client::new()
        .post(format!("http://{addr}/echo"))
        .header("idempotency-key", "normal")
        .body("{\"a\":1}")
        .send()
        .await
        .unwrap();
    assert_eq!(normal.status(), 200);
    assert_eq!(normal.text().await.unwrap(), "7");

    for (n, slow) in slow.into_iter().enumerate() {
        let Slow { answer, closed_after } = slow.await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 408 "), "slow client {n} got {answer:?}");
        assert!(answer.contains("application/problem+json"), "slow client {n} got {answer:?}");
        assert!(answer.contains("\"code\":\"body-timeout\""), "slow client {n} got {answer:?}");
        assert!(closed_after >= DEADLINE, "slow client {n} was closed early, after {closed_after:?}");
        assert!(closed_after < DEADLINE + MARGIN, "slow client {n} was still open after {closed_after:?}");
    }
}
