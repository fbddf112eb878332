//! Intent storage in the browser: `localStorage` / `sessionStorage` / IndexedDB
//! ([`super::indexeddb`]) with a memory fallback.
//!
//! Records live under `idempotent-fetch:v1:<namespace>:<intent id>`, one JSON document each, so
//! one account's intents are never seen by another's client. Everything read back is validated
//! ([`IntentRecord::validate`]); foreign or corrupt entries under the prefix are skipped by `list`
//! and reported as `STORAGE` errors by `load` (they are never silently overwritten with a new key).
//!
//! When the storage is blocked (`SecurityError`, e.g. cookies disabled; IndexedDB absent or failing
//! to open) or full (`QuotaExceededError`), the store switches to memory for the rest of the page's life, keeps
//! working, and reports why through [`WebStore::fallback_reason`] and the `storagefallback` event.

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::legacy::intent::{IntentRecord, RecordError};
use crate::legacy::ports::{IntentStore, StoreError};
use crate::legacy::MemoryStore;

use super::errors::{describe_js, js_error_name};
use super::indexeddb::{IdbError, IdbStore};
use super::options::StorageKind;

/// Version segment of the key prefix: bump it if the layout changes.
const PREFIX: &str = "idempotent-fetch:v1:";

/// Told why the store fell back to memory.
type FallbackListener = Box<dyn Fn(&str)>;

/// The intent store of one client.
pub struct WebStore {
    prefix: String,
    backend: RefCell<Backend>,
    fallback_reason: RefCell<Option<String>>,
    on_fallback: RefCell<Option<FallbackListener>>,
}

/// The synchronous backends, as [`WebStore::web_or_memory`] hands them out.
enum WebOrMemory {
    Web(web_sys::Storage),
    Memory(MemoryStore),
}

enum Backend {
    Web(web_sys::Storage),
    Idb(Rc<IdbStore>),
    Memory(MemoryStore),
}

impl WebStore {
    /// Opens the requested storage, falling back to memory (with a reason) when it is unusable.
    pub fn open(kind: StorageKind, namespace: &str) -> Self {
        let prefix = format!("{PREFIX}{namespace}:");
        let (backend, reason) = match kind {
            StorageKind::Memory => (Backend::Memory(MemoryStore::new()), None),
            StorageKind::Local | StorageKind::Session => match probe(kind) {
                Ok(storage) => (Backend::Web(storage), None),
                Err(reason) => (Backend::Memory(MemoryStore::new()), Some(reason)),
            },
            // Opening is asynchronous: a failure to open is found by the first operation.
            StorageKind::IndexedDb => match IdbStore::open(namespace) {
                Ok(store) => (Backend::Idb(Rc::new(store)), None),
                Err(reason) => (Backend::Memory(MemoryStore::new()), Some(reason)),
            },
        };
        Self {
            prefix,
            backend: RefCell::new(backend),
            fallback_reason: RefCell::new(reason),
            on_fallback: RefCell::new(None),
        }
    }

    /// Why the store fell back to memory, if it did.
    pub fn fallback_reason(&self) -> Option<String> {
        self.fallback_reason.borrow().clone()
    }

    /// `"local" | "session" | "indexeddb" | "memory"`: what is in use now.
    pub fn active_kind(&self, requested: StorageKind) -> StorageKind {
        match &*self.backend.borrow() {
            Backend::Web(_) | Backend::Idb(_) => requested,
            Backend::Memory(_) => StorageKind::Memory,
        }
    }

    /// Called (once) when a later write makes the store fall back.
    pub fn set_fallback_listener(&self, listener: FallbackListener) {
        *self.on_fallback.borrow_mut() = Some(listener);
    }

