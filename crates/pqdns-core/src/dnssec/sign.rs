//! Zone signing (RFC 4035 §2): DNSKEY RRset at the apex, an RRSIG per algorithm over every
//! authoritative RRset (not over delegation NS or glue, §2.2), DS signed at the parent side, and
//! an NSEC (RFC 4034 §4) or NSEC3 (RFC 5155 §7.1) chain. Signing runs on all cores (rayon).
//!
//! Re-signing ([`resign_zone`]) keeps the signatures of an earlier signing of the zone for
//! RRsets that did not change, by keys still in use, while they have time left: a one-record
//! change costs the signatures of that RRset, of the SOA and of the denial records around the
//! name, not the whole zone's. New expirations can be spread by a jitter so that later refreshes
//! come in batches rather than all at once (RFC 6781 §4.4.2.2).
//!
//! MTL keys ([`super::mtl`]) sign all their RRsets as one series with one ladder signature:
//! full signatures on the apex SOA and DNSKEY RRsets, condensed ones elsewhere, as Verisign's
//! MTL-mode signer does (draft-fregly-dnsop-slh-dsa-mtl-dnssec). Given a series store
//! ([`Incremental::mtl_series`]), a re-signing appends to the key's saved series instead of
//! starting a new one.

use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

use super::algorithm::SecAlg;
use super::keyfile::ZoneKey;
use super::mtl::series::{SeriesError, SeriesStore};
use super::mtl::{MtlParams, MtlSignature, MtlSigner, SeriesId};
use super::nsec3::{hashed_owner_name, Nsec3Params, MAX_ITERATIONS};
use super::provider::CryptoError;
use super::rrsig::{label_count, signed_data, write_signed_data, Rrsig, RrsigFields};
use crate::name::Name;
use crate::rr::{Class, RrType};
use crate::wire::rdata::Rrsig as RrsigView;
use crate::zone::{Authority, RRset, Zone};
use sha2::{Digest, Sha256};

/// Authenticated denial of existence to build.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Denial {
    /// NSEC chain (RFC 4034 §4).
    Nsec,
    /// NSEC3 chain (RFC 5155) with these parameters.
    Nsec3(Nsec3Params),
    /// No chain: an online signer answers each denial with one NSEC made for the query
    /// (compact denial of existence, RFC 9824), and signs the zone's data when an answer needs
    /// it ([`sign_online`]). Signing the zone signs only the apex DNSKEY, CDS and CDNSKEY
    /// RRsets, with the key-signing keys as always.
    Compact,
}

/// What to sign with and for how long.
#[derive(Clone, Debug)]
pub struct SigningPolicy {
    /// Signature inception, UNIX seconds (truncated to 32 bits on the wire).
    pub inception: u64,
    /// Signature expiration, UNIX seconds.
    pub expiration: u64,
    /// Denial of existence.
    pub denial: Denial,
    /// The apex DNSKEY RRset (RDATA, wire format, with the signing keys' TTL) when it is not
    /// simply the signing keys': during rollovers keys are published without signing
    /// (pre-publication) or sign without being published (RFC 6781 §4.1.4;
    /// [`super::rollover`]). `None`: the signing keys'.
    pub published_dnskeys: Option<Vec<Vec<u8>>>,
}

/// Why signing failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SignError {
    /// No keys were given.
    #[error("no signing keys for {0}")]
    NoKeys(Name),
    /// A key belongs to another zone.
    #[error("key {key} belongs to {owner}, not to zone {zone}")]
    WrongZone {
        /// Key description.
        key: String,
        /// Its owner.
        owner: Name,
        /// The zone being signed.
        zone: Name,
    },
    /// The crypto library failed on one RRset.
    #[error("signing {owner} {rtype}: {source}")]
    Crypto {
        /// RRset owner.
        owner: Name,
        /// RRset type.
        rtype: RrType,
        /// The reason.
        source: CryptoError,
    },
    /// An MTL key's saved series could not be read or saved ([`super::mtl::series`]).
    #[error(transparent)]
    MtlSeries(#[from] SeriesError),
    /// Two names hash to the same NSEC3 owner (RFC 5155 §7.1: choose another salt).
    #[error("NSEC3 hash collision between names in {0}; choose a salt")]
    Nsec3Collision(Name),
    /// More NSEC3 iterations than validators accept: RFC 9276 §3.2 lets them treat such a
    /// zone as insecure (and many do above [`MAX_ITERATIONS`]).
    #[error(
        "{0} NSEC3 iterations exceed {max}: validators treat such zones as insecure \
         (RFC 9276 §3.2); use 0 (RFC 9276 §3.1)",
        max = MAX_ITERATIONS
    )]
    Nsec3Iterations(u16),
}

/// Counts from one signing run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SignStats {
    /// RRsets signed.
    pub rrsets: usize,
    /// RRSIG records in the zone afterwards (made and kept).
    pub signatures: usize,
    /// Of those, signatures kept from the previous signing ([`Incremental::previous`]).
    pub kept: usize,
    /// NSEC or NSEC3 records made.
    pub denial_records: usize,
    /// The earliest expiration of any RRSIG in the zone, UNIX seconds (`None` without any):
    /// when less than the refresh period is left before it, the zone needs re-signing.
    pub earliest_expiration: Option<u64>,
}

