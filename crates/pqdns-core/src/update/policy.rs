//! Who may update what (RFC 3007 §3, with the rules of BIND's `update-policy`): a zone's
//! `update_policy` is a list of rules, each
//!
//! ```text
//! grant|deny KEY name|subdomain|wildcard NAME [TYPE ...]
//! grant|deny KEY zonesub [TYPE ...]
//! ```
//!
//! - `KEY`: the TSIG key (RFC 8945) the UPDATE must be signed with;
//! - `name NAME`: the record's owner is NAME; `subdomain NAME`: NAME or a name below it;
//!   `wildcard *.NAME`: a name strictly below NAME (RFC 4592 §2.1.1 matching);
//!   `zonesub`: any name in the zone. Relative names are relative to the zone's origin;
//! - `TYPE ...`: the record types the rule covers; none (or `ANY`) covers every type but SOA
//!   and NS, which a rule must name. DNSSEC records the signer manages are never updatable
//!   (`super::SIGNER_TYPES`).
//!
//! Each update record is checked on its own; the first rule matching key, name and type
//! decides (`grant` or `deny`), and a record no rule matches is denied. An update with a
//! denied record is refused whole (REFUSED, RFC 3007 §3.3); a zone without rules refuses
//! every update.

use crate::name::Name;
use crate::rr::{Class, Record, RrType};

/// A zone's update policy: the rules in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpdatePolicy {
    rules: Vec<Rule>,
}

/// One `grant` or `deny` rule.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    grant: bool,
    /// The key name, lowercase.
    key: Name,
    names: Names,
    /// Types covered; empty: every type but SOA and NS.
    types: Vec<RrType>,
}

/// Which owner names a rule covers.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Names {
    Exact(Name),
    Subdomain(Name),
    /// Names strictly below this one (the parent of the `*` label).
    Below(Name),
}

impl UpdatePolicy {
    /// Parses the rules of the module's syntax; relative names are relative to `origin`.
    ///
    /// # Errors
    /// A message naming the rule and what is wrong in it.
    pub fn parse<S: AsRef<str>>(rules: &[S], origin: &Name) -> Result<UpdatePolicy, String> {
        let rules = rules
            .iter()
            .map(|r| parse_rule(r.as_ref(), origin).map_err(|e| format!("{:?}: {e}", r.as_ref())))
            .collect::<Result<_, _>>()?;
        Ok(UpdatePolicy { rules })
    }

    /// Whether there are no rules (every update refused).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The key names the rules mention, lowercase (each must be a configured TSIG key).
    pub fn keys(&self) -> impl Iterator<Item = &Name> {
        self.rules.iter().map(|r| &r.key)
    }

    /// Whether `key` may make every change of `updates` (the update section of one UPDATE).
    pub fn allows(&self, key: &Name, updates: &[Record]) -> bool {
        updates.iter().all(|rr| self.allows_record(key, rr))
    }

    fn allows_record(&self, key: &Name, rr: &Record) -> bool {
        // Deleting every RRset of a name (class ANY, type ANY) takes a rule for every type.
        let all_types = rr.class == Class::ANY && rr.rtype == RrType::ANY;
        self.rules
            .iter()
            .find(|rule| {
                rule.key == *key
                    && rule.names.cover(&rr.owner)
                    && if all_types {
                        rule.types.is_empty()
                    } else {
                        rule.covers_type(rr.rtype)
                    }
            })
            .is_some_and(|rule| rule.grant)
    }
}

impl Rule {
    fn covers_type(&self, rtype: RrType) -> bool {
        if self.types.is_empty() {
            return !matches!(rtype, RrType::SOA | RrType::NS);
        }
        self.types.contains(&rtype)
    }
}

impl Names {
    fn cover(&self, owner: &Name) -> bool {
        match self {
            Names::Exact(n) => owner == n,
            Names::Subdomain(n) => owner.is_subdomain_of(n),
            Names::Below(n) => owner != n && owner.is_subdomain_of(n),
        }
    }
}

