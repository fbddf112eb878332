//! The JavaScript API in headless Chromium, with real `localStorage`/`sessionStorage` and real
//! `fetch` to the scripted test server: one key per intent across attempts, sends and reloads;
//! aborts, exhaustion, full/corrupt/tampered storage, secrets never stored, namespaces apart.
//!
//! Run by `wasm-pack test --headless --chrome --release` (skipped by `--node`: this file is
//! configured `run_in_browser`). Needs `IF_TEST_SERVER` at compile time (see `wasm/support.rs`).
#![cfg(all(target_arch = "wasm32", feature = "legacy-web"))]

#[path = "wasm/support.rs"]
mod support;

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::json;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_test::*;

use support::*;

wasm_bindgen_test_configure!(run_in_browser);

const PREFIX: &str = "idempotent-fetch:v1:";

fn local() -> web_sys::Storage {
    web_sys::window().expect("window").local_storage().expect("localStorage readable").expect("localStorage exists")
}

fn session() -> web_sys::Storage {
    web_sys::window()
        .expect("window")
        .session_storage()
        .expect("sessionStorage readable")
        .expect("sessionStorage exists")
}

fn slot(namespace: &str, intent_id: &str) -> String {
    format!("{PREFIX}{namespace}:{intent_id}")
}

/// The stored record of an intent, parsed (panics if absent).
fn stored(storage: &web_sys::Storage, namespace: &str, intent_id: &str) -> JsValue {
    let text = storage
        .get_item(&slot(namespace, intent_id))
        .unwrap()
        .unwrap_or_else(|| panic!("no stored record for {intent_id}"));
    js_sys::JSON::parse(&text).expect("stored record is JSON")
}

/// Every `(key, value)` in a storage.
fn entries(storage: &web_sys::Storage) -> Vec<(String, String)> {
    (0..storage.length().unwrap())
        .filter_map(|i| storage.key(i).unwrap())
        .map(|k| {
            let v = storage.get_item(&k).unwrap().unwrap_or_default();
            (k, v)
        })
        .collect()
}

#[wasm_bindgen_test]
fn server_address_was_given_at_compile_time() {
    assert!(server().starts_with("http://"), "IF_TEST_SERVER = {}", server());
}

#[wasm_bindgen_test]
async fn defaults_to_local_storage_without_fallback() {
    let client = client(fast_options(&unique("ns-default"), json!({})));
    assert_eq!(JsValue::from(client.storage()).as_string().as_deref(), Some("local"));
    assert!(JsValue::from(client.storage_fallback()).is_null());
}

