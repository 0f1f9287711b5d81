//! The answer engine: from query bytes to response bytes, synchronously and without I/O.
//!
//! Implements the authoritative part of the lookup of RFC 1034 §4.3.2 with the DNSSEC additions
//! of RFC 4035 §3.1 and RFC 5155 §7.2:
//! - exact matches (AA set), CNAME chains inside the zone (at most [`MAX_CNAME_HOPS`]);
//! - DNAME redirection (RFC 6672 §3.1): for a name below a DNAME, the DNAME RRset (with its
//!   RRSIGs under DO) and a synthesized, unsigned CNAME with the DNAME's TTL, followed inside
//!   the zone like any CNAME; YXDOMAIN when the substituted name would exceed 255 bytes;
//! - wildcards (RFC 4592 §3.3.1): the owner is rewritten to the query name, with DO the RRSIGs
//!   too, plus the NSEC/NSEC3 proving no closer match;
//! - referrals: NS in authority, glue in additional, DS and its RRSIGs with DO, else the
//!   NSEC/NSEC3 proving there is no DS (RFC 4035 §3.1.4);
//! - NXDOMAIN and NODATA with the SOA (TTL min(SOA TTL, MINIMUM), RFC 2308 §3) and, with DO,
//!   the denial proofs;
//! - REFUSED outside our zones and for classes other than IN and ANY (answered as IN); class
//!   CH for the server's identity ([`crate::identity`]). Malformed messages, OPCODEs other
//!   than QUERY and EDNS versions above 0 never get here: the acceptability check
//!   ([`pqdns_core::wire::query`]) answers them FORMERR, NOTIMP and BADVERS.
//!
//! MTL zones: condensed signatures as signed; for queries carrying EDNS option 65050, full
//! ones (the condensed signature with the zone's signed ladder) — always for 2025 ladders
//! (draft-fregly-dnsop-slh-dsa-mtl-dnssec: the empty option asks for them), and for 2026
//! ladders unless the option names the ladder by its SigTag
//! (draft-hdong-dnsop-ml-dsa-mtl-dnssec-sigtag-ext-00; 0–8 tags of 32 bytes, else FORMERR).
//! Conversely the apex SOA and DNSKEY signatures, stored full, go out condensed when the
//! option names their 2026 ladder ([`crate::catalog::MtlLadder::expand`]).
//!
//! QTYPE ANY gets one RRset of the name (the one with the lowest type number) and its RRSIGs, as
//! RFC 8482 §4.2 allows. Zone transfers (AXFR/IXFR) are REFUSED.
//!
//! Size: UDP responses are limited to min(client's EDNS payload, ours) bytes, 512 without EDNS
//! (RFC 6891 §6.2.5); stream transports allow 65535 bytes. RRsets are never split: a unit that
//! does not fit is dropped whole and TC is set, except for optional additional data (RFC 2181 §9).
//! Glue for a referral is not optional (RFC 9471 §3).

use std::net::IpAddr;
use std::ops::Bound;

use pqdns_core::dnssec::mtl::{SigTags, EDNS_SIGTAG};
use pqdns_core::name::NameError;
use pqdns_core::wire::query::Query;
use pqdns_core::wire::rdata::target_of;
use pqdns_core::wire::{
    Full, MessageWriter, Rcode, Section, EDNS_CO, FLAG_AA, FLAG_TC, MIN_UDP_PAYLOAD,
};
use pqdns_core::zone::{Node, RRset};
use pqdns_core::{Class, Name, RrType};
/// The transport a query arrived on (the type [`respond`] takes), from pqdns-net.
pub use pqdns_net::Transport;

use crate::catalog::{Catalog, MtlLadder, ServedZone};
use crate::cookie::CookieCheck;
use crate::denial::{prove, Denial};
use crate::finish;
use crate::online::{self, OnlineSigning, OnlineZone};
use crate::request::{self, Auth, Exchange};
pub use pqdns_core::wire::query::ParseError;

/// Longest CNAME chain followed inside a zone (the chain's records all go in the answer).
pub const MAX_CNAME_HOPS: usize = 8;
/// Most NS/MX/SRV targets looked up for additional-section addresses per RRset.
pub const MAX_ADDITIONAL_TARGETS: usize = 16;
/// Largest DNS message on a stream transport, in bytes (2-byte length prefix, RFC 1035 §4.2.2).
pub const MAX_STREAM_MESSAGE: usize = 65535;
/// Default EDNS UDP payload size we offer and accept, in bytes (DNS Flag Day 2020).
pub const DEFAULT_UDP_PAYLOAD: u16 = 1232;

