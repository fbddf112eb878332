//! The PostgreSQL table and statements of the outbox, once: the `outbox` worker and
//! `postgres::install` run them, and the Node half (server/node, through its wasm core) runs the
//! very same text on the very same table, so a Rust and a Node service can share one outbox. Parameters are
//! positional (`$1`...), as both tokio-postgres and node-postgres take them.

/// The outbox table on PostgreSQL (`IF NOT EXISTS`: safe to run at every start; the `ALTER`s add the columns
/// later versions brought to a table made before them). Enqueue order is `seq`'s. `traceparent` is the W3C
/// trace context of the span that enqueued the message, NULL when none was active.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS outbox_messages (
    id              TEXT    PRIMARY KEY,
    topic           TEXT    NOT NULL,
    payload         TEXT    NOT NULL,
    created_at      BIGINT  NOT NULL,
    attempts        BIGINT  NOT NULL DEFAULT 0,
    next_attempt_at BIGINT  NOT NULL DEFAULT 0,
    claimed_until   BIGINT  NOT NULL DEFAULT 0,
    delivered_at    BIGINT  NULL
);
ALTER TABLE outbox_messages ADD COLUMN IF NOT EXISTS ordering_key TEXT NULL;
ALTER TABLE outbox_messages ADD COLUMN IF NOT EXISTS seq BIGSERIAL;
ALTER TABLE outbox_messages ADD COLUMN IF NOT EXISTS traceparent TEXT NULL;
CREATE INDEX IF NOT EXISTS outbox_messages_pending ON outbox_messages (next_attempt_at) WHERE delivered_at IS NULL;
CREATE INDEX IF NOT EXISTS outbox_messages_ordered ON outbox_messages (ordering_key, seq)
    WHERE delivered_at IS NULL AND ordering_key IS NOT NULL;
";

/// Writes a message into the outbox, in the caller's transaction. `$1` id, `$2` topic, `$3` payload (JSON
/// text), `$4` now (unix seconds), `$5` the ordering key or NULL, `$6` the enqueuing span's `traceparent` or
/// NULL.
pub const ENQUEUE: &str = "INSERT INTO outbox_messages (id, topic, payload, created_at, ordering_key, traceparent)
                 VALUES ($1, $2, $3, $4, $5, $6)";

/// Claims the oldest due heads, counting the attempt: a message with an ordering key only when no earlier
/// one with the key waits; `FOR UPDATE SKIP LOCKED`, so instances never claim one message together. Another
/// instance's claim in progress holds its rows (skipped) but cannot make a later message of the same key
/// eligible: the head stays undelivered until that instance marks it. `$1` the claim's end (unix ms), `$2`
/// now (unix ms), `$3` how many at most. Returns `id, topic, payload, attempts, traceparent`.
pub const CLAIM: &str = "UPDATE outbox_messages SET claimed_until = $1, attempts = attempts + 1
                 WHERE id IN (SELECT m.id FROM outbox_messages m
                              WHERE m.delivered_at IS NULL AND m.next_attempt_at <= $2 AND m.claimed_until <= $2
                                AND (m.ordering_key IS NULL OR NOT EXISTS (
                                      SELECT 1 FROM outbox_messages e
                                      WHERE e.ordering_key = m.ordering_key AND e.delivered_at IS NULL
                                        AND e.seq < m.seq))
                              ORDER BY m.next_attempt_at, m.seq LIMIT $3 FOR UPDATE OF m SKIP LOCKED)
                 RETURNING id, topic, payload, attempts, traceparent";

/// Ends one message's claim and schedules its next attempt. `$1` when (unix ms), `$2` id.
pub const RETRY: &str = "UPDATE outbox_messages SET claimed_until = 0, next_attempt_at = $1 WHERE id = $2";

/// A pass's marks in one statement (one round trip, one commit): `$1` delivered at (unix seconds), `$2` the
/// delivered ids (`text[]`), `$3` the ids to retry (`text[]`) and `$4` when (`bigint[]`, unix ms), `$5` the
/// claim they were taken under: a retry is written only for a message still under that claim.
pub const MARK: &str = "WITH delivered AS (
                 UPDATE outbox_messages SET delivered_at = $1
                 WHERE id = ANY($2::text[]) AND delivered_at IS NULL RETURNING 1),
             retried AS (
                 UPDATE outbox_messages o SET claimed_until = 0, next_attempt_at = r.at
                 FROM unnest($3::text[], $4::bigint[]) AS r(id, at)
                 WHERE o.id = r.id AND o.claimed_until = $5 AND o.delivered_at IS NULL RETURNING 1)
             SELECT (SELECT count(*) FROM delivered) + (SELECT count(*) FROM retried)";

/// The messages with the ids in `$1` (a text array) and when each was delivered: `id, delivered_at` (NULL
/// while undelivered).
pub const DELIVERIES: &str = "SELECT id, delivered_at FROM outbox_messages WHERE id = ANY($1)";

/// How many messages are undelivered and when the oldest was enqueued (unix seconds, NULL when none).
pub const BACKLOG: &str = "SELECT count(*), min(created_at) FROM outbox_messages WHERE delivered_at IS NULL";
