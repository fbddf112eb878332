//! `IdempotentClient`: the JavaScript entry point.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Array, Function};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::future_to_promise;

use crate::legacy::engine::sweep_reporting;
use crate::legacy::intent::{IntentRecord, PersistedRequest};
use crate::legacy::ports::{IntentStore, OsRandom};
use crate::legacy::{begin, BeginOptions, ErrorCode, RetryBudget};

use super::body::BufferedBody;
use super::clock::DateClock;
use super::errors::{js_error, to_js_error};
use super::events::{event, Listeners, EVENT_TYPES};
use super::js::{object, property, set};
use super::operation::IdempotentOperation;
use super::options::{parse_client_options, ClientConfig};
use super::request::{prepare_parts, prepare_request, read_url, PreparedRequest};
use super::storage::WebStore;
use super::types::*;

/// What one client shares between its operations.
pub struct ClientInner {
    /// Validated options.
    pub config: ClientConfig,
    /// Intent storage (with its memory fallback).
    pub store: WebStore,
    /// The client-wide retry budget.
    pub budget: RefCell<RetryBudget>,
    /// CSPRNG for keys and jitter.
    pub random: RefCell<OsRandom>,
    /// Event listeners.
    pub listeners: Rc<Listeners>,
    /// Sends in flight in this client, by intent.
    pub in_flight: Rc<super::inflight::InFlight>,
}

/// Makes state-changing requests safe to retry: one idempotency key per intent, kept in storage
/// across reloads, re-sent until the server gives a definite answer.
#[wasm_bindgen]
pub struct IdempotentClient {
    inner: Rc<ClientInner>,
}

#[wasm_bindgen]
impl IdempotentClient {
    /// Creates a client. Throws `IdempotentFetchError` (`INVALID_OPTIONS`, naming the field) for a
    /// bad option. Never throws because storage is blocked or full: it falls back to memory and
    /// says so in `storageFallback` and a `storagefallback` event.
    #[wasm_bindgen(constructor)]
    pub fn new(options: Option<ClientOptionsArg>) -> Result<IdempotentClient, JsValue> {
        #[cfg(feature = "panic-hook")]
        console_error_panic_hook::set_once();
        let options: JsValue = options.map_or(JsValue::UNDEFINED, Into::into);
        let config = parse_client_options(&options)?;
        let store = WebStore::open(config.storage, &config.namespace);
        let listeners = Rc::new(Listeners::default());
        {
            let listeners = listeners.clone();
            store.set_fallback_listener(Box::new(move |reason| emit_fallback(&listeners, reason)));
        }
        let inner = Rc::new(ClientInner {
            budget: RefCell::new(RetryBudget::new(config.retry_budget)),
            config,
            store,
            random: RefCell::new(OsRandom),
            listeners,
            in_flight: Rc::default(),
        });
        // After the constructor returns, so listeners added right away still hear about it.
        let startup = inner.clone();
        wasm_bindgen_futures::spawn_local(async move {
            if let Some(reason) = startup.store.fallback_reason() {
                emit_fallback(&startup.listeners, &reason);
            }
            let _ = run_sweep(&startup).await;
        });
        Ok(Self { inner })
    }

    /// Begins the intent `intentId`, or resumes it after a reload (same key). Resolves to an
    /// `IdempotentOperation`; rejects with `INVALID_REQUEST`, `BODY_NOT_REPLAYABLE`,
    /// `INTENT_MISMATCH` (the id was begun with another request; the message names the old key)
    /// or `STORAGE` (the stored record is corrupt: discard it after checking with your server).
    pub fn begin(
        &self,
        intent_id: IntentIdArg,
        request: IntentRequestArg,
        options: Option<BeginOptionsArg>,
    ) -> PromiseOperation {
        let inner = self.inner.clone();
        let request: JsValue = request.into();
        let options: JsValue = options.map_or(JsValue::UNDEFINED, Into::into);
        future_to_promise(async move {
            let intent_id = intent_id_arg(&intent_id)?;
            let replace = parse_begin_options(&options)?;
            let prepared = prepare_request(&request, &inner.config.header_name).await?;
            let operation = begin_prepared(&inner, intent_id, prepared, replace).await?;
            Ok(operation.into())
        })
        .unchecked_into()
    }

