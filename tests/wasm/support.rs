//! Shared helpers of the wasm-bindgen-test suites (`tests/wasm_browser.rs`, `tests/wasm_node.rs`).
//!
//! The suites drive the exported classes exactly as JavaScript would: options and requests are
//! plain JS objects (built from JSON), promises are awaited with `JsFuture`, operations are the JS
//! wrapper objects (`op.key`, `op.send(...)` through `Reflect`), errors are read by their `code`.
//!
//! The scripted test server (`tests/support/test-server.mjs`) is found through `IF_TEST_SERVER`,
//! read at COMPILE time (`cargo xtask test` sets it, layer e). Without it every test that needs the
//! server fails with a message saying how to run it: these tests never skip silently.
#![allow(dead_code)] // each suite uses a different subset

use idempotent_fetch::IdempotentClient;
use js_sys::{Function, Object, Promise, Reflect, JSON};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

/// Base URL of the scripted test server, e.g. `http://127.0.0.1:40123`.
pub fn server() -> &'static str {
    match option_env!("IF_TEST_SERVER") {
        Some(url) if url.starts_with("http") => url.trim_end_matches('/'),
        _ => panic!(
            "IF_TEST_SERVER was not set when these tests were compiled. Run them with `cargo xtask test`, \
             or start `node tests/support/test-server.mjs`, export IF_TEST_SERVER=<the printed \
             http://127.0.0.1:PORT> and rebuild (wasm-pack test ...)."
        ),
    }
}

/// A name unique to this test and this run (the server's logs outlive a run; browsers may not
/// start with empty storage): `<prefix>-<time>-<random>`.
pub fn unique(prefix: &str) -> String {
    let now = js_sys::Date::now() as u64;
    let random = (js_sys::Math::random() * 1e9) as u64; // test ids only; keys come from the CSPRNG
    format!("{prefix}-{now:x}-{random:x}")
}

/// `/s/<scenario>?script=<script>` on the test server.
pub fn scenario_url(scenario: &str, script: &str) -> String {
    format!("{}/s/{scenario}?script={script}", server())
}

/// A JS value from JSON text (panics on bad JSON: a bug in the test).
pub fn js(value: serde_json::Value) -> JsValue {
    JSON::parse(&value.to_string()).expect("test JSON parses")
}

/// Client options with fast retries: `{ namespace, retry: { baseDelayMs: 5, maxDelayMs: 20, ... } }`
/// merged with `extra` (top-level fields; `retry` fields are merged into the fast defaults).
pub fn fast_options(namespace: &str, extra: serde_json::Value) -> JsValue {
    let mut options = serde_json::json!({
        "namespace": namespace,
        "retry": { "baseDelayMs": 5, "maxDelayMs": 20, "maxAttempts": 5 },
    });
    if let serde_json::Value::Object(extra) = extra {
        for (name, value) in extra {
            if name == "retry" {
                if let serde_json::Value::Object(retry) = value {
                    for (field, v) in retry {
                        options["retry"][field] = v;
                    }
                }
            } else {
                options[name] = value;
            }
        }
    }
    js(options)
}

/// `new IdempotentClient(options)`, panicking with the error's code and message if it throws.
pub fn client(options: JsValue) -> IdempotentClient {
    match IdempotentClient::new(Some(options.unchecked_into())) {
        Ok(client) => client,
        Err(e) => panic!("new IdempotentClient failed: {}", describe(&e)),
    }
}

/// Awaits a promise-like value.
pub async fn wait(promise: impl Into<JsValue>) -> Result<JsValue, JsValue> {
    let promise: Promise = promise.into().dyn_into().expect("a Promise");
    JsFuture::from(promise).await
}

/// `client.begin(intentId, request)`: the operation (a JS `IdempotentOperation`) or the error.
pub async fn begin(client: &IdempotentClient, intent_id: &str, request: JsValue) -> Result<JsValue, JsValue> {
    wait(client.begin(JsValue::from_str(intent_id).unchecked_into(), request.unchecked_into(), None)).await
}

/// A POST of `body` to `url`, as an intent request object.
pub fn post(url: &str, body: &str) -> JsValue {
    js(serde_json::json!({ "url": url, "method": "POST", "body": body }))
}

/// `op[name]` as a JS value.
pub fn get(target: &JsValue, name: &str) -> JsValue {
    Reflect::get(target, &JsValue::from_str(name)).unwrap_or(JsValue::UNDEFINED)
}

/// `op.key`.
pub fn key(op: &JsValue) -> String {
    get(op, "key").as_string().expect("op.key is a string")
}

