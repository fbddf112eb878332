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
        let seconds = value.bytes().fold(0u64, |n, b| n.saturating_mul(10).saturating_add(u64::from(b - b'0')));
        return Some(seconds.saturating_mul(1000).min(cap_ms));
    }
    let when_ms = parse_http_date(value)?;
    Some(when_ms.saturating_sub(now_ms).min(cap_ms))
}

const WEEKDAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
const MONTHS: [&[u8; 3]; 12] =
    [b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec"];

/// An HTTP-date in ms since the epoch: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete
/// RFC 850 form (`Sunday, 06-Nov-94 08:49:37 GMT`, two-digit years 70-99 are 19xx, 00-69 are 20xx)
/// or asctime (`Sun Nov  6 08:49:37 1994`). The weekday must match the date; years 1970 to 9999.
pub fn parse_http_date(value: &str) -> Option<u64> {
    let b = value.as_bytes();
    // (weekday index, the rest after the weekday)
    let (weekday, date) = if b.len() == 29 && b.get(3..5) == Some(b", ") {
        (short_weekday(&b[..3])?, Form::Imf(&b[5..]))
    } else if b.len() == 24 && b.get(3) == Some(&b' ') {
        (short_weekday(&b[..3])?, Form::Asctime(&b[4..]))
    } else {
        let comma = b.iter().position(|&c| c == b',')?;
        let weekday = WEEKDAYS.iter().position(|d| d.as_bytes() == &b[..comma])?;
        let rest = b.get(comma + 1..)?;
        (weekday, Form::Rfc850(rest.strip_prefix(b" ")?))
    };
    let civil = match date {
        // "06 Nov 1994 08:49:37 GMT"
        Form::Imf(s) => {
            expect(s, &[(2, b' '), (6, b' '), (11, b' ')])?;
            if &s[20..] != b" GMT" {
                return None;
            }
            Civil { day: digits(&s[0..2])?, month: month(&s[3..6])?, year: digits(&s[7..11])?, time: time(&s[12..20])? }
        }
        // "06-Nov-94 08:49:37 GMT"
        Form::Rfc850(s) => {
            if s.len() != 22 || &s[18..] != b" GMT" {
                return None;
            }
            expect(s, &[(2, b'-'), (6, b'-'), (9, b' ')])?;
            let yy = digits(&s[7..9])?;
            let year = if yy < 70 { 2000 + yy } else { 1900 + yy };
            Civil { day: digits(&s[0..2])?, month: month(&s[3..6])?, year, time: time(&s[10..18])? }
        }
        // "Nov  6 08:49:37 1994"
        Form::Asctime(s) => {
            expect(s, &[(3, b' '), (6, b' '), (15, b' ')])?;
            let day = if s[4] == b' ' { digits(&s[5..6])? } else { digits(&s[4..6])? };
            Civil { day, month: month(&s[0..3])?, year: digits(&s[16..20])?, time: time(&s[7..15])? }
        }
    };
    let days = civil.days_since_epoch()?;
    // 1970-01-01 was a Thursday (index 3 with Monday = 0).
    if (days + 3) % 7 != weekday as u64 {
        return None;
    }
    Some(days * 86_400_000 + civil.time * 1000)
}

enum Form<'a> {
    Imf(&'a [u8]),
    Rfc850(&'a [u8]),
    Asctime(&'a [u8]),
}

struct Civil {
    day: u64,
    month: u64,
    year: u64,
    /// Seconds into the day.
    time: u64,
}

impl Civil {
    /// Days from 1970-01-01 (H. Hinnant's days_from_civil), or `None` for a date that does not exist.
    fn days_since_epoch(&self) -> Option<u64> {
        let (year, month, day) = (self.year, self.month, self.day);
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
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn short_weekday(name: &[u8]) -> Option<usize> {
    WEEKDAYS.iter().position(|d| &d.as_bytes()[..3] == name)
}

fn month(name: &[u8]) -> Option<u64> {
    MONTHS.iter().position(|m| m.as_slice() == name).map(|i| i as u64 + 1)
}

/// Checks fixed separator bytes at their offsets (the caller knows `s` is long enough).
fn expect(s: &[u8], separators: &[(usize, u8)]) -> Option<()> {
    separators.iter().all(|&(at, byte)| s.get(at) == Some(&byte)).then_some(())
}

/// ASCII digits as a number (only short fixed-width fields reach here).
fn digits(s: &[u8]) -> Option<u64> {
    s.iter().try_fold(0u64, |n, &c| c.is_ascii_digit().then(|| n * 10 + u64::from(c - b'0')))
}

/// `hh:mm:ss` as seconds into the day (a leap second `60` is rejected, as httpdate does).
fn time(s: &[u8]) -> Option<u64> {
    expect(s, &[(2, b':'), (5, b':')])?;
    let (h, m, sec) = (digits(&s[0..2])?, digits(&s[3..5])?, digits(&s[6..8])?);
    (h < 24 && m < 60 && sec < 60).then_some((h * 60 + m) * 60 + sec)
}
