//! Zone transfers out: AXFR (RFC 5936) and IXFR (RFC 1995), synchronously and without I/O. The stream transports decide who may transfer
//! ([`crate::acl::AllowList`]) and write the messages this module builds.
//!
//! - **Content** (RFC 5936 §2.2, §3): the signed zone as served: the SOA, then every RRset of
//!   the name tree in canonical order with its RRSIGs (DNSKEY, NSEC, DS, delegations, glue and
//!   occluded data included), then the NSEC3 RRsets of `Zone::nsec3`, then the same SOA again.
//!   The SOA's own RRSIGs travel with the apex's other RRsets.
//!   An online zone (`crate::online`) goes out without what signing puts in it (its
//!   unsigned data, as Knot's onlinesign module transfers): a secondary signs it online too.
//! - **Messages** (RFC 5936 §2.2.1–§2.2.5): each at most 65535 bytes, whole RRs only (an RRset
//!   may continue in the next message, which §2.2 allows), owner and RFC 1035 RDATA names
//!   compressed; every message carries the query's ID and question; QR and AA set, TC, RA, AD
//!   and CD clear, RD copied; an OPT record in the first message when the query had one.
//!   A record too large for any message ends the transfer with SERVFAIL (§2.2 error message).
//! - **Snapshot**: a transfer keeps the catalog it started with, so a reload during a transfer
//!   neither mixes two versions nor changes the final SOA.
//! - **Errors**: a transfer of a name that is not the apex of a zone we serve, or of a class
//!   other than IN, is answered NOTAUTH (§2.2.1 note e).
//! - **TSIG** (RFC 8945 §5.3.1): a transfer answering a signed request (verified by the
//!   pipeline, `crate::request::verify_tsig`) signs every message: the first after the
//!   request's MAC, each later one after the prior message's MAC with the timers only. Each
//!   message is written with room for its TSIG record.
//! - **IXFR** (RFC 1995): a request whose SOA serial the zone's journal reaches back to
//!   ([`crate::journal`]) gets the differences since (§4: the current SOA, then per version the
//!   old SOA, deletions, new SOA, additions, then the current SOA again); one whose serial is
//!   the same or newer (RFC 1982 serial arithmetic) gets the single current SOA (§2); any other
//!   gets the whole zone in AXFR form (§4).
//! - **UDP**: RFC 5936 §4.2 leaves AXFR over UDP undefined and names no RCODE; the UDP path
//!   answers AXFR and IXFR with REFUSED, as it does for clients outside the allow-list, so the
//!   reply reveals nothing about the allow-list. DoH answers them REFUSED too.
//!
//! Memory per transfer: one message buffer (at most 65535 bytes) and a cursor (one name);
//! records are read from the shared zone, never copied.

use std::ops::Bound;
use std::sync::Arc;

use pqdns_core::serial::Serial;
use pqdns_core::wire::query::Query;
use pqdns_core::wire::rdata::Soa;
use pqdns_core::wire::tsig::{self, Digest, Key, Mac};
use pqdns_core::wire::{Header, MessageWriter, Rcode, Section, EDNS_DO, FLAG_AA, FLAG_CD};
use pqdns_core::zone::Node;
use pqdns_core::{Class, Name, RrType, Zone};

use crate::answer::MAX_STREAM_MESSAGE;
use crate::catalog::Catalog;
use crate::journal::Change;

/// QTYPE IXFR (RFC 1995 §3).
pub(crate) const IXFR: RrType = RrType(251);

/// Where the next record to send is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Pos {
    /// The leading SOA.
    LeadingSoa,
    /// At `name`, RRset `rtype`, record `index` (RDATAs first, then RRSIGs).
    Node(Name, RrType, usize),
    /// The NSEC3 RRset at hashed `name`, record `index` (RDATAs, then RRSIGs).
    Nsec3(Name, usize),
    /// IXFR: record `index` of journal change `change` (counted from the client's serial).
    Change(usize, usize),
    /// The trailing SOA.
    TrailingSoa,
}

/// What the next call to [`Transfer::next_message`] writes.
#[derive(Debug)]
enum State {
    /// One error message with this RCODE.
    Error(Rcode),
    /// One message holding the current SOA (IXFR from an up-to-date client).
    SoaOnly,
    /// The zone, from this position.
    Records(Pos),
    /// Nothing: the transfer is over.
    Done,
}

