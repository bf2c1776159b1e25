//! Event times: RFC 3339 strings, read exactly like Go's `time.Parse(time.RFC3339Nano, s)`, the
//! format the runtime accepts for `event_time.field` besides epoch milliseconds.

use crate::{Error, ErrorKind};

/// Parses an RFC 3339 timestamp (`2006-01-02T15:04:05.999999999Z07:00`: `T` and `Z` upper
/// case, an optional fraction of any length of which the first 9 digits count, `Z` or a
/// `±hh:mm` offset) into epoch milliseconds, rounded towards negative infinity like Go's
/// `UnixMilli`.
pub fn parse_rfc3339_ms(s: &str) -> Result<i64, Error> {
    let bad = || Error::new(ErrorKind::Handler, format!("time: cannot parse {:?} as RFC 3339", s));
    let b = s.as_bytes();
    if b.len() < 19 {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>, min: i64, max: i64| -> Option<i64> {
        let mut x: i64 = 0;
        for &c in &b[r] {
            if !c.is_ascii_digit() {
                return None;
            }
            x = x * 10 + (c - b'0') as i64;
        }
        if x < min || x > max {
            None
        } else {
            Some(x)
        }
    };
    let year = num(0..4, 0, 9999).ok_or_else(bad)?;
    let month = num(5..7, 1, 12).ok_or_else(bad)?;
    let day = num(8..10, 1, days_in(month, year)).ok_or_else(bad)?;
    let hour = num(11..13, 0, 23).ok_or_else(bad)?;
    let min = num(14..16, 0, 59).ok_or_else(bad)?;
    let sec = num(17..19, 0, 59).ok_or_else(bad)?;
    if !(b[4] == b'-' && b[7] == b'-' && b[10] == b'T' && b[13] == b':' && b[16] == b':') {
        return Err(bad());
    }
    let mut rest = &b[19..];
    let mut nsec: i64 = 0;
    if rest.len() >= 2 && rest[0] == b'.' && rest[1].is_ascii_digit() {
        let mut n = 1;
        while n < rest.len() && rest[n].is_ascii_digit() {
            n += 1;
        }
        let digits = &rest[1..n];
        for i in 0..9 {
            nsec = nsec * 10 + digits.get(i).map(|&c| (c - b'0') as i64).unwrap_or(0);
        }
        rest = &rest[n..];
    }
    let mut offset: i64 = 0;
    if rest != b"Z" {
        if rest.len() != 6 || !(rest[0] == b'+' || rest[0] == b'-') || rest[3] != b':' {
            return Err(bad());
        }
        let z = b.len() - 6; // the offset is the last 6 bytes: ±hh:mm
        let hr = num(z + 1..z + 3, 0, 23);
        let mm = num(z + 4..z + 6, 0, 59);
        let (hr, mm) = match (hr, mm) {
            (Some(h), Some(m)) => (h, m),
            _ => return Err(bad()),
        };
        offset = (hr * 60 + mm) * 60;
        if rest[0] == b'-' {
            offset = -offset;
        }
    }
    let days = days_from_civil(year, month, day);
    let secs = days * 86400 + hour * 3600 + min * 60 + sec - offset;
    Ok(secs * 1000 + nsec / 1_000_000)
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in(month: i64, year: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}