/// What happened to one query (for logs and metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Length of the response in bytes, written at `out[base..]`; 0 means send nothing.
    pub len: usize,
    /// Response code sent.
    pub rcode: Rcode,
    /// True if TC was set.
    pub truncated: bool,
    /// QTYPE, when the query parsed.
    pub qtype: Option<RrType>,
    /// Why the query was malformed, if it was.
    pub error: Option<ParseError>,
    /// Smallest TTL in the answer section, or for an empty answer in the authority section
    /// (negative caching, RFC 2308 §5), in seconds; for HTTP freshness (RFC 8484 §5.1).
    pub cache_ttl: Option<u32>,
    /// How the query's DNS cookie checked (a valid one exempts from rate limiting).
    pub cookie: CookieCheck,
}

/// Answers the query in `packet` from `catalog`, writing the response into `out[base..]`
/// (`out` is truncated to `base` first; the bytes before `base` are left alone, e.g. for a TCP
/// length prefix). `client` is the query's source address (for DNS cookies, [`crate::cookie`]);
/// `udp_payload` is our EDNS UDP payload size in bytes. `transport` is the one the query
/// arrived on: a UDP response is limited by EDNS (RFC 6891) and may be truncated (TC); the
/// stream transports take up to [`MAX_STREAM_MESSAGE`] bytes.
///
/// This is the server's request pipeline without its network policy (zone transfers, UDP
/// fragmentation, the amplification limit, RRL): a prepared answer, or one parse, the
/// acceptability check, DNS cookies and this engine, each the same function the server runs.
/// Only OPCODE QUERY is answered: NOTIFY and UPDATE (RFC 1996, RFC 2136) need the server's
/// secondary and update policy, so here they get NOTIMP like any other OPCODE.
pub fn respond(
    catalog: &Catalog,
    packet: &[u8],
    transport: Transport,
    client: IpAddr,
    udp_payload: u16,
    out: &mut Vec<u8>,
    base: usize,
) -> Outcome {
    let x = Exchange {
        transport,
        client,
        udp_payload: udp_payload.max(MIN_UDP_PAYLOAD),
        tsig_room: 0,
        signing: online::Mode::Inline,
    };
    if let Some(o) = request::replay(catalog, packet, &x, out, base) {
        return o;
    }
    let accepted =
        request::parse(packet, None).and_then(|q| Ok((q, request::authenticate(catalog, &q, &x)?)));
    match accepted {
        Ok((q, auth)) => answer(catalog, &q, &auth, &x, Prepare::Store, out, base),
        Err(m) => finish::reject(&m, &x, out, base),
    }
}

/// Whether an answer is kept among the catalog's prepared answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Prepare {
    /// The answer to the query as received: replayed to the next query with the same bytes.
    Store,
    /// An answer to a query the pipeline derived (a fragment request's original question, a
    /// complete answer to cut into fragments): its key would not be the query's.
    Skip,
}

/// The QUERY handler: answers `q` (authenticated as `auth`) from `catalog` into `out[base..]`,
/// within the limits of `x`, and stores the answer for replays when `prepare` says so.
pub(crate) fn answer(
    catalog: &Catalog,
    q: &Query<'_>,
    auth: &Auth<'_>,
    x: &Exchange,
    prepare: Prepare,
    out: &mut Vec<u8>,
    base: usize,
) -> Outcome {
    let mut w = finish::open(catalog, q, auth, x, out, base);
    let mut cache_ttl = None;
    let (rcode, store) = if auth.refused {
        // RFC 7873 §5.2.3: BADCOOKIE with a cookie to retry with; without a cookie at all,
        // TC=1 sends the client to TCP. No data either way: nothing to amplify.
        if auth.cookie.is_some() {
            (Rcode::BADCOOKIE, false)
        } else {
            w.set_flag(FLAG_TC);
            (Rcode::NOERROR, false)
        }
    } else {
        let mark = w.mark();
        let mut pending = false;
        let mut rcode = answer_query(catalog, q, x, &mut w, &mut cache_ttl, &mut pending);
        if pending {
            // Signatures missing (online signing): an empty SERVFAIL, never stored; the
            // pipeline defers the query to a signing task ([`crate::online`]).
            w.rollback(mark);
            w.clear_flag(FLAG_AA);
            w.clear_flag(FLAG_TC);
            rcode = Rcode::SERVFAIL;
            cache_ttl = None;
        }
        (rcode, prepare == Prepare::Store && !pending)
    };
    let truncated = w.truncated();
    let outcome = Outcome {
        len: w.finish(rcode),
        rcode,
        truncated,
        qtype: Some(q.qtype),
        error: None,
        cache_ttl,
        cookie: auth.check,
    };
    if store {
        let packet = q.message.as_bytes();
        catalog
            .answers
            .store(packet, x.transport, x.udp_payload, &out[base..], &outcome);
    }
    finish::fill_cookie(catalog, auth, x.client, &mut out[base..]);
    outcome
}