/// One record to send, borrowed from the zone.
struct Rec<'z> {
    owner: &'z Name,
    rtype: RrType,
    ttl: u32,
    rdata: &'z [u8],
    /// Position of this record, as (phase, type key, index); the owner completes it.
    phase: Phase,
    key: RrType,
    index: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Leading,
    Node,
    Nsec3,
    /// Journal change number.
    Change(usize),
    Trailing,
}

impl Rec<'_> {
    fn pos(&self) -> Pos {
        match self.phase {
            Phase::Leading => Pos::LeadingSoa,
            Phase::Node => Pos::Node(self.owner.clone(), self.key, self.index),
            Phase::Nsec3 => Pos::Nsec3(self.owner.clone(), self.index),
            Phase::Change(change) => Pos::Change(change, self.index),
            Phase::Trailing => Pos::TrailingSoa,
        }
    }
}

/// A zone transfer in progress: call [`Transfer::next_message`] until it returns `None`.
#[derive(Debug)]
pub(crate) struct Transfer {
    catalog: Arc<Catalog>,
    /// The zone transferred (the QNAME), when we serve it.
    origin: Name,
    /// The query's header, CD cleared.
    header: Header,
    qtype: RrType,
    qclass: Class,
    /// EDNS flags (DO) of the OPT record for the first message, when the query had one.
    opt: Option<u16>,
    /// IXFR answered from the journal: the client's serial.
    ixfr_from: Option<u32>,
    state: State,
    messages: usize,
    records: usize,
    /// The request's TSIG key and the MAC the next message's digest starts with (the
    /// request's, then each message's).
    tsig: Option<Box<(Key, Mac)>>,
}

impl Transfer {
    /// Starts answering the accepted query `q` if it is an AXFR or IXFR request, from the
    /// `catalog` snapshot; `tsig`: the key and MAC of a signed request, whose answer is
    /// signed. Returns `None` for any other query.
    pub(crate) fn start(
        catalog: Arc<Catalog>,
        q: &Query<'_>,
        tsig: Option<(Key, Mac)>,
    ) -> Option<Transfer> {
        if !matches!(q.qtype, RrType::AXFR | IXFR) {
            return None;
        }
        let qname = q.qname.to_name();
        let served = catalog
            .find(&qname, RrType::SOA)
            .filter(|z| z.zone.origin == qname && q.qclass == Class::IN);
        let mut ixfr_from = None;
        let state = if served.is_some_and(|z| z.expired) {
            // An expired secondary zone is not given out (RFC 1035 §4.3.5).
            State::Error(Rcode::SERVFAIL)
        } else if let Some(zone) = served {
            let client_serial = q
                .message
                .records(Section::Authority)
                .find(|r| r.rtype() == RrType::SOA)
                .and_then(|r| Soa::parse(&r.rdata()).map(|s| s.serial));
            match (q.qtype, client_serial, zone.zone.soa_fields()) {
                // RFC 1995 §2: "If an IXFR query with the same or newer version number than
                // that of the server is received, it is replied to with a single SOA record".
                // Serials 2^31 apart compare neither way (RFC 1982 §3.2): the whole zone then.
                (IXFR, Some(theirs), Some(ours)) if Serial(theirs) >= Serial(ours.serial) => {
                    State::SoaOnly
                }
                (IXFR, Some(theirs), _) => {
                    ixfr_from = zone.journal.since(theirs).map(|_| theirs);
                    State::Records(Pos::LeadingSoa)
                }
                _ => State::Records(Pos::LeadingSoa),
            }
        } else {
            // RFC 5936 §2.2.1 note e: "If a server is not authoritative for the queried zone,
            // the server SHOULD set the value to NotAuth(9)."
            State::Error(Rcode::NOTAUTH)
        };
        Some(Transfer {
            catalog,
            origin: qname,
            // RFC 5936 §2.2.1 note d: Z, AD and CD are "mbz": "The server MUST set this bit
            // to 0" (AD is never copied; CD is cleared here).
            header: Header {
                id: q.header.id,
                flags: q.header.flags & !FLAG_CD,
            },
            qtype: q.qtype,
            qclass: q.qclass,
            opt: q.edns.map(|e| if e.dnssec_ok() { EDNS_DO } else { 0 }),
            ixfr_from,
            state,
            messages: 0,
            records: 0,
            tsig: tsig.map(Box::new),
        })
    }

