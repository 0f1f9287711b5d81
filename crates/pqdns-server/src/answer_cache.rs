//! Prepared answers: a zone served from memory answers the same query with the same bytes, so
//! the answer engine's output is kept per query and replayed. A replay copies the stored
//! message and patches the three parts that come from the query: the message ID, the RD and CD
//! flags (RFC 1035 §4.1.1, RFC 4035 §3.1.6) and the QNAME's letter case (RFC 4343 §4.1: the
//! question is echoed as sent). Names later in the message are compressed against the question,
//! so they follow its case in a replay exactly as in a fresh answer.
//!
//! The key is the query message itself, minus what a replay patches: every byte after the ID,
//! with RD and CD cleared and the QNAME lower-cased, without a COOKIE option (one entry for all
//! clients), plus the transport and our EDNS payload size (which bound the response). The response is a function of those bytes and the catalog,
//! so a query whose bytes were answered before needs no parsing at all: the key is built by one
//! scan of the QNAME's labels into the caller's output buffer (no allocation), hashed and looked
//! up. Only queries the engine parsed and answered are stored; a QNAME with a compression
//! pointer, or a query longer than [`MAX_KEY_LEN`], is never replayed.
//!
//! The cache belongs to one catalog: a reload builds a new catalog with an empty cache, so an
//! entry never outlives the zone data it came from. Memory is bounded by a byte budget counted
//! over keys, responses and a fixed overhead per entry; when an insert would exceed it, the
//! cache is emptied and fills again with the queries still being asked. Lookups take a shared
//! read lock and allocate nothing; only a miss takes the write lock.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

use pqdns_core::name::MAX_NAME_LEN;
use std::ops::Range;

use pqdns_core::wire::{
    replay, Header, Rcode, FLAG_CD, FLAG_RD, HEADER_LEN, OPTION_COOKIE, OPT_LEN,
};
use pqdns_core::RrType;

use pqdns_net::Transport;

use crate::answer::Outcome;
use crate::cookie::{self, CookieCheck};

/// Default memory budget of one catalog's prepared answers, in bytes.
pub(crate) const DEFAULT_ANSWER_CACHE_BYTES: usize = 32 << 20;
/// Bytes counted per entry besides its key and response (map slot, boxes, outcome).
const ENTRY_OVERHEAD: usize = 96;
/// Longest key, in bytes: transport and payload size (3 bytes), the query after its ID (10
/// header bytes, a question of at most 259 bytes, the rest) and a marker byte.
pub(crate) const MAX_KEY_LEN: usize = 512;

