//! Aggressive use of DNSSEC-validated cache (RFC 8198): NXDOMAIN and NODATA answers, and
//! answers expanded from wildcards, synthesised from NSEC and NSEC3 records (and wildcard
//! RRsets) an earlier resolution verified, without asking any server.
//!
//! - **What is kept** (RFC 8198 §5.1): the NSEC or NSEC3 RRsets of the denial proofs of
//!   Secure answers (negative answers and wildcard expansions), as the validator verified
//!   them, and the verified SOA of their zone. A proof resting on an NSEC3 opt-out span is not
//!   kept, nor is any NSEC3 record with the Opt-Out flag: its span may hide unsigned
//!   delegations, so it proves no name absent (RFC 5155 §9.2, RFC 8198 §5.2).
//! - **Wildcards** (RFC 8198 §5.3): the RRsets of Secure answers expanded from a wildcard are
//!   kept under the wildcard's name and type, with the NSEC/NSEC3 records of their expansion
//!   proof. A later name the kept records prove absent, with that wildcard at its closest
//!   encloser, gets the RRset expanded to it ([`VerifiedRRset::expanded_to`]); the expansion
//!   proof goes through the same checks, and [`conclude`] must find the answer Secure.
//! - **How it is found**: per zone, NSEC RRsets in a map ordered by owner name in canonical
//!   order (RFC 4034 §6.1) and NSEC3 RRsets in one ordered by hashed owner (RFC 5155 §3.3);
//!   the record covering a name is the one with the greatest key below it (or the last, which
//!   wraps around to the apex), a range lookup. A query walks at most the labels between its
//!   name and the zone, so synthesis costs O(labels · log records), not a scan.
//! - **What comes out**: the chosen records go through
//!   [`pqdns_core::dnssec::denial::prove`], the check a server's proof gets, and
//!   [`conclude`] must find the answer Secure; otherwise the query goes to the servers as
//!   usual. The answer is marked [`crate::Answer::synthesised`].
//! - **Lifetime** (RFC 8198 §5.4 as RFC 9077 §3 updates it): each record lives min(its TTL,
//!   the SOA's TTL, the SOA MINIMUM) seconds from when it was kept (a wildcard RRset and the
//!   records of its proof, when no SOA of the zone is known, their own TTL, which the RRSIG
//!   already caps); a synthesised answer carries what is left.
//! - **Memory**: bounded by [`super::Config::aggressive_nsec_bytes`] (0 turns synthesis
//!   off); when over it, the records kept longest ago go first.
//! - **Not synthesised**: QTYPE DS (it lives on the parent side of a cut), ANY, RRSIG, NSEC
//!   and NSEC3; names at or below a delegation point or DNAME the cached records show, about
//!   which the zone's records speak only for its own side (RFC 6840 §4.1).
//!
//! Owns the per-zone maps; the resolver consults it before asking for a response
//! ([`Aggressive::answer`]) and feeds it every Secure answer ([`Aggressive::learn`]).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pqdns_core::dnssec::denial::{prove, Claim, Coverage, VerifiedDenial};
use pqdns_core::dnssec::nsec3::{owner_hash, Nsec3Params, FLAG_OPT_OUT, HASH_SHA1};
use pqdns_core::dnssec::validate::{conclude, Status, VerifiedRRset};
use pqdns_core::message::Message;
use pqdns_core::name::NameRef;
use pqdns_core::rdata::read_type_bitmap;
use pqdns_core::wire::rdata::Soa;
use pqdns_core::wire::{Rcode, FLAG_AA, FLAG_QR};
use pqdns_core::{Name, RrType};

use super::lock;
use crate::answer::{Answer, AnswerRRset};

/// Memory for kept denial records by default, bytes ([`super::Config::aggressive_nsec_bytes`]).
pub const DEFAULT_BYTES: usize = 4 << 20;

/// Bytes charged per kept RRset besides its owner name, RDATA and RRSIGs (the entry, its key,
/// the map's node and its place in the eviction order).
const ENTRY_OVERHEAD: usize = 192;

/// A kept RRset and when it stops being usable.
struct Held {
    set: VerifiedRRset,
    expires: Instant,
    bytes: usize,
    /// Which store this is: an eviction-order entry names the store it was made for.
    seq: u64,
}

impl Held {
    fn live(&self, now: Instant) -> bool {
        now < self.expires
    }
}

/// Where a kept RRset is in its zone.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Key {
    Soa,
    Nsec(Name),
    Nsec3(Vec<u8>),
    /// A wildcard RRset, by the wildcard's name (`*.<closest encloser>`) and its type.
    Wildcard(Name, RrType),
}

/// A name as a byte string whose plain byte order is the canonical order of names (RFC 4034
/// §6.1): the labels right to left, each lowercased and ended by `00 00`, a zero octet inside
/// a label written `00 01` (so a label sorts before the longer labels it begins, and a name
/// before the names below it). The kept NSEC records are ordered by it: a range lookup then
/// compares bytes, not labels.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Canonical(Box<[u8]>);

impl Canonical {
    fn of(name: &Name) -> Canonical {
        Canonical(KeyBuf::of(name.as_wire()).as_slice().into())
    }
}

/// A [`Canonical`] key on the stack, for lookups: at most 255 octets of name make at most
/// 508 of key (127 one-octet labels, each a zero octet: 2 + 2).
struct KeyBuf {
    bytes: [u8; 512],
    len: usize,
}

impl KeyBuf {
    /// The key of the uncompressed wire name `wire` (checked by the caller).
    fn of(wire: &[u8]) -> KeyBuf {
        // Label starts, left to right (at most 127 labels in 255 octets).
        let mut starts = [0_u8; 128];
        let (mut count, mut pos) = (0, 0);
        while let Some(&len) = wire.get(pos).filter(|l| **l != 0) {
            starts[count] = pos as u8;
            count += 1;
            pos += 1 + usize::from(len);
        }
        let mut key = KeyBuf::empty();
        for &start in starts[..count].iter().rev() {
            let start = usize::from(start);
            let label = wire.get(start + 1..start + 1 + usize::from(wire[start]));
            for &b in label.unwrap_or_default() {
                match b {
                    0 => key.push(&[0, 1]),
                    b => key.push(&[b.to_ascii_lowercase()]),
                }
            }
            key.push(&[0, 0]);
        }
        key
    }

