//! The set of zones served, and the choice of zone for a query name: the zone with the
//! longest origin that is an ancestor of (or equal to) the name (RFC 1034 §4.3.2 step 2).
//!
//! A DS query for a zone's apex is answered from the parent zone when we serve it too,
//! because the DS RRset belongs to the parent side of the cut (RFC 4035 §3.1.4.1).

use std::collections::BTreeMap;
use std::sync::Arc;

use pqdns_core::dnssec::mtl::{
    condense_full, expand_condensed, full_signature_tag, Format, SigTag, SigTags,
};
use pqdns_core::dnssec::nsec3::Nsec3Params;
use pqdns_core::dnssec::rrsig::Rrsig;
use pqdns_core::dnssec::SecAlg;
use pqdns_core::{Name, RrType, Zone};

use crate::answer_cache::AnswerCache;
use crate::cookie::Cookies;
use crate::identity::Identity;
use crate::journal::{Change, Journal};
use crate::online::OnlineSigning;

/// A zone ready to answer from, with its NSEC3 parameters if it is signed with NSEC3.
#[derive(Clone, Debug)]
pub struct ServedZone {
    /// The zone data (signed or not).
    pub zone: Zone,
    /// NSEC3 parameters from the apex NSEC3PARAM, if any (RFC 5155 §4).
    pub nsec3: Option<Nsec3Params>,
    /// The signed ladders of an MTL-signed zone: its full signatures at the apex.
    pub mtl_ladders: Vec<MtlLadder>,
    /// The differences that led to this version, for IXFR (empty for a zone loaded afresh).
    pub journal: Journal,
    /// A secondary zone not refreshed within its SOA EXPIRE time ([`crate::secondary`]):
    /// queries get SERVFAIL and transfers are refused.
    pub expired: bool,
    /// Where the zone comes from and who may update it (RFC 2136, [`crate::update`]);
    /// `None`: UPDATE is refused.
    pub updatable: Option<Arc<crate::update::Updatable>>,
    /// The keys of a zone signed online (`[signing] mode = "online"`, [`crate::online`]):
    /// its answers are signed when first needed, its denials are compact (RFC 9824).
    pub online: Option<Arc<crate::online::OnlineZone>>,
}

/// A full MTL signature at a zone's apex (the signer puts them on the SOA and DNSKEY RRSIGs,
/// draft-fregly-dnsop-slh-dsa-mtl-dnssec, draft-kaizer-dnsop-ml-dsa-mtl-dnssec), whose signed
/// ladder turns the condensed signatures of the same key and series into full ones. Its layout
/// is read from the bytes ([`Format::of_full`]), so the server needs no profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MtlLadder {
    /// RRSIG algorithm number.
    pub algorithm: SecAlg,
    /// Key tag of the signing DNSKEY.
    pub key_tag: u16,
    /// The full signature field.
    pub full: Vec<u8>,
    /// Its layout.
    pub format: Format,
    /// The SigTag of its signed ladder.
    pub tag: SigTag,
    /// The same signature condensed (its path without the signed ladder), sent instead of
    /// `full` to a validator that names the ladder by its SigTag (2026 layout only).
    pub condensed: Vec<u8>,
}

impl MtlLadder {
    /// The RRSIG RDATA `rrsig` in the form a validator that sent EDNS option 65050 with the
    /// SigTags `held` needs, or `None` to send it as stored:
    /// - a condensed MTL signature is made full by the matching ladder of `ladders` (same
    ///   algorithm, key tag and series, a rung for its path), unless that ladder is a 2026 one
    ///   that `held` names (the validator has it: condensed is enough);
    /// - a full 2026 apex signature (one of `ladders`) is condensed when `held` names its
    ///   ladder (draft-hdong-dnsop-ml-dsa-mtl-dnssec-sigtag-ext-00: condensed when a SigTag
    ///   matches, full otherwise), which keeps a negative answer's SOA RRSIG small.
    pub fn expand(ladders: &[MtlLadder], rrsig: &[u8], held: &SigTags) -> Option<Vec<u8>> {
        let sig = Rrsig::parse(rrsig)?;
        let head = &rrsig[..rrsig.len() - sig.signature.len()];
        if let Some(l) = ladders.iter().find(|l| l.full == sig.signature) {
            let condense = l.format == Format::V2026 && held.contains(&l.tag);
            return condense.then(|| [head, &l.condensed].concat());
        }
        let (ladder, full) = ladders
            .iter()
            .filter(|l| l.algorithm == sig.fields.algorithm && l.key_tag == sig.fields.key_tag)
            .find_map(|l| expand_condensed(sig.signature, &l.full).map(|f| (l, f)))?;
        if ladder.format == Format::V2026 && held.contains(&ladder.tag) {
            return None;
        }
        Some([head, &full].concat())
    }
}

