//! Online signing (`[signing] mode = "online"`) and compact denial of existence (RFC 9824).
//!
//! An online zone is loaded with only its apex DNSKEY, CDS and CDNSKEY RRsets signed (by the
//! key-signing keys, through the rollover machinery as for any signed zone). Every other RRset
//! is signed when an answer with DO first needs it ([`pqdns_core::dnssec::sign::sign_online`]),
//! and each denial is one NSEC made for the query (RFC 9824 §3):
//!
//! - a name that does not exist: an NSEC at QNAME whose next name is its immediate successor
//!   `\000.<QNAME>` and whose type bitmap is RRSIG, NSEC and NXNAME; the RCODE is NOERROR
//!   (NODATA), or NXDOMAIN for a querier that sets the CO flag (RFC 9824 §5), whose response
//!   carries CO too;
//! - NODATA at a name that exists: an NSEC at the name listing its types, RRSIG and NSEC;
//! - an empty non-terminal: an NSEC at it listing RRSIG and NSEC only;
//! - wildcards (RFC 9824 §3.3): an answer synthesised from `*.<closest encloser>` is signed
//!   as QNAME's own data (its RRSIG's label count is QNAME's), so it needs no proof that no
//!   closer name exists; a wildcard NODATA gets the NSEC at QNAME listing the wildcard's types;
//! - an insecure delegation: the NSEC at the delegation point listing NS, RRSIG and NSEC.
//!
//! Queries without DO get the ordinary answers (NXDOMAIN included): there is nothing to sign.
//!
//! Signatures are kept in one byte-bounded cache for the server ([`OnlineSigning`], a
//! `quick_cache` CLOCK-Pro cache weighed in bytes), keyed by the zone's key set and everything
//! the RRSIG signs (owner in lower case, type, TTL, RDATA), so a hit is a copy of the stored
//! RRSIG RDATA. An entry is used until the refresh period before its expiration.
//!
//! Signing never runs on a serving thread. The request pipeline answers from the cache; an
//! answer that needs a signature not yet made is deferred (`Mode::Defer`) to a blocking task
//! that holds one of the pool's permits and builds the answer again, signing what is missing
//! (`Mode::Inline`). When every permit is taken the query is answered SERVFAIL at once
//! (counted), so that a flood of new names (each a signature) never delays answers whose
//! signatures are cached.

use std::cell::{Cell, RefCell};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use pqdns_core::dnssec::keyfile::ZoneKey;
use pqdns_core::dnssec::sign::{sign_online, SignError};
use pqdns_core::zone::{Authority, RRset};
use pqdns_core::{Name, RrType};
use quick_cache::sync::Cache as QuickCache;
use quick_cache::Weighter;
use sha2::{Digest, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::catalog::Catalog;
use crate::denial::Denial;

/// Default bound of the signature cache, in bytes (64 MiB: some 600,000 ECDSA P-256 RRSIGs or
/// 25,000 ML-DSA-44 ones).
pub const DEFAULT_CACHE_BYTES: usize = 64 << 20;
/// Default number of signing tasks at once.
pub const DEFAULT_SIGNING_TASKS: usize = 2;
/// Most signing tasks at once (each takes a blocking thread of the runtime).
pub const MAX_SIGNING_TASKS: usize = 64;
/// Bytes counted for an entry besides its key and RRSIG RDATA (the cache's bookkeeping).
const ENTRY_OVERHEAD: u64 = 64;

/// The limits of online signing ([`OnlineSigning::new`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct OnlineLimits {
    /// Most bytes of cached signatures (keys, RRSIG RDATA and bookkeeping).
    pub cache_bytes: usize,
    /// Most answers being signed at once (each on a blocking thread); 0 signs nothing, so
    /// every answer needing a new signature is SERVFAIL.
    pub signing_tasks: usize,
}

impl Default for OnlineLimits {
    fn default() -> OnlineLimits {
        OnlineLimits {
            cache_bytes: DEFAULT_CACHE_BYTES,
            signing_tasks: DEFAULT_SIGNING_TASKS,
        }
    }
}

/// The keys and signature lifetimes of one online zone (`ServedZone::online`).
pub struct OnlineZone {
    origin: Name,
    keys: Vec<ZoneKey>,
    tags: Vec<u16>,
    /// The key set's identity in the shared cache: SHA-256 (first 8 bytes) of the origin and
    /// the DNSKEY RDATA of `keys`.
    key_set: u64,
    /// How far before signing time the inception lies, in seconds.
    inception_offset: u64,
    /// Signature validity from signing time, in seconds.
    validity: u64,
    /// A cached signature is made anew once less than this is left, in seconds.
    refresh: u64,
}