    fn empty() -> KeyBuf {
        KeyBuf {
            bytes: [0; 512],
            len: 0,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        self.bytes[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl std::borrow::Borrow<[u8]> for Canonical {
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

/// Where each label of the [`Canonical`] key `key` ends (after its terminator), from the
/// label below the root on: the keys of its ancestors are the prefixes ending there.
fn label_ends(key: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i + 1 < key.len() {
            let (b, next) = (key[i], key[i + 1]);
            i += if b == 0 { 2 } else { 1 };
            if b == 0 && next == 0 {
                return Some(i);
            }
        }
        None
    })
}

/// Labels two [`Canonical`] keys share from the root: the label count of the names' closest
/// common ancestor.
fn common_labels(a: &[u8], b: &[u8]) -> usize {
    label_ends(a)
        .take_while(|&end| b.get(..end) == Some(&a[..end]))
        .count()
}

/// One zone's kept records.
struct ZoneDenials {
    /// The zone's name (lowercase).
    name: Name,
    soa: Option<Held>,
    /// NSEC RRsets by owner, in canonical order.
    nsec: BTreeMap<Canonical, Held>,
    /// NSEC3 RRsets by the binary hash of their owner, for `params`.
    nsec3: BTreeMap<Vec<u8>, Held>,
    /// The NSEC3 chain's salt and iterations (Opt-Out cleared).
    params: Option<Nsec3Params>,
    /// RRsets verified as wildcard expansions, by wildcard name and type.
    wildcards: HashMap<(Name, RrType), Held>,
}

impl ZoneDenials {
    fn new(name: Name) -> ZoneDenials {
        ZoneDenials {
            name,
            soa: None,
            nsec: BTreeMap::new(),
            nsec3: BTreeMap::new(),
            params: None,
            wildcards: HashMap::new(),
        }
    }

    fn slot(&mut self, key: &Key) -> Option<&mut Held> {
        match key {
            Key::Soa => self.soa.as_mut(),
            Key::Nsec(n) => self.nsec.get_mut(&Canonical::of(n)),
            Key::Nsec3(h) => self.nsec3.get_mut(h),
            Key::Wildcard(n, t) => self.wildcards.get_mut(&(n.clone(), *t)),
        }
    }

    fn remove(&mut self, key: &Key) -> Option<Held> {
        match key {
            Key::Soa => self.soa.take(),
            Key::Nsec(n) => self.nsec.remove(&Canonical::of(n)),
            Key::Nsec3(h) => self.nsec3.remove(h),
            Key::Wildcard(n, t) => self.wildcards.remove(&(n.clone(), *t)),
        }
    }

    fn insert(&mut self, key: Key, held: Held) -> Option<Held> {
        match key {
            Key::Soa => self.soa.replace(held),
            Key::Nsec(n) => self.nsec.insert(Canonical::of(&n), held),
            Key::Nsec3(h) => self.nsec3.insert(h, held),
            Key::Wildcard(n, t) => self.wildcards.insert((n, t), held),
        }
    }

    fn is_empty(&self) -> bool {
        self.soa.is_none()
            && self.nsec.is_empty()
            && self.nsec3.is_empty()
            && self.wildcards.is_empty()
    }
}

/// Everything kept, and the order it was stored in.
#[derive(Default)]
struct State {
    /// By the zone's [`Canonical`] key: a name's zone is the kept key that is the longest
    /// prefix of its own at a label end.
    zones: HashMap<Canonical, ZoneDenials>,
    bytes: usize,
    /// (zone, key, seq) per store, oldest first; an entry whose seq no longer matches the
    /// held record's was replaced since and is skipped.
    order: VecDeque<(Name, Key, u64)>,
    next_seq: u64,
}

impl State {
    fn put(&mut self, zone: &Name, key: Key, set: VerifiedRRset, ttl: u32, now: Instant) {
        if ttl == 0 {
            return;
        }
        let bytes = ENTRY_OVERHEAD
            + zone.wire_len()
            + set.owner().wire_len()
            + set.rdatas().iter().map(Vec::len).sum::<usize>()
            + set.rrsigs().iter().map(Vec::len).sum::<usize>();
        let seq = self.next_seq;
        self.next_seq += 1;
        let held = Held {
            set,
            expires: now + Duration::from_secs(u64::from(ttl)),
            bytes,
            seq,
        };
        let old = self.zone_mut(zone).insert(key.clone(), held);
        self.bytes = self.bytes + bytes - old.map_or(0, |o| o.bytes);
        self.order.push_back((zone.clone(), key, seq));
    }

    /// Forgets the records stored longest ago until the rest weigh at most `max` bytes, and
    /// drops eviction-order entries of replaced records when they outnumber the records.
    fn evict(&mut self, max: usize) {
        while self.bytes > max {
            let Some((zone, key, seq)) = self.order.pop_front() else {
                break;
            };
            self.forget(&zone, &key, Some(seq));
        }
        let held: usize = self
            .zones
            .values()
            .map(|z| {
                usize::from(z.soa.is_some()) + z.nsec.len() + z.nsec3.len() + z.wildcards.len()
            })
            .sum();
        if self.order.len() > 2 * held + 64 {
            let zones = &mut self.zones;
            self.order.retain(|(zone, key, seq)| {
                zones
                    .get_mut(&Canonical::of(zone))
                    .and_then(|z| z.slot(key))
                    .is_some_and(|h| h.seq == *seq)
            });
        }
    }

    /// Removes the record at (`zone`, `key`) (only if it is the store `seq`, when given).
    fn forget(&mut self, zone: &Name, key: &Key, seq: Option<u64>) {
        let zone = Canonical::of(zone);
        let Some(z) = self.zones.get_mut(&zone) else {
            return;
        };
        if seq.is_some_and(|s| z.slot(key).is_none_or(|h| h.seq != s)) {
            return;
        }
        if *key == Key::Soa {
            // Without its SOA a zone's records answer nothing.
            let all = z.soa.iter().chain(z.nsec.values()).chain(z.nsec3.values());
            let all = all.chain(z.wildcards.values());
            self.bytes -= all.map(|h| h.bytes).sum::<usize>();
            self.zones.remove(&zone);
            return;
        }
        if let Some(h) = z.remove(key) {
            self.bytes -= h.bytes;
        }
        if z.is_empty() {
            self.zones.remove(&zone);
        }
    }

    /// `zone`'s kept records, made empty if there are none.
    fn zone_mut(&mut self, zone: &Name) -> &mut ZoneDenials {
        self.zones
            .entry(Canonical::of(zone))
            .or_insert_with(|| ZoneDenials::new(zone.clone()))
    }

    /// Keeps `zone`'s NSEC3 chain parameters; a change (a new salt or iteration count)
    /// forgets the records hashed with the old ones.
    fn nsec3_params(&mut self, zone: &Name, params: Nsec3Params) {
        let z = self.zone_mut(zone);
        if z.params.as_ref() == Some(&params) {
            return;
        }
        let old: Vec<Key> = z.nsec3.keys().cloned().map(Key::Nsec3).collect();
        z.params = Some(params);
        for key in old {
            self.forget(zone, &key, None);
        }
    }
}

/// The aggressive NSEC/NSEC3 cache of one resolver.
pub(super) struct Aggressive {
    state: Mutex<State>,
    max_bytes: usize,
}

/// min(SOA TTL, SOA MINIMUM) of a verified SOA RRset (RFC 2308 §5, RFC 9077 §3).
fn negative_ttl(soa: &VerifiedRRset) -> Option<u32> {
    let minimum = Soa::parse(soa.rdatas().first()?)?.minimum;
    Some(soa.ttl().min(minimum))
}

/// The types an NSEC or NSEC3 RRset's (first) record lists.
fn types(set: &VerifiedRRset) -> Vec<RrType> {
    let Some(rdata) = set.rdatas().first() else {
        return Vec::new();
    };
    let bitmap = if set.rtype() == RrType::NSEC {
        Name::read_uncompressed(rdata)
            .ok()
            .and_then(|(_, used)| rdata.get(used..))
    } else {
        Nsec3Params::parse(rdata).and_then(|(_, _, rest)| {
            let len = usize::from(*rest.first()?);
            rest.get(1 + len..)
        })
    };
    bitmap.and_then(read_type_bitmap).unwrap_or_default()
}

/// True if the types show a zone cut (NS without SOA) or a DNAME: the zone's records say
/// nothing about the names below, nor about the types the child holds at the cut.
fn is_cut(types: &[RrType]) -> bool {
    (types.contains(&RrType::NS) && !types.contains(&RrType::SOA)) || types.contains(&RrType::DNAME)
}

/// The live NSEC entry at the [`Canonical`] key `key`, else the one covering it (as
/// [`covering`]), with its key: one range lookup. `None` when that entry has expired.
fn at_or_covering<'m>(
    map: &'m BTreeMap<Canonical, Held>,
    key: &[u8],
    now: Instant,
) -> Option<(&'m [u8], &'m Held)> {
    let (k, h) = map
        .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
        .next_back()
        .or_else(|| map.iter().next_back())?;
    h.live(now).then_some((&k.0, h))
}

/// The live entry covering `key`: the greatest below it, else the last (the one wrapping to
/// the apex).
fn covering<'m, K, Q>(map: &'m BTreeMap<K, Held>, key: &Q, now: Instant) -> Option<&'m Held>
where
    K: Ord + std::borrow::Borrow<Q>,
    Q: Ord + ?Sized,
{
    map.range::<Q, _>((Bound::Unbounded, Bound::Excluded(key)))
        .next_back()
        .or_else(|| map.iter().next_back())
        .map(|(_, h)| h)
        .filter(|h| h.live(now))
}

/// The kept records that prove a name absent, or a type absent at it (NXDOMAIN or NODATA),
/// and how they prove it: two queries with equal keys get the same synthesised response but
/// for the question (RFC 8198 §5), so a service may keep that response once written
/// ([`crate::service`]) and answer the next name of the span by splicing its question in.
///
/// Made only after the checks that make this true for each name: the records are live, the
/// covering NSEC (or NSEC3, for the next closer name) covers the name itself in canonical
/// (hash) order, no cut or DNAME above it, and no kept wildcard RRset that would expand to it.
/// Everything else the proof of [`pqdns_core::dnssec::denial::prove`] looks at follows from
/// the records and the closest encloser, which the key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct DenialProof {
    /// The records' store numbers (unique for the life of the cache, so a record replaced or
    /// forgotten makes a new key), [`NO_RECORD`] in unused places.
    records: [u64; 3],
    /// The closest encloser (RFC 4035 §5.4, RFC 5155 §7.2.1) by its label count, and for NSEC
    /// whether it is an ancestor of the covering record's owner (else of its next name): with
    /// the covering record, that names it. Zero for an exact match (NODATA at the name).
    encloser: (usize, bool),
    /// The name itself has a record (NODATA at it).
    exact: bool,
    /// NSEC: the name is an ancestor of the covering record's next name, an empty
    /// non-terminal (RFC 8198 §5.2 NODATA); else it does not exist.
    empty_non_terminal: bool,
    qtype: RrType,
}

