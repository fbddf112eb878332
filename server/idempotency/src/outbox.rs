//! The transactional outbox: work that leaves the database, done at least once after the commit.
//!
//! A handler that must call something outside its database (send an email, notify a partner) does not call
//! it inside the key's transaction; it writes a [`Message`] into the `outbox_messages` table in that same
//! transaction ([`enqueue_sqlite`], [`enqueue_postgres`]), so the message exists exactly when the business
//! change does. A [`Worker`] (one per server instance) claims due messages, hands them to the app's
//! delivery function, up to [`Worker::concurrency`] at a time, and writes the outcomes (marks) in batches.
//! Delivery is at least once (a crash between the receiver's answer and the mark sends the message again),
//! so the receiver deduplicates by [`Message::id`], which is sent with every attempt (as an
//! `Idempotency-Key`, for example). A failed delivery is retried with the client crate's capped exponential
//! backoff with full jitter, so an outage only delays messages.
//!
//! **Keeping up.** [`Worker::run`] is a pipeline: it claims the next [`Worker::batch`] as soon as fewer
//! than [`Worker::concurrency`] claimed messages are left to deliver, so deliveries never wait for the
//! slowest one of a batch, and it sleeps [`Worker::poll`] only after a claim that found nothing. The marks of
//! finished deliveries are written with the next claim, in one transaction on SQLite
//! ([`OutboxStore::mark_and_claim`]), or on their own once a batch of them waits, once nothing is left in
//! flight, or [`Worker::poll`] after the oldest: about one write per batch instead of two per message.
//! [`backlog_sqlite`] and [`backlog_postgres`] read how many messages wait and how old the oldest is, for
//! metrics.
//!
//! **Order.** Without an ordering key, messages are delivered in any order, several at once. Messages
//! enqueued with the same ordering key ([`enqueue_ordered_sqlite`], [`enqueue_ordered_postgres`]; for
//! example the recipient) are delivered one at a time in the order they were enqueued: the claim takes a
//! message only when no earlier message with its key is undelivered, so a failing message holds back the
//! ones behind it, and this holds across instances, since the rule is in the claim's SQL.
//!
//! **Leases.** A claim lasts [`Worker::lease`]; every delivery of its messages must end within a third of
//! it, counted from the claim (a message still queued then is not sent, and is retried), so the marks are
//! written while the claim still holds and two instances never send one message at the same moment. A claim left by a crashed instance runs out and its messages are
//! claimed again. A message is marked delivered only after its delivery returned `Ok`.
//!
//! **Traces.** Enqueueing records the W3C `traceparent` of the current span with the message (feature
//! `otel`: the OpenTelemetry context the app's `tracing-opentelemetry` layer gives the request's span;
//! [`Message::traceparent`] when the app set one), so each delivery's span (`outbox.deliver`, kind producer)
//! joins the trace of the request that enqueued it. The delivery function sends
//! [`delivery_traceparent`] as the delivery's `traceparent` header, and the receiver's inbox
//! ([`crate::inbox`]) continues it: request, delivery and receipt read as one trace. OpenTelemetry's
//! messaging conventions require a link from the sending and the processing span to the message's creation
//! context and leave the parent open; each delivery span is both a child of that context and linked to it.
//! The child makes it one trace, which is what an operator follows from one intent (an outbox message has one
//! creation context and one receiver, so the batch case the conventions link for instead does not arise);
//! the link keeps the conventions, for tools that follow links.

use std::collections::VecDeque;
use std::future::Future;
use std::time::Duration;

use futures_util::stream::{self, FuturesUnordered, StreamExt};
use idempotent_fetch::machine::OsRandom;
use tokio::sync::watch;

use crate::defaults;
use crate::error::StoreError;
#[cfg(feature = "postgres")]
use crate::outbox_sql;
use crate::retention::{unix_now, unix_now_ms};
use crate::trace_context;
use crate::traceparent;

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
    /// The W3C `traceparent` of the span that enqueued it (see the module docs, "Traces"): recorded by the
    /// enqueue from the current span when this is `None` (or not a valid W3C value), kept when set; read back
    /// with the claim.
    pub traceparent: Option<String>,
}

