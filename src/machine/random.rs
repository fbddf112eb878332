//! Randomness for keys and jitter: production draws from the CSPRNG (`crypto.getRandomValues` in
//! JavaScript engines, through `src/wasm.rs`; getrandom natively); the native tests plug in a seeded fake.

/// The random source failed (`crypto.getRandomValues` threw, or a test's fake ran dry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RandomFailed;

/// A source of random bytes. Production implementations must be a CSPRNG.
pub trait RandomSource {
    /// Fills `bytes` with random bytes; `Err` when the source failed (never silently zeros).
    fn fill(&self, bytes: &mut [u8]) -> Result<(), RandomFailed>;

    /// A uniform `u64`, or `Err` when the source failed.
    fn next_u64(&self) -> Result<u64, RandomFailed> {
        let mut bytes = [0u8; 8];
        self.fill(&mut bytes)?;
        Ok(u64::from_le_bytes(bytes))
    }
}

/// The platform CSPRNG through getrandom (native; the wasm build draws from `crypto.getRandomValues`
/// directly: `WebCrypto` in `src/wasm.rs`).
#[cfg(not(target_arch = "wasm32"))]
#[derive(Debug, Default, Clone, Copy)]
pub struct OsRandom;

#[cfg(not(target_arch = "wasm32"))]
impl RandomSource for OsRandom {
    fn fill(&self, bytes: &mut [u8]) -> Result<(), RandomFailed> {
        getrandom::fill(bytes).map_err(|_| RandomFailed)
    }
}
