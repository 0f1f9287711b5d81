//! QBF: query-based fragmentation of large DNSSEC answers at the DNS layer (Rawat & Jhanwar,
//! SPACE 2023; `docs/pqc-dnssec-wire.md` §4), so post-quantum answers stay on UDP.
//!
//! Fragment 1 is the answer to the original query with TC=1; fragment n ≥ 2 is requested by
//! prefixing the first QNAME label with `?n?` (same ID, QTYPE, QCLASS) and answered with the
//! same `?n?` question and TC=1. Only DNSKEY and RRSIG records are split: every fragment repeats
//! each such record's owner, type, class, TTL and fixed RDATA part (DNSKEY: 4 bytes; RRSIG: 18
//! bytes plus the signer name) followed by the next slice of its key or signature. Other
//! records travel in fragment 1 only.
//!
//! Slicing rule (pqdns' precise reading of the scheme, which both ends compute alike): with
//! `m` split records, fragment k carries `s_k = ⌊C_k / m⌋` bytes of each record's variable part,
//! where `C_k` is the budget left after the header, question, OPT, the split records' fixed
//! parts and, in fragment 1, the other records. The count N is the smallest with
//! `Σ s_k ≥ L`, where L is the longest variable part the algorithms allow (public-key length
//! for DNSKEY, maximum signature length for RRSIG, from the profile) — the receiver knows N from
//! fragment 1 alone and asks for 2..N in parallel.
//!
//! Limits: at most [`MAX_FRAGMENTS`] fragments, a reassembled message of at most 65535 bytes,
//! and every fragment must repeat fragment 1's split records exactly (owner, type, fixed part).

use crate::dnssec::profile::Profile;
use crate::dnssec::SecAlg;
use crate::message::Message;
use crate::name::{Name, NameError};
use crate::rr::{Record, RrType};
use crate::wire::rdata::{Dnskey, Rrsig};
use crate::wire::FLAG_TC;

/// Most fragments one answer may have (the EDNS variant carries the number in 6 bits).
pub const MAX_FRAGMENTS: u8 = 63;
/// Largest reassembled message, bytes.
pub const MAX_MESSAGE: usize = 65_535;

/// Why an answer could not be fragmented or reassembled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QbfError {
    /// Nothing to split, or the budget cannot even hold the fixed parts: use TC + TCP.
    #[error("answer cannot be fragmented within {0} bytes")]
    DoesNotFit(usize),
    /// A DNSKEY/RRSIG uses an algorithm whose maximum size the profile does not know.
    #[error("no maximum size known for algorithm {0}")]
    UnknownSize(SecAlg),
    /// The fragment number is 0, larger than the count, or larger than [`MAX_FRAGMENTS`].
    #[error("fragment {0} does not exist")]
    NoSuchFragment(u8),
    /// A fragment does not match fragment 1 (different records, question or ID).
    #[error("fragment {0} is inconsistent with fragment 1")]
    Inconsistent(u8),
    /// The reassembled message would exceed 65535 bytes.
    #[error("reassembled message too large")]
    TooLarge,
    /// The `?n?` name could not be built.
    #[error("bad fragment name: {0}")]
    Name(#[from] NameError),
}

/// The QNAME for fragment `n` of a query for `qname`: `?n?` prepended to the first label.
///
/// # Errors
/// [`QbfError::Name`] if the label would exceed 63 bytes; [`QbfError::NoSuchFragment`] for
/// `qname` = root (no label to prefix).
pub fn fragment_qname(n: u8, qname: &Name) -> Result<Name, QbfError> {
    let first = qname.labels().next().ok_or(QbfError::NoSuchFragment(n))?;
    let mut label = format!("?{n}?").into_bytes();
    label.extend_from_slice(first);
    let rest = qname.parent().ok_or(QbfError::NoSuchFragment(n))?;
    Ok(rest.prepend_label(&label)?)
}

/// Splits a `?n?`-prefixed QNAME into (n, original QNAME); `None` for ordinary names.
pub fn parse_fragment_qname(qname: &Name) -> Option<(u8, Name)> {
    let first = qname.labels().next()?;
    let rest = first.strip_prefix(b"?")?;
    let end = rest.iter().position(|&b| b == b'?')?;
    let n: u8 = std::str::from_utf8(&rest[..end]).ok()?.parse().ok()?;
    let label = &rest[end + 1..];
    if n == 0 || label.is_empty() {
        return None;
    }
    let original = qname.parent()?.prepend_label(label).ok()?;
    Some((n, original))
}