    /// The RCODE of the transfer's first message (NOERROR when the zone is sent).
    pub(crate) fn rcode(&self) -> Rcode {
        match self.state {
            State::Error(rcode) => rcode,
            _ => Rcode::NOERROR,
        }
    }

    /// The requested zone (the QNAME).
    pub(crate) fn zone(&self) -> &Name {
        &self.origin
    }

    /// The QTYPE: AXFR or IXFR.
    pub(crate) fn qtype(&self) -> RrType {
        self.qtype
    }

    /// Messages written so far.
    pub(crate) fn messages(&self) -> usize {
        self.messages
    }

    /// Whether the transfer sends journal differences (IXFR) rather than the whole zone.
    pub(crate) fn is_incremental(&self) -> bool {
        self.ixfr_from.is_some()
    }

    /// Records written so far (both SOA copies included).
    pub(crate) fn records(&self) -> usize {
        self.records
    }

    /// Writes the next message into `out[base..]` (`out` must hold at least `base` bytes; it is
    /// truncated to `base` first, the bytes before are kept) and returns its length in bytes
    /// (at most 65535), or `None` once the transfer is complete.
    pub(crate) fn next_message(&mut self, out: &mut Vec<u8>, base: usize) -> Option<usize> {
        let state = std::mem::replace(&mut self.state, State::Done);
        let room = self.tsig.as_ref().map_or(0, |t| t.0.record_len(0));
        let mut w = MessageWriter::response(out, base, MAX_STREAM_MESSAGE - room, self.header);
        // The question always fits in an empty 65535-byte message.
        let _fits = w.question(self.origin.as_wire(), self.qtype, self.qclass);
        // RFC 5936 §2.2.5: with an OPT in the query the server "SHOULD include one OPT RR in
        // the first response message"; later messages go without.
        if let Some(flags) = self.opt.filter(|_| self.messages == 0) {
            let _fits = w.set_opt(crate::answer::DEFAULT_UDP_PAYLOAD, 0, flags);
        }
        let catalog = Arc::clone(&self.catalog);
        let zone = catalog.find(&self.origin, RrType::SOA);
        let len = match (state, zone) {
            (State::Done, _) => return None,
            (State::Error(rcode), _) => w.finish(rcode),
            // The catalog is a snapshot, so the zone found at start cannot vanish.
            (State::SoaOnly | State::Records(_), None) => w.finish(Rcode::SERVFAIL),
            (State::SoaOnly, Some(zone)) => {
                w.set_flag(FLAG_AA);
                let m = w.mark();
                write_apex_soa(&mut w, &zone.zone);
                if w.commit(m).is_err() {
                    w.finish(Rcode::SERVFAIL)
                } else {
                    self.records += 1;
                    w.finish(Rcode::NOERROR)
                }
            }
            (State::Records(pos), Some(zone)) => {
                w.set_flag(FLAG_AA);
                let mut stopped_at = None;
                let mut written = 0;
                let changes = self.ixfr_from.and_then(|from| zone.journal.since(from));
                let records = match changes {
                    Some(changes) => journal_records_from(&zone.zone, changes, &pos),
                    None => records_from(&zone.zone, &pos),
                };
                let online = zone.online.is_some();
                let origin = &zone.zone.origin;
                let records = records.filter(|rec| {
                    !online || crate::online::transferred(origin, rec.owner, rec.rtype)
                });
                for rec in records {
                    let m = w.mark();
                    w.record(
                        Section::Answer,
                        rec.owner.as_wire(),
                        rec.rtype,
                        Class::IN,
                        rec.ttl,
                        rec.rdata,
                    );
                    if w.commit(m).is_err() {
                        stopped_at = Some(rec.pos());
                        break;
                    }
                    written += 1;
                }
                self.records += written;
                match stopped_at {
                    None => w.finish(Rcode::NOERROR),
                    Some(next) if written > 0 => {
                        self.state = State::Records(next);
                        w.finish(Rcode::NOERROR)
                    }
                    Some(next) => {
                        tracing::warn!(zone = %self.origin, at = ?next,
                            "a record does not fit in a 65535-byte message; transfer ended with SERVFAIL");
                        w.finish(Rcode::SERVFAIL)
                    }
                }
            }
        };
        let len = match &mut self.tsig {
            None => len,
            Some(t) => {
                let (key, prior) = &mut **t;
                let digest = if self.messages == 0 {
                    Digest::Response(prior.as_bytes())
                } else {
                    Digest::Subsequent(prior.as_bytes())
                };
                let fields = tsig::Fields::at(pqdns_core::time::now());
                // Our messages never hold 65535 additional records.
                *prior = tsig::sign(key, digest, out, base, &fields).ok()?;
                out.len() - base
            }
        };
        self.messages += 1;
        Some(len)
    }
}