impl Message {
    /// A message with a fresh id and `payload` as JSON.
    pub fn new(topic: &str, payload: &impl serde::Serialize) -> Result<Self, StoreError> {
        let id = crate::random::random_hex()?;
        let payload = serde_json::to_string(payload).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        Ok(Message { id, topic: topic.to_owned(), payload, traceparent: None })
    }
}

/// Writes `message` into the outbox inside the caller's (the key's) transaction; it may be delivered in any
/// order relative to other messages.
#[cfg(feature = "sqlite")]
pub fn enqueue_sqlite(tx: &rusqlite::Transaction<'_>, message: &Message) -> Result<(), StoreError> {
    insert_sqlite(tx, message, None)
}

/// Writes `message` into the outbox inside the caller's transaction, after every message enqueued before it
/// with the same `ordering_key`: it is delivered only once those are (see the module docs, "Order").
#[cfg(feature = "sqlite")]
pub fn enqueue_ordered_sqlite(
    tx: &rusqlite::Transaction<'_>,
    message: &Message,
    ordering_key: &str,
) -> Result<(), StoreError> {
    insert_sqlite(tx, message, Some(ordering_key))
}

#[cfg(feature = "sqlite")]
fn insert_sqlite(tx: &rusqlite::Transaction<'_>, message: &Message, key: Option<&str>) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO outbox_messages (id, topic, payload, created_at, ordering_key, traceparent)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(rusqlite::params![
        message.id,
        message.topic,
        message.payload,
        unix_now(),
        key,
        creation_context(message)
    ])?;
    Ok(())
}

/// Writes `message` into the outbox inside the caller's (the key's) transaction; it may be delivered in any
/// order relative to other messages.
#[cfg(feature = "postgres")]
pub async fn enqueue_postgres(tx: &tokio_postgres::Transaction<'_>, message: &Message) -> Result<(), StoreError> {
    insert_postgres(tx, message, None).await
}

/// Writes `message` into the outbox inside the caller's transaction, after every message enqueued before it
/// with the same `ordering_key` (see the module docs, "Order"). Enqueue order is the order `seq` was
/// drawn in: for two transactions enqueueing under one key at the same moment, that need not be the order
/// they commit in.
#[cfg(feature = "postgres")]
pub async fn enqueue_ordered_postgres(
    tx: &tokio_postgres::Transaction<'_>,
    message: &Message,
    ordering_key: &str,
) -> Result<(), StoreError> {
    insert_postgres(tx, message, Some(ordering_key)).await
}

#[cfg(feature = "postgres")]
async fn insert_postgres(
    tx: &tokio_postgres::Transaction<'_>,
    message: &Message,
    key: Option<&str>,
) -> Result<(), StoreError> {
    let traceparent = creation_context(message);
    tx.execute(outbox_sql::ENQUEUE, &[&message.id, &message.topic, &message.payload, &unix_now(), &key, &traceparent])
        .await?;
    Ok(())
}

/// The `traceparent` a message is enqueued with: its own when valid, else the current span's.
fn creation_context(message: &Message) -> Option<String> {
    message.traceparent.as_deref().and_then(traceparent::valid).or_else(trace_context::current)
}

/// The `traceparent` header to send with a delivery of `message`: the delivery span's, when the delivery is
/// traced (feature `otel`), so the receiver's span is its child; else the one the message was enqueued
/// with, so the receiver still joins the request's trace. Call it in the delivery function, where the
/// delivery span is the current one.
pub fn delivery_traceparent(message: &Message) -> Option<String> {
    trace_context::current().or_else(|| message.traceparent.clone())
}

/// A message claimed for one delivery attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    /// The message.
    pub message: Message,
    /// Attempts so far, this one included.
    pub attempts: i64,
}