impl std::fmt::Debug for OnlineZone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnlineZone")
            .field("origin", &self.origin)
            .field("key_tags", &self.tags)
            .field("validity", &self.validity)
            .finish_non_exhaustive()
    }
}

impl OnlineZone {
    /// The online signer of zone `origin` with its zone-signing (and key-signing) `keys`:
    /// signatures valid from `inception_offset` seconds before signing for `validity` seconds,
    /// made anew `refresh` seconds before they expire.
    pub fn new(
        origin: Name,
        keys: Vec<ZoneKey>,
        inception_offset: u64,
        validity: u64,
        refresh: u64,
    ) -> OnlineZone {
        let tags = keys.iter().map(ZoneKey::key_tag).collect();
        let mut digest = Sha256::new();
        digest.update(origin.to_lowercase().as_wire());
        for key in &keys {
            digest.update(key.dnskey_rdata());
        }
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest.finalize()[..8]);
        let key_set = u64::from_be_bytes(first);
        OnlineZone {
            origin,
            keys,
            tags,
            key_set,
            inception_offset,
            validity,
            refresh,
        }
    }
}

/// How an answer gets the signatures the cache does not have yet.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Mode<'a> {
    /// Signed here (a signing task, or the synchronous [`crate::answer::respond`]).
    Inline,
    /// Not signed: the cell is set, and the pipeline defers the query to a signing task.
    Defer(&'a Cell<bool>),
}

/// A query deferred to a signing task (by the request pipeline, `service.rs`): the catalog it
/// is answered from and the signing permit the task holds until the answer is built.
#[derive(Debug)]
pub struct SigningTask {
    catalog: Arc<Catalog>,
    _permit: OwnedSemaphorePermit,
}

impl SigningTask {
    pub(crate) fn new(catalog: Arc<Catalog>, permit: OwnedSemaphorePermit) -> SigningTask {
        SigningTask {
            catalog,
            _permit: permit,
        }
    }

    /// The catalog the query is answered from (the one in force when it came).
    pub(crate) fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }
}

/// RRSIG RDATA made for one RRset, and until when it is used.
#[derive(Debug)]
pub(crate) struct Signed {
    /// One RRSIG RDATA per signing key.
    pub(crate) rrsigs: Vec<Vec<u8>>,
    /// UNIX seconds: after this the RRset is signed anew.
    fresh_until: u64,
}

/// Weighs entries by their bytes.
#[derive(Clone, Copy, Debug)]
struct ByBytes;

impl Weighter<Box<[u8]>, Arc<Signed>> for ByBytes {
    fn weight(&self, key: &Box<[u8]>, signed: &Arc<Signed>) -> u64 {
        let sigs: usize = signed.rrsigs.iter().map(Vec::len).sum();
        (key.len() + sigs) as u64 + ENTRY_OVERHEAD
    }
}

/// The server's online signing: the signature cache, the signing permits and their counters.
/// Shared by the catalogs a server swaps in, so reloads keep the cache (entries of a changed
/// key set are never hit again and age out).
pub struct OnlineSigning {
    cache: QuickCache<Box<[u8]>, Arc<Signed>, ByBytes>,
    permits: Arc<Semaphore>,
    hits: AtomicU64,
    misses: AtomicU64,
    signatures: AtomicU64,
    saturated: AtomicU64,
}

impl std::fmt::Debug for OnlineSigning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnlineSigning")
            .field("entries", &self.cache.len())
            .field("bytes", &self.cache.weight())
            .field("free_permits", &self.permits.available_permits())
            .finish_non_exhaustive()
    }
}

impl Default for OnlineSigning {
    fn default() -> OnlineSigning {
        OnlineSigning::new(OnlineLimits::default())
    }
}

impl OnlineSigning {
    /// Online signing within `limits`.
    pub fn new(limits: OnlineLimits) -> OnlineSigning {
        let bytes = u64::try_from(limits.cache_bytes).unwrap_or(u64::MAX).max(1);
        // A guess at the number of entries (an RRSIG is some 100 to 2,500 bytes) for sizing.
        let items = (limits.cache_bytes / 512).clamp(16, 1 << 16);
        OnlineSigning {
            cache: QuickCache::with_weighter(items, bytes, ByBytes),
            permits: Arc::new(Semaphore::new(limits.signing_tasks)),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            signatures: AtomicU64::new(0),
            saturated: AtomicU64::new(0),
        }
    }