/// An unused place in [`DenialProof::records`].
const NO_RECORD: u64 = u64::MAX;

/// The records a proof for `qname` would use, whether `qname` itself has a record, and the
/// closest encloser and empty non-terminal as [`DenialProof`] holds them.
struct Chosen<'a> {
    sets: Vec<&'a Held>,
    exact: bool,
    encloser: (usize, bool),
    empty_non_terminal: bool,
}

impl Chosen<'_> {
    fn push<'a>(sets: &mut Vec<&'a Held>, h: Option<&'a Held>) {
        if let Some(h) = h {
            if !sets.iter().any(|s| s.seq == h.seq) {
                sets.push(h);
            }
        }
    }

    /// The key of the proof these records give for `qtype`.
    fn proof(&self, qtype: RrType) -> DenialProof {
        let mut records = [NO_RECORD; 3];
        for (slot, h) in records.iter_mut().zip(&self.sets) {
            *slot = h.seq;
        }
        DenialProof {
            records,
            encloser: self.encloser,
            exact: self.exact,
            empty_non_terminal: self.empty_non_terminal,
            qtype,
        }
    }
}

/// True if the NSEC or NSEC3 span from `owner` to `next` covers `name` (strictly between, in
/// canonical or hash order; the last span wraps around to the first: RFC 4034 §4.1.1, RFC
/// 5155 §3.1.7).
fn spans<T: Ord + ?Sized>(owner: &T, next: &T, name: &T) -> bool {
    if owner < next {
        owner < name && name < next
    } else {
        owner < name || name < next
    }
}

/// NSEC records for the name whose [`Canonical`] key is `key` in `z`: the one at it (NODATA),
/// else the one covering it and the one at or covering the wildcard of the closest encloser it
/// implies. `None` when the name or one between the zone and it is a cut or DNAME.
fn choose_nsec<'a>(
    zone: &Name,
    z: &'a ZoneDenials,
    key: &[u8],
    now: Instant,
) -> Option<Chosen<'a>> {
    let (found_key, found) = at_or_covering(&z.nsec, key, now)?;
    let exact = found_key == key;
    if exact && is_cut(&types(&found.set)) {
        return None;
    }
    // The names between the zone and qname: a cut or DNAME there hides qname.
    let labels = label_ends(key).count();
    let zone_labels = zone.label_count();
    for end in label_ends(key)
        .skip(zone_labels)
        .take(labels.saturating_sub(zone_labels + 1))
    {
        if let Some(h) = z.nsec.get(&key[..end]).filter(|h| h.live(now)) {
            if is_cut(&types(&h.set)) {
                return None;
            }
        }
    }
    let mut sets = vec![found];
    if exact {
        return Some(Chosen {
            sets,
            exact: true,
            encloser: (0, false),
            empty_non_terminal: false,
        });
    }
    let (owner, cover) = (found_key, found);
    let next = cover
        .set
        .rdatas()
        .first()
        .and_then(|r| NameRef::read(r).ok())?;
    let next = KeyBuf::of(next.0.as_wire());
    let next = next.as_slice();
    if !spans(owner, next, key) {
        // A gap in what is kept: the record after this one is not held.
        return None;
    }
    // The closest encloser: the longest ancestor of qname that is an ancestor of the covering
    // NSEC's owner or next name (RFC 4035 §5.4).
    let with_owner = common_labels(key, owner);
    let with_next = common_labels(key, next);
    let ce = with_owner.max(with_next).min(labels.checked_sub(1)?);
    let encloser = (ce, with_owner >= ce);
    // `*.<closest encloser>`: the encloser's key (its first `ce` labels), then `*`.
    let end = label_ends(key).take(ce).last().unwrap_or(0);
    let mut wildcard = KeyBuf::empty();
    wildcard.push(&key[..end]);
    wildcard.push(b"*\0\0");
    let at_wildcard = at_or_covering(&z.nsec, wildcard.as_slice(), now);
    Chosen::push(&mut sets, at_wildcard.map(|(_, h)| h));
    Some(Chosen {
        sets,
        exact: false,
        encloser,
        empty_non_terminal: with_next == labels,
    })
}