/// Appends `zone`'s SOA record (owner the apex) to the answer section.
pub(crate) fn write_apex_soa(w: &mut MessageWriter<'_, '_>, zone: &Zone) {
    let apex = zone.origin.as_wire();
    w.record(
        Section::Answer,
        apex,
        RrType::SOA,
        Class::IN,
        zone.soa_ttl(),
        zone.soa(),
    );
}

/// The records of `node` at `owner` from (`key`, `index`) on, RRSIGs after each RRset's data;
/// the apex SOA's data is skipped (it opens and closes the transfer).
fn node_records<'z>(
    zone: &'z Zone,
    owner: &'z Name,
    node: &'z Node,
    from: Option<(RrType, usize)>,
) -> impl Iterator<Item = Rec<'z>> + 'z {
    let is_apex = *owner == zone.origin;
    node.iter()
        .filter(move |(t, _)| from.is_none_or(|(k, _)| **t >= k))
        .flat_map(move |(&key, set)| {
            let data = if is_apex && key == RrType::SOA {
                &set.rdatas[..0]
            } else {
                &set.rdatas[..]
            };
            let n = set.rdatas.len();
            let first = from.filter(|(k, _)| *k == key).map_or(0, |(_, i)| i);
            let rdatas = data.iter().enumerate().map(move |(i, rdata)| Rec {
                owner,
                rtype: key,
                ttl: set.ttl,
                rdata,
                phase: Phase::Node,
                key,
                index: i,
            });
            let sigs = set.rrsigs.iter().enumerate().map(move |(i, rdata)| Rec {
                owner,
                rtype: RrType::RRSIG,
                ttl: set.rrsig_ttl,
                rdata,
                phase: Phase::Node,
                key,
                index: n + i,
            });
            rdatas.chain(sigs).filter(move |r| r.index >= first)
        })
}

/// Every record of an IXFR answered from `changes` (RFC 1995 §4), from `pos` on: the current
/// SOA, each change's records (old SOA, deletions, new SOA, additions), the current SOA.
fn journal_records_from<'z>(
    zone: &'z Zone,
    changes: &'z [Arc<Change>],
    pos: &Pos,
) -> Box<dyn Iterator<Item = Rec<'z>> + 'z> {
    let (first, skip) = match pos {
        Pos::LeadingSoa => (0, 0),
        Pos::Change(change, index) => (*change, *index),
        _ => (changes.len(), 0),
    };
    let leading = matches!(pos, Pos::LeadingSoa).then(|| apex_soa(zone, Phase::Leading));
    let body = changes
        .iter()
        .enumerate()
        .skip(first)
        .flat_map(move |(c, change)| {
            let from = if c == first { skip } else { 0 };
            change
                .records()
                .iter()
                .enumerate()
                .skip(from)
                .map(move |(i, r)| Rec {
                    owner: &r.owner,
                    rtype: r.rtype,
                    ttl: r.ttl,
                    rdata: &r.rdata,
                    phase: Phase::Change(c),
                    key: r.rtype,
                    index: i,
                })
        });
    Box::new(
        leading
            .flatten()
            .into_iter()
            .chain(body)
            .chain(apex_soa(zone, Phase::Trailing)),
    )
}

/// `zone`'s apex SOA record as a record to send in `phase`.
fn apex_soa(zone: &Zone, phase: Phase) -> Option<Rec<'_>> {
    let (owner, node) = zone.nodes.get_key_value(&zone.origin)?;
    let set = node.get(&RrType::SOA)?;
    Some(Rec {
        owner,
        rtype: RrType::SOA,
        ttl: set.ttl,
        rdata: set.rdatas.first()?,
        phase,
        key: RrType::SOA,
        index: 0,
    })
}

