//! Response-rate limiting (RRL) for UDP, as NSD and Knot DNS ship it (after Vixie and
//! Schryver's DNS RRL design): a server that answers spoofed queries reflects and amplifies
//! them toward the spoofed address, and post-quantum DNSSEC makes answers kilobytes long.
//!
//! Responses are counted per (client prefix, response kind) in a fixed table of
//! [`TABLE_SLOTS`] buckets, each one atomic word: the second of the count and the count. The
//! prefix is the client's /24 (IPv4) or /56 (IPv6) by default; the kinds are NOERROR,
//! NXDOMAIN and errors. Up to `rate` responses per second per bucket go out; beyond that
//! every `slip`-th one is sent as a truncated stub (header, question and OPT with our server
//! cookie, TC=1: a real client retries over TCP, where nothing is amplified, or with the
//! cookie) and the others are dropped. Clients with a
//! valid DNS server cookie ([`crate::cookie`]) and stream transports are not limited.
//!
//! Work per response: one hash and one compare-and-swap; no lock, no allocation. Buckets that
//! collide share a budget (as in NSD and Knot), which errs on the side of limiting. A bucket
//! counts one-second windows, so a burst that straddles a second can reach twice `rate`.

use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use pqdns_core::wire::Rcode;

/// Buckets in the table (8 bytes each: 512 KiB).
pub const TABLE_SLOTS: usize = 1 << 16;
/// Default responses per second per bucket (NSD's `rrl-ratelimit` default).
pub const DEFAULT_RATE: u32 = 200;
/// Default slip: every second limited response is sent truncated (NSD's and Knot's default).
pub const DEFAULT_SLIP: u32 = 2;
/// Default IPv4 prefix length of a bucket.
pub const DEFAULT_IPV4_PREFIX: u8 = 24;
/// Default IPv6 prefix length of a bucket.
pub const DEFAULT_IPV6_PREFIX: u8 = 56;

/// RRL settings (pqdns-server: `[server]` `rrl_rate`, `rrl_slip`, `rrl_ipv4_prefix`,
/// `rrl_ipv6_prefix`; pqdns-resolver: `--rrl-rate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RrlSettings {
    /// Responses per second per bucket; 0 turns RRL off.
    pub rate: u32,
    /// Every `slip`-th limited response is sent truncated; 0 drops them all, 1 truncates all.
    pub slip: u32,
    /// Prefix length of an IPv4 client's bucket, 0 to 32 bits.
    pub ipv4_prefix: u8,
    /// Prefix length of an IPv6 client's bucket, 0 to 128 bits.
    pub ipv6_prefix: u8,
}

impl Default for RrlSettings {
    fn default() -> RrlSettings {
        RrlSettings {
            rate: DEFAULT_RATE,
            slip: DEFAULT_SLIP,
            ipv4_prefix: DEFAULT_IPV4_PREFIX,
            ipv6_prefix: DEFAULT_IPV6_PREFIX,
        }
    }
}

/// Default amplification limit: a UDP response to a client without a valid server cookie is at
/// most 3 times its query's bytes, the factor QUIC allows toward an address it has not
/// validated (RFC 9000 §8.1).
pub const DEFAULT_AMPLIFICATION_LIMIT: u32 = 3;

/// Whether a UDP response of `response_len` bytes to a query of `query_len` bytes, from a
/// client without a valid server cookie, is over the amplification `limit` (a multiple of the
/// query's length; 0: no limit). A response over it is cut to its question and OPT record
/// with TC set (`pqdns_core::wire::truncate_to_question`), so the client asks again with the
/// cookie it got or over TCP.
pub fn exceeds_amplification_limit(limit: u32, query_len: usize, response_len: usize) -> bool {
    let most = usize::try_from(limit)
        .unwrap_or(usize::MAX)
        .saturating_mul(query_len);
    limit > 0 && response_len > most
}

/// What to do with one response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Send it.
    Send,
    /// Send a truncated stub instead (TC=1).
    Slip,
    /// Send nothing.
    Drop,
}

/// The rate limiter: a fixed table of buckets.
#[derive(Debug)]
pub struct Rrl {
    settings: RrlSettings,
    buckets: Box<[AtomicU64]>,
    hasher: foldhash::fast::RandomState,
}

/// Seconds of the coarse monotonic clock (`CLOCK_MONOTONIC_COARSE`: a few ms resolution, a
/// fraction of the cost of the precise clock; RRL counts whole seconds).
fn coarse_seconds() -> u32 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC_COARSE)
        .map_or(0, |t| t.tv_sec() as u32)
}

