//! Local zones, as unbound's `local-zone` and `local-data` (`[[local-zone]]` tables): names
//! the resolver answers itself, from records given in master-file presentation (RFC 1035
//! §5.1), without any query upstream and never with AD (the data is not validated; RFC 4035
//! §3.2.3 sets AD only for data the validator found Secure).
//!
//! Every local answer — data, NODATA, NXDOMAIN, REFUSED, redirected — has AA set: the
//! resolver is the authority for the local data (RFC 1035 §4.1.1: AA says "the responding
//! name server is an authority for the domain name in question section"), as unbound answers
//! its `local-zone` types (QR, AA and RA in every local answer, its REFUSED included).
//! Iterated and forwarded answers never have AA.
//!
//! The closest enclosing local zone of QNAME decides, by its type:
//! - every type first answers from its records: records of QTYPE (or a CNAME) owned by QNAME
//!   are the answer; a QNAME that owns other records, or has records below it (an empty
//!   non-terminal), gets NODATA;
//! - `static`: any other name gets NXDOMAIN;
//! - `refuse`: any other name gets REFUSED;
//! - `nxdomain`: any other name gets NXDOMAIN;
//! - `redirect`: every name at or below the zone is answered with the zone apex's records of
//!   QTYPE, with QNAME as their owner (NODATA when the apex has none of QTYPE).
//!
//! Negative answers carry the zone's SOA record, if one is given, in the authority section
//! (RFC 2308 §3).

use std::collections::HashMap;

use pqdns_core::wire::Rcode;
use pqdns_core::{Name, Record, RrType};

/// What a local zone answers for names without records of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LocalType {
    /// NXDOMAIN (NODATA for names that own other records).
    Static,
    /// REFUSED.
    Refuse,
    /// NXDOMAIN.
    Nxdomain,
    /// The apex's records, for every name at or below it.
    Redirect,
}

impl std::str::FromStr for LocalType {
    type Err = String;

    fn from_str(text: &str) -> Result<LocalType, String> {
        match text {
            "static" => Ok(LocalType::Static),
            "refuse" => Ok(LocalType::Refuse),
            "nxdomain" => Ok(LocalType::Nxdomain),
            "redirect" => Ok(LocalType::Redirect),
            _ => Err(format!(
                "type {text:?}: use \"static\", \"refuse\", \"nxdomain\" or \"redirect\""
            )),
        }
    }
}

/// One local zone: its type and records (owners lowercased, at or below the apex).
#[derive(Clone, Debug)]
pub(crate) struct LocalZone {
    kind: LocalType,
    records: Vec<Record>,
}

impl LocalZone {
    /// A zone of `kind` with `records`, whose owners must be at or below `apex` (and, for
    /// [`LocalType::Redirect`], at the apex).
    ///
    /// # Errors
    /// The first record that is not where it must be.
    pub(crate) fn new(
        apex: &Name,
        kind: LocalType,
        records: Vec<Record>,
    ) -> Result<LocalZone, String> {
        let mut kept = Vec::with_capacity(records.len());
        for mut r in records {
            r.owner = r.owner.to_lowercase();
            if !r.owner.is_subdomain_of(apex) {
                return Err(format!(
                    "record owner {} is outside the zone {apex}",
                    r.owner
                ));
            }
            if kind == LocalType::Redirect && r.owner != *apex {
                return Err(format!(
                    "record owner {}: a redirect zone's records are at its apex {apex}",
                    r.owner
                ));
            }
            kept.push(r);
        }
        Ok(LocalZone {
            kind,
            records: kept,
        })
    }
}

/// A local answer: RCODE and the answer and authority sections.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LocalAnswer {
    pub(crate) rcode: Rcode,
    pub(crate) answers: Vec<Record>,
    pub(crate) authority: Vec<Record>,
}

/// The local zones, by apex (lowercase).
#[derive(Clone, Debug, Default)]
pub(crate) struct LocalZones {
    zones: HashMap<Name, LocalZone>,
}

impl LocalZones {
    /// Adds the zone `apex`; false if it was there already.
    pub(crate) fn insert(&mut self, apex: Name, zone: LocalZone) -> bool {
        self.zones.insert(apex.to_lowercase(), zone).is_none()
    }

    /// True if there is no local zone.
    pub(crate) fn is_empty(&self) -> bool {
        self.zones.is_empty()
    }

