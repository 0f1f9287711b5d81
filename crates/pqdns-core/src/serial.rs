//! Serial number arithmetic (RFC 1982) for 32-bit values: SOA serials (RFC 1035 §3.3.13,
//! RFC 1995 §2) and RRSIG inception and expiration times (RFC 4034 §3.1.5).

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

#[cfg(test)]
mod tests {
    use super::*;

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
