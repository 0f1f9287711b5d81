//! The responses of a validating resolver (RFC 4035 §3.2, RFC 6840 §5.7-5.9), written in
//! wire format for [`super::cache::ResponseCache`] to store and serve:
//!
//! - Secure, Insecure and Indeterminate answers carry the validated answer chain (CNAMEs, then
//!   the QTYPE RRset); negative answers the SOA in the authority section. With DO, the RRSIGs
//!   that verified each RRset and the NSEC/NSEC3 RRsets of the proofs are included (RFC 4035
//!   §3.1.1, §3.1.3). AD is set by the cache when serving, for Secure data only.
//! - Bogus answers are SERVFAIL with an Extended DNS Error (RFC 8914): the validator's code
//!   (e.g. 6 DNSSEC Bogus, 7 Signature Expired) and its reason as EXTRA-TEXT.
//! - With CD (RFC 4035 §3.2.2), the data as the authorities sent it, unvalidated: a client that
//!   validates itself gets what it needs to find out why.
//! - A resolution that got no usable response is SERVFAIL with EDE 22 (No Reachable
//!   Authority) or, when a work limit stopped it, EDE 0 (Other) naming the limit.
//! - A compact denial of existence (RFC 9824) gets the RCODE [`super::compact`] chooses.
//!
//! The response has ID 0 and RD, AD clear, RA set; an OPT record (last) only when the query
//! had one, advertising [`RESPONSE_UDP_PAYLOAD`], with DO and CO as the query had them. What
//! the cache patches when it serves the response (TTL offsets, the end of the question, the
//! OPT record) and what its lifetime depends on are recorded as it is written ([`Layout`]):
//! the cache never parses it.

use pqdns_core::dnssec::validate::Status;
use pqdns_core::message::Message;
use pqdns_core::wire::rdata::Soa;
use pqdns_core::wire::{
    Ede, Header, MessageWriter, Rcode, Section, EDNS_CO, EDNS_DO, FLAG_AA, FLAG_CD, FLAG_QR,
    FLAG_RA, OPTION_EDE,
};
use pqdns_core::{Record, RrType};

use super::compact;
use super::query::ClientQuery;
use crate::answer::Answer;
use crate::resolve::ResolveError;

/// UDP payload size the service advertises in its responses, bytes (DNS Flag Day 2020).
pub const RESPONSE_UDP_PAYLOAD: u16 = 1232;
/// Largest response written, bytes (the TCP length field's maximum); UDP clients get less
/// through truncation.
const MAX_RESPONSE: usize = 65_535;
/// Longest EDE EXTRA-TEXT sent, bytes.
const MAX_EXTRA_TEXT: usize = 200;

/// A response written for the cache.
#[derive(Clone)]
pub(crate) struct Written {
    /// The message (ID 0).
    pub(crate) message: Vec<u8>,
    /// Where its parts are, recorded while writing it.
    pub(crate) layout: Layout,
    /// The data is Secure (AD for clients that want it).
    pub(crate) secure: bool,
    /// The data was validated, Secure or proven Insecure, without CD: it may be served
    /// stale (RFC 8767, [`super::stale`]).
    pub(crate) validated: bool,
}

/// What [`super::cache::ResponseCache`] needs to know about a [`Written`] message, recorded
/// while writing it (offsets in bytes from the message's start).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Offsets of the TTL fields of every record but OPT, in message order.
    pub(crate) ttl_offsets: Vec<usize>,
    /// End of the question section.
    pub(crate) question_end: usize,
    /// Start of the OPT record (the last record), if any.
    pub(crate) opt_at: Option<usize>,
    /// The RCODE written.
    pub(crate) rcode: Rcode,
    /// Records in the answer section.
    pub(crate) answers: usize,
    /// The smallest TTL of the records but OPT, if any.
    pub(crate) min_ttl: Option<u32>,
    /// Without answers, min(SOA TTL, SOA MINIMUM) of the (last) SOA record in the authority
    /// section (RFC 2308 §5), if any.
    pub(crate) negative_ttl: Option<u32>,
}

/// How the names of a response are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Names {
    /// Compressed (RFC 1035 §4.1.4), also against the question.
    Compressed,
    /// Uncompressed: the bytes after the question do not depend on it, so the response can be
    /// served to another question spliced in ([`super::cache`]: the responses kept per denial
    /// proof).
    Uncompressed,
}