    /// The answer for `qname` (lowercase) and `qtype` if a local zone holds `qname`.
    pub(crate) fn answer(&self, qname: &Name, qtype: RrType) -> Option<LocalAnswer> {
        let mut cur = Some(qname.clone());
        let (apex, zone) = loop {
            let name = cur?;
            if let Some((apex, zone)) = self.zones.get_key_value(&name) {
                break (apex, zone);
            }
            cur = name.parent();
        };
        let soa: Vec<Record> = zone
            .records
            .iter()
            .filter(|r| r.rtype == RrType::SOA && r.owner == *apex)
            .cloned()
            .collect();
        let wanted = |r: &Record| r.rtype == qtype || qtype == RrType::ANY;
        let answer = |rcode: Rcode, answers: Vec<Record>| LocalAnswer {
            rcode,
            authority: if answers.is_empty() {
                soa.clone()
            } else {
                Vec::new()
            },
            answers,
        };
        if zone.kind == LocalType::Redirect {
            let data = zone
                .records
                .iter()
                .filter(|r| wanted(r))
                .map(|r| Record {
                    owner: qname.clone(),
                    ..r.clone()
                })
                .collect();
            return Some(answer(Rcode::NOERROR, data));
        }
        let owned: Vec<&Record> = zone.records.iter().filter(|r| r.owner == *qname).collect();
        let mut data: Vec<Record> = owned
            .iter()
            .filter(|r| wanted(r))
            .map(|r| (*r).clone())
            .collect();
        if data.is_empty() && qtype != RrType::CNAME {
            data = owned
                .iter()
                .filter(|r| r.rtype == RrType::CNAME)
                .map(|r| (*r).clone())
                .collect();
        }
        if !data.is_empty() {
            return Some(answer(Rcode::NOERROR, data));
        }
        let exists = zone.records.iter().any(|r| r.owner.is_subdomain_of(qname));
        Some(match zone.kind {
            _ if exists => answer(Rcode::NOERROR, Vec::new()),
            LocalType::Refuse => LocalAnswer {
                rcode: Rcode::REFUSED,
                answers: Vec::new(),
                authority: Vec::new(),
            },
            _ => answer(Rcode::NXDOMAIN, Vec::new()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqdns_core::zonefile::ZoneFileReader;

    fn zone(apex: &str, kind: &str, text: &str) -> (Name, LocalZone) {
        let apex: Name = apex.parse().unwrap();
        let records = ZoneFileReader::new(Some(apex.clone()), Some(300))
            .read_str(text, "test")
            .unwrap();
        let z = LocalZone::new(&apex, kind.parse().unwrap(), records).unwrap();
        (apex, z)
    }

    #[test]
    fn each_type_answers_as_unbound() {
        let mut zones = LocalZones::default();
        for (apex, kind, text) in [
            (
                "home.arpa.",
                "static",
                "@ SOA ns hostmaster 1 3600 600 86400 60\nnas A 192.0.2.7\nx.y A 192.0.2.8\n",
            ),
            ("ads.example.", "refuse", "keep A 192.0.2.9\n"),
            ("gone.example.", "nxdomain", ""),
            ("portal.example.", "redirect", "@ A 192.0.2.10\n"),
        ] {
            let (apex, z) = zone(apex, kind, text);
            assert!(zones.insert(apex, z));
        }
        let ask = |q: &str, t: RrType| zones.answer(&q.parse().unwrap(), t).unwrap();
        let nas = ask("nas.home.arpa.", RrType::A);
        assert_eq!((nas.rcode, nas.answers.len()), (Rcode::NOERROR, 1));
        let nodata = ask("nas.home.arpa.", RrType::AAAA);
        assert_eq!((nodata.rcode, nodata.answers.len()), (Rcode::NOERROR, 0));
        assert_eq!(nodata.authority[0].rtype, RrType::SOA);
        let ent = ask("y.home.arpa.", RrType::A);
        assert_eq!((ent.rcode, ent.answers.len()), (Rcode::NOERROR, 0));
        assert_eq!(ask("nope.home.arpa.", RrType::A).rcode, Rcode::NXDOMAIN);
        assert_eq!(ask("x.ads.example.", RrType::A).rcode, Rcode::REFUSED);
        assert_eq!(ask("keep.ads.example.", RrType::A).answers.len(), 1);
        let gone = ask("a.b.gone.example.", RrType::A);
        assert_eq!((gone.rcode, gone.authority.len()), (Rcode::NXDOMAIN, 0));
        let redirected = ask("deep.er.portal.example.", RrType::A);
        assert_eq!(
            redirected.answers[0].owner,
            "deep.er.portal.example.".parse().unwrap()
        );
        assert_eq!(redirected.answers[0].rdata, vec![192, 0, 2, 10]);
        assert!(zones
            .answer(&"example.".parse().unwrap(), RrType::A)
            .is_none());
        assert!(LocalZone::new(
            &"portal.example.".parse().unwrap(),
            LocalType::Redirect,
            zone("portal.example.", "static", "www A 192.0.2.1\n")
                .1
                .records
        )
        .is_err());
    }
}