/// `op.send(options)`: the `SendResult` or the rejection.
pub async fn send(op: &JsValue, options: Option<&JsValue>) -> Result<JsValue, JsValue> {
    let method: Function = get(op, "send").dyn_into().expect("op.send is a function");
    let promise = match options {
        Some(options) => method.call1(op, options)?,
        None => method.call0(op)?,
    };
    wait(promise).await
}

/// `error.code` of an `IdempotentFetchError` (panics if `error` is not one).
pub fn code(error: &JsValue) -> String {
    assert_eq!(
        get(error, "name").as_string().as_deref(),
        Some("IdempotentFetchError"),
        "not an IdempotentFetchError: {}",
        describe(error)
    );
    get(error, "code").as_string().expect("error.code is a string")
}

/// `"CODE: message"` for messages.
pub fn describe(error: &JsValue) -> String {
    let code = get(error, "code").as_string().unwrap_or_else(|| "?".into());
    let message =
        get(error, "message").as_string().or_else(|| error.as_string()).unwrap_or_else(|| format!("{error:?}"));
    format!("{code}: {message}")
}

/// Unwraps a result, describing a rejection.
pub fn ok(result: Result<JsValue, JsValue>, what: &str) -> JsValue {
    result.unwrap_or_else(|e| panic!("{what} rejected: {}", describe(&e)))
}

/// Unwraps a rejection with the expected `code`, describing an unexpected success.
pub fn rejected(result: Result<JsValue, JsValue>, expected_code: &str, what: &str) -> JsValue {
    match result {
        Ok(value) => {
            panic!("{what} should reject with {expected_code} but resolved to {:?}", JSON::stringify(&value).ok())
        }
        Err(error) => {
            assert_eq!(code(&error), expected_code, "{what}: {}", describe(&error));
            error
        }
    }
}

/// A number property as `f64` (panics if absent).
pub fn number(target: &JsValue, name: &str) -> f64 {
    get(target, name).as_f64().unwrap_or_else(|| panic!("{name} is not a number"))
}

/// One request the test server received.
#[derive(Debug, Clone)]
pub struct Logged {
    /// HTTP method.
    pub method: String,
    /// The `idempotency-key` header, if any.
    pub key: Option<String>,
    /// The body as latin1 text.
    pub body: String,
    /// All headers (lower-case names).
    pub headers: JsValue,
}

impl Logged {
    /// A received header.
    pub fn header(&self, name: &str) -> Option<String> {
        get(&self.headers, name).as_string()
    }
}

/// What the server received for `scenario` (`GET /log/<scenario>`), in order. Uses the global
/// `fetch` directly, so it works in windows and Node alike.
pub async fn server_log(scenario: &str) -> Vec<Logged> {
    let fetch: Function = get(&js_sys::global(), "fetch").dyn_into().expect("global fetch");
    let url = format!("{}/log/{scenario}", server());
    let response =
        wait(fetch.call1(&JsValue::UNDEFINED, &JsValue::from_str(&url)).expect("fetch call")).await.expect("GET /log");
    let json: Function = get(&response, "json").dyn_into().expect("response.json");
    let entries = wait(json.call0(&response).expect("json()")).await.expect("log JSON");
    js_sys::Array::from(&entries)
        .iter()
        .map(|entry| Logged {
            method: get(&entry, "method").as_string().unwrap_or_default(),
            key: get(&entry, "key").as_string(),
            body: get(&entry, "body").as_string().unwrap_or_default(),
            headers: get(&entry, "headers"),
        })
        .collect()
}

/// Asserts the server got `count` requests for `scenario`, all carrying `key`.
pub async fn assert_log_keys(scenario: &str, count: usize, key: &str) -> Vec<Logged> {
    let log = server_log(scenario).await;
    assert_eq!(log.len(), count, "requests received for {scenario}: {log:?}");
    for (i, entry) in log.iter().enumerate() {
        assert_eq!(entry.key.as_deref(), Some(key), "attempt {} of {scenario} carried another key", i + 1);
    }
    log
}

/// A plain object's own enumerable property names.
pub fn keys_of(value: &JsValue) -> Vec<String> {
    Object::keys(value.unchecked_ref::<Object>()).iter().filter_map(|k| k.as_string()).collect()
}

/// Runs JavaScript source as the body of a function and returns its result (test plumbing such
/// as overriding `Storage.prototype.setItem`).
pub fn run_js(body: &str) -> JsValue {
    Function::new_no_args(body).call0(&JsValue::UNDEFINED).unwrap_or_else(|e| panic!("test JS threw: {e:?}"))
}
