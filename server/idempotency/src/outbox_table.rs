//! The outbox's table, once per database. It is a module of its own because two layers need it: each
//! backend's `install` ([`crate::sqlite::install`], [`crate::postgres::install`]) creates it next to the key
//! table, and the [`crate::outbox`] that reads and writes it stands above the backends (its worker reads
//! through them), so the backends must not name the outbox.

#[cfg(feature = "sqlite")]
use crate::error::StoreError;

/// The outbox table on SQLite (installed by [`crate::sqlite::install`], which also adds the columns later
/// versions brought, `ordering_key` and `traceparent`, to a table made before them). Enqueue order is the
/// rowid's. `traceparent` is the W3C trace context of the span that enqueued the message, NULL when none was
/// active.
pub const SQLITE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS outbox_messages (
    id              TEXT    PRIMARY KEY,
    topic           TEXT    NOT NULL,
    payload         TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL DEFAULT 0,
    claimed_until   INTEGER NOT NULL DEFAULT 0,
    delivered_at    INTEGER NULL,
    ordering_key    TEXT    NULL,
    traceparent     TEXT    NULL
);
CREATE INDEX IF NOT EXISTS outbox_messages_pending ON outbox_messages (next_attempt_at) WHERE delivered_at IS NULL;
";

/// The ordering index on SQLite, created once the column exists.
#[cfg(feature = "sqlite")]
const SQLITE_ORDERING_INDEX: &str = "CREATE INDEX IF NOT EXISTS outbox_messages_ordered
    ON outbox_messages (ordering_key) WHERE delivered_at IS NULL AND ordering_key IS NOT NULL;";

/// The outbox table on PostgreSQL (installed by [`crate::postgres::install`]): [`crate::outbox_sql::SCHEMA`].
pub use crate::outbox_sql::SCHEMA as POSTGRES_SCHEMA;

/// The columns later versions added to the SQLite table, each with its definition, which [`install_sqlite`]
/// adds to a table made before them.
#[cfg(feature = "sqlite")]
const SQLITE_ADDED_COLUMNS: [(&str, &str); 2] = [("ordering_key", "TEXT NULL"), ("traceparent", "TEXT NULL")];

/// Creates the outbox table if missing, and adds the columns of [`SQLITE_ADDED_COLUMNS`] to one made without
/// them.
#[cfg(feature = "sqlite")]
pub(crate) fn install_sqlite(conn: &rusqlite::Connection) -> Result<(), StoreError> {
    conn.execute_batch(SQLITE_SCHEMA)?;
    crate::sqlite_columns::add_missing(conn, "outbox_messages", &SQLITE_ADDED_COLUMNS)?;
    conn.execute_batch(SQLITE_ORDERING_INDEX)?;
    Ok(())
}