    /// The synchronous backend, cloned out so that no borrow is held across an await. Callers try
    /// IndexedDB first and either return or fall back to memory, so `Idb` cannot be the backend
    /// here; an empty throwaway store keeps that impossible case harmless.
    fn web_or_memory(&self) -> WebOrMemory {
        match &*self.backend.borrow() {
            Backend::Web(storage) => WebOrMemory::Web(storage.clone()),
            Backend::Memory(memory) => WebOrMemory::Memory(memory.clone()),
            Backend::Idb(_) => WebOrMemory::Memory(MemoryStore::new()),
        }
    }

    /// The IndexedDB store, while it is the backend (cloned out, so no borrow is held across an await).
    fn idb(&self) -> Option<Rc<IdbStore>> {
        match &*self.backend.borrow() {
            Backend::Idb(idb) => Some(idb.clone()),
            _ => None,
        }
    }

    fn slot(&self, intent_id: &str) -> String {
        format!("{}{intent_id}", self.prefix)
    }

    /// Moves every readable record into memory and continues there.
    fn fall_back(&self, reason: String) {
        let carried = match &*self.backend.borrow() {
            Backend::Web(storage) => read_all(storage, &self.prefix),
            _ => Vec::new(),
        };
        self.switch_to_memory(reason, carried);
    }

    /// Continues in memory with `carried`, reporting `reason` (once: later calls do nothing).
    fn switch_to_memory(&self, reason: String, carried: Vec<IntentRecord>) {
        if let Backend::Memory(_) = &*self.backend.borrow() {
            return;
        }
        let memory = MemoryStore::new();
        for record in carried {
            memory.put(record);
        }
        *self.backend.borrow_mut() = Backend::Memory(memory);
        *self.fallback_reason.borrow_mut() = Some(reason.clone());
        if let Some(listener) = &*self.on_fallback.borrow() {
            listener(&reason);
        }
    }
}

impl IntentStore for WebStore {
    async fn load(&self, intent_id: &str) -> Result<Option<IntentRecord>, StoreError> {
        if let Some(idb) = self.idb() {
            match idb.get(intent_id).await {
                Ok(None) => return Ok(None),
                Ok(Some(text)) => return Ok(Some(decode(&text, Some(intent_id))?)),
                Err(IdbError::Failed(reason)) => return Err(StoreError::Unavailable(reason)),
                Err(IdbError::Unusable(reason)) => self.switch_to_memory(reason, Vec::new()),
            }
        }
        let storage = match self.web_or_memory() {
            WebOrMemory::Memory(memory) => return memory.load(intent_id).await,
            WebOrMemory::Web(storage) => storage,
        };
        match storage.get_item(&self.slot(intent_id)) {
            Ok(None) => Ok(None),
            Ok(Some(text)) => Ok(Some(decode(&text, Some(intent_id))?)),
            Err(e) => Err(StoreError::Unavailable(format!("reading storage failed: {}", describe_js(&e)))),
        }
    }

    async fn save(&self, record: &IntentRecord) -> Result<(), StoreError> {
        if let Some(idb) = self.idb() {
            let text = encode(record)?;
            let Err(IdbError::Unusable(reason) | IdbError::Failed(reason)) = idb.put(&record.id, &text).await else {
                return Ok(());
            };
            // Reads may still work after a refused write (quota): keep what is stored.
            let carried = decode_entries(idb.all().await.unwrap_or_default());
            self.switch_to_memory(reason, carried);
        }
        let storage = match self.web_or_memory() {
            WebOrMemory::Memory(memory) => return memory.save(record).await,
            WebOrMemory::Web(storage) => storage,
        };
        let text = encode(record)?;
        if let Err(e) = storage.set_item(&self.slot(&record.id), &text) {
            let name = js_error_name(&e).unwrap_or_default();
            self.fall_back(format!(
                "{name}: writing to storage failed ({}); intents are kept in memory for this page",
                describe_js(&e)
            ));
            if let WebOrMemory::Memory(memory) = self.web_or_memory() {
                memory.put(record.clone());
            }
        }
        Ok(())
    }