/// Every record to send from `pos` to the end of the transfer.
///
/// RFC 5936 §2.2: "the first message MUST begin with the SOA resource record of the zone, and
/// the last message MUST conclude with the same SOA resource record."
fn records_from<'z>(zone: &'z Zone, pos: &Pos) -> Box<dyn Iterator<Item = Rec<'z>> + 'z> {
    let leading = matches!(pos, Pos::LeadingSoa)
        .then(|| apex_soa(zone, Phase::Leading))
        .flatten();
    let (node_start, node_from) = match pos {
        Pos::LeadingSoa => (Some(Bound::Unbounded), None),
        Pos::Node(name, key, index) => (
            Some(Bound::Included(name.clone())),
            Some((name.clone(), *key, *index)),
        ),
        _ => (None, None),
    };
    let nodes = node_start.into_iter().flat_map(move |start| {
        let from = node_from.clone();
        zone.nodes
            .range::<Name, _>((start, Bound::Unbounded))
            .flat_map(move |(owner, node)| {
                let resume = from
                    .as_ref()
                    .filter(|(name, _, _)| name == owner)
                    .map(|(_, k, i)| (*k, *i));
                node_records(zone, owner, node, resume)
            })
    });
    let (nsec3_start, nsec3_index) = match pos {
        Pos::LeadingSoa | Pos::Node(..) => (Some(Bound::Unbounded), None),
        Pos::Nsec3(name, index) => (
            Some(Bound::Included(name.clone())),
            Some((name.clone(), *index)),
        ),
        Pos::TrailingSoa | Pos::Change(..) => (None, None),
    };
    let nsec3 = nsec3_start.into_iter().flat_map(move |start| {
        let from = nsec3_index.clone();
        zone.nsec3
            .range::<Name, _>((start, Bound::Unbounded))
            .flat_map(move |(owner, set)| {
                let first = from
                    .as_ref()
                    .filter(|(name, _)| name == owner)
                    .map_or(0, |(_, i)| *i);
                let n = set.rdatas.len();
                let data = set.rdatas.iter().enumerate().map(move |(i, rdata)| Rec {
                    owner,
                    rtype: RrType::NSEC3,
                    ttl: set.ttl,
                    rdata,
                    phase: Phase::Nsec3,
                    key: RrType::NSEC3,
                    index: i,
                });
                let sigs = set.rrsigs.iter().enumerate().map(move |(i, rdata)| Rec {
                    owner,
                    rtype: RrType::RRSIG,
                    ttl: set.rrsig_ttl,
                    rdata,
                    phase: Phase::Nsec3,
                    key: RrType::NSEC3,
                    index: n + i,
                });
                data.chain(sigs).filter(move |r| r.index >= first)
            })
    });
    Box::new(
        leading
            .into_iter()
            .chain(nodes)
            .chain(nsec3)
            .chain(apex_soa(zone, Phase::Trailing)),
    )
}

#[cfg(test)]
mod tests {
    use pqdns_core::dnssec::nsec3::Nsec3Params;
    use pqdns_core::dnssec::sign::Denial;
    use pqdns_core::dnssec::Algorithm;
    use pqdns_core::message::{Message, Question};
    use pqdns_core::wire::{Edns, FLAG_QR};
    use pqdns_core::Record;

    use super::*;
    use crate::catalog::ServedZone;

    const SERIAL: u32 = 2026010101;

    fn origin() -> Name {
        "xfr.test.".parse().unwrap()
    }

    /// A zone signed with ML-DSA-44 (2420-byte signatures) and NSEC3, large enough to need
    /// several 64 KiB messages, with a delegation and glue.
    fn catalog() -> Arc<Catalog> {
        let mut text = format!(
            "@ SOA ns1 hostmaster {SERIAL} 7200 3600 1209600 300\n@ NS ns1\nns1 A 192.0.2.1\n\
             sub NS ns.sub\nns.sub A 192.0.2.53\n"
        );
        for i in 0..60 {
            text.push_str(&format!(
                "host{i} A 192.0.2.{i}\nhost{i} TXT \"host {i}\"\n"
            ));
        }
        Arc::new(crate::catalog::signed_for_tests(
            &origin(),
            &text,
            &[Algorithm::MlDsa44],
            Denial::Nsec3(Nsec3Params::default()),
        ))
    }