/// For a split record (DNSKEY or RRSIG): its algorithm number, whether it is a key, and the
/// length of its fixed RDATA part; `None` for other records.
fn split(r: &Record) -> Option<(SecAlg, bool, usize)> {
    match r.rtype {
        RrType::DNSKEY => Dnskey::parse(&r.rdata).map(|k| (k.algorithm, true, Dnskey::FIXED_LEN)),
        RrType::RRSIG => Rrsig::parse(&r.rdata).map(|s| (s.algorithm, false, s.fixed_len())),
        _ => None,
    }
}

/// Length of the fixed RDATA part of a split record, or `None` if the record is not split.
fn fixed_len(r: &Record) -> Option<usize> {
    split(r).map(|(_, _, fixed)| fixed)
}

/// Longest variable part (key or signature) the profile allows for algorithm `number`.
fn max_variable(number: SecAlg, is_key: bool, profile: &Profile) -> Result<usize, QbfError> {
    let alg = profile
        .algorithm(number)
        .ok_or(QbfError::UnknownSize(number))?;
    let len = if is_key {
        alg.public_key_len()
    } else {
        alg.max_signature_len()
    };
    if len == 0 {
        return Err(QbfError::UnknownSize(number));
    }
    Ok(len)
}

/// Wire length of a record (uncompressed).
fn rr_len(r: &Record) -> usize {
    r.owner.wire_len() + 10 + r.rdata.len()
}

fn opt_len(m: &Message) -> usize {
    m.edns.as_ref().map_or(0, |e| {
        11 + e.options.iter().map(|(_, d)| 4 + d.len()).sum::<usize>()
    })
}

/// The slicing plan for an answer: per-fragment slice sizes.
struct Plan {
    /// Slice size in fragment k (index k-1).
    slices: Vec<usize>,
}

fn plan(full: &Message, budget: usize, profile: &Profile) -> Result<Plan, QbfError> {
    let sections = full
        .answers
        .iter()
        .chain(&full.authority)
        .chain(&full.additional);
    let (mut fixed_total, mut other_total, mut m, mut longest) = (0, 0, 0usize, 0usize);
    for r in sections {
        match split(r) {
            Some((number, is_key, f)) => {
                fixed_total += r.owner.wire_len() + 10 + f;
                m += 1;
                longest = longest.max(max_variable(number, is_key, profile)?);
            }
            None => other_total += rr_len(r),
        }
    }
    if m == 0 {
        return Err(QbfError::DoesNotFit(budget));
    }
    let qname = &full
        .questions
        .first()
        .ok_or(QbfError::DoesNotFit(budget))?
        .qname;
    let mut slices = Vec::new();
    let mut covered = 0;
    for k in 1..=MAX_FRAGMENTS {
        let qlen = if k == 1 {
            qname.wire_len()
        } else {
            fragment_qname(k, qname)?.wire_len()
        };
        let overhead =
            12 + qlen + 4 + opt_len(full) + fixed_total + if k == 1 { other_total } else { 0 };
        let s = budget.saturating_sub(overhead) / m;
        if s == 0 {
            return Err(QbfError::DoesNotFit(budget));
        }
        slices.push(s);
        covered += s;
        if covered >= longest {
            return Ok(Plan { slices });
        }
    }
    Err(QbfError::DoesNotFit(budget))
}

/// Number of fragments the answer `full` needs within `budget` bytes, computed from the
/// profile's maximum sizes (the receiver computes the same from fragment 1).
///
/// # Errors
/// [`QbfError`] if the answer cannot be fragmented (no DNSKEY/RRSIG, or a budget too small).
pub fn fragment_count(full: &Message, budget: usize, profile: &Profile) -> Result<u8, QbfError> {
    Ok(plan(full, budget, profile)?.slices.len() as u8)
}

/// Builds fragment `n` (1-based) of the complete answer `full` for a `budget`-byte UDP payload.
/// Fragment 1 keeps the original question; fragments n ≥ 2 carry the `?n?` question. All have
/// TC set.
///
/// # Errors
/// [`QbfError::NoSuchFragment`] for n = 0 or n > count (the server answers FORMERR, as the
/// scheme says), or any error of [`fragment_count`].
pub fn fragment(
    full: &Message,
    n: u8,
    budget: usize,
    profile: &Profile,
) -> Result<Message, QbfError> {
    let plan = plan(full, budget, profile)?;
    if n == 0 || usize::from(n) > plan.slices.len() {
        return Err(QbfError::NoSuchFragment(n));
    }
    let start: usize = plan.slices[..usize::from(n) - 1].iter().sum();
    let size = plan.slices[usize::from(n) - 1];
    let slice_section = |records: &[Record]| -> Vec<Record> {
        records
            .iter()
            .filter_map(|r| match fixed_len(r) {
                Some(f) => {
                    let var = &r.rdata[f..];
                    let lo = start.min(var.len());
                    let hi = (start + size).min(var.len());
                    let mut rdata = r.rdata[..f].to_vec();
                    rdata.extend_from_slice(&var[lo..hi]);
                    Some(Record { rdata, ..r.clone() })
                }
                None if n == 1 => Some(r.clone()),
                None => None,
            })
            .collect()
    };
    let mut out = Message {
        id: full.id,
        flags: full.flags | FLAG_TC,
        questions: full.questions.clone(),
        answers: slice_section(&full.answers),
        authority: slice_section(&full.authority),
        additional: slice_section(&full.additional),
        edns: full.edns.clone(),
    };
    if n > 1 {
        let q = &mut out.questions[0];
        q.qname = fragment_qname(n, &q.qname)?;
    }
    Ok(out)
}

