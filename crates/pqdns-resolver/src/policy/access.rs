//! Access control per client prefix, as unbound's `access-control` (`[[access-control]]`
//! tables): the longest prefix containing the client's address decides
//! ([`pqdns_net::acl::PrefixMap`]); an address no prefix contains is refused (RFC 5358 §4: no
//! open resolver).
//!
//! Without `[[access-control]]` tables the resolver keeps its allow-list (`--allow`, by default
//! 127.0.0.0/8 and ::1): every query from it is answered, with or without RD, as before
//! access-control tables existed; others get REFUSED.

use std::net::IpAddr;

use pqdns_net::acl::{AllowList, PrefixMap};

/// What a prefix's clients may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Recursion for queries with RD=1; queries with RD=0 are refused.
    Allow,
    /// As [`Action::Allow`], and queries with RD=0 are answered from the cache only (a miss
    /// gets SERVFAIL, without any query upstream).
    AllowSnoop,
    /// REFUSED with EDE 18 (Prohibited, RFC 8914 §4.19).
    Refuse,
    /// Dropped: no response at all.
    Deny,
}

impl std::str::FromStr for Action {
    type Err = String;

    fn from_str(text: &str) -> Result<Action, String> {
        match text {
            "allow" => Ok(Action::Allow),
            "allow-snoop" | "allow_snoop" => Ok(Action::AllowSnoop),
            "refuse" => Ok(Action::Refuse),
            "deny" => Ok(Action::Deny),
            _ => Err(format!(
                "action {text:?}: use \"allow\", \"allow-snoop\", \"refuse\" or \"deny\""
            )),
        }
    }
}

/// Who may ask what.
#[derive(Clone, Debug)]
pub(crate) enum AccessControl {
    /// The allow-list of `--allow` (no `[[access-control]]` table): answered whatever RD.
    AllowList(AllowList),
    /// `[[access-control]]` tables.
    Table(PrefixMap<Action>),
}

/// What to do with one query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Answer from the cache or resolve.
    Recurse,
    /// Answer from the cache only.
    CacheOnly,
    /// REFUSED, with this reason (EDE 18's EXTRA-TEXT).
    Refuse(&'static str),
    /// No response.
    Drop,
}

/// Why a client outside every allowed prefix is refused.
const NOT_OFFERED: &str = "recursion is not offered to this address";

impl AccessControl {
    /// The decision for a query from `client` with RD set or not.
    pub(crate) fn decide(&self, client: IpAddr, rd: bool) -> Decision {
        match self {
            AccessControl::AllowList(list) if list.allows(client) => Decision::Recurse,
            AccessControl::AllowList(_) => Decision::Refuse(NOT_OFFERED),
            AccessControl::Table(map) => match map.longest(client) {
                None | Some(Action::Refuse) => Decision::Refuse(NOT_OFFERED),
                Some(Action::Deny) => Decision::Drop,
                Some(Action::Allow | Action::AllowSnoop) if rd => Decision::Recurse,
                Some(Action::AllowSnoop) => Decision::CacheOnly,
                Some(Action::Allow) => {
                    Decision::Refuse("queries without RD are not answered for this address")
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unbound_semantics_per_longest_prefix() {
        let entry = |p: &str, a: &str| (p.parse().unwrap(), a.parse().unwrap());
        let table = AccessControl::Table(PrefixMap::new(vec![
            entry("127.0.0.0/8", "allow"),
            entry("127.0.0.2", "refuse"),
            entry("127.0.0.3", "deny"),
            entry("::1", "allow-snoop"),
        ]));
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(table.decide(ip("127.0.0.1"), true), Decision::Recurse);
        assert!(
            matches!(table.decide(ip("127.0.0.1"), false), Decision::Refuse(t) if t.contains("RD"))
        );
        assert_eq!(
            table.decide(ip("127.0.0.2"), true),
            Decision::Refuse(NOT_OFFERED)
        );
        assert_eq!(table.decide(ip("127.0.0.3"), true), Decision::Drop);
        assert_eq!(table.decide(ip("::1"), true), Decision::Recurse);
        assert_eq!(table.decide(ip("::1"), false), Decision::CacheOnly);
        assert_eq!(
            table.decide(ip("192.0.2.1"), true),
            Decision::Refuse(NOT_OFFERED)
        );
        let legacy = AccessControl::AllowList(AllowList::new(vec!["::1".parse().unwrap()]));
        assert_eq!(legacy.decide(ip("::1"), false), Decision::Recurse);
        assert_eq!(
            legacy.decide(ip("127.0.0.1"), true),
            Decision::Refuse(NOT_OFFERED)
        );
        assert!("open".parse::<Action>().is_err());
    }
}
