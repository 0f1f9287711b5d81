//! Zone signing (RFC 4035 §2): DNSKEY RRset at the apex, an RRSIG per algorithm over every
//! authoritative RRset (not over delegation NS or glue, §2.2), DS signed at the parent side, and
//! an NSEC (RFC 4034 §4) or NSEC3 (RFC 5155 §7.1) chain. Signing runs on all cores (rayon).
//!
//! Keys with a batch interface (MTL mode, [`super::mtl`]) sign all their RRsets as one series
//! with one ladder signature: full signatures on the apex SOA and DNSKEY RRsets, condensed ones
//! elsewhere, as Verisign's MTL-mode signer does (draft-fregly-dnsop-slh-dsa-mtl-dnssec).

use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

use super::algorithm::SecAlg;
use super::keyfile::ZoneKey;
use super::nsec3::{hashed_owner_name, Nsec3Params, MAX_ITERATIONS};
use super::provider::CryptoError;
use super::rrsig::{label_count, signed_data, RrsigFields};
use crate::name::Name;
use crate::rr::{Class, RrType};
use crate::zone::{Authority, RRset, Zone};

/// Authenticated denial of existence to build.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Denial {
    /// NSEC chain (RFC 4034 §4).
    Nsec,
    /// NSEC3 chain (RFC 5155) with these parameters.
    Nsec3(Nsec3Params),
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
    /// RRSIG records made.
    pub signatures: usize,
    /// NSEC or NSEC3 records made.
    pub denial_records: usize,
}

/// One RRset to sign.
struct Job {
    owner: Name,
    rtype: RrType,
    nsec3: bool,
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
    for key in keys {
        let ttl = key.ttl;
        insert_rdata(zone, &apex, RrType::DNSKEY, ttl, key.dnskey_rdata());
    }
    let denial_records = match &policy.denial {
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

    let jobs = collect_jobs(zone);
    let tags: Vec<u16> = keys.iter().map(ZoneKey::key_tag).collect();
    let total = jobs.len();
    let done = AtomicUsize::new(0);
    let algorithms = {
        let mut a: Vec<SecAlg> = keys.iter().map(|k| k.number).collect();
        a.sort();
        a.dedup();
        a
    };
    let set_of = |job: &Job| -> &RRset {
        if job.nsec3 {
            &zone.nsec3[&job.owner]
        } else {
            &zone.nodes[&job.owner][&job.rtype]
        }
    };
    let mut results: Vec<(usize, Vec<Vec<u8>>)> = jobs
        .par_iter()
        .enumerate()
        .map(|(i, job)| {
            let set = set_of(job);
            let mut sigs = Vec::new();
            for &alg in &algorithms {
                for (key, &tag) in signers(keys, &tags, alg, job.rtype) {
                    if key.key.as_batch().is_none() {
                        sigs.push(sign_rrset(zone, job, set, key, tag, policy)?);
                    }
                }
            }
            let n = done.fetch_add(1, Ordering::Relaxed) + 1;
            progress(n, total);
            Ok((i, sigs))
        })
        .collect::<Result<_, SignError>>()?;
    for (k, key) in keys.iter().enumerate() {
        let Some(batch) = key.key.as_batch() else {
            continue;
        };
        // This key's RRsets in zone order, each with its RRSIG fields and signed data.
        let mut mine = Vec::new();
        for (i, job) in jobs.iter().enumerate() {
            if signers(keys, &tags, key.number, job.rtype).any(|(s, _)| std::ptr::eq(s, key)) {
                let fields = rrsig_fields(zone, job, set_of(job), key, tags[k], policy);
                let data = signed_data(
                    &fields,
                    &job.owner,
                    Class::IN,
                    set_of(job).rdatas.iter().map(Vec::as_slice),
                );
                let full =
                    job.owner == zone.origin && matches!(job.rtype, RrType::SOA | RrType::DNSKEY);
                mine.push((i, fields, data, full));
            }
        }
        let messages: Vec<Vec<u8>> = mine.iter().map(|m| m.2.clone()).collect();
        let full: Vec<bool> = mine.iter().map(|m| m.3).collect();
        let sigs = batch
            .sign_batch(&messages, &full)
            .map_err(|source| SignError::Crypto {
                owner: zone.origin.clone(),
                rtype: RrType::DNSKEY,
                source,
            })?;
        for ((i, fields, _, _), sig) in mine.into_iter().zip(sigs) {
            results[i].1.push(fields.rdata(&sig));
        }
    }

    let mut stats = SignStats {
        rrsets: total,
        signatures: 0,
        denial_records,
    };
    for (i, sigs) in results {
        let job = &jobs[i];
        let set = if job.nsec3 {
            zone.nsec3.get_mut(&job.owner)
        } else {
            zone.nodes
                .get_mut(&job.owner)
                .and_then(|n| n.get_mut(&job.rtype))
        }
        .expect("job refers to an existing RRset");
        stats.signatures += sigs.len();
        set.rrsig_ttl = set.ttl;
        set.rrsigs = sigs;
    }
    Ok(stats)
}

/// Keys of algorithm `alg` that sign RRsets of `rtype`: KSKs (SEP) for DNSKEY and for CDS and
/// CDNSKEY (which RFC 7344 §4.1 wants signed by a key the parent's DS points to), ZSKs for the
/// rest; a key is used for both when its algorithm has only one kind (CSK).
/// Each key comes with its precomputed key tag.
fn signers<'k>(
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

fn rrsig_fields(
    zone: &Zone,
    job: &Job,
    set: &RRset,
    key: &ZoneKey,
    key_tag: u16,
    policy: &SigningPolicy,
) -> RrsigFields {
    RrsigFields {
        type_covered: job.rtype,
        algorithm: key.number,
        labels: label_count(&job.owner),
        original_ttl: set.ttl,
        expiration: policy.expiration as u32,
        inception: policy.inception as u32,
        key_tag,
        signer: zone.origin.clone(),
    }
}

fn sign_rrset(
    zone: &Zone,
    job: &Job,
    set: &RRset,
    key: &ZoneKey,
    key_tag: u16,
    policy: &SigningPolicy,
) -> Result<Vec<u8>, SignError> {
    let fields = rrsig_fields(zone, job, set, key, key_tag, policy);
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

fn collect_jobs(zone: &Zone) -> Vec<Job> {
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
                jobs.push(Job {
                    owner: name.clone(),
                    rtype: *rtype,
                    nsec3: false,
                });
            }
        }
    }
    for name in zone.nsec3.keys() {
        jobs.push(Job {
            owner: name.clone(),
            rtype: RrType::NSEC3,
            nsec3: true,
        });
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
