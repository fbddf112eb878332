//! The Idempotency-Key protocol over real HTTP against a real SQLite file.

mod common;

use std::time::Duration;

use common::{
    assert_fresh, assert_one_order, assert_problem, assert_replayed, bearer, header, json, post_concurrently,
    spawn_post, TestServer, GRINDER, MUGS,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_requests_with_one_key_create_one_order() {
    let t = TestServer::start().await;
    let answers = post_concurrently(&t.client, &[t.server.url()], 50, "same-key", MUGS, &[]).await;
    assert_one_order(&answers);
    assert_eq!(t.count_orders(), 1);
    // Whoever got 409 retries and gets the replay.
    let retry = t.post(Some("same-key"), MUGS, &[]).await.expect("retry");
    assert_eq!(retry.status(), 201);
    assert_eq!(t.count_orders(), 1);
    t.stop().await;
}

#[tokio::test]
async fn replay_is_byte_identical() {
    let t = TestServer::start().await;
    let first = t.post(Some("k-replay"), MUGS, &[]).await.expect("first");
    assert_fresh(&first);
    assert_eq!(header(&first, "content-type"), Some("application/json"));
    let first_location = header(&first, "location").map(str::to_owned);
    let first_body = first.bytes().await.expect("body");

    // The raw token and the IETF sf-string form name the same key.
    for key in ["k-replay", "\"k-replay\""] {
        let again = t.post(Some(key), MUGS, &[]).await.expect("replay");
        assert_replayed(&again);
        assert_eq!(header(&again, "content-type"), Some("application/json"));
        assert_eq!(header(&again, "location").map(str::to_owned), first_location);
        assert_eq!(again.bytes().await.expect("body"), first_body);
    }
    assert_eq!(t.count_orders(), 1);

    let order: serde_json::Value = serde_json::from_slice(&first_body).expect("json");
    assert_eq!(order["idempotencyKey"], "k-replay");
    assert_eq!(order["totalCents"], 2400);
    let listed = t.get_json("/api/orders").await;
    assert_eq!(listed["orders"][0], order);
    t.stop().await;
}

#[tokio::test]
async fn rejected_bodies_are_stored_and_replayed_too() {
    let t = TestServer::start().await;
    let bad = r#"{"items":[{"sku":"unicorn","qty":1}]}"#;
    let first = t.post(Some("k-bad"), bad, &[]).await.expect("first");
    assert_eq!(header(&first, "idempotent-replayed"), None);
    let first_body = assert_problem(first, 400, "invalid-order").await;
    let again = t.post(Some("k-bad"), bad, &[]).await.expect("again");
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    assert_eq!(assert_problem(again, 400, "invalid-order").await, first_body);
    assert_eq!(t.count_orders(), 0);
    t.stop().await;
}

#[tokio::test]
async fn same_key_different_body_is_422() {
    let t = TestServer::start().await;
    assert_eq!(t.post_status(Some("k-422"), MUGS, &[]).await, 201);
    let other = t.post(Some("k-422"), GRINDER, &[]).await.expect("second");
    assert_problem(other, 422, "idempotency-key-reused").await;
    assert_eq!(t.count_orders(), 1);
    t.stop().await;
}

#[tokio::test]
async fn missing_or_malformed_keys_are_400() {
    let t = TestServer::start().await;
    assert_problem(t.post(None, MUGS, &[]).await.expect("missing"), 400, "missing-idempotency-key").await;
    let long = "k".repeat(256);
    for bad in ["a b", "\"unterminated", "\"\"", long.as_str(), "k\u{7f}"] {
        let response = t.post(Some(bad), MUGS, &[]).await;
        match response {
            Ok(response) => {
                assert_problem(response, 400, "malformed-idempotency-key").await;
            }
            // reqwest refuses to send some invalid header values at all; that is fine too.
            Err(e) => assert!(e.is_builder(), "{bad:?}: {e}"),
        }
    }
    assert_eq!(t.count_keys(), 0);
    assert_eq!(t.count_orders(), 0);
    t.stop().await;
}

#[tokio::test]
async fn a_key_in_flight_gets_409_with_retry_after() {
    let t = TestServer::start().await;
    let slow = spawn_post(&t.client, &t.server.url(), "k-slow", MUGS, &[("x-fault", "latency=1500")]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let busy = t.post(Some("k-slow"), MUGS, &[]).await.expect("second");
    assert_eq!(header(&busy, "retry-after"), Some("1"));
    assert_problem(busy, 409, "request-in-flight").await;

    let first = slow.await.expect("task").expect("first");
    assert_fresh(&first);
    let replay = t.post(Some("k-slow"), MUGS, &[]).await.expect("third");
    assert_replayed(&replay);
    assert_eq!(t.count_orders(), 1);
    t.stop().await;
}

#[tokio::test]
async fn drop_after_commit_then_retry_replays() {
    let t = TestServer::start().await;
    let dropped = t.post(Some("k-drop"), MUGS, &[("x-fault", "drop-after-commit")]).await;
    let error = dropped.expect_err("the client must see a network error, not an answer");
    assert!(!error.is_status() && !error.is_builder(), "{error:?}");
    // The order was committed before the connection was dropped.
    assert_eq!(t.count_orders(), 1);

    // The retry carries the same headers (as the client library would): it gets the replay.
    let retry = t.post(Some("k-drop"), MUGS, &[("x-fault", "drop-after-commit")]).await.expect("retry");
    assert_replayed(&retry);
    let order: serde_json::Value = retry.json().await.expect("json");
    assert_eq!(order["idempotencyKey"], "k-drop");
    assert_eq!(t.count_orders(), 1);
    t.stop().await;
}

#[tokio::test]
async fn crash_before_commit_leaves_nothing_and_the_retry_works_once() {
    let t = TestServer::start().await;
    let crashed = t.post(Some("k-crash"), MUGS, &[("x-fault", "crash-before-commit")]).await.expect("answer");
    assert_problem(crashed, 500, "crashed-before-commit").await;
    assert_eq!(t.count_keys(), 0);
    assert_eq!(t.count_orders(), 0);

    let retry = t.post(Some("k-crash"), MUGS, &[]).await.expect("retry");
    assert_fresh(&retry);
    let again = t.post(Some("k-crash"), MUGS, &[]).await.expect("again");
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    assert_eq!(t.count_orders(), 1);
    t.stop().await;
}

#[tokio::test]
async fn accounts_are_isolated() {
    let t = TestServer::start().await;
    let mut first_ids = Vec::new();
    for account in ["acct_a", "acct-b"] {
        let auth = bearer(account);
        let response = t.post(Some("shared-key"), MUGS, &[("authorization", &auth)]).await.expect("post");
        assert_fresh(&response);
        let order: serde_json::Value = response.json().await.expect("json");
        first_ids.push(order["id"].as_str().map(str::to_owned).expect("id"));
    }
    assert_eq!(t.count_orders(), 2);
    for (account, own) in [("acct_a", &first_ids[0]), ("acct-b", &first_ids[1])] {
        let auth = bearer(account);
        let listed = json(t.client.get(t.url("/api/orders")).header("authorization", &auth)).await;
        assert_eq!(listed["accountId"], account);
        assert_eq!(listed["orders"].as_array().map(Vec::len), Some(1));
        assert_eq!(listed["orders"][0]["accountId"], account);
        assert_eq!(listed["orders"][0]["id"], own.as_str());
    }
    // Another account's order is not found, even by id.
    let foreign =
        t.client.get(t.url(&format!("/api/orders/{}", first_ids[0]))).header("authorization", bearer("acct-b"));
    assert_problem(foreign.send().await.expect("get"), 404, "order-not-found").await;
    // A third account replays nothing with the same key: it is a new key there.
    let third = t.post(Some("shared-key"), MUGS, &[("authorization", &bearer("acct_c"))]).await.expect("post");
    assert_fresh(&third);
    // The default test account has none of them.
    let demo = t.get_json("/api/orders").await;
    assert_eq!(demo["accountId"], "demo");
    assert_eq!(demo["orders"].as_array().map(Vec::len), Some(0));
    t.stop().await;
}

#[tokio::test]
async fn expired_keys_are_swept_and_then_behave_as_new() {
    let t = TestServer::start().await;
    assert_eq!(t.post_status(Some("k-old"), MUGS, &[]).await, 201);
    // Nothing is older than the retention window yet.
    let now = idempotent_fetch_server::unix_now();
    assert_eq!(t.sweep(now).await, Some(0));
    assert_eq!(t.count_keys(), 1);
    // Two days later it is.
    let later = now + 2 * 86_400;
    assert_eq!(t.sweep(later).await, Some(1));
    assert_eq!(t.count_keys(), 0);
    let again = t.post(Some("k-old"), MUGS, &[]).await.expect("post");
    assert_fresh(&again);
    assert_eq!(t.count_orders(), 2);
    t.stop().await;
}

#[tokio::test]
async fn fault_config_is_validated_and_applied() {
    let t = TestServer::start().await;
    let faults = t.url("/api/faults");
    let initial = t.get_json("/api/faults").await;
    assert_eq!(
        initial,
        serde_json::json!({"failBeforeWork":0.0,"dropAfterCommit":0.0,"status429":0.0,
                           "retryAfterSecs":1,"latencyMs":0,"latencyProbability":0.0,"store500":0.0,
                           "crashAfterCharge":0.0,"crashAfterFinish":0.0,"crashAfterDelivery":0.0})
    );
    for bad in [
        r#"{"failBeforeWork":1.5}"#,
        r#"{"dropAfterCommit":-0.1}"#,
        r#"{"status429":"often"}"#,
        r#"{"retryAfterSecs":-1}"#,
        r#"{"latencyMs":600000}"#,
        r#"{"surprise":1}"#,
        "not json",
    ] {
        let response = t.client.put(&faults).body(bad).send().await.expect("put");
        assert_problem(response, 400, "invalid-fault-config").await;
    }
    let unchanged = t.get_json("/api/faults").await;
    assert_eq!(unchanged, initial);

    // Always 429: answered before any work.
    let put = t.client.put(&faults).body(r#"{"status429":1,"retryAfterSecs":7}"#).send().await.expect("put");
    assert_eq!(put.status(), 200);
    let limited = t.post(Some("k-429"), MUGS, &[]).await.expect("post");
    assert_eq!(header(&limited, "retry-after"), Some("7"));
    assert_problem(limited, 429, "rate-limited").await;

    // Always 503 before work: nothing is stored.
    t.client.put(&faults).body(r#"{"failBeforeWork":1}"#).send().await.expect("put");
    assert_problem(t.post(Some("k-503"), MUGS, &[]).await.expect("post"), 503, "unavailable").await;
    assert_eq!(t.count_keys(), 0);

    // Per-request X-Fault overrides the dice; bad values are 400.
    let forced = t.post(Some("k-503"), MUGS, &[("x-fault", "latency=10")]).await.expect("post");
    assert_eq!(forced.status(), 201);
    let bad = t.post(Some("k-x"), MUGS, &[("x-fault", "meteor")]).await.expect("post");
    assert_problem(bad, 400, "invalid-fault-header").await;

    // Back to no faults.
    t.client.put(&faults).body("{}").send().await.expect("put");
    assert_eq!(t.post_status(Some("k-429"), MUGS, &[]).await, 201);
    assert_eq!(t.count_orders(), 2);
    t.stop().await;
}

#[tokio::test]
async fn catalogue_health_and_unknown_api_paths() {
    let t = TestServer::start().await;
    let health = t.get_json("/api/health").await;
    assert_eq!(health["status"], "ok");
    assert_eq!(health["store"], "sqlite");
    let products = t.get_json("/api/products").await;
    assert!(products["products"].as_array().is_some_and(|p| p.iter().any(|p| p["sku"] == "mug")));
    let missing = t.client.get(t.url("/api/nope")).send().await.expect("404");
    assert_problem(missing, 404, "not-found").await;
    t.stop().await;
}
