//! Serial number arithmetic (RFC 1982) for 32-bit values: SOA serials (RFC 1035 §3.3.13,
//! RFC 1995 §2) and RRSIG inception and expiration times (RFC 4034 §3.1.5); and the policies
//! a signer follows to pick the SOA serial of a zone it signs again ([`SerialPolicy`]).

use std::cmp::Ordering;

/// A 32-bit serial number. Two serials compare as RFC 1982 §3.2 says: `a < b` when `b - a`
/// (wrapping) is in 1..2^31. Serials exactly 2^31 apart are not comparable: `partial_cmp`
/// returns `None`, and `<`, `<=`, `>`, `>=` are all false.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Serial(pub u32);

impl PartialOrd for Serial {
    fn partial_cmp(&self, other: &Serial) -> Option<Ordering> {
        match other.0.wrapping_sub(self.0) {
            0 => Some(Ordering::Equal),
            d if d < 0x8000_0000 => Some(Ordering::Less),
            0x8000_0000 => None,
            _ => Some(Ordering::Greater),
        }
    }
}

impl Serial {
    /// True when `self` is greater than `other` in RFC 1982 terms (false for equal or
    /// incomparable serials).
    pub fn is_newer_than(self, other: Serial) -> bool {
        self.partial_cmp(&other) == Some(Ordering::Greater)
    }
}

/// How a signer picks the SOA serial of a zone it signs, in the `[signing] serial` setting
/// (the choices of Knot DNS's `serial-policy` and BIND's `serial-update-method`, plus `keep`).
/// Whatever the policy proposes, a zone served before gets a serial newer than the served one
/// (RFC 1982), so that secondaries transfer the new signatures (RFC 1995 §2), unless the
/// policy is [`SerialPolicy::Keep`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SerialPolicy {
    /// The zone file's serial when it is newer than the served one, else the served one + 1.
    #[default]
    Increment,
    /// The signing time in UNIX seconds (mod 2^32) when that is newer than both the file's and
    /// the served serial; else as [`SerialPolicy::Increment`].
    Unixtime,
    /// `YYYYMMDDnn` of the signing date (UTC) with `nn` = 00 when that is newer than both the
    /// file's and the served serial; else as [`SerialPolicy::Increment`], so `nn` counts the
    /// changes of a day (after 99 the serial runs into the next day's numbers, as in BIND).
    Dateserial,
    /// Always the zone file's serial: the operator raises it. A re-signing under the same serial
    /// is served, but secondaries do not transfer it.
    Keep,
}

impl SerialPolicy {
    /// The SOA serial for a zone whose file says `file`, served now (if at all) with `served`,
    /// signed at `now` (UNIX seconds).
    pub fn next(self, file: u32, served: Option<u32>, now: u64) -> u32 {
        if self == SerialPolicy::Keep {
            return file;
        }
        // The newest serial already published: the served one, which the new serial must pass,
        // unless the file's is newer.
        let (base, must_pass) = match served {
            Some(s) if !Serial(file).is_newer_than(Serial(s)) => (s, true),
            _ => (file, false),
        };
        let proposed = match self {
            SerialPolicy::Unixtime => Some(now as u32),
            SerialPolicy::Dateserial => date_serial(now),
            SerialPolicy::Increment | SerialPolicy::Keep => None,
        };
        match proposed {
            Some(p) if Serial(p).is_newer_than(Serial(base)) => p,
            _ if must_pass => base.wrapping_add(1),
            _ => base,
        }
    }
}

/// `YYYYMMDD00` for the UTC date of `now` (UNIX seconds); `None` after 4294-12-31, whose
/// number does not fit in 32 bits.
fn date_serial(now: u64) -> Option<u32> {
    let date: u32 = crate::time::to_yyyymmddhhmmss(now).get(..8)?.parse().ok()?;
    date.checked_mul(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-24T22:40:00Z.
    const NOW: u64 = 1_795_560_000;

    #[test]
    fn increment_keeps_a_newer_file_serial_and_moves_past_the_served_one() {
        let p = SerialPolicy::Increment;
        assert_eq!(p.next(7, None, NOW), 7, "first load: the file's serial");
        assert_eq!(p.next(9, Some(7), NOW), 9, "the file is newer");
        assert_eq!(p.next(7, Some(7), NOW), 8, "unchanged file, re-signed");
        assert_eq!(p.next(5, Some(7), NOW), 8, "older file");
        assert_eq!(p.next(u32::MAX, Some(u32::MAX), NOW), 0, "wraps (RFC 1982)");
        assert_eq!(
            p.next(1, Some(u32::MAX), NOW),
            1,
            "1 is newer than 2^32 - 1"
        );
    }

    #[test]
    fn unixtime_and_dateserial_use_the_signing_time_when_it_is_newer() {
        let u = SerialPolicy::Unixtime;
        assert_eq!(u.next(7, None, NOW), NOW as u32);
        assert_eq!(
            u.next(2026010101, None, NOW),
            2026010101,
            "a date serial is newer than today's UNIX time: kept"
        );
        assert_eq!(
            u.next(7, Some(NOW as u32), NOW),
            NOW as u32 + 1,
            "a second signing in the same second"
        );
        let d = SerialPolicy::Dateserial;
        assert_eq!(date_serial(NOW), Some(2026112400));
        assert_eq!(d.next(2026010101, None, NOW), 2026112400);
        assert_eq!(
            d.next(2026010101, Some(2026112400), NOW),
            2026112401,
            "second change of the day"
        );
        assert_eq!(
            d.next(2026112405, Some(2026112403), NOW),
            2026112405,
            "the file is newer"
        );
        // A file serial from the future (here a unixtime one) is never moved backwards.
        let future = 4_000_000_000;
        assert_eq!(d.next(future, Some(future), NOW), future + 1);
    }

    #[test]
    fn keep_never_changes_the_file_serial() {
        assert_eq!(SerialPolicy::Keep.next(7, Some(7), NOW), 7);
        assert_eq!(SerialPolicy::Keep.next(5, Some(7), NOW), 5);
    }

    #[test]
    fn policies_are_named_in_lowercase_in_toml() {
        #[derive(serde::Deserialize)]
        struct T {
            serial: SerialPolicy,
        }
        for (text, want) in [
            ("increment", SerialPolicy::Increment),
            ("unixtime", SerialPolicy::Unixtime),
            ("dateserial", SerialPolicy::Dateserial),
            ("keep", SerialPolicy::Keep),
        ] {
            let t: T = toml::from_str(&format!("serial = \"{text}\"")).unwrap();
            assert_eq!(t.serial, want);
        }
        assert!(toml::from_str::<T>("serial = \"date\"").is_err());
    }

    #[test]
    fn rfc1982_comparisons() {
        assert!(Serial(1) < Serial(2));
        assert_eq!(Serial(2).partial_cmp(&Serial(2)), Some(Ordering::Equal));
        assert!(Serial(u32::MAX) < Serial(3), "wraps");
        assert!(Serial(3) > Serial(u32::MAX));
        assert!(Serial(10) < Serial(10 + 0x7fff_ffff));
        // RFC 1982 §3.2: 2^31 apart is undefined.
        let (a, b) = (Serial(5), Serial(5 + 0x8000_0000));
        assert_eq!(a.partial_cmp(&b), None);
        assert_eq!([a < b, a > b, a <= b, a >= b], [false; 4]);
    }
}