#[wasm_bindgen_test]
async fn same_key_on_every_attempt_503_503_201_succeeds_in_3_attempts() {
    let (ns, scenario) = (unique("ns-key"), unique("key-every-attempt"));
    let client = client(fast_options(&ns, json!({})));
    let url = scenario_url(&scenario, "503,503,201");
    let op = ok(begin(&client, "checkout:1", post(&url, r#"{"cart":1}"#)).await, "begin");
    let key = key(&op);
    assert_eq!(key.len(), 36, "a UUID: {key}");
    assert_eq!(&key[14..15], "4", "a UUID v4: {key}");
    // Before sending, the key is already stored as pending (a reload right now would keep it).
    let record = stored(&local(), &ns, "checkout:1");
    assert_eq!(get(&record, "key").as_string().as_deref(), Some(key.as_str()));
    assert_eq!(get(&record, "state").as_string().as_deref(), Some("pending"));

    let result = ok(send(&op, None).await, "send");
    assert_eq!(number(&result, "status"), 201.0);
    assert_eq!(get(&result, "ok").as_bool(), Some(true));
    assert_eq!(number(&result, "attempts"), 3.0);
    assert_eq!(get(&result, "key").as_string().as_deref(), Some(key.as_str()));
    assert_eq!(get(&op, "state").as_string().as_deref(), Some("succeeded"));
    let log = assert_log_keys(&scenario, 3, &key).await;
    assert!(log.iter().all(|l| l.method == "POST" && l.body == r#"{"cart":1}"#), "{log:?}");
    // The answer is readable: the server echoes the key it saw.
    let response = get(&result, "response");
    let json: js_sys::Function = get(&response, "json").dyn_into().unwrap();
    let body = wait(json.call0(&response).unwrap()).await.unwrap();
    assert_eq!(get(&body, "key").as_string().as_deref(), Some(key.as_str()));
    assert_eq!(number(&body, "attempt"), 3.0);
}

#[wasm_bindgen_test]
async fn a_reload_resumes_the_same_key_from_local_storage() {
    let (ns, scenario) = (unique("ns-reload"), unique("reload"));
    let url = scenario_url(&scenario, "503,201");
    let request = || post(&url, "amount=4200");
    let first_key = {
        // The page before the reload: one attempt, then the tab "closes" (the client is dropped).
        let client = client(fast_options(&ns, json!({ "retry": { "maxAttempts": 1 } })));
        let op = ok(begin(&client, "checkout:reload", request()).await, "begin");
        let error = rejected(send(&op, None).await, "RETRIES_EXHAUSTED", "first send");
        assert_eq!(get(&error, "key").as_string(), Some(key(&op)));
        key(&op)
    };
    // After the reload: a brand-new client over the same localStorage.
    let client = client(fast_options(&ns, json!({})));
    let pending = ok(wait(client.pending()).await, "pending");
    let pending = js_sys::Array::from(&pending);
    assert_eq!(pending.length(), 1);
    assert_eq!(get(&pending.get(0), "key").as_string(), Some(first_key.clone()));
    assert_eq!(get(&pending.get(0), "state").as_string().as_deref(), Some("pending"));

    let op = ok(begin(&client, "checkout:reload", request()).await, "begin after reload");
    assert_eq!(key(&op), first_key, "a reload must not mint a new key");
    assert_eq!(get(&op, "resumed").as_bool(), Some(true));
    assert_eq!(number(&op, "attempts"), 1.0);
    let result = ok(send(&op, None).await, "send after reload");
    assert_eq!(number(&result, "status"), 201.0);
    assert_eq!(get(&result, "key").as_string(), Some(first_key.clone()));
    assert_log_keys(&scenario, 2, &first_key).await;
}

#[wasm_bindgen_test]
async fn retries_exhausted_keeps_the_key_and_the_next_send_reuses_it() {
    let (ns, scenario) = (unique("ns-exhaust"), unique("exhaust"));
    let client = client(fast_options(&ns, json!({ "retry": { "maxAttempts": 2 } })));
    let op =
        ok(begin(&client, "checkout:again", post(&scenario_url(&scenario, "503,503,503,201"), "x")).await, "begin");
    let key = key(&op);
    let error = rejected(send(&op, None).await, "RETRIES_EXHAUSTED", "first send");
    assert_eq!(get(&error, "key").as_string(), Some(key.clone()));
    assert_eq!(number(&error, "attempts"), 2.0);
    assert_eq!(number(&error, "lastStatus"), 503.0);
    assert_eq!(get(&error, "reason").as_string().as_deref(), Some("maxAttempts"));
    let record = stored(&local(), &ns, "checkout:again");
    assert_eq!(get(&record, "key").as_string(), Some(key.clone()));
    assert_eq!(get(&record, "state").as_string().as_deref(), Some("pending"));

    // "Try again": the same operation, the same key.
    let result = ok(send(&op, None).await, "second send");
    assert_eq!(number(&result, "status"), 201.0);
    assert_eq!(number(&result, "attempts"), 2.0);
    assert_eq!(get(&result, "key").as_string(), Some(key.clone()));
    assert_eq!(number(&op, "attempts"), 4.0);
    assert_log_keys(&scenario, 4, &key).await;
}

#[wasm_bindgen_test]
async fn abort_during_a_backoff_sleep_rejects_aborted_and_keeps_the_pending_record() {
    let (ns, scenario) = (unique("ns-abort"), unique("abort"));
    let options = json!({ "retry": { "baseDelayMs": 10000, "maxDelayMs": 10000, "jitter": "none" } });
    let client = client(fast_options(&ns, options));
    let op = ok(begin(&client, "checkout:abort", post(&scenario_url(&scenario, "503"), "x")).await, "begin");
    let key = key(&op);
    let controller = web_sys::AbortController::new().unwrap();
    // Abort from a timer, as a "Cancel" button would, while the client sleeps 10 s before attempt 2.
    let abort = {
        let controller = controller.clone();
        Closure::once_into_js(move || controller.abort())
    };
    web_sys::window()
        .unwrap()
        .set_timeout_with_callback_and_timeout_and_arguments_0(abort.unchecked_ref(), 300)
        .unwrap();
    let send_options = js_sys::Object::new();
    js_sys::Reflect::set(&send_options, &"signal".into(), &controller.signal()).unwrap();
    let started = js_sys::Date::now();
    let error = rejected(send(&op, Some(&send_options)).await, "ABORTED", "aborted send");
    let elapsed = js_sys::Date::now() - started;
    assert!(elapsed < 5000.0, "the abort cut the 10 s sleep short (took {elapsed} ms)");
    assert_eq!(get(&error, "key").as_string(), Some(key.clone()));
    let record = stored(&local(), &ns, "checkout:abort");
    assert_eq!(get(&record, "state").as_string().as_deref(), Some("pending"));
    assert_eq!(get(&record, "key").as_string(), Some(key.clone()));
    assert_eq!(get(&record, "lastStatus").as_f64(), Some(503.0));
    assert_log_keys(&scenario, 1, &key).await;
}

/// Replaces `Storage.prototype.setItem` with one that throws `QuotaExceededError`; `restore` puts the
/// original back. Restore before asserting: a failed assertion traps and skips any `Drop`.
struct FullStorage;

impl FullStorage {
    fn fill() -> Self {
        run_js(
            "const p = Storage.prototype; globalThis.__ifOriginalSetItem = p.setItem; \
             p.setItem = function () { throw new DOMException('The quota has been exceeded.', 'QuotaExceededError'); };",
        );
        FullStorage
    }

    fn restore(self) {
        run_js("Storage.prototype.setItem = globalThis.__ifOriginalSetItem; delete globalThis.__ifOriginalSetItem;");
    }
}

fn listen(client: &idempotent_fetch::IdempotentClient, event_type: &str) -> Rc<RefCell<Vec<JsValue>>> {
    let heard = Rc::new(RefCell::new(Vec::new()));
    let sink = heard.clone();
    let listener =
        Closure::<dyn FnMut(JsValue)>::new(move |event: JsValue| sink.borrow_mut().push(event)).into_js_value();
    client
        .add_event_listener(JsValue::from_str(event_type).unchecked_into(), listener.unchecked_into())
        .expect("addEventListener");
    heard
}

#[wasm_bindgen_test]
async fn storage_full_on_write_falls_back_to_memory_and_sending_still_works() {
    let (ns, scenario) = (unique("ns-full"), unique("full"));
    let client = client(fast_options(&ns, json!({})));
    let heard = listen(&client, "storagefallback");
    assert!(JsValue::from(client.storage_fallback()).is_null());

    let full = FullStorage::fill();
    let begun = begin(&client, "checkout:full", post(&scenario_url(&scenario, "503,201"), "x")).await;
    let sent = match &begun {
        Ok(op) => Some(send(op, None).await),
        Err(_) => None,
    };
    full.restore();

    let op = ok(begun, "begin with full storage");
    let result = ok(sent.unwrap(), "send with full storage");
    assert_eq!(number(&result, "status"), 201.0);
    let fallback = JsValue::from(client.storage_fallback()).as_string().expect("storageFallback is set");
    assert!(fallback.contains("QuotaExceededError"), "{fallback}");
    assert_eq!(JsValue::from(client.storage()).as_string().as_deref(), Some("memory"));
    assert_eq!(heard.borrow().len(), 1, "one storagefallback event");
    assert!(get(&heard.borrow()[0], "reason").as_string().unwrap_or_default().contains("QuotaExceededError"));
    assert_log_keys(&scenario, 2, &key(&op)).await;
    assert!(local().get_item(&slot(&ns, "checkout:full")).unwrap().is_none(), "nothing was written");
}

#[wasm_bindgen_test]
async fn storage_full_at_start_falls_back_to_memory_and_sending_still_works() {
    let (ns, scenario) = (unique("ns-full0"), unique("full-at-start"));
    let full = FullStorage::fill();
    let client = IdempotentClientResult::new(fast_options(&ns, json!({})));
    full.restore();
    let client =
        client.0.unwrap_or_else(|e| panic!("the constructor must not throw for full storage: {}", describe(&e)));
    let fallback = JsValue::from(client.storage_fallback()).as_string().expect("storageFallback is set");
    assert!(fallback.contains("QuotaExceededError"), "{fallback}");
    assert_eq!(JsValue::from(client.storage()).as_string().as_deref(), Some("memory"));
    let op = ok(begin(&client, "checkout:full0", post(&scenario_url(&scenario, "201"), "x")).await, "begin");
    ok(send(&op, None).await, "send");
    assert_log_keys(&scenario, 1, &key(&op)).await;
    assert!(local().get_item(&slot(&ns, "checkout:full0")).unwrap().is_none());
}

/// `new IdempotentClient(...)` without panicking on an error.
struct IdempotentClientResult(Result<idempotent_fetch::IdempotentClient, JsValue>);

impl IdempotentClientResult {
    fn new(options: JsValue) -> Self {
        Self(idempotent_fetch::IdempotentClient::new(Some(options.unchecked_into())))
    }
}

#[wasm_bindgen_test]
async fn a_corrupt_record_rejects_begin_with_storage_and_is_left_intact() {
    let ns = unique("ns-corrupt");
    let scenario = unique("corrupt");
    let client = client(fast_options(&ns, json!({})));
    for (i, corrupt) in
        ["{not json", r#"{"v":1,"id":"x"}"#, "null", r#"{"v":99,"id":"checkout:c2"}"#].iter().enumerate()
    {
        let id = format!("checkout:c{i}");
        local().set_item(&slot(&ns, &id), corrupt).unwrap();
        let error = rejected(begin(&client, &id, post(&scenario_url(&scenario, "201"), "x")).await, "STORAGE", corrupt);
        assert!(get(&error, "key").is_null() || get(&error, "key").is_undefined(), "no key for a corrupt record");
        assert_eq!(
            local().get_item(&slot(&ns, &id)).unwrap().as_deref(),
            Some(*corrupt),
            "the corrupt entry is left as it was"
        );
    }
    // Listing skips corrupt entries rather than failing.
    let pending = ok(wait(client.pending()).await, "pending");
    assert_eq!(js_sys::Array::from(&pending).length(), 0);
    assert!(server_log(&scenario).await.is_empty(), "nothing was sent");
}

#[wasm_bindgen_test]
async fn a_tampered_key_rejects_begin_with_storage_and_is_never_sent() {
    let (ns, scenario) = (unique("ns-tamper"), unique("tamper"));
    let url = scenario_url(&scenario, "201");
    let client = client(fast_options(&ns, json!({})));
    let op = ok(begin(&client, "checkout:t", post(&url, "x")).await, "begin");
    let good_key = key(&op);
    let record_text = local().get_item(&slot(&ns, "checkout:t")).unwrap().unwrap();
    for bad_key in [format!("{good_key}\r\nX-Evil: 1"), "not-a-key".to_owned(), String::new(), format!("{good_key} ")] {
        let tampered = record_text.replace(&good_key, &bad_key.replace('\r', "\\r").replace('\n', "\\n"));
        assert_ne!(tampered, record_text);
        local().set_item(&slot(&ns, "checkout:t"), &tampered).unwrap();
        let reloaded = support::client(fast_options(&ns, json!({})));
        rejected(
            begin(&reloaded, "checkout:t", post(&url, "x")).await,
            "STORAGE",
            &format!("tampered key {bad_key:?}"),
        );
        // The operation begun before the tampering re-reads storage when it sends.
        let result = send(&op, None).await;
        assert!(result.is_err(), "a send over a tampered record must fail, not send {bad_key:?}");
        assert_eq!(local().get_item(&slot(&ns, "checkout:t")).unwrap(), Some(tampered), "left intact");
    }
    assert!(server_log(&scenario).await.is_empty(), "no tampered key reached the server");
}

#[wasm_bindgen_test]
async fn neither_body_nor_authorization_reaches_storage() {
    let (ns, scenario) = (unique("ns-secret"), unique("secret"));
    let token = "Bearer tok_SECRET_9f8e7d";
    let card = "4242424242424242";
    let request = js(json!({
        "url": scenario_url(&scenario, "503,201"),
        "method": "POST",
        "headers": { "Authorization": token, "Content-Type": "application/x-www-form-urlencoded", "X-Card-Holder": "Ada Lovelace" },
        "body": format!("card={card}&cvc=123"),
    }));
    let client = client(fast_options(&ns, json!({ "retry": { "maxAttempts": 1 } })));
    let op = ok(begin(&client, "checkout:secret", request.clone()).await, "begin");
    rejected(send(&op, None).await, "RETRIES_EXHAUSTED", "first send");
    let check = |when: &str| {
        for storage in [local(), session()] {
            for (k, v) in entries(&storage) {
                for secret in [token, "tok_SECRET", card, "cvc=123", "Ada Lovelace", "Bearer"] {
                    assert!(
                        !k.contains(secret) && !v.contains(secret),
                        "{when}: {secret:?} found in storage entry {k} = {v}"
                    );
                }
            }
        }
    };
    check("while pending");
    // The record holds exactly the protocol's fields: no `request` (body bytes would be encoded as
    // numbers, which a text search cannot see).
    let record = stored(&local(), &ns, "checkout:secret");
    let mut fields = keys_of(&record);
    fields.sort();
    assert_eq!(
        fields,
        ["attempts", "createdAt", "fingerprint", "id", "key", "lastStatus", "state", "updatedAt", "v"],
        "stored fields"
    );
    let result = ok(send(&op, None).await, "second send");
    assert_eq!(number(&result, "status"), 201.0);
    check("after success");
    // ... yet both reached the server on every attempt.
    let log = assert_log_keys(&scenario, 2, &key(&op)).await;
    for entry in &log {
        assert_eq!(entry.header("authorization").as_deref(), Some(token));
        assert_eq!(entry.body, format!("card={card}&cvc=123"));
    }
}

#[wasm_bindgen_test]
async fn two_namespaces_are_isolated() {
    let (ns_a, ns_b, scenario) = (unique("ns-a"), unique("ns-b"), unique("namespaces"));
    let url = scenario_url(&scenario, "503");
    let a = client(fast_options(&ns_a, json!({})));
    let b = client(fast_options(&ns_b, json!({})));
    let op_a = ok(begin(&a, "checkout:same", post(&url, "x")).await, "begin a");
    let op_b = ok(begin(&b, "checkout:same", post(&url, "x")).await, "begin b");
    assert_ne!(key(&op_a), key(&op_b), "each account has its own key for the same intent id");
    assert_eq!(a.namespace(), ns_a);
    for (client, op) in [(&a, &op_a), (&b, &op_b)] {
        let pending = js_sys::Array::from(&ok(wait(client.pending()).await, "pending"));
        assert_eq!(pending.length(), 1, "a client sees only its namespace");
        assert_eq!(get(&pending.get(0), "key").as_string(), Some(key(op)));
    }
    assert_eq!(
        ok(wait(a.discard(JsValue::from_str("checkout:same").unchecked_into())).await, "discard").as_bool(),
        Some(true)
    );
    assert!(local().get_item(&slot(&ns_a, "checkout:same")).unwrap().is_none());
    assert!(local().get_item(&slot(&ns_b, "checkout:same")).unwrap().is_some(), "discarding in a leaves b alone");
    // A reload of b still resumes b's key.
    let b2 = client(fast_options(&ns_b, json!({})));
    let op_b2 = ok(begin(&b2, "checkout:same", post(&url, "x")).await, "begin b after reload");
    assert_eq!(key(&op_b2), key(&op_b));
}

#[wasm_bindgen_test]
async fn session_storage_option_keeps_intents_in_session_storage() {
    let (ns, scenario) = (unique("ns-session"), unique("session"));
    let url = scenario_url(&scenario, "503,201");
    let options = || fast_options(&ns, json!({ "storage": "session", "retry": { "maxAttempts": 1 } }));
    let first = client(options());
    assert_eq!(JsValue::from(first.storage()).as_string().as_deref(), Some("session"));
    assert!(JsValue::from(first.storage_fallback()).is_null());
    let op = ok(begin(&first, "checkout:s", post(&url, "x")).await, "begin");
    let key = key(&op);
    rejected(send(&op, None).await, "RETRIES_EXHAUSTED", "first send");
    let record = stored(&session(), &ns, "checkout:s");
    assert_eq!(get(&record, "key").as_string(), Some(key.clone()));
    assert!(local().get_item(&slot(&ns, "checkout:s")).unwrap().is_none(), "nothing in localStorage");
    // A reload of this tab resumes from sessionStorage.
    let second = client(options());
    let op = ok(begin(&second, "checkout:s", post(&url, "x")).await, "begin after reload");
    assert_eq!(support::key(&op), key);
    ok(send(&op, None).await, "send after reload");
    assert_log_keys(&scenario, 2, &key).await;
}

#[wasm_bindgen_test]
async fn a_double_click_sends_once_and_both_calls_get_the_answer() {
    let (ns, scenario) = (unique("ns-double"), unique("double-click"));
    let client = client(fast_options(&ns, json!({})));
    let op = ok(begin(&client, "checkout:double", post(&scenario_url(&scenario, "delay300,201"), "x")).await, "begin");
    let (first, second) = futures::future::join(send(&op, None), send(&op, None)).await;
    let (first, second) = (ok(first, "first click"), ok(second, "second click"));
    for result in [&first, &second] {
        assert_eq!(number(result, "status"), 201.0);
        assert_eq!(get(result, "key").as_string(), Some(key(&op)));
        // Each caller can read its own Response body.
        let response = get(result, "response");
        let text: js_sys::Function = get(&response, "text").dyn_into().unwrap();
        let body = wait(text.call0(&response).unwrap()).await.expect("body readable");
        assert!(body.as_string().unwrap_or_default().contains(&key(&op)));
    }
    assert_log_keys(&scenario, 1, &key(&op)).await;
}

#[wasm_bindgen_test]
async fn two_clients_over_one_storage_send_with_the_same_key() {
    // Two "tabs" of one origin: the same intent, begun in both, never gets two keys.
    let (ns, scenario) = (unique("ns-tabs"), unique("tabs"));
    let url = scenario_url(&scenario, "delay200,201");
    let tab_a = client(fast_options(&ns, json!({})));
    let tab_b = client(fast_options(&ns, json!({})));
    let op_a = ok(begin(&tab_a, "checkout:tabs", post(&url, "x")).await, "begin a");
    let op_b = ok(begin(&tab_b, "checkout:tabs", post(&url, "x")).await, "begin b");
    assert_eq!(key(&op_a), key(&op_b));
    let (a, b) = futures::future::join(send(&op_a, None), send(&op_b, None)).await;
    let (a, b) = (ok(a, "send a"), ok(b, "send b"));
    assert_eq!(get(&a, "key").as_string(), Some(key(&op_a)));
    assert_eq!(get(&b, "key").as_string(), Some(key(&op_a)));
    let log = server_log(&scenario).await;
    assert!(!log.is_empty() && log.len() <= 2, "{log:?}");
    assert!(log.iter().all(|l| l.key.as_deref() == Some(key(&op_a).as_str())), "{log:?}");
}