/// What [`resign_zone`] may keep from an earlier signing, and how it spreads expirations.
#[derive(Clone, Copy, Debug, Default)]
pub struct Incremental<'z> {
    /// The zone as signed before (as served). An RRSIG of it is kept when its RRset has the
    /// same owner, type, TTL and RDATA set now, its key is still a signing key (same DNSKEY
    /// RDATA at the previous apex, and no other key there with its algorithm and key tag), and
    /// it expires after `keep_expiring_after`. MTL keys always sign afresh, keeping only
    /// leaves of their saved series ([`Incremental::mtl_series`]).
    pub previous: Option<&'z Zone>,
    /// UNIX seconds: signatures expiring at or before this are made anew.
    pub keep_expiring_after: u64,
    /// Where MTL keys keep their series between signings ([`super::mtl::series`]). With it, a
    /// re-signing appends to the key's series while it has room, and unchanged RRsets that
    /// `previous` signed in that series keep their leaves with paths to the new ladder
    /// (`sign_series`); without it, every signing starts a new series.
    pub mtl_series: Option<&'z dyn SeriesStore>,
    /// Each new signature's expiration is [`SigningPolicy::expiration`] minus up to this many
    /// seconds, chosen per RRset (from a SHA-256 of its owner name, type and the inception),
    /// so that expirations spread over the jitter window (0: none).
    pub jitter: u64,
}

/// One RRset to sign.
pub(super) struct Job {
    /// Its owner (a hashed owner name for NSEC3).
    pub(super) owner: Name,
    /// Its type.
    pub(super) rtype: RrType,
    /// Whether it is an NSEC3 RRset (in [`Zone::nsec3`]).
    pub(super) nsec3: bool,
}

