//! QNAME minimisation (RFC 9156): while iterating, a server is sent only as much of the name
//! as it needs to refer onwards — one label more than the zone it serves, with QTYPE A
//! (RFC 9156 §2.1 allows any type there; A is what servers answer best) — never the whole
//! QNAME and QTYPE until the zone that holds the name is reached.
//!
//! After a minimised query for CHILD (RFC 9156 §3, steps 3–6):
//! - a referral: the delegation is followed and minimisation goes on from the new zone;
//! - NOERROR without a referral (data or NODATA: CHILD exists and is no zone cut): the same
//!   servers get the next, longer name;
//! - anything else (NXDOMAIN, an error RCODE): **relaxed mode** — the same servers get the full
//!   QNAME and QTYPE, and minimisation stops for the lookup. Some servers answer NXDOMAIN for
//!   an empty non-terminal or refuse type A at one; the full query works with them (this is
//!   the fallback unbound and Knot Resolver use by default).
//!
//! The number of queries is bounded as RFC 9156 §2.3 suggests: at most
//! [`MAX_MINIMISE_COUNT`] minimised queries per lookup, the first [`MINIMISE_ONE_LAB`] adding
//! one label each, the later ones spreading the remaining labels evenly over the rest; when
//! CHILD would be QNAME itself or one label short of it, the full query is sent.
//!
//! [`super::Config::qname_minimisation`] turns it off.

use pqdns_core::{Name, RrType};

/// Most minimised queries per lookup (RFC 9156 §2.3 MAX_MINIMISE_COUNT).
pub const MAX_MINIMISE_COUNT: usize = 10;
/// Minimised queries that add one label each before labels are added in bigger steps
/// (RFC 9156 §2.3 MINIMISE_ONE_LAB).
pub const MINIMISE_ONE_LAB: usize = 4;

/// One lookup's minimisation: what the servers have been told so far.
pub(super) struct Minimiser {
    on: bool,
    /// Minimised queries sent.
    sent: usize,
    /// The longest name known to exist or be a cut: the servers asked next are asked for a
    /// name below it.
    base: Name,
}

/// `name` cut to its last `labels` labels.
fn suffix(name: &Name, labels: usize) -> Name {
    let mut n = name.clone();
    for _ in labels..name.label_count() {
        n = n.parent().unwrap_or_else(Name::root);
    }
    n
}

impl Minimiser {
    /// Minimisation (if `on`) for a lookup starting at the servers of `zone`.
    pub(super) fn new(on: bool, zone: &Name) -> Minimiser {
        Minimiser {
            on,
            sent: 0,
            base: zone.clone(),
        }
    }

    /// The question to send next for (`qname`, `qtype`): (CHILD, A), or the full question.
    pub(super) fn question(&mut self, qname: &Name, qtype: RrType) -> (Name, RrType) {
        let known = self.base.label_count();
        let total = qname.label_count();
        if !self.on
            || self.sent >= MAX_MINIMISE_COUNT
            || !qname.is_subdomain_of(&self.base)
            || total <= known + 1
        {
            return (qname.clone(), qtype);
        }
        let add = if self.sent < MINIMISE_ONE_LAB {
            1
        } else {
            ((total - known) / (MAX_MINIMISE_COUNT - self.sent)).max(1)
        };
        if known + add >= total {
            return (qname.clone(), qtype);
        }
        self.sent += 1;
        (suffix(qname, known + add), RrType::A)
    }

    /// A referral to `cut`: the next name asked is below it.
    pub(super) fn referred(&mut self, cut: &Name) {
        self.base = cut.clone();
    }

    /// `child` exists and is not a zone cut: the next name asked is longer.
    pub(super) fn exists(&mut self, child: &Name) {
        self.base = child.clone();
    }

    /// Relaxed mode: the minimised query failed, the full question goes next.
    pub(super) fn stop(&mut self) {
        self.on = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        s.parse().unwrap()
    }

    #[test]
    fn one_label_at_a_time_then_the_full_question() {
        let q = n("www.example.com.");
        let mut m = Minimiser::new(true, &Name::root());
        assert_eq!(m.question(&q, RrType::AAAA), (n("com."), RrType::A));
        m.referred(&n("com."));
        assert_eq!(m.question(&q, RrType::AAAA), (n("example.com."), RrType::A));
        m.referred(&n("example.com."));
        // One label short of QNAME: the full question (RFC 9156 §3 step 3).
        assert_eq!(m.question(&q, RrType::AAAA), (q.clone(), RrType::AAAA));
        // Off: always the full question.
        let mut off = Minimiser::new(false, &Name::root());
        assert_eq!(off.question(&q, RrType::AAAA), (q.clone(), RrType::AAAA));
        // Relaxed fallback.
        let mut m = Minimiser::new(true, &Name::root());
        m.stop();
        assert_eq!(m.question(&q, RrType::MX), (q, RrType::MX));
    }

    #[test]
    fn a_long_name_costs_at_most_max_minimise_count_queries() {
        // 40 labels below the root, no zone cut anywhere: every minimised query finds a name
        // that exists. RFC 9156 §2.3: 4 single-label steps, then the remaining 36 labels over
        // 6 queries (6 labels each), then the full question.
        let labels: Vec<String> = (0..40).map(|i| format!("l{i}")).collect();
        let q = n(&format!("{}.", labels.join(".")));
        let mut m = Minimiser::new(true, &Name::root());
        let mut asked = Vec::new();
        loop {
            let (child, t) = m.question(&q, RrType::TXT);
            if t == RrType::TXT {
                assert_eq!(child, q);
                break;
            }
            asked.push(child.label_count());
            m.exists(&child);
            assert!(asked.len() <= MAX_MINIMISE_COUNT);
        }
        assert_eq!(asked, vec![1, 2, 3, 4, 10, 16, 22, 28, 34]);
    }
}