/// What the deliveries of one claim learned, written back in one call ([`OutboxStore::mark`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marks {
    /// The claim the messages were taken under (its `until_ms`): a retry is written only for a message
    /// still under that claim, so a pass that overran its lease cannot release another instance's claim.
    pub claimed_until: i64,
    /// Messages whose delivery succeeded.
    pub delivered: Vec<String>,
    /// When they were delivered (unix seconds).
    pub delivered_at: i64,
    /// Messages whose delivery failed, each with its next attempt (unix milliseconds).
    pub retries: Vec<(String, i64)>,
}

impl Marks {
    /// Nothing to write.
    pub fn is_empty(&self) -> bool {
        self.delivered.is_empty() && self.retries.is_empty()
    }

    /// How many messages it marks.
    pub fn len(&self) -> usize {
        self.delivered.len() + self.retries.len()
    }
}

/// How far the outbox is behind, for metrics ([`backlog_sqlite`], [`backlog_postgres`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Messages not delivered yet (due, claimed, or waiting for a retry).
    pub undelivered: u64,
    /// How long the oldest undelivered message has waited since it was enqueued, in whole seconds; `None`
    /// when nothing waits.
    pub oldest_age: Option<Duration>,
}

impl Backlog {
    fn of(count: i64, oldest_created_at: Option<i64>) -> Self {
        Backlog {
            undelivered: u64::try_from(count).unwrap_or(0),
            oldest_age: oldest_created_at
                .map(|at| Duration::from_secs(u64::try_from(unix_now().saturating_sub(at)).unwrap_or(0))),
        }
    }
}

/// The backlog of the outbox on SQLite (with a [`crate::sqlite::SqliteKeys`]:
/// `keys.with_conn(|conn| outbox::backlog_sqlite(conn))`).
#[cfg(feature = "sqlite")]
pub fn backlog_sqlite(conn: &rusqlite::Connection) -> Result<Backlog, StoreError> {
    let (count, oldest) = conn.query_row(
        "SELECT count(*), min(created_at) FROM outbox_messages WHERE delivered_at IS NULL",
        [],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    Ok(Backlog::of(count, oldest))
}

/// The backlog of the outbox on PostgreSQL.
#[cfg(feature = "postgres")]
pub async fn backlog_postgres(client: &tokio_postgres::Client) -> Result<Backlog, StoreError> {
    let row = client.query_one(outbox_sql::BACKLOG, &[]).await?;
    Ok(Backlog::of(row.try_get(0)?, row.try_get(1)?))
}

/// Where one message stands, for an app that shows it (an order page: "confirmation sent").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Enqueued, not delivered yet (due, claimed, or waiting for a retry).
    Waiting,
    /// Delivered at this unix time (seconds).
    Delivered(i64),
}

impl Delivery {
    fn of(delivered_at: Option<i64>) -> Self {
        delivered_at.map_or(Delivery::Waiting, Delivery::Delivered)
    }
}

/// Where the messages with `ids` stand on SQLite, by id; an id no message has is absent. One indexed
/// lookup per id, on the caller's connection (its transaction, if it is in one).
#[cfg(feature = "sqlite")]
pub fn deliveries_sqlite(
    conn: &rusqlite::Connection,
    ids: &[String],
) -> Result<std::collections::HashMap<String, Delivery>, StoreError> {
    use rusqlite::OptionalExtension;
    let mut stmt = conn.prepare_cached("SELECT delivered_at FROM outbox_messages WHERE id = ?1")?;
    let mut found = std::collections::HashMap::with_capacity(ids.len());
    for id in ids {
        if let Some(delivered_at) = stmt.query_row([id], |row| row.get(0)).optional()? {
            found.insert(id.clone(), Delivery::of(delivered_at));
        }
    }
    Ok(found)
}

