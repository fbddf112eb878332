//! IndexedDB, for workers (which have no Web Storage): database `idempotent-fetch`, object store
//! `intents`, one record per intent under the key `<namespace>:<intent id>` (namespaces have no
//! `:`, so a namespace's records are the key range `[<namespace>:, <namespace>;)`). Values are the
//! same JSON text as in `localStorage` ([`super::record_codec`]); [`super::storage::WebStore`]
//! decodes and validates them.
//!
//! Requests are wrapped by hand (listen for `success`/`error`, or a transaction's
//! `complete`/`abort`) rather than through a crate, to keep the wasm small. Opening is started at
//! once and awaited by the first operation; an open that fails, or hangs (an old Safari bug) for
//! [`OPEN_TIMEOUT_MS`], is an [`IdbError::Unusable`], on which the caller falls back to memory.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use futures_util::future::{select, Either};
use gloo_timers::future::TimeoutFuture;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{
    IdbDatabase, IdbFactory, IdbKeyRange, IdbOpenDbRequest, IdbRequest, IdbRequestReadyState, IdbTransaction,
    IdbTransactionMode,
};

use super::errors::{describe_js, js_error_name};
use super::waiter::EventOnce;

/// The database every client of this library shares (one store; namespaces are key prefixes).
pub const DATABASE: &str = "idempotent-fetch";
/// The object store of intent records.
pub const STORE: &str = "intents";
/// The schema version: bump it (and migrate in `upgradeneeded`) if the layout changes.
const VERSION: u32 = 1;
/// How long the first operation waits for the database to open before falling back to memory.
pub const OPEN_TIMEOUT_MS: u32 = 5_000;

/// Why an operation failed.
#[derive(Debug)]
pub enum IdbError {
    /// IndexedDB cannot be used at all here (absent, blocked, failed to open, or a write was
    /// refused, e.g. `QuotaExceededError`): the reason, for `storageFallback`.
    Unusable(String),
    /// One read or delete failed; the database may still work.
    Failed(String),
}

/// The intents of one namespace in IndexedDB.
pub struct IdbStore {
    prefix: String,
    database: RefCell<Database>,
}

enum Database {
    /// The open request, and whether its `success`/`error` has fired. The request's `readyState` is
    /// already "done" while the upgrade transaction still runs, so it cannot tell.
    Opening(IdbOpenDbRequest, Rc<Cell<bool>>),
    Open(IdbDatabase),
    Unusable(String),
}

impl IdbStore {
    /// Starts opening the database; `Err(reason)` when IndexedDB is absent or blocked outright.
    pub fn open(namespace: &str) -> Result<Self, String> {
        // Reading `indexedDB` can throw (SecurityError) where storage is blocked.
        let factory = js_sys::Reflect::get(&js_sys::global(), &JsValue::from_str("indexedDB")).map_err(|e| {
            format!(
                "{}: indexedDB is blocked ({}); intents are kept in memory",
                js_error_name(&e).unwrap_or_default(),
                describe_js(&e)
            )
        })?;
        if factory.is_undefined() || factory.is_null() {
            return Err("indexedDB is not available here; intents are kept in memory".into());
        }
        let factory: IdbFactory = factory.unchecked_into();
        // `open` throws SecurityError in opaque origins (sandboxed frames, data: workers).
        let request = factory.open_with_u32(DATABASE, VERSION).map_err(|e| {
            format!(
                "{}: IndexedDB cannot be opened ({}); intents are kept in memory",
                js_error_name(&e).unwrap_or_default(),
                describe_js(&e)
            )
        })?;
        let upgrading = request.clone();
        let on_upgrade = Closure::once_into_js(move || {
            if let Ok(database) = upgrading.result().and_then(|db| db.dyn_into::<IdbDatabase>()) {
                if !database.object_store_names().contains(STORE) {
                    let _ = database.create_object_store(STORE);
                }
            }
        });
        request.set_onupgradeneeded(Some(on_upgrade.unchecked_ref()));
        let finished = Rc::new(Cell::new(false));
        for set_handler in [IdbRequest::set_onsuccess, IdbRequest::set_onerror] {
            let finished = finished.clone();
            let handler = Closure::once_into_js(move || finished.set(true));
            set_handler(&request, Some(handler.unchecked_ref()));
        }
        Ok(Self { prefix: format!("{namespace}:"), database: RefCell::new(Database::Opening(request, finished)) })
    }