/// The response to `query` from a resolution's `answer`, with `names`.
pub(crate) fn from_answer(query: &ClientQuery, answer: &Answer, names: Names) -> Written {
    let secure = answer.status().is_secure();
    if query.checking_disabled() {
        return unvalidated(query, answer, secure, names);
    }
    if let Status::Bogus(reason) = answer.status() {
        return failure(query, Rcode::SERVFAIL, reason.ede, &reason.text);
    }
    let rcode = answer.rcode();
    if rcode != Rcode::NOERROR && rcode != Rcode::NXDOMAIN {
        let text = format!("the authorities answered {rcode}");
        return failure(query, Rcode::SERVFAIL, Ede::NO_REACHABLE_AUTHORITY, &text);
    }
    if let Some(referral) = answer.referral() {
        let text = format!("the forwarder sent a referral to {}", referral.zone);
        return failure(query, Rcode::SERVFAIL, Ede::NOT_AUTHORITATIVE, &text);
    }
    let rcode = compact::rcode(query, rcode, answer.denials());
    let dnssec = query.dnssec_ok();
    let mut answers = Vec::new();
    for set in answer.answers() {
        answers.extend(set.records());
        if dnssec {
            answers.extend(set.rrsig_records());
        }
    }
    let mut authority = Vec::new();
    for set in answer.authority() {
        if dnssec || set.rtype() == RrType::SOA {
            authority.extend(set.records());
            if dnssec {
                authority.extend(set.rrsig_records());
            }
        }
    }
    let negative = answers.is_empty() || rcode == Rcode::NXDOMAIN;
    if negative && !secure && authority.is_empty() {
        // An unsigned negative answer: the SOA the authority sent (RFC 2308 §3), for caches.
        if let Some(last) = answer.unvalidated_messages().last() {
            authority.extend(
                last.authority
                    .iter()
                    .filter(|r| r.rtype == RrType::SOA)
                    .cloned(),
            );
        }
    }
    let validated = matches!(answer.status(), Status::Secure(_) | Status::Insecure(_));
    Written {
        validated,
        ..write(query, rcode, &answers, &authority, None, names).secure(secure)
    }
}

/// The response to `query` when resolution failed: SERVFAIL with an EDE naming why.
pub(crate) fn from_error(query: &ClientQuery, error: &ResolveError) -> Written {
    let ede = match error {
        ResolveError::WorkLimit(_) => Ede::OTHER,
        _ => Ede::NO_REACHABLE_AUTHORITY,
    };
    failure(query, Rcode::SERVFAIL, ede, &error.to_string())
}

/// A response without data: `rcode` with EDE `ede` and `text` (SERVFAIL, or REFUSED for
/// clients outside the allow-list).
pub(crate) fn failure(query: &ClientQuery, rcode: Rcode, ede: Ede, text: &str) -> Written {
    write(query, rcode, &[], &[], Some((ede, text)), Names::Compressed)
}