fn answer_query(
    catalog: &Catalog,
    q: &Query<'_>,
    x: &Exchange<'_>,
    w: &mut MessageWriter<'_, '_>,
    cache_ttl: &mut Option<u32>,
    pending: &mut bool,
) -> Rcode {
    let qname = q.qname.to_name();
    if q.qclass == Class::CH {
        return catalog.identity.answer_chaos(&qname, q.qtype, w);
    }
    // QCLASS ANY (RFC 1035 §3.2.5) is answered from our class, IN, as NSD and Knot do.
    if !matches!(q.qclass, Class::IN | Class::ANY) || matches!(q.qtype, RrType::AXFR | RrType(251))
    {
        return Rcode::REFUSED;
    }
    // RFC 9824 §3.4: NXNAME only appears in compact denial type bitmaps; a query for it
    // MUST be answered FORMERR.
    if q.qtype == RrType::NXNAME {
        return Rcode::FORMERR;
    }
    let Some(zone) = catalog.find(&qname, q.qtype) else {
        return Rcode::REFUSED;
    };
    if zone.expired {
        return Rcode::SERVFAIL;
    }
    // Option 65050 (draft-hdong-dnsop-ml-dsa-mtl-dnssec-sigtag-ext-00): 0 to 8 SigTags of the
    // ladders the validator holds; a malformed option is FORMERR (RFC 6891 §7).
    let sigtags = match q.edns.and_then(|e| e.option(EDNS_SIGTAG)) {
        None => None,
        Some(data) => match SigTags::parse(data) {
            Ok(tags) => Some(tags),
            Err(_) => return Rcode::FORMERR,
        },
    };
    let dnssec = q.dnssec_ok();
    let mut lookup = Lookup {
        zone,
        dnssec,
        sigtags: sigtags.as_ref(),
        online: zone
            .online
            .as_deref()
            .filter(|_| dnssec)
            .map(|keys| Online {
                keys,
                signing: &catalog.online,
                mode: x.signing,
                compact_ok: q.edns.is_some_and(|e| e.flags() & EDNS_CO != 0),
                now: pqdns_core::time::now(),
                nsec: None,
                failed: false,
            }),
        authority: Vec::new(),
        additional: Vec::new(),
        min_ttl: [None; 2],
        negative_ttl: None,
    };
    let rcode = lookup.run(w, &qname, q.qtype);
    *cache_ttl = lookup.min_ttl[0].or(lookup.min_ttl[1]);
    *pending = lookup.online.as_ref().is_some_and(|o| o.failed);
    rcode
}

/// An online zone's answer to a query with DO ([`crate::online`]): the signatures it makes or
/// finds in the cache, and its compact denial NSEC (RFC 9824).
struct Online<'z> {
    keys: &'z OnlineZone,
    signing: &'z OnlineSigning,
    mode: online::Mode<'z>,
    /// The query set CO (RFC 9824 §5): a name that does not exist is NXDOMAIN, not NODATA.
    compact_ok: bool,
    /// UNIX seconds when the answer began: signatures are checked and made for this time.
    now: u64,
    /// The NSEC of the denial, owner and RRset, written after the other authority data.
    nsec: Option<(Name, RRset)>,
    /// A signature could not be had now (deferred, or the library failed).
    failed: bool,
}