/// NSEC3 records for `qname` in `z`: the one matching it (NODATA), else the closest encloser
/// proof (RFC 5155 §7.2.1: the record matching the closest encloser, the one covering the
/// next closer name) and the one matching or covering the wildcard at the closest encloser.
/// `None` when the closest encloser (or `qname`) is a cut or DNAME.
fn choose_nsec3<'a>(
    zone: &Name,
    z: &'a ZoneDenials,
    qname: &Name,
    now: Instant,
) -> Option<Chosen<'a>> {
    let params = z.params.as_ref()?;
    let matching = |n: &Name| {
        z.nsec3
            .get(params.hash(n).as_slice())
            .filter(|h| h.live(now))
    };
    let mut sets = Vec::new();
    if let Some(h) = matching(qname) {
        if is_cut(&types(&h.set)) {
            return None;
        }
        Chosen::push(&mut sets, Some(h));
        return Some(Chosen {
            sets,
            exact: true,
            encloser: (0, false),
            empty_non_terminal: false,
        });
    }
    let mut next_closer = qname.clone();
    let mut cur = qname.parent();
    let (ce, ce_record) = loop {
        let c = cur?;
        if !c.is_subdomain_of(zone) {
            return None;
        }
        if let Some(h) = matching(&c) {
            break (c, h);
        }
        next_closer = c.clone();
        cur = c.parent();
    };
    if ce != *zone && is_cut(&types(&ce_record.set)) {
        return None;
    }
    Chosen::push(&mut sets, Some(ce_record));
    let hash = params.hash(&next_closer).to_vec();
    let cover = covering(&z.nsec3, &hash, now)?;
    let owner = owner_hash(cover.set.owner())?;
    let next = cover.set.rdatas().first().and_then(|r| {
        let (_, _, rest) = Nsec3Params::parse(r)?;
        rest.get(1..1 + usize::from(*rest.first()?))
    })?;
    if !spans(owner.as_slice(), next, hash.as_slice()) {
        // A gap in what is kept: the record after this one is not held.
        return None;
    }
    Chosen::push(&mut sets, Some(cover));
    let wildcard = ce.prepend_label(b"*").ok()?;
    let hash = params.hash(&wildcard).to_vec();
    Chosen::push(
        &mut sets,
        matching(&wildcard).or_else(|| covering(&z.nsec3, &hash, now)),
    );
    Some(Chosen {
        sets,
        exact: false,
        encloser: (ce.label_count(), false),
        empty_non_terminal: false,
    })
}

impl Aggressive {
    /// A cache of at most `max_bytes` of denial records (0: off).
    pub(super) fn new(max_bytes: usize) -> Aggressive {
        Aggressive {
            state: Mutex::new(State::default()),
            max_bytes,
        }
    }

    /// Forgets every kept record: for a change of what validation concludes (a new negative
    /// trust anchor or insecure domain), after which records validated under the old rules
    /// must not make Secure answers. Store numbers go on from where they were, so a
    /// [`DenialProof`] made before never matches a record kept after.
    pub(super) fn clear(&self) {
        let mut st = lock(&self.state);
        let next_seq = st.next_seq;
        *st = State {
            next_seq,
            ..State::default()
        };
    }

    /// Keeps the NSEC/NSEC3 records of `answer`'s denial proofs if it is Secure, with their
    /// zone's SOA (from this answer or kept earlier).
    pub(super) fn learn(&self, answer: &Answer, now: Instant) {
        if self.max_bytes == 0 || !answer.status().is_secure() || answer.denials().is_empty() {
            return;
        }
        let mut st = lock(&self.state);
        for d in answer.denials() {
            if *d.coverage() != Coverage::Complete {
                continue;
            }
            let zone = d.zone().to_lowercase();
            let soa = answer.authority().iter().find_map(|a| match a {
                AnswerRRset::Secure(v) if v.rtype() == RrType::SOA && *v.owner() == zone => Some(v),
                _ => None,
            });
            let kept = st
                .zones
                .get(&Canonical::of(&zone))
                .and_then(|z| z.soa.as_ref())
                .filter(|h| h.live(now))
                .map(|h| &h.set);
            let expansion = match d.claim() {
                Claim::Expanded { source } => Some(source),
                _ => None,
            };
            let limit = match (soa.or(kept).and_then(negative_ttl), expansion) {
                (Some(limit), _) => limit,
                (None, Some(_)) => u32::MAX,
                (None, None) => continue,
            };
            if let Some(source) = expansion {
                for a in answer.answers() {
                    let AnswerRRset::Secure(v) = a else {
                        continue;
                    };
                    if v.from_wildcard()
                        && v.owner() == d.name()
                        && v.signed_owner().parent().as_ref() == Some(source)
                    {
                        let key = Key::Wildcard(v.signed_owner().to_lowercase(), v.rtype());
                        st.put(&zone, key, v.clone(), v.ttl(), now);
                    }
                }
            }
            for set in d.rrsets() {
                let key = match set.rtype() {
                    RrType::NSEC => Key::Nsec(set.owner().to_lowercase()),
                    RrType::NSEC3 => {
                        let Some(first) = set.rdatas().first() else {
                            continue;
                        };
                        let Some((mut params, HASH_SHA1, _)) = Nsec3Params::parse(first) else {
                            continue;
                        };
                        let opt_out = set
                            .rdatas()
                            .iter()
                            .any(|r| r.get(1).is_none_or(|f| f & FLAG_OPT_OUT != 0));
                        let Some(hash) = owner_hash(set.owner()) else {
                            continue;
                        };
                        if opt_out {
                            continue;
                        }
                        params.opt_out = false;
                        st.nsec3_params(&zone, params);
                        Key::Nsec3(hash)
                    }
                    _ => continue,
                };
                st.put(&zone, key, set.clone(), set.ttl().min(limit), now);
            }
            // The SOA last: eviction takes the oldest first, and the zone's records go with
            // it.
            if let Some(soa) = soa {
                st.put(&zone, Key::Soa, soa.clone(), limit, now);
            }
        }
        st.evict(self.max_bytes);
    }