impl Rrl {
    /// A limiter with `settings`, or `None` when its rate is 0 (off).
    pub fn new(settings: RrlSettings) -> Option<Rrl> {
        (settings.rate > 0).then(|| Rrl {
            settings,
            buckets: (0..TABLE_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            hasher: foldhash::fast::RandomState::default(),
        })
    }

    /// Counts a response with `rcode` to `client` and says what to do with it.
    pub fn verdict(&self, client: IpAddr, rcode: Rcode) -> Verdict {
        self.verdict_at(client, rcode, coarse_seconds())
    }

    fn verdict_at(&self, client: IpAddr, rcode: Rcode, second: u32) -> Verdict {
        let kind: u8 = match rcode {
            Rcode::NOERROR => 0,
            Rcode::NXDOMAIN => 1,
            _ => 2,
        };
        let (bytes, len) = match client {
            IpAddr::V4(a) => {
                let mut b = [0u8; 16];
                b[..4].copy_from_slice(&a.octets());
                (b, self.settings.ipv4_prefix.min(32))
            }
            IpAddr::V6(a) => (a.octets(), self.settings.ipv6_prefix.min(128)),
        };
        // The address's first `len` bits (an IPv4 address sits in the top 32).
        let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
        // The kind in the low bits (an IPv4 /24 leaves them zero; an IPv6 /56 too).
        let key = (u128::from_be_bytes(bytes) & mask)
            ^ u128::from(kind)
            ^ (u128::from(client.is_ipv4()) << 2);
        let slot = self.hasher.hash_one(key) as usize % TABLE_SLOTS;
        let bucket = &self.buckets[slot];
        let mut old = bucket.load(Relaxed);
        let count = loop {
            let (at, n) = ((old >> 32) as u32, old as u32);
            let n = if at == second { n.saturating_add(1) } else { 1 };
            let new = (u64::from(second) << 32) | u64::from(n);
            match bucket.compare_exchange_weak(old, new, Relaxed, Relaxed) {
                Ok(_) => break n,
                Err(now) => old = now,
            }
        };
        if count <= self.settings.rate {
            return Verdict::Send;
        }
        let over = count - self.settings.rate;
        match self.settings.slip {
            0 => Verdict::Drop,
            s if over.is_multiple_of(s) => Verdict::Slip,
            _ => Verdict::Drop,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rrl(rate: u32, slip: u32) -> Rrl {
        Rrl::new(RrlSettings {
            rate,
            slip,
            ..RrlSettings::default()
        })
        .unwrap()
    }

    #[test]
    fn a_prefix_gets_rate_responses_a_second_then_slips_and_drops() {
        let r = rrl(5, 2);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let verdicts: Vec<Verdict> = (0..11)
            .map(|_| r.verdict_at(a, Rcode::NOERROR, 7))
            .collect();
        assert!(verdicts[..5].iter().all(|v| *v == Verdict::Send));
        assert_eq!(
            &verdicts[5..],
            &[
                Verdict::Drop,
                Verdict::Slip,
                Verdict::Drop,
                Verdict::Slip,
                Verdict::Drop,
                Verdict::Slip
            ]
        );
        // The same /24 shares the budget; another /24, another kind, the next second do not.
        let b: IpAddr = "192.0.2.200".parse().unwrap();
        assert_ne!(r.verdict_at(b, Rcode::NOERROR, 7), Verdict::Send);
        assert_eq!(
            r.verdict_at("192.0.3.1".parse().unwrap(), Rcode::NOERROR, 7),
            Verdict::Send
        );
        assert_eq!(r.verdict_at(a, Rcode::NXDOMAIN, 7), Verdict::Send);
        assert_eq!(r.verdict_at(a, Rcode::NOERROR, 8), Verdict::Send);
        // IPv6 by /56.
        let v6: IpAddr = "2001:db8:0:1::1".parse().unwrap();
        let same56: IpAddr = "2001:db8:0:ff::2".parse().unwrap();
        for _ in 0..5 {
            assert_eq!(r.verdict_at(v6, Rcode::NOERROR, 7), Verdict::Send);
        }
        assert_ne!(r.verdict_at(same56, Rcode::NOERROR, 7), Verdict::Send);
    }

    #[test]
    fn amplification_limit_is_a_multiple_of_the_query() {
        assert!(!exceeds_amplification_limit(3, 40, 120));
        assert!(exceeds_amplification_limit(3, 40, 121));
        assert!(!exceeds_amplification_limit(0, 40, 65_535), "0 is off");
        assert!(!exceeds_amplification_limit(
            u32::MAX,
            usize::MAX,
            usize::MAX
        ));
    }

    #[test]
    fn slip_zero_drops_all_slip_one_truncates_all_rate_zero_is_off() {
        let a: IpAddr = "198.51.100.9".parse().unwrap();
        let drop_all = rrl(1, 0);
        let truncate_all = rrl(1, 1);
        for r in [&drop_all, &truncate_all] {
            assert_eq!(r.verdict_at(a, Rcode::REFUSED, 1), Verdict::Send);
        }
        for _ in 0..4 {
            assert_eq!(drop_all.verdict_at(a, Rcode::REFUSED, 1), Verdict::Drop);
            assert_eq!(truncate_all.verdict_at(a, Rcode::REFUSED, 1), Verdict::Slip);
        }
        assert!(Rrl::new(RrlSettings {
            rate: 0,
            ..RrlSettings::default()
        })
        .is_none());
    }
}