/// Signs `zone` in place with `keys`: removes old RRSIG/NSEC/NSEC3/NSEC3PARAM, adds the keys'
/// DNSKEYs, builds the denial chain and signs. `progress(done, total)` is called as RRsets are
/// signed (from worker threads).
///
/// # Errors
/// [`SignError`] if no keys are given, a key belongs to another zone, NSEC3 iterations exceed
/// [`MAX_ITERATIONS`] (more than 0 is logged as a warning), the library fails, or NSEC3
/// hashes collide.
pub fn sign_zone(
    zone: &mut Zone,
    keys: &[ZoneKey],
    policy: &SigningPolicy,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<SignStats, SignError> {
    resign_zone(zone, keys, policy, &Incremental::default(), progress)
}

/// [`sign_zone`] keeping what `incremental` allows from an earlier signing and spreading new
/// expirations by its jitter. The denial chain is rebuilt whole (hashing, no signing); its
/// records keep their signatures where they did not change.
///
/// # Errors
/// As [`sign_zone`].
pub fn resign_zone(
    zone: &mut Zone,
    keys: &[ZoneKey],
    policy: &SigningPolicy,
    incremental: &Incremental<'_>,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<SignStats, SignError> {
    if keys.is_empty() {
        return Err(SignError::NoKeys(zone.origin.clone()));
    }
    if let Some(k) = keys.iter().find(|k| k.owner != zone.origin) {
        return Err(SignError::WrongZone {
            key: format!("{k:?}"),
            owner: k.owner.clone(),
            zone: zone.origin.clone(),
        });
    }
    if let Denial::Nsec3(params) = &policy.denial {
        if params.iterations > MAX_ITERATIONS {
            return Err(SignError::Nsec3Iterations(params.iterations));
        }
        if params.iterations > 0 {
            tracing::warn!(
                zone = %zone.origin,
                iterations = params.iterations,
                "NSEC3 iterations above 0 cost resolvers work for no gain; RFC 9276 §3.1 says 0"
            );
        }
    }
    strip_dnssec(zone);
    let apex = zone.origin.clone();
    match &policy.published_dnskeys {
        Some(dnskeys) => {
            for rdata in dnskeys {
                insert_rdata(zone, &apex, RrType::DNSKEY, keys[0].ttl, rdata.clone());
            }
        }
        None => {
            for key in keys {
                insert_rdata(zone, &apex, RrType::DNSKEY, key.ttl, key.dnskey_rdata());
            }
        }
    }
    let denial_records = match &policy.denial {
        Denial::Compact => 0,
        Denial::Nsec => build_nsec(zone),
        Denial::Nsec3(params) => {
            insert_rdata(
                zone,
                &apex,
                RrType::NSEC3PARAM,
                0,
                params.nsec3param_rdata(),
            );
            build_nsec3(zone, params)?
        }
    };

    let online = policy.denial == Denial::Compact;
    let (jobs, sets): (Vec<Job>, Vec<&RRset>) = collect_jobs(zone)
        .into_iter()
        .filter(|(job, _)| !online || (job.owner == apex && is_key_rrset(job.rtype)))
        .unzip();
    let tags: Vec<u16> = keys.iter().map(ZoneKey::key_tag).collect();
    let total = jobs.len();
    let done = AtomicUsize::new(0);
    let algorithms = {
        let mut a: Vec<SecAlg> = keys.iter().map(|k| k.number).collect();
        a.sort();
        a.dedup();
        a
    };
    let keeper = Keeper::new(incremental, keys, &tags);
    let previous = keeper.previous_sets(&jobs);
    let kept = AtomicUsize::new(0);
    let mut results: Vec<(usize, Vec<Vec<u8>>)> = jobs
        .par_iter()
        .enumerate()
        .map(|(i, job)| {
            let set = sets[i];
            let before = unchanged(previous[i], set);
            let expiration = policy.expiration - jitter(job, policy, incremental.jitter);
            let mut sigs = Vec::new();
            for &alg in &algorithms {
                for (key, &tag) in signers(keys, &tags, alg, job.rtype) {
                    if MtlParams::of(key.key.algorithm()).is_some() {
                        continue;
                    }
                    if let Some(old) = keeper.keep(before, job, set, (keys, key, tag)) {
                        kept.fetch_add(1, Ordering::Relaxed);
                        sigs.push(old.to_vec());
                    } else {
                        sigs.push(sign_rrset(zone, job, set, key, tag, policy, expiration)?);
                    }
                }
            }
            let n = done.fetch_add(1, Ordering::Relaxed) + 1;
            progress(n, total);
            Ok((i, sigs))
        })
        .collect::<Result<_, SignError>>()?;
    for (k, key) in keys.iter().enumerate() {
        let Some(params) = MtlParams::of(key.key.algorithm()) else {
            continue;
        };
        // This key's RRsets in zone order: new RRSIG fields and signed data, and the earlier
        // signature that may stay (unchanged RRset, same key, time left) with its leaf.
        let mut mine = Vec::new();
        for (i, job) in jobs.iter().enumerate() {
            if !signers(keys, &tags, key.number, job.rtype).any(|(s, _)| std::ptr::eq(s, key)) {
                continue;
            }
            let set = sets[i];
            let data_of = |fields: &RrsigFields| {
                signed_data(
                    fields,
                    &job.owner,
                    Class::IN,
                    set.rdatas.iter().map(Vec::as_slice),
                )
            };
            let fields = rrsig_fields(zone, job, set, key, tags[k], policy, policy.expiration);
            let earlier = keeper
                .keep(unchanged(previous[i], set), job, set, (keys, key, tags[k]))
                .and_then(Rrsig::parse)
                .and_then(|old| {
                    let path = MtlSignature::parse_as(params.format, old.signature)
                        .ok()?
                        .path;
                    let data = data_of(&old.fields);
                    Some(EarlierLeaf {
                        series: path.series,
                        leaf: path.leaf,
                        fields: old.fields,
                        data,
                    })
                });
            mine.push(MtlRrset {
                index: i,
                data: data_of(&fields),
                fields,
                full: job.owner == zone.origin && matches!(job.rtype, RrType::SOA | RrType::DNSKEY),
                earlier,
            });
        }
        let rdatas = sign_series(key, &mine, incremental.mtl_series)?;
        for (rrset, rdata) in mine.iter().zip(rdatas) {
            results[rrset.index].1.push(rdata);
        }
    }

    let mut stats = SignStats {
        rrsets: total,
        kept: kept.into_inner(),
        denial_records,
        ..SignStats::default()
    };
    drop(sets);
    // The results are in job order, which is the zone's own order: one walk stores them.
    let mut next = jobs
        .iter()
        .zip(results.into_iter().map(|(_, sigs)| sigs))
        .peekable();
    let mut store = |owner: &Name, rtype: RrType, nsec3: bool, set: &mut RRset| {
        let is_next = |(job, _): &(&Job, Vec<Vec<u8>>)| {
            job.nsec3 == nsec3 && job.rtype == rtype && job.owner == *owner
        };
        let Some((_, sigs)) = next.next_if(is_next) else {
            return;
        };
        stats.signatures += sigs.len();
        let expirations = sigs
            .iter()
            .filter_map(|s| RrsigView::parse(s))
            .map(|s| u64::from(s.expiration));
        stats.earliest_expiration = stats
            .earliest_expiration
            .into_iter()
            .chain(expirations)
            .min();
        set.rrsig_ttl = set.ttl;
        set.rrsigs = sigs;
    };
    for (owner, node) in zone.nodes.iter_mut() {
        for (rtype, set) in node.iter_mut() {
            store(owner, *rtype, false, set);
        }
    }
    for (owner, set) in zone.nsec3.iter_mut() {
        store(owner, RrType::NSEC3, true, set);
    }
    Ok(stats)
}

/// Signs one authoritative RRset of a signed zone again, replacing its RRSIGs: for records
/// that change after the rest of the zone is signed, as ZONEMD does (RFC 8976 §3.5: "the
/// ZONEMD RRset is signed last"). An MTL key signs it as a new series of one leaf with a full
/// signature. Does nothing when the RRset does not exist.
///
/// # Errors
/// [`SignError`] as [`sign_zone`] for the keys and the library.
pub fn sign_rrset_again(
    zone: &mut Zone,
    owner: &Name,
    rtype: RrType,
    keys: &[ZoneKey],
    policy: &SigningPolicy,
) -> Result<(), SignError> {
    let Some(set) = zone.rrset(owner, rtype).filter(|s| !s.rdatas.is_empty()) else {
        return Ok(());
    };
    let job = Job {
        owner: owner.clone(),
        rtype,
        nsec3: false,
    };
    let tags: Vec<u16> = keys.iter().map(ZoneKey::key_tag).collect();
    let mut algorithms: Vec<SecAlg> = keys.iter().map(|k| k.number).collect();
    algorithms.sort();
    algorithms.dedup();
    let mut sigs = Vec::new();
    for alg in algorithms {
        for (key, &tag) in signers(keys, &tags, alg, rtype) {
            if MtlParams::of(key.key.algorithm()).is_none() {
                sigs.push(sign_rrset(
                    zone,
                    &job,
                    set,
                    key,
                    tag,
                    policy,
                    policy.expiration,
                )?);
                continue;
            }
            let fields = rrsig_fields(zone, &job, set, key, tag, policy, policy.expiration);
            let data = signed_data(
                &fields,
                owner,
                Class::IN,
                set.rdatas.iter().map(Vec::as_slice),
            );
            let one = MtlRrset {
                index: 0,
                fields,
                data,
                full: true,
                earlier: None,
            };
            sigs.extend(sign_series(key, &[one], None)?);
        }
    }
    if let Some(set) = zone.nodes.get_mut(owner).and_then(|n| n.get_mut(&rtype)) {
        set.rrsig_ttl = set.ttl;
        set.rrsigs = sigs;
    }
    Ok(())
}

/// The apex RRsets that the key-signing keys sign ([`signers`]): DNSKEY, CDS, CDNSKEY.
fn is_key_rrset(rtype: RrType) -> bool {
    matches!(rtype, RrType::DNSKEY | RrType::CDS | RrType::CDNSKEY)
}

/// Signs one RRset of zone `origin` when an answer needs it (online signing, RFC 9824 §1):
/// one RRSIG RDATA for each key of `keys` (with its key tag in `tags`, same order) that
/// signs `rtype` as [`sign_zone`] chooses them (per algorithm, the key-signing keys for DNSKEY,
/// CDS and CDNSKEY, the zone-signing keys for the rest; a CSK for both). `owner` is the name
/// as it is answered (a name synthesised from a wildcard is signed as its own: its label
/// count is the owner's); `ttl` is the RRset's TTL in seconds, `inception` and `expiration`
/// UNIX seconds (truncated to 32 bits on the wire, RFC 4034 §3.1.5). MTL keys sign nothing
/// here: their signatures belong to a series with a signed ladder (online zones refuse them).
///
/// # Errors
/// [`SignError::Crypto`] if the library fails.
#[allow(clippy::too_many_arguments, reason = "the fields of one RRSIG")]
pub fn sign_online(
    origin: &Name,
    owner: &Name,
    rtype: RrType,
    ttl: u32,
    rdatas: &[Vec<u8>],
    keys: &[ZoneKey],
    tags: &[u16],
    (inception, expiration): (u64, u64),
) -> Result<Vec<Vec<u8>>, SignError> {
    ONLINE_SIGNED_DATA.with_borrow_mut(|data| {
        let mut sigs = Vec::with_capacity(keys.len());
        // Per algorithm in ascending order, as sign_zone: the smallest one above the last.
        let mut last: Option<SecAlg> = None;
        while let Some(alg) = keys
            .iter()
            .map(|k| k.number)
            .filter(|a| last.is_none_or(|l| *a > l))
            .min()
        {
            last = Some(alg);
            for (key, &key_tag) in signers(keys, tags, alg, rtype) {
                if MtlParams::of(key.key.algorithm()).is_some() {
                    continue;
                }
                let fields = RrsigFields {
                    type_covered: rtype,
                    algorithm: key.number,
                    labels: label_count(owner),
                    original_ttl: ttl,
                    expiration: expiration as u32,
                    inception: inception as u32,
                    key_tag,
                    signer: origin.clone(),
                };
                write_signed_data(
                    &fields,
                    owner,
                    Class::IN,
                    rdatas.iter().map(Vec::as_slice),
                    data,
                );
                let sig = key.key.sign(data).map_err(|source| SignError::Crypto {
                    owner: owner.clone(),
                    rtype,
                    source,
                })?;
                sigs.push(fields.rdata(&sig));
            }
        }
        if data.capacity() > ONLINE_SIGNED_DATA_KEPT {
            *data = Vec::new();
        }
        Ok(sigs)
    })
}

thread_local! {
    /// This thread's buffer for the data an online signature covers ([`sign_online`]), reused
    /// so that a signature allocates nothing for it.
    static ONLINE_SIGNED_DATA: std::cell::RefCell<Vec<u8>> = const {
        std::cell::RefCell::new(Vec::new())
    };
}

/// Bytes of [`ONLINE_SIGNED_DATA`] kept between signatures; a larger buffer (a large RRset's)
/// is given back after use.
const ONLINE_SIGNED_DATA_KEPT: usize = 16 << 10;

/// An RRset an MTL key signs ([`sign_series`]).
struct MtlRrset {
    /// Its job's index.
    index: usize,
    /// RRSIG fields of a new signature.
    fields: RrsigFields,
    /// The data they sign (RFC 4034 §3.1.8.1).
    data: Vec<u8>,
    /// Whether it gets a full signature (the apex SOA and DNSKEY RRsets).
    full: bool,
    /// The earlier signature that may stay, if any.
    earlier: Option<EarlierLeaf>,
}

/// An earlier MTL signature of an unchanged RRset: its series and leaf, the RRSIG fields it
/// was made with and the data they sign.
struct EarlierLeaf {
    series: SeriesId,
    leaf: u64,
    fields: RrsigFields,
    data: Vec<u8>,
}

/// Signs `rrsets` with MTL key `key` as one series and one new ladder; returns their RRSIG
/// RDATA in order.
///
/// With a `store`, the key's saved series resumes while it has room for the new leaves
/// ([`SeriesStore::capacity`]): an RRset whose earlier signature is a leaf of that series
/// holding the same data keeps its leaf (and its RRSIG fields) and gets a path to the new
/// ladder; the others are appended as new leaves. A series that is full, missing or another
/// key's gives way to a new one. The series is saved with its new leaves before the ladder is
/// signed and before any signature exists, so a signer killed at any point never hands out
/// one leaf index for two messages ([`super::mtl::series`]). Without a store, every signing
/// starts a new series.
fn sign_series(
    key: &ZoneKey,
    rrsets: &[MtlRrset],
    store: Option<&dyn SeriesStore>,
) -> Result<Vec<Vec<u8>>, SignError> {
    let crypto = |source| SignError::Crypto {
        owner: key.owner.clone(),
        rtype: RrType::DNSKEY,
        source,
    };
    let stays = |signer: &MtlSigner, r: &MtlRrset| {
        r.earlier
            .as_ref()
            .filter(|e| e.series == signer.series() && signer.holds(e.leaf, &e.data))
            .map(|e| e.leaf)
    };
    let saved = store.map(|s| s.load(key)).transpose()?.flatten();
    let resumed = match (saved, store) {
        (Some(saved), Some(store)) => {
            let signer = MtlSigner::resume(&*key.key, &saved).map_err(crypto)?;
            let new = rrsets
                .iter()
                .filter(|r| stays(&signer, r).is_none())
                .count() as u64;
            if signer.leaf_count() + new <= store.capacity() {
                Some(signer)
            } else {
                tracing::info!(
                    zone = %key.owner, key = key.key_tag(), series = %signer.series(),
                    leaves = signer.leaf_count(), new, capacity = store.capacity(),
                    "MTL series full: starting a new series"
                );
                None
            }
        }
        _ => None,
    };
    let mut signer = match resumed {
        Some(signer) => signer,
        None => MtlSigner::new(&*key.key).map_err(crypto)?,
    };
    let first_new = signer.leaf_count();
    let mut leaves = Vec::with_capacity(rrsets.len());
    for r in rrsets {
        leaves.push(match stays(&signer, r) {
            Some(leaf) => (leaf, r.earlier.as_ref().map(|e| &e.fields)),
            None => (signer.append(&r.data).map_err(crypto)?, None),
        });
    }
    if let Some(store) = store {
        store.save(key, &signer.saved())?;
        tracing::info!(
            zone = %key.owner, key = key.key_tag(), series = %signer.series(),
            first_new, leaves = signer.leaf_count(), "MTL series saved"
        );
    }
    if rrsets.iter().any(|r| r.full) {
        signer.sign_ladder().map_err(crypto)?;
    }
    rrsets
        .iter()
        .zip(leaves)
        .map(|(r, (leaf, kept_fields))| {
            let sig = signer.signature(leaf, r.full).map_err(crypto)?;
            Ok(kept_fields.unwrap_or(&r.fields).rdata(&sig))
        })
        .collect()
}

/// Keys of algorithm `alg` that sign RRsets of `rtype`: KSKs (SEP) for DNSKEY and for CDS and
/// CDNSKEY (which RFC 7344 §4.1 wants signed by a key the parent's DS points to), ZSKs for the
/// rest; a key is used for both when its algorithm has only one kind (CSK).
/// Each key comes with its precomputed key tag.
pub(super) fn signers<'k>(
    keys: &'k [ZoneKey],
    tags: &'k [u16],
    alg: SecAlg,
    rtype: RrType,
) -> impl Iterator<Item = (&'k ZoneKey, &'k u16)> {
    let of_alg = move || keys.iter().zip(tags).filter(move |(k, _)| k.number == alg);
    let want_sep = matches!(rtype, RrType::DNSKEY | RrType::CDS | RrType::CDNSKEY);
    let has_wanted = of_alg().any(|(k, _)| k.is_sep() == want_sep);
    of_alg().filter(move |(k, _)| !has_wanted || k.is_sep() == want_sep)
}