    /// Resumes a stored intent whose request was persisted (`persistRequest: true`), e.g. one listed
    /// by `pending()` after a reload. Rejects with `NOT_FOUND` if there is no such intent and
    /// `INVALID_REQUEST` if its request was not persisted.
    pub fn resume(&self, intent_id: IntentIdArg) -> PromiseOperation {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let intent_id = intent_id_arg(&intent_id)?;
            let record = inner.store.load(&intent_id).await.map_err(|e| js_error(ErrorCode::Storage, e.to_string()))?;
            let record = record.ok_or_else(|| js_error(ErrorCode::NotFound, format!("no stored intent \"{intent_id}\"")))?;
            let persisted = record.request.clone().ok_or_else(|| {
                js_error(ErrorCode::InvalidRequest, format!("intent \"{intent_id}\" was stored without its request (persistRequest is off); begin it again with the same request"))
            })?;
            let prepared = PreparedRequest {
                method: persisted.method,
                url: persisted.url,
                headers: persisted.headers,
                body: persisted.body.map(|bytes| BufferedBody { bytes, content_type: None }),
            };
            if prepared.fingerprint().as_str() != record.fingerprint {
                return Err(js_error(ErrorCode::Storage, format!("the persisted request of intent \"{intent_id}\" does not match its fingerprint")));
            }
            Ok(IdempotentOperation::new(inner, record, prepared).into())
        })
        .unchecked_into()
    }

    /// Intents not yet definitely answered (`pending` and `expired`), e.g. to offer "resume" after a
    /// reload. Corrupt entries are skipped.
    pub fn pending(&self) -> PromiseIntentInfos {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let records = inner.store.list().await.map_err(|e| js_error(ErrorCode::Storage, e.to_string()))?;
            let list = Array::new();
            for record in records.iter().filter(|r| !r.state.is_terminal()) {
                list.push(&intent_info(record));
            }
            Ok(list.into())
        })
        .unchecked_into()
    }

    /// Forgets an intent and its key (after the app settled it with its server, or to start over).
    /// Resolves to whether there was one.
    pub fn discard(&self, intent_id: IntentIdArg) -> PromiseBoolean {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let intent_id = intent_id_arg(&intent_id)?;
            discard(&inner, &intent_id).await.map(JsValue::from)
        })
        .unchecked_into()
    }

    /// Deletes terminal intents older than `keyTtlMs` and marks stale pending ones `expired`. Runs
    /// once on construction; call it again on long-lived pages.
    pub fn sweep(&self) -> PromiseSweep {
        let inner = self.inner.clone();
        future_to_promise(async move { run_sweep(&inner).await }).unchecked_into()
    }

    /// A `fetch`-shaped drop-in: `await client.fetch(url, { method: "POST", body, intent })`
    /// resolves to the `Response` of the definite answer (a 4xx included) and rejects with
    /// `IdempotentFetchError` otherwise. Without `intent`, each call is its own intent.
    pub fn fetch(&self, input: FetchInputArg, init: Option<FetchInitArg>) -> PromiseResponse {
        let inner = self.inner.clone();
        let input: JsValue = input.into();
        let init: JsValue = init.map_or(JsValue::UNDEFINED, Into::into);
        future_to_promise(async move {
            let (url, method, headers, body, signal, intent) = read_fetch_args(&input, &init)?;
            let prepared = prepare_parts(url, &method, headers.as_ref(), &body, &inner.config.header_name).await?;
            let named = intent.is_some();
            let intent_id = match intent {
                Some(id) => id,
                None => {
                    let mut bytes = [0u8; 16];
                    use crate::legacy::ports::RandomSource;
                    inner
                        .random
                        .borrow_mut()
                        .fill(&mut bytes)
                        .map_err(|e| js_error(ErrorCode::Storage, e.to_string()))?;
                    format!("fetch:{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
                }
            };
            let operation = begin_prepared(&inner, intent_id.clone(), prepared, false).await?;
            let result = operation.send_with(signal, None, None).await?;
            if !named {
                // Nobody can begin a random id again, so its retired record would only take up
                // storage for keyTtlMs. (Unfinished ones stay: `pending()` lists them.)
                let _ = discard(&inner, &intent_id).await;
            }
            Ok(property(&result, "response").unwrap_or(JsValue::UNDEFINED))
        })
        .unchecked_into()
    }

    /// Adds a listener for `"attempt" | "retry" | "offline" | "success" | "failure" | "expired" |
    /// "storagefallback"`. Throws `INVALID_OPTIONS` for another type.
    #[wasm_bindgen(js_name = addEventListener)]
    pub fn add_event_listener(&self, event_type: EventTypeArg, listener: ListenerArg) -> Result<(), JsValue> {
        let (event_type, listener) = listener_args(event_type.into(), listener.into())?;
        self.inner.listeners.add(&event_type, listener);
        Ok(())
    }

    /// Removes a listener added with `addEventListener`.
    #[wasm_bindgen(js_name = removeEventListener)]
    pub fn remove_event_listener(&self, event_type: EventTypeArg, listener: ListenerArg) -> Result<(), JsValue> {
        let (event_type, listener) = listener_args(event_type.into(), listener.into())?;
        self.inner.listeners.remove(&event_type, &listener);
        Ok(())
    }

    /// The namespace (account) this client's intents live under.
    #[wasm_bindgen(getter)]
    pub fn namespace(&self) -> String {
        self.inner.config.namespace.clone()
    }

    /// The storage in use now: the requested one, or `"memory"` after a fallback.
    #[wasm_bindgen(getter)]
    pub fn storage(&self) -> StorageKindValue {
        JsValue::from_str(self.inner.store.active_kind(self.inner.config.storage).as_str()).unchecked_into()
    }

    /// Why storage fell back to memory (blocked, full, absent), or `null`.
    #[wasm_bindgen(getter, js_name = storageFallback)]
    pub fn storage_fallback(&self) -> NullableString {
        self.inner.store.fallback_reason().map_or(JsValue::NULL, |r| JsValue::from_str(&r)).unchecked_into()
    }

    /// Tokens left in the retry budget.
    #[wasm_bindgen(getter, js_name = retryBudget)]
    pub fn retry_budget(&self) -> u32 {
        self.inner.budget.borrow().tokens()
    }
}

