//! Prefetch, as unbound's `prefetch: yes`: a cached answer asked for when less than
//! [`PREFETCH_PERCENT`] % of its original lifetime is left is sent at once, and refreshed from
//! the authorities in the background, so that popular names are never missing from the
//! cache when their TTL runs out. Off by default (as in unbound).
//!
//! - One refresh per cache entry: the first hit in the last tenth of its lifetime claims the
//!   entry (`ResponseCache::answer_hit`); later hits are plain hits. The refreshed answer
//!   replaces the entry, with a new lifetime.
//! - At most [`ServiceConfig::max_prefetches`](super::ServiceConfig::max_prefetches) refreshes
//!   run at once; a hit due for prefetch when they are all busy is a plain hit (a later one
//!   may prefetch).
//! - The refresh bypasses the resolver's cache of raw responses for the answer chain
//!   ([`crate::Resolver::refresh`]; the zones' trust is taken from it as usual), and is kept
//!   only when it answered (NOERROR or NXDOMAIN): a failed refresh leaves the cached answer to
//!   expire at its time.
//! - Counted in `pqdns_resolver_prefetches_total`.
//!
//! The hit that claims the entry is deferred ([`pqdns_net::service::Reply::Defer`]) so the
//! refresh can be spawned from the service's shared handle; its answer is written from the
//! cache without waiting for anything.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pqdns_core::wire::Rcode;

use super::query::ClientQuery;
use super::{now, response, RecursiveService};

/// A cached answer is refreshed when less than this share of its original lifetime is left,
/// percent (unbound's prefetch threshold).
pub const PREFETCH_PERCENT: u32 = 10;
/// Default largest number of refreshes running at once.
pub const DEFAULT_MAX_PREFETCHES: usize = 16;

/// True if an entry stored at `stored` that expires at `expires` is due for a refresh at
/// `now`: still fresh, with less than [`PREFETCH_PERCENT`] % of its lifetime left.
pub(crate) fn due(stored: Instant, expires: Instant, now: Instant) -> bool {
    let lifetime = expires.saturating_duration_since(stored);
    let left = expires.saturating_duration_since(now);
    left > Duration::ZERO && left * 100 < lifetime * PREFETCH_PERCENT
}

/// The refreshes running, and how many were started.
#[derive(Debug)]
pub(crate) struct Prefetches {
    running: Arc<AtomicUsize>,
    max: usize,
    started: AtomicU64,
}

/// A running refresh's place among [`Prefetches::max`]; given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Prefetches {
    /// At most `max` refreshes at once.
    pub(crate) fn new(max: usize) -> Prefetches {
        Prefetches {
            running: Arc::new(AtomicUsize::new(0)),
            max,
            started: AtomicU64::new(0),
        }
    }

    /// A slot for one more refresh, unless `max` are running.
    pub(crate) fn try_slot(&self) -> Option<Slot> {
        self.running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(Arc::clone(&self.running)))
    }

    /// Refreshes started so far.
    pub(crate) fn started(&self) -> u64 {
        self.started.load(Ordering::Relaxed)
    }
}

impl RecursiveService {
    /// Refreshes the cached answer to `query` in a task of its own, holding `slot` until it
    /// ends; see the module documentation.
    pub(super) fn spawn_prefetch(self: &Arc<Self>, query: ClientQuery, slot: Slot) {
        let Some(prefetches) = &self.prefetches else {
            return;
        };
        prefetches.started.fetch_add(1, Ordering::Relaxed);
        let service = Arc::clone(self);
        tokio::spawn(async move {
            let _slot = slot;
            let qname = query.qname.to_name().to_lowercase();
            match service.resolver.refresh(&qname, query.qtype).await {
                Ok(answer) => {
                    service.metrics.resolution(&answer);
                    let written =
                        response::from_answer(&query, &answer, response::Names::Compressed);
                    let rcode = written.layout.rcode;
                    if rcode == Rcode::NOERROR || rcode == Rcode::NXDOMAIN {
                        service.cache.store(&query, written, now());
                    }
                }
                Err(e) => {
                    tracing::debug!(%qname, qtype = %query.qtype, error = %e, "prefetch failed");
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_in_the_last_tenth_of_the_lifetime() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let expires = at(100_000);
        assert!(!due(t0, expires, at(0)));
        assert!(!due(t0, expires, at(90_000)), "exactly 10 % left");
        assert!(due(t0, expires, at(90_001)));
        assert!(due(t0, expires, at(99_999)));
        assert!(
            !due(t0, expires, at(100_000)),
            "expired: a miss, not a prefetch"
        );
        // A lifetime of 0 is never due.
        assert!(!due(t0, t0, t0));
    }

    #[test]
    fn slots_are_bounded_and_given_back() {
        let p = Prefetches::new(2);
        let a = p.try_slot().expect("first");
        let _b = p.try_slot().expect("second");
        assert!(p.try_slot().is_none(), "at the bound");
        drop(a);
        assert!(p.try_slot().is_some(), "one given back");
    }
}
