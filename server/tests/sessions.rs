//! Signed sessions over real HTTP: the cookie a browser keeps, the bearer token, and what neither allows.

mod common;

use common::{assert_fresh, assert_problem, bearer, header, TestServer, MUGS};
use reqwest::Client;

/// `POST /api/session` with a JSON body.
async fn new_session(client: &Client, t: &TestServer, body: &str) -> reqwest::Response {
    client
        .post(t.url("/api/session"))
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .expect("session")
}

#[tokio::test]
async fn a_browser_gets_a_fresh_account_in_an_httponly_strict_cookie_and_keeps_it() {
    let t = TestServer::start().await;
    let browser = Client::builder().cookie_store(true).build().expect("client");
    let first = new_session(&browser, &t, "{}").await;
    assert_eq!(first.status(), 200);
    let cookie = header(&first, "set-cookie").expect("set-cookie").to_owned();
    for attribute in ["if_session=", "HttpOnly", "SameSite=Strict", "Path=/", "Max-Age="] {
        assert!(cookie.contains(attribute), "{attribute} missing in {cookie}");
    }
    assert!(!cookie.contains("Secure"), "not Secure without --secure-cookie: {cookie}");
    let body: serde_json::Value = first.json().await.expect("json");
    let account = body["accountId"].as_str().expect("accountId").to_owned();
    assert!(account.starts_with("acct_") && account.len() == 21, "{account}");

    // The cookie alone authenticates: an order and the list, no header.
    let order = browser
        .post(t.url("/api/orders"))
        .header("content-type", "application/json")
        .header("idempotency-key", "cookie-key")
        .body(MUGS)
        .send()
        .await
        .expect("order");
    assert_fresh(&order);
    let listed: serde_json::Value =
        browser.get(t.url("/api/orders")).send().await.expect("list").json().await.expect("json");
    assert_eq!(listed["accountId"], account.as_str());
    assert_eq!(listed["orders"].as_array().map(Vec::len), Some(1));

    // Asking again with the cookie keeps the account (a reload of the page).
    let again: serde_json::Value = new_session(&browser, &t, "{}").await.json().await.expect("json");
    assert_eq!(again["accountId"], account.as_str());
    let current: serde_json::Value =
        browser.get(t.url("/api/session")).send().await.expect("get").json().await.expect("json");
    assert_eq!(current["accountId"], account.as_str());

    // Another browser gets another account, which sees none of these orders or keys.
    let other = Client::builder().cookie_store(true).build().expect("client");
    let theirs: serde_json::Value = new_session(&other, &t, "").await.json().await.expect("json");
    assert_ne!(theirs["accountId"], account.as_str());
    let listed: serde_json::Value =
        other.get(t.url("/api/orders")).send().await.expect("list").json().await.expect("j");
    assert_eq!(listed["orders"].as_array().map(Vec::len), Some(0));
    let same_key = other
        .post(t.url("/api/orders"))
        .header("content-type", "application/json")
        .header("idempotency-key", "cookie-key")
        .body(MUGS)
        .send()
        .await
        .expect("order");
    assert_fresh(&same_key);
    t.stop().await;
}

#[tokio::test]
async fn requests_without_a_valid_session_are_401_and_store_nothing() {
    let t = TestServer::start().await;
    let forged = bearer("victim").replace("victim", "thief");
    let other_secret = {
        let key = idempotent_fetch_server::session::SessionKey::from_secret(&[7; 32]).expect("key");
        let account = idempotent_fetch_server::keys::AccountId::parse("victim").expect("account");
        format!("Bearer {}", key.issue(account, idempotent_fetch_server::unix_now()).token)
    };
    for auth in ["", "Bearer ", "Bearer nonsense", "Basic dXNlcjpwYXNz", forged.as_str(), other_secret.as_str()] {
        let response = t.post(Some("k-401"), MUGS, &[("authorization", auth)]).await.expect("post");
        assert_problem(response, 401, "unauthenticated").await;
        let list = t.client.get(t.url("/api/orders")).header("authorization", auth).send().await.expect("list");
        assert_problem(list, 401, "unauthenticated").await;
    }
    // The old trusted header means nothing now.
    let response = t.client.get(t.url("/api/orders")).header("x-account-id", "victim").send().await.expect("list");
    assert_problem(response, 401, "unauthenticated").await;
    assert_eq!(t.count_keys(), 0);
    t.stop().await;
}

#[tokio::test]
async fn session_requests_must_be_json_and_named_accounts_need_enable_faults() {
    let t = TestServer::start().await;
    // A cross-site form can only send these content types: refused, so it cannot swap a browser's session.
    for content_type in ["application/x-www-form-urlencoded", "text/plain", "multipart/form-data"] {
        let response = t
            .client
            .post(t.url("/api/session"))
            .header("content-type", content_type)
            .body("account=x")
            .send()
            .await
            .expect("post");
        assert_problem(response, 415, "unsupported-media-type").await;
    }
    let bad = new_session(&t.client, &t, r#"{"account":"no/slash"}"#).await;
    assert_problem(bad, 400, "invalid-account-id").await;
    let bad = new_session(&t.client, &t, r#"{"acount":"typo"}"#).await;
    assert_problem(bad, 400, "invalid-session-request").await;
    // With faults enabled (the test harnesses), a session for a named account.
    let named: serde_json::Value =
        new_session(&t.client, &t, r#"{"account":"acct_42"}"#).await.json().await.expect("j");
    assert_eq!(named["accountId"], "acct_42");
    let token = named["token"].as_str().expect("token");
    let listed: serde_json::Value =
        common::json(t.client.get(t.url("/api/orders")).header("authorization", format!("Bearer {token}"))).await;
    assert_eq!(listed["accountId"], "acct_42");
    t.stop().await;

    let t = TestServer::start_with(|config| config.faults = None).await;
    let refused = new_session(&t.client, &t, r#"{"account":"acct_42"}"#).await;
    assert_problem(refused, 403, "named-sessions-disabled").await;
    t.stop().await;
}

#[tokio::test]
async fn secure_cookie_flag_marks_the_cookie_secure() {
    let t = TestServer::start_with(|config| config.secure_cookie = true).await;
    let response = new_session(&t.client, &t, "{}").await;
    let cookie = header(&response, "set-cookie").expect("set-cookie");
    assert!(cookie.contains("; Secure"), "{cookie}");
    t.stop().await;
}
