//! The in-memory intent store: Node's default, the fallback when browser storage is blocked, and
//! the tests' twin of localStorage (a "reload" is a new engine over the same store).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use super::intent::IntentRecord;
use super::ports::{IntentStore, StoreError};

/// Records in a shared map. Clones share the same map, like two tabs sharing one localStorage.
#[derive(Clone, Debug, Default)]
pub struct MemoryStore {
    records: Rc<RefCell<BTreeMap<String, IntentRecord>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Synchronous read, for adapters that layer on top.
    pub fn get(&self, intent_id: &str) -> Option<IntentRecord> {
        self.records.borrow().get(intent_id).cloned()
    }

    /// Synchronous write.
    pub fn put(&self, record: IntentRecord) {
        self.records.borrow_mut().insert(record.id.clone(), record);
    }

    /// Synchronous delete.
    pub fn delete(&self, intent_id: &str) {
        self.records.borrow_mut().remove(intent_id);
    }

    /// Every record.
    pub fn all(&self) -> Vec<IntentRecord> {
        self.records.borrow().values().cloned().collect()
    }
}

impl IntentStore for MemoryStore {
    async fn load(&self, intent_id: &str) -> Result<Option<IntentRecord>, StoreError> {
        match self.get(intent_id) {
            Some(record) => {
                record.validate(Some(intent_id))?;
                Ok(Some(record))
            }
            None => Ok(None),
        }
    }

    async fn save(&self, record: &IntentRecord) -> Result<(), StoreError> {
        self.put(record.clone());
        Ok(())
    }

    async fn remove(&self, intent_id: &str) -> Result<(), StoreError> {
        self.delete(intent_id);
        Ok(())
    }

    async fn list(&self) -> Result<Vec<IntentRecord>, StoreError> {
        Ok(self.all().into_iter().filter(|r| r.validate(None).is_ok()).collect())
    }
}
