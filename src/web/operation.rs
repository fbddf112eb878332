//! `IdempotentOperation`: one intent with its key, and `send`.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::Function;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::future_to_promise;

use crate::legacy::intent::IntentRecord;
use crate::legacy::ports::IntentStore;
use crate::legacy::{send, ErrorCode, SendContext};

use super::client::{discard, ClientInner};
use super::clock::DateClock;
use super::errors::{js_error, to_js_error};
use super::events::{event, SendObserver};
use super::inflight::{InFlight, Turn};
use super::js::{object, property, set};
use super::request::PreparedRequest;
use super::transport::FetchTransport;
use super::types::*;
use super::waiter::BrowserWaiter;

/// One user intent (one click on "Pay") and its idempotency key. Get one from `client.begin`.
#[wasm_bindgen]
pub struct IdempotentOperation {
    inner: Rc<ClientInner>,
    record: Rc<RefCell<IntentRecord>>,
    request: Rc<PreparedRequest>,
}

impl IdempotentOperation {
    /// Wraps a begun record.
    pub fn new(inner: Rc<ClientInner>, record: IntentRecord, request: PreparedRequest) -> Self {
        Self { inner, record: Rc::new(RefCell::new(record)), request: Rc::new(request) }
    }

    /// Sends until a definite answer; the `SendResult` object or an `IdempotentFetchError`.
    pub async fn send_with(
        &self,
        signal: Option<web_sys::AbortSignal>,
        on_attempt: Option<Function>,
        on_retry: Option<Function>,
    ) -> Result<JsValue, JsValue> {
        send_operation(self.inner.clone(), self.record.clone(), self.request.clone(), signal, on_attempt, on_retry)
            .await
    }
}

#[wasm_bindgen]
impl IdempotentOperation {
    /// The idempotency key: the same on every attempt and after a reload.
    #[wasm_bindgen(getter)]
    pub fn key(&self) -> String {
        self.record.borrow().key.clone()
    }

    /// The app's id of the intent.
    #[wasm_bindgen(getter, js_name = intentId)]
    pub fn intent_id(&self) -> String {
        self.record.borrow().id.clone()
    }

    /// `"pending" | "succeeded" | "failed" | "expired"` as of the last `begin`/`send`.
    #[wasm_bindgen(getter)]
    pub fn state(&self) -> IntentStateValue {
        JsValue::from_str(self.record.borrow().state.as_str()).unchecked_into()
    }

    /// Attempts across every `send` of this intent, including earlier page loads.
    #[wasm_bindgen(getter)]
    pub fn attempts(&self) -> u32 {
        self.record.borrow().attempts
    }

    /// Status of the last answer, or `null`.
    #[wasm_bindgen(getter, js_name = lastStatus)]
    pub fn last_status(&self) -> NullableNumber {
        self.record.borrow().last_status.map_or(JsValue::NULL, JsValue::from).unchecked_into()
    }

    /// When the intent began (ms since the epoch).
    #[wasm_bindgen(getter, js_name = createdAt)]
    pub fn created_at(&self) -> f64 {
        self.record.borrow().created_at as f64
    }

    /// Whether this intent resumed an earlier one (a reload) rather than starting fresh.
    #[wasm_bindgen(getter)]
    pub fn resumed(&self) -> bool {
        self.record.borrow().attempts > 0
    }

    /// Sends with the intent's key until the server gives a definite answer.
    ///
    /// Resolves to `SendResult` on 2xx and on a definite failure such as 400 (`ok: false`).
    /// Rejects with `IdempotentFetchError`: `RETRIES_EXHAUSTED` or `ABORTED` (the key is kept: call
    /// `send` again, now or after a reload, to resume), `KEY_MISMATCH` (422), `EXPIRED`, `STORAGE`,
    /// `NOT_FOUND`.
    pub fn send(&self, options: Option<SendOptionsArg>) -> PromiseSendResult {
        let options: JsValue = options.map_or(JsValue::UNDEFINED, Into::into);
        let (inner, record, request) = (self.inner.clone(), self.record.clone(), self.request.clone());
        future_to_promise(async move {
            let (signal, on_attempt, on_retry) = parse_send_options(&options)?;
            send_operation(inner, record, request, signal, on_attempt, on_retry).await
        })
        .unchecked_into()
    }

    /// Forgets this intent and its key. Resolves to whether it was stored.
    pub fn discard(&self) -> PromiseBoolean {
        let inner = self.inner.clone();
        let intent_id = self.intent_id();
        future_to_promise(async move { discard(&inner, &intent_id).await.map(JsValue::from) }).unchecked_into()
    }
}

