//! The difference between two versions of an RRset, record by record, as an incremental zone
//! transfer carries it (RFC 1995 §4: the records deleted, then the records added). The IXFR
//! journal of pqdns-server computes whole-zone differences with it, and the incremental signer
//! ([`crate::dnssec::incremental`]) the difference of the RRsets it changed.

use std::collections::HashSet;

use crate::name::Name;
use crate::rr::{Class, Record, RrType};
use crate::zone::RRset;

/// Appends to `deleted` and `added` the difference between two versions of the RRset
/// `owner`/`rtype` (`None`: it does not exist): its records, unless `skip_data` (the apex SOA,
/// which frames a difference instead), then its RRSIG records. A TTL change deletes every
/// record of the old version and adds every record of the new one.
pub fn rrset(
    owner: &Name,
    rtype: RrType,
    before: Option<&RRset>,
    after: Option<&RRset>,
    skip_data: bool,
    deleted: &mut Vec<Record>,
    added: &mut Vec<Record>,
) {
    let record = |rtype, ttl, rdata: &Vec<u8>| Record {
        owner: owner.clone(),
        rtype,
        class: Class::IN,
        ttl,
        rdata: rdata.clone(),
    };
    let (data_b, sigs_b) = parts(before);
    let (data_a, sigs_a) = parts(after);
    let kinds = [(rtype, data_b, data_a), (RrType::RRSIG, sigs_b, sigs_a)];
    for (kind, (ttl_b, b), (ttl_a, a)) in kinds.into_iter().skip(usize::from(skip_data)) {
        let same_ttl = ttl_b == ttl_a;
        deleted.extend(
            minus(b, a, same_ttl)
                .into_iter()
                .map(|r| record(kind, ttl_b, r)),
        );
        added.extend(
            minus(a, b, same_ttl)
                .into_iter()
                .map(|r| record(kind, ttl_a, r)),
        );
    }
}

/// An RRset's (TTL, RDATAs) and (RRSIG TTL, RRSIGs); nothing for no RRset.
type Parts<'s> = ((u32, &'s [Vec<u8>]), (u32, &'s [Vec<u8>]));

fn parts(set: Option<&RRset>) -> Parts<'_> {
    set.map_or(((0, &[]), (0, &[])), |s| {
        ((s.ttl, &s.rdatas[..]), (s.rrsig_ttl, &s.rrsigs[..]))
    })
}

/// The RDATAs of `a` that are not in `b` (all of `a` unless `compare`).
fn minus<'a>(a: &'a [Vec<u8>], b: &[Vec<u8>], compare: bool) -> Vec<&'a Vec<u8>> {
    if !compare {
        return a.iter().collect();
    }
    // Small RRsets are compared directly, large ones through a set.
    if b.len() > 16 {
        let set: HashSet<&[u8]> = b.iter().map(Vec::as_slice).collect();
        return a.iter().filter(|r| !set.contains(r.as_slice())).collect();
    }
    a.iter().filter(|r| !b.contains(r)).collect()
}