impl ServedZone {
    /// Wraps a zone, reading its NSEC3PARAM and its MTL ladders.
    pub fn new(zone: Zone) -> ServedZone {
        let nsec3 = zone
            .rrset(&zone.origin, RrType::NSEC3PARAM)
            .and_then(|s| s.rdatas.first())
            .and_then(|rd| Nsec3Params::parse(rd))
            .map(|(params, _, _)| params);
        let mut mtl_ladders: Vec<MtlLadder> = Vec::new();
        let apex_sigs = zone
            .nodes
            .get(&zone.origin)
            .into_iter()
            .flat_map(|node| node.values())
            .flat_map(|set| &set.rrsigs);
        for rdata in apex_sigs {
            let Some(sig) = Rrsig::parse(rdata) else {
                continue;
            };
            let full = sig.signature;
            let (Some(format), Some(tag), Some(condensed)) = (
                Format::of_full(full),
                full_signature_tag(full),
                condense_full(full),
            ) else {
                continue;
            };
            if !mtl_ladders.iter().any(|l| l.full == full) {
                mtl_ladders.push(MtlLadder {
                    algorithm: sig.fields.algorithm,
                    key_tag: sig.fields.key_tag,
                    full: full.to_vec(),
                    format,
                    tag,
                    condensed,
                });
            }
        }
        ServedZone {
            zone,
            nsec3,
            mtl_ladders,
            journal: Journal::default(),
            expired: false,
            updatable: None,
            online: None,
        }
    }

    /// This zone as the next version of `served` (the same zone as served so far, if it was):
    /// its journal is `served`'s with the difference appended ([`Journal::with`]).
    pub fn after(mut self, served: Option<&ServedZone>) -> ServedZone {
        if let Some(old) = served {
            let change = Change::between(&old.zone, &self.zone);
            if !change.is_empty() {
                tracing::info!(
                    zone = %self.zone.origin, from = change.from, to = change.to,
                    deleted = change.deleted(), added = change.added(), bytes = change.bytes(),
                    "zone changed"
                );
            }
            self.journal = old.journal.with(change);
        }
        self
    }
}

/// Why a set of zones cannot be served together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// Two zones have the same origin.
    #[error("zone {0} is given twice")]
    Duplicate(Name),
}

/// The zones served, by origin, and the answers prepared from them.
#[derive(Debug, Default)]
pub struct Catalog {
    /// Shared with the catalogs made from this one ([`Catalog::rebuilt`]): a change of one
    /// zone copies that zone, not every zone (thousands, with run-time provisioning).
    zones: BTreeMap<Name, Arc<ServedZone>>,
    /// Responses already built from these zones (empty at first).
    pub(crate) answers: AnswerCache,
    /// What the server discloses about itself (NSID, CH TXT); nothing by default.
    pub identity: Identity,
    /// DNS cookie secrets ([`crate::cookie`]); `None` ignores COOKIE options.
    pub cookies: Option<Arc<Cookies>>,
    /// The signature cache and signing permits of online zones (the server's, shared by
    /// the catalogs it swaps in).
    pub(crate) online: Arc<OnlineSigning>,
}

impl Catalog {
    /// Builds a catalog.
    ///
    /// # Errors
    /// [`CatalogError::Duplicate`] if two zones share an origin.
    pub fn new(zones: impl IntoIterator<Item = ServedZone>) -> Result<Catalog, CatalogError> {
        let mut map = BTreeMap::new();
        for z in zones {
            let origin = z.zone.origin.clone();
            if map.insert(origin.clone(), Arc::new(z)).is_some() {
                return Err(CatalogError::Duplicate(origin));
            }
        }
        Ok(Catalog {
            zones: map,
            answers: AnswerCache::default(),
            identity: Identity::default(),
            cookies: None,
            online: Arc::default(),
        })
    }

    /// Sets the memory budget for prepared answers, in bytes (0: build every answer anew).
    pub fn with_answer_cache(mut self, max_bytes: usize) -> Catalog {
        self.answers = AnswerCache::new(max_bytes);
        self
    }

    /// Sets what the server discloses about itself ([`crate::identity`]).
    pub fn with_identity(mut self, identity: Identity) -> Catalog {
        self.identity = identity;
        self
    }

    /// Answers DNS cookies with `cookies` (shared by the catalogs a server reloads, so that
    /// cookies stay valid across reloads).
    pub fn with_cookies(mut self, cookies: Option<Arc<Cookies>>) -> Catalog {
        self.cookies = cookies;
        self
    }

    /// Signs the answers of online zones with `online` (shared by the catalogs a server swaps
    /// in, so that reloads keep cached signatures).
    pub fn with_online_signing(mut self, online: Arc<OnlineSigning>) -> Catalog {
        self.online = online;
        self
    }

    /// A new catalog of the same zones (prepared answers empty, identity and cookies unset,
    /// as `Authoritative::set_catalog` sets them), to change and swap in.
    pub fn rebuilt(&self) -> Catalog {
        Catalog {
            zones: self.zones.clone(),
            answers: AnswerCache::default(),
            identity: Identity::default(),
            cookies: None,
            online: Arc::default(),
        }
    }