/// Appends the key of the query `packet`, answered over `transport` with our EDNS payload size
/// `udp_payload`, to `buf`. Returns the QNAME's length in bytes, or `None` (leaving `buf` as it
/// was) if the query has no key: shorter than a header and a question, a compressed or
/// malformed QNAME, an OPT record whose options do not fill its RDATA, or a key longer than
/// [`MAX_KEY_LEN`].
///
/// Of a COOKIE option (RFC 7873) only its presence is in the key: the cookies differ per
/// client, and the response holds ours in its last [`cookie::RESPONSE_COOKIE_LEN`] bytes, which a
/// replay fills in ([`Replayed::cookie`] says where the query's is). A COOKIE option of a
/// length RFC 7873 §5.2.2 refuses gives no key (the parser answers FORMERR).
fn write_key(
    packet: &[u8],
    transport: Transport,
    udp_payload: u16,
    buf: &mut Vec<u8>,
) -> Option<(usize, Option<Range<usize>>)> {
    // Only a query (QR clear, OPCODE QUERY) with one question can have been stored.
    if packet.len() + 2 > MAX_KEY_LEN
        || packet.len() < HEADER_LEN
        || packet[2] & 0xf8 != 0
        || packet[4..6] != [0, 1]
    {
        return None;
    }
    // The QNAME: plain labels up to the root label (length bytes are 0..=63, never letters).
    let mut end = HEADER_LEN;
    loop {
        let len = usize::from(*packet.get(end)?);
        end += 1 + len;
        if len == 0 {
            break;
        }
        if len > 63 || end - HEADER_LEN >= MAX_NAME_LEN {
            return None;
        }
    }
    let question_end = end + 4;
    if question_end > packet.len() {
        return None;
    }
    let start = buf.len();
    let flags = u16::from_be_bytes([packet[2], packet[3]]) & !(FLAG_RD | FLAG_CD);
    buf.push(u8::from(transport.is_stream()));
    buf.extend_from_slice(&udp_payload.to_be_bytes());
    buf.extend_from_slice(&flags.to_be_bytes());
    // The QNAME, packet[12..end], sits 1 byte further in the key (3 bytes in front, ID out).
    buf.extend_from_slice(&packet[4..question_end]);
    buf[start + HEADER_LEN + 1..start + end + 1].make_ascii_lowercase();
    let rest = &packet[question_end..];
    let mut cookie = None;
    // QDCOUNT 1, ANCOUNT 0, NSCOUNT 0, ARCOUNT 1, and an OPT record (root owner, TYPE 41)
    // whose RDLENGTH covers the rest: its fixed part, then its options without COOKIE.
    let one_opt = packet[4..12] == [0, 1, 0, 0, 0, 0, 0, 1] && rest.starts_with(&[0, 0, 41]);
    match rest.split_at_checked(OPT_LEN) {
        Some((fixed, mut options)) if one_opt => {
            if usize::from(u16::from_be_bytes([fixed[9], fixed[10]])) != options.len() {
                buf.truncate(start);
                return None;
            }
            // A marker byte keeps this form apart from raw bytes that look alike.
            buf.push(1);
            buf.extend_from_slice(&fixed[..9]);
            while let [c1, c0, l1, l0, tail @ ..] = options {
                let len = usize::from(u16::from_be_bytes([*l1, *l0]));
                let Some(next) = tail.get(len..) else {
                    buf.truncate(start);
                    return None;
                };
                if u16::from_be_bytes([*c1, *c0]) == OPTION_COOKIE {
                    let at = packet.len() - tail.len();
                    if cookie.is_some() || cookie::split(&tail[..len]).is_none() {
                        buf.truncate(start);
                        return None;
                    }
                    cookie = Some(at..at + len);
                    buf.extend_from_slice(&[*c1, *c0, 0, 0]);
                } else {
                    buf.extend_from_slice(&options[..4 + len]);
                }
                options = next;
            }
            if !options.is_empty() {
                buf.truncate(start);
                return None;
            }
        }
        _ => {
            buf.push(0);
            buf.extend_from_slice(rest);
        }
    }
    Some((end - HEADER_LEN, cookie))
}

/// A replayed answer: its outcome, and where the query's COOKIE option data is, if any.
pub(crate) struct Replayed {
    /// What the engine reported when it built the answer.
    pub outcome: Outcome,
    /// The query's COOKIE option data, as a range of the query's bytes.
    pub cookie: Option<Range<usize>>,
}

/// One stored answer: the response with ID 0 and RD/CD clear, and what the engine reported.
#[derive(Debug)]
struct Prepared {
    response: Box<[u8]>,
    rcode: Rcode,
    truncated: bool,
    qtype: Option<RrType>,
    cache_ttl: Option<u32>,
}

/// Prepared answers of one catalog, bounded by a byte budget.
#[derive(Debug)]
pub(crate) struct AnswerCache {
    max_bytes: usize,
    state: RwLock<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Keys come from clients, so the hasher is keyed per map (foldhash's random seed: no
    /// precomputed collisions), and several times cheaper than std's SipHash on short keys.
    map: HashMap<Box<[u8]>, Prepared, foldhash::fast::RandomState>,
    bytes: usize,
}

impl Default for AnswerCache {
    fn default() -> AnswerCache {
        AnswerCache::new(DEFAULT_ANSWER_CACHE_BYTES)
    }
}

impl AnswerCache {
    /// An empty cache holding at most `max_bytes` (0 disables it).
    pub(crate) fn new(max_bytes: usize) -> AnswerCache {
        AnswerCache {
            max_bytes,
            state: RwLock::new(State::default()),
        }
    }

