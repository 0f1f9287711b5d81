//! Negative trust anchors (RFC 7646): domains whose validation an operator turns off for a
//! while — a signed zone broken by its operator, which would otherwise be Bogus for every
//! user — so that names at and below them are treated as Insecure (RFC 7646 §2: "the
//! resolver MUST treat [the domain] as if it were unsigned"; no AD, no SERVFAIL). Each one
//! expires (RFC 7646 §8 asks for it: an NTA left in place hides the zone's repair and any
//! later attack); once expired, the domain is validated again.
//!
//! The binary starts with `--nta DOMAIN` (repeatable) and `--nta-lifetime SECONDS` from then
//! ([`DEFAULT_LIFETIME`], at most [`MAX_LIFETIME`], as BIND's `rndc nta`); the operator adds
//! and removes them at run time in the configuration file (`[[negative-trust-anchor]]` with
//! `name` and `until`, an absolute time at most [`MAX_LIFETIME`] ahead, applied on SIGHUP:
//! [`crate::policy`]); an embedder adds and removes them at run time
//! ([`crate::Resolver::add_negative_trust_anchor`],
//! [`crate::Resolver::remove_negative_trust_anchor`]), each change applying to the next
//! resolution. An expired anchor no longer applies at once; the binary also removes it then
//! ([`NegativeTrustAnchors::expire`]) and logs it.

use pqdns_core::Name;

/// Lifetime of a negative trust anchor by default, seconds (one hour, BIND's default).
pub const DEFAULT_LIFETIME: u32 = 3600;
/// Longest lifetime of a negative trust anchor, seconds (one week, BIND's limit).
pub const MAX_LIFETIME: u32 = 604_800;

/// Negative trust anchors: domains and when each stops applying.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NegativeTrustAnchors {
    /// (domain, expiry in UNIX seconds).
    entries: Vec<(Name, u64)>,
}

impl NegativeTrustAnchors {
    /// No negative trust anchors.
    pub fn new() -> NegativeTrustAnchors {
        NegativeTrustAnchors::default()
    }

    /// Adds `domain` until `expires` (UNIX seconds); one already there gets the new expiry.
    pub fn add(&mut self, domain: Name, expires: u64) {
        self.entries.retain(|(d, _)| *d != domain);
        self.entries.push((domain, expires));
    }

    /// Removes `domain`; false if it was not there.
    pub fn remove(&mut self, domain: &Name) -> bool {
        let before = self.entries.len();
        self.entries.retain(|(d, _)| d != domain);
        self.entries.len() != before
    }

    /// The domains and their expiry (UNIX seconds).
    pub fn entries(&self) -> impl Iterator<Item = (&Name, u64)> {
        self.entries.iter().map(|(d, e)| (d, *e))
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Removes the anchors expired at `now` (UNIX seconds) and returns them.
    pub fn expire(&mut self, now: u64) -> Vec<Name> {
        let (gone, kept) = std::mem::take(&mut self.entries)
            .into_iter()
            .partition(|(_, expires)| *expires <= now);
        self.entries = kept;
        gone.into_iter().map(|(d, _)| d).collect()
    }

    /// The earliest expiry (UNIX seconds), if any.
    pub fn next_expiry(&self) -> Option<u64> {
        self.entries.iter().map(|(_, e)| *e).min()
    }

    /// The closest negative trust anchor at or above `name` still in force at `now` (UNIX
    /// seconds).
    pub fn covering(&self, name: &Name, now: u64) -> Option<&Name> {
        self.entries
            .iter()
            .filter(|(d, expires)| now < *expires && name.is_subdomain_of(d))
            .max_by_key(|(d, _)| d.label_count())
            .map(|(d, _)| d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        s.parse().unwrap()
    }

    #[test]
    fn covers_the_domain_and_below_until_it_expires() {
        let mut nta = NegativeTrustAnchors::new();
        nta.add(n("example."), 1000);
        nta.add(n("sub.example."), 2000);
        assert_eq!(nta.covering(&n("www.example."), 999), Some(&n("example.")));
        assert_eq!(nta.covering(&n("example."), 999), Some(&n("example.")));
        assert_eq!(
            nta.covering(&n("a.sub.example."), 999),
            Some(&n("sub.example."))
        );
        assert_eq!(nta.covering(&n("www.example."), 1000), None, "expired");
        assert_eq!(
            nta.covering(&n("a.sub.example."), 1500),
            Some(&n("sub.example."))
        );
        assert_eq!(nta.covering(&n("example.com."), 0), None);
        assert_eq!(nta.covering(&n("xexample."), 0), None);
        // Added again: the new expiry; removed: gone.
        nta.add(n("example."), 3000);
        assert_eq!(nta.covering(&n("www.example."), 2500), Some(&n("example.")));
        assert_eq!(nta.entries().count(), 2);
        assert!(nta.remove(&n("example.")));
        assert!(!nta.remove(&n("example.")));
        assert_eq!(nta.covering(&n("www.example."), 0), None);
    }

    #[test]
    fn expire_removes_exactly_those_whose_end_has_come() {
        let mut nta = NegativeTrustAnchors::new();
        nta.add(n("a."), 100);
        nta.add(n("b."), 200);
        assert_eq!(nta.next_expiry(), Some(100));
        assert!(nta.expire(99).is_empty());
        assert_eq!(nta.expire(100), vec![n("a.")]);
        assert_eq!(nta.next_expiry(), Some(200));
        assert_eq!(nta.covering(&n("x.b."), 150), Some(&n("b.")));
        assert_eq!(nta.expire(1000), vec![n("b.")]);
        assert!(nta.is_empty() && nta.next_expiry().is_none());
    }
}