    async fn remove(&self, intent_id: &str) -> Result<(), StoreError> {
        if let Some(idb) = self.idb() {
            match idb.delete(intent_id).await {
                Ok(()) => return Ok(()),
                Err(IdbError::Failed(reason)) => return Err(StoreError::Unavailable(reason)),
                Err(IdbError::Unusable(reason)) => self.switch_to_memory(reason, Vec::new()),
            }
        }
        match self.web_or_memory() {
            WebOrMemory::Memory(memory) => memory.remove(intent_id).await,
            WebOrMemory::Web(storage) => storage
                .remove_item(&self.slot(intent_id))
                .map_err(|e| StoreError::Unavailable(format!("removing from storage failed: {}", describe_js(&e)))),
        }
    }

    async fn list(&self) -> Result<Vec<IntentRecord>, StoreError> {
        if let Some(idb) = self.idb() {
            match idb.all().await {
                Ok(entries) => return Ok(decode_entries(entries)),
                Err(IdbError::Failed(reason)) => return Err(StoreError::Unavailable(reason)),
                Err(IdbError::Unusable(reason)) => self.switch_to_memory(reason, Vec::new()),
            }
        }
        match self.web_or_memory() {
            WebOrMemory::Memory(memory) => memory.list().await,
            WebOrMemory::Web(storage) => Ok(read_all(&storage, &self.prefix)),
        }
    }
}

/// Gets the storage object and proves it can be written (Safari private mode and full disks
/// throw only on write).
fn probe(kind: StorageKind) -> Result<web_sys::Storage, String> {
    let name = if kind == StorageKind::Session { "sessionStorage" } else { "localStorage" };
    // Reading `localStorage` itself throws SecurityError when storage is blocked.
    let value = js_sys::Reflect::get(&js_sys::global(), &JsValue::from_str(name))
        .map_err(|e| format!("{}: {name} is blocked ({})", js_error_name(&e).unwrap_or_default(), describe_js(&e)))?;
    if value.is_undefined() || value.is_null() {
        return Err(format!("{name} is not available here; intents are kept in memory"));
    }
    let storage: web_sys::Storage = value.dyn_into().map_err(|_| format!("{name} is not a Storage object"))?;
    let probe_key = format!("{PREFIX}probe");
    storage.set_item(&probe_key, "1").and_then(|()| storage.remove_item(&probe_key)).map_err(|e| {
        format!("{}: {name} cannot be written ({})", js_error_name(&e).unwrap_or_default(), describe_js(&e))
    })?;
    Ok(storage)
}

/// Every valid record under `prefix` (foreign or corrupt entries are skipped).
fn read_all(storage: &web_sys::Storage, prefix: &str) -> Vec<IntentRecord> {
    let length = storage.length().unwrap_or(0);
    let slots: Vec<String> =
        (0..length).filter_map(|i| storage.key(i).ok().flatten()).filter(|k| k.starts_with(prefix)).collect();
    let entries = slots.into_iter().filter_map(|slot| {
        let text = storage.get_item(&slot).ok().flatten()?;
        Some((slot[prefix.len()..].to_owned(), text))
    });
    decode_entries(entries)
}

/// The valid records among `(intent id, JSON text)` entries.
fn decode_entries(entries: impl IntoIterator<Item = (String, String)>) -> Vec<IntentRecord> {
    entries.into_iter().filter_map(|(id, text)| decode(&text, Some(&id)).ok()).collect()
}

/// JSON text -> validated record.
fn decode(text: &str, expected_id: Option<&str>) -> Result<IntentRecord, StoreError> {
    if text.len() > 1 << 20 {
        return Err(RecordError::Malformed("record larger than 1 MiB".into()).into());
    }
    let record = super::record_codec::decode(text)?;
    record.validate(expected_id)?;
    Ok(record)
}

/// Record -> JSON text.
fn encode(record: &IntentRecord) -> Result<String, StoreError> {
    super::record_codec::encode(record).map_err(StoreError::Unavailable)
}