/// An RRset to write in the authority or additional section.
#[derive(Clone, Copy)]
struct Item<'z> {
    owner: &'z Name,
    rtype: RrType,
    set: &'z RRset,
    /// TTL to use instead of the RRset's (negative-answer SOA), in seconds.
    ttl: Option<u32>,
    /// Losing it sets TC (authority data, referral glue).
    required: bool,
}

/// Where a name stands for a query, after cuts, exact matches and wildcards (RFC 1034 §4.3.2
/// step 3).
enum Match<'z> {
    /// A node answers: the name's own, or the wildcard `*.<closest_encloser>`.
    Node {
        owner: &'z Name,
        node: &'z Node,
        wildcard_of: Option<Name>,
    },
    /// The name is at or below a delegation point.
    Referral { cut: &'z Name, node: &'z Node },
    /// The name is below a DNAME owner (RFC 6672 §2.3): redirected, not answered.
    Dname { owner: &'z Name, set: &'z RRset },
    /// The name exists only because names below it do (RFC 4592 §2.2.2).
    EmptyNonTerminal,
    /// The name does not exist.
    NxDomain { closest_encloser: Name },
}

struct Lookup<'z> {
    zone: &'z ServedZone,
    dnssec: bool,
    /// Online signing, for an online zone and a query with DO.
    online: Option<Online<'z>>,
    /// The query's option 65050, if any: condensed MTL signatures are sent full, except 2026
    /// ones whose ladder it names by SigTag.
    sigtags: Option<&'z SigTags>,
    authority: Vec<Item<'z>>,
    additional: Vec<Item<'z>>,
    /// Smallest TTL written in the answer and in the authority section, in seconds.
    min_ttl: [Option<u32>; 2],
    /// The zone's negative TTL once a negative answer has looked up the SOA, in seconds.
    negative_ttl: Option<u32>,
}

impl<'z> Lookup<'z> {
    fn run(&mut self, w: &mut MessageWriter<'_, '_>, qname: &Name, qtype: RrType) -> Rcode {
        let mut rcode = Rcode::NOERROR;
        let mut name = qname.clone();
        w.set_flag(FLAG_AA);
        for hop in 0..=MAX_CNAME_HOPS {
            match self.classify(&name, qtype) {
                Match::Referral { cut, node } => {
                    if hop == 0 {
                        w.clear_flag(FLAG_AA);
                    }
                    self.referral(cut, node);
                    break;
                }
                Match::EmptyNonTerminal => {
                    self.negative(Denial::NoData { name: &name });
                    break;
                }
                Match::Dname { owner, set } => {
                    let target = match self.redirect(w, &name, owner, set) {
                        Ok(Some(target)) => target,
                        Ok(None) => break,
                        Err(Full) => {
                            w.set_flag(FLAG_TC);
                            return rcode;
                        }
                    };
                    match target {
                        Ok(target) if qtype != RrType::CNAME => match self.in_zone(target) {
                            Some(target) => name = target,
                            None => break,
                        },
                        Ok(_) => break,
                        // RFC 6672 §2.2: a substitution longer than 255 bytes is YXDOMAIN.
                        Err(_) => {
                            rcode = Rcode::YXDOMAIN;
                            break;
                        }
                    }
                }
                Match::NxDomain { closest_encloser } => {
                    // RFC 9824 §3, §5: online, a name that does not exist is NODATA, unless
                    // the query set CO.
                    rcode = match &self.online {
                        Some(o) if !o.compact_ok => Rcode::NOERROR,
                        _ => Rcode::NXDOMAIN,
                    };
                    self.negative(Denial::NxDomain {
                        qname: &name,
                        closest_encloser: &closest_encloser,
                    });
                    break;
                }
                Match::Node {
                    owner,
                    node,
                    wildcard_of,
                } => {
                    // RFC 4035 §3.2.1 leaves QTYPE RRSIG to the server: as BIND and NSD do,
                    // every RRSIG at the name, whatever DO says (a signature is not signed).
                    if qtype == RrType::RRSIG && wildcard_of.is_none() {
                        match self.answer_rrsigs(w, owner, node) {
                            Ok(true) => break,
                            Ok(false) => {}
                            Err(Full) => {
                                w.set_flag(FLAG_TC);
                                return rcode;
                            }
                        }
                    }
                    let wanted = if qtype == RrType::ANY {
                        node.iter().find(|(_, s)| !s.rdatas.is_empty())
                    } else {
                        node.get_key_value(&qtype)
                            .filter(|(_, s)| !s.rdatas.is_empty())
                    };
                    let cname = node.get(&RrType::CNAME).filter(|s| !s.rdatas.is_empty());
                    let (rtype, set) = match (wanted, cname) {
                        (Some((t, s)), _) => (*t, s),
                        (None, Some(s)) => (RrType::CNAME, s),
                        (None, None) => {
                            match &wildcard_of {
                                Some(ce) => self.negative(Denial::WildcardNoData {
                                    qname: &name,
                                    closest_encloser: ce,
                                }),
                                None => self.negative(Denial::NoData { name: owner }),
                            }
                            break;
                        }
                    };
                    if self.answer(w, &name, rtype, set).is_err() {
                        w.set_flag(FLAG_TC);
                        return rcode;
                    }
                    if let Some(ce) = &wildcard_of {
                        self.proof(Denial::WildcardAnswer {
                            qname: &name,
                            closest_encloser: ce,
                        });
                    }
                    if rtype != RrType::CNAME || qtype == RrType::CNAME {
                        self.additional_for(rtype, set, false);
                        break;
                    }
                    match set
                        .rdatas
                        .first()
                        .and_then(|rd| self.in_zone(Name::from_wire(rd).ok()?))
                    {
                        Some(target) => name = target,
                        None => break,
                    }
                }
            }
        }
        self.write_tail(w);
        rcode
    }

