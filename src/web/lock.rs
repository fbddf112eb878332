//! One sender per intent across tabs (and within a page): a Web Lock where the browser has
//! `navigator.locks`, a lease in `localStorage` where it does not.
//!
//! The tab that holds the lock sends; another tab's `send` of the same intent waits for the lock,
//! then finds the record updated. If the first tab got a definite answer, the waiting tab re-sends
//! with the same key and the server replays the stored answer (`replayed: true`): one order, and
//! both tabs see its result. If the first tab closed mid-retry, its Web Lock is released by the
//! browser (a lease expires after [`LEASE_TTL_MS`]) and the second tab takes over with the same key.

use std::cell::Cell;
use std::rc::Rc;

use futures_channel::oneshot;
use futures_util::future::{select, Either};
use gloo_timers::future::TimeoutFuture;
use js_sys::{Function, Promise};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::legacy::ports::{Clock, Interrupted, OsRandom, RandomSource};

use super::clock::DateClock;
use super::js::{global_property, object, property, set};
use super::waiter::{until_aborted, EventOnce};

/// How long a storage lease lives without renewal: a closed tab blocks others at most this long.
pub const LEASE_TTL_MS: u64 = 5_000;

/// A held lock; released when dropped.
pub enum IntentLock {
    /// A Web Lock; calling the function resolves the promise the lock callback returned.
    WebLock(Function),
    /// A storage lease, renewed by a timer while held (kept only for its `Drop`).
    Lease(#[allow(dead_code)] Lease),
    /// No coordination is possible here (no Web Locks, no localStorage: e.g. Node).
    None,
}

/// How long a Web Lock is kept after its holder is done, before the next tab gets it.
///
/// localStorage writes reach other tabs' renderer processes asynchronously, and nothing orders them
/// with the lock manager's grant: without this pause the next tab could read the intent's record
/// before the previous holder's last write arrives (seen as a rare second key under load). The
/// caller is not delayed: the release is scheduled, not awaited. (The lease path needs no pause: its
/// release is itself a storage write, ordered after the record writes.)
pub const WEB_LOCK_SETTLE_MS: u32 = 250;

impl Drop for IntentLock {
    fn drop(&mut self) {
        if let IntentLock::WebLock(release) = self {
            let release = release.clone();
            gloo_timers::callback::Timeout::new(WEB_LOCK_SETTLE_MS, move || {
                let _ = release.call0(&JsValue::UNDEFINED);
            })
            .forget();
        }
    }
}

/// Waits for the lock `name`, or until `signal` aborts.
pub async fn acquire(name: &str, signal: Option<&web_sys::AbortSignal>) -> Result<IntentLock, Interrupted> {
    if signal.is_some_and(|s| s.aborted()) {
        return Err(Interrupted);
    }
    let locks = global_property("navigator").and_then(|n| property(&n, "locks"));
    if let Some(locks) = locks {
        if let Some(lock) = acquire_web_lock(&locks, name, signal).await? {
            return Ok(lock);
        }
    }
    match global_property("localStorage").and_then(|s| s.dyn_into::<web_sys::Storage>().ok()) {
        Some(storage) => Lease::acquire(storage, name, signal).await.map(IntentLock::Lease),
        None => Ok(IntentLock::None),
    }
}

/// `navigator.locks.request(name, { signal }, callback)`; `Ok(None)` if the API refuses outright.
async fn acquire_web_lock(
    locks: &JsValue,
    name: &str,
    signal: Option<&web_sys::AbortSignal>,
) -> Result<Option<IntentLock>, Interrupted> {
    let Some(request) = property(locks, "request").and_then(|r| r.dyn_into::<Function>().ok()) else {
        return Ok(None);
    };
    let mut release: Option<Function> = None;
    let held = Promise::new(&mut |resolve, _reject| release = Some(resolve));
    let Some(release) = release else { return Ok(None) };
    let (granted_tx, mut granted) = oneshot::channel::<()>();
    let callback = Closure::once_into_js(move |_lock: JsValue| -> JsValue {
        let _ = granted_tx.send(());
        held.into()
    });
    let options = object();
    if let Some(signal) = signal {
        set(&options, "signal", signal.clone());
    }
    let requested = match request.call3(locks, &JsValue::from_str(name), &options, &callback) {
        Ok(promise) => promise,
        Err(_) => return Ok(None),
    };
    // The request's promise rejects when aborted, and at once where Web Locks are refused (a
    // SecurityError in opaque origins: sandboxed frames, data: workers), when the callback never
    // runs. Observe it, so it is never an unhandled rejection and such a refusal does not hang.
    let (refused_tx, refused) = oneshot::channel::<()>();
    if let Ok(promise) = requested.dyn_into::<Promise>() {
        wasm_bindgen_futures::spawn_local(async move {
            if wasm_bindgen_futures::JsFuture::from(promise).await.is_err() {
                let _ = refused_tx.send(());
            }
        });
    }
    // Made now, so that whatever happens next its Drop releases a lock granted late.
    let lock = IntentLock::WebLock(release);
    let outcome = until_aborted(signal, select(&mut granted, refused)).await?;
    match outcome {
        Either::Left((Ok(()), _)) => Ok(Some(lock)),
        _ => Ok(None),
    }
}

/// A lease in localStorage: `{ owner, expires }` under `idempotent-fetch:lease:<name>`.
pub struct Lease {
    storage: web_sys::Storage,
    slot: String,
    owner: String,
    renewing: Rc<Cell<bool>>,
}

impl Lease {
    async fn acquire(
        storage: web_sys::Storage,
        name: &str,
        signal: Option<&web_sys::AbortSignal>,
    ) -> Result<Self, Interrupted> {
        let slot = format!("idempotent-fetch:lease:{name}");
        let owner = format!("{:016x}", OsRandom.next_u64());
        loop {
            if signal.is_some_and(|s| s.aborted()) {
                return Err(Interrupted);
            }
            let now = DateClock.now_ms();
            let free = match storage.get_item(&slot) {
                Ok(Some(value)) => lease_expiry(&value).is_none_or(|expires| expires <= now),
                Ok(None) => true,
                // Storage unreadable: coordination is impossible; proceed rather than block forever.
                Err(_) => return Ok(Self::unowned(storage, slot, owner)),
            };
            if free {
                if storage.set_item(&slot, &lease_value(&owner, now + LEASE_TTL_MS)).is_err() {
                    // Storage full or read-only: no lease can be written, so waiting would never end.
                    return Ok(Self::unowned(storage, slot, owner));
                }
                // Two tabs may write at once: wait a moment, then see whose write stuck.
                TimeoutFuture::new(30).await;
                if held_by(&storage, &slot, &owner) {
                    let lease = Self { storage, slot, owner, renewing: Rc::new(Cell::new(true)) };
                    lease.keep_renewed();
                    return Ok(lease);
                }
            }
            // Wait for the holder to release (a `storage` event from its tab) or re-check soon.
            let mut released = EventOnce::listen(&js_sys::global(), "storage");
            let _ = select(&mut released.fired, TimeoutFuture::new(250)).await;
        }
    }

