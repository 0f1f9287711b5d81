//! Address allow-lists: IP addresses and CIDR prefixes (RFC 4632 §3.1 notation for IPv4,
//! RFC 4291 §2.3 for IPv6), used by the authoritative server to decide who may transfer
//! zones (RFC 5936 §5: servers "SHOULD allow access to be granted to Internet Protocol
//! addresses and ranges") and by the resolver service to decide who may ask it to recurse
//! (RFC 5358 §4: open resolvers are reflectors).
//!
//! IPv4-mapped IPv6 peers (`::ffff:192.0.2.1`) are matched as the IPv4 address they carry.

use std::net::IpAddr;

/// One IP address (`192.0.2.1`, `::1`) or prefix (`10.0.0.0/8`, `2001:db8::/32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpPrefix {
    /// The network address, with the host bits cleared.
    addr: IpAddr,
    /// Prefix length in bits (at most 32 for IPv4, 128 for IPv6).
    len: u8,
}

/// Why a prefix does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PrefixError {
    /// The address part is not an IPv4 or IPv6 address.
    #[error("{0:?} is not an IP address or CIDR prefix (e.g. 192.0.2.1, 10.0.0.0/8, ::1)")]
    Address(String),
    /// The length part is not a number up to 32 (IPv4) or 128 (IPv6).
    #[error("{0:?}: prefix length must be 0..=32 for IPv4 and 0..=128 for IPv6")]
    Length(String),
}

impl IpPrefix {
    /// The prefix length, bits (32 for one IPv4 address, 128 for one IPv6 address).
    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    /// True if `ip` lies inside this prefix (IPv4-mapped IPv6 addresses count as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                mask(u128::from(u32::from(ip)), self.len, 32) == u128::from(u32::from(net))
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                mask(u128::from(ip), self.len, 128) == u128::from(net)
            }
            _ => false,
        }
    }
}

/// Keeps the top `len` of `bits` bits of `value`.
fn mask(value: u128, len: u8, bits: u8) -> u128 {
    if len == 0 {
        return 0;
    }
    let host_bits = u32::from(bits - len);
    (value >> host_bits) << host_bits
}

impl std::str::FromStr for IpPrefix {
    type Err = PrefixError;

    fn from_str(text: &str) -> Result<IpPrefix, PrefixError> {
        let (addr_text, len_text) = match text.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (text, None),
        };
        let addr: IpAddr = addr_text
            .trim()
            .parse()
            .map_err(|_| PrefixError::Address(text.to_string()))?;
        let addr = addr.to_canonical();
        let bits = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len_text {
            None => bits,
            Some(l) => l
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|l| *l <= bits)
                .ok_or_else(|| PrefixError::Length(text.to_string()))?,
        };
        let addr = match addr {
            IpAddr::V4(a) => IpAddr::V4((mask(u128::from(u32::from(a)), len, 32) as u32).into()),
            IpAddr::V6(a) => IpAddr::V6(mask(u128::from(a), len, 128).into()),
        };
        Ok(IpPrefix { addr, len })
    }
}

impl std::fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// A list of prefixes; empty means nobody is allowed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowList {
    prefixes: Vec<IpPrefix>,
}

impl AllowList {
    /// A list allowing the addresses in `prefixes`.
    pub fn new(prefixes: Vec<IpPrefix>) -> AllowList {
        AllowList { prefixes }
    }

    /// True if no address is allowed.
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }

    /// True if `ip` matches any prefix.
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.prefixes.iter().any(|p| p.contains(ip))
    }
}

/// Prefixes, each with a value: the value of the longest prefix that contains an address
/// decides (as unbound's `access-control`); the prefix given last wins between equal ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrefixMap<T> {
    entries: Vec<(IpPrefix, T)>,
}

impl<T> PrefixMap<T> {
    /// A map of `entries`.
    pub fn new(entries: Vec<(IpPrefix, T)>) -> PrefixMap<T> {
        PrefixMap { entries }
    }

    /// True if it holds no prefix.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value of the longest prefix containing `ip`, if any (a linear pass: access lists
    /// are short).
    pub fn longest(&self, ip: IpAddr) -> Option<&T> {
        self.entries
            .iter()
            .filter(|(p, _)| p.contains(ip))
            .max_by_key(|(p, _)| p.prefix_len())
            .map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn addresses_and_prefixes_match_only_their_range() {
        let list = AllowList::new(
            ["127.0.0.1", "10.1.0.0/16", "2001:db8::/32", "::1"]
                .iter()
                .map(|s| s.parse().unwrap())
                .collect(),
        );
        assert!(list.allows(ip("127.0.0.1")));
        assert!(!list.allows(ip("127.0.0.2")));
        assert!(list.allows(ip("10.1.255.7")));
        assert!(!list.allows(ip("10.2.0.1")));
        assert!(list.allows(ip("2001:db8:ffff::1")));
        assert!(!list.allows(ip("2001:db9::1")));
        assert!(list.allows(ip("::1")));
        assert!(!list.allows(ip("::2")));
        assert!(list.allows(ip("::ffff:127.0.0.1")), "v4-mapped is IPv4");
        assert!(!AllowList::default().allows(ip("127.0.0.1")));
        let all4: IpPrefix = "0.0.0.0/0".parse().unwrap();
        assert!(all4.contains(ip("203.0.113.9")));
        assert!(!all4.contains(ip("::1")), "families never mix");
        // Host bits are cleared, so the prefix prints as its network.
        assert_eq!(
            "10.1.2.3/8".parse::<IpPrefix>().unwrap().to_string(),
            "10.0.0.0/8"
        );
    }

    #[test]
    fn the_longest_prefix_decides() {
        let map = PrefixMap::new(vec![
            ("0.0.0.0/0".parse().unwrap(), 'a'),
            ("10.0.0.0/8".parse().unwrap(), 'b'),
            ("10.1.0.0/16".parse().unwrap(), 'c'),
            ("::1".parse().unwrap(), 'd'),
        ]);
        assert_eq!(map.longest(ip("192.0.2.1")), Some(&'a'));
        assert_eq!(map.longest(ip("10.2.0.1")), Some(&'b'));
        assert_eq!(map.longest(ip("10.1.0.1")), Some(&'c'));
        assert_eq!(map.longest(ip("::ffff:10.1.0.1")), Some(&'c'));
        assert_eq!(map.longest(ip("::1")), Some(&'d'));
        assert_eq!(map.longest(ip("::2")), None);
    }

    #[test]
    fn bad_prefixes_are_errors() {
        for bad in [
            "",
            "localhost",
            "10.0.0.0/33",
            "::/129",
            "10.0.0.0/-1",
            "1.2.3.4/x",
        ] {
            assert!(bad.parse::<IpPrefix>().is_err(), "{bad:?}");
        }
        let err = "10.0.0.0/40".parse::<IpPrefix>().unwrap_err().to_string();
        assert!(
            err.contains("10.0.0.0/40") && err.contains("0..=32"),
            "{err}"
        );
    }
}
