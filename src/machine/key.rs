//! Idempotency keys: a UUID v4 from the CSPRNG or a key the app brings, and strict validation of
//! keys read back from storage.

use alloc::string::String;

use super::random::{RandomFailed, RandomSource};

/// Length of a hyphenated UUID.
pub const KEY_LEN: usize = 36;
/// The shortest key an app may bring: 16 characters (96 bits of a random alphabet of 64).
pub const BROUGHT_MIN: usize = 16;
/// The longest key an app may bring (Stripe's limit).
pub const BROUGHT_MAX: usize = 255;

/// A well-formed idempotency key: a lowercase hyphenated UUID v4, or a key the app brought.
///
/// The only ways to get one are [`Key::generate`] (fresh CSPRNG bytes), [`Key::parse`] (strict
/// validation) and [`Key::brought`] (16 to 255 URL-unreserved characters), so a key can always go
/// into a header, a JSON string or a URL as it is: never CR/LF, quotes, backslashes or spaces.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Key(String);

// Not derived: the string is copied by `owned` (one out-of-line copy).
impl Clone for Key {
    fn clone(&self) -> Self {
        Self(owned(&self.0))
    }
}

impl Key {
    /// A new key from 16 bytes of `random`; `Err` when the source failed.
    pub fn generate(random: &dyn RandomSource) -> Result<Self, RandomFailed> {
        let mut bytes = [0u8; 16];
        random.fill(&mut bytes)?;
        let uuid = uuid::Builder::from_random_bytes(bytes).into_uuid();
        // encode_lower writes into a buffer without core::fmt (to_string would pull it in).
        let mut buffer = [0u8; KEY_LEN];
        Ok(Self(owned(&*uuid.hyphenated().encode_lower(&mut buffer))))
    }

    /// Accepts only the canonical form `xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx` (lowercase hex), so
    /// tampered storage cannot smuggle anything else into a header.
    pub fn parse(text: &str) -> Option<Self> {
        is_canonical_v4(text).then(|| Self(owned(text)))
    }

    /// A key the app brings (a server-issued one, the resource's own id): 16 to 255 characters of
    /// `A-Z a-z 0-9 - . _ ~` (RFC 3986's unreserved set, which is also safe in a structured-field
    /// string and in JSON without escaping).
    #[inline(never)] // begin and load: one copy (measured)
    pub fn brought(text: &str) -> Option<Self> {
        let unreserved = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
        ((BROUGHT_MIN..=BROUGHT_MAX).contains(&text.len()) && text.as_bytes().iter().all(unreserved))
            .then(|| Self(owned(text)))
    }

    /// The key as it goes into the header in the default raw-token form.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The header value: the raw token, or the IETF draft's structured-field string (in double
    /// quotes; safe without escaping because a key holds only unreserved characters).
    pub fn header(&self, sf_string: bool) -> String {
        if !sf_string {
            return self.clone().0;
        }
        let mut value = String::with_capacity(self.0.len() + 2);
        value.push('"');
        value.push_str(&self.0);
        value.push('"');
        value
    }
}

/// Whether `text` is a lowercase hyphenated UUID of version 4 and the RFC 9562 variant.
fn is_canonical_v4(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == KEY_LEN
        && bytes.iter().enumerate().all(|(i, &b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            14 => b == b'4',
            19 => matches!(b, b'8' | b'9' | b'a' | b'b'),
            _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
        })
}

/// `text` as an owned `String`, out of line: one copy of the allocation and its failure path for
/// every key and record string the machine copies.
#[inline(never)]
pub(crate) fn owned(text: &str) -> String {
    String::from(text)
}
