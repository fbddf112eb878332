//! The PostgreSQL table and statements of the inbox, and the bounds of its ids, once: `inbox`
//! runs them, and the Node half (server/node, through its wasm core) runs the very same text on the very
//! same table. Parameters are positional (`$1`...).

use crate::error::StoreError;

/// The inbox table on PostgreSQL. The answer columns are empty only inside the transaction that inserted
/// the record.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS inbox_messages (
    source           TEXT    NOT NULL,
    message_id       TEXT    NOT NULL,
    status_code      INTEGER NULL,
    response_headers TEXT    NULL,
    response_body    TEXT    NULL,
    received_at      BIGINT  NOT NULL,
    PRIMARY KEY (source, message_id)
);
CREATE INDEX IF NOT EXISTS inbox_messages_received_at ON inbox_messages (received_at);
";

/// Deletes the record if it expired (an expired record counts as absent even before a sweep). `$1`
/// source, `$2` message id, `$3` the retention cutoff.
pub const FORGET_EXPIRED: &str =
    "DELETE FROM inbox_messages WHERE source = $1 AND message_id = $2 AND received_at < $3";

/// Inserts the record unless one exists: one row affected for the first delivery. Under READ COMMITTED it
/// waits while another transaction holds an uncommitted insert of the same id. `$1` source, `$2` message
/// id, `$3` now (unix seconds).
pub const INSERT: &str = "INSERT INTO inbox_messages (source, message_id, received_at) VALUES ($1, $2, $3)
             ON CONFLICT (source, message_id) DO NOTHING";

/// The answer columns of a record. `$1` source, `$2` message id.
pub const SELECT_ANSWER: &str = "SELECT status_code, response_headers, response_body FROM inbox_messages
                 WHERE source = $1 AND message_id = $2";

/// Stores the work's answer on the record. `$1` status, `$2` headers (the key rows' encoding), `$3` body,
/// `$4` source, `$5` message id.
pub const STORE_ANSWER: &str = "UPDATE inbox_messages SET status_code = $1, response_headers = $2, response_body = $3
         WHERE source = $4 AND message_id = $5";

/// Deletes every record received before the cutoff `$1`; the app's own rows are never touched.
pub const SWEEP: &str = "DELETE FROM inbox_messages WHERE received_at < $1";

/// The savepoint the record and the work run in, so a failure rolls back only them.
pub const SAVEPOINT: &str = "idempotent_inbox";

/// Longest source or message id, in bytes: an id is a token (the outbox's are 32 hex digits), not a document.
pub const MAX_INBOX_ID_BYTES: usize = 255;

/// A source and message id within their bounds: 1 to [`MAX_INBOX_ID_BYTES`] bytes each.
pub fn check_ids(source: &str, message_id: &str) -> Result<(), StoreError> {
    for (what, id) in [("source", source), ("message id", message_id)] {
        if id.is_empty() || id.len() > MAX_INBOX_ID_BYTES {
            return Err(StoreError::InboxId(what, id.len()));
        }
    }
    Ok(())
}
