//! Issue 13, must-show 2: an algorithm rollover ECDSAP256SHA256 → ML-DSA-44 driven through
//! every step by pqdns-server on a simulated clock (`pqdns_core::dnssec::rollover`), with the
//! parent's DS RRset changed the way an automated parent does it: from the child's validated
//! CDS records (RFC 7344 §6.1), and the change confirmed to the child as an operator would
//! (`pqdns-zone rollover --ds-published`).
//!
//! One server serves the parent `test.` (ECDSAP256SHA256 + ML-DSA-44, the trust anchor) and
//! the child `pqdns.test.` (KSK/ZSK, NSEC3, every TTL 300 s). Every simulated 30 s:
//! - a fresh validating resolver gets a Secure answer for the child, with the default policy,
//!   and with require-pq whenever the parent's DS RRset names an ML-DSA-44 key;
//! - every combination of DS, DNSKEY and data RRsets a resolver could still hold in its cache
//!   (every version served within the last TTL) validates, with require-pq too when the
//!   cached DS names ML-DSA-44; and each such data RRset carries a signature of every
//!   algorithm in each such DNSKEY RRset, which validators reading RFC 4035 §2.2 strictly
//!   demand;
//!
//! and at every version of the served data, BIND's delv (real clock: the whole rollover takes
//! less simulated time than the signatures' inception offset) finds the child Secure while the
//! DS names the ECDSA key and Insecure (an algorithm it does not know) after, never Bogus.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{name, serve_tomls, udp_client, Served};
use pqdns_core::config::LoadedConfig;
use pqdns_core::dnssec::dnskey::{ds_record, DigestType};
use pqdns_core::dnssec::rollover::{KeyState, Phase};
use pqdns_core::dnssec::validate::{danger, PqPolicy, UnverifiedRRset, Validator};
use pqdns_core::dnssec::{Profile, Provider};
use pqdns_core::{Class, Name, RrType};
use pqdns_resolver::{Config, Mode, Resolver, TrustAnchors};

const TTL: u64 = 300;
const TICK: u64 = 30;
const ECDSA: u8 = 13;
const ML_DSA_44: u8 = 18;

const CHILD_TOML: &str = "origin = \"pqdns.test.\"\ndefault_ttl = 300\nrecords = '''\n\
    @ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 127.0.0.1\nwww A 192.0.2.80\n'''\n\
    [signing]\nalgorithms = [ALGS]\nkeys = \"ksk-zsk\"\ndenial = \"nsec3\"\ncds = \"always\"\n\
    propagation_delay = \"60\"\nparent_ds_ttl = \"300\"\nparent_propagation_delay = \"60\"\n\
    key_directory = \"keys\"\n";

fn write_child(path: &Path, algorithms: &str) {
    std::fs::write(path, CHILD_TOML.replace("ALGS", algorithms)).unwrap();
}

/// The parent zone with `ds` (presentation RDATA) as the child's DS RRset.
fn write_parent(path: &Path, ds: &[String]) {
    let ds: String = ds.iter().map(|d| format!("pqdns DS {d}\n")).collect();
    std::fs::write(
        path,
        format!(
            "origin = \"test.\"\ndefault_ttl = 300\nrecords = '''\n\
             @ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 127.0.0.1\n\
             pqdns NS ns.pqdns\nns.pqdns A 127.0.0.1\n{ds}'''\n\
             [signing]\nalgorithms = [\"ECDSAP256SHA256\", \"ML-DSA-44\"]\nkeys = \"csk\"\n\
             denial = \"nsec\"\n\
             key_directory = \"keys\"\n"
        ),
    )
    .unwrap();
}

/// What a resolver may cache: the parent's DS RRset for the child, the child's DNSKEY RRset
/// and its `www` A RRset, each with its RRSIGs.
#[derive(Clone, PartialEq, Eq)]
struct Snapshot {
    ds: UnverifiedRRset,
    dnskey: UnverifiedRRset,
    data: UnverifiedRRset,
}

