//! `Retry-After` parsing (RFC 9110 §10.2.3): delay-seconds or an HTTP-date in any of the three forms
//! RFC 9110 §5.6.7 makes recipients accept. A small parser instead of httpdate (and its core::fmt).

/// The wait a `Retry-After` value asks for, in milliseconds, capped at `cap_ms`.
///
/// `now_ms` is the current time (ms since the epoch) for the HTTP-date form. A date in the past
/// means "now" (0). Anything unparseable (negative numbers, fractions, junk, absurd lengths, dates
/// that do not exist or name the wrong weekday) yields `None`, and the caller falls back to its own
/// backoff.
pub fn parse_retry_after(value: &str, now_ms: u64, cap_ms: u64) -> Option<u64> {
    // ASCII whitespace only (HTTP's OWS is space and tab): str::trim would pull in the Unicode tables.
    let value = value.trim_ascii();
    if value.is_empty() || value.len() > 64 {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        // Huge digit strings saturate rather than fail: "wait a very long time" is capped anyway.
        // Seconds past `MAX_SECONDS` saturate the milliseconds; the fold stops growing one past it
        // (no overflow check per digit, which would be a 128-bit multiply on wasm32).
        const MAX_SECONDS: u64 = u64::MAX / 1000;
        let seconds = value.bytes().fold(0u64, |n, b| (n * 10 + u64::from(b - b'0')).min(MAX_SECONDS + 1));
        let ms = if seconds > MAX_SECONDS { u64::MAX } else { seconds * 1000 };
        return Some(ms.min(cap_ms));
    }
    let when_ms = parse_http_date(value)?;
    Some(when_ms.saturating_sub(now_ms).min(cap_ms))
}

/// The weekdays from Monday (1970-01-01, a Thursday, is index 3); the first three letters of each
/// are the short form.
const WEEKDAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
const MONTHS: &[u8; 36] = b"JanFebMarAprMayJunJulAugSepOctNovDec";

/// What follows the weekday in one form of HTTP-date, and where its fields start. In `pattern`, `0`
/// is a digit, `_` a digit or a space, `M` any byte (the month, checked by name) and any other byte
/// itself, so one check covers the length, the separators and the digits.
struct Form {
    pattern: &'static [u8],
    day: usize,
    month: usize,
    year: usize,
    /// 4, or 2 for RFC 850's two-digit years.
    year_digits: usize,
    time: usize,
}

const IMF_FIXDATE: Form =
    Form { pattern: b"00 MMM 0000 00:00:00 GMT", day: 0, month: 3, year: 7, year_digits: 4, time: 12 };
const RFC_850: Form = Form { pattern: b"00-MMM-00 00:00:00 GMT", day: 0, month: 3, year: 7, year_digits: 2, time: 10 };
const ASCTIME: Form = Form { pattern: b"MMM _0 00:00:00 0000", day: 4, month: 0, year: 16, year_digits: 4, time: 7 };

/// An HTTP-date in ms since the epoch: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete
/// RFC 850 form (`Sunday, 06-Nov-94 08:49:37 GMT`, two-digit years 70-99 are 19xx, 00-69 are 20xx)
/// or asctime (`Sun Nov  6 08:49:37 1994`). The weekday must match the date; years 1970 to 9999.
pub fn parse_http_date(value: &str) -> Option<u64> {
    let b = value.as_bytes();
    let (short, after) = b.split_at_checked(3)?;
    let (weekday, long) = WEEKDAYS.iter().enumerate().find(|(_, d)| d.as_bytes().starts_with(short))?;
    let (form, s) = if let Some(rest) = after.strip_prefix(b", ") {
        (&IMF_FIXDATE, rest)
    } else if let Some(rest) = after.strip_prefix(b" ") {
        (&ASCTIME, rest)
    } else {
        (&RFC_850, b.strip_prefix(long.as_bytes())?.strip_prefix(b", ")?)
    };
    let fits = s.len() == form.pattern.len()
        && s.iter().zip(form.pattern).all(|(&c, &p)| match p {
            b'0' => c.is_ascii_digit(),
            b'_' => c == b' ' || c.is_ascii_digit(),
            b'M' => true,
            _ => c == p,
        });
    if !fits {
        return None;
    }
    let month = MONTHS.chunks_exact(3).position(|m| s.get(form.month..form.month + 3) == Some(m))? as u32 + 1;
    let mut year = digits(s, form.year, form.year_digits);
    if form.year_digits == 2 {
        year += if year < 70 { 2000 } else { 1900 };
    }
    let (h, m, sec) = (digits(s, form.time, 2), digits(s, form.time + 3, 2), digits(s, form.time + 6, 2));
    // A leap second `60` is rejected, as httpdate does.
    if h > 23 || m > 59 || sec > 59 {
        return None;
    }
    let days = days_since_epoch(year, month, digits(s, form.day, 2))?;
    // 1970-01-01 was a Thursday (index 3 with Monday = 0).
    if (days + 3) % 7 != weekday as u32 {
        return None;
    }
    Some(u64::from(days) * 86_400_000 + u64::from((h * 60 + m) * 60 + sec) * 1000)
}

/// The `len` bytes at `at`, a field the form's pattern checked: a digit's low four bits are its
/// value, a space's are 0. Read with an iterator, not a slice: no bounds check that could panic.
#[inline(never)] // one copy for the five fields
fn digits(s: &[u8], at: usize, len: usize) -> u32 {
    s.iter().skip(at).take(len).fold(0, |n, &c| n * 10 + u32::from(c & 0x0f))
}

/// Days from 1970-01-01 (H. Hinnant's days_from_civil), or `None` for a date that does not exist.
/// In `u32`: year 9999 is under three million days.
fn days_since_epoch(year: u32, month: u32, day: u32) -> Option<u32> {
    if !(1970..=9999).contains(&year) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    let (y, m) = if month <= 2 { (year - 1, month + 9) } else { (year, month - 3) };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}