fn parse_rule(text: &str, origin: &Name) -> Result<Rule, String> {
    let mut words = text.split_whitespace();
    let grant = match words.next() {
        Some("grant") => true,
        Some("deny") => false,
        _ => return Err("a rule starts with \"grant\" or \"deny\"".into()),
    };
    let key = words.next().ok_or("no key name")?;
    let key = Name::parse(key, Some(&Name::root()))
        .map_err(|e| format!("key name: {e}"))?
        .to_lowercase();
    let name = |words: &mut std::str::SplitWhitespace<'_>| -> Result<Name, String> {
        let text = words.next().ok_or("no NAME after the match kind")?;
        let name = Name::parse(text, Some(origin)).map_err(|e| format!("{text}: {e}"))?;
        if !name.is_subdomain_of(origin) {
            return Err(format!("{name} is outside the zone {origin}"));
        }
        Ok(name)
    };
    let names = match words.next() {
        Some("name") => Names::Exact(name(&mut words)?),
        Some("subdomain") => Names::Subdomain(name(&mut words)?),
        Some("wildcard") => {
            let pattern = name(&mut words)?;
            match pattern.parent().filter(|_| pattern.is_wildcard()) {
                Some(parent) => Names::Below(parent),
                None => return Err(format!("{pattern}: a wildcard NAME starts with \"*.\"")),
            }
        }
        Some("zonesub") => Names::Subdomain(origin.clone()),
        other => {
            return Err(format!(
                "match kind {other:?}: one of name, subdomain, wildcard, zonesub"
            ))
        }
    };
    let mut types = Vec::new();
    for word in words {
        let rtype = RrType::from_mnemonic(&word.to_ascii_uppercase())
            .ok_or_else(|| format!("unknown type {word:?}"))?;
        if rtype != RrType::ANY {
            types.push(rtype);
        }
    }
    Ok(Rule {
        grant,
        key,
        names,
        types,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        s.parse().unwrap()
    }

    fn rr(owner: &str, rtype: RrType, class: Class) -> Record {
        Record {
            owner: n(owner),
            rtype,
            class,
            ttl: 0,
            rdata: Vec::new(),
        }
    }

    #[test]
    fn first_matching_rule_decides_per_record() {
        let origin = n("example.com.");
        let policy = UpdatePolicy::parse(
            &[
                "deny acme-key name _acme-challenge.secret TXT",
                "grant acme-key subdomain _acme-challenge TXT",
                "grant host-key wildcard *.hosts.example.com. A AAAA",
                "grant admin name www",
                "grant admin zonesub NS",
            ],
            &origin,
        )
        .unwrap();
        let acme = n("ACME-KEY.");
        let ok = |key: &Name, r: Record| policy.allows(key, &[r]);
        let txt = |o: &str| rr(o, RrType::TXT, Class::IN);
        assert!(ok(&acme, txt("_acme-challenge.example.com.")));
        assert!(ok(&acme, txt("x._acme-challenge.example.com.")));
        assert!(
            !ok(&acme, txt("_acme-challenge.secret.example.com.")),
            "deny first"
        );
        assert!(!ok(&acme, txt("www.example.com.")), "outside the subdomain");
        assert!(!ok(
            &acme,
            rr("_acme-challenge.example.com.", RrType::A, Class::IN)
        ));
        assert!(
            !ok(&n("admin."), txt("_acme-challenge.example.com.")),
            "another key"
        );
        let host = n("host-key.");
        assert!(ok(
            &host,
            rr("a.b.hosts.example.com.", RrType::AAAA, Class::IN)
        ));
        assert!(
            !ok(&host, rr("hosts.example.com.", RrType::A, Class::IN)),
            "not the parent"
        );
        // No types: every type but SOA and NS; deleting a whole name takes such a rule.
        let admin = n("admin.");
        assert!(ok(&admin, rr("www.example.com.", RrType::MX, Class::IN)));
        assert!(ok(&admin, rr("www.example.com.", RrType::ANY, Class::ANY)));
        assert!(!ok(&admin, rr("www.example.com.", RrType::SOA, Class::IN)));
        assert!(ok(&admin, rr("sub.example.com.", RrType::NS, Class::IN)));
        assert!(!ok(
            &acme,
            rr("_acme-challenge.example.com.", RrType::ANY, Class::ANY)
        ));
        // One denied record refuses the whole update.
        assert!(!policy.allows(
            &acme,
            &[txt("_acme-challenge.example.com."), txt("www.example.com.")]
        ));
        assert!(UpdatePolicy::default().is_empty());
        assert!(!UpdatePolicy::default().allows(&acme, &[txt("_acme-challenge.example.com.")]));
    }

    #[test]
    fn bad_rules_are_named() {
        let origin = n("example.com.");
        for (rule, says) in [
            ("allow k name www", "grant"),
            ("grant", "no key"),
            ("grant k self www", "match kind"),
            ("grant k name", "no NAME"),
            ("grant k name www.other.", "outside the zone"),
            ("grant k wildcard www", "starts with"),
            ("grant k zonesub BOGUSTYPE", "unknown type"),
        ] {
            let e = UpdatePolicy::parse(&[rule], &origin).unwrap_err();
            assert!(e.contains(rule) && e.contains(says), "{rule}: {e}");
        }
    }
}