    fn unowned(storage: web_sys::Storage, slot: String, owner: String) -> Self {
        Self { storage, slot, owner, renewing: Rc::new(Cell::new(false)) }
    }

    /// Renews the lease every third of its TTL while held.
    fn keep_renewed(&self) {
        let (storage, slot, owner, renewing) =
            (self.storage.clone(), self.slot.clone(), self.owner.clone(), self.renewing.clone());
        wasm_bindgen_futures::spawn_local(async move {
            loop {
                TimeoutFuture::new((LEASE_TTL_MS / 3) as u32).await;
                if !renewing.get() {
                    break;
                }
                // Renew only a lease still ours: if it lapsed (throttled timers) and another tab took it,
                // taking it back would let both tabs believe they hold it.
                if !held_by(&storage, &slot, &owner) {
                    break;
                }
                let _ = storage.set_item(&slot, &lease_value(&owner, DateClock.now_ms() + LEASE_TTL_MS));
            }
        });
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.renewing.set(false);
        if held_by(&self.storage, &self.slot, &self.owner) {
            let _ = self.storage.remove_item(&self.slot);
        }
    }
}

/// Whether the lease in `slot` is `owner`'s.
fn held_by(storage: &web_sys::Storage, slot: &str, owner: &str) -> bool {
    storage
        .get_item(slot)
        .ok()
        .flatten()
        .and_then(|value| value.split_once(':').map(|(o, _)| o == owner))
        .unwrap_or(false)
}

/// `"<owner>:<expires ms>"`.
fn lease_value(owner: &str, expires: u64) -> String {
    format!("{owner}:{expires}")
}

/// The expiry of a lease value; `None` for anything malformed (treated as free).
fn lease_expiry(value: &str) -> Option<u64> {
    value.split_once(':')?.1.parse().ok()
}
