//! Errors as two small numbers: a stable code and a detail. They cross the wasm boundary as the
//! number `code * 256 + detail`; the driver owns the messages (docs/WASM-BOUNDARY.md). The codes
//! and details are in the contract table (`crate::contract`).

pub use crate::contract::{code, exhausted, expired, field, mismatch, protocol, request};

/// A failure: a code from [`code`] and a detail whose meaning depends on the code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Error {
    /// The stable code.
    pub code: u8,
    /// The detail (0 when the code has none).
    pub detail: u8,
}

impl Error {
    /// An error of `code` with `detail`.
    pub const fn new(code: u8, detail: u8) -> Self {
        Self { code, detail }
    }

    /// The number thrown across the wasm boundary: `code * 256 + detail`.
    pub const fn packed(self) -> u32 {
        (self.code as u32) << 8 | self.detail as u32
    }
}