/// Reassembles fragments 1..=N (in any order; exactly one of each) into the complete answer:
/// slices concatenated in fragment order, the original QNAME restored, TC cleared.
///
/// # Errors
/// [`QbfError::Inconsistent`] if a fragment's ID, question or split records differ from
/// fragment 1's, [`QbfError::NoSuchFragment`] for a missing or duplicate number,
/// [`QbfError::TooLarge`] beyond 65535 bytes.
pub fn reassemble(fragments: &[Message]) -> Result<Message, QbfError> {
    let mut ordered: Vec<Option<&Message>> = vec![None; fragments.len()];
    for f in fragments {
        let q = f.questions.first().ok_or(QbfError::Inconsistent(0))?;
        let n = parse_fragment_qname(&q.qname).map_or(1, |(n, _)| n);
        let slot = ordered
            .get_mut(usize::from(n) - 1)
            .ok_or(QbfError::NoSuchFragment(n))?;
        if slot.replace(f).is_some() {
            return Err(QbfError::NoSuchFragment(n));
        }
    }
    let first = ordered[0].ok_or(QbfError::NoSuchFragment(1))?;
    let mut out = first.clone();
    out.flags &= !FLAG_TC;
    let mut total = out.to_wire().len();
    for (idx, frag) in ordered.iter().enumerate().skip(1) {
        let n = idx as u8 + 1;
        let frag = frag.ok_or(QbfError::NoSuchFragment(n))?;
        let q = &frag.questions[0];
        let same_question = parse_fragment_qname(&q.qname).map(|(_, o)| o)
            == Some(first.questions[0].qname.clone())
            && q.qtype == first.questions[0].qtype;
        if frag.id != first.id || !same_question {
            return Err(QbfError::Inconsistent(n));
        }
        for (mine, theirs) in [
            (&mut out.answers, &frag.answers),
            (&mut out.authority, &frag.authority),
            (&mut out.additional, &frag.additional),
        ] {
            let mut split = mine.iter_mut().filter(|r| fixed_len(r).is_some());
            for t in theirs {
                let f = fixed_len(t).ok_or(QbfError::Inconsistent(n))?;
                let m = split.next().ok_or(QbfError::Inconsistent(n))?;
                if m.owner != t.owner || m.rtype != t.rtype || m.rdata[..f] != t.rdata[..f] {
                    return Err(QbfError::Inconsistent(n));
                }
                total += t.rdata.len() - f;
                if total > MAX_MESSAGE || m.rdata.len() + t.rdata.len() - f > usize::from(u16::MAX)
                {
                    return Err(QbfError::TooLarge);
                }
                m.rdata.extend_from_slice(&t.rdata[f..]);
            }
            if split.next().is_some() {
                return Err(QbfError::Inconsistent(n));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dnssec::Algorithm;
    use crate::frag::fixtures::{case, cases, n, profile, query, signatures_verify, BUDGET};
    use crate::message::Question;
    use crate::rr::Class;
    use crate::wire::{FLAG_AA, FLAG_QR};

    #[test]
    fn every_algorithm_round_trips_byte_identical_and_validates() {
        let profile = profile();
        for c in cases() {
            let (alg, zone) = (c.alg, &c.zone);
            for full in &c.answers {
                let wire = full.to_wire();
                let count = match fragment_count(full, BUDGET, profile) {
                    Ok(c) => c,
                    // Small classical answers need no fragments.
                    Err(_) if wire.len() <= BUDGET => continue,
                    // 17 KB SPHINCS+-f signatures need more than 63 fragments: TCP fallback.
                    Err(QbfError::DoesNotFit(_)) if alg.max_signature_len() > 16_000 => continue,
                    Err(e) => panic!("{alg}: {e}"),
                };
                let mut frags: Vec<Message> = (1..=count)
                    .map(|k| fragment(full, k, BUDGET, profile).unwrap())
                    .collect();
                let q = &full.questions[0];
                let original = query(&q.qname.to_string(), q.qtype).to_wire().len();
                for (k, f) in (1..).zip(&frags) {
                    let len = f.to_wire().len();
                    assert!(len <= BUDGET, "{alg}: fragment of {len} bytes");
                    assert!(f.has_flag(FLAG_TC));
                    // Amplification: bytes out minus bytes in never exceed a full-size answer's.
                    let mut request = query(&q.qname.to_string(), q.qtype);
                    if k > 1 {
                        request.questions[0].qname = fragment_qname(k, &q.qname).unwrap();
                    }
                    assert!(len.saturating_sub(request.to_wire().len()) <= BUDGET - original);
                }
                // Arrival order does not matter.
                frags.reverse();
                let back = reassemble(&frags).unwrap();
                assert_eq!(back.to_wire(), wire, "{alg} {:?}", full.questions[0]);
                assert!(signatures_verify(&back, zone), "{alg}");
                assert!(matches!(
                    fragment(full, count + 1, BUDGET, profile),
                    Err(QbfError::NoSuchFragment(_))
                ));
            }
        }
    }

    /// A hand-built fragment 2 of a one-DNSKEY answer, field by field (Rawat & Jhanwar §4:
    /// `?2?` question, TC=1, the key's 4 fixed RDATA bytes, then its second slice).
    #[test]
    fn fragment_matches_hand_built_wire_sample() {
        let profile = profile();
        let alg = profile.number(Algorithm::MlDsa44).unwrap().0;
        let key: Vec<u8> = (0..1312u32).map(|i| (i % 251) as u8).collect();
        let mut rdata = vec![1, 0, 3, alg];
        rdata.extend_from_slice(&key);
        let full = Message {
            id: 0x1234,
            flags: FLAG_QR | FLAG_AA,
            questions: vec![Question {
                qname: n("example."),
                qtype: RrType::DNSKEY,
                qclass: Class::IN,
            }],
            answers: vec![Record {
                owner: n("example."),
                rtype: RrType::DNSKEY,
                class: Class::IN,
                ttl: 3600,
                rdata,
            }],
            authority: vec![],
            additional: vec![],
            edns: None,
        };
        // Budget 600: fragment 1 has 12 + 9 + 4 + (9 + 10 + 4) = 48 bytes of overhead, so a
        // 552-byte slice; fragments 2 and 3 have a 12-byte QNAME, so 549. 552 + 549 + 549 =
        // 1650 >= 1312 (ML-DSA-44 public key): three fragments.
        assert_eq!(fragment_count(&full, 600, profile), Ok(3));
        let mut expected = vec![0x12, 0x34, 0x86, 0x00, 0, 1, 0, 1, 0, 0, 0, 0];
        expected.extend(b"\x0a?2?example\x00\x00\x30\x00\x01");
        expected.extend(b"\x07example\x00\x00\x30\x00\x01\x00\x00\x0e\x10");
        expected.extend((4u16 + 549).to_be_bytes());
        expected.extend([1, 0, 3, alg]);
        expected.extend_from_slice(&key[552..1101]);
        let f2 = fragment(&full, 2, 600, profile).unwrap();
        assert_eq!(f2.to_wire(), expected);
        // The last fragment carries the remaining 211 bytes.
        let f3 = fragment(&full, 3, 600, profile).unwrap();
        assert_eq!(f3.answers[0].rdata[4..], key[1101..]);
        assert_eq!(Message::parse(&expected).unwrap(), f2);
    }

    #[test]
    fn inconsistent_missing_duplicate_and_oversized_fragments_are_rejected() {
        let profile = profile();
        let full = &case(Algorithm::MlDsa44).answers[0];
        let count = fragment_count(full, BUDGET, profile).unwrap();
        assert!(count >= 3, "{count}");
        let frags: Vec<Message> = (1..=count)
            .map(|k| fragment(full, k, BUDGET, profile).unwrap())
            .collect();
        // Missing fragment 2.
        let mut missing = frags.clone();
        missing.remove(1);
        assert!(reassemble(&missing).is_err());
        // Duplicate.
        let mut dup = frags.clone();
        dup[1] = frags[2].clone();
        assert!(reassemble(&dup).is_err());
        // Different ID.
        let mut other_id = frags.clone();
        other_id[1].id ^= 1;
        assert_eq!(reassemble(&other_id), Err(QbfError::Inconsistent(2)));
        // A fixed part that changed (key flags) in a later fragment.
        let mut changed = frags.clone();
        changed[2].answers[0].rdata[1] ^= 1;
        assert_eq!(reassemble(&changed), Err(QbfError::Inconsistent(3)));
        // A fragment stuffed with a huge slice cannot grow the message past 64 KiB.
        let mut huge = frags.clone();
        for r in &mut huge[1].answers {
            r.rdata.extend(std::iter::repeat_n(0u8, 40_000));
        }
        assert_eq!(reassemble(&huge), Err(QbfError::TooLarge));
    }
}