/// Seconds taken off the expiration of `job`'s new signatures: up to `jitter`, the same for
/// one RRset and inception.
pub(super) fn jitter(job: &Job, policy: &SigningPolicy, jitter: u64) -> u64 {
    if jitter == 0 {
        return 0;
    }
    let mut h = Sha256::new();
    h.update(job.owner.as_wire());
    h.update(job.rtype.0.to_be_bytes());
    h.update(policy.inception.to_be_bytes());
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first) % (jitter + 1)
}

/// Which signatures of the previous signing may stay ([`Incremental`]).
struct Keeper<'z> {
    previous: Option<&'z Zone>,
    keep_expiring_after: u64,
    /// Per key (as in the key list): whether the previous apex had exactly its DNSKEY for its
    /// algorithm and key tag.
    known: Vec<bool>,
}

impl<'z> Keeper<'z> {
    fn new(incremental: &Incremental<'z>, keys: &[ZoneKey], tags: &[u16]) -> Keeper<'z> {
        let previous = incremental.previous;
        let dnskeys = previous
            .and_then(|p| p.rrset(&p.origin, RrType::DNSKEY))
            .map_or(&[][..], |s| &s.rdatas[..]);
        let known = keys
            .iter()
            .zip(tags)
            .map(|(key, &tag)| {
                let rdata = key.dnskey_rdata();
                let same_id = dnskeys.iter().filter(|d| {
                    d.get(3) == Some(&key.number.0) && super::dnskey::key_tag(d) == tag
                });
                same_id.clone().count() == 1 && same_id.clone().all(|d| *d == rdata)
            })
            .collect();
        Keeper {
            previous,
            keep_expiring_after: incremental.keep_expiring_after,
            known,
        }
    }

    /// Each job's RRset in the previous zone, if any: one walk along both, as the jobs are in
    /// the zone's order.
    fn previous_sets(&self, jobs: &[Job]) -> Vec<Option<&'z RRset>> {
        let Some(previous) = self.previous else {
            return vec![None; jobs.len()];
        };
        let mut nodes = previous.nodes.iter().peekable();
        let mut hashed = previous.nsec3.iter().peekable();
        jobs.iter()
            .map(|job| {
                if job.nsec3 {
                    while hashed.next_if(|(n, _)| **n < job.owner).is_some() {}
                    hashed
                        .peek()
                        .filter(|(n, _)| **n == job.owner)
                        .map(|(_, s)| *s)
                } else {
                    while nodes.next_if(|(n, _)| **n < job.owner).is_some() {}
                    nodes
                        .peek()
                        .filter(|(n, _)| **n == job.owner)
                        .and_then(|(_, node)| node.get(&job.rtype))
                }
            })
            .collect()
    }