    /// Writes the stored answer to the query `packet` (over `transport`, with our EDNS payload
    /// size `udp_payload`) into `out[base..]`, patched for the query, and returns its outcome.
    /// `None` on a miss (`out` is then truncated to `base`; `out[base..]` held the key). A
    /// response to a query with a COOKIE option ends in the placeholder for ours.
    pub(crate) fn replay(
        &self,
        packet: &[u8],
        transport: Transport,
        udp_payload: u16,
        out: &mut Vec<u8>,
        base: usize,
    ) -> Option<Replayed> {
        if self.max_bytes == 0 {
            return None;
        }
        out.truncate(base);
        let (qname_len, cookie) = write_key(packet, transport, udp_payload, out)?;
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        let prepared = state.map.get(&out[base..]);
        out.truncate(base);
        let p = prepared?;
        out.extend_from_slice(&p.response);
        // `write_key` read a header and a QNAME of `qname_len` bytes from `packet`.
        let query = Header::parse(packet)?;
        let qname = &packet[HEADER_LEN..HEADER_LEN + qname_len];
        replay::patch_for_query(&mut out[base..], query, FLAG_RD | FLAG_CD, qname);
        Some(Replayed {
            outcome: Outcome {
                len: p.response.len(),
                rcode: p.rcode,
                truncated: p.truncated,
                qtype: p.qtype,
                error: None,
                cache_ttl: p.cache_ttl,
                cookie: CookieCheck::Absent,
            },
            cookie,
        })
    }

    /// Stores `response`, the complete message the engine built for the query `packet` (over
    /// `transport` with our payload size `udp_payload`), and its `outcome`. The stored copy has
    /// ID 0 and RD/CD clear.
    pub(crate) fn store(
        &self,
        packet: &[u8],
        transport: Transport,
        udp_payload: u16,
        response: &[u8],
        outcome: &Outcome,
    ) {
        let mut key = Vec::new();
        if self.max_bytes == 0
            || response.len() < HEADER_LEN
            || write_key(packet, transport, udp_payload, &mut key).is_none()
        {
            return;
        }
        let cost = key.len() + response.len() + ENTRY_OVERHEAD;
        if cost > self.max_bytes {
            return;
        }
        let mut stored: Box<[u8]> = response.into();
        stored[..2].fill(0);
        let flags = u16::from_be_bytes([stored[2], stored[3]]) & !(FLAG_RD | FLAG_CD);
        stored[2..4].copy_from_slice(&flags.to_be_bytes());
        let prepared = Prepared {
            response: stored,
            rcode: outcome.rcode,
            truncated: outcome.truncated,
            qtype: outcome.qtype,
            cache_ttl: outcome.cache_ttl,
        };
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        if state.bytes + cost > self.max_bytes {
            state.map.clear();
            state.bytes = 0;
        }
        if state.map.insert(key.into_boxed_slice(), prepared).is_none() {
            state.bytes += cost;
        }
    }

    /// Bytes counted against the budget now.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .bytes
    }
}

#[cfg(test)]
mod tests {
    use pqdns_core::dnssec::sign::Denial;
    use pqdns_core::dnssec::Algorithm;
    use pqdns_core::{Name, RrType};

    use super::*;
    use pqdns_net::Transport;

    use crate::answer::respond;
    use crate::catalog::Catalog;
    use crate::request::{parse, tests::build};
    use pqdns_test_support::{with_option, LOCALHOST};