    fn request(qname: &Name, qtype: RrType, edns: bool) -> Message {
        let mut q = Message::query(
            0x4242,
            Question {
                qname: qname.clone(),
                qtype,
                qclass: Class::IN,
            },
            false,
            edns.then(|| Edns {
                udp_payload: 1232,
                ext_rcode: 0,
                version: 0,
                flags: 0,
                options: Vec::new(),
            }),
        );
        q.flags |= FLAG_CD;
        q
    }

    fn soa_record(serial: u32) -> Record {
        let mut rdata = Vec::new();
        rdata.extend_from_slice("ns1.xfr.test.".parse::<Name>().unwrap().as_wire());
        rdata.extend_from_slice("hostmaster.xfr.test.".parse::<Name>().unwrap().as_wire());
        for v in [serial, 7200, 3600, 1209600, 300] {
            rdata.extend(v.to_be_bytes());
        }
        Record {
            owner: origin(),
            rtype: RrType::SOA,
            class: Class::IN,
            ttl: 3600,
            rdata,
        }
    }

    /// Runs a transfer to the end; every message parsed, with its wire length.
    fn run(catalog: &Arc<Catalog>, query: &Message) -> Vec<(usize, Message)> {
        let wire = query.to_wire();
        let q = crate::request::parse(&wire, None).expect("an acceptable query");
        let mut xfr = Transfer::start(Arc::clone(catalog), &q, None).expect("a transfer");
        let mut out = Vec::new();
        let mut messages = Vec::new();
        loop {
            out.clear();
            out.extend([0xaa, 0xbb]);
            let Some(len) = xfr.next_message(&mut out, 2) else {
                break;
            };
            assert_eq!(&out[..2], &[0xaa, 0xbb], "bytes before the base are kept");
            assert_eq!(out.len(), len + 2, "written after the 2-byte base");
            messages.push((len, Message::parse(&out[2..]).unwrap()));
            assert!(messages.len() < 1000, "transfer does not end");
        }
        assert_eq!(xfr.messages(), messages.len());
        messages
    }

    /// A signed AXFR (RFC 8945 §5.3.1): every message carries a TSIG that verifies after the
    /// prior one's MAC (the first after the request's), the records are those of the unsigned
    /// transfer, and a message verified out of its place fails.
    #[test]
    fn signed_transfer_signs_every_message_in_a_chain() {
        use pqdns_core::wire::tsig::{find, Algorithm, Fields};
        use pqdns_core::wire::MessageView;
        let catalog = catalog();
        let key = Key::new(
            &"xfr-key.".parse().unwrap(),
            Algorithm::HmacSha256,
            b"secret",
        )
        .unwrap();
        let mut wire = request(&origin(), RrType::AXFR, false).to_wire();
        let now = pqdns_core::time::now();
        let mac = tsig::sign(&key, Digest::Request, &mut wire, 0, &Fields::at(now)).unwrap();
        let q = crate::request::parse(&wire, None).unwrap();
        let mut xfr = Transfer::start(Arc::clone(&catalog), &q, Some((key.clone(), mac))).unwrap();
        let unsigned = run(&catalog, &request(&origin(), RrType::AXFR, false));
        let (mut prior, mut out, mut n) = (mac, Vec::new(), 0);
        while let Some(len) = xfr.next_message(&mut out, 0) {
            assert!(len <= MAX_STREAM_MESSAGE);
            let view = MessageView::parse(&out)
                .unwrap_or_else(|e| panic!("message {n} of {len} bytes ({}): {e}", out.len()));
            let signed = find(&view).unwrap().expect("every message is signed");
            let digest = if n == 0 {
                Digest::Response(prior.as_bytes())
            } else {
                Digest::Subsequent(prior.as_bytes())
            };
            let wrong = if n == 0 {
                Digest::Request
            } else {
                Digest::Response(prior.as_bytes())
            };
            assert!(
                signed.verify(Some(&key), wrong, now).is_err(),
                "message {n}"
            );
            let v = signed.verify(Some(&key), digest, now).unwrap();
            let m = Message::parse(&out).unwrap();
            assert_eq!(v.len + key.record_len(0), len);
            assert_eq!(m.answers, unsigned[n].1.answers, "message {n}");
            prior = v.mac;
            n += 1;
        }
        assert_eq!(n, unsigned.len());
        assert!(n >= 3);
    }

    fn key(r: &Record) -> (String, u16, u32, Vec<u8>) {
        (
            r.owner.to_string().to_ascii_lowercase(),
            r.rtype.0,
            r.ttl,
            r.rdata.clone(),
        )
    }