/// Runs the core's `begin` for a prepared request and wraps the result.
pub async fn begin_prepared(
    inner: &Rc<ClientInner>,
    intent_id: String,
    prepared: PreparedRequest,
    replace: bool,
) -> Result<IdempotentOperation, JsValue> {
    let options = BeginOptions {
        replace,
        key_ttl_ms: inner.config.key_ttl_ms,
        persisted_request: inner.config.persist_request.then(|| persisted(&prepared)),
    };
    // Two tabs beginning the same intent at once must not each mint a key (the second would
    // overwrite the first's record while its attempt is in flight). A short lock, separate from
    // the one `send` holds for minutes, serialises create-or-resume across tabs.
    let lock_name = format!("idempotent-fetch:begin:{}:{intent_id}", inner.config.namespace);
    let _lock = super::lock::acquire(&lock_name, None).await;
    let record = begin(&inner.store, &DateClock, &inner.random, &intent_id, &prepared.fingerprint(), &options)
        .await
        .map_err(|e| to_js_error(&e))?;
    Ok(IdempotentOperation::new(inner.clone(), record, prepared))
}

/// Deletes a record; `true` if there was one.
pub async fn discard(inner: &ClientInner, intent_id: &str) -> Result<bool, JsValue> {
    let existed = !matches!(inner.store.load(intent_id).await, Ok(None));
    inner.store.remove(intent_id).await.map_err(|e| js_error(ErrorCode::Storage, e.to_string()))?;
    Ok(existed)
}

fn persisted(prepared: &PreparedRequest) -> PersistedRequest {
    let mut headers = prepared.headers.clone();
    if let Some(content_type) = prepared.body.as_ref().and_then(|b| b.content_type.clone()) {
        headers.push(("content-type".into(), content_type));
    }
    PersistedRequest {
        method: prepared.method.clone(),
        url: prepared.url.clone(),
        headers,
        body: prepared.body.as_ref().map(|b| b.bytes.clone()),
    }
}

async fn run_sweep(inner: &ClientInner) -> Result<JsValue, JsValue> {
    let on_expired = |record: &IntentRecord| {
        let e = event("expired");
        set(&e, "intentId", record.id.as_str());
        set(&e, "key", record.key.as_str());
        inner.listeners.emit("expired", &e);
    };
    let (removed, expired) = sweep_reporting(&inner.store, &DateClock, inner.config.key_ttl_ms, on_expired)
        .await
        .map_err(|e| js_error(ErrorCode::Storage, e.to_string()))?;
    let result = object();
    set(&result, "removed", removed);
    set(&result, "expired", expired);
    Ok(result.into())
}

