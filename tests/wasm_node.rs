//! The JavaScript API in Node (no `localStorage`, no window): memory storage by default, scripted
//! retries over Node's `fetch` with one key, strict options, non-replayable bodies.
//!
//! Run by `wasm-pack test --node --release` (skipped by `--chrome`: this file is not configured
//! `run_in_browser`, so it is a Node suite). Needs `IF_TEST_SERVER` at compile time.
#![cfg(all(target_arch = "wasm32", feature = "legacy-web"))]

#[path = "wasm/support.rs"]
mod support;

use idempotent_fetch::IdempotentClient;
use serde_json::json;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_test::*;

use support::*;

#[wasm_bindgen_test]
fn server_address_was_given_at_compile_time() {
    assert!(server().starts_with("http://"), "IF_TEST_SERVER = {}", server());
}

#[wasm_bindgen_test]
fn runs_in_node_without_local_storage() {
    assert!(get(&js_sys::global(), "localStorage").is_undefined(), "this suite must run in Node");
    assert!(get(&js_sys::global(), "process").is_object());
}

#[wasm_bindgen_test]
fn memory_storage_is_the_default() {
    let default = client(JsValue::UNDEFINED);
    assert_eq!(JsValue::from(default.storage()).as_string().as_deref(), Some("memory"));
    assert!(JsValue::from(default.storage_fallback()).is_null(), "memory is the choice here, not a fallback");
    assert_eq!(default.namespace(), "default");
    let named = client(fast_options(&unique("ns-node"), json!({})));
    assert_eq!(JsValue::from(named.storage()).as_string().as_deref(), Some("memory"));
}

