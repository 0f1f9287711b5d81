//! Caps on things in progress, in total and per client: connections of a stream listener
//! (RFC 7766 §6.2.2 asks servers to limit both), and a resolver service's resolutions in
//! flight. One client is an address, or a prefix of addresses (a /24 or /56, as response-rate
//! limiting counts them), so that a host with many addresses counts once.
//!
//! **Idle connections give way under pressure.** A connection admitted with
//! [`ConnLimiter::admit`] is idle whenever it holds no [`ConnBusy`] guard (no query in progress);
//! when a cap is reached, the connection idle longest — of the newcomer's prefix if that
//! prefix is full, else of all — is evicted: its slot is freed at once and its task told to
//! close ([`ConnPermit::evicted`]), so the newcomer gets in. RFC 7766 §6.2.3:
//!
//! > servers MAY allow idle connections to remain open for longer periods as resources
//! > permit.
//!
//! and, the other way round, close them first when resources do not (as Knot DNS and unbound
//! do), so idle clients cannot hold a listener's every slot for the idle timeout. Until the
//! evicted connection has closed (at once for TCP and DoT, after an HTTP/2 GOAWAY for DoH) it
//! is open beyond the cap. Slots taken with [`ConnLimiter::try_acquire`] are never evicted.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio::sync::Notify;

/// Caps simultaneous slots (connections, resolutions), in total and per client address or
/// prefix. Memory: one map entry per client holding a slot, and one per connection admitted
/// with [`ConnLimiter::admit`], so at most 2 × `max_total` entries.
#[derive(Debug)]
pub struct ConnLimiter {
    max_total: usize,
    max_per_ip: usize,
    /// Prefix lengths that make one client: IPv4, IPv6 (32 and 128: per address).
    prefix: (u8, u8),
    /// Start of the idle clock ([`Slot::idle_since`]).
    epoch: Instant,
    state: Mutex<State>,
}

/// The counts, and the evictable connections.
#[derive(Debug, Default)]
struct State {
    total: usize,
    per_client: HashMap<IpAddr, usize>,
    /// Connections admitted with [`ConnLimiter::admit`] and not yet gone, by number.
    evictable: HashMap<u64, Arc<Slot>>,
    next: u64,
}

/// [`Slot::busy`] of a connection that has been evicted.
const EVICTED: usize = usize::MAX;

/// What an evictable connection shares with its limiter.
#[derive(Debug)]
struct Slot {
    /// The client (prefix) the slot counts for.
    client: IpAddr,
    /// Work in progress ([`ConnBusy`] guards alive), or [`EVICTED`]; 0 is idle.
    busy: AtomicUsize,
    /// Milliseconds from the limiter's epoch to when the connection last became idle.
    idle_since: AtomicU64,
    /// Told once, when the connection is evicted.
    evicted: Notify,
}

/// One admitted connection; dropping it frees the slot.
#[derive(Debug)]
pub struct ConnPermit {
    limiter: Arc<ConnLimiter>,
    ip: IpAddr,
    /// The connection's number and shared state, if it may be evicted when idle.
    slot: Option<(u64, Arc<Slot>)>,
}

/// Work in progress on a connection ([`ConnPermit::busy`]): while one exists, the connection
/// is not idle and is not evicted.
#[derive(Debug)]
#[must_use = "the connection is idle again when the guard is dropped"]
pub struct ConnBusy {
    slot: Option<Arc<Slot>>,
    limiter: Arc<ConnLimiter>,
}