    /// The RRSIG of `before` by `key` (of `keys`) that may stay, if any.
    fn keep(
        &self,
        before: &'z [Vec<u8>],
        job: &Job,
        set: &RRset,
        (keys, key, tag): (&[ZoneKey], &ZoneKey, u16),
    ) -> Option<&'z [u8]> {
        let index = keys.iter().position(|k| std::ptr::eq(k, key))?;
        if !self.known[index] {
            return None;
        }
        before.iter().map(Vec::as_slice).find(|rdata| {
            RrsigView::parse(rdata).is_some_and(|f| {
                f.type_covered == job.rtype
                    && f.algorithm == key.number
                    && f.key_tag == tag
                    && f.original_ttl == set.ttl
                    && f.labels == label_count(&job.owner)
                    && f.signer == key.owner
                    && u64::from(f.expiration) > self.keep_expiring_after
            })
        })
    }
}

/// The RRSIGs of `before`, the previous version of `set`, when its data is unchanged (empty
/// otherwise).
fn unchanged<'z>(before: Option<&'z RRset>, set: &RRset) -> &'z [Vec<u8>] {
    match before {
        Some(b) if b.ttl == set.ttl && same_rdatas(&b.rdatas, &set.rdatas) => &b.rrsigs,
        _ => &[],
    }
}

