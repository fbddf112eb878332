//! Columns later versions added to a SQLite table. SQLite has no `ADD COLUMN IF NOT EXISTS`, so the key
//! table's install and the outbox's add the ones a table made before them lacks, each with its definition.

use crate::error::StoreError;

/// Adds each of `columns` (name, definition) that `table` lacks.
pub(crate) fn add_missing(
    conn: &rusqlite::Connection,
    table: &str,
    columns: &[(&str, &str)],
) -> Result<(), StoreError> {
    for (column, definition) in columns {
        let present: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2)",
            [table, column],
            |row| row.get(0),
        )?;
        if !present {
            conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {definition};"))?;
        }
    }
    Ok(())
}
