//! `GET /metrics` (`--metrics-addr`): after a scripted run over real HTTP on 127.0.0.1 with a real SQLite
//! file, the counters are exactly the run's numbers, the in-flight gauges see a key while it is worked on,
//! and no key appears in the text.

mod common;

use std::time::Duration;

use common::checkout::{eventually, post_until_created, Downstream};
use common::{bearer, spawn_post, TestServer, DEFAULT_ACCOUNT, GRINDER, MUGS};

/// The metrics text of `t`'s metrics listener.
async fn scrape(t: &TestServer) -> String {
    let addr = t.server.metrics_addr().expect("the metrics listener is on");
    let response = t.client.get(format!("http://{addr}/metrics")).send().await.expect("scrape");
    assert_eq!(response.status(), 200);
    let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    assert!(content_type.starts_with("application/openmetrics-text"), "{content_type}");
    response.text().await.expect("metrics text")
}

/// The value of the sample `series` (name and labels, as written) in `text`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_counters_match_a_scripted_run() {
    let t = TestServer::start_with(|config| config.metrics_addr = Some("127.0.0.1:0".parse().expect("address"))).await;
    let replayed = "metrics-replayed-key";
    assert_eq!(t.post_status(Some(replayed), MUGS, &[]).await, 201);
    for _ in 0..20 {
        assert_eq!(t.post_status(Some(replayed), MUGS, &[]).await, 201, "a replay");
    }
    for _ in 0..5 {
        assert_eq!(t.post_status(Some(replayed), GRINDER, &[]).await, 422);
    }

    // A key held in flight by its first request (1.5 s of injected latency), and three retries meanwhile.
    let slow = "metrics-slow-key";
    let first = spawn_post(&t.client, &t.server.url(), slow, MUGS, &[("x-fault", "latency=1500")]);
    let mut during = String::new();
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        during = scrape(&t).await;
        if sample(&during, "idempotency_keys_in_flight") == Some(1.0) {
            break;
        }
    }
    assert_eq!(sample(&during, "idempotency_keys_in_flight"), Some(1.0), "{during}");
    for _ in 0..3 {
        assert_eq!(t.post_status(Some(slow), MUGS, &[]).await, 409);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let aged = scrape(&t).await;
    let age = sample(&aged, "idempotency_oldest_in_flight_age_seconds").expect("the age gauge");
    assert!(age >= 0.3, "the slow key has been in flight at least 0.3 s: {aged}");
    assert_eq!(first.await.expect("task").expect("post").status(), 201);

    // A key never seen, settled: a fence.
    let fenced = t
        .client
        .post(t.url("/api/idempotency-keys/metrics-never-sent"))
        .header("authorization", bearer(DEFAULT_ACCOUNT))
        .send()
        .await
        .expect("settle");
    assert_eq!(fenced.status(), 200);

    let text = scrape(&t).await;
    let decided = |decision: &str| sample(&text, &format!("idempotency_decisions_total{{decision=\"{decision}\"}}"));
    assert_eq!(decided("fresh"), Some(2.0), "{text}");
    assert_eq!(decided("replay"), Some(20.0), "{text}");
    assert_eq!(decided("mismatch"), Some(5.0), "{text}");
    assert_eq!(decided("in_flight"), Some(3.0), "{text}");
    assert_eq!(decided("fenced"), None, "no request came with a fenced key: {text}");
    assert_eq!(sample(&text, "idempotency_fences_total"), Some(1.0), "{text}");
    assert_eq!(sample(&text, "idempotency_keys_in_flight"), Some(0.0), "{text}");
    assert_eq!(sample(&text, "idempotency_oldest_in_flight_age_seconds"), Some(0.0), "{text}");
    assert!(sample(&text, "idempotency_sweep_lag_seconds").is_some(), "{text}");
    for secret in [replayed, slow, "metrics-never-sent", DEFAULT_ACCOUNT] {
        assert!(!text.contains(secret), "the text names {secret:?}: {text}");
    }
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_outbox_backlog_and_delivery_attempts_follow_a_receiver_outage() {
    let downstream = Downstream::start();
    let t = TestServer::start_with(|config| {
        config.checkout = Some(downstream.config());
        config.metrics_addr = Some("127.0.0.1:0".parse().expect("address"));
    })
    .await;
    downstream.mailbox_faults(r#"{"fail":1}"#).await;
    post_until_created(&t.server.url(), "metrics-outbox-key").await;
    eventually("a failed delivery counted, the message waiting", || async {
        let text = scrape(&t).await;
        sample(&text, "outbox_delivery_attempts_total{result=\"failed\"}").is_some_and(|n| n >= 1.0)
            && sample(&text, "outbox_backlog_messages") == Some(1.0)
    })
    .await;
    downstream.mailbox_faults("{}").await;
    eventually("delivered once, nothing waiting", || async {
        let text = scrape(&t).await;
        sample(&text, "outbox_delivery_attempts_total{result=\"delivered\"}") == Some(1.0)
            && sample(&text, "outbox_backlog_messages") == Some(0.0)
            && sample(&text, "outbox_oldest_message_age_seconds") == Some(0.0)
    })
    .await;
    assert_eq!(downstream.messages().await.len(), 1);
    t.stop().await;
}

#[tokio::test]
async fn the_mail_receiver_counts_the_re_deliveries_it_refused() {
    let downstream = Downstream::start();
    let client = reqwest::Client::new();
    let refused = || async {
        let url = format!("{}/metrics", downstream.mailbox.url);
        let text = client.get(url).send().await.expect("scrape").text().await.expect("text");
        sample(&text, "inbox_redeliveries_refused_total")
    };
    assert_eq!(refused().await, Some(0.0));
    let message = r#"{"id":"metrics-message-1","to":"a@customers.invalid","subject":"s","text":"t"}"#;
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let url = format!("{}/messages", downstream.mailbox.url);
        let sent = client.post(url).header("content-type", "application/json").body(message).send().await;
        statuses.push(sent.expect("deliver").status().as_u16());
    }
    assert_eq!(statuses, [201, 200, 200], "stored once, then refused as a duplicate twice");
    assert_eq!(refused().await, Some(2.0));
}

#[tokio::test]
async fn there_is_no_metrics_endpoint_unless_asked_for() {
    let t = TestServer::start().await;
    assert_eq!(t.server.metrics_addr(), None);
    let response = t.client.get(t.url("/metrics")).send().await.expect("get");
    assert_eq!(response.status(), 404, "not on the API's address");
    t.stop().await;
}