    #[test]
    fn axfr_streams_the_whole_signed_zone_soa_first_and_last() {
        let catalog = catalog();
        let zone = &catalog.zones().next().unwrap().zone;
        let messages = run(&catalog, &request(&origin(), RrType::AXFR, true));
        assert!(
            messages.len() >= 3,
            "{} messages: the zone needs several",
            messages.len()
        );
        let mut records = Vec::new();
        for (i, (len, m)) in messages.iter().enumerate() {
            assert!(*len <= 65535);
            assert_eq!(m.id, 0x4242, "message {i}: the query's ID");
            assert!(m.has_flag(FLAG_QR) && m.has_flag(FLAG_AA), "message {i}");
            assert!(!m.has_flag(FLAG_CD), "CD must be zero (RFC 5936 §2.2.1)");
            assert_eq!((m.flags >> 11) & 0xf, 0, "opcode QUERY");
            assert_eq!(m.rcode(), Rcode::NOERROR);
            assert_eq!(m.questions.len(), 1, "message {i} carries the question");
            assert_eq!(m.questions[0].qname, origin());
            assert_eq!(m.questions[0].qtype, RrType::AXFR);
            assert!(m.authority.is_empty() && m.additional.is_empty());
            assert_eq!(m.edns.is_some(), i == 0, "OPT in the first message only");
            assert!(!m.answers.is_empty());
            records.extend(m.answers.iter().cloned());
        }
        let soa_at: Vec<usize> = (0..records.len())
            .filter(|&i| records[i].rtype == RrType::SOA)
            .collect();
        assert_eq!(
            soa_at,
            vec![0, records.len() - 1],
            "SOA first and last only"
        );
        assert_eq!(records[0], records[records.len() - 1]);
        // The rest is exactly the zone: every RRset, RRSIG, DNSKEY, NSEC3 and glue record once.
        let mut sent: Vec<_> = records[1..].iter().map(key).collect();
        let mut expected: Vec<_> = zone.records().iter().map(key).collect();
        sent.sort();
        expected.sort();
        assert_eq!(sent.len(), expected.len());
        assert!(sent == expected, "transferred records differ from the zone");
        for t in [
            RrType::DNSKEY,
            RrType::NSEC3,
            RrType::NSEC3PARAM,
            RrType::RRSIG,
        ] {
            assert!(records.iter().any(|r| r.rtype == t), "{t} transferred");
        }
        assert!(
            records
                .iter()
                .any(|r| r.owner.to_string() == "ns.sub.xfr.test."),
            "glue"
        );
    }

    #[test]
    fn ixfr_gets_one_soa_when_current_and_the_zone_when_behind() {
        let catalog = catalog();
        let mut q = request(&origin(), IXFR, false);
        q.authority.push(soa_record(SERIAL));
        let messages = run(&catalog, &q);
        assert_eq!(messages.len(), 1);
        let answers = &messages[0].1.answers;
        assert_eq!(answers.len(), 1);
        assert_eq!(Soa::parse(&answers[0].rdata).unwrap().serial, SERIAL);
        assert_eq!(messages[0].1.questions[0].qtype, IXFR);

        // A serial ahead of ours (RFC 1982: wraps around) also gets the single SOA.
        q.authority[0] = soa_record(SERIAL.wrapping_add(5));
        assert_eq!(run(&catalog, &q).len(), 1);

        q.authority[0] = soa_record(SERIAL - 1);
        let full = run(&catalog, &q);
        let total: usize = full.iter().map(|(_, m)| m.answers.len()).sum();
        let zone = &catalog.zones().next().unwrap().zone;
        assert_eq!(
            total,
            zone.record_count() + 1,
            "whole zone, SOA twice (RFC 1995 §4)"
        );
    }

    /// The next version of `zone`: `change` applied, the serial raised.
    fn next_version(zone: &ServedZone, change: impl FnOnce(&mut Zone)) -> ServedZone {
        let mut z = zone.zone.clone();
        change(&mut z);
        z.set_soa_serial(z.soa_serial() + 1);
        ServedZone::new(z).after(Some(zone))
    }