async fn send_operation(
    inner: Rc<ClientInner>,
    record: Rc<RefCell<IntentRecord>>,
    request: Rc<PreparedRequest>,
    signal: Option<web_sys::AbortSignal>,
    on_attempt: Option<Function>,
    on_retry: Option<Function>,
) -> Result<JsValue, JsValue> {
    let intent_id = record.borrow().id.clone();
    let config = &inner.config;
    // One send per intent in this client: a second call waits and shares the first one's answer.
    let mut turn = match InFlight::enter(&inner.in_flight, &intent_id, signal.as_ref()).await {
        Ok(Turn::Mine(guard)) => guard,
        Ok(Turn::Shared(result)) => {
            if let Ok(Some(stored)) = inner.store.load(&intent_id).await {
                *record.borrow_mut() = stored;
            }
            return Ok(result);
        }
        Err(_) => return Err(aborted_while_waiting(&record.borrow().key)),
    };
    // One sender per intent across tabs: wait for the tab (or the other send) that holds it.
    // The namespace holds no `:`, so `send:<ns>:<id>` and `begin:<ns>:<id>` never collide.
    let lock_name = format!("idempotent-fetch:send:{}:{intent_id}", config.namespace);
    let Ok(_lock) = super::lock::acquire(&lock_name, signal.as_ref()).await else {
        return Err(aborted_while_waiting(&record.borrow().key));
    };
    let should_retry_fn = config.should_retry.clone();
    let should_retry = move |status: u16| -> Option<bool> {
        let f = should_retry_fn.as_ref()?;
        f.call1(&JsValue::UNDEFINED, &JsValue::from(status)).ok()?.as_bool()
    };
    let transport = FetchTransport { request: &request, key_header: &config.header_name, signal: signal.as_ref() };
    let waiter = BrowserWaiter::new(signal.clone());
    let observer = SendObserver { listeners: &inner.listeners, intent_id: &intent_id, on_attempt, on_retry };
    let context = SendContext {
        transport: &transport,
        store: &inner.store,
        waiter: &waiter,
        clock: &DateClock,
        random: &inner.random,
        budget: &inner.budget,
        observer: &observer,
        policy: &config.policy,
        key_ttl_ms: config.key_ttl_ms,
        header_form: config.header_form,
        should_retry: config.should_retry.as_ref().map(|_| &should_retry as &dyn Fn(u16) -> Option<bool>),
    };
    let outcome = send(&context, &intent_id).await;
    if let Ok(Some(stored)) = inner.store.load(&intent_id).await {
        *record.borrow_mut() = stored;
    }
    match outcome {
        Ok(definite) => {
            let result = object();
            let response: JsValue = definite.response.0.into();
            set(&result, "response", response);
            set(&result, "status", definite.status);
            set(&result, "ok", definite.ok);
            set(&result, "replayed", definite.replayed);
            set(&result, "attempts", definite.attempts);
            set(&result, "key", definite.key.as_str());
            set(&result, "intentId", intent_id.as_str());
            let e = if definite.ok { event("success") } else { event("failure") };
            set(&e, "intentId", intent_id.as_str());
            set(&e, "key", definite.key.as_str());
            set(&e, "status", definite.status);
            if definite.ok {
                set(&e, "attempts", definite.attempts);
                set(&e, "replayed", definite.replayed);
                inner.listeners.emit("success", &e);
            } else {
                set(&e, "code", "HTTP_STATUS");
                set(&e, "message", format!("the server answered {}", definite.status));
                inner.listeners.emit("failure", &e);
            }
            let result: JsValue = result.into();
            turn.set_result(&result);
            Ok(result)
        }
        Err(error) => {
            let e = event("failure");
            set(&e, "intentId", intent_id.as_str());
            set(&e, "key", error.key.as_deref().map_or(JsValue::NULL, JsValue::from_str));
            set(&e, "status", error.last_status.map_or(JsValue::NULL, JsValue::from));
            set(&e, "code", error.code.as_str());
            set(&e, "message", error.message.as_str());
            inner.listeners.emit("failure", &e);
            Err(to_js_error(&error))
        }
    }
}

/// `ABORTED` for a send aborted before its turn came (another call or tab was sending the intent).
fn aborted_while_waiting(key: &str) -> JsValue {
    let error = crate::legacy::SendError::new(
        ErrorCode::Aborted,
        "aborted while another call or tab was sending this intent; the key is kept",
    );
    to_js_error(&error.with_key(key))
}

type SendArgs = (Option<web_sys::AbortSignal>, Option<Function>, Option<Function>);

fn parse_send_options(options: &JsValue) -> Result<SendArgs, JsValue> {
    if options.is_undefined() || options.is_null() {
        return Ok((None, None, None));
    }
    if !options.is_object() {
        return Err(js_error(ErrorCode::InvalidOptions, "send options must be an object"));
    }
    for name in js_sys::Object::keys(options.unchecked_ref::<js_sys::Object>()).iter() {
        let name = name.as_string().unwrap_or_default();
        if !["signal", "onAttempt", "onRetry"].contains(&name.as_str()) {
            return Err(js_error(
                ErrorCode::InvalidOptions,
                format!("unknown send option \"{name}\" (expected signal, onAttempt, onRetry)"),
            ));
        }
    }
    let signal = match property(options, "signal") {
        None => None,
        Some(s) => Some(
            s.dyn_into::<web_sys::AbortSignal>()
                .map_err(|_| js_error(ErrorCode::InvalidOptions, "signal must be an AbortSignal"))?,
        ),
    };
    let callback = |name: &str| -> Result<Option<Function>, JsValue> {
        match property(options, name) {
            None => Ok(None),
            Some(f) => f
                .dyn_into::<Function>()
                .map(Some)
                .map_err(|_| js_error(ErrorCode::InvalidOptions, format!("{name} must be a function"))),
        }
    };
    Ok((signal, callback("onAttempt")?, callback("onRetry")?))
}