    /// The record text stored for `intent_id`, if any.
    pub async fn get(&self, intent_id: &str) -> Result<Option<String>, IdbError> {
        let transaction = self.transaction(IdbTransactionMode::Readonly).await?;
        let request = store_request(&transaction, |s| s.get(&self.key(intent_id))).map_err(failed("reading"))?;
        let value = settled(&request).await.map_err(failed("reading"))?;
        Ok(value.as_string())
    }

    /// Stores `text` for `intent_id` and waits until the transaction has committed.
    pub async fn put(&self, intent_id: &str, text: &str) -> Result<(), IdbError> {
        let transaction = self.transaction(IdbTransactionMode::Readwrite).await?;
        store_request(&transaction, |s| s.put_with_key(&JsValue::from_str(text), &self.key(intent_id)))
            .map_err(unusable("writing"))?;
        committed(&transaction).await.map_err(unusable("writing"))
    }

    /// Deletes the record of `intent_id` (missing is fine) and waits for the commit.
    pub async fn delete(&self, intent_id: &str) -> Result<(), IdbError> {
        let transaction = self.transaction(IdbTransactionMode::Readwrite).await?;
        store_request(&transaction, |s| s.delete(&self.key(intent_id))).map_err(failed("removing from"))?;
        committed(&transaction).await.map_err(failed("removing from"))
    }

    /// Every `(intent id, record text)` of this namespace; values that are not text are skipped.
    pub async fn all(&self) -> Result<Vec<(String, String)>, IdbError> {
        let transaction = self.transaction(IdbTransactionMode::Readonly).await?;
        let range = IdbKeyRange::bound_with_lower_open_and_upper_open(
            &JsValue::from_str(&self.prefix),
            &JsValue::from_str(&format!("{};", &self.prefix[..self.prefix.len() - 1])),
            false,
            true,
        )
        .map_err(failed("reading"))?;
        // Both requests are made before awaiting, so the transaction stays active for both.
        let keys = store_request(&transaction, |s| s.get_all_keys_with_key(&range)).map_err(failed("reading"))?;
        let values = store_request(&transaction, |s| s.get_all_with_key(&range)).map_err(failed("reading"))?;
        let keys: js_sys::Array = settled(&keys).await.map_err(failed("reading"))?.unchecked_into();
        let values: js_sys::Array = settled(&values).await.map_err(failed("reading"))?.unchecked_into();
        Ok(keys
            .iter()
            .zip(values.iter())
            .filter_map(|(key, value)| {
                Some((key.as_string()?.strip_prefix(&self.prefix)?.to_owned(), value.as_string()?))
            })
            .collect())
    }

    fn key(&self, intent_id: &str) -> JsValue {
        JsValue::from_str(&format!("{}{intent_id}", self.prefix))
    }

    /// A transaction on the intents store, opening the database first if need be.
    async fn transaction(&self, mode: IdbTransactionMode) -> Result<IdbTransaction, IdbError> {
        let database = self.database().await?;
        // Throws InvalidStateError once the database was closed (storage cleared, versionchange).
        database.transaction_with_str_and_mode(STORE, mode).map_err(unusable("opening a transaction on"))
    }

