//! The transactional outbox: work that leaves the database, done at least once after the commit.
//!
//! A handler that must call something outside its database (send an email, notify a partner) does not call
//! it inside the key's transaction; it writes a [`Message`] into the `outbox_messages` table in that same
//! transaction ([`enqueue_sqlite`], [`enqueue_postgres`]), so the message exists exactly when the business
//! change does. A [`Worker`] (one per server instance) claims due messages, hands each to the app's
//! delivery function and marks it delivered. Delivery is at least once (a crash between the receiver's
//! answer and the mark sends the message again), so the receiver deduplicates by [`Message::id`], which is
//! sent with every attempt (as an `Idempotency-Key`, for example). A failed delivery is retried with the
//! client crate's capped exponential backoff with full jitter, so an outage only delays messages.
//!
//! A claim lasts [`Worker::lease`]; a delivery gets a third of it, so two instances never send one message
//! at the same moment, and a claim left by a crashed instance runs out and the message is claimed again.

use std::future::Future;
use std::time::Duration;

use idempotent_fetch::machine::{Backoff, Jitter, OsRandom, Policy};
use tokio::sync::watch;

use crate::error::StoreError;
use crate::retention::{unix_now, unix_now_ms};

pub use crate::outbox_table::{POSTGRES_SCHEMA, SQLITE_SCHEMA};

/// A message to deliver after the commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Its id: 32 hex digits from the CSPRNG, what the receiver deduplicates by.
    pub id: String,
    /// What kind of message it is (the delivery function dispatches on it), e.g. `"invite-email"`.
    pub topic: String,
    /// The message (JSON text).
    pub payload: String,
}

impl Message {
    /// A message with a fresh id and `payload` as JSON.
    pub fn new(topic: &str, payload: &impl serde::Serialize) -> Result<Self, StoreError> {
        let id = crate::random::random_hex()?;
        let payload = serde_json::to_string(payload).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        Ok(Message { id, topic: topic.to_owned(), payload })
    }
}

/// Writes `message` into the outbox inside the caller's (the key's) transaction.
#[cfg(feature = "sqlite")]
pub fn enqueue_sqlite(tx: &rusqlite::Transaction<'_>, message: &Message) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO outbox_messages (id, topic, payload, created_at) VALUES (?1, ?2, ?3, ?4)",
        rusqlite::params![message.id, message.topic, message.payload, unix_now()],
    )?;
    Ok(())
}

/// Writes `message` into the outbox inside the caller's (the key's) transaction.
#[cfg(feature = "postgres")]
pub async fn enqueue_postgres(tx: &tokio_postgres::Transaction<'_>, message: &Message) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO outbox_messages (id, topic, payload, created_at) VALUES ($1, $2, $3, $4)",
        &[&message.id, &message.topic, &message.payload, &unix_now()],
    )
    .await?;
    Ok(())
}

/// A message claimed for one delivery attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    /// The message.
    pub message: Message,
    /// Attempts so far, this one included.
    pub attempts: i64,
}

/// Where the outbox table lives: implemented for [`crate::sqlite::SqliteKeys`] and for a shared
/// `tokio_postgres::Client` (`Arc<Client>`); an app with its own outbox table implements it for its store
/// (its errors as [`StoreError::Backend`]).
pub trait OutboxStore: Clone + Send + Sync + 'static {
    /// Claims up to `limit` messages due by `now_ms` and not claimed by anyone until `until_ms`, counting
    /// the attempt (PostgreSQL: `FOR UPDATE SKIP LOCKED`, so instances never claim one message together).
    fn claim(
        &self,
        now_ms: i64,
        until_ms: i64,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<Claimed>, StoreError>> + Send;
    /// Marks a message delivered at `at` (unix seconds).
    fn delivered(&self, id: String, at: i64) -> impl Future<Output = Result<(), StoreError>> + Send;
    /// Ends a message's claim and schedules its next attempt at `at_ms` (unix milliseconds).
    fn retry(&self, id: String, at_ms: i64) -> impl Future<Output = Result<(), StoreError>> + Send;
}