    /// Finds where `name` stands in the zone.
    fn classify(&self, name: &Name, qtype: RrType) -> Match<'z> {
        let zone = &self.zone.zone;
        // RFC 1034 §4.3.2 step 3b: a cut on the way down means a referral; the DS RRset at a
        // cut is the parent's own data (RFC 4035 §3.1.4.1).
        // One search finds `name` or, failing that, the first name after it in canonical
        // order, which is below `name` when `name` is an empty non-terminal.
        let next = zone
            .nodes
            .range::<Name, _>((Bound::Included(name), Bound::Unbounded))
            .next();
        let found = next.filter(|(owner, _)| (*owner).cmp(name).is_eq());
        // The topmost cut at or above `name`: above it, else `name` itself (below the apex).
        let cut_at_name = found.filter(|(owner, node)| {
            **owner != zone.origin && node.get(&RrType::NS).is_some_and(|s| !s.rdatas.is_empty())
        });
        if let Some((cut, node)) = zone.delegation_above(name).or(cut_at_name) {
            if !(cut == name && qtype == RrType::DS) {
                return Match::Referral { cut, node };
            }
        }
        if let Some((owner, node)) = found {
            return Match::Node {
                owner,
                node,
                wildcard_of: None,
            };
        }
        if next.is_some_and(|(after, _)| after.is_subdomain_of(name)) {
            return Match::EmptyNonTerminal;
        }
        // The closest encloser: the nearest ancestor that exists, the apex at the latest.
        let mut closest_encloser = name.parent();
        while let Some(a) = closest_encloser
            .as_ref()
            .filter(|a| **a != zone.origin && a.is_subdomain_of(&zone.origin))
        {
            if zone.nodes.contains_key(a) || self.has_descendants(a) {
                break;
            }
            closest_encloser = a.parent();
        }
        let closest_encloser = closest_encloser
            .filter(|a| a.is_subdomain_of(&zone.origin))
            .unwrap_or_else(|| zone.origin.clone());
        // Nothing exists below a DNAME (the zone refuses such data), so a DNAME above `name`
        // owns its closest encloser.
        if let Some((owner, set)) =
            zone.nodes
                .get_key_value(&closest_encloser)
                .and_then(|(owner, node)| {
                    Some((
                        owner,
                        node.get(&RrType::DNAME).filter(|s| !s.rdatas.is_empty())?,
                    ))
                })
        {
            return Match::Dname { owner, set };
        }
        // RFC 4592 §3.3.1: the source of synthesis is the wildcard child of the closest encloser.
        let wildcard = closest_encloser.prepend_label(b"*").ok();
        if let Some((owner, node)) = wildcard.and_then(|w| zone.nodes.get_key_value(&w)) {
            return Match::Node {
                owner,
                node,
                wildcard_of: Some(closest_encloser),
            };
        }
        Match::NxDomain { closest_encloser }
    }

    /// `target` if this zone holds it (a CNAME or DNAME target the lookup continues at).
    fn in_zone(&self, target: Name) -> Option<Name> {
        target
            .is_subdomain_of(&self.zone.zone.origin)
            .then_some(target)
    }

    /// Answers `name` below the DNAME at `owner` (RFC 6672 §3.1): the DNAME RRset (signed),
    /// then a CNAME from `name` to the substituted name, synthesized and unsigned, with the
    /// DNAME's TTL. Returns the substituted name (or why it is too long), `None` for a
    /// malformed DNAME, [`Full`] when the DNAME does not fit.
    fn redirect(
        &mut self,
        w: &mut MessageWriter<'_, '_>,
        name: &Name,
        owner: &Name,
        set: &RRset,
    ) -> Result<Option<Result<Name, NameError>>, Full> {
        self.answer(w, owner, RrType::DNAME, set)?;
        let Some(target) = set.rdatas.first().and_then(|rd| Name::from_wire(rd).ok()) else {
            return Ok(None);
        };
        let Some(substituted) = name.replace_suffix(owner, &target) else {
            return Ok(None);
        };
        if let Ok(cname) = &substituted {
            let mark = w.mark();
            let ttl = set.ttl;
            w.record(
                Section::Answer,
                name.as_wire(),
                RrType::CNAME,
                Class::IN,
                ttl,
                cname.as_wire(),
            );
            w.commit(mark)?;
        }
        Ok(Some(substituted))
    }

    /// True if some name below `name` is a node: in canonical order its descendants follow
    /// it directly, so it is enough to look at the next name.
    fn has_descendants(&self, name: &Name) -> bool {
        self.zone
            .zone
            .nodes
            .range::<Name, _>((Bound::Excluded(name), Bound::Unbounded))
            .next()
            .is_some_and(|(n, _)| n.is_subdomain_of(name))
    }

    /// Writes an answer RRset (owner `name`, which differs from the zone's for wildcards).
    fn answer(
        &mut self,
        w: &mut MessageWriter<'_, '_>,
        name: &Name,
        rtype: RrType,
        set: &RRset,
    ) -> Result<(), Full> {
        let made = self.sign_online(name, rtype, set);
        let signatures = match &made {
            Some(signed) => Signatures::Made(&signed.rrsigs),
            None => self.signatures(),
        };
        write_rrset(w, Section::Answer, name, rtype, set, None, signatures)?;
        self.note_ttl(0, set.ttl);
        Ok(())
    }

    /// The RRSIGs online signing gives the RRset `set` answered as (`owner`, `rtype`): for an
    /// online zone, a query with DO, and an RRset with none stored (the DNSKEY RRset has);
    /// `None` otherwise, and when they cannot be had now (noted). The caller knows the RRset
    /// is one the zone signs ([`online::signs`]): answer data always is.
    fn sign_online(
        &mut self,
        owner: &Name,
        rtype: RrType,
        set: &RRset,
    ) -> Option<std::sync::Arc<online::Signed>> {
        let o = self.online.as_mut()?;
        if !set.rrsigs.is_empty() {
            return None;
        }
        let signed = o.signing.rrsigs(o.keys, owner, rtype, set, o.mode, o.now);
        o.failed |= signed.is_none();
        signed
    }

    /// Writes every RRSIG of every RRset at `owner` as the answer to QTYPE RRSIG, one RRset's
    /// signatures at a time; false if there are none.
    fn answer_rrsigs(
        &mut self,
        w: &mut MessageWriter<'_, '_>,
        owner: &Name,
        node: &Node,
    ) -> Result<bool, Full> {
        let mut any = false;
        for set in node.values().filter(|s| !s.rrsigs.is_empty()) {
            let mark = w.mark();
            for sig in &set.rrsigs {
                let wire = owner.as_wire();
                w.record(
                    Section::Answer,
                    wire,
                    RrType::RRSIG,
                    Class::IN,
                    set.rrsig_ttl,
                    sig,
                );
            }
            w.commit(mark)?;
            self.note_ttl(0, set.rrsig_ttl);
            any = true;
        }
        Ok(any)
    }

    /// The RRSIGs to send: none without DO, full MTL signatures when asked for.
    fn signatures(&self) -> Signatures<'z> {
        match (self.dnssec, self.sigtags) {
            (false, _) => Signatures::Omitted,
            (true, None) => Signatures::Stored,
            (true, Some(held)) => Signatures::FullMtl(&self.zone.mtl_ladders, held),
        }
    }

    fn note_ttl(&mut self, i: usize, ttl: u32) {
        self.min_ttl[i] = Some(self.min_ttl[i].map_or(ttl, |t| t.min(ttl)));
    }

    fn push_authority(&mut self, owner: &'z Name, rtype: RrType, set: &'z RRset, ttl: Option<u32>) {
        if !self.authority.iter().any(|i| std::ptr::eq(i.set, set)) {
            self.authority.push(Item {
                owner,
                rtype,
                set,
                ttl,
                required: true,
            });
        }
    }

    fn proof(&mut self, denial: Denial<'_>) {
        if !self.dnssec {
            return;
        }
        if let Some(o) = &mut self.online {
            // RFC 9824 §3: one NSEC made for the query (none for a wildcard answer).
            let zone = &self.zone.zone;
            let ttl = self.negative_ttl.unwrap_or_else(|| zone.negative_ttl());
            let nsec = online::compact_nsec(zone, denial, ttl);
            let too_long = nsec.is_none() && !matches!(denial, Denial::WildcardAnswer { .. });
            o.failed |= too_long;
            o.nsec = nsec;
            return;
        }
        for r in prove(self.zone, denial).iter() {
            self.push_authority(r.owner, r.rtype, r.set, None);
        }
    }

    /// NXDOMAIN or NODATA: the SOA with the negative TTL, then the proof.
    fn negative(&mut self, denial: Denial<'_>) {
        let zone = &self.zone.zone;
        if let Some((apex, set)) = zone
            .nodes
            .get_key_value(&zone.origin)
            .and_then(|(apex, node)| Some((apex, node.get(&RrType::SOA)?)))
        {
            // RFC 2308 §3: the TTL of the SOA in a negative answer is the minimum of its TTL and
            // its MINIMUM field.
            let ttl = set.negative_ttl();
            self.negative_ttl = Some(ttl);
            self.push_authority(apex, RrType::SOA, set, Some(ttl));
        }
        self.proof(denial);
    }

    /// A referral: the cut's NS, its DS or the proof that there is none, and glue.
    fn referral(&mut self, cut: &'z Name, node: &'z Node) {
        let Some(ns) = node.get(&RrType::NS) else {
            return;
        };
        self.push_authority(cut, RrType::NS, ns, None);
        if self.dnssec {
            // RFC 4035 §3.1.4: "MUST include the DS RRset ... or an NSEC RR proving that no DS
            // RRset exists, along with the RRSIGs" when DO is set.
            match node.get(&RrType::DS).filter(|s| !s.rdatas.is_empty()) {
                Some(ds) => self.push_authority(cut, RrType::DS, ds, None),
                None => self.proof(Denial::NoData { name: cut }),
            }
        }
        self.additional_for(RrType::NS, ns, true);
    }

    /// Addresses of in-zone NS, MX and SRV targets for the additional section.
    fn additional_for(&mut self, rtype: RrType, set: &'z RRset, required: bool) {
        if !matches!(rtype, RrType::NS | RrType::MX | RrType::SRV) {
            return;
        }
        let zone = &self.zone.zone;
        for rdata in set.rdatas.iter().take(MAX_ADDITIONAL_TARGETS) {
            let Some(target) = target_of(rtype, rdata) else {
                continue;
            };
            let Some((owner, node)) = zone.nodes.get_key_value(&target.to_name()) else {
                continue;
            };
            for rtype in [RrType::A, RrType::AAAA] {
                let Some(set) = node.get(&rtype).filter(|s| !s.rdatas.is_empty()) else {
                    continue;
                };
                if !self.additional.iter().any(|i| std::ptr::eq(i.set, set)) {
                    self.additional.push(Item {
                        owner,
                        rtype,
                        set,
                        ttl: None,
                        required,
                    });
                }
            }
        }
    }

    /// Writes the authority and additional sections; a required unit that does not fit sets TC.
    fn write_tail(&mut self, w: &mut MessageWriter<'_, '_>) {
        let authority = std::mem::take(&mut self.authority);
        let additional = std::mem::take(&mut self.additional);
        let sections = [
            (Section::Authority, authority),
            (Section::Additional, additional),
        ];
        for (section, items) in sections {
            for item in items {
                // Authority and additional data may be a delegation's NS or glue: unsigned.
                let signs =
                    self.online.is_some() && online::signs(&self.zone.zone, item.owner, item.rtype);
                let made = signs
                    .then(|| self.sign_online(item.owner, item.rtype, item.set))
                    .flatten();
                let signatures = match &made {
                    Some(signed) => Signatures::Made(&signed.rrsigs),
                    None => self.signatures(),
                };
                let (owner, rtype, set) = (item.owner, item.rtype, item.set);
                match write_rrset(w, section, owner, rtype, set, item.ttl, signatures) {
                    Ok(()) if section == Section::Authority => {
                        self.note_ttl(1, item.ttl.unwrap_or(item.set.ttl))
                    }
                    Ok(()) => {}
                    Err(Full) if item.required => {
                        w.set_flag(FLAG_TC);
                        return;
                    }
                    Err(Full) => {}
                }
            }
            if section == Section::Authority && !self.write_compact_nsec(w) {
                w.set_flag(FLAG_TC);
                return;
            }
        }
    }

    /// Writes the compact denial NSEC (RFC 9824) with its RRSIGs, if the answer has one;
    /// false if it does not fit.
    fn write_compact_nsec(&mut self, w: &mut MessageWriter<'_, '_>) -> bool {
        let Some((owner, set)) = self.online.as_mut().and_then(|o| o.nsec.take()) else {
            return true;
        };
        let Some(signed) = self.sign_online(&owner, RrType::NSEC, &set) else {
            return true;
        };
        let signatures = Signatures::Made(&signed.rrsigs);
        let written = write_rrset(
            w,
            Section::Authority,
            &owner,
            RrType::NSEC,
            &set,
            None,
            signatures,
        );
        if written.is_ok() {
            self.note_ttl(1, set.ttl);
        }
        written.is_ok()
    }
}