/// Where the messages with `ids` stand on PostgreSQL, by id, in one statement; an id no message has is
/// absent.
#[cfg(feature = "postgres")]
pub async fn deliveries_postgres(
    client: &tokio_postgres::Client,
    ids: &[String],
) -> Result<std::collections::HashMap<String, Delivery>, StoreError> {
    let rows = client.query(outbox_sql::DELIVERIES, &[&ids]).await?;
    rows.iter().map(|row| Ok((row.try_get(0)?, Delivery::of(row.try_get(1)?)))).collect()
}

/// Where the outbox table lives: implemented for [`crate::sqlite::SqliteKeys`] and for every
/// [`crate::postgres::PgConnections`] (a shared `Arc<Client>`, or the app's pool); an app with its own
/// outbox table implements it for its store (its errors as [`StoreError::Backend`]).
pub trait OutboxStore: Clone + Send + Sync + 'static {
    /// Claims up to `limit` messages due by `now_ms` and not claimed by anyone until `until_ms`, counting
    /// the attempt (PostgreSQL: `FOR UPDATE SKIP LOCKED`, so instances never claim one message together).
    /// A message with an ordering key is claimed only when no earlier message with that key is undelivered.
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
    /// Writes one claim's marks. The stores here do it in one transaction (SQLite) or one statement
    /// (PostgreSQL); this default calls [`OutboxStore::delivered`] and [`OutboxStore::retry`] per message.
    fn mark(&self, marks: Marks) -> impl Future<Output = Result<(), StoreError>> + Send {
        async move {
            for id in marks.delivered {
                self.delivered(id, marks.delivered_at).await?;
            }
            for (id, at_ms) in marks.retries {
                self.retry(id, at_ms).await?;
            }
            Ok(())
        }
    }
    /// Writes `marks` (one [`Marks`] per claim they were taken under), then claims as
    /// [`OutboxStore::claim`] does, unless `limit` is 0. The SQLite store does both in one transaction (one
    /// commit); this default calls [`OutboxStore::mark`] for each, then [`OutboxStore::claim`]. `Err` when
    /// either failed; the marks may then be lost, and their messages are sent again after their claims.
    fn mark_and_claim(
        &self,
        marks: Vec<Marks>,
        now_ms: i64,
        until_ms: i64,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<Claimed>, StoreError>> + Send {
        async move {
            for claim_marks in marks {
                self.mark(claim_marks).await?;
            }
            if limit <= 0 {
                return Ok(Vec::new());
            }
            self.claim(now_ms, until_ms, limit).await
        }
    }
}

/// Claims the oldest due heads: a message with an ordering key only when no earlier one with the key waits.
#[cfg(feature = "sqlite")]
const CLAIM_SQL_SQLITE: &str = "UPDATE outbox_messages SET claimed_until = ?1, attempts = attempts + 1
     WHERE rowid IN (SELECT m.rowid FROM outbox_messages m
                     WHERE m.delivered_at IS NULL AND m.next_attempt_at <= ?2 AND m.claimed_until <= ?2
                       AND (m.ordering_key IS NULL OR NOT EXISTS (
                             SELECT 1 FROM outbox_messages e
                             WHERE e.ordering_key = m.ordering_key AND e.delivered_at IS NULL
                               AND e.rowid < m.rowid))
                     ORDER BY m.next_attempt_at, m.rowid LIMIT ?3)
     RETURNING id, topic, payload, attempts, traceparent";

#[cfg(feature = "sqlite")]
impl OutboxStore for crate::sqlite::SqliteKeys {
    async fn claim(&self, now_ms: i64, until_ms: i64, limit: i64) -> Result<Vec<Claimed>, StoreError> {
        self.with_conn(move |conn| claim_sqlite(conn, now_ms, until_ms, limit)).await
    }

