//! Waiting in the browser: backoff sleeps (gloo-timers) and waiting for `online`, both cut short
//! by the caller's `AbortSignal`.

use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;

use futures_channel::oneshot;
use futures_util::future::{select, Either};
use gloo_timers::future::TimeoutFuture;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::legacy::ports::{Interrupted, Waiter};

use super::js::{global_property, property};

/// A waiter bound to one `send` call's optional `AbortSignal`.
pub struct BrowserWaiter {
    signal: Option<web_sys::AbortSignal>,
}

impl BrowserWaiter {
    /// A waiter that stops early when `signal` aborts.
    pub fn new(signal: Option<web_sys::AbortSignal>) -> Self {
        Self { signal }
    }
}

impl Waiter for BrowserWaiter {
    async fn sleep(&self, ms: u64) -> Result<(), Interrupted> {
        until_aborted(self.signal.as_ref(), TimeoutFuture::new(clamp_ms(ms))).await
    }

    fn is_online(&self) -> bool {
        // `navigator.onLine` where it exists (windows, workers); Node has no notion: online.
        global_property("navigator")
            .and_then(|navigator| property(&navigator, "onLine"))
            .and_then(|online| online.as_bool())
            .unwrap_or(true)
    }

    async fn wait_online(&self, max_ms: u64) -> Result<bool, Interrupted> {
        // Chromium flips a worker's `navigator.onLine` without firing `online` on the worker
        // scope, so the flag is also polled, every ONLINE_POLL_MS.
        let mut online = EventOnce::listen(&js_sys::global(), "online");
        let mut left = max_ms;
        loop {
            let step = left.min(ONLINE_POLL_MS);
            let online_or_timeout = select(&mut online.fired, TimeoutFuture::new(clamp_ms(step)));
            let fired = matches!(until_aborted(self.signal.as_ref(), online_or_timeout).await?, Either::Left(_));
            if fired || self.is_online() {
                return Ok(true);
            }
            left -= step;
            if left == 0 {
                return Ok(false);
            }
        }
    }
}

/// Runs `future` to completion unless `signal` aborts first (an already aborted signal, which fires
/// no more `abort` events, interrupts at once). The one place the caller's signal cuts a wait short.
pub async fn until_aborted<F: Future>(
    signal: Option<&web_sys::AbortSignal>,
    future: F,
) -> Result<F::Output, Interrupted> {
    let Some(signal) = signal else { return Ok(future.await) };
    if signal.aborted() {
        return Err(Interrupted);
    }
    let mut abort = EventOnce::listen(signal.as_ref(), "abort");
    match select(pin!(future), &mut abort.fired).await {
        Either::Left((output, _)) => Ok(output),
        Either::Right(_) => Err(Interrupted),
    }
}

/// How often `wait_online` re-reads `navigator.onLine` (see there).
const ONLINE_POLL_MS: u64 = 1_000;

/// setTimeout takes a 32-bit signed delay; longer ones fire at once, so clamp.
fn clamp_ms(ms: u64) -> u32 {
    ms.min(i32::MAX as u64) as u32
}

/// A one-shot listener for `event` on `target`, removed when dropped (RAII, like gloo's `Timeout`).
pub struct EventOnce {
    /// Resolves when the event fires.
    pub fired: oneshot::Receiver<()>,
    target: JsValue,
    event: &'static str,
    callback: Closure<dyn FnMut()>,
}

impl EventOnce {
    /// Listens; if `target` cannot take listeners, `fired` simply never resolves.
    pub fn listen(target: &JsValue, event: &'static str) -> Self {
        let (sender, fired) = oneshot::channel();
        let sender = Rc::new(Cell::new(Some(sender)));
        let callback = Closure::<dyn FnMut()>::new(move || {
            if let Some(sender) = sender.take() {
                let _ = sender.send(());
            }
        });
        if let Some(target) = target.dyn_ref::<web_sys::EventTarget>() {
            let _ = target.add_event_listener_with_callback(event, callback.as_ref().unchecked_ref());
        }
        Self { fired, target: target.clone(), event, callback }
    }
}

impl Drop for EventOnce {
    fn drop(&mut self) {
        if let Some(target) = self.target.dyn_ref::<web_sys::EventTarget>() {
            let _ = target.remove_event_listener_with_callback(self.event, self.callback.as_ref().unchecked_ref());
        }
    }
}
