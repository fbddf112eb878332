//! Databases written by earlier versions of this server, brought up to date on start by both backends.
//!
//! Earlier versions kept their key rows in a table of their own, `idempotency_keys` (`account_id`,
//! `request_hash`, and the key row's order in `order_id`). Key rows now live in the library's
//! `idempotency_records` (the account is the row's `scope`, the request hash its `fingerprint`), and an
//! order names the key row that made it in `orders.key_row_id`. On start, inside the schema transaction,
//! every old row is copied over as it is (finished keys keep their stored answers, fences stay fences,
//! unfinished keys keep their recovery point, row id and lease, so the next retry or the completer takes
//! them over) and the old table is dropped. The same for the old outbox table, `outbox`: its messages move
//! into the library's `outbox_messages`, so undelivered confirmations are still delivered. Stop every instance of the old version first: an old instance
//! still writing `idempotency_keys` would find the table gone.

/// Columns added to tables since their first version, which databases made before carry without: each
/// backend adds the missing ones (`ALTER TABLE ... ADD COLUMN`) before copying the old key rows, so even
/// the first version's database keeps its keys and orders. The types are valid in SQLite and PostgreSQL.
pub(crate) const ADDED_COLUMNS: &[(&str, &str, &str)] = &[
    ("idempotency_keys", "recovery_point", "TEXT NOT NULL DEFAULT 'finished'"),
    ("idempotency_keys", "row_id", "TEXT NULL"),
    ("idempotency_keys", "lock_token", "TEXT NULL"),
    ("idempotency_keys", "locked_until", "BIGINT NOT NULL DEFAULT 0"),
    ("idempotency_keys", "order_id", "TEXT NULL"),
    ("orders", "charge_id", "TEXT NULL"),
    ("orders", "key_row_id", "TEXT NULL"),
];

/// The earlier versions' key table.
pub(crate) const OLD_KEY_TABLE: &str = "idempotency_keys";

/// Copies the old key rows into the library's table (a row already there wins: it is newer).
pub(crate) const COPY_KEYS: &str = "
INSERT INTO idempotency_records
    (scope, key, fingerprint, status_code, response_headers, response_body, created_at, recovery_point, row_id,
     lock_token, locked_until)
SELECT account_id, key, request_hash, status_code, response_headers, response_body, created_at, recovery_point,
       row_id, lock_token, locked_until
FROM idempotency_keys
WHERE true
ON CONFLICT (scope, key) DO NOTHING";

/// Names, on each order an old key row made, the key row (by its row id), as the order phases now find it.
pub(crate) const LINK_ORDERS: &str = "
UPDATE orders SET key_row_id = (SELECT k.row_id FROM idempotency_keys k WHERE k.order_id = orders.id)
WHERE key_row_id IS NULL AND id IN (SELECT order_id FROM idempotency_keys WHERE order_id IS NOT NULL)";

/// Drops the old key table once its rows are copied.
pub(crate) const DROP_OLD_KEYS: &str = "DROP TABLE idempotency_keys";

/// The earlier versions' outbox of order confirmations (`id` the confirmation's, `created_at` in unix
/// milliseconds).
pub(crate) const OLD_OUTBOX: &str = "outbox";

/// Copies the old outbox's messages into the library's `outbox_messages` as they stand (delivered ones
/// keep their `delivered_at`, which the order listing shows; undelivered ones are due at once, since no
/// instance of the old version holds a claim any more), under the confirmation topic.
pub(crate) fn copy_outbox() -> String {
    format!(
        "INSERT INTO outbox_messages (id, topic, payload, created_at, attempts, next_attempt_at, claimed_until,
                                      delivered_at)
         SELECT id, '{}', payload, created_at / 1000, attempts, next_attempt_at, 0, delivered_at FROM outbox
         WHERE true
         ON CONFLICT (id) DO NOTHING",
        crate::orders::CONFIRMATION_TOPIC
    )
}

/// Drops the old outbox once its messages are copied.
pub(crate) const DROP_OLD_OUTBOX: &str = "DROP TABLE outbox";