    /// A Secure NXDOMAIN or NODATA answer for (`qname`, `qtype`) proven by kept records of
    /// the closest zone holding `qname`, or a wildcard expansion they prove, if they prove one.
    pub(super) fn answer(&self, qname: &Name, qtype: RrType, now: Instant) -> Option<Answer> {
        self.answer_with_proof(qname, qtype, now).map(|(a, _)| a)
    }

    /// The key of the NXDOMAIN or NODATA proof [`Aggressive::answer`] would give for
    /// (`qname`, `qtype`) at `now`, without building the answer: the records are chosen and
    /// checked, the proof is not run again. `None` when the kept records prove no such
    /// answer, or when `qname` would get a wildcard expansion.
    pub(super) fn proof(&self, qname: &Name, qtype: RrType, now: Instant) -> Option<DenialProof> {
        if !self.answers(qtype) {
            return None;
        }
        let key = KeyBuf::of(qname.as_wire());
        let st = lock(&self.state);
        let z = zone_of(&st, key.as_slice())?;
        // The NSEC path works on the key (lowercase); wildcards and NSEC3 on the name.
        let lower = (z.params.is_some() || !z.wildcards.is_empty()).then(|| qname.to_lowercase());
        let qname = lower.as_ref().unwrap_or(qname);
        if expansion(&z.name, z, qname, qtype, now).is_some() {
            return None;
        }
        let (_, chosen) = denial_records(z, qname, key.as_slice(), now)?;
        Some(chosen.proof(qtype))
    }

    /// As [`Aggressive::answer`], with the key of the NXDOMAIN or NODATA proof the answer rests
    /// on ([`Aggressive::proof`]; `None` for a wildcard expansion), found under the same lock.
    pub(super) fn answer_with_proof(
        &self,
        qname: &Name,
        qtype: RrType,
        now: Instant,
    ) -> Option<(Answer, Option<DenialProof>)> {
        if !self.answers(qtype) {
            return None;
        }
        let qname = qname.to_lowercase();
        let st = lock(&self.state);
        let key = KeyBuf::of(qname.as_wire());
        let z = zone_of(&st, key.as_slice())?;
        let zone = &z.name;
        let found = expansion(zone, z, &qname, qtype, now);
        if let Some(expanded) = found.and_then(|f| expand(zone, &qname, qtype, &f, now)) {
            return Some((expanded, None));
        }
        let (soa, chosen) = denial_records(z, &qname, key.as_slice(), now)?;
        let proof = chosen.proof(qtype);
        let expires = chosen
            .sets
            .iter()
            .map(|h| h.expires)
            .fold(soa.expires, Instant::min);
        let left = u32::try_from(expires.saturating_duration_since(now).as_secs()).ok()?;
        if left == 0 {
            return None;
        }
        let sets: Vec<VerifiedRRset> = chosen
            .sets
            .iter()
            .map(|h| h.set.clone().with_ttl_at_most(left))
            .collect();
        let soa = soa.set.clone().with_ttl_at_most(left);
        let exact = chosen.exact;
        let zone = zone.clone();
        drop(st);
        let nodata = prove(&zone, &qname, Claim::NoData(qtype), &sets).ok();
        let (rcode, denial) = match nodata {
            Some(d) => (Rcode::NOERROR, d),
            None if !exact => (
                Rcode::NXDOMAIN,
                prove(&zone, &qname, Claim::NxDomain, &sets).ok()?,
            ),
            None => return None,
        };
        if *denial.coverage() != Coverage::Complete {
            return None;
        }
        let status = conclude(&qname, qtype, &[], std::slice::from_ref(&denial));
        if !status.is_secure() {
            return None;
        }
        let mut authority = vec![AnswerRRset::Secure(soa)];
        authority.extend(denial.rrsets().iter().cloned().map(AnswerRRset::Secure));
        let chain = format!(
            "{qname} {qtype}: {} synthesised from {zone}'s cached, validated {} records \
             (RFC 8198), TTL {left}",
            if rcode == Rcode::NXDOMAIN {
                "NXDOMAIN"
            } else {
                "NODATA"
            },
            denial
                .rrsets()
                .first()
                .map_or(RrType::NSEC, VerifiedRRset::rtype),
        );
        let answer = synthesised(qname, qtype, status, Vec::new(), authority, denial, chain);
        Some((answer, Some(proof)))
    }

    /// True if answers for `qtype` may be synthesised at all.
    fn answers(&self, qtype: RrType) -> bool {
        self.max_bytes != 0
            && !matches!(
                qtype,
                RrType::DS | RrType::ANY | RrType::RRSIG | RrType::NSEC | RrType::NSEC3
            )
    }
}

/// The closest zone holding the name whose [`Canonical`] key is `key` that has kept records.
fn zone_of<'s>(st: &'s State, key: &[u8]) -> Option<&'s ZoneDenials> {
    let mut ends = [0_usize; 128];
    let mut count = 0;
    for end in label_ends(key) {
        ends[count] = end;
        count += 1;
    }
    // The name itself, then each ancestor, the root (the empty key) last.
    ends[..count]
        .iter()
        .rev()
        .chain(std::iter::once(&0))
        .find_map(|&end| st.zones.get(&key[..end]))
}

/// The live SOA of `z` and the NSEC or NSEC3 records for a denial proof for `qname`.
fn denial_records<'z>(
    z: &'z ZoneDenials,
    qname: &Name,
    key: &[u8],
    now: Instant,
) -> Option<(&'z Held, Chosen<'z>)> {
    let soa = z.soa.as_ref().filter(|h| h.live(now))?;
    let chosen = if z.params.is_some() {
        choose_nsec3(&z.name, z, qname, now)?
    } else {
        choose_nsec(&z.name, z, key, now)?
    };
    Some((soa, chosen))
}

/// A kept wildcard RRset that would expand to `qname`, and its expansion proof's record.
struct Expansion<'z> {
    /// The closest encloser: the wildcard's parent.
    source: Name,
    wildcard: &'z Held,
    /// The NSEC covering `qname`, or the NSEC3 covering its next closer name.
    cover: &'z Held,
}

/// The closest kept `*.<encloser>` RRset of type `qtype` of `z` above `qname`, with the kept
/// NSEC covering `qname` or NSEC3 covering its next closer name, if both are live.
fn expansion<'z>(
    zone: &Name,
    z: &'z ZoneDenials,
    qname: &Name,
    qtype: RrType,
    now: Instant,
) -> Option<Expansion<'z>> {
    if z.wildcards.is_empty() {
        return None;
    }
    let mut next_closer = qname.clone();
    let mut encloser = qname.parent();
    let (source, wildcard) = loop {
        let c = encloser.filter(|c| c.is_subdomain_of(zone))?;
        let key = (c.prepend_label(b"*").ok()?, qtype);
        if let Some(h) = z.wildcards.get(&key).filter(|h| h.live(now)) {
            break (c, h);
        }
        next_closer = c.clone();
        encloser = c.parent();
    };
    let cover = match &z.params {
        Some(params) => covering(&z.nsec3, &params.hash(&next_closer).to_vec(), now)?,
        None => covering(&z.nsec, KeyBuf::of(qname.as_wire()).as_slice(), now)?,
    };
    Some(Expansion {
        source,
        wildcard,
        cover,
    })
}