    const ZONE: &str = "\
@      SOA  ns1 hostmaster 1 7200 3600 1209600 300
@      NS   ns1
ns1    A    192.0.2.1
www    A    192.0.2.4
*.wild TXT  \"wildcard\"
sub    NS   ns.sub
ns.sub A    192.0.2.6
big    TXT  \"0123456789012345678901234567890123456789012345678901234567890123456789\"
big    TXT  \"1123456789012345678901234567890123456789012345678901234567890123456789\"
big    TXT  \"2123456789012345678901234567890123456789012345678901234567890123456789\"
big    TXT  \"3123456789012345678901234567890123456789012345678901234567890123456789\"
big    TXT  \"4123456789012345678901234567890123456789012345678901234567890123456789\"
big    TXT  \"5123456789012345678901234567890123456789012345678901234567890123456789\"
big    TXT  \"6123456789012345678901234567890123456789012345678901234567890123456789\"
";

    fn catalog(cache_bytes: usize) -> Catalog {
        let origin: Name = "example.".parse().unwrap();
        crate::catalog::signed_for_tests(&origin, ZONE, &[Algorithm::EcdsaP256Sha256], Denial::Nsec)
            .with_answer_cache(cache_bytes)
    }

    /// The same question as `build` makes, with another ID and RD and CD set.
    fn variant(qname: &str, qtype: RrType, edns: Option<(u16, bool)>) -> Vec<u8> {
        let mut p = build(qname, qtype, edns);
        p[..2].copy_from_slice(&0xbeefu16.to_be_bytes());
        p[2..4].copy_from_slice(&0x0110u16.to_be_bytes());
        p
    }

    fn answer(cat: &Catalog, packet: &[u8], transport: Transport) -> Vec<u8> {
        let mut out = vec![0xee; 2];
        let outcome = respond(cat, packet, transport, LOCALHOST, 1232, &mut out, 2);
        assert_eq!(outcome.len, out.len() - 2);
        let response = out.split_off(2);
        if !response.is_empty() {
            if let Err(e) = pqdns_test_support::second_opinion(&response) {
                panic!("second opinion: {e}");
            }
        }
        response
    }

    const QUESTIONS: &[(&str, RrType)] = &[
        ("www.example.", RrType::A),
        ("foo.wild.example.", RrType::TXT),
        ("x.sub.example.", RrType::A),
        ("nope.example.", RrType::A),
        ("www.example.", RrType::MX),
        ("big.example.", RrType::TXT),
        ("example.org.", RrType::A),
    ];
    const EDNS: &[Option<(u16, bool)>] = &[
        None,
        Some((1232, false)),
        Some((1232, true)),
        Some((512, true)),
    ];

    #[test]
    fn a_replay_equals_a_fresh_answer_for_another_id_flags_and_case() {
        let fresh = catalog(0);
        let mut expected = Vec::new();
        for &(name, qtype) in QUESTIONS {
            for &edns in EDNS {
                for transport in [Transport::Udp, Transport::Tcp] {
                    let shouted = name.to_ascii_uppercase();
                    let packet = variant(&shouted, qtype, edns);
                    expected.push((answer(&fresh, &packet, transport), packet, transport));
                }
            }
        }
        assert_eq!(fresh.answers.bytes(), 0, "a zero budget stores nothing");
        let cached = fresh.with_answer_cache(1 << 20);
        let mut truncated = 0;
        for (want, packet, transport) in &expected {
            // Prime with the lower-case question, ID 0x1234 and no RD/CD, then replay.
            let mut primer = packet.clone();
            let len = parse(packet, None).unwrap().qname.as_wire().len();
            primer[..4].copy_from_slice(&[0x12, 0x34, 0, 0]);
            primer[12..12 + len].make_ascii_lowercase();
            let first = answer(&cached, &primer, *transport);
            assert_ne!(&first, want, "the primer differs in ID, flags and case");

            let mut out = Vec::new();
            let outcome = cached
                .answers
                .replay(packet, *transport, 1232, &mut out, 0)
                .expect("prepared")
                .outcome;
            assert_eq!(&out, want);
            assert_eq!(outcome.len, want.len());
            assert_eq!(answer(&cached, packet, *transport), *want);
            truncated += usize::from(outcome.truncated);
        }
        assert!(
            truncated > 0,
            "some UDP answers are truncated, and replayed so"
        );
    }