/// Which RRSIGs go with an RRset.
#[derive(Clone, Copy)]
enum Signatures<'z> {
    /// None (no DO bit).
    Omitted,
    /// As stored in the zone.
    Stored,
    /// As stored, with condensed MTL signatures made full with these full signatures' ladders
    /// (the query carried EDNS option 65050), unless the query names the ladder by its SigTag.
    FullMtl(&'z [MtlLadder], &'z SigTags),
    /// Made by online signing ([`crate::online`]), with the RRset's TTL.
    Made(&'z [Vec<u8>]),
}

/// Writes an RRset and its RRSIGs as one unit.
fn write_rrset(
    w: &mut MessageWriter<'_, '_>,
    section: Section,
    owner: &Name,
    rtype: RrType,
    set: &RRset,
    ttl: Option<u32>,
    signatures: Signatures<'_>,
) -> Result<(), Full> {
    let mark = w.mark();
    let owner = owner.as_wire();
    for rdata in &set.rdatas {
        w.record(
            section,
            owner,
            rtype,
            Class::IN,
            ttl.unwrap_or(set.ttl),
            rdata,
        );
    }
    let sig_ttl = ttl.unwrap_or(set.rrsig_ttl);
    match signatures {
        Signatures::Omitted => {}
        Signatures::Stored => {
            for sig in &set.rrsigs {
                w.record(section, owner, RrType::RRSIG, Class::IN, sig_ttl, sig);
            }
        }
        Signatures::Made(rrsigs) => {
            for sig in rrsigs {
                let ttl = ttl.unwrap_or(set.ttl);
                w.record(section, owner, RrType::RRSIG, Class::IN, ttl, sig);
            }
        }
        Signatures::FullMtl(ladders, held) => {
            for sig in &set.rrsigs {
                let full = MtlLadder::expand(ladders, sig, held);
                let rdata = full.as_deref().unwrap_or(sig);
                w.record(section, owner, RrType::RRSIG, Class::IN, sig_ttl, rdata);
            }
        }
    }
    w.commit(mark)
}

#[cfg(test)]
#[path = "answer_tests.rs"]
mod tests;