    /// Adds `zone`, replacing the zone of the same origin.
    pub fn insert(&mut self, zone: ServedZone) {
        self.zones.insert(zone.zone.origin.clone(), Arc::new(zone));
    }

    /// Removes the zone whose apex is `origin` (a zone removed at run time,
    /// [`crate::provisioning`]); `None` if it is not served.
    pub fn remove(&mut self, origin: &Name) -> Option<ServedZone> {
        self.zones.remove(origin).map(Arc::unwrap_or_clone)
    }

    /// The zone whose apex is `origin`, to change before the catalog is served (copied first
    /// when another catalog shares it).
    pub fn zone_mut(&mut self, origin: &Name) -> Option<&mut ServedZone> {
        self.zones.get_mut(origin).map(Arc::make_mut)
    }

    /// A catalog of these zones with `zone` in place of the one of its origin (a dynamic
    /// update, [`crate::update`]); prepared answers empty.
    pub(crate) fn with_shared(&self, zone: Arc<ServedZone>) -> Catalog {
        let mut next = self.rebuilt();
        next.zones.insert(zone.zone.origin.clone(), zone);
        next
    }

    /// The zones, in canonical order of their origins.
    pub fn zones(&self) -> impl Iterator<Item = &ServedZone> {
        self.zones.values().map(|z| &**z)
    }

    /// The zone whose apex is `origin`, if served.
    pub fn zone(&self, origin: &Name) -> Option<&ServedZone> {
        self.zones.get(origin).map(|z| &**z)
    }

    /// The zone whose apex is `origin`, shared (a dynamic update's next version is made from
    /// it, [`crate::resign`]).
    pub(crate) fn shared(&self, origin: &Name) -> Option<Arc<ServedZone>> {
        self.zones.get(origin).cloned()
    }

    /// The zone to answer `qname`/`qtype` from, or `None` if we are not authoritative.
    pub fn find(&self, qname: &Name, qtype: RrType) -> Option<&ServedZone> {
        let mut best = None;
        let mut cur = Some(qname.clone());
        while let Some(name) = cur {
            if let Some(z) = self.zones.get(&name).map(|z| &**z) {
                let apex_ds = qtype == RrType::DS && name == *qname && !name.is_root();
                if !apex_ds {
                    return Some(z);
                }
                best.get_or_insert(z);
            }
            cur = name.parent();
        }
        best
    }
}

/// A catalog of one zone signed in memory (pqdns-test-support's `signed_zone`), for the unit
/// tests: pqdns-test-support's `signed_catalog` makes the `Catalog` of the other copy of this
/// crate that it links, a different type for them.
///
/// # Panics
/// As `signed_zone`: the zone text is fixed by the test.
#[cfg(test)]
pub(crate) fn signed_for_tests(
    origin: &Name,
    text: &str,
    algorithms: &[pqdns_core::dnssec::Algorithm],
    denial: pqdns_core::dnssec::sign::Denial,
) -> Catalog {
    let zone = pqdns_test_support::signed_zone(origin, text, algorithms, denial);
    Catalog::new([ServedZone::new(zone)]).expect("one zone")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqdns_core::zonefile::ZoneFileReader;

    pub(crate) fn zone(origin: &str, text: &str) -> Zone {
        let origin: Name = origin.parse().unwrap();
        let recs = ZoneFileReader::new(Some(origin.clone()), Some(300))
            .read_str(text, "t")
            .unwrap();
        Zone::from_records(origin, recs).unwrap()
    }

    #[test]
    fn longest_match_and_ds_from_parent() {
        let parent = ServedZone::new(zone("example.", "@ SOA ns hm 1 2 3 4 5\n"));
        let child = ServedZone::new(zone("sub.example.", "@ SOA ns hm 1 2 3 4 5\n"));
        let cat = Catalog::new([parent, child]).unwrap();
        let n = |s: &str| -> Name { s.parse().unwrap() };
        let origin = |z: Option<&ServedZone>| z.map(|z| z.zone.origin.to_string());
        assert_eq!(
            origin(cat.find(&n("a.SUB.example."), RrType::A)),
            Some("sub.example.".into())
        );
        assert_eq!(
            origin(cat.find(&n("sub.example."), RrType::A)),
            Some("sub.example.".into())
        );
        assert_eq!(
            origin(cat.find(&n("sub.example."), RrType::DS)),
            Some("example.".into())
        );
        assert_eq!(
            origin(cat.find(&n("b.example."), RrType::A)),
            Some("example.".into())
        );
        assert_eq!(origin(cat.find(&n("example.org."), RrType::A)), None);
        let dup = ServedZone::new(zone("example.", "@ SOA ns hm 1 2 3 4 5\n"));
        let again = ServedZone::new(zone("example.", "@ SOA ns hm 1 2 3 4 5\n"));
        assert!(Catalog::new([dup, again]).is_err());
    }
}
