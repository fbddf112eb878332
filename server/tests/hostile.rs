//! Hostile clients over real HTTP on 127.0.0.1: slowloris headers, slow and oversized bodies, 10,000 keys
//! from one client, malformed keys and JSON, a saturated API. Each is answered with its documented status,
//! stores nothing it should not, and a health check keeps answering throughout.

#[path = "common/attack.rs"]
mod attack;
mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use attack::{closed_within, read_status, HealthWatch};
use common::{assert_problem, bearer, header, stored_bytes, TestServer, MUGS};
use futures_util::StreamExt;
use idempotent_fetch_server::problem::MAX_DETAIL_BYTES;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Tight limits so the test runs in seconds.
async fn server() -> TestServer {
    TestServer::start_with(|config| {
        config.limits.header_timeout = Duration::from_secs(1);
        config.limits.body_timeout = Duration::from_secs(1);
        config.limits.request_timeout = Duration::from_secs(4);
    })
    .await
}

fn order_head(addr: SocketAddr, key: &str, extra: &str) -> String {
    format!(
        "POST /api/orders HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {}\r\nIdempotency-Key: {key}\r\n\
         Content-Type: application/json\r\n{extra}\r\n",
        bearer("hostile")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slowloris_headers_and_slow_bodies_are_cut_off_while_others_are_served() {
    let t = server().await;
    let addr = t.server.addr();
    let health = HealthWatch::start(t.url("/api/health"));

    // 30 connections trickling their headers, a line every 200 ms: closed after the 1 s header timeout.
    let slowloris: Vec<_> = (0..30)
        .map(|i| {
            tokio::spawn(async move {
                let mut stream = TcpStream::connect(addr).await.expect("connect");
                stream.write_all(b"POST /api/orders HTTP/1.1\r\nHost: x\r\n").await.expect("write");
                let started = Instant::now();
                for line in 0..50 {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    if stream.write_all(format!("X-Slow-{i}-{line}: y\r\n").as_bytes()).await.is_err() {
                        break;
                    }
                }
                let closed = closed_within(&mut stream, Duration::from_secs(1)).await;
                (closed, started.elapsed())
            })
        })
        .collect();

    // A body that stops half way: 408 once it has paused longer than the 1 s body timeout.
    let mut slow_body = TcpStream::connect(addr).await.expect("connect");
    slow_body.write_all(order_head(addr, "k-slow-body", "Content-Length: 100\r\n").as_bytes()).await.expect("w");
    slow_body.write_all(br#"{"items":["#).await.expect("write");
    assert_eq!(read_status(&mut slow_body, Duration::from_secs(3)).await, Some(408));

    // A body trickling a byte every 500 ms never pauses for 1 s, but it is far below the minimum upload rate
    // (and would pass the 4 s request timeout too).
    let mut trickle = TcpStream::connect(addr).await.expect("connect");
    trickle.write_all(order_head(addr, "k-trickle", "Content-Length: 1000\r\n").as_bytes()).await.expect("w");
    let started = Instant::now();
    let mut status = None;
    for _ in 0..20 {
        if trickle.write_all(b" ").await.is_err() {
            break;
        }
        if let Some(code) = read_status(&mut trickle, Duration::from_millis(500)).await {
            status = Some(code);
            break;
        }
    }
    // Without those limits the 1000-byte body would take 500 s; the loop gives up after about 10 s.
    assert_eq!(status, Some(408), "after {:?}", started.elapsed());

    for task in slowloris {
        let (closed, after) = task.await.expect("slowloris task");
        assert!(closed, "a slowloris connection was still open after {after:?}");
        // The client keeps sending for 10 s; the 1 s header timeout must end it well before (margin for a
        // loaded machine).
        assert!(after < Duration::from_secs(8), "closed only after {after:?}");
    }
    // Meanwhile other clients were served.
    assert_eq!(t.post_status(Some("k-normal"), MUGS, &[]).await, 201);
    health.finish().await;
    assert_eq!(t.count_keys(), 1, "only the normal order's key is stored");
    t.stop().await;
}

#[tokio::test]
async fn oversized_bodies_are_413_and_store_nothing() {
    let t = server().await;
    let huge = format!(r#"{{"items":[{{"sku":"mug","qty":1}}],"pad":"{}"}}"#, "x".repeat(1024 * 1024));
    let response = t.post(Some("k-huge"), &huge, &[]).await.expect("answer");
    assert_problem(response, 413, "body-too-large").await;

    // Chunked, so no Content-Length tells the size up front.
    let addr = t.server.addr();
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(order_head(addr, "k-chunked", "Transfer-Encoding: chunked\r\n").as_bytes()).await.expect("w");
    let chunk = vec![b' '; 32 * 1024];
    let mut status = None;
    for _ in 0..8 {
        let mut frame = format!("{:x}\r\n", chunk.len()).into_bytes();
        frame.extend_from_slice(&chunk);
        frame.extend_from_slice(b"\r\n");
        if stream.write_all(&frame).await.is_err() {
            break;
        }
    }
    if status.is_none() {
        status = read_status(&mut stream, Duration::from_secs(3)).await;
    }
    assert_eq!(status, Some(413));

    // The other endpoints that read a body have the same limit and the same problem body.
    let session = t
        .client
        .post(t.url("/api/session"))
        .header("content-type", "application/json")
        .body(huge.clone())
        .send()
        .await
        .expect("session");
    assert_problem(session, 413, "body-too-large").await;
    let faults = t.client.put(t.url("/api/faults")).body(huge).send().await.expect("faults");
    assert_problem(faults, 413, "body-too-large").await;
    assert_eq!(t.count_keys(), 0);
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_thousand_keys_from_one_client_are_rate_limited_and_storage_stays_bounded() {
    let t = TestServer::start().await;
    let health = HealthWatch::start(t.url("/api/health"));
    let auth = bearer("flood");
    let started = Instant::now();
    let statuses: Vec<(u16, Option<String>)> = futures_util::stream::iter(0..10_000)
        .map(|i| {
            let (client, url, auth) = (t.client.clone(), t.url("/api/orders"), auth.clone());
            async move {
                let response = client
                    .post(url)
                    .header("authorization", auth)
                    .header("idempotency-key", format!("flood-{i}"))
                    .header("content-type", "application/json")
                    .body(MUGS)
                    .send()
                    .await
                    .expect("answer");
                (response.status().as_u16(), header(&response, "retry-after").map(str::to_owned))
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let elapsed = started.elapsed();
    let created = statuses.iter().filter(|(s, _)| *s == 201).count();
    let limited = statuses.iter().filter(|(s, _)| *s == 429).count();
    assert_eq!(created + limited, 10_000, "only 201 and 429: {:?}", &statuses[..5]);
    assert!(statuses.iter().filter(|(s, _)| *s == 429).all(|(_, after)| after.is_some()), "429 without Retry-After");
    // The burst (200) plus 50 per second: the flood cannot create more than that.
    let allowed = 200.0 + 50.0 * elapsed.as_secs_f64() + 1.0;
    assert!((created as f64) <= allowed, "{created} orders in {elapsed:?}");
    assert!(limited > 0);

    // Another account is served during and after the flood.
    let other = t.post(Some("other-key"), MUGS, &[("authorization", &bearer("bystander"))]).await.expect("post");
    assert_eq!(other.status(), 201);
    health.finish().await;

    // Only the orders that were made are stored, each with a small answer.
    assert_eq!(t.count_orders(), i64::try_from(created + 1).expect("count"));
    assert_eq!(t.count_keys(), t.count_orders());
    assert!(stored_bytes(&t.db) <= t.count_keys() * 2048, "{} bytes stored", stored_bytes(&t.db));
    t.stop().await;
}

#[tokio::test]
async fn malformed_keys_and_json_are_400_and_what_is_stored_is_small() {
    let t = server().await;
    let addr = t.server.addr();
    // Keys: empty, too long, spaces, quotes, non-ASCII bytes, twice. Raw TCP, so nothing is cleaned up.
    let long = "k".repeat(300);
    for key_lines in [
        "Idempotency-Key: \r\n".to_owned(),
        format!("Idempotency-Key: {long}\r\n"),
        "Idempotency-Key: a b\r\n".to_owned(),
        "Idempotency-Key: \"open\r\n".to_owned(),
        "Idempotency-Key: caf\u{e9}\r\n".to_owned(),
        "Idempotency-Key: one\r\nIdempotency-Key: two\r\n".to_owned(),
    ] {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let head = format!(
            "POST /api/orders HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {}\r\n{key_lines}\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{MUGS}",
            bearer("malformed"),
            MUGS.len()
        );
        stream.write_all(head.as_bytes()).await.expect("write");
        assert_eq!(read_status(&mut stream, Duration::from_secs(3)).await, Some(400), "{key_lines:?}");
    }
    assert_eq!(t.count_keys(), 0);

    // Bodies: not JSON, not UTF-8, wrong types, nesting bombs, and a 60 KB value that a serde error quotes.
    let bomb = format!("{}{}", "[".repeat(30_000), "]".repeat(30_000));
    let quoted = format!(r#"{{"items":[{{"sku":"{}","qty":1}}]}}"#, "s".repeat(60_000));
    let bodies: Vec<Vec<u8>> = vec![
        b"not json".to_vec(),
        vec![0xff, 0xfe, 0x00, 0x7b],
        br#"{"items":"mug"}"#.to_vec(),
        br#"{"items":[{"sku":"mug","qty":"lots"}]}"#.to_vec(),
        bomb.into_bytes(),
        quoted.into_bytes(),
    ];
    for (i, body) in bodies.into_iter().enumerate() {
        let key = format!("k-json-{i}");
        let response = t
            .client
            .post(t.url("/api/orders"))
            .header("authorization", bearer("malformed"))
            .header("idempotency-key", &key)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("answer");
        let problem = assert_problem(response, 400, "invalid-order").await;
        let detail = problem["detail"].as_str().expect("detail");
        assert!(detail.len() <= MAX_DETAIL_BYTES, "detail of {} bytes", detail.len());
    }
    // The refusals are stored (a retry gets the same 400), but small.
    assert_eq!(t.count_keys(), 6);
    assert!(stored_bytes(&t.db) < 6 * 1024, "{} bytes stored", stored_bytes(&t.db));
    assert_eq!(t.count_orders(), 0);
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_saturated_api_sheds_load_with_503_and_the_health_check_still_answers() {
    let t = TestServer::start_with(|config| config.limits.max_concurrent_requests = 4).await;
    let health = HealthWatch::start(t.url("/api/health"));
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let (client, base) = (t.client.clone(), t.server.url());
            tokio::spawn(async move {
                let key = format!("k-busy-{i}");
                let response = common::post_to(&client, &base, Some(&key), MUGS, &[("x-fault", "latency=800")])
                    .await
                    .expect("answer");
                (response.status().as_u16(), header(&response, "retry-after").map(str::to_owned))
            })
        })
        .collect();
    let mut created = 0;
    let mut shed = 0;
    for task in tasks {
        match task.await.expect("task") {
            (201, _) => created += 1,
            (503, after) => {
                assert_eq!(after.as_deref(), Some("1"));
                shed += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(shed > 0 && created > 0 && created <= 16, "{created} created, {shed} shed");
    health.finish().await;
    assert_eq!(t.count_keys(), created);
    t.stop().await;
}