    #[test]
    fn ixfr_sends_the_journal_differences_and_applying_them_gives_the_zone() {
        let first = catalog().zones().next().unwrap().clone();
        let txt: Name = "host7.xfr.test.".parse().unwrap();
        let second = next_version(&first, |z| {
            z.insert(Record {
                owner: "new.xfr.test.".parse().unwrap(),
                rtype: RrType::A,
                class: Class::IN,
                ttl: 300,
                rdata: vec![192, 0, 2, 99],
            })
            .unwrap();
        });
        let third = next_version(&second, |z| {
            z.nodes.get_mut(&txt).unwrap().remove(&RrType::TXT);
        });
        assert_eq!(third.journal.changes().len(), 2);
        let catalog = Arc::new(Catalog::new([third.clone()]).unwrap());
        let mut q = request(&origin(), IXFR, false);
        q.authority.push(soa_record(SERIAL));
        let records: Vec<Record> = run(&catalog, &q)
            .into_iter()
            .flat_map(|(_, m)| m.answers)
            .collect();
        let soas: Vec<u32> = records
            .iter()
            .filter(|r| r.rtype == RrType::SOA)
            .map(|r| Soa::parse(&r.rdata).unwrap().serial)
            .collect();
        // RFC 1995 §4: current, (old, new) per version, current.
        let (s1, s3) = (SERIAL, SERIAL + 2);
        assert_eq!(soas, [s3, s1, s1 + 1, s1 + 1, s3, s3]);
        // Apply the differences to the first version: the result is the third.
        let mut have: Vec<_> = first.zone.records().iter().map(key).collect();
        // Each change is: old SOA, deletions, new SOA, additions.
        let mut adding = true;
        for r in &records[1..records.len() - 1] {
            if r.rtype == RrType::SOA {
                adding = !adding;
                if adding {
                    have.retain(|k| k.1 != RrType::SOA.0);
                    have.push(key(r));
                }
                continue;
            }
            if adding {
                have.push(key(r));
            } else {
                let at = have
                    .iter()
                    .position(|k| *k == key(r))
                    .expect("deleted record exists");
                have.swap_remove(at);
            }
        }
        let mut want: Vec<_> = third.zone.records().iter().map(key).collect();
        have.sort();
        want.sort();
        assert!(have == want, "differences applied give the current zone");
        assert!(
            records.len() < first.zone.record_count() / 4,
            "far smaller than AXFR"
        );

        // A serial the journal does not reach back to gets the whole zone.
        q.authority[0] = soa_record(SERIAL - 1);
        let total: usize = run(&catalog, &q).iter().map(|(_, m)| m.answers.len()).sum();
        assert_eq!(total, third.zone.record_count() + 1);
    }

    #[test]
    fn errors_notauth_and_not_a_transfer() {
        let catalog = catalog();
        let rcode_of = |q: &Message| {
            let m = run(&catalog, q);
            assert_eq!(m.len(), 1);
            assert_eq!(
                m[0].1.questions.len(),
                1,
                "error messages carry the question"
            );
            assert!(m[0].1.answers.is_empty());
            m[0].1.rcode()
        };
        let below: Name = "host1.xfr.test.".parse().unwrap();
        assert_eq!(
            rcode_of(&request(&below, RrType::AXFR, false)),
            Rcode::NOTAUTH
        );
        let other: Name = "example.org.".parse().unwrap();
        assert_eq!(
            rcode_of(&request(&other, RrType::AXFR, false)),
            Rcode::NOTAUTH
        );
        let a = request(&origin(), RrType::A, false).to_wire();
        let q = crate::request::parse(&a, None).unwrap();
        assert!(Transfer::start(Arc::clone(&catalog), &q, None).is_none());
    }

    #[test]
    fn a_record_too_large_for_any_message_ends_with_servfail() {
        let mut zone = Zone::from_records(origin(), vec![soa_record(1)]).unwrap();
        zone.insert(Record {
            owner: "big.xfr.test.".parse().unwrap(),
            rtype: RrType::TXT,
            class: Class::IN,
            ttl: 60,
            rdata: vec![b'x'; 65500],
        })
        .unwrap();
        let catalog = Arc::new(Catalog::new([ServedZone::new(zone)]).unwrap());
        let messages = run(&catalog, &request(&origin(), RrType::AXFR, false));
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0].1.answers.len(), 1, "the SOA");
        assert_eq!(messages[1].1.rcode(), Rcode::SERVFAIL);
        assert_eq!(messages[1].1.questions.len(), 1);
    }
}