fn snapshot(served: &Served) -> Snapshot {
    let catalog = served.catalog();
    let child = name("pqdns.test.");
    let rrset = |zone: &str, owner: &Name, rtype| {
        let zone = &catalog.zone(&name(zone)).unwrap().zone;
        let set = zone.rrset(owner, rtype).unwrap();
        UnverifiedRRset {
            owner: owner.clone(),
            rtype,
            class: Class::IN,
            ttl: set.ttl,
            rdatas: set.rdatas.clone(),
            rrsigs: set.rrsigs.clone(),
            rrsig_ttl: set.ttl,
        }
    };
    Snapshot {
        ds: rrset("test.", &child, RrType::DS),
        dnskey: rrset("pqdns.test.", &child, RrType::DNSKEY),
        data: rrset("pqdns.test.", &name("www.pqdns.test."), RrType::A),
    }
}

/// Algorithm numbers of DS or DNSKEY RDATA (at offsets 2 and 3, RFC 4034 §5.1 and §2.1), or
/// of the RRSIGs of other RRsets (offset 2, §3.1).
fn algorithms_of(set: &UnverifiedRRset) -> BTreeSet<u8> {
    match set.rtype {
        RrType::DS => set.rdatas.iter().map(|d| d[2]).collect(),
        RrType::DNSKEY => set.rdatas.iter().map(|d| d[3]).collect(),
        _ => set.rrsigs.iter().map(|s| s[2]).collect(),
    }
}

/// Validates a resolver's possible cache content at `now`: the parent's keys are the anchor,
/// the DS RRset must verify under them, lead to the DNSKEY RRset, and that to the data.
fn validate(
    parent_keys: &[Vec<u8>],
    cached: (&UnverifiedRRset, &UnverifiedRRset, &UnverifiedRRset),
    policy: PqPolicy,
    now: u64,
) -> Result<(), String> {
    let (ds, dnskey, data) = cached;
    let (profile, provider) = (Profile::default_profile(), Provider::default_provider());
    let mut v = Validator::new(&profile, &provider, now, Default::default(), policy);
    let parent = danger::trust_anchor_dnskeys(&name("test."), parent_keys);
    let ds = v
        .verify_rrset(&parent, ds)
        .map_err(|e| format!("DS: {e}"))?;
    let keys = v
        .trust_dnskeys(&ds, dnskey)
        .map_err(|e| format!("DNSKEY: {e}"))?
        .ok_or("DNSKEY: Insecure")?;
    v.verify_rrset(&keys, data)
        .map_err(|e| format!("data: {e}"))?;
    Ok(())
}

/// The DS RDATA (presentation) of a zone description's KSKs, generating its keys.
fn ds_of(file: &Path) -> Vec<String> {
    let cfg = LoadedConfig::read(file).unwrap();
    let (keys, _) = cfg.keys(true).unwrap();
    keys.iter()
        .filter(|k| k.is_sep())
        .map(|k| {
            let ds = ds_record(&k.dnskey_record(), DigestType::Sha256).unwrap();
            pqdns_core::rdata::to_presentation(RrType::DS, &ds.rdata)
        })
        .collect()
}

fn resolver(served: &Served, anchors: &TrustAnchors, policy: PqPolicy, now: u64) -> Resolver {
    let mut config = Config::new(Mode::Forward(served.addr), anchors.clone());
    config.now = Some(now);
    config.pq_policy = policy;
    Resolver::new(config, udp_client(Duration::from_secs(3)))
}

