//! Connection caps for stream listeners: in total and per client address (RFC 7766 §6.2.2
//! asks servers to limit both).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// Caps simultaneous connections on one listener, in total and per client address
/// (RFC 7766 §6.2.2 asks servers to limit both). Memory: one map entry per connected address,
/// so at most `max_total` entries.
#[derive(Debug)]
pub struct ConnLimiter {
    max_total: usize,
    max_per_ip: usize,
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
        Arc::new(ConnLimiter {
            max_total,
            max_per_ip,
            state: Mutex::new((0, HashMap::new())),
        })
    }

    /// Admits a connection from `ip`, or `None` if a cap is reached.
    pub fn try_acquire(self: &Arc<Self>, ip: IpAddr) -> Option<ConnPermit> {
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
}
