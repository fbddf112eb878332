//! One attempt over the global `fetch`: a fresh `AbortController` per attempt, aborted by the
//! attempt timeout or by the caller's signal, and the key header set every time.

use std::cell::Cell;
use std::rc::Rc;

use gloo_timers::callback::Timeout;
use js_sys::Uint8Array;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use crate::legacy::ports::{AttemptRequest, HttpResponse, Transport, TransportError};

use super::errors::describe_js;
use super::js::global_fetch;
use super::request::PreparedRequest;

/// Sends one prepared request; owned by one `send` call.
pub struct FetchTransport<'a> {
    /// The request.
    pub request: &'a PreparedRequest,
    /// Header that carries the key.
    pub key_header: &'a str,
    /// The caller's signal, if any.
    pub signal: Option<&'a web_sys::AbortSignal>,
}

/// A fetch `Response` seen through the core's eyes.
pub struct FetchResponse(pub web_sys::Response);

impl HttpResponse for FetchResponse {
    fn status(&self) -> u16 {
        self.0.status()
    }

    fn header(&self, name: &str) -> Option<String> {
        self.0.headers().get(name).ok().flatten()
    }

    fn release(&self) {
        // A retried answer's body is never read: cancel it so the connection can be reused.
        if let Some(body) = self.0.body() {
            let _ = body.cancel();
        }
    }
}

impl Transport for FetchTransport<'_> {
    type Response = FetchResponse;

    async fn send(&self, attempt: AttemptRequest<'_>) -> Result<FetchResponse, TransportError> {
        if self.signal.is_some_and(|s| s.aborted()) {
            return Err(TransportError::Aborted);
        }
        let guard =
            AbortGuard::new(self.signal, attempt.timeout_ms).map_err(|e| TransportError::Network(describe_js(&e)))?;
        let request = self
            .build(attempt.key_header_value, &guard.controller.signal())
            .map_err(|e| TransportError::Network(describe_js(&e)))?;
        let result = match global_fetch(&request) {
            Ok(promise) => JsFuture::from(promise).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(response) => match response.dyn_into::<web_sys::Response>() {
                Ok(response) => Ok(FetchResponse(response)),
                Err(_) => Err(TransportError::Network("fetch resolved to something that is not a Response".into())),
            },
            Err(_) if self.signal.is_some_and(|s| s.aborted()) => Err(TransportError::Aborted),
            Err(_) if guard.timed_out.get() => Err(TransportError::Timeout),
            Err(e) => Err(TransportError::Network(describe_js(&e))),
        }
    }
}

impl FetchTransport<'_> {
    /// A fresh `Request` for one attempt (a Request's body can be consumed only once).
    fn build(&self, key_value: &str, signal: &web_sys::AbortSignal) -> Result<web_sys::Request, JsValue> {
        let headers = web_sys::Headers::new()?;
        for (name, value) in &self.request.headers {
            headers.append(name, value)?;
        }
        if let Some(content_type) = self.request.body.as_ref().and_then(|b| b.content_type.as_deref()) {
            headers.set("content-type", content_type)?;
        }
        headers.set(self.key_header, key_value)?;
        let init = web_sys::RequestInit::new();
        init.set_method(&self.request.method);
        init.set_headers(&headers);
        init.set_signal(Some(signal));
        if let Some(body) = &self.request.body {
            let bytes = Uint8Array::from(body.bytes.as_slice());
            init.set_body(&bytes);
        }
        web_sys::Request::new_with_str_and_init(&self.request.url, &init)
    }
}

/// The per-attempt `AbortController`, its timeout and the link from the caller's signal; all
/// undone in `Drop`, whichever way the attempt ends (after reqwest's `AbortGuard`; the timer is a
/// gloo `Timeout`, which clears itself when dropped).
struct AbortGuard {
    controller: web_sys::AbortController,
    timed_out: Rc<Cell<bool>>,
    _timeout: Timeout,
    caller: Option<(web_sys::AbortSignal, Closure<dyn FnMut()>)>,
}

impl AbortGuard {
    fn new(caller_signal: Option<&web_sys::AbortSignal>, timeout_ms: u64) -> Result<Self, JsValue> {
        let controller = web_sys::AbortController::new()?;
        let timed_out = Rc::new(Cell::new(false));
        let timeout = {
            let controller = controller.clone();
            let timed_out = timed_out.clone();
            Timeout::new(timeout_ms.min(i32::MAX as u64) as u32, move || {
                timed_out.set(true);
                controller.abort();
            })
        };
        let caller = caller_signal.map(|signal| {
            let controller = controller.clone();
            let on_abort = Closure::<dyn FnMut()>::new(move || controller.abort());
            let _ = signal.add_event_listener_with_callback("abort", on_abort.as_ref().unchecked_ref());
            (signal.clone(), on_abort)
        });
        Ok(Self { controller, timed_out, _timeout: timeout, caller })
    }
}

impl Drop for AbortGuard {
    fn drop(&mut self) {
        if let Some((signal, on_abort)) = &self.caller {
            let _ = signal.remove_event_listener_with_callback("abort", on_abort.as_ref().unchecked_ref());
        }
    }
}