    #[test]
    fn edns_do_and_size_limit_are_part_of_the_key() {
        let cat = catalog(1 << 20);
        let plain = answer(
            &cat,
            &build("www.example.", RrType::A, None),
            Transport::Udp,
        );
        let dnssec = answer(
            &cat,
            &build("www.example.", RrType::A, Some((1232, true))),
            Transport::Udp,
        );
        let no_do = answer(
            &cat,
            &build("www.example.", RrType::A, Some((1232, false))),
            Transport::Udp,
        );
        assert!(dnssec.len() > no_do.len(), "RRSIGs only with DO");
        assert!(no_do.len() > plain.len(), "OPT only with EDNS");
        let big = build("big.example.", RrType::TXT, Some((512, true)));
        let udp = answer(&cat, &big, Transport::Udp);
        let tcp = answer(&cat, &big, Transport::Tcp);
        assert!(udp[2] & 0x02 != 0 && tcp[2] & 0x02 == 0, "TC over UDP only");
        assert_eq!(answer(&cat, &big, Transport::Udp), udp);
    }

    #[test]
    fn memory_stays_within_the_budget() {
        let budget = 4000;
        let bounded = catalog(budget);
        let mut peak = 0;
        for i in 0..200 {
            let q = build(&format!("n{i}.example."), RrType::A, Some((1232, true)));
            answer(&bounded, &q, Transport::Udp);
            peak = peak.max(bounded.answers.bytes());
        }
        assert!(
            peak > 0 && peak <= budget,
            "peak {peak} bytes, budget {budget}"
        );
    }

    #[test]
    fn unknown_edns_versions_get_badvers_also_from_prepared_answers() {
        let mut q = build("www.example.", RrType::A, Some((1232, true)));
        let version_at = q.len() - 5;
        q[version_at] = 1;
        let cat = catalog(1 << 20);
        for _ in 0..2 {
            let r = answer(&cat, &q, Transport::Udp);
            assert_eq!(&r[6..8], &[0, 0], "no answer");
            assert_eq!(
                r[r.len() - 6],
                1,
                "extended RCODE 16 (BADVERS) >> 4 in the OPT"
            );
        }
        q[version_at] = 0;
        let r = answer(&cat, &q, Transport::Udp);
        assert_eq!(&r[6..8], &[0, 2], "A and its RRSIG for EDNS version 0");
    }

    #[test]
    fn client_cookies_share_an_entry_and_malformed_options_are_never_replayed() {
        let cat = catalog(1 << 20);
        let plain = build("www.example.", RrType::A, Some((1232, true)));
        let first = with_option(plain.clone(), OPTION_COOKIE, &[1; 8]);
        let want = answer(&cat, &first, Transport::Udp);
        let stored = cat.answers.bytes();
        assert!(stored > 0);
        // Another client's cookie: the same entry (nothing new stored), the same answer.
        let other = with_option(plain.clone(), OPTION_COOKIE, &[2; 8]);
        let mut out = Vec::new();
        let replayed = cat
            .answers
            .replay(&other, Transport::Udp, 1232, &mut out, 0);
        assert!(replayed.is_some(), "a replay");
        assert_eq!(out, want);
        assert_eq!(cat.answers.bytes(), stored);
        // Options other than COOKIE are part of the key.
        let padded = with_option(plain.clone(), 12, &[0; 4]);
        assert!(cat
            .answers
            .replay(&padded, Transport::Udp, 1232, &mut out, 0)
            .is_none());
        // An RDLENGTH that does not match the options: no key, so the parser answers FORMERR.
        let mut bad = first.clone();
        let len = bad.len();
        bad[len - 13] += 1;
        assert!(cat
            .answers
            .replay(&bad, Transport::Udp, 1232, &mut out, 0)
            .is_none());
        assert_eq!(answer(&cat, &bad, Transport::Udp)[3] & 0x0f, 1, "FORMERR");
        // A truncated OPT record does not reach the entry of the complete one either.
        let cut = &plain[..plain.len() - 2];
        assert!(cat
            .answers
            .replay(cut, Transport::Udp, 1232, &mut out, 0)
            .is_none());
    }
}
