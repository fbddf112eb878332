//! Random ids from the operating system's CSPRNG.

use crate::error::StoreError;

/// 32 lowercase hex digits (128 bits) from the CSPRNG: outbox message ids, key row ids, lease tokens.
pub(crate) fn random_hex() -> Result<String, StoreError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| StoreError::Task(format!("random source: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
