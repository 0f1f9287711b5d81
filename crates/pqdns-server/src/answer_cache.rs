//! Prepared answers: a zone served from memory answers the same question with the same bytes,
//! so the answer engine's output is kept per question and replayed. A replay copies the stored
//! message and patches the three parts that come from the query: the message ID, the RD and CD
//! flags (RFC 1035 §4.1.1, RFC 4035 §3.1.6) and the QNAME's letter case (RFC 4343 §4.1: the
//! question is echoed as sent). Names later in the message are compressed against the question,
//! so they follow its case in a replay exactly as in a fresh answer.
//!
//! The key is everything else in a query that changes the response: the QNAME (lower-cased),
//! QTYPE, QCLASS, whether there is an OPT record, its DO bit and an NSID option, and the size limit the response
//! was built for (the client's EDNS payload size bounded by ours, or 65535 on streams). Anything
//! new that changes a response must be added to [`Key`].
//!
//! The cache belongs to one catalog: a reload builds a new catalog with an empty cache, so an
//! entry never outlives the zone data it came from. Memory is bounded by a byte budget counted
//! over keys, responses and a fixed overhead per entry; when an insert would exceed it, the
//! cache is emptied and fills again with the questions still being asked. Lookups take a shared
//! read lock and allocate nothing; only a miss takes the write lock.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

use pqdns_core::name::MAX_NAME_LEN;

use pqdns_core::wire::{Rcode, FLAG_CD, FLAG_RD, HEADER_LEN, OPTION_NSID};

use crate::answer::Outcome;
use crate::query::Query;

/// Default memory budget of one catalog's prepared answers, in bytes.
pub const DEFAULT_ANSWER_CACHE_BYTES: usize = 32 << 20;
/// Bytes counted per entry besides its key and response (map slot, boxes, outcome).
const ENTRY_OVERHEAD: usize = 96;
/// Longest key: QNAME, QTYPE, QCLASS, EDNS byte, size limit.
const MAX_KEY_LEN: usize = MAX_NAME_LEN + 7;

/// The cache key of one query, built on the stack.
pub struct Key {
    bytes: [u8; MAX_KEY_LEN],
    len: usize,
}

