//! Fault injection is a test affordance: off without `--enable-faults`; with it, the `store-500` switch
//! (a failure stored as the key's outcome and replayed, as Stripe does) and the `panic` switch.

mod common;

use common::{assert_fresh, assert_problem, header, TestServer, MUGS};

#[tokio::test]
async fn without_enable_faults_the_endpoints_are_404_and_x_fault_is_ignored() {
    let t = TestServer::start_with(|config| config.faults = None).await;
    let get = t.client.get(t.url("/api/faults")).send().await.expect("get");
    assert_problem(get, 404, "not-found").await;
    let put = t.client.put(t.url("/api/faults")).body(r#"{"status429":1}"#).send().await.expect("put");
    assert_problem(put, 404, "not-found").await;
    for fault in ["429", "fail-before-work", "crash-before-commit", "store-500", "panic", "meteor"] {
        let key = format!("k-{fault}");
        let response = t.post(Some(&key), MUGS, &[("x-fault", fault)]).await.expect("post");
        assert_fresh(&response);
    }
    assert_eq!(t.count_orders(), 6);
    t.stop().await;
}

#[tokio::test]
async fn a_stored_500_is_replayed_on_every_retry_like_stripe() {
    let t = TestServer::start().await;
    let first = t.post(Some("k-500"), MUGS, &[("x-fault", "store-500")]).await.expect("first");
    assert_eq!(header(&first, "idempotent-replayed"), None, "the first answer is not a replay");
    let first_body = assert_problem(first, 500, "stored-failure").await;
    // Retries, with or without the fault header: the same 500, marked replayed, byte for byte.
    for headers in [&[("x-fault", "store-500")][..], &[][..]] {
        let again = t.post(Some("k-500"), MUGS, headers).await.expect("again");
        assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
        assert_eq!(assert_problem(again, 500, "stored-failure").await, first_body);
    }
    assert_eq!(t.count_orders(), 0);
    assert_eq!(t.count_keys(), 1);

    // The probabilistic form does the same for every fresh key.
    let put = t.client.put(t.url("/api/faults")).body(r#"{"store500":1}"#).send().await.expect("put");
    assert_eq!(put.status(), 200);
    assert_problem(t.post(Some("k-500b"), MUGS, &[]).await.expect("post"), 500, "stored-failure").await;
    t.client.put(t.url("/api/faults")).body("{}").send().await.expect("put");
    let replay = t.post(Some("k-500b"), MUGS, &[]).await.expect("post");
    assert_eq!(header(&replay, "idempotent-replayed"), Some("true"));
    assert_eq!(replay.status(), 500);
    assert_eq!(t.count_orders(), 0);
    t.stop().await;
}

#[tokio::test]
async fn a_panicking_handler_is_answered_500_and_the_key_stays_retryable() {
    let t = TestServer::start().await;
    let panicked = t.post(Some("k-panic"), MUGS, &[("x-fault", "panic")]).await.expect("an answer, not a reset");
    assert_problem(panicked, 500, "internal-error").await;
    assert_eq!(t.count_keys(), 0);
    // The process still serves, and the key was released by the unwind: the retry does the work once.
    let health = t.client.get(t.url("/api/health")).send().await.expect("health");
    assert_eq!(health.status(), 200);
    let retry = t.post(Some("k-panic"), MUGS, &[]).await.expect("retry");
    assert_fresh(&retry);
    assert_eq!(t.count_orders(), 1);
    t.stop().await;
}