    async fn delivered(&self, id: String, at: i64) -> Result<(), StoreError> {
        self.mark(Marks { delivered: vec![id], delivered_at: at, ..Marks::default() }).await
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

    async fn mark(&self, marks: Marks) -> Result<(), StoreError> {
        if marks.is_empty() {
            return Ok(());
        }
        self.with_conn(move |conn| {
            // One commit for the marks: with `synchronous = FULL` each commit is a sync to disk.
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            mark_sqlite(&tx, &marks)?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn mark_and_claim(
        &self,
        marks: Vec<Marks>,
        now_ms: i64,
        until_ms: i64,
        limit: i64,
    ) -> Result<Vec<Claimed>, StoreError> {
        if marks.iter().all(Marks::is_empty) {
            return if limit > 0 { self.claim(now_ms, until_ms, limit).await } else { Ok(Vec::new()) };
        }
        self.with_conn(move |conn| {
            // The marks and the claim in one commit: with `synchronous = FULL` each commit is a sync to disk.
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            for claim_marks in &marks {
                mark_sqlite(&tx, claim_marks)?;
            }
            let claimed = if limit > 0 { claim_sqlite(&tx, now_ms, until_ms, limit)? } else { Vec::new() };
            tx.commit()?;
            Ok(claimed)
        })
        .await
    }
}

/// [`OutboxStore::claim`] on a SQLite connection (or inside a transaction).
#[cfg(feature = "sqlite")]
fn claim_sqlite(
    conn: &rusqlite::Connection,
    now_ms: i64,
    until_ms: i64,
    limit: i64,
) -> Result<Vec<Claimed>, StoreError> {
    let mut stmt = conn.prepare_cached(CLAIM_SQL_SQLITE)?;
    let rows = stmt.query_map(rusqlite::params![until_ms, now_ms, limit], |row| {
        Ok(Claimed {
            message: Message { id: row.get(0)?, topic: row.get(1)?, payload: row.get(2)?, traceparent: row.get(4)? },
            attempts: row.get(3)?,
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// One claim's marks inside the caller's transaction.
#[cfg(feature = "sqlite")]
fn mark_sqlite(tx: &rusqlite::Transaction<'_>, marks: &Marks) -> Result<(), StoreError> {
    let mut delivered =
        tx.prepare_cached("UPDATE outbox_messages SET delivered_at = ?1 WHERE id = ?2 AND delivered_at IS NULL")?;
    for id in &marks.delivered {
        delivered.execute(rusqlite::params![marks.delivered_at, id])?;
    }
    let mut retry = tx.prepare_cached(
        "UPDATE outbox_messages SET claimed_until = 0, next_attempt_at = ?1
         WHERE id = ?2 AND claimed_until = ?3 AND delivered_at IS NULL",
    )?;
    for (id, at_ms) in &marks.retries {
        retry.execute(rusqlite::params![at_ms, id, marks.claimed_until])?;
    }
    Ok(())
}

/// The outbox on PostgreSQL, over a shared `Arc<Client>` or the app's pool
/// ([`crate::postgres::PgConnections`]).
#[cfg(feature = "postgres")]
impl<P: crate::postgres::PgConnections> OutboxStore for P {
    async fn claim(&self, now_ms: i64, until_ms: i64, limit: i64) -> Result<Vec<Claimed>, StoreError> {
        let rows = self.connection().await?.query(outbox_sql::CLAIM, &[&until_ms, &now_ms, &limit]).await?;
        rows.iter()
            .map(|row| {
                Ok(Claimed {
                    message: Message {
                        id: row.try_get(0)?,
                        topic: row.try_get(1)?,
                        payload: row.try_get(2)?,
                        traceparent: row.try_get(4)?,
                    },
                    attempts: row.try_get(3)?,
                })
            })
            .collect()
    }

    async fn delivered(&self, id: String, at: i64) -> Result<(), StoreError> {
        self.mark(Marks { delivered: vec![id], delivered_at: at, ..Marks::default() }).await
    }

    async fn retry(&self, id: String, at_ms: i64) -> Result<(), StoreError> {
        self.connection().await?.execute(outbox_sql::RETRY, &[&at_ms, &id]).await?;
        Ok(())
    }

    async fn mark(&self, marks: Marks) -> Result<(), StoreError> {
        if marks.is_empty() {
            return Ok(());
        }
        let (retry_ids, retry_at): (Vec<String>, Vec<i64>) = marks.retries.into_iter().unzip();
        // One statement, so one round trip and one commit for the marks.
        self.connection()
            .await?
            .execute(
                outbox_sql::MARK,
                &[&marks.delivered_at, &marks.delivered, &retry_ids, &retry_at, &marks.claimed_until],
            )
            .await?;
        Ok(())
    }
}

/// The delivery worker's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Worker {
    /// How long a claim lasts; every delivery of its messages ends within a third of it.
    pub lease: Duration,
    /// How long [`Worker::run`] sleeps after a claim that found nothing, and how long a finished
    /// delivery's mark waits at most to be written with others.
    pub poll: Duration,
    /// The first retry's backoff step.
    pub base_delay: Duration,
    /// No retry waits longer than this.
    pub max_delay: Duration,
    /// Messages claimed at once (per pass of [`Worker::deliver_once`]).
    pub batch: i64,
    /// Deliveries in flight at once, at most (at least one is always allowed).
    pub concurrency: usize,
}

impl Default for Worker {
    /// A 30 s lease, a poll every 200 ms when idle, retries from 200 ms up to 10 s, 64 messages per claim,
    /// 32 deliveries at once.
    fn default() -> Self {
        Worker {
            lease: defaults::OUTBOX_LEASE,
            poll: defaults::OUTBOX_POLL,
            base_delay: defaults::OUTBOX_BASE_DELAY,
            max_delay: defaults::OUTBOX_MAX_DELAY,
            batch: defaults::OUTBOX_BATCH,
            concurrency: defaults::OUTBOX_CONCURRENCY,
        }
    }
}

/// What one pass did ([`Worker::deliver_once`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    /// Messages claimed.
    pub claimed: usize,
    /// Messages delivered and marked so.
    pub delivered: usize,
    /// Messages whose delivery failed or timed out (scheduled for a retry).
    pub failed: usize,
}

impl Worker {
    /// The wait before the next attempt of a message that failed `attempts` times: the `attempts`-th delay of
    /// the client crate's full-jitter schedule (uniform in `[0, min(max, base * 2^(attempts - 1))]`;
    /// [`crate::retry_schedule::retry_delay`]).
    pub fn retry_delay(&self, attempts: i64) -> Duration {
        crate::retry_schedule::retry_delay(self.base_delay, self.max_delay, attempts, &OsRandom)
    }

    /// One pass: claims up to [`Worker::batch`] due messages, delivers them with `deliver`, at most
    /// [`Worker::concurrency`] at a time, then writes every mark of the pass at once ([`OutboxStore::mark`]):
    /// delivered for each `Ok`, a retry for each `Err` and for each delivery not done within a third of the
    /// lease from the claim. `Err` only when the claim failed; when the marks cannot be written (logged),
    /// the claims run out and the messages are sent again, which the receiver refuses as duplicates.
    pub async fn deliver_once<S, D, Fut>(&self, store: &S, deliver: &D) -> Result<Pass, StoreError>
    where
        S: OutboxStore,
        D: Fn(Message) -> Fut,
        Fut: Future<Output = Result<(), String>>,
    {
        let now_ms = unix_now_ms();
        // Taken before the claim, so every delivery ends before the claim does.
        let deadline = tokio::time::Instant::now() + self.lease / 3;
        let lease_ms = i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX);
        let until_ms = now_ms.saturating_add(lease_ms);
        let claimed = store.claim(now_ms, until_ms, self.batch).await?;
        let mut pass = Pass { claimed: claimed.len(), ..Pass::default() };
        if claimed.is_empty() {
            return Ok(pass);
        }
        let results: Vec<(Claimed, Result<(), String>)> = stream::iter(claimed)
            .map(|claimed| {
                let delivery = traced_delivery(deliver, &claimed);
                async move {
                    let sent = match tokio::time::timeout_at(deadline, delivery).await {
                        Ok(sent) => sent,
                        Err(_) => Err("timed out".to_owned()),
                    };
                    (claimed, sent)
                }
            })
            .buffer_unordered(self.concurrency.max(1))
            .collect()
            .await;
        let mut marks = Marks { claimed_until: until_ms, delivered_at: unix_now(), ..Marks::default() };
        for (claimed, sent) in results {
            self.record(&mut marks, claimed, sent);
        }
        let (delivered, failed) = (marks.delivered.len(), marks.retries.len());
        match store.mark(marks).await {
            Ok(()) => (pass.delivered, pass.failed) = (delivered, failed),
            // The claims run out and the messages are sent again; the receiver refuses the duplicates.
            Err(error) => tracing::warn!(%error, delivered, failed, "outbox: writing the marks failed"),
        }
        Ok(pass)
    }

    /// Adds one delivery's outcome to its claim's `marks`: delivered, or a retry after [`Worker::retry_delay`].
    fn record(&self, marks: &mut Marks, Claimed { message, attempts }: Claimed, sent: Result<(), String>) {
        match sent {
            Ok(()) => {
                marks.delivered.push(message.id);
                marks.delivered_at = unix_now();
            }
            Err(why) => {
                tracing::info!(id = %message.id, topic = %message.topic, attempts, why, "outbox: delivery failed; will retry");
                let wait = i64::try_from(self.retry_delay(attempts).as_millis()).unwrap_or(i64::MAX);
                marks.retries.push((message.id, unix_now_ms().saturating_add(wait)));
            }
        }
    }

    /// Delivers due messages until `shutdown` turns true (or its sender is dropped), as a pipeline (see the
    /// module docs, "Keeping up"): at most [`Worker::concurrency`] deliveries in flight; the next
    /// [`Worker::batch`] claimed once fewer than that many claimed messages are left; a [`Worker::poll`]
    /// sleep only after a claim that found nothing (or failed); marks written in batches, with the next
    /// claim where there is one. On shutdown it claims nothing more, finishes what it claimed (each within a
    /// third of the lease from its claim) and writes the marks.
    pub async fn run<S, D, Fut>(self, store: S, deliver: D, mut shutdown: watch::Receiver<bool>)
    where
        S: OutboxStore,
        D: Fn(Message) -> Fut,
        Fut: Future<Output = Result<(), String>>,
    {
        let concurrency = self.concurrency.max(1);
        let lease_ms = i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX);
        // A claimed message waiting for a delivery slot, with its claim's end and its delivery deadline.
        let mut queued: VecDeque<(Claimed, i64, tokio::time::Instant)> = VecDeque::new();
        let mut in_flight = FuturesUnordered::new();
        let start = |(claimed, until_ms, deadline): (Claimed, i64, tokio::time::Instant)| {
            let delivery = traced_delivery(&deliver, &claimed);
            async move {
                let sent = match tokio::time::timeout_at(deadline, delivery).await {
                    Ok(sent) => sent,
                    Err(_) => Err("timed out".to_owned()),
                };
                (claimed, until_ms, sent)
            }
        };
        // The marks not written yet, one entry per claim, and when the oldest of them was made.
        let mut marks: Vec<Marks> = Vec::new();
        let mut oldest_mark = tokio::time::Instant::now();
        // The store's write in progress (marks, a claim, or both), with what it claimed for.
        let mut writing = None;
        let mut claim_after = tokio::time::Instant::now();
        let mut stopping = *shutdown.borrow();
        loop {
            while in_flight.len() < concurrency {
                let Some(next) = queued.pop_front() else { break };
                in_flight.push(start(next));
            }
            let idle = queued.is_empty() && in_flight.is_empty();
            let pending: usize = marks.iter().map(Marks::len).sum();
            if writing.is_none() {
                let now = tokio::time::Instant::now();
                let claim = !stopping && queued.len() + in_flight.len() < concurrency && now >= claim_after;
                let flush = pending > 0
                    && (claim
                        || pending >= usize::try_from(self.batch).unwrap_or(usize::MAX)
                        || idle
                        || now >= oldest_mark + self.poll);
                if flush || claim {
                    let now_ms = unix_now_ms();
                    // Taken before the claim, so every delivery ends before the claim does.
                    let deadline = now + self.lease / 3;
                    let until_ms = now_ms.saturating_add(lease_ms);
                    let limit = if claim { self.batch } else { 0 };
                    let write = store.mark_and_claim(std::mem::take(&mut marks), now_ms, until_ms, limit);
                    writing = Some((Box::pin(write), until_ms, deadline));
                } else if stopping && idle {
                    return;
                }
            }
            // What to wake up for when nothing else happens: the oldest mark's flush, or the next claim.
            let flush_at = (pending > 0).then_some(oldest_mark + self.poll);
            let room = queued.len() + in_flight.len() < concurrency;
            let claim_at = (!stopping && room).then_some(claim_after);
            let wake = match (flush_at, claim_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            tokio::select! {
                Some((claimed, until_ms, sent)) = in_flight.next(), if !in_flight.is_empty() => {
                    if marks.iter().all(Marks::is_empty) {
                        oldest_mark = tokio::time::Instant::now();
                    }
                    let index = match marks.iter().position(|m| m.claimed_until == until_ms) {
                        Some(index) => index,
                        None => {
                            marks.push(Marks { claimed_until: until_ms, ..Marks::default() });
                            marks.len() - 1
                        }
                    };
                    self.record(&mut marks[index], claimed, sent);
                }
                written = async { match writing.as_mut() { Some((write, _, _)) => write.await, None => std::future::pending().await } }, if writing.is_some() => {
                    let Some((_, until_ms, deadline)) = writing.take() else { continue };
                    claim_after = tokio::time::Instant::now();
                    match written {
                        Ok(claimed) if claimed.is_empty() => claim_after += self.poll,
                        Ok(claimed) => queued.extend(claimed.into_iter().map(|c| (c, until_ms, deadline))),
                        Err(error) => {
                            // Marks that were not written leave their messages to be sent again after their
                            // claims; the receiver refuses the duplicates.
                            tracing::warn!(%error, "outbox: writing marks or claiming messages failed");
                            claim_after += self.poll;
                        }
                    }
                }
                () = sleep_until_some(wake), if wake.is_some() && writing.is_none() => {}
                changed = shutdown.changed(), if !stopping => {
                    stopping = changed.is_err() || *shutdown.borrow();
                }
            }
        }
    }
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// One delivery attempt: `deliver` called and run inside the attempt's span.
fn traced_delivery<D, Fut>(deliver: &D, claimed: &Claimed) -> tracing::instrument::Instrumented<Fut>
where
    D: Fn(Message) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let span = delivery_span(claimed);
    // Entered for the call too, so a delivery function that reads the trace before its first await reads it.
    let delivery = span.in_scope(|| deliver(claimed.message.clone()));
    tracing::Instrument::instrument(delivery, span)
}

/// One span per delivery attempt (OpenTelemetry's messaging conventions), in the trace of the request that
/// enqueued the message when it carries one (see the module docs, "Traces"), else under the worker's span.
fn delivery_span(claimed: &Claimed) -> tracing::Span {
    let span = tracing::info_span!(
        "outbox.deliver",
        otel.kind = "producer",
        messaging.operation.type = "send",
        messaging.message.id = %claimed.message.id,
        messaging.destination.name = %claimed.message.topic,
        outbox.attempt = claimed.attempts,
    );
    if let Some(traceparent) = &claimed.message.traceparent {
        trace_context::continue_from(&span, traceparent);
    }
    span
}