impl Key {
    /// The key of `query` answered within `limit` bytes, or `None` if its answer must not be
    /// replayed (an EDNS version above 0 gets BADVERS, which the key does not distinguish).
    pub fn new(query: &Query<'_>, limit: usize) -> Option<Key> {
        let edns = match query.edns {
            None => 0,
            Some(e) if e.version() > 0 => return None,
            Some(e) => 1 + u8::from(e.dnssec_ok()) + 2 * u8::from(e.option(OPTION_NSID).is_some()),
        };
        let mut bytes = [0u8; MAX_KEY_LEN];
        let qname = query.qname.as_wire();
        let n = qname.len();
        for (k, b) in bytes.iter_mut().zip(qname) {
            *k = b.to_ascii_lowercase();
        }
        bytes[n..n + 2].copy_from_slice(&query.qtype.0.to_be_bytes());
        bytes[n + 2..n + 4].copy_from_slice(&query.qclass.0.to_be_bytes());
        bytes[n + 4] = edns;
        let limit = u16::try_from(limit).unwrap_or(u16::MAX);
        bytes[n + 5..n + 7].copy_from_slice(&limit.to_be_bytes());
        Some(Key { bytes, len: n + 7 })
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// One stored answer: the response with ID 0 and RD/CD clear, and what the engine reported.
#[derive(Debug)]
struct Prepared {
    response: Box<[u8]>,
    rcode: Rcode,
    truncated: bool,
    cache_ttl: Option<u32>,
}

/// Prepared answers of one catalog, bounded by a byte budget.
#[derive(Debug)]
pub struct AnswerCache {
    max_bytes: usize,
    state: RwLock<State>,
}

#[derive(Debug, Default)]
struct State {
    map: HashMap<Box<[u8]>, Prepared>,
    bytes: usize,
}

impl Default for AnswerCache {
    fn default() -> AnswerCache {
        AnswerCache::new(DEFAULT_ANSWER_CACHE_BYTES)
    }
}

impl AnswerCache {
    /// An empty cache holding at most `max_bytes` (0 disables it).
    pub fn new(max_bytes: usize) -> AnswerCache {
        AnswerCache {
            max_bytes,
            state: RwLock::new(State::default()),
        }
    }

    /// Writes the stored answer for `key` into `out[base..]` (truncating `out` to `base`),
    /// patched for `query`, and returns its outcome; `None` on a miss (`out` untouched).
    pub fn replay(
        &self,
        key: &Key,
        query: &Query<'_>,
        out: &mut Vec<u8>,
        base: usize,
    ) -> Option<Outcome> {
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        let p = state.map.get(key.as_bytes())?;
        out.truncate(base);
        out.extend_from_slice(&p.response);
        let msg = &mut out[base..];
        msg[..2].copy_from_slice(&query.header.id.to_be_bytes());
        let flags =
            u16::from_be_bytes([msg[2], msg[3]]) | (query.header.flags & (FLAG_RD | FLAG_CD));
        msg[2..4].copy_from_slice(&flags.to_be_bytes());
        let qname = query.qname.as_wire();
        msg[HEADER_LEN..HEADER_LEN + qname.len()].copy_from_slice(qname);
        Some(Outcome {
            len: p.response.len(),
            rcode: p.rcode,
            truncated: p.truncated,
            qtype: Some(query.qtype),
            error: None,
            cache_ttl: p.cache_ttl,
        })
    }

    /// Stores `response` (a complete message the engine built for a query with `key`) and its
    /// `outcome`. The stored copy has ID 0 and RD/CD clear.
    pub fn store(&self, key: &Key, response: &[u8], outcome: &Outcome) {
        let cost = key.len + response.len() + ENTRY_OVERHEAD;
        if cost > self.max_bytes || response.len() < HEADER_LEN {
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
            cache_ttl: outcome.cache_ttl,
        };
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        if state.bytes + cost > self.max_bytes {
            state.map.clear();
            state.bytes = 0;
        }
        if state.map.insert(key.as_bytes().into(), prepared).is_none() {
            state.bytes += cost;
        }
    }

    /// Bytes counted against the budget now.
    pub fn bytes(&self) -> usize {
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
    use crate::answer::{respond, Transport};
    use crate::catalog::Catalog;
    use crate::query::{parse, tests::build};

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
        crate::harness::signed_catalog(&origin, ZONE, &[Algorithm::EcdsaP256Sha256], Denial::Nsec)
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
        let outcome = respond(cat, packet, transport, 1232, &mut out, 2);
        assert_eq!(outcome.len, out.len() - 2);
        out.split_off(2)
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
                for transport in [Transport::Udp, Transport::Stream] {
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
            let view = parse(packet).unwrap();
            let len = view.qname.as_wire().len();
            primer[..4].copy_from_slice(&[0x12, 0x34, 0, 0]);
            primer[12..12 + len].make_ascii_lowercase();
            let first = answer(&cached, &primer, *transport);
            assert_ne!(&first, want, "the primer differs in ID, flags and case");

            let limit = match transport {
                Transport::Stream => 65535,
                Transport::Udp => view
                    .edns
                    .map_or(512, |e| e.udp_payload().clamp(512, 1232))
                    .into(),
            };
            let key = Key::new(&view, limit).unwrap();
            let mut out = Vec::new();
            let outcome = cached
                .answers
                .replay(&key, &view, &mut out, 0)
                .expect("prepared");
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
        let tcp = answer(&cat, &big, Transport::Stream);
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
    fn unknown_edns_versions_are_not_prepared() {
        let mut q = build("www.example.", RrType::A, Some((1232, true)));
        let version_at = q.len() - 5;
        q[version_at] = 1;
        let view = parse(&q).unwrap();
        assert!(Key::new(&view, 1232).is_none());
        let cat = catalog(1 << 20);
        let r = answer(&cat, &q, Transport::Udp);
        assert_eq!(&r[6..8], &[0, 0], "no answer");
        assert_eq!(
            r[r.len() - 6],
            1,
            "extended RCODE 16 (BADVERS) >> 4 in the OPT"
        );
        assert_eq!(cat.answers.bytes(), 0);
    }
}