/// A Secure answer for (`qname`, `qtype`) expanded from a kept wildcard RRset (RFC 8198
/// §5.3), with the kept record of `found` as the expansion proof.
fn expand(
    zone: &Name,
    qname: &Name,
    qtype: RrType,
    found: &Expansion<'_>,
    now: Instant,
) -> Option<Answer> {
    let Expansion {
        source,
        wildcard,
        cover,
    } = found;
    let expires = wildcard.expires.min(cover.expires);
    let left = u32::try_from(expires.saturating_duration_since(now).as_secs()).ok()?;
    if left == 0 {
        return None;
    }
    let data = wildcard.set.expanded_to(qname)?.with_ttl_at_most(left);
    let sets = [cover.set.clone().with_ttl_at_most(left)];
    let claim = Claim::Expanded {
        source: source.clone(),
    };
    let denial = prove(zone, qname, claim, &sets).ok()?;
    if *denial.coverage() != Coverage::Complete {
        return None;
    }
    let status = conclude(
        qname,
        qtype,
        std::slice::from_ref(&data),
        std::slice::from_ref(&denial),
    );
    if !status.is_secure() {
        return None;
    }
    let authority = denial
        .rrsets()
        .iter()
        .cloned()
        .map(AnswerRRset::Secure)
        .collect();
    let chain = format!(
        "{qname} {qtype}: expanded from {} with {zone}'s cached, validated {} records \
         (RFC 8198 §5.3), TTL {left}",
        wildcard.set.signed_owner(),
        cover.set.rtype(),
    );
    Some(synthesised(
        qname.clone(),
        qtype,
        status,
        vec![AnswerRRset::Secure(data)],
        authority,
        denial,
        chain,
    ))
}

