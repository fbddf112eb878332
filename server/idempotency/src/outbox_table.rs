//! The outbox's table, once per database. It is a module of its own because two layers need it: each
//! backend's `install` ([`crate::sqlite::install`], [`crate::postgres::install`]) creates it next to the key
//! table, and the [`crate::outbox`] that reads and writes it stands above the backends (its worker reads
//! through them), so the backends must not name the outbox.

/// The outbox table on SQLite (installed by [`crate::sqlite::install`]).
pub const SQLITE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS outbox_messages (
    id              TEXT    PRIMARY KEY,
    topic           TEXT    NOT NULL,
    payload         TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL DEFAULT 0,
    claimed_until   INTEGER NOT NULL DEFAULT 0,
    delivered_at    INTEGER NULL
);
CREATE INDEX IF NOT EXISTS outbox_messages_pending ON outbox_messages (next_attempt_at) WHERE delivered_at IS NULL;
";

/// The outbox table on PostgreSQL (installed by [`crate::postgres::install`]).
pub const POSTGRES_SCHEMA: &str = "
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
CREATE INDEX IF NOT EXISTS outbox_messages_pending ON outbox_messages (next_attempt_at) WHERE delivered_at IS NULL;
";