    /// A signing permit, if one is free: held by the task that signs a deferred answer.
    pub(crate) fn try_permit(&self) -> Option<OwnedSemaphorePermit> {
        let permit = Arc::clone(&self.permits).try_acquire_owned().ok();
        if permit.is_none() {
            self.saturated.fetch_add(1, Relaxed);
        }
        permit
    }

    /// The RRSIGs of the RRset `rdatas` (`rtype`, `ttl` in seconds) of `zone` answered with
    /// owner `owner` at `now` (UNIX seconds): from the cache, else signed now
    /// ([`Mode::Inline`]) or left for a signing task ([`Mode::Defer`]: `None`, the cell set).
    /// `None` too if the library fails (logged).
    pub(crate) fn rrsigs(
        &self,
        zone: &OnlineZone,
        owner: &Name,
        rtype: RrType,
        set: &RRset,
        mode: Mode<'_>,
        now: u64,
    ) -> Option<Arc<Signed>> {
        with_cache_key(zone, owner, rtype, set, |key| {
            if let Some(signed) = self.cache.get(key).filter(|s| now < s.fresh_until) {
                self.hits.fetch_add(1, Relaxed);
                return Some(signed);
            }
            self.misses.fetch_add(1, Relaxed);
            if let Mode::Defer(pending) = mode {
                pending.set(true);
                return None;
            }
            let inception = now.saturating_sub(zone.inception_offset);
            let expiration = now + zone.validity;
            let made = sign_online(
                &zone.origin,
                owner,
                rtype,
                set.ttl,
                &set.rdatas,
                &zone.keys,
                &zone.tags,
                (inception, expiration),
            );
            match made {
                Ok(rrsigs) => {
                    self.signatures.fetch_add(rrsigs.len() as u64, Relaxed);
                    let signed = Arc::new(Signed {
                        rrsigs,
                        fresh_until: expiration.saturating_sub(zone.refresh),
                    });
                    self.cache.insert(Box::from(key), Arc::clone(&signed));
                    Some(signed)
                }
                Err(error) => {
                    log_failure(&zone.origin, &error);
                    None
                }
            }
        })
    }

    /// Appends the Prometheus series of online signing to `out`.
    pub(crate) fn render(&self, out: &mut String) {
        let series = [
            (
                "pqdns_online_signature_cache_hits_total",
                "Online-signed RRsets whose RRSIGs came from the signature cache.",
                self.hits.load(Relaxed),
            ),
            (
                "pqdns_online_signature_cache_misses_total",
                "Online-signed RRsets whose RRSIGs were not cached (signed, or deferred to signing).",
                self.misses.load(Relaxed),
            ),
            (
                "pqdns_online_signatures_total",
                "RRSIGs made by online signing.",
                self.signatures.load(Relaxed),
            ),
            (
                "pqdns_online_signing_saturated_total",
                "Queries answered SERVFAIL because every online signing task was busy.",
                self.saturated.load(Relaxed),
            ),
        ];
        for (name, help, n) in series {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {n}"
            );
        }
        let name = "pqdns_online_signature_cache_bytes";
        let _ = writeln!(
            out,
            "# HELP {name} Bytes held by the online signature cache.\n# TYPE {name} gauge\n{name} {}",
            self.cache.weight()
        );
    }
}

fn log_failure(origin: &Name, error: &SignError) {
    tracing::warn!(zone = %origin, %error, "online signing failed: the answer is SERVFAIL");
}