/// A synthesised answer (NXDOMAIN when `denial` proves it, else NOERROR), with the
/// unvalidated message a client setting CD gets (RFC 4035 §3.2.2): the same records, as a
/// response from the zone would carry them.
fn synthesised(
    qname: Name,
    qtype: RrType,
    status: Status,
    answers: Vec<AnswerRRset>,
    authority: Vec<AnswerRRset>,
    denial: VerifiedDenial,
    chain: String,
) -> Answer {
    let rcode = if *denial.claim() == Claim::NxDomain {
        Rcode::NXDOMAIN
    } else {
        Rcode::NOERROR
    };
    let records = |sets: &[AnswerRRset]| {
        sets.iter()
            .flat_map(|a| [a.records(), a.rrsig_records()])
            .flatten()
            .collect()
    };
    let unvalidated = Message {
        id: 0,
        flags: FLAG_QR | FLAG_AA | rcode.low(),
        questions: Vec::new(),
        answers: records(&answers),
        authority: records(&authority),
        additional: Vec::new(),
        edns: None,
    };
    Answer {
        qname,
        qtype,
        rcode,
        status,
        answers,
        authority,
        denials: vec![denial],
        referral: None,
        dropped: Vec::new(),
        chain: vec![chain],
        exchanges: Vec::new(),
        unvalidated: vec![unvalidated],
        synthesised: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqdns_core::dnssec::sign::Denial;
    use pqdns_core::dnssec::validate::{danger, Limits, PqPolicy, UnverifiedRRset, Validator};
    use pqdns_core::dnssec::{Algorithm, Profile, Provider};

    fn n(s: &str) -> Name {
        s.parse().unwrap()
    }

    /// example. signed with NSEC (SOA MINIMUM 60, TTLs 300), its SOA and NSEC RRsets verified.
    fn verified() -> (VerifiedRRset, Vec<VerifiedRRset>) {
        let text = "@ 300 SOA ns hostmaster 1 7200 3600 1209600 60\n@ 300 NS ns\n\
                    ns 300 A 192.0.2.1\na 300 A 192.0.2.2\nm 300 A 192.0.2.3\n\
                    sub 300 NS ns.sub\nns.sub 300 A 192.0.2.4\n";
        verified_zone(text, Denial::Nsec)
    }

    /// example. from `text` signed with `denial`: its SOA and NSEC or NSEC3 RRsets, verified.
    fn verified_zone(text: &str, denial: Denial) -> (VerifiedRRset, Vec<VerifiedRRset>) {
        verified_origin(&n("example."), text, denial)
    }

    /// `origin` from `text` signed with `denial`: its SOA and NSEC or NSEC3 RRsets, verified.
    fn verified_origin(
        origin: &Name,
        text: &str,
        denial: Denial,
    ) -> (VerifiedRRset, Vec<VerifiedRRset>) {
        let origin = origin.clone();
        let zone =
            pqdns_test_support::signed_zone(&origin, text, &[Algorithm::EcdsaP256Sha256], denial);
        let dnskeys = zone.nodes[&origin][&RrType::DNSKEY].rdatas.clone();
        let keys = danger::trust_anchor_dnskeys(&origin, &dnskeys);
        let mut v = Validator::new(
            &Profile::default_profile(),
            &Provider::default_provider(),
            pqdns_core::time::now(),
            Limits::default(),
            PqPolicy::AnyAlgorithm,
        );
        let mut soa = None;
        let mut nsec = Vec::new();
        for set in UnverifiedRRset::group(&zone.records()) {
            match set.rtype {
                RrType::SOA => soa = Some(v.verify_rrset(&keys, &set).unwrap()),
                RrType::NSEC | RrType::NSEC3 => nsec.push(v.verify_rrset(&keys, &set).unwrap()),
                _ => {}
            }
        }
        (soa.unwrap(), nsec)
    }

    /// A Secure NXDOMAIN answer for `qname` proven by `nsec`, with `soa`.
    fn nxdomain(qname: &str, soa: &VerifiedRRset, nsec: &[VerifiedRRset]) -> Answer {
        nxdomain_in("example.", qname, soa, nsec)
    }

    /// As [`nxdomain`], in `zone`.
    fn nxdomain_in(zone: &str, qname: &str, soa: &VerifiedRRset, nsec: &[VerifiedRRset]) -> Answer {
        let qname = n(qname);
        let d: VerifiedDenial = prove(&n(zone), &qname, Claim::NxDomain, nsec).unwrap();
        let status = conclude(&qname, RrType::A, &[], std::slice::from_ref(&d));
        assert!(status.is_secure());
        Answer {
            qname,
            qtype: RrType::A,
            rcode: Rcode::NXDOMAIN,
            status,
            answers: Vec::new(),
            authority: vec![AnswerRRset::Secure(soa.clone())],
            denials: vec![d],
            referral: None,
            dropped: Vec::new(),
            chain: Vec::new(),
            exchanges: Vec::new(),
            unvalidated: Vec::new(),
            synthesised: false,
        }
    }

    #[test]
    fn records_live_the_soa_minimum_and_no_longer() {
        let (soa, nsec) = verified();
        let cache = Aggressive::new(DEFAULT_BYTES);
        let t0 = Instant::now();
        cache.learn(&nxdomain("b.example.", &soa, &nsec), t0);
        let at = |s: u64| cache.answer(&n("c.example."), RrType::A, t0 + Duration::from_secs(s));
        let early = at(10).expect("synthesised within the SOA MINIMUM");
        assert_eq!(early.rcode(), Rcode::NXDOMAIN);
        assert!(early.status().is_secure() && early.synthesised());
        // What is left of min(NSEC TTL 300 capped to the MINIMUM 60, SOA TTL, MINIMUM): 50 s.
        for set in early.authority() {
            assert!(set.records().iter().all(|r| r.ttl == 50), "{set:?}");
        }
        assert!(at(59).is_some());
        assert!(at(60).is_none(), "expired at min(TTL, SOA MINIMUM)");
        // NODATA at a name with an NSEC, never for a type it lists.
        let t = t0 + Duration::from_secs(1);
        let nodata = cache.answer(&n("a.example."), RrType::TXT, t).unwrap();
        assert_eq!(nodata.rcode(), Rcode::NOERROR);
        assert!(cache.answer(&n("a.example."), RrType::A, t).is_none());
        // DS is never synthesised.
        assert!(cache.answer(&n("c.example."), RrType::DS, t).is_none());
    }

    #[test]
    fn nothing_is_synthesised_at_or_below_a_delegation() {
        let (soa, nsec) = verified();
        let cache = Aggressive::new(DEFAULT_BYTES);
        let t0 = Instant::now();
        cache.learn(&nxdomain("b.example.", &soa, &nsec), t0);
        // The NSEC at sub.example. (NS, no SOA) speaks for the parent's side only.
        assert!(cache.answer(&n("x.sub.example."), RrType::A, t0).is_none());
        assert!(cache.answer(&n("sub.example."), RrType::A, t0).is_none());
        assert!(cache.answer(&n("sub.example."), RrType::TXT, t0).is_none());
        assert!(cache.answer(&n("b.example."), RrType::A, t0).is_some());
    }

    #[test]
    fn memory_stays_within_the_bound() {
        let (soa, nsec) = verified();
        let all = Aggressive::new(DEFAULT_BYTES);
        let t0 = Instant::now();
        all.learn(&nxdomain("b.example.", &soa, &nsec), t0);
        let full = lock(&all.state).bytes;
        assert!(full > 0);
        // Room for about half: the oldest records go, the total stays within the bound.
        let half = Aggressive::new(full / 2);
        half.learn(&nxdomain("b.example.", &soa, &nsec), t0);
        let st = lock(&half.state);
        assert!(
            st.bytes <= full / 2 && st.bytes > 0,
            "{} of {}",
            st.bytes,
            full / 2
        );
        let held: usize = st.zones.values().map(|z| z.nsec.len()).sum();
        assert!(held < nsec.len());
        drop(st);
        // Off: nothing kept, nothing synthesised.
        let off = Aggressive::new(0);
        off.learn(&nxdomain("b.example.", &soa, &nsec), t0);
        assert!(lock(&off.state).zones.is_empty());
        assert!(off.answer(&n("c.example."), RrType::A, t0).is_none());
    }

    /// The records of an answer's authority section, with their RRSIGs, in a set.
    fn authority(a: &Answer) -> std::collections::BTreeSet<(String, RrType, Vec<u8>)> {
        a.authority()
            .iter()
            .flat_map(|s| [s.records(), s.rrsig_records()])
            .flatten()
            .map(|r| (r.owner.to_string(), r.rtype, r.rdata))
            .collect()
    }

    /// The promise a service relies on when it splices a new question into a response kept
    /// per proof: names with equal [`DenialProof`]s get the same answer (RCODE and authority
    /// records; or all none), and [`Aggressive::proof`] finds the key
    /// [`Aggressive::answer_with_proof`] gives. Over NSEC and NSEC3 chains with empty
    /// non-terminals, a delegation, deep names and names of the delegation's side.
    #[test]
    fn names_with_one_proof_key_get_one_answer() {
        let text = "@ 300 SOA ns hostmaster 1 7200 3600 1209600 60\n@ 300 NS ns\n\
                    ns 300 A 192.0.2.1\na 300 A 192.0.2.2\nb.c 300 A 192.0.2.3\n\
                    m 300 A 192.0.2.3\nx.y.z 300 A 192.0.2.5\nsub 300 NS ns.sub\n\
                    ns.sub 300 A 192.0.2.4\n";
        let bases = [
            "example.",
            "a.example.",
            "c.example.",
            "b.c.example.",
            "m.example.",
            "z.example.",
            "y.z.example.",
            "x.y.z.example.",
            "sub.example.",
            "ns.example.",
            "ns.sub.example.",
        ];
        let mut gen = 0x9e37_79b9_7f4a_7c15_u64;
        let mut label = move || {
            gen ^= gen >> 12;
            gen ^= gen << 25;
            gen ^= gen >> 27;
            let v = gen.wrapping_mul(0x2545_f491_4f6c_dd1d);
            // A first letter spread over the alphabet, so names fall in every span.
            format!("{}{:x}", char::from(b'a' + (v % 26) as u8), v >> 40)
        };
        let mut names: Vec<Name> = bases.iter().map(|b| n(b)).collect();
        for b in bases {
            for _ in 0..40 {
                names.push(n(&format!("{}.{b}", label())));
                names.push(n(&format!("{}.{}.{b}", label(), label())));
            }
        }
        type Seen = Option<(Rcode, std::collections::BTreeSet<(String, RrType, Vec<u8>)>)>;
        for denial in [Denial::Nsec, Denial::Nsec3(Nsec3Params::default())] {
            let (soa, sets) = verified_zone(text, denial.clone());
            let cache = Aggressive::new(DEFAULT_BYTES);
            let t0 = Instant::now();
            cache.learn(&nxdomain("nope.example.", &soa, &sets), t0);
            let mut groups: HashMap<DenialProof, Vec<(Seen, String)>> = HashMap::new();
            let mut proven = 0;
            for qname in &names {
                for qtype in [RrType::A, RrType::TXT] {
                    let key = cache.proof(qname, qtype, t0);
                    let answer = cache.answer_with_proof(qname, qtype, t0);
                    if let Some((_, k)) = &answer {
                        assert_eq!(key, *k, "{qname} {qtype}");
                        proven += 1;
                    }
                    if let Some(key) = key {
                        let seen = answer.map(|(a, _)| (a.rcode(), authority(&a)));
                        let group = groups.entry(key).or_default();
                        group.push((seen, format!("{qname} {qtype}")));
                    }
                }
            }
            for group in groups.values() {
                let (first, by) = &group[0];
                for (seen, name) in group {
                    assert_eq!(seen, first, "{name} and {by} share a key ({denial:?})");
                }
            }
            // Not vacuous: most names are proven, and keys are shared.
            let shared = groups.values().filter(|g| g.len() > 1 && g[0].0.is_some());
            assert!(proven > names.len(), "{proven} answers ({denial:?})");
            assert!(shared.count() > 8, "{} keys ({denial:?})", groups.len());
            // Below the delegation, nothing.
            assert_eq!(cache.proof(&n("q.sub.example."), RrType::A, t0), None);
        }
    }

    /// A covering record chosen by the range lookup proves nothing past its next name: with
    /// only the records of one proof kept, a name beyond them has no key (else a response
    /// kept for that key would be served for it) and no answer.
    #[test]
    fn a_name_past_the_kept_records_has_no_proof() {
        let (soa, nsec) = verified();
        // Only the apex's NSEC (example. → a.example.) and a.example.'s (→ m.example.).
        let apex_and_a: Vec<VerifiedRRset> = nsec
            .iter()
            .filter(|s| matches!(s.owner().to_string().as_str(), "example." | "a.example."))
            .cloned()
            .collect();
        assert_eq!(apex_and_a.len(), 2);
        let cache = Aggressive::new(DEFAULT_BYTES);
        let t0 = Instant::now();
        cache.learn(&nxdomain("b.example.", &soa, &apex_and_a), t0);
        assert!(cache.proof(&n("c.example."), RrType::A, t0).is_some());
        // After m.example.: a.example.'s NSEC is the greatest kept owner below it.
        for past in ["n.example.", "x.m.example.", "zz.example."] {
            assert_eq!(cache.proof(&n(past), RrType::A, t0), None, "{past}");
            assert!(cache.answer(&n(past), RrType::A, t0).is_none(), "{past}");
        }
    }

    /// As [`a_name_past_the_kept_records_has_no_proof`], for NSEC3: with only the three
    /// records of one closest encloser proof kept, a name whose next closer hash falls beyond
    /// the covering record's span has no key and no answer; one inside it has both.
    #[test]
    fn a_next_closer_hash_past_the_kept_records_has_no_proof() {
        let text = "@ 300 SOA ns hostmaster 1 7200 3600 1209600 60\n@ 300 NS ns\n\
                    ns 300 A 192.0.2.1\na 300 A 192.0.2.2\nm 300 A 192.0.2.3\n\
                    z 300 A 192.0.2.4\n";
        let params = Nsec3Params::default();
        let (soa, sets) = verified_zone(text, Denial::Nsec3(params.clone()));
        let span = |set: &VerifiedRRset| {
            let owner = owner_hash(set.owner()).unwrap();
            let (_, _, rest) = Nsec3Params::parse(&set.rdatas()[0]).unwrap();
            (owner, rest[1..1 + usize::from(rest[0])].to_vec())
        };
        let covers = |set: &VerifiedRRset, name: &str| {
            let (owner, next) = span(set);
            spans(owner.as_slice(), &next, params.hash(&n(name)).as_slice())
        };
        let matches = |set: &VerifiedRRset, name: &str| span(set).0 == params.hash(&n(name));
        let proof: Vec<VerifiedRRset> = sets
            .iter()
            .filter(|s| {
                matches(s, "example.") || covers(s, "nope.example.") || covers(s, "*.example.")
            })
            .cloned()
            .collect();
        assert!(proof.len() <= 3 && proof.len() < sets.len());
        let cover = sets.iter().find(|s| covers(s, "nope.example.")).unwrap();
        let cache = Aggressive::new(DEFAULT_BYTES);
        let t0 = Instant::now();
        cache.learn(&nxdomain("nope.example.", &soa, &proof), t0);
        let (mut inside, mut outside) = (0, 0);
        for i in 0..200 {
            let name = format!("q{i}.example.");
            let key = cache.proof(&n(&name), RrType::A, t0);
            let answer = cache.answer(&n(&name), RrType::A, t0);
            if covers(cover, &name) {
                inside += 1;
                assert!(key.is_some() && answer.is_some(), "{name}");
            } else if !proof.iter().any(|s| covers(s, &name) || matches(s, &name)) {
                outside += 1;
                assert_eq!(key, None, "{name}");
                assert!(answer.is_none(), "{name}");
            }
        }
        assert!(
            inside > 0 && outside > 0,
            "{inside} inside, {outside} outside"
        );
    }

    /// The root zone's NSEC chain (RFC 8198 §1: most junk queries are for TLDs that do not
    /// exist): the closest encloser is the root itself, and names that do not exist are
    /// answered NXDOMAIN with a proof key; an existing TLD is not.
    #[test]
    fn names_under_the_root_zone_are_proven_absent() {
        let origin = Name::root();
        let text = ". 300 SOA a.root hostmaster 1 7200 3600 1209600 60\n. 300 NS a.root\n\
                    a.root 300 A 192.0.2.1\ncom 300 NS ns.com\nns.com 300 A 192.0.2.2\n\
                    org 300 NS ns.org\nns.org 300 A 192.0.2.3\n";
        let (soa, nsec) = verified_origin(&origin, text, Denial::Nsec);
        let cache = Aggressive::new(DEFAULT_BYTES);
        let t0 = Instant::now();
        cache.learn(&nxdomain_in(".", "nope.", &soa, &nsec), t0);
        for absent in ["foo.", "corp.", "home.", "zzz.", "x.y."] {
            let a = cache.answer(&n(absent), RrType::A, t0);
            assert_eq!(a.map(|a| a.rcode()), Some(Rcode::NXDOMAIN), "{absent}");
            assert!(cache.proof(&n(absent), RrType::A, t0).is_some(), "{absent}");
        }
        assert!(cache.answer(&n("com."), RrType::A, t0).is_none());
        assert!(cache.answer(&n("x.com."), RrType::A, t0).is_none());
    }

    /// [`Canonical`] keys sort as names do in canonical order (RFC 4034 §6.1, `Name`'s
    /// `Ord`): over every pair of names built from labels that are prefixes of each other,
    /// differ in case, hold zero and high octets, and sit at different depths.
    #[test]
    fn canonical_keys_sort_as_names() {
        let labels: [&[u8]; 9] = [
            b"a", b"A", b"ab", b"a\0", b"a\0b", b"\0", b"*", b"z\xff", b"-",
        ];
        let mut names = vec![Name::root(), n("example."), n("b.example.")];
        for l in labels {
            for parent in [n("example."), n("a.example."), n("\\000.example.")] {
                let name = parent.prepend_label(l).unwrap();
                names.push(name.prepend_label(b"x").unwrap());
                names.push(name);
            }
        }
        for a in &names {
            for b in &names {
                assert_eq!(Canonical::of(a).cmp(&Canonical::of(b)), a.cmp(b), "{a} {b}");
            }
        }
    }
}