#[cfg(feature = "sqlite")]
const CLAIM_SQL_SQLITE: &str = "UPDATE outbox_messages SET claimed_until = ?1, attempts = attempts + 1
     WHERE id IN (SELECT id FROM outbox_messages
                  WHERE delivered_at IS NULL AND next_attempt_at <= ?2 AND claimed_until <= ?2
                  ORDER BY next_attempt_at LIMIT ?3)
     RETURNING id, topic, payload, attempts";

#[cfg(feature = "sqlite")]
impl OutboxStore for crate::sqlite::SqliteKeys {
    async fn claim(&self, now_ms: i64, until_ms: i64, limit: i64) -> Result<Vec<Claimed>, StoreError> {
        self.with_conn(move |conn| {
            let mut stmt = conn.prepare_cached(CLAIM_SQL_SQLITE)?;
            let rows = stmt.query_map(rusqlite::params![until_ms, now_ms, limit], |row| {
                Ok(Claimed {
                    message: Message { id: row.get(0)?, topic: row.get(1)?, payload: row.get(2)? },
                    attempts: row.get(3)?,
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    async fn delivered(&self, id: String, at: i64) -> Result<(), StoreError> {
        self.with_conn(move |conn| {
            conn.execute("UPDATE outbox_messages SET delivered_at = ?1 WHERE id = ?2", rusqlite::params![at, id])?;
            Ok(())
        })
        .await
    }

    async fn retry(&self, id: String, at_ms: i64) -> Result<(), StoreError> {
        self.with_conn(move |conn| {
            conn.execute(
                "UPDATE outbox_messages SET claimed_until = 0, next_attempt_at = ?1 WHERE id = ?2",
                rusqlite::params![at_ms, id],
            )?;
            Ok(())
        })
        .await
    }
}

#[cfg(feature = "postgres")]
impl OutboxStore for std::sync::Arc<tokio_postgres::Client> {
    async fn claim(&self, now_ms: i64, until_ms: i64, limit: i64) -> Result<Vec<Claimed>, StoreError> {
        let rows = self
            .query(
                "UPDATE outbox_messages SET claimed_until = $1, attempts = attempts + 1
                 WHERE id IN (SELECT id FROM outbox_messages
                              WHERE delivered_at IS NULL AND next_attempt_at <= $2 AND claimed_until <= $2
                              ORDER BY next_attempt_at LIMIT $3 FOR UPDATE SKIP LOCKED)
                 RETURNING id, topic, payload, attempts",
                &[&until_ms, &now_ms, &limit],
            )
            .await?;
        rows.iter()
            .map(|row| {
                Ok(Claimed {
                    message: Message { id: row.try_get(0)?, topic: row.try_get(1)?, payload: row.try_get(2)? },
                    attempts: row.try_get(3)?,
                })
            })
            .collect()
    }

    async fn delivered(&self, id: String, at: i64) -> Result<(), StoreError> {
        self.execute("UPDATE outbox_messages SET delivered_at = $1 WHERE id = $2", &[&at, &id]).await?;
        Ok(())
    }

    async fn retry(&self, id: String, at_ms: i64) -> Result<(), StoreError> {
        self.execute(
            "UPDATE outbox_messages SET claimed_until = 0, next_attempt_at = $1 WHERE id = $2",
            &[&at_ms, &id],
        )
        .await?;
        Ok(())
    }
}

/// The delivery worker's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Worker {
    /// How long a claim lasts; a delivery gets a third of it.
    pub lease: Duration,
    /// How often the worker looks for due messages.
    pub poll: Duration,
    /// The first retry's backoff step.
    pub base_delay: Duration,
    /// No retry waits longer than this.
    pub max_delay: Duration,
    /// Messages claimed per pass.
    pub batch: i64,
}

impl Default for Worker {
    /// A 30 s lease, a poll every 200 ms, retries from 200 ms up to 10 s, 16 messages per pass.
    fn default() -> Self {
        Worker {
            lease: Duration::from_secs(30),
            poll: Duration::from_millis(200),
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(10),
            batch: 16,
        }
    }
}

impl Worker {
    /// The wait before the next attempt of a message that failed `attempts` times: the `attempts`-th delay of
    /// the client crate's full-jitter schedule (uniform in `[0, min(max, base * 2^(attempts - 1))]`).
    pub fn retry_delay(&self, attempts: i64) -> Duration {
        let max_ms = u64::try_from(self.max_delay.as_millis()).unwrap_or(u64::MAX);
        let policy = Policy {
            base_delay_ms: u64::try_from(self.base_delay.as_millis()).unwrap_or(u64::MAX),
            max_delay_ms: max_ms,
            jitter: Jitter::Full,
            max_attempts: 64,
            ..Policy::default()
        };
        let mut backoff = Backoff::new(&policy);
        let mut delay = max_ms;
        // Past 32 steps the cap has long been reached; the schedule stays the same.
        for _ in 0..attempts.clamp(1, 32) {
            // A failed random source waits the cap rather than retrying at once.
            delay = backoff.next_delay(&OsRandom).unwrap_or(max_ms);
        }
        Duration::from_millis(delay)
    }

    /// One pass: claims due messages and delivers each with `deliver` (an `Err` schedules a retry; so does
    /// a delivery that outlasts a third of the lease). Returns how many were delivered; `Err` only when the
    /// claim failed (a message that could not be marked is logged: its claim runs out and it is sent again).
    pub async fn deliver_once<S, D, Fut>(&self, store: &S, deliver: &D) -> Result<usize, StoreError>
    where
        S: OutboxStore,
        D: Fn(Message) -> Fut,
        Fut: Future<Output = Result<(), String>>,
    {
        let now_ms = unix_now_ms();
        let lease_ms = i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX);
        let claimed = store.claim(now_ms, now_ms.saturating_add(lease_ms), self.batch).await?;
        let mut delivered = 0;
        for Claimed { message, attempts } in claimed {
            let id = message.id.clone();
            let topic = message.topic.clone();
            let sent = tokio::time::timeout(self.lease / 3, deliver(message)).await;
            let why = match sent {
                Ok(Ok(())) => match store.delivered(id.clone(), unix_now()).await {
                    Ok(()) => {
                        delivered += 1;
                        continue;
                    }
                    // The claim runs out and the message is sent again; the receiver refuses the duplicate.
                    Err(error) => {
                        tracing::warn!(%id, %topic, %error, "outbox: marking delivered failed");
                        continue;
                    }
                },
                Ok(Err(error)) => error,
                Err(_) => "timed out".to_owned(),
            };
            tracing::info!(%id, %topic, attempts, why, "outbox: delivery failed; will retry");
            if let Err(error) = self.schedule_retry(store, id.clone(), attempts).await {
                tracing::warn!(%id, %error, "outbox: scheduling a retry failed");
            }
        }
        Ok(delivered)
    }

    async fn schedule_retry<S: OutboxStore>(&self, store: &S, id: String, attempts: i64) -> Result<(), StoreError> {
        let wait = i64::try_from(self.retry_delay(attempts).as_millis()).unwrap_or(i64::MAX);
        store.retry(id, unix_now_ms().saturating_add(wait)).await
    }

    /// Delivers due messages every [`Worker::poll`] until `shutdown` turns true (or its sender is dropped).
    pub async fn run<S, D, Fut>(self, store: S, deliver: D, shutdown: watch::Receiver<bool>)
    where
        S: OutboxStore,
        D: Fn(Message) -> Fut,
        Fut: Future<Output = Result<(), String>>,
    {
        crate::periodic::every(self.poll, shutdown, || async {
            if let Err(error) = self.deliver_once(&store, &deliver).await {
                tracing::warn!(%error, "outbox: claiming messages failed");
            }
        })
        .await;
    }
}