/// Which cap refused a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Full {
    Total,
    Client,
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
            epoch: Instant::now(),
            state: Mutex::new(State::default()),
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

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Milliseconds since the limiter was made.
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Takes a slot for `client` (a prefix) in `state`, or says which cap is reached.
    fn take(&self, state: &mut State, client: IpAddr) -> Result<(), Full> {
        let mine = state.per_client.get(&client).copied().unwrap_or(0);
        if mine >= self.max_per_ip {
            return Err(Full::Client);
        }
        if state.total >= self.max_total {
            return Err(Full::Total);
        }
        *state.per_client.entry(client).or_insert(0) += 1;
        state.total += 1;
        Ok(())
    }

    /// Frees a slot of `client` (a prefix) in `state`.
    fn give_back(state: &mut State, client: IpAddr) {
        state.total -= 1;
        if let Some(n) = state.per_client.get_mut(&client) {
            *n -= 1;
            if *n == 0 {
                state.per_client.remove(&client);
            }
        }
    }

    /// Admits a connection (or another slot) from `ip`, or `None` if a cap is reached. The
    /// slot is never evicted.
    pub fn try_acquire(self: &Arc<Self>, ip: IpAddr) -> Option<ConnPermit> {
        let client = self.client(ip);
        self.take(&mut self.lock(), client).ok()?;
        Some(ConnPermit {
            limiter: Arc::clone(self),
            ip: client,
            slot: None,
        })
    }

    /// Admits a connection from `ip` that may be evicted while idle (see the module
    /// documentation). If a cap is reached, first evicts the connection idle longest of
    /// `ip`'s prefix (that prefix's cap) or of all (the total cap); `None` if none there is
    /// idle. The connection starts idle — a TLS handshake in progress counts as idle, since
    /// the client has asked nothing yet — and is busy while it holds a [`ConnBusy`] guard from
    /// [`ConnPermit::busy`].
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<ConnPermit> {
        let client = self.client(ip);
        let mut state = self.lock();
        if let Err(full) = self.take(&mut state, client) {
            let only = (full == Full::Client).then_some(client);
            if !Self::evict(&mut state, only) {
                return None;
            }
            self.take(&mut state, client).ok()?;
        }
        let slot = Arc::new(Slot {
            client,
            busy: AtomicUsize::new(0),
            idle_since: AtomicU64::new(self.now_ms()),
            evicted: Notify::new(),
        });
        let id = state.next;
        state.next += 1;
        state.evictable.insert(id, Arc::clone(&slot));
        Some(ConnPermit {
            limiter: Arc::clone(self),
            ip: client,
            slot: Some((id, slot)),
        })
    }

    /// Evicts the connection idle longest (of client `only`, if given): frees its slot and
    /// tells it to close. False if none is idle. Time: linear in the evictable connections.
    fn evict(state: &mut State, only: Option<IpAddr>) -> bool {
        loop {
            let victim = state
                .evictable
                .iter()
                .filter(|(_, s)| only.is_none_or(|c| s.client == c))
                .filter(|(_, s)| s.busy.load(Ordering::Acquire) == 0)
                .min_by_key(|(id, s)| (s.idle_since.load(Ordering::Relaxed), **id))
                .map(|(id, s)| (*id, Arc::clone(s)));
            let Some((id, slot)) = victim else {
                return false;
            };
            // It may have become busy since it was looked at: then it stays.
            let evicted = slot
                .busy
                .compare_exchange(0, EVICTED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
            if evicted {
                state.evictable.remove(&id);
                Self::give_back(state, slot.client);
                slot.evicted.notify_one();
                return true;
            }
        }
    }
}

impl ConnPermit {
    /// Marks work in progress (a query read and not yet answered) until the guard is
    /// dropped; `None` if the connection has been evicted and must close. Permits from
    /// [`ConnLimiter::try_acquire`] are never idle, and always get a guard.
    pub fn busy(&self) -> Option<ConnBusy> {
        let slot = match &self.slot {
            None => None,
            Some((_, slot)) => {
                let mut n = slot.busy.load(Ordering::Acquire);
                loop {
                    if n == EVICTED {
                        return None;
                    }
                    match slot.busy.compare_exchange_weak(
                        n,
                        n + 1,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => break,
                        Err(now) => n = now,
                    }
                }
                Some(Arc::clone(slot))
            }
        };
        Some(ConnBusy {
            slot,
            limiter: Arc::clone(&self.limiter),
        })
    }