/// Whether two RDATA lists hold the same records (in any order).
fn same_rdatas(a: &[Vec<u8>], b: &[Vec<u8>]) -> bool {
    if a == b {
        return true;
    }
    if a.len() != b.len() {
        return false;
    }
    let mut a: Vec<&Vec<u8>> = a.iter().collect();
    let mut b: Vec<&Vec<u8>> = b.iter().collect();
    a.sort();
    b.sort();
    a == b
}

fn rrsig_fields(
    zone: &Zone,
    job: &Job,
    set: &RRset,
    key: &ZoneKey,
    key_tag: u16,
    policy: &SigningPolicy,
    expiration: u64,
) -> RrsigFields {
    RrsigFields {
        type_covered: job.rtype,
        algorithm: key.number,
        labels: label_count(&job.owner),
        original_ttl: set.ttl,
        expiration: expiration as u32,
        inception: policy.inception as u32,
        key_tag,
        signer: zone.origin.clone(),
    }
}

/// One new RRSIG (RDATA) of `set` by `key`, expiring at `expiration` (UNIX seconds).
pub(super) fn sign_rrset(
    zone: &Zone,
    job: &Job,
    set: &RRset,
    key: &ZoneKey,
    key_tag: u16,
    policy: &SigningPolicy,
    expiration: u64,
) -> Result<Vec<u8>, SignError> {
    let fields = rrsig_fields(zone, job, set, key, key_tag, policy, expiration);
    let data = signed_data(
        &fields,
        &job.owner,
        Class::IN,
        set.rdatas.iter().map(Vec::as_slice),
    );
    let sig = key.key.sign(&data).map_err(|source| SignError::Crypto {
        owner: job.owner.clone(),
        rtype: job.rtype,
        source,
    })?;
    Ok(fields.rdata(&sig))
}

fn collect_jobs(zone: &Zone) -> Vec<(Job, &RRset)> {
    let mut jobs = Vec::new();
    for (name, node) in &zone.nodes {
        let authority = zone.authority(name);
        for (rtype, set) in node {
            if set.rdatas.is_empty() {
                continue;
            }
            let signed = match authority {
                Authority::Apex | Authority::Authoritative => true,
                Authority::Delegation => matches!(*rtype, RrType::DS | RrType::NSEC),
                Authority::Glue => false,
            };
            if signed {
                let job = Job {
                    owner: name.clone(),
                    rtype: *rtype,
                    nsec3: false,
                };
                jobs.push((job, set));
            }
        }
    }
    for (name, set) in &zone.nsec3 {
        let job = Job {
            owner: name.clone(),
            rtype: RrType::NSEC3,
            nsec3: true,
        };
        jobs.push((job, set));
    }
    jobs
}

fn strip_dnssec(zone: &mut Zone) {
    zone.nsec3.clear();
    for node in zone.nodes.values_mut() {
        node.remove(&RrType::NSEC);
        node.remove(&RrType::NSEC3PARAM);
        for set in node.values_mut() {
            set.rrsigs.clear();
        }
        node.retain(|_, s| !s.rdatas.is_empty());
    }
    zone.nodes.retain(|_, n| !n.is_empty());
}

fn insert_rdata(zone: &mut Zone, owner: &Name, rtype: RrType, ttl: u32, rdata: Vec<u8>) {
    let set = zone
        .nodes
        .entry(owner.clone())
        .or_default()
        .entry(rtype)
        .or_default();
    if set.rdatas.is_empty() {
        set.ttl = ttl;
    }
    if !set.rdatas.contains(&rdata) {
        set.rdatas.push(rdata);
    }
}

/// Names in the denial chain: everything but glue (delegation points included).
fn chain_names(zone: &Zone) -> Vec<Name> {
    zone.nodes
        .keys()
        .filter(|n| zone.authority(n) != Authority::Glue)
        .cloned()
        .collect()
}

fn build_nsec(zone: &mut Zone) -> usize {
    let names = chain_names(zone);
    let ttl = zone.negative_ttl();
    for (i, name) in names.iter().enumerate() {
        let next = &names[(i + 1) % names.len()];
        let mut types: Vec<RrType> = zone.nodes[name].keys().copied().collect();
        types.extend([RrType::RRSIG, RrType::NSEC]);
        let mut rdata = next.as_wire().to_vec();
        crate::rdata::write_type_bitmap(&mut rdata, &types);
        insert_rdata(zone, name, RrType::NSEC, ttl, rdata);
    }
    names.len()
}