#[wasm_bindgen_test]
async fn a_scripted_retry_sequence_succeeds_with_one_key() {
    let (ns, scenario) = (unique("ns-node-retry"), unique("node-retry"));
    let client = client(fast_options(&ns, json!({ "retry": { "maxAttempts": 6 } })));
    let op = ok(
        begin(&client, "checkout:node", post(&scenario_url(&scenario, "503,reset,429,500,201"), r#"{"cart":7}"#)).await,
        "begin",
    );
    let key = key(&op);
    let retries = std::rc::Rc::new(std::cell::RefCell::new(Vec::<JsValue>::new()));
    let sink = retries.clone();
    let on_retry =
        Closure::<dyn FnMut(JsValue)>::new(move |event: JsValue| sink.borrow_mut().push(event)).into_js_value();
    let send_options = js_sys::Object::new();
    js_sys::Reflect::set(&send_options, &"onRetry".into(), &on_retry).unwrap();
    let result = ok(send(&op, Some(&send_options)).await, "send");
    assert_eq!(number(&result, "status"), 201.0);
    assert_eq!(number(&result, "attempts"), 5.0);
    assert_eq!(get(&result, "key").as_string(), Some(key.clone()));
    assert_eq!(retries.borrow().len(), 4, "one retry event per retried answer");
    for event in retries.borrow().iter() {
        assert_eq!(get(event, "key").as_string(), Some(key.clone()));
    }
    let log = assert_log_keys(&scenario, 5, &key).await;
    assert!(log.iter().all(|l| l.body == r#"{"cart":7}"#));
    // Memory storage still resumes within the process: a second begin of the same intent.
    let again = ok(
        begin(&client, "checkout:node", post(&scenario_url(&scenario, "503,reset,429,500,201"), r#"{"cart":7}"#)).await,
        "begin again",
    );
    assert_eq!(support::key(&again), key);
    assert_eq!(get(&again, "state").as_string().as_deref(), Some("succeeded"));
}

#[wasm_bindgen_test]
async fn retries_exhausted_keeps_the_key_in_memory() {
    let (ns, scenario) = (unique("ns-node-exhaust"), unique("node-exhaust"));
    let client = client(fast_options(&ns, json!({ "retry": { "maxAttempts": 2 } })));
    let op = ok(begin(&client, "checkout:x", post(&scenario_url(&scenario, "502,504,201"), "x")).await, "begin");
    let key = key(&op);
    let error = rejected(send(&op, None).await, "RETRIES_EXHAUSTED", "first send");
    assert_eq!(get(&error, "key").as_string(), Some(key.clone()));
    let pending = js_sys::Array::from(&ok(wait(client.pending()).await, "pending"));
    assert_eq!(pending.length(), 1);
    assert_eq!(get(&pending.get(0), "key").as_string(), Some(key.clone()));
    ok(send(&op, None).await, "second send");
    assert_log_keys(&scenario, 3, &key).await;
}

#[wasm_bindgen_test]
fn invalid_options_throw_invalid_options_naming_the_field() {
    let cases = [
        (json!({ "nmespace": "x" }), "nmespace"),
        (json!({ "retry": { "maxAttemps": 3 } }), "maxAttemps"),
        (json!({ "retry": { "maxAttempts": 0 } }), "retry.maxAttempts"),
        (json!({ "retry": { "maxAttempts": 2.5 } }), "retry.maxAttempts"),
        (json!({ "retry": { "baseDelayMs": -1 } }), "retry.baseDelayMs"),
        (json!({ "retry": { "baseDelayMs": "10" } }), "baseDelayMs"),
        (json!({ "retry": { "jitter": "lots" } }), "retry.jitter"),
        (json!({ "storage": "disk" }), "storage"),
        (json!({ "namespace": "a:b" }), "namespace"),
        (json!({ "namespace": "" }), "namespace"),
        (json!({ "headerName": "Bad Header" }), "headerName"),
        (json!({ "headerForm": "quoted" }), "headerForm"),
        (json!({ "keyTtlMs": 0 }), "keyTtlMs"),
        (json!({ "shouldRetry": 5 }), "shouldRetry"),
        (json!([1, 2]), "options"),
        (json!("local"), "options"),
    ];
    for (options, field) in cases {
        let text = options.to_string();
        match IdempotentClient::new(Some(js(options).unchecked_into())) {
            Ok(_) => panic!("options {text} were accepted"),
            Err(error) => {
                assert_eq!(code(&error), "INVALID_OPTIONS", "{text}: {}", describe(&error));
                let message = get(&error, "message").as_string().unwrap_or_default();
                assert!(message.contains(field), "options {text}: the message {message:?} should name {field:?}");
            }
        }
    }
}

#[wasm_bindgen_test]
async fn invalid_send_and_begin_options_are_rejected() {
    let (ns, scenario) = (unique("ns-node-opts"), unique("node-opts"));
    let client = client(fast_options(&ns, json!({})));
    let request = post(&scenario_url(&scenario, "201"), "x");
    let unknown = js(json!({ "replce": true }));
    rejected(
        wait(client.begin(
            JsValue::from_str("checkout:o").unchecked_into(),
            request.clone().unchecked_into(),
            Some(unknown.unchecked_into()),
        ))
        .await,
        "INVALID_OPTIONS",
        "begin options",
    );
    let op = ok(begin(&client, "checkout:o", request).await, "begin");
    rejected(send(&op, Some(&js(json!({ "signal": "nope" })))).await, "INVALID_OPTIONS", "send signal");
    rejected(send(&op, Some(&js(json!({ "onRety": 1 })))).await, "INVALID_OPTIONS", "send option typo");
    assert!(server_log(&scenario).await.is_empty(), "nothing was sent");
}

#[wasm_bindgen_test]
async fn a_readable_stream_body_is_body_not_replayable_and_nothing_is_sent() {
    let (ns, scenario) = (unique("ns-node-stream"), unique("node-stream"));
    let client = client(fast_options(&ns, json!({})));
    let stream = run_js(
        "return new ReadableStream({ start(c) { c.enqueue(new TextEncoder().encode('card=4242')); c.close(); } });",
    );
    let request = js(json!({ "url": scenario_url(&scenario, "201"), "method": "POST" }));
    js_sys::Reflect::set(&request, &"body".into(), &stream).unwrap();
    let error =
        rejected(begin(&client, "checkout:stream", request).await, "BODY_NOT_REPLAYABLE", "begin with a stream");
    assert!(get(&error, "message").as_string().unwrap_or_default().contains("ReadableStream"));
    let pending = js_sys::Array::from(&ok(wait(client.pending()).await, "pending"));
    assert_eq!(pending.length(), 0, "no intent was stored");
    assert!(server_log(&scenario).await.is_empty(), "nothing was sent");
}

#[wasm_bindgen_test]
async fn a_relative_url_is_invalid_request_in_node() {
    let client = client(fast_options(&unique("ns-node-url"), json!({})));
    rejected(begin(&client, "checkout:u", post("/api/orders", "x")).await, "INVALID_REQUEST", "relative URL");
}

#[wasm_bindgen_test]
async fn binary_bodies_are_sent_byte_for_byte_on_every_attempt() {
    let (ns, scenario) = (unique("ns-node-bin"), unique("node-bin"));
    let client = client(fast_options(&ns, json!({})));
    let bytes = js_sys::Uint8Array::from(&[0u8, 1, 2, 250, 255, 10, 13][..]);
    let request = js(json!({ "url": scenario_url(&scenario, "503,201"), "method": "PUT" }));
    js_sys::Reflect::set(&request, &"body".into(), &bytes).unwrap();
    let op = ok(begin(&client, "checkout:bin", request).await, "begin");
    ok(send(&op, None).await, "send");
    let log = assert_log_keys(&scenario, 2, &key(&op)).await;
    let expected: String = [0u8, 1, 2, 250, 255, 10, 13].iter().map(|&b| b as char).collect(); // latin1
    for entry in &log {
        assert_eq!(entry.method, "PUT");
        assert_eq!(entry.body, expected);
    }
}

#[wasm_bindgen_test]
async fn definite_answers_end_the_intent_after_one_attempt() {
    let ns = unique("ns-node-definite");
    let client = client(fast_options(&ns, json!({})));
    let bad_request = unique("node-400");
    let op = ok(begin(&client, "checkout:400", post(&scenario_url(&bad_request, "400,201"), "x")).await, "begin");
    let result = ok(send(&op, None).await, "a 400 resolves");
    assert_eq!(number(&result, "status"), 400.0);
    assert_eq!(get(&result, "ok").as_bool(), Some(false));
    assert_eq!(number(&result, "attempts"), 1.0);
    assert_eq!(get(&op, "state").as_string().as_deref(), Some("failed"));
    assert_log_keys(&bad_request, 1, &key(&op)).await;

    let reused = unique("node-422");
    let op = ok(begin(&client, "checkout:422", post(&scenario_url(&reused, "422,201"), "x")).await, "begin");
    let error = rejected(send(&op, None).await, "KEY_MISMATCH", "a 422");
    assert_eq!(get(&error, "key").as_string(), Some(key(&op)));
    assert_log_keys(&reused, 1, &key(&op)).await;
}

#[wasm_bindgen_test]
async fn retry_after_is_honoured() {
    let (ns, scenario) = (unique("ns-node-ra"), unique("node-retry-after"));
    let client = client(fast_options(&ns, json!({})));
    let op = ok(begin(&client, "checkout:ra", post(&scenario_url(&scenario, "429~1,201"), "x")).await, "begin");
    let started = js_sys::Date::now();
    let result = ok(send(&op, None).await, "send");
    let elapsed = js_sys::Date::now() - started;
    assert_eq!(number(&result, "attempts"), 2.0);
    assert!(elapsed >= 900.0, "Retry-After: 1 waited only {elapsed} ms (the backoff alone is <= 20 ms)");
    assert_log_keys(&scenario, 2, &key(&op)).await;
}
