//! The keys a [`crate::sqlite::SqliteKeys`] is working on right now.
//!
//! SQLite shows another connection nothing of a transaction before its commit, and a `SqliteKeys` runs one
//! transaction at a time on its one connection, so neither the table nor the connection can say that a
//! key's request is being processed. This set can: a key is in it from the moment `run` (or `settle`)
//! accepts it until its transaction has committed or rolled back.
//!
//! An app that runs its own transactions on the connection ([`crate::sqlite::run_in`] inside
//! [`crate::sqlite::SqliteKeys::with_conn`]) keeps a set of its own the same way: it enters the key before its
//! transaction, answers a second request with the key [`crate::Outcome::InFlight`] while it is in, and asks the
//! set before [`crate::sqlite::status_in`], which cannot see an uncommitted row.
//!
//! A key's [`InFlightEntry`] (its place in the set, not a lock on the key row) is moved into the blocking task that
//! owns the transaction, never kept by the handler's future: a client that hangs up drops the handler, not the work,
//! and the key must read `in_flight` for as long as the work can still commit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

type Entry = (String, String);
/// Each pair with the moment it entered, for [`InFlightKeys::oldest_age`].
type Set = HashMap<Entry, Instant>;

/// The `(scope, key)` pairs being processed. Cloning shares the set.
#[derive(Debug, Clone, Default)]
pub struct InFlightKeys {
    keys: Arc<Mutex<Set>>,
}

impl InFlightKeys {
    /// Enters `(scope, key)` in the set; `None` while it is in already. It leaves when the [`InFlightEntry`]
    /// drops.
    pub fn enter(&self, scope: &str, key: &str) -> Option<InFlightEntry> {
        let entry = (scope.to_owned(), key.to_owned());
        match lock(&self.keys).entry(entry.clone()) {
            std::collections::hash_map::Entry::Occupied(_) => return None,
            std::collections::hash_map::Entry::Vacant(vacant) => vacant.insert(Instant::now()),
        };
        Some(InFlightEntry { keys: Arc::clone(&self.keys), entry })
    }

    /// Whether `(scope, key)` is in the set now.
    pub fn holds(&self, scope: &str, key: &str) -> bool {
        lock(&self.keys).contains_key(&(scope.to_owned(), key.to_owned()))
    }

    /// How many keys are in the set now (a gauge for metrics).
    pub fn len(&self) -> usize {
        lock(&self.keys).len()
    }

    /// Whether the set is empty now.
    pub fn is_empty(&self) -> bool {
        lock(&self.keys).is_empty()
    }

    /// How long the key that entered first of those in the set now has been in it; `None` when it is empty.
    /// One pass over the set: meant for a metrics scrape, not for every request.
    pub fn oldest_age(&self) -> Option<Duration> {
        lock(&self.keys).values().min().map(Instant::elapsed)
    }
}

/// One key's place in the [`InFlightKeys`]: the key reads in flight while this lives, and leaves the set on
/// drop (also when the task holding it unwinds).
#[derive(Debug)]
pub struct InFlightEntry {
    keys: Arc<Mutex<Set>>,
    entry: Entry,
}

impl Drop for InFlightEntry {
    fn drop(&mut self) {
        lock(&self.keys).remove(&self.entry);
    }
}

/// The set, even if a thread panicked while holding its mutex: every operation on it is a single insert,
/// lookup or removal, so it is never left half changed.
fn lock(keys: &Mutex<Set>) -> MutexGuard<'_, Set> {
    keys.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_entered_once_until_its_entry_drops() {
        let keys = InFlightKeys::default();
        let first = keys.enter("s", "k");
        assert!(first.is_some());
        assert!(keys.holds("s", "k"));
        assert!(keys.enter("s", "k").is_none());
        assert!(keys.enter("other", "k").is_some(), "scopes are separate");
        drop(first);
        assert!(!keys.holds("s", "k"));
        assert!(keys.enter("s", "k").is_some());
    }

    #[test]
    fn counts_its_keys_and_ages_the_oldest() {
        let keys = InFlightKeys::default();
        assert_eq!((keys.len(), keys.oldest_age()), (0, None));
        let first = keys.enter("s", "a");
        std::thread::sleep(Duration::from_millis(20));
        let second = keys.enter("s", "b");
        assert_eq!(keys.len(), 2);
        assert!(keys.oldest_age().is_some_and(|age| age >= Duration::from_millis(20)), "the first key's age");
        drop(first);
        assert!(keys.oldest_age().is_some_and(|age| age < Duration::from_millis(20)), "now the second's");
        drop(second);
        assert!(keys.is_empty());
    }
}
