//! One client, or one address, must not take the server from everyone else: slow uploads hold no API slot
//! and are cut off by the minimum upload rate, `POST /api/session` takes only small and quick bodies, an
//! address gets only its share of the connections and of the API slots, headers have a small buffer and a
//! connection must start talking soon, and a readiness check tells a load balancer when the API is full.
//! Over real HTTP on 127.0.0.1; attacks come from 127.0.0.2 ([`attack::ATTACKER`]).

#[path = "common/attack.rs"]
mod attack;
mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use attack::{closed_within, connect_from, read_status, HealthWatch, ATTACKER};
use common::{assert_problem, bearer, header, post_to, TestServer, MUGS};
use idempotent_fetch_server::Limits;
use tokio::io::AsyncWriteExt;

/// `POST /api/session` with a body of `length` bytes announced, of which nothing is sent yet.
fn session_head(addr: SocketAddr, length: usize) -> String {
    format!(
        "POST /api/session HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {length}\r\n\r\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_uploads_hold_no_api_slot_and_are_cut_off_by_the_minimum_rate() {
    // Few slots, a 1 s pause allowed between body chunks, and a request timeout far beyond the test.
    let t = TestServer::start_with(|config| {
        config.limits.max_concurrent_requests = 8;
        config.limits.body_timeout = Duration::from_secs(1);
        config.limits.request_timeout = Duration::from_secs(60);
    })
    .await;
    let addr = t.server.addr();
    let health = HealthWatch::start(t.url("/api/health"));

    // Four times as many connections as slots, each trickling a session body a byte every 300 ms: never a
    // pause of 1 s, and the 60 s request timeout is far away; only the minimum upload rate ends them.
    let tricklers: Vec<_> = (0..32)
        .map(|_| {
            tokio::spawn(async move {
                let mut stream = connect_from(ATTACKER, addr).await.expect("connect");
                stream.write_all(session_head(addr, 200).as_bytes()).await.expect("write head");
                let started = Instant::now();
                for _ in 0..40 {
                    if stream.write_all(b" ").await.is_err() {
                        break;
                    }
                    if let Some(status) = read_status(&mut stream, Duration::from_millis(300)).await {
                        return (Some(status), started.elapsed());
                    }
                }
                (None, started.elapsed())
            })
        })
        .collect();

    // Meanwhile every API call is served: no slot is held by a body still arriving.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for i in 0..5 {
        let products = t.client.get(t.url("/api/products")).send().await.expect("products");
        assert_eq!(products.status(), 200, "GET /api/products while slow uploads arrive");
        let key = format!("k-during-trickle-{i}");
        assert_eq!(t.post_status(Some(&key), MUGS, &[]).await, 201, "an order while slow uploads arrive");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    for task in tricklers {
        let (status, after) = task.await.expect("trickler");
        // 408 once the body is slower than the minimum rate: within the session's short body time (2 s by
        // default) and long before the loop gives up (12 s) or the request timeout (60 s).
        assert_eq!(status, Some(408), "a trickled session body after {after:?}");
        assert!(after < Duration::from_secs(10), "cut off only after {after:?}");
    }
    health.finish().await;
    t.stop().await;
}

#[tokio::test]
async fn an_order_body_slower_than_the_minimum_rate_is_408_and_stores_nothing() {
    let t = TestServer::start_with(|config| {
        config.limits.body_timeout = Duration::from_secs(1);
        config.limits.request_timeout = Duration::from_secs(60);
    })
    .await;
    let addr = t.server.addr();
    let mut stream = connect_from(ATTACKER, addr).await.expect("connect");
    let head = format!(
        "POST /api/orders HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {}\r\nIdempotency-Key: k-slow\r\n\
         Content-Type: application/json\r\nContent-Length: 10000\r\n\r\n",
        bearer("slow")
    );
    stream.write_all(head.as_bytes()).await.expect("write head");
    let started = Instant::now();
    let mut status = None;
    // Ten bytes every 300 ms (33 B/s): no pause of 1 s, far below the minimum rate.
    for _ in 0..60 {
        if stream.write_all(b"          ").await.is_err() {
            break;
        }
        if let Some(code) = read_status(&mut stream, Duration::from_millis(300)).await {
            status = Some(code);
            break;
        }
    }
    assert_eq!(status, Some(408), "after {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(15), "cut off only after {:?}", started.elapsed());
    assert_eq!(t.count_keys(), 0);
    t.stop().await;
}

#[tokio::test]
async fn session_requests_take_only_small_bodies() {
    let t = TestServer::start().await;
    // 2 KiB of valid JSON: far more than `{"account": ID}` needs.
    let big = format!(r#"{{"account":"a","pad":"{}"}}"#, "x".repeat(2048));
    let session = t
        .client
        .post(t.url("/api/session"))
        .header("content-type", "application/json")
        .body(big.clone())
        .send()
        .await
        .expect("session");
    assert_problem(session, 413, "body-too-large").await;
    let small = t
        .client
        .post(t.url("/api/session"))
        .header("content-type", "application/json")
        .body(r#"{"account":"small"}"#)
        .send()
        .await
        .expect("session");
    assert_eq!(small.status(), 200);
    // The order endpoint keeps its own, larger limit: 32 KiB of ignored fields still make an order.
    let padded = format!(r#"{{"items":[{{"sku":"mug","qty":1}}],"note":"{}"}}"#, "x".repeat(32 * 1024));
    assert_eq!(t.post_status(Some("k-padded"), &padded, &[]).await, 201);
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_idle_and_slowloris_sockets_from_one_address_leave_room_for_everyone_else() {
    // Default limits, but a header timeout long enough that, without per-address limits, the attack's
    // sockets would hold every connection slot for the whole test.
    let t = TestServer::start_with(|config| config.limits.header_timeout = Duration::from_secs(30)).await;
    let addr = t.server.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let (opened, closed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    // More sockets than the whole server's connection cap, half idle, half trickling header lines;
    // each reconnects half a second after the server closes it.
    let sockets = usize::try_from(Limits::default().max_connections).expect("cap") + 476;
    let attackers: Vec<_> = (0..sockets)
        .map(|i| {
            let (stop, opened, closed) = (Arc::clone(&stop), Arc::clone(&opened), Arc::clone(&closed));
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let Ok(mut stream) = connect_from(ATTACKER, addr).await else {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        continue;
                    };
                    opened.fetch_add(1, Ordering::Relaxed);
                    let slowloris = i % 2 == 0;
                    let mut line = 0;
                    let mut alive = !slowloris || stream.write_all(b"GET /api/health HTTP/1.1\r\n").await.is_ok();
                    while alive && !stop.load(Ordering::Relaxed) {
                        line += 1;
                        alive = !closed_within(&mut stream, Duration::from_millis(500)).await
                            && (!slowloris
                                || stream.write_all(format!("X-Slow-{line}: y\r\n").as_bytes()).await.is_ok());
                    }
                    if !alive {
                        closed.fetch_add(1, Ordering::Relaxed);
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            })
        })
        .collect();

    // Once the attack has reached a limit (the server closed one of its sockets), health checks on new
    // connections and an order from another address are answered.
    let started = Instant::now();
    while closed.load(Ordering::Relaxed) == 0 {
        assert!(started.elapsed() < Duration::from_secs(60), "the server never closed an attacking socket");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let health = HealthWatch::start(t.url("/api/health"));
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(t.post_status(Some("k-bystander"), MUGS, &[]).await, 201);
    health.finish().await;
    stop.store(true, Ordering::Relaxed);
    for task in attackers {
        task.await.expect("attacker");
    }
    println!(
        "{sockets} attacking sockets opened {} connections, {} of them closed by the server",
        opened.load(Ordering::Relaxed),
        closed.load(Ordering::Relaxed)
    );
    t.stop().await;
}

#[tokio::test]
async fn unfinished_headers_fill_only_a_small_buffer() {
    let t = TestServer::start_with(|config| config.limits.header_timeout = Duration::from_secs(30)).await;
    let addr = t.server.addr();
    // 64 KiB of one header line that never ends: refused (431) or closed long before the 30 s timeout.
    let mut stream = connect_from(ATTACKER, addr).await.expect("connect");
    stream.write_all(b"GET /api/health HTTP/1.1\r\nHost: x\r\nX-Big: ").await.expect("write");
    let _ = stream.write_all(&vec![b'a'; 64 * 1024]).await;
    let started = Instant::now();
    let status = read_status(&mut stream, Duration::from_secs(5)).await;
    let closed = status.is_some() || closed_within(&mut stream, Duration::from_millis(100)).await;
    assert!(status == Some(431) || (status.is_none() && closed), "{status:?} after {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(5), "refused only after {:?}", started.elapsed());

    // Ordinary headers, 8 KiB of them, still fit.
    let cookie = format!("other_app={}", "c".repeat(8 * 1024));
    let ok = t.client.get(t.url("/api/health")).header("cookie", cookie).send().await.expect("health");
    assert_eq!(ok.status(), 200);
    t.stop().await;
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed_soon() {
    let t = TestServer::start_with(|config| config.limits.header_timeout = Duration::from_secs(30)).await;
    let mut silent = connect_from(ATTACKER, t.server.addr()).await.expect("connect");
    let started = Instant::now();
    // The first byte must come within a few seconds (3 by default), not the 30 s allowed for the headers.
    assert!(closed_within(&mut silent, Duration::from_secs(10)).await, "still open after {:?}", started.elapsed());
    // A client that talks at once is served as usual.
    let health = t.client.get(t.url("/api/health")).send().await.expect("health");
    assert_eq!(health.status(), 200);
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_address_gets_only_its_share_of_the_api_slots() {
    let t = TestServer::start().await;
    let greedy = reqwest::Client::builder().local_address(ATTACKER).build().expect("client");
    let auth = bearer("greedy");
    // More slow orders at once than one address may have in flight, fewer than the API's slots, each
    // holding its slot for 1.5 s.
    let share = i64::from(Limits::default().max_requests_per_ip);
    assert!(share + 32 < i64::from(Limits::default().max_concurrent_requests));
    let tasks: Vec<_> = (0..share + 32)
        .map(|i| {
            let (client, base, auth) = (greedy.clone(), t.server.url(), auth.clone());
            tokio::spawn(async move {
                let key = format!("k-greedy-{i}");
                let headers = [("authorization", auth.as_str()), ("x-fault", "latency=1500")];
                let response = post_to(&client, &base, Some(&key), MUGS, &headers).await.expect("answer");
                (response.status().as_u16(), header(&response, "retry-after").map(str::to_owned))
            })
        })
        .collect();
    // While they run, another address is served at once.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(t.post_status(Some("k-fair"), MUGS, &[]).await, 201);
    let (mut created, mut refused) = (0_i64, 0);
    for task in tasks {
        match task.await.expect("task") {
            (201, _) => created += 1,
            (429, after) => {
                assert_eq!(after.as_deref(), Some("1"), "429 with Retry-After");
                refused += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(refused > 0, "{created} created, none refused");
    assert!(created <= share, "{created} in flight from one address");
    assert_eq!(t.count_orders(), created + 1);
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readiness_is_503_while_every_api_slot_is_held_and_health_says_so() {
    let t = TestServer::start_with(|config| config.limits.max_concurrent_requests = 2).await;
    let ready = t.client.get(t.url("/api/ready")).send().await.expect("ready");
    assert_eq!(ready.status(), 200);
    let body: serde_json::Value = ready.json().await.expect("json");
    assert_eq!(body["status"], "ready");

    // Two orders hold both slots for 2 s.
    let holders: Vec<_> = (0..2)
        .map(|i| {
            let key = format!("k-hold-{i}");
            common::spawn_post(&t.client, &t.server.url(), &key, MUGS, &[("x-fault", "latency=2000")])
        })
        .collect();
    let mut saturated = None;
    while saturated.is_none() && !holders.iter().all(|h| h.is_finished()) {
        let ready = t.client.get(t.url("/api/ready")).send().await.expect("ready");
        if ready.status() == 503 {
            assert_eq!(header(&ready, "retry-after"), Some("1"));
            let health = t.get_json("/api/health").await;
            saturated = Some((assert_problem(ready, 503, "saturated").await, health));
        } else {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let (problem, health) = saturated.expect("/api/ready said 503 while both slots were held");
    assert!(problem["detail"].as_str().is_some_and(|d| d.contains('2')), "{problem}");
    // Health is liveness: still 200 and ok, and it says the API is saturated.
    assert_eq!(health["status"], "ok");
    assert_eq!(health["api"], "saturated");
    for holder in holders {
        assert_eq!(holder.await.expect("task").expect("answer").status(), 201);
    }
    let ready = t.client.get(t.url("/api/ready")).send().await.expect("ready");
    assert_eq!(ready.status(), 200);
    assert_eq!(t.get_json("/api/health").await["api"], "ok");
    t.stop().await;
}
