//! Idempotency keys: UUID v4 from the CSPRNG, and validation of keys read back from storage.

use std::fmt;

use uuid::Uuid;

use super::ports::RandomSource;

/// A well-formed idempotency key: a lowercase hyphenated UUID v4.
///
/// The only ways to get one are [`IdempotencyKey::generate`] (fresh CSPRNG bytes) and
/// [`IdempotencyKey::parse`] (strict validation), so a key can always go into a header as it is:
/// it holds only `[0-9a-f-]`, never CR/LF or quotes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

/// Why a string is not an idempotency key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a lowercase hyphenated UUID v4 idempotency key")]
pub struct InvalidKey;

impl IdempotencyKey {
    /// A new key from 16 bytes of the CSPRNG behind `random`.
    pub fn generate(random: &mut dyn RandomSource) -> Result<Self, getrandom::Error> {
        let mut bytes = [0u8; 16];
        random.fill(&mut bytes)?;
        let uuid = uuid::Builder::from_random_bytes(bytes).into_uuid();
        Ok(Self(uuid.hyphenated().to_string()))
    }

    /// Accepts only the canonical form (`xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx`, lowercase), so
    /// tampered storage cannot smuggle anything else into a header.
    pub fn parse(text: &str) -> Result<Self, InvalidKey> {
        let uuid = Uuid::try_parse(text).map_err(|_| InvalidKey)?;
        let canonical = uuid.hyphenated().to_string();
        let is_v4 = uuid.get_version_num() == 4 && uuid.get_variant() == uuid::Variant::RFC4122;
        if canonical != text || !is_v4 {
            return Err(InvalidKey);
        }
        Ok(Self(canonical))
    }

    /// The key as it goes into the `Idempotency-Key` header in the default raw-token form.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The IETF draft form: a structured-field string, i.e. the key in double quotes.
    pub fn as_sf_string(&self) -> String {
        // Safe without escaping: a validated key holds only hex digits and hyphens.
        format!("\"{}\"", self.0)
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
