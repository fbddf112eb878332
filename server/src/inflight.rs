//! The keys this process is working on right now.
//!
//! The key row, the work and the stored answer commit in ONE transaction, so an "in flight" row (key
//! inserted, no answer yet) is uncommitted and invisible to other connections. With SQLite (a single
//! writer, `BEGIN IMMEDIATE`) a second request for the same key would simply queue behind the first on
//! the write lock and then replay its committed answer: correct, but it hides the in-flight state and ties
//! up a blocking thread per duplicate. So each process also keeps the set of `(account, key)` pairs it is
//! processing, and the handler answers a concurrent duplicate `409` with `Retry-After` at once. Across
//! processes (PostgreSQL, several instances) the database's advisory lock plays that role.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::keys::{AccountId, IdempotencyKey};

/// The `(account, key)` pairs this process is working on.
#[derive(Debug, Clone, Default)]
pub struct InFlight {
    keys: Arc<Mutex<HashSet<(String, String)>>>,
}

impl InFlight {
    /// Enters a key in the set; `None` if it is in already. It leaves when the [`InFlightEntry`] drops.
    pub fn enter(&self, account: &AccountId, key: &IdempotencyKey) -> Option<InFlightEntry> {
        let entry = (account.as_str().to_owned(), key.as_str().to_owned());
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if !keys.insert(entry.clone()) {
            return None;
        }
        Some(InFlightEntry { keys: Arc::clone(&self.keys), entry })
    }

    /// Whether this process is working on the key right now (without entering it).
    pub fn contains(&self, account: &AccountId, key: &IdempotencyKey) -> bool {
        let entry = (account.as_str().to_owned(), key.as_str().to_owned());
        self.keys.lock().unwrap_or_else(|p| p.into_inner()).contains(&entry)
    }
}

/// One key's place in the [`InFlight`] set (not a lock on its row); leaves the set on drop (also on a panic's unwind).
/// Whoever does the key's work holds it, not the handler waiting for the answer: a client that hangs up drops the
/// handler, while the work goes on and the key must still read in flight until it has committed or rolled back.
#[derive(Debug)]
pub struct InFlightEntry {
    keys: Arc<Mutex<HashSet<(String, String)>>>,
    entry: (String, String),
}

impl Drop for InFlightEntry {
    fn drop(&mut self) {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        keys.remove(&self.entry);
    }
}
