//! Insecure domains, as unbound's `domain-insecure` and Knot Resolver's
//! `trust_anchors.set_insecure`: domains the operator declares unsigned for good, so that
//! the zones at and below them are Insecure (RFC 4035 §4.3: data the resolver has no
//! chain of trust for; no AD) whatever their parents' DS records or their own signatures say
//! — never Bogus, never SERVFAIL for a broken signature. For internal zones behind forward or
//! stub zones whose public counterparts are signed, or a signed zone whose operator cannot
//! be reached.
//!
//! The permanent, configured counterpart of negative trust anchors ([`crate::nta`], RFC
//! 7646), which expire. In the configuration file: each `[[domain-insecure]]` table's name,
//! and each `[[forward-zone]]` or `[[stub-zone]]` with `insecure = true`; replaced as a whole
//! when the file is read again (SIGHUP).

use pqdns_core::Name;

/// The insecure domains (lowercase, without repeats).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InsecureDomains {
    names: Vec<Name>,
}

impl InsecureDomains {
    /// The domains `names` (case and repeats do not matter).
    pub fn new(names: impl IntoIterator<Item = Name>) -> InsecureDomains {
        let mut names: Vec<Name> = names.into_iter().map(|n| n.to_lowercase()).collect();
        names.sort();
        names.dedup();
        InsecureDomains { names }
    }

    /// The domains.
    pub fn names(&self) -> &[Name] {
        &self.names
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The closest insecure domain at or above `name` (lowercase).
    pub fn covering(&self, name: &Name) -> Option<&Name> {
        self.names
            .iter()
            .filter(|d| name.is_subdomain_of(d))
            .max_by_key(|d| d.label_count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        s.parse().unwrap()
    }

    #[test]
    fn covers_the_domain_and_below_only() {
        let d =
            InsecureDomains::new([n("Corp.Example."), n("a.corp.example."), n("corp.example.")]);
        assert_eq!(d.names().len(), 2, "case and repeats folded");
        assert_eq!(d.covering(&n("corp.example.")), Some(&n("corp.example.")));
        assert_eq!(d.covering(&n("x.corp.example.")), Some(&n("corp.example.")));
        assert_eq!(
            d.covering(&n("b.a.corp.example.")),
            Some(&n("a.corp.example."))
        );
        assert_eq!(d.covering(&n("example.")), None);
        assert_eq!(d.covering(&n("xcorp.example.")), None);
        assert!(InsecureDomains::default().covering(&n("x.")).is_none());
    }
}
