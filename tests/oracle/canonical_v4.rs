//! The test oracle for keys, shared by the fuzz tests (native) and the wasm-bindgen tests: a key is
//! a canonical UUID v4, lowercase, as the machine must mint and accept it. Written out here rather
//! than taken from the machine, so a bug there cannot hide itself.

/// `text` is a canonical lowercase UUID v4 (`xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx`).
pub fn is_canonical_v4(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            14 => *c == b'4',
            19 => matches!(c, b'8' | b'9' | b'a' | b'b'),
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(c),
        })
}