fn emit_fallback(listeners: &Listeners, reason: &str) {
    let e = event("storagefallback");
    set(&e, "reason", reason);
    listeners.emit("storagefallback", &e);
}

/// `{ intentId, key, state, attempts, createdAt, updatedAt, lastStatus, resumable }`.
pub fn intent_info(record: &IntentRecord) -> JsValue {
    let info = object();
    set(&info, "intentId", record.id.as_str());
    set(&info, "key", record.key.as_str());
    set(&info, "state", record.state.as_str());
    set(&info, "attempts", record.attempts);
    set(&info, "createdAt", record.created_at as f64);
    set(&info, "updatedAt", record.updated_at as f64);
    set(&info, "lastStatus", record.last_status.map_or(JsValue::NULL, JsValue::from));
    set(&info, "resumable", record.request.is_some());
    info.into()
}

fn intent_id_arg(value: &JsValue) -> Result<String, JsValue> {
    value
        .as_string()
        .ok_or_else(|| js_error(ErrorCode::InvalidRequest, "intentId must be a string such as \"checkout:cart-42\""))
}

/// `begin`'s options: whether to replace a mismatching stored intent.
fn parse_begin_options(value: &JsValue) -> Result<bool, JsValue> {
    if value.is_undefined() || value.is_null() {
        return Ok(false);
    }
    let invalid = |message: String| js_error(ErrorCode::InvalidOptions, message);
    let fields = super::fields::Fields::of(value, "", "begin options").map_err(invalid)?;
    fields.only(&["replace"]).map_err(invalid)?;
    Ok(fields.boolean("replace").map_err(invalid)?.unwrap_or(false))
}

fn listener_args(event_type: JsValue, listener: JsValue) -> Result<(String, Function), JsValue> {
    let event_type = event_type.as_string().filter(|t| EVENT_TYPES.contains(&t.as_str())).ok_or_else(|| {
        js_error(ErrorCode::InvalidOptions, format!("event type must be one of {}", EVENT_TYPES.join(", ")))
    })?;
    let listener = listener
        .dyn_into::<Function>()
        .map_err(|_| js_error(ErrorCode::InvalidOptions, "listener must be a function"))?;
    Ok((event_type, listener))
}

type FetchArgs = (String, String, Option<JsValue>, JsValue, Option<web_sys::AbortSignal>, Option<String>);

/// Reads `fetch(input, init)`: input a URL string, a `URL` or a `Request` (whose body, if any, must
/// be passed in `init.body` instead: a Request's body is a stream).
fn read_fetch_args(input: &JsValue, init: &JsValue) -> Result<FetchArgs, JsValue> {
    let bad = |m: &str| js_error(ErrorCode::InvalidRequest, m.to_owned());
    let from_request = input.dyn_ref::<web_sys::Request>();
    let (url, mut method, mut headers) = match from_request {
        Some(request) => {
            if request.body().is_some() && property(init, "body").is_none() {
                return Err(js_error(
                    ErrorCode::BodyNotReplayable,
                    "a Request's body is a stream and cannot be retried; pass the body in init.body",
                ));
            }
            (request.url(), request.method(), Some(JsValue::from(request.headers())))
        }
        None => (read_url(Some(input))?, "GET".to_owned(), None),
    };
    if !init.is_undefined() && !init.is_null() && !init.is_object() {
        return Err(bad("init must be an object"));
    }
    if let Some(m) = property(init, "method") {
        method = m.as_string().ok_or_else(|| bad("init.method must be a string"))?;
    }
    if let Some(h) = property(init, "headers") {
        headers = Some(h);
    }
    let body = property(init, "body").unwrap_or(JsValue::UNDEFINED);
    let signal = match property(init, "signal") {
        None => None,
        Some(s) => Some(s.dyn_into::<web_sys::AbortSignal>().map_err(|_| bad("init.signal must be an AbortSignal"))?),
    };
    let intent = match property(init, "intent") {
        None => None,
        Some(i) => Some(i.as_string().ok_or_else(|| bad("init.intent must be a string"))?),
    };
    Ok((url, method, headers, body, signal, intent))
}