    async fn database(&self) -> Result<IdbDatabase, IdbError> {
        let request = match &*self.database.borrow() {
            Database::Open(database) => return Ok(database.clone()),
            Database::Unusable(reason) => return Err(IdbError::Unusable(reason.clone())),
            Database::Opening(request, finished) => (request.clone(), finished.clone()),
        };
        let (request, finished) = request;
        let timeout = TimeoutFuture::new(OPEN_TIMEOUT_MS);
        let opened = match select(Box::pin(open_settled(&request, &finished)), timeout).await {
            Either::Left((result, _)) => result.and_then(|db| db.dyn_into::<IdbDatabase>()).map_err(|e| {
                format!(
                    "{}: IndexedDB cannot be opened ({}); intents are kept in memory",
                    js_error_name(&e).unwrap_or_default(),
                    describe_js(&e)
                )
            }),
            Either::Right(_) => {
                Err(format!("IndexedDB did not open within {OPEN_TIMEOUT_MS} ms; intents are kept in memory"))
            }
        };
        // Another operation may have settled it meanwhile: keep the first outcome.
        let mut state = self.database.borrow_mut();
        if let Database::Opening(..) = &*state {
            *state = match opened {
                Ok(database) => {
                    // Let a newer version of this library upgrade the schema instead of blocking it.
                    let closing = database.clone();
                    let on_version_change = Closure::once_into_js(move || closing.close());
                    database.set_onversionchange(Some(on_version_change.unchecked_ref()));
                    Database::Open(database)
                }
                Err(reason) => Database::Unusable(reason),
            };
        }
        match &*state {
            Database::Open(database) => Ok(database.clone()),
            Database::Unusable(reason) => Err(IdbError::Unusable(reason.clone())),
            Database::Opening(..) => Err(IdbError::Unusable("IndexedDB did not open".into())),
        }
    }
}

fn store_request(
    transaction: &IdbTransaction,
    make: impl FnOnce(&web_sys::IdbObjectStore) -> Result<IdbRequest, JsValue>,
) -> Result<IdbRequest, JsValue> {
    make(&transaction.object_store(STORE)?)
}

/// The database once the open request has fired `success` (after any upgrade transaction has
/// finished), or its error. Its `readyState` is "done" already during the upgrade, so the
/// `finished` flag set by its handlers decides whether to wait.
async fn open_settled(request: &IdbOpenDbRequest, finished: &Cell<bool>) -> Result<JsValue, JsValue> {
    outcome(request, !finished.get()).await
}

/// The result of `request` once it succeeds, or its error.
async fn settled(request: &IdbRequest) -> Result<JsValue, JsValue> {
    outcome(request, request.ready_state() == IdbRequestReadyState::Pending).await
}

/// Waits for `success` or `error` when `pending`, then reads the request's error or result.
async fn outcome(request: &IdbRequest, pending: bool) -> Result<JsValue, JsValue> {
    if pending {
        let mut success = EventOnce::listen(request, "success");
        let mut error = EventOnce::listen(request, "error");
        let _ = select(&mut success.fired, &mut error.fired).await;
    }
    match request.error() {
        Ok(Some(error)) => Err(error.into()),
        Ok(None) => request.result(),
        Err(e) => Err(e),
    }
}

/// Waits until `transaction` commits (`complete`), or its error once it aborts (a failed request,
/// `QuotaExceededError` at commit).
async fn committed(transaction: &IdbTransaction) -> Result<(), JsValue> {
    let mut complete = EventOnce::listen(transaction, "complete");
    let mut abort = EventOnce::listen(transaction, "abort");
    match select(&mut complete.fired, &mut abort.fired).await {
        Either::Left(_) => Ok(()),
        Either::Right(_) => {
            Err(transaction.error().map_or_else(|| JsValue::from_str("the transaction was aborted"), JsValue::from))
        }
    }
}

fn failed(doing: &'static str) -> impl Fn(JsValue) -> IdbError {
    move |e| IdbError::Failed(format!("{doing} IndexedDB failed: {}", describe_js(&e)))
}

fn unusable(doing: &'static str) -> impl Fn(JsValue) -> IdbError {
    move |e| {
        IdbError::Unusable(format!(
            "{}: {doing} IndexedDB failed ({}); intents are kept in memory",
            js_error_name(&e).unwrap_or_default(),
            describe_js(&e)
        ))
    }
}