/// CD: the data of every response the resolution used (the answer, then each CNAME
/// target's), and the last one's authority section for a negative or wildcard answer.
fn unvalidated(query: &ClientQuery, answer: &Answer, secure: bool, names: Names) -> Written {
    let dnssec = query.dnssec_ok();
    let shown = |r: &Record| {
        dnssec
            || r.rtype == query.qtype
            || !matches!(r.rtype, RrType::RRSIG | RrType::NSEC | RrType::NSEC3)
    };
    let messages = answer.unvalidated_messages();
    let mut answers: Vec<Record> = Vec::new();
    for m in messages {
        for r in m.answers.iter().filter(|r| shown(r)) {
            if !answers.contains(r) {
                answers.push(r.clone());
            }
        }
    }
    let authority: Vec<Record> = messages
        .last()
        .map(|m| {
            m.authority
                .iter()
                .filter(|r| {
                    shown(r)
                        && matches!(
                            r.rtype,
                            RrType::SOA | RrType::NSEC | RrType::NSEC3 | RrType::RRSIG
                        )
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let received = messages.last().map_or(Rcode::SERVFAIL, Message::rcode);
    let rcode = compact::rcode(query, received, answer.denials());
    write(query, rcode, &answers, &authority, None, names).secure(secure)
}

impl Written {
    fn secure(mut self, secure: bool) -> Written {
        self.secure = secure;
        self
    }

    /// With AA set (RFC 1035 §4.1.1: the responder is an authority for the QNAME), for the
    /// answers of local zones ([`crate::policy::local_zone`]).
    pub(crate) fn authoritative(mut self) -> Written {
        self.message[2] |= (FLAG_AA >> 8) as u8;
        self
    }
}

/// Writes the message (not Secure): question as the client sent it, the records with
/// `names`, OPT with `ede` if the query had EDNS; records its [`Layout`] on the way.
pub(crate) fn write(
    query: &ClientQuery,
    rcode: Rcode,
    answers: &[Record],
    authority: &[Record],
    ede: Option<(Ede, &str)>,
    names: Names,
) -> Written {
    // RFC 8914 §2: INFO-CODE, then EXTRA-TEXT (UTF-8, not NUL-terminated).
    let mut option = Vec::new();
    if let Some((code, text)) = ede {
        option.extend(code.0.to_be_bytes());
        let mut end = text.len().min(MAX_EXTRA_TEXT);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        option.extend_from_slice(&text.as_bytes()[..end]);
    }
    // RA says recursion is available to this client (RFC 1035 §4.1.1): not when REFUSED.
    let ra = if rcode == Rcode::REFUSED { 0 } else { FLAG_RA };
    let header = Header {
        id: 0,
        flags: FLAG_QR | ra | (query.header.flags & FLAG_CD),
    };
    let mut out = Vec::with_capacity(512);
    let mut w = MessageWriter::new(&mut out, 0, MAX_RESPONSE, header);
    if names == Names::Uncompressed {
        w = w.without_compression();
    }
    // The question and OPT fit: the query came in a message of at most 65535 bytes.
    let _fits = w.question(query.qname.as_wire(), query.qtype, query.qclass);
    let mut layout = Layout {
        ttl_offsets: Vec::with_capacity(answers.len() + authority.len()),
        question_end: w.used(),
        opt_at: None,
        rcode,
        answers: answers.len(),
        min_ttl: None,
        negative_ttl: None,
    };
    if let Some(edns) = query.edns {
        let mut flags = if edns.dnssec_ok { EDNS_DO } else { 0 };
        if query.compact_ok() {
            flags |= EDNS_CO;
        }
        let _fits = w.set_opt(RESPONSE_UDP_PAYLOAD, 0, flags);
        if ede.is_some() {
            let _fits = w.add_option(OPTION_EDE, &option);
        }
    }
    for (section, records) in [(Section::Answer, answers), (Section::Authority, authority)] {
        let mark = w.mark();
        for r in records {
            let at = w.record(
                section,
                r.owner.as_wire(),
                r.rtype,
                r.class,
                r.ttl,
                &r.rdata,
            );
            layout.ttl_offsets.push(at);
            layout.min_ttl = Some(layout.min_ttl.map_or(r.ttl, |t| t.min(r.ttl)));
            if answers.is_empty() && section == Section::Authority && r.rtype == RrType::SOA {
                let minimum = Soa::parse(&r.rdata).map_or(0, |s| s.minimum);
                layout.negative_ttl = Some(r.ttl.min(minimum));
            }
        }
        if w.commit(mark).is_err() {
            // Beyond 65535 bytes no transport can carry it.
            return write(
                query,
                Rcode::SERVFAIL,
                &[],
                &[],
                Some((Ede::OTHER, "answer too large")),
                names,
            );
        }
    }
    // The OPT record goes last, where the writer stands now.
    layout.opt_at = w.has_opt().then(|| w.used());
    w.finish(rcode);
    Written {
        message: out,
        layout,
        secure: false,
        validated: false,
    }
}

#[cfg(test)]
mod tests {
    use pqdns_core::message::Question;
    use pqdns_core::wire::{Edns, MessageView, HEADER_LEN, OPT_LEN};
    use pqdns_core::{Class, Name};

    use super::*;
    use crate::service::query::{parse, Parsed};

    /// The layout found by parsing `message`, as the cache did before it was recorded.
    fn parsed(message: &[u8]) -> Layout {
        let view = MessageView::parse(message).unwrap();
        let mut layout = Layout {
            ttl_offsets: Vec::new(),
            question_end: HEADER_LEN,
            opt_at: None,
            rcode: view.rcode(),
            answers: usize::from(view.counts()[1]),
            min_ttl: None,
            negative_ttl: None,
        };
        for section in [Section::Answer, Section::Authority, Section::Additional] {
            for r in view.records(section) {
                layout.ttl_offsets.push(r.ttl_offset());
                layout.min_ttl = Some(layout.min_ttl.map_or(r.ttl(), |t| t.min(r.ttl())));
                if layout.answers == 0 && section == Section::Authority && r.rtype() == RrType::SOA
                {
                    let minimum = Soa::parse(&r.rdata()).map_or(0, |s| s.minimum);
                    layout.negative_ttl = Some(r.ttl().min(minimum));
                }
            }
        }
        if let Some(q) = view.question() {
            layout.question_end = q.qname.offset() + q.qname.decode().as_wire().len() + 4;
        }
        layout.opt_at = view.opt().map(|o| {
            message.len() - OPT_LEN - o.options().map(|(_, d)| 4 + d.len()).sum::<usize>()
        });
        layout
    }

    fn query(name: &str, edns: Option<Edns>) -> ClientQuery {
        let q = Question {
            qname: name.parse().unwrap(),
            qtype: RrType::A,
            qclass: pqdns_core::Class::IN,
        };
        match parse(&Message::query(1, q, true, edns).to_wire()) {
            Parsed::Query(q) => q,
            other => panic!("{other:?}"),
        }
    }

    fn record(owner: &str, rtype: RrType, ttl: u32, rdata: &[u8]) -> Record {
        Record {
            owner: owner.parse::<Name>().unwrap(),
            rtype,
            class: Class::IN,
            ttl,
            rdata: rdata.to_vec(),
        }
    }

    /// Known answers: the layout recorded while writing equals what parsing finds, for an
    /// answer (a CNAME chain, compressed), NXDOMAIN with an SOA, a failure with an EDE, and
    /// one too large for any transport, each with and without OPT.
    #[test]
    fn the_recorded_layout_is_what_parsing_finds() {
        let mut soa = b"\x02ns\x07example\x00\x02hm\x07example\x00".to_vec();
        for field in [1u32, 7200, 3600, 1_209_600, 60] {
            soa.extend(field.to_be_bytes());
        }
        let chain = [
            record(
                "www.example.",
                RrType::CNAME,
                300,
                b"\x03web\x07example\x00",
            ),
            record("web.example.", RrType::A, 60, &[192, 0, 2, 1]),
            record("web.example.", RrType::A, 60, &[192, 0, 2, 2]),
        ];
        let authority = [record("example.", RrType::SOA, 900, &soa)];
        let txt = vec![0xffu8; 256];
        let huge: Vec<Record> = (0..300)
            .map(|_| record("www.example.", RrType::TXT, 5, &txt))
            .collect();
        for edns in [None, Some(Edns::dnssec_ok(1232))] {
            let q = query("WwW.Example.", edns.clone());
            let c = Names::Compressed;
            let shapes = [
                write(&q, Rcode::NOERROR, &chain, &[], None, c),
                write(&q, Rcode::NOERROR, &chain, &authority, None, c),
                write(&q, Rcode::NXDOMAIN, &[], &authority, None, c),
                write(&q, Rcode::NOERROR, &[], &[], None, c),
                failure(&q, Rcode::SERVFAIL, Ede::DNSSEC_BOGUS, "bogus"),
                write(&q, Rcode::NOERROR, &huge, &[], None, c),
                write(
                    &q,
                    Rcode::NOERROR,
                    &chain,
                    &authority,
                    None,
                    Names::Uncompressed,
                ),
            ];
            for (i, w) in shapes.iter().enumerate() {
                assert_eq!(w.layout, parsed(&w.message), "shape {i}, EDNS {edns:?}");
            }
            // The NXDOMAIN's negative TTL: min(SOA TTL 900, MINIMUM 60).
            assert_eq!(shapes[2].layout.negative_ttl, Some(60));
            assert_eq!(shapes[0].layout.ttl_offsets.len(), 3);
            assert_eq!(shapes[4].layout.opt_at.is_some(), edns.is_some());
            assert_eq!(shapes[5].layout.rcode, Rcode::SERVFAIL, "too large");
            // Uncompressed: no pointer anywhere, so longer by what compression saved.
            let body = &shapes[6].message[shapes[6].layout.question_end..];
            assert!(shapes[6].message.len() > shapes[1].message.len());
            assert!(
                !body.windows(2).any(|w| w == [0xc0, 0x0c]),
                "no pointer to the QNAME"
            );
        }
    }
}