thread_local! {
    /// This thread's buffer for the cache key being looked up ([`with_cache_key`]): a hit
    /// allocates nothing, a miss copies the key it stores.
    static CACHE_KEY: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Bytes of [`CACHE_KEY`] kept between lookups; a larger buffer (a large RRset's key) is given
/// back after use.
const CACHE_KEY_KEPT: usize = 16 << 10;

/// Calls `f` with the cache key of an RRset: everything its RRSIG signs, after the zone's key
/// set (owner in lower case, type, TTL, each RDATA with its length).
fn with_cache_key<R>(
    zone: &OnlineZone,
    owner: &Name,
    rtype: RrType,
    set: &RRset,
    f: impl FnOnce(&[u8]) -> R,
) -> R {
    CACHE_KEY.with_borrow_mut(|key| {
        key.clear();
        key.extend_from_slice(&zone.key_set.to_be_bytes());
        owner.write_canonical(key);
        key.extend_from_slice(&rtype.0.to_be_bytes());
        key.extend_from_slice(&set.ttl.to_be_bytes());
        for rdata in &set.rdatas {
            key.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
            key.extend_from_slice(rdata);
        }
        let result = f(key);
        if key.capacity() > CACHE_KEY_KEPT {
            *key = Vec::new();
        }
        result
    })
}

/// Whether the online signer signs `rtype` at `owner` in `zone`: authoritative data, and at a
/// delegation point only DS and NSEC (RFC 4035 §2.2); never glue.
pub(crate) fn signs(zone: &pqdns_core::Zone, owner: &Name, rtype: RrType) -> bool {
    match zone.authority(owner) {
        Authority::Apex | Authority::Authoritative => true,
        Authority::Delegation => matches!(rtype, RrType::DS | RrType::NSEC),
        Authority::Glue => false,
    }
}

/// Whether a record of the online zone `apex` at `owner` of type `rtype` goes out in a zone
/// transfer (AXFR, RFC 5936; IXFR, RFC 1995): the zone's data does, what signing puts in it
/// does not (RRSIG, NSEC, NSEC3 and NSEC3PARAM anywhere; the apex DNSKEY, CDS and CDNSKEY
/// RRsets, RFC 7344). A secondary thus gets the unsigned zone, as from Knot's onlinesign
/// module, and signs it online itself with the same keys; a transfer never carries a zone
/// signed in part, which no validator could use.
pub(crate) fn transferred(apex: &Name, owner: &Name, rtype: RrType) -> bool {
    let signers = matches!(
        rtype,
        RrType::RRSIG | RrType::NSEC | RrType::NSEC3 | RrType::NSEC3PARAM
    );
    let apex_keys = matches!(rtype, RrType::DNSKEY | RrType::CDS | RrType::CDNSKEY);
    !(signers || apex_keys && owner == apex)
}

/// The NSEC RRset of a compact denial (RFC 9824 §3) proving `denial` in `zone`, with TTL `ttl`
/// (the zone's negative-caching TTL, RFC 9077 §3, in seconds): owner and type bitmap as the
/// module doc says. `None`
/// for a wildcard answer (signed as QNAME's own data, it needs no proof) and for a QNAME too
/// long to have a successor `\000.<QNAME>` (over 253 octets).
pub(crate) fn compact_nsec(
    zone: &pqdns_core::Zone,
    denial: Denial<'_>,
    ttl: u32,
) -> Option<(Name, RRset)> {
    let types_at = |name: &Name| -> Vec<RrType> {
        zone.nodes.get(name).map_or_else(Vec::new, |node| {
            node.iter()
                .filter(|(_, s)| !s.rdatas.is_empty())
                .map(|(t, _)| *t)
                .collect()
        })
    };
    let (owner, mut types) = match denial {
        Denial::NxDomain { qname, .. } => (qname, vec![RrType::NXNAME]),
        Denial::NoData { name } => (name, types_at(name)),
        Denial::WildcardNoData {
            qname,
            closest_encloser,
        } => {
            let wildcard = closest_encloser.prepend_label(b"*").ok()?;
            (qname, types_at(&wildcard))
        }
        Denial::WildcardAnswer { .. } => return None,
    };
    types.extend([RrType::RRSIG, RrType::NSEC]);
    types.sort();
    types.dedup();
    let owner = owner.to_lowercase();
    // The next name `\000.<owner>`, written straight into the RDATA, then the type bitmap
    // (room for its first window, at most 34 bytes).
    if owner.wire_len() + 2 > pqdns_core::name::MAX_NAME_LEN {
        return None;
    }
    let mut rdata = Vec::with_capacity(2 + owner.wire_len() + 34);
    rdata.extend_from_slice(&[1, 0]);
    rdata.extend_from_slice(owner.as_wire());
    pqdns_core::rdata::write_type_bitmap(&mut rdata, &types);
    let set = RRset {
        ttl,
        rdatas: vec![rdata],
        ..RRset::default()
    };
    Some((owner, set))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqdns_core::rdata::read_type_bitmap;

    fn n(s: &str) -> Name {
        s.parse().unwrap()
    }

    fn zone() -> pqdns_core::Zone {
        let text = "@ SOA ns hm 1 2 3 4 300\n@ NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\n\
                    www AAAA 2001:db8::2\nb.ent TXT x\n*.w MX 10 www\n";
        let origin = n("example.");
        let records = pqdns_core::zonefile::ZoneFileReader::new(Some(origin.clone()), Some(600))
            .read_str(text, "t")
            .unwrap();
        pqdns_core::Zone::from_records(origin, records).unwrap()
    }

    fn nsec(denial: Denial<'_>) -> (Name, Name, Vec<RrType>, u32) {
        let zone = zone();
        let (owner, set) = compact_nsec(&zone, denial, zone.negative_ttl()).unwrap();
        let (next, used) = Name::read_uncompressed(&set.rdatas[0]).unwrap();
        let types = read_type_bitmap(&set.rdatas[0][used..]).unwrap();
        (owner, next, types, set.ttl)
    }

    /// Transfers carry the data, not the signer's records; CDS elsewhere than the apex is
    /// data (a child's, as in any zone file).
    #[test]
    fn what_a_transfer_of_an_online_zone_carries() {
        let apex = n("example.");
        let www = n("www.example.");
        for (owner, rtype, sent) in [
            (&apex, RrType::SOA, true),
            (&apex, RrType::NS, true),
            (&apex, RrType::DNSKEY, false),
            (&apex, RrType::CDS, false),
            (&apex, RrType::CDNSKEY, false),
            (&apex, RrType::RRSIG, false),
            (&www, RrType::A, true),
            (&www, RrType::NSEC, false),
            (&www, RrType::RRSIG, false),
            (&www, RrType::CDS, true),
            (&www, RrType::DS, true),
        ] {
            assert_eq!(transferred(&apex, owner, rtype), sent, "{owner} {rtype}");
        }
    }

    /// RFC 9824 §3: owner QNAME, next `\000.QNAME`, NXNAME only for a name that does not
    /// exist, the real types at a name that does, none at an empty non-terminal.
    #[test]
    fn compact_nsec_records() {
        let q = n("Nope.Example.");
        let ce = n("example.");
        let (owner, next, types, ttl) = nsec(Denial::NxDomain {
            qname: &q,
            closest_encloser: &ce,
        });
        assert_eq!(owner.to_string(), "nope.example.");
        assert_eq!(next.as_wire(), b"\x01\x00\x04nope\x07example\x00");
        assert_eq!(types, [RrType::RRSIG, RrType::NSEC, RrType::NXNAME]);
        assert_eq!(ttl, 300, "min(SOA TTL, MINIMUM)");
        let www = n("www.example.");
        let (_, _, types, _) = nsec(Denial::NoData { name: &www });
        assert_eq!(
            types,
            [RrType::A, RrType::AAAA, RrType::RRSIG, RrType::NSEC]
        );
        let ent = n("ent.example.");
        let (owner, _, types, _) = nsec(Denial::NoData { name: &ent });
        assert_eq!(owner, ent);
        assert_eq!(types, [RrType::RRSIG, RrType::NSEC]);
        let q = n("x.w.example.");
        let ce = n("w.example.");
        let (owner, _, types, _) = nsec(Denial::WildcardNoData {
            qname: &q,
            closest_encloser: &ce,
        });
        assert_eq!(owner, q);
        assert_eq!(types, [RrType::MX, RrType::RRSIG, RrType::NSEC]);
        // The successor of a 253-octet QNAME is 255 octets long; a longer QNAME has none.
        let qname = |last: usize| {
            let label = |c: &str| c.repeat(63);
            let (a, b, c, d) = (label("a"), label("b"), label("c"), "d".repeat(last));
            n(&format!("{a}.{b}.{c}.{d}.example."))
        };
        let longest = qname(51);
        assert_eq!(longest.wire_len(), 253);
        let (_, next, _, _) = nsec(Denial::NxDomain {
            qname: &longest,
            closest_encloser: &ce,
        });
        assert_eq!(next.wire_len(), 255);
        assert_eq!(&next.as_wire()[2..], longest.as_wire());
        let too_long = qname(52);
        let denial = Denial::NxDomain {
            qname: &too_long,
            closest_encloser: &ce,
        };
        assert!(compact_nsec(&zone(), denial, 300).is_none());
        let answer = Denial::WildcardAnswer {
            qname: &q,
            closest_encloser: &ce,
        };
        assert!(compact_nsec(&zone(), answer, 300).is_none());
    }
}
