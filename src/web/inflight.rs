//! One `send` per intent at a time within a client, and the result shared with the callers that
//! waited (a double click calls `send` twice: the second call gets the first call's answer, with a
//! clone of its `Response`, and sends nothing).
//!
//! Across tabs the Web Lock in [`super::lock`] does the same job; this part also covers Node and
//! pages without Web Locks.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use futures_channel::oneshot;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::legacy::ports::Interrupted;

use super::js::{object, property, set};
use super::waiter::until_aborted;

/// What a waiter receives: the finished call's result object, or `None` when it ended without a
/// definite answer (then the waiter takes its turn and sends itself).
type Handoff = Option<JsValue>;

/// Senders in flight, by intent id.
#[derive(Default)]
pub struct InFlight {
    // A BTreeMap rather than a HashMap: no hasher or random seed in the wasm for a map of a few entries.
    waiting: RefCell<BTreeMap<String, Vec<oneshot::Sender<Handoff>>>>,
}

/// Either this call sends, or another call's result is already here.
pub enum Turn {
    /// This call sends; finish the guard with the result.
    Mine(TurnGuard),
    /// Another call of this client finished the intent meanwhile: its result (a fresh clone).
    Shared(JsValue),
}

/// Held by the call that sends; hands its result to the waiters when finished or dropped.
pub struct TurnGuard {
    registry: Rc<InFlight>,
    intent_id: String,
    result: Option<JsValue>,
}

impl InFlight {
    /// Waits until no other call of this client is sending `intent_id`.
    pub async fn enter(
        registry: &Rc<Self>,
        intent_id: &str,
        signal: Option<&web_sys::AbortSignal>,
    ) -> Result<Turn, Interrupted> {
        loop {
            let receiver = {
                let mut waiting = registry.waiting.borrow_mut();
                match waiting.get_mut(intent_id) {
                    None => {
                        waiting.insert(intent_id.to_owned(), Vec::new());
                        return Ok(Turn::Mine(TurnGuard {
                            registry: registry.clone(),
                            intent_id: intent_id.to_owned(),
                            result: None,
                        }));
                    }
                    Some(queue) => {
                        let (sender, receiver) = oneshot::channel();
                        queue.push(sender);
                        receiver
                    }
                }
            };
            let handoff = until_aborted(signal, receiver).await?;
            if let Ok(Some(result)) = handoff {
                return Ok(Turn::Shared(result));
            }
        }
    }
}

impl TurnGuard {
    /// Records the definite result to hand to the waiters.
    pub fn set_result(&mut self, result: &JsValue) {
        self.result = Some(result.clone());
    }
}

impl Drop for TurnGuard {
    fn drop(&mut self) {
        let waiters = self.registry.waiting.borrow_mut().remove(&self.intent_id).unwrap_or_default();
        for waiter in waiters {
            let _ = waiter.send(self.result.as_ref().and_then(clone_result));
        }
    }
}

/// A copy of a `SendResult` with its own `Response` clone (a body can be read once per clone).
fn clone_result(result: &JsValue) -> Option<JsValue> {
    let response = property(result, "response")?.dyn_into::<web_sys::Response>().ok()?;
    let copy = js_sys::Object::assign(&object(), result.unchecked_ref());
    set(&copy, "response", response.clone().ok()?);
    Some(copy.into())
}