    /// Completes when the connection has been evicted (never, for a permit from
    /// [`ConnLimiter::try_acquire`]); the connection should then close at once, or as soon
    /// as a graceful close allows.
    pub async fn evicted(&self) {
        match &self.slot {
            Some((_, slot)) => slot.evicted.notified().await,
            None => std::future::pending().await,
        }
    }
}

impl Drop for ConnBusy {
    fn drop(&mut self) {
        if let Some(slot) = &self.slot {
            // Before the count reaches 0, so an eviction never sees an old idle time.
            slot.idle_since
                .store(self.limiter.now_ms(), Ordering::Relaxed);
            // Never EVICTED here: a connection with a guard is not idle, so not evicted.
            slot.busy.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for ConnPermit {
    fn drop(&mut self) {
        let mut state = self.limiter.lock();
        if let Some((id, slot)) = &self.slot {
            if slot.busy.load(Ordering::Acquire) == EVICTED {
                // Its slot was given back when it was evicted.
                return;
            }
            state.evictable.remove(id);
        }
        ConnLimiter::give_back(&mut state, self.ip);
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
        assert_eq!(l.state.lock().unwrap().per_client.len(), 2);
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

    #[test]
    fn idle_connections_give_way_longest_idle_first() {
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        let l = ConnLimiter::per_prefix(3, 2, 24, 56);
        let first = l.admit(ip("192.0.2.1")).unwrap();
        let second = l.admit(ip("198.51.100.1")).unwrap();
        let third = l.admit(ip("203.0.113.1")).unwrap();
        let working = first.busy().unwrap();
        // Full: the connection idle longest goes, the busy one stays.
        let fourth = l.admit(ip("192.0.2.9")).unwrap();
        assert!(second.busy().is_none(), "evicted");
        assert!(third.busy().is_some());
        drop(second);
        assert_eq!(l.lock().total, 3, "an evicted slot counts once");
        // Nothing idle: refused.
        let _w = (third.busy().unwrap(), fourth.busy().unwrap());
        assert!(l.admit(ip("203.0.113.2")).is_none());
        drop((working, _w, first, third, fourth));
        assert_eq!(l.lock().total, 0);

        // Slots from try_acquire are never evicted.
        let held = l.try_acquire(ip("203.0.113.3")).unwrap();
        let _held2 = l.try_acquire(ip("198.51.100.3")).unwrap();
        let _a = l.admit(ip("192.0.2.4")).unwrap();
        assert!(l.admit(ip("192.0.2.5")).is_some(), "evicts the idle admit");
        assert!(l.admit(ip("192.0.2.6")).is_some());
        assert!(held.busy().is_some());
    }

    #[test]
    fn a_full_prefix_evicts_only_its_own_connections() {
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        let l = ConnLimiter::per_prefix(10, 2, 24, 56);
        let other = l.admit(ip("198.51.100.1")).unwrap(); // idle longest
        let a = l.admit(ip("192.0.2.1")).unwrap();
        let b = l.admit(ip("192.0.2.2")).unwrap();
        let _c = l.admit(ip("192.0.2.3")).unwrap();
        assert!(
            a.busy().is_none(),
            "the /24's own longest-idle connection gave way"
        );
        assert!(other.busy().is_some() && b.busy().is_some());
        let _busy = b.busy().unwrap();
        let _c_busy = _c.busy().unwrap();
        assert!(l.admit(ip("192.0.2.4")).is_none(), "the /24 is busy");
        assert!(l.admit(ip("192.0.3.4")).is_some());
    }

    #[tokio::test]
    async fn an_evicted_connection_is_told() {
        let l = ConnLimiter::new(1, 1);
        let a = l.admit("192.0.2.1".parse().unwrap()).unwrap();
        let wait = tokio::spawn(async move { a.evicted().await });
        let _b = l.admit("192.0.2.2".parse().unwrap()).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(5), wait)
            .await
            .unwrap()
            .unwrap();
    }
}
