//! Network transports around the answer engine: UDP, TCP (RFC 7766), DNS over TLS (RFC 7858)
//! and DNS over HTTPS (RFC 8484). All share the current zone catalog, swapped atomically on
//! reload, and stop when the shutdown signal changes.

pub mod doh;
pub mod dot;
pub mod tcp;
pub mod udp;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use crate::acl::AllowList;
use crate::catalog::Catalog;
use crate::fragment::Fragmenter;
use crate::metrics::Metrics;
use crate::settings::Settings;

/// State every transport reads.
#[derive(Debug)]
pub struct Shared {
    catalog: RwLock<Arc<Catalog>>,
    /// Our EDNS UDP payload size, in bytes.
    pub udp_payload: u16,
    /// How long a stream connection may be idle (and a TLS handshake may take).
    pub idle_timeout: Duration,
    /// Clients that may transfer zones over TCP and DoT (empty: nobody).
    pub axfr_allow: AllowList,
    /// Counters, when the metrics endpoint is configured (nothing is counted otherwise).
    pub metrics: Option<Metrics>,
    /// UDP fragmentation for clients that signal it; `None` when off.
    pub fragmenter: Option<Fragmenter>,
    /// Memory budget of each catalog's prepared answers, in bytes.
    answer_cache_bytes: usize,
}

impl Shared {
    /// Shared state serving `catalog` with the limits, allow-list and metrics of `settings`.
    pub fn new(catalog: Catalog, settings: &Settings) -> Shared {
        Shared {
            catalog: RwLock::new(Arc::new(
                catalog.with_answer_cache(settings.answer_cache_bytes),
            )),
            udp_payload: settings.udp_payload,
            idle_timeout: settings.idle_timeout,
            axfr_allow: settings.axfr_allow.clone(),
            metrics: settings.metrics.map(|_| Metrics::default()),
            fragmenter: Fragmenter::new(settings.fragmentation),
            answer_cache_bytes: settings.answer_cache_bytes,
        }
    }

    /// The catalog in force now (queries in flight keep the one they started with).
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the catalog (its prepared answers start empty).
    pub fn set_catalog(&self, catalog: Catalog) {
        let catalog = catalog.with_answer_cache(self.answer_cache_bytes);
        *self.catalog.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(catalog);
    }
}

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
