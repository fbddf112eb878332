//! Events for the UI: client-wide listeners (`client.addEventListener`) and the per-send callbacks
//! (`onAttempt`, `onRetry`), fed by the core's [`Observer`] reports.

use std::cell::RefCell;

use js_sys::Function;
use wasm_bindgen::prelude::*;

use crate::legacy::ports::{AttemptEvent, Observer, RetryEvent};

use super::js::{object, set};

/// The event types a client emits.
pub const EVENT_TYPES: [&str; 7] = ["attempt", "retry", "offline", "success", "failure", "expired", "storagefallback"];

/// Client-wide listeners by event type.
#[derive(Default)]
pub struct Listeners {
    entries: RefCell<Vec<(String, Function)>>,
}

impl Listeners {
    /// Adds a listener (the same function twice for one type is kept once, like `EventTarget`).
    pub fn add(&self, event_type: &str, listener: Function) {
        let mut entries = self.entries.borrow_mut();
        if !entries.iter().any(|(t, f)| t == event_type && f == &listener) {
            entries.push((event_type.to_owned(), listener));
        }
    }

    /// Removes a listener.
    pub fn remove(&self, event_type: &str, listener: &Function) {
        self.entries.borrow_mut().retain(|(t, f)| !(t == event_type && f == listener));
    }

    /// Calls every listener of `event.type`. A throwing listener is ignored: UI code must not be
    /// able to break a payment in flight.
    pub fn emit(&self, event_type: &str, event: &JsValue) {
        let targets: Vec<Function> =
            self.entries.borrow().iter().filter(|(t, _)| t == event_type).map(|(_, f)| f.clone()).collect();
        for listener in targets {
            let _ = listener.call1(&JsValue::UNDEFINED, event);
        }
    }
}

/// A new event object `{ type, ... }`.
pub fn event(event_type: &str) -> JsValue {
    let event = object();
    set(&event, "type", event_type);
    event.into()
}

/// Bridges core reports of one `send` to the client's listeners and the send's callbacks.
pub struct SendObserver<'a> {
    /// Client-wide listeners.
    pub listeners: &'a Listeners,
    /// The intent being sent.
    pub intent_id: &'a str,
    /// `send({ onAttempt })`.
    pub on_attempt: Option<Function>,
    /// `send({ onRetry })`.
    pub on_retry: Option<Function>,
}

impl SendObserver<'_> {
    fn dispatch(&self, event_type: &str, event: &JsValue, callback: Option<&Function>) {
        if let Some(callback) = callback {
            let _ = callback.call1(&JsValue::UNDEFINED, event);
        }
        self.listeners.emit(event_type, event);
    }
}

impl Observer for SendObserver<'_> {
    fn on_attempt(&self, report: &AttemptEvent<'_>) {
        let e = event("attempt");
        set(&e, "intentId", self.intent_id);
        set(&e, "key", report.key);
        set(&e, "attempt", report.attempt);
        set(&e, "totalAttempts", report.total_attempts);
        self.dispatch("attempt", &e, self.on_attempt.as_ref());
    }

    fn on_retry(&self, report: &RetryEvent<'_>) {
        let e = event("retry");
        set(&e, "intentId", self.intent_id);
        set(&e, "key", report.key);
        set(&e, "attempt", report.attempt);
        set(&e, "delayMs", report.delay_ms as f64);
        set(&e, "reason", report.reason);
        set(&e, "status", report.status.map_or(JsValue::NULL, JsValue::from));
        self.dispatch("retry", &e, self.on_retry.as_ref());
    }

    fn on_offline(&self, key: &str) {
        let e = event("offline");
        set(&e, "intentId", self.intent_id);
        set(&e, "key", key);
        self.dispatch("offline", &e, None);
    }
}