#[test]
fn ecdsa_to_ml_dsa_44_rollover_is_never_bogus() {
    let dir = tempfile::tempdir().unwrap();
    let child_file = dir.path().join("child.toml");
    let parent_file: PathBuf = dir.path().join("parent.toml");
    write_child(&child_file, "\"ECDSAP256SHA256\"");
    write_parent(&parent_file, &ds_of(&child_file));
    // The anchors: the parent's DS records, ECDSA and ML-DSA-44 (require-pq needs a
    // post-quantum link from the anchor on); delv gets the ECDSA one.
    let (parent_keys, _) = LoadedConfig::read(&parent_file)
        .unwrap()
        .keys(true)
        .unwrap();
    let mut anchors = TrustAnchors::default();
    for key in &parent_keys {
        let ds = ds_record(&key.dnskey_record(), DigestType::Sha256).unwrap();
        anchors.add_ds(name("test."), ds.rdata);
    }
    let ecdsa = parent_keys.iter().find(|k| k.number.0 == ECDSA).unwrap();
    let parent_ds = ds_record(&ecdsa.dnskey_record(), DigestType::Sha256).unwrap();
    let state_file = dir.path().join("keys/pqdns.test.keystate");
    let served = serve_tomls(
        dir,
        vec![parent_file.clone(), child_file.clone()],
        false,
        |_| {},
    );
    let start = pqdns_core::time::now();
    served.reload_at(start);
    let parent_keys = {
        let catalog = served.catalog();
        let zone = &catalog.zone(&name("test.")).unwrap().zone;
        zone.rrset(&name("test."), RrType::DNSKEY)
            .unwrap()
            .rdatas
            .clone()
    };
    let initial = KeyState::read(&state_file).unwrap().unwrap();
    assert_eq!(initial.algorithms.len(), 1);
    assert_eq!(initial.algorithms[0].phase, Phase::Active);

    // The operator asks for ML-DSA-44 instead of ECDSA.
    write_child(&child_file, "\"ML-DSA-44\"");
    served.reload_at(start);
    let state = KeyState::read(&state_file).unwrap().unwrap();
    let phases: Vec<(u8, Phase)> = state
        .algorithms
        .iter()
        .map(|a| (a.number, a.phase))
        .collect();
    assert_eq!(
        phases,
        [(ECDSA, Phase::Active), (ML_DSA_44, Phase::Signing)]
    );

    // Each version served: (first time, last time, snapshot).
    let mut versions: Vec<(u64, u64, Snapshot)> = Vec::new();
    let mut confirmed = true;
    let mut delv_runs = 0;
    let mut sequence = Vec::new();
    let mut now = start;
    let done = loop {
        assert!(
            now < start + 3600,
            "the rollover did not finish in a simulated hour"
        );
        if served.refresh_due().is_some_and(|due| due <= now) {
            served.reload_at(now);
        }
        // The parent, polling the child's CDS (validated: RFC 7344 §4.1, §6.1).
        let cds = served
            .rt
            .block_on(
                resolver(&served, &anchors, PqPolicy::default(), now)
                    .resolve(&name("pqdns.test."), RrType::CDS),
            )
            .unwrap();
        assert!(
            cds.status().is_secure(),
            "CDS at {}: {:?}",
            now - start,
            cds.status()
        );
        let wanted: BTreeSet<Vec<u8>> = cds
            .answers()
            .iter()
            .flat_map(|s| s.records())
            .map(|r| r.rdata)
            .collect();
        let current = snapshot(&served);
        let at_parent: BTreeSet<Vec<u8>> = current.ds.rdatas.iter().cloned().collect();
        if wanted != at_parent {
            let ds: Vec<String> = wanted
                .iter()
                .map(|d| pqdns_core::rdata::to_presentation(RrType::DS, d))
                .collect();
            write_parent(&parent_file, &ds);
            served.reload_at(now);
            confirmed = false;
        } else if !confirmed {
            // What `pqdns-zone rollover --ds-published` does, at the simulated time; then the
            // operator reloads the server.
            let mut state = KeyState::read(&state_file).unwrap().unwrap();
            assert!(state.confirm_ds(now));
            state.write(&state_file).unwrap();
            served.reload_at(now);
            confirmed = true;
        }

        let current = snapshot(&served);
        if versions.last().map(|v| &v.2) != Some(&current) {
            let algs = (
                algorithms_of(&current.ds),
                algorithms_of(&current.dnskey),
                algorithms_of(&current.data),
            );
            sequence.push(algs.clone());
            // delv, at the real time, for this version.
            let delv = common::delv(
                served.dir.path(),
                served.addr,
                &parent_ds,
                "www.pqdns.test.",
                "A",
            );
            assert!(
                !delv.contains("resolution failed"),
                "delv Bogus at {algs:?}:\n{delv}"
            );
            if algs.0.contains(&ECDSA) {
                assert!(
                    delv.contains("fully validated"),
                    "delv at {algs:?}:\n{delv}"
                );
            } else {
                assert!(
                    delv.contains("unsigned answer"),
                    "delv at {algs:?}:\n{delv}"
                );
            }
            delv_runs += 1;
            versions.push((now, now, current));
        } else {
            versions.last_mut().unwrap().1 = now;
        }

        // A fresh resolver.
        let pq_at_parent = algorithms_of(&versions.last().unwrap().2.ds).contains(&ML_DSA_44);
        let mut policies = vec![PqPolicy::default()];
        if pq_at_parent {
            policies.push(PqPolicy::RequirePq);
        }
        for &policy in &policies {
            let answer = served
                .rt
                .block_on(
                    resolver(&served, &anchors, policy, now)
                        .resolve(&name("www.pqdns.test."), RrType::A),
                )
                .unwrap();
            let status = answer.status();
            assert!(
                status.is_secure(),
                "{policy:?} at {}: {status:?}",
                now - start
            );
        }

        // Every cache a resolver could hold now: each part fetched at some time within the
        // last TTL, from the version served then.
        let cached: Vec<&Snapshot> = versions
            .iter()
            .filter(|(_, last, _)| last + TTL > now)
            .map(|(_, _, s)| s)
            .collect();
        for ds in &cached {
            for dnskey in &cached {
                for data in &cached {
                    let parts = (&ds.ds, &dnskey.dnskey, &data.data);
                    let mut policies = vec![PqPolicy::default()];
                    if algorithms_of(&ds.ds).contains(&ML_DSA_44) {
                        policies.push(PqPolicy::RequirePq);
                    }
                    for policy in policies {
                        if let Err(e) = validate(&parent_keys, parts, policy, now) {
                            panic!(
                                "{policy:?} at {}: cached DS {:?}, DNSKEY {:?}, data {:?}: {e}",
                                now - start,
                                algorithms_of(parts.0),
                                algorithms_of(parts.1),
                                algorithms_of(parts.2)
                            );
                        }
                    }
                    assert!(
                        algorithms_of(parts.1).is_subset(&algorithms_of(parts.2)),
                        "at {}: cached DNSKEY algorithms {:?}, data signed by {:?}",
                        now - start,
                        algorithms_of(parts.1),
                        algorithms_of(parts.2)
                    );
                }
            }
        }

        let state = KeyState::read(&state_file).unwrap().unwrap();
        if state.algorithms.len() == 1 && state.algorithms[0].number == ML_DSA_44 {
            break now;
        }
        now += TICK;
    };
    assert_eq!(
        KeyState::read(&state_file).unwrap().unwrap().algorithms[0].phase,
        Phase::Active
    );
    // Every step was served, in order: (DS algorithms, DNSKEY algorithms, data signatures).
    let set = |a: &[u8]| a.iter().copied().collect::<BTreeSet<u8>>();
    let steps: Vec<_> = sequence
        .iter()
        .enumerate()
        .filter(|(i, s)| *i == 0 || sequence[i - 1] != **s)
        .map(|(_, s)| s.clone())
        .collect();
    assert_eq!(
        steps,
        [
            (set(&[ECDSA]), set(&[ECDSA]), set(&[ECDSA, ML_DSA_44])),
            (
                set(&[ECDSA]),
                set(&[ECDSA, ML_DSA_44]),
                set(&[ECDSA, ML_DSA_44])
            ),
            (
                set(&[ML_DSA_44]),
                set(&[ECDSA, ML_DSA_44]),
                set(&[ECDSA, ML_DSA_44])
            ),
            (
                set(&[ML_DSA_44]),
                set(&[ML_DSA_44]),
                set(&[ECDSA, ML_DSA_44])
            ),
            (set(&[ML_DSA_44]), set(&[ML_DSA_44]), set(&[ML_DSA_44])),
        ],
        "{sequence:?}"
    );
    assert!(delv_runs >= 5);
    // The waits: signing 300 + 60 s, published 300 + 60 s, the parent's DS TTL + 60 s after
    // the confirmation, unpublished 300 + 60 s; the parent polls every 30 s.
    let took = done - start;
    assert!(
        (4 * 360..4 * 360 + 4 * TICK).contains(&took),
        "took {took} s"
    );
}