fn build_nsec3(zone: &mut Zone, params: &Nsec3Params) -> Result<usize, SignError> {
    let mut entries: Vec<([u8; 20], Vec<RrType>)> = Vec::new();
    for name in chain_names(zone) {
        let node = &zone.nodes[&name];
        let mut types: Vec<RrType> = node.keys().copied().collect();
        let signed = match zone.authority(&name) {
            Authority::Delegation => node.contains_key(&RrType::DS),
            _ => true,
        };
        // RFC 5155 §7.1: with Opt-Out, unsigned delegations are left out of the chain (the
        // opt-out span covering them says so), as `verify` expects.
        if !signed && params.opt_out {
            continue;
        }
        if signed {
            types.push(RrType::RRSIG);
        }
        entries.push((params.hash(&name), types));
    }
    for ent in zone.empty_non_terminals() {
        entries.push((params.hash(&ent), Vec::new()));
    }
    entries.sort_by_key(|e| e.0);
    if entries.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(SignError::Nsec3Collision(zone.origin.clone()));
    }
    let ttl = zone.negative_ttl();
    for (i, (hash, types)) in entries.iter().enumerate() {
        let next = &entries[(i + 1) % entries.len()].0;
        let owner = hashed_owner_name(hash, &zone.origin)
            .ok_or_else(|| SignError::Nsec3Collision(zone.origin.clone()))?;
        zone.nsec3.insert(
            owner,
            RRset {
                ttl,
                rdatas: vec![params.nsec3_rdata(next, types)],
                rrsigs: Vec::new(),
                rrsig_ttl: ttl,
            },
        );
    }
    Ok(entries.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dnssec::algorithm::Algorithm;
    use crate::dnssec::keyfile::KeyRole;
    use crate::dnssec::profile::Profile;
    use crate::dnssec::provider::Provider;
    use crate::dnssec::verify::{verify_zone, VerifyOptions};
    use crate::zonefile::ZoneFileReader;

    const TEXT: &str = "@ SOA ns hm 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\nwww A 192.0.2.2\n\
                        sub NS ns.sub\nns.sub A 192.0.2.3\nb.ent A 192.0.2.4\nz TXT last\n";
    const DAY: u64 = 86_400;

    fn origin() -> Name {
        "example.".parse().unwrap()
    }

    fn zone(extra: &str) -> Zone {
        let recs = ZoneFileReader::new(Some(origin()), Some(60))
            .read_str(&format!("{TEXT}{extra}"), "t")
            .unwrap();
        Zone::from_records(origin(), recs).unwrap()
    }

    fn key(role: KeyRole) -> ZoneKey {
        ZoneKey::generate(
            &origin(),
            Algorithm::EcdsaP256Sha256,
            role,
            &Profile::default_profile(),
            &Provider::default_provider(),
            60,
        )
        .unwrap()
    }

    fn policy(now: u64, denial: Denial) -> SigningPolicy {
        SigningPolicy {
            inception: now - 3600,
            expiration: now + 14 * DAY,
            denial,
            published_dnskeys: None,
        }
    }

    /// Every RRSIG of `zone` as (owner, covered type, RDATA).
    fn rrsigs(zone: &Zone) -> Vec<(Name, RrType, Vec<u8>)> {
        let nodes = zone
            .nodes
            .iter()
            .flat_map(|(n, node)| node.iter().map(move |(t, s)| (n, *t, s)));
        let hashed = zone.nsec3.iter().map(|(n, s)| (n, RrType::NSEC3, s));
        nodes
            .chain(hashed)
            .flat_map(|(n, t, s)| s.rrsigs.iter().map(move |r| (n.clone(), t, r.clone())))
            .collect()
    }

    fn assert_valid(zone: &Zone, now: u64) {
        let opts = VerifyOptions::at(now);
        let report = verify_zone(
            zone,
            &Profile::default_profile(),
            &Provider::default_provider(),
            &opts,
        );
        assert!(report.failures.is_empty(), "{:?}", report.failures);
        assert!(report.signatures_valid > 0);
    }

    /// A one-record change re-signs its RRset, the SOA (new serial) and the denial records whose
    /// content changed, and keeps every other signature byte for byte.
    fn one_record_change_keeps_the_rest(denial: Denial) {
        let now = 1_800_000_000;
        let keys = [key(KeyRole::Ksk), key(KeyRole::Zsk)];
        let mut before = zone("");
        sign_zone(&mut before, &keys, &policy(now, denial.clone()), &|_, _| {}).unwrap();
        let mut after = zone("new TXT added\n");
        after.set_soa_serial(2);
        let later = now + DAY;
        let incremental = Incremental {
            previous: Some(&before),
            keep_expiring_after: later + 3 * DAY,
            jitter: 0,
            mtl_series: None,
        };
        let stats = resign_zone(
            &mut after,
            &keys,
            &policy(later, denial),
            &incremental,
            &|_, _| {},
        )
        .unwrap();
        assert_valid(&after, later);
        let old = rrsigs(&before);
        let changed: Vec<(Name, RrType)> = rrsigs(&after)
            .into_iter()
            .filter(|s| !old.contains(s))
            .map(|(n, t, _)| (n, t))
            .collect();
        assert_eq!(stats.kept + changed.len(), stats.signatures);
        assert!(changed.contains(&(origin(), RrType::SOA)), "{changed:?}");
        assert!(changed.contains(&("new.example.".parse().unwrap(), RrType::TXT)));
        assert!(
            !changed.contains(&(origin(), RrType::DNSKEY)),
            "{changed:?}"
        );
        assert!(
            !changed.contains(&("www.example.".parse().unwrap(), RrType::A)),
            "{changed:?}"
        );
        // The SOA, the new TXT, and at most three denial records (new name, its predecessor,
        // and for NSEC3 a changed neighbour) are signed afresh.
        assert!(changed.len() <= 5, "{changed:?}");
        assert!(stats.kept >= stats.signatures - 5);
    }

    #[test]
    fn nsec_zone_change_resigns_only_what_changed() {
        one_record_change_keeps_the_rest(Denial::Nsec);
    }

    #[test]
    fn nsec3_zone_change_resigns_only_what_changed() {
        one_record_change_keeps_the_rest(Denial::Nsec3(Nsec3Params {
            iterations: 0,
            salt: Vec::new(),
            opt_out: false,
        }));
    }

    #[test]
    fn opt_out_leaves_unsigned_delegations_out_of_the_chain() {
        // RFC 5155 §7.1: sub. (no DS) gets no NSEC3; the zone still verifies, and every NSEC3
        // has the Opt-Out flag.
        let now = 1_800_000_000;
        let params = Nsec3Params {
            opt_out: true,
            ..Nsec3Params::default()
        };
        let mut z = zone("");
        sign_zone(
            &mut z,
            &[key(KeyRole::Csk)],
            &policy(now, Denial::Nsec3(params.clone())),
            &|_, _| {},
        )
        .unwrap();
        assert_valid(&z, now);
        let sub = params.hashed_owner(&"sub.example.".parse().unwrap(), &origin());
        assert!(!z.nsec3.contains_key(&sub.unwrap()));
        let www = params.hashed_owner(&"www.example.".parse().unwrap(), &origin());
        assert!(z.nsec3.contains_key(&www.unwrap()));
        assert!(z.nsec3.values().all(|s| s.rdatas[0][1] & 1 == 1));
    }

    #[test]
    fn signatures_close_to_expiry_and_of_replaced_keys_are_made_anew() {
        let now = 1_800_000_000;
        let old_zsk = key(KeyRole::Zsk);
        let ksk = key(KeyRole::Ksk);
        let mut before = zone("");
        let nsec = policy(now, Denial::Nsec);
        let mut keys = vec![ksk, old_zsk];
        sign_zone(&mut before, &keys, &nsec, &|_, _| {}).unwrap();

        // Nothing changed, but every signature expires before the threshold: all anew.
        let mut same = zone("");
        let incremental = Incremental {
            previous: Some(&before),
            keep_expiring_after: now + 14 * DAY,
            jitter: 0,
            mtl_series: None,
        };
        let stats = resign_zone(&mut same, &keys, &nsec, &incremental, &|_, _| {}).unwrap();
        assert_eq!(stats.kept, 0);
        assert_eq!(rrsigs(&same).len(), rrsigs(&before).len());

        // A new ZSK: only the KSK's DNSKEY signature could stay, but the DNSKEY RRset changed.
        keys[1] = key(KeyRole::Zsk);
        let mut rekeyed = zone("");
        let incremental = Incremental {
            previous: Some(&before),
            keep_expiring_after: now,
            jitter: 0,
            mtl_series: None,
        };
        let stats = resign_zone(&mut rekeyed, &keys, &nsec, &incremental, &|_, _| {}).unwrap();
        assert_eq!(stats.kept, 0);
        assert_valid(&rekeyed, now);
    }

    #[test]
    fn jitter_spreads_expirations_within_the_window() {
        let now = 1_800_000_000;
        let keys = [key(KeyRole::Csk)];
        let mut z = zone("");
        let incremental = Incremental {
            jitter: DAY,
            ..Incremental::default()
        };
        let p = policy(now, Denial::Nsec);
        let stats = resign_zone(&mut z, &keys, &p, &incremental, &|_, _| {}).unwrap();
        let expirations: std::collections::BTreeSet<u64> = rrsigs(&z)
            .iter()
            .map(|(_, _, r)| u64::from(RrsigView::parse(r).unwrap().expiration))
            .collect();
        assert!(expirations.len() > 3, "{expirations:?}");
        assert!(expirations
            .iter()
            .all(|&e| e >= p.expiration - DAY && e <= p.expiration));
        assert_eq!(stats.earliest_expiration, expirations.first().copied());
        assert_valid(&z, now);
    }

    /// Online signatures made one after the other on one thread, which reuses one buffer for
    /// the signed data, each cover their own RRset: a large TXT RRset, then a one-record A
    /// RRset (it would cover the TXT's bytes too if the buffer kept them), then the TXT again,
    /// each verified over the signed data built afresh.
    #[test]
    fn online_signatures_in_sequence_cover_their_own_rrsets() {
        let k = key(KeyRole::Csk);
        let tags = [k.key_tag()];
        let scheme = Provider::default_provider()
            .scheme(Algorithm::EcdsaP256Sha256)
            .unwrap();
        let owner: Name = "WWW.Example.".parse().unwrap();
        let txt: Vec<Vec<u8>> = (0..40)
            .map(|i| {
                let text = format!("record {i} of a large RRset");
                [&[text.len() as u8][..], text.as_bytes()].concat()
            })
            .collect();
        let a = vec![vec![192, 0, 2, 7]];
        let now = crate::time::now();
        for (rtype, rdatas) in [(RrType::TXT, &txt), (RrType::A, &a), (RrType::TXT, &txt)] {
            let window = (now - 3600, now + DAY);
            let keys = std::slice::from_ref(&k);
            let sigs =
                sign_online(&origin(), &owner, rtype, 300, rdatas, keys, &tags, window).unwrap();
            assert_eq!(sigs.len(), 1);
            let rrsig = Rrsig::parse(&sigs[0]).unwrap();
            assert_eq!(rrsig.fields.type_covered, rtype);
            let data = signed_data(
                &rrsig.fields,
                &owner,
                Class::IN,
                rdatas.iter().map(Vec::as_slice),
            );
            scheme
                .verify(k.key.public_key(), &data, rrsig.signature)
                .unwrap_or_else(|e| panic!("{rtype} after another RRset: {e}"));
        }
    }
}
