//! Caps on things in progress, in total and per client: connections of a stream listener
//! (RFC 7766 §6.2.2 asks servers to limit both), and a resolver service's resolutions in
//! flight. One client is an address, or a prefix of addresses (a /24 or /56, as response-rate
//! limiting counts them), so that a host with many addresses counts once.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex, PoisonError};

/// Caps simultaneous slots (connections, resolutions), in total and per client address or
/// prefix. Memory: one map entry per client holding a slot, so at most `max_total` entries.
#[derive(Debug)]
pub struct ConnLimiter {
    max_total: usize,
    max_per_ip: usize,
    /// Prefix lengths that make one client: IPv4, IPv6 (32 and 128: per address).
    prefix: (u8, u8),
    state: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// One admitted connection; dropping it frees the slot.
#[derive(Debug)]
pub struct ConnPermit {
    limiter: Arc<ConnLimiter>,
    ip: IpAddr,
}

impl ConnLimiter {
    /// A limiter admitting `max_total` connections, `max_per_ip` from any one address.
    pub fn new(max_total: usize, max_per_ip: usize) -> Arc<ConnLimiter> {
        ConnLimiter::per_prefix(max_total, max_per_ip, 32, 128)
    }

    /// A limiter admitting `max_total` slots, `max_per_prefix` for the addresses of any one
    /// IPv4 prefix of `ipv4_bits` or IPv6 prefix of `ipv6_bits` (clamped to 32 and 128).
    pub fn per_prefix(
        max_total: usize,
        max_per_prefix: usize,
        ipv4_bits: u8,
        ipv6_bits: u8,
    ) -> Arc<ConnLimiter> {
        Arc::new(ConnLimiter {
            max_total,
            max_per_ip: max_per_prefix,
            prefix: (ipv4_bits.min(32), ipv6_bits.min(128)),
            state: Mutex::new((0, HashMap::new())),
        })
    }

    /// The client `ip` counts as: its prefix.
    fn client(&self, ip: IpAddr) -> IpAddr {
        match ip {
            IpAddr::V4(a) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix.0));
                IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask.unwrap_or(0)))
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix.1));
                IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask.unwrap_or(0)))
            }
        }
    }

    /// Admits a connection (or another slot) from `ip`, or `None` if a cap is reached.
    pub fn try_acquire(self: &Arc<Self>, ip: IpAddr) -> Option<ConnPermit> {
        let ip = self.client(ip);
        let mut guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (total, per_ip) = &mut *guard;
        let mine = per_ip.entry(ip).or_insert(0);
        if *total >= self.max_total || *mine >= self.max_per_ip {
            if *mine == 0 {
                per_ip.remove(&ip);
            }
            return None;
        }
        *mine += 1;
        *total += 1;
        Some(ConnPermit {
            limiter: Arc::clone(self),
            ip,
        })
    }
}

impl Drop for ConnPermit {
    fn drop(&mut self) {
        let mut guard = self
            .limiter
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (total, per_ip) = &mut *guard;
        *total -= 1;
        if let Some(n) = per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                per_ip.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limiter_caps_per_ip_and_total_and_frees_on_drop() {
        let l = ConnLimiter::new(3, 2);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let a1 = l.try_acquire(a).unwrap();
        let _a2 = l.try_acquire(a).unwrap();
        assert!(l.try_acquire(a).is_none(), "per-address cap");
        let _b1 = l.try_acquire(b).unwrap();
        assert!(l.try_acquire(b).is_none(), "total cap");
        drop(a1);
        assert!(l.try_acquire(b).is_some());
        assert_eq!(l.state.lock().unwrap().1.len(), 2);
    }

    #[test]
    fn a_prefix_counts_as_one_client() {
        let l = ConnLimiter::per_prefix(10, 2, 24, 56);
        let held: Vec<ConnPermit> = ["192.0.2.1", "192.0.2.200"]
            .iter()
            .map(|a| l.try_acquire(a.parse().unwrap()).unwrap())
            .collect();
        assert!(
            l.try_acquire("192.0.2.7".parse().unwrap()).is_none(),
            "the /24 is full"
        );
        assert!(l.try_acquire("192.0.3.7".parse().unwrap()).is_some());
        let v6: IpAddr = "2001:db8:0:ff::1".parse().unwrap();
        let _a = l.try_acquire(v6).unwrap();
        let _b = l
            .try_acquire("2001:db8:0:ff:ffff::2".parse().unwrap())
            .unwrap();
        assert!(
            l.try_acquire("2001:db8:0:00ff::3".parse().unwrap())
                .is_none(),
            "same /56"
        );
        assert!(
            l.try_acquire("2001:db8:0:100::1".parse().unwrap())
                .is_some(),
            "next /56"
        );
        drop(held);
        assert!(l.try_acquire("192.0.2.7".parse().unwrap()).is_some());
        // Prefix lengths 0: one client for everything.
        let all = ConnLimiter::per_prefix(10, 1, 0, 0);
        let _x = all.try_acquire("198.51.100.1".parse().unwrap()).unwrap();
        assert!(all.try_acquire("203.0.113.1".parse().unwrap()).is_none());
    }
}
