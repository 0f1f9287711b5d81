//! UNIX time ↔ `YYYYMMDDHHMMSS` (UTC), the RRSIG presentation format (RFC 4034 §3.2), and
//! RFC 1982 serial-number comparison of 32-bit RRSIG times (RFC 4034 §3.1.5).

/// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's civil algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Parses `YYYYMMDDHHMMSS` (UTC) into seconds since the UNIX epoch; `None` if malformed or
/// before 1970.
pub fn from_yyyymmddhhmmss(text: &str) -> Option<u64> {
    if text.len() != 14 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let num = |r: std::ops::Range<usize>| text[r].parse::<u32>().ok();
    let (y, mo, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
    let (h, mi, s) = (num(8..10)?, num(10..12)?, num(12..14)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let days = days_from_civil(i64::from(y), mo, d);
    let secs = days * 86_400 + i64::from(h) * 3600 + i64::from(mi) * 60 + i64::from(s);
    u64::try_from(secs).ok()
}

/// Formats seconds since the UNIX epoch as `YYYYMMDDHHMMSS` (UTC).
pub fn to_yyyymmddhhmmss(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}{:02}{:02}{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Formats seconds since the UNIX epoch for people: `YYYY-MM-DD HH:MM:SS UTC`.
pub fn to_display(secs: u64) -> String {
    let t = to_yyyymmddhhmmss(secs);
    format!(
        "{}-{}-{} {}:{}:{} UTC",
        &t[..4],
        &t[4..6],
        &t[6..8],
        &t[8..10],
        &t[10..12],
        &t[12..]
    )
}

/// Formats seconds since the UNIX epoch as C's `ctime` does, in UTC: `Wed Nov 25 22:55:14 2026`
/// (day of month padded to two places with a space), as BIND writes it in `.key` comments.
pub fn to_ctime(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // 1970-01-01 was a Thursday.
    let weekday = DAYS[(days % 7) as usize];
    let (y, m, d) = civil_from_days(days as i64);
    let month = MONTHS[(m as usize).saturating_sub(1) % 12];
    format!(
        "{weekday} {month} {d:2} {:02}:{:02}:{:02} {y}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Parses a time given on a command line: a UNIX time in seconds or `YYYYMMDDHHMMSS` (UTC).
pub fn parse_cli_time(text: &str) -> Option<u64> {
    if text.len() == 14 {
        from_yyyymmddhhmmss(text)
    } else {
        text.parse().ok()
    }
}

/// The current UNIX time in seconds.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// True if 32-bit RRSIG time `a` is at or before `b`, using RFC 1982 serial arithmetic as
/// RFC 4034 §3.1.5 requires (so times keep working across the 2106 wrap).
pub fn serial_le(a: u32, b: u32) -> bool {
    crate::serial::Serial(a) <= crate::serial::Serial(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        // Times from draft-westerbaan-dnssec-mldsa §6.
        assert_eq!(from_yyyymmddhhmmss("20150819220000"), Some(1_440_021_600));
        assert_eq!(to_yyyymmddhhmmss(1_438_207_200), "20150729220000");
        assert_eq!(to_yyyymmddhhmmss(951_782_400), "20000229000000");
        assert_eq!(from_yyyymmddhhmmss("20000229000000"), Some(951_782_400));
        assert_eq!(from_yyyymmddhhmmss("20001301000000"), None);
        assert_eq!(parse_cli_time("1700000000"), Some(1_700_000_000));
        assert_eq!(to_display(1_795_000_000), "2026-11-18 11:06:40 UTC");
        // BIND's comment in the OQS-bind sample key files (2026-11-25 22:55:14 UTC).
        let created = from_yyyymmddhhmmss("20261125225514").unwrap();
        assert_eq!(to_ctime(created), "Wed Nov 25 22:55:14 2026");
        assert_eq!(to_ctime(0), "Thu Jan  1 00:00:00 1970");
        assert_eq!(to_ctime(951_782_400), "Tue Feb 29 00:00:00 2000");
    }

    #[test]
    fn serial_comparison_wraps() {
        assert!(serial_le(10, 20));
        assert!(serial_le(20, 20));
        assert!(!serial_le(30, 20));
        // Just after the 2106 wrap, a time from just before it is still in the past.
        assert!(serial_le(u32::MAX - 5, 5));
        assert!(!serial_le(5, u32::MAX - 5));
    }
}
