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

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{name, serve_tomls, udp_client, Served};
use pqdns_core::config::LoadedConfig;
use pqdns_core::dnssec::dnskey::{ds_record, DigestType};
use pqdns_core::dnssec::rollover::{KeyState, Phase};
use pqdns_core::dnssec::validate::{danger, PqPolicy, UnverifiedRRset, Validator};
use pqdns_core::dnssec::{Profile, Provider};
use pqdns_core::{Class, Name, Record, RrType};
use pqdns_resolver::{Answer, Config, Mode, Resolver, TrustAnchors};

const TTL: u64 = 300;
const TICK: u64 = 30;
const ECDSA: u8 = 13;
const ML_DSA_44: u8 = 18;

const CHILD_TOML: &str = "origin = \"pqdns.test.\"\ndefault_ttl = 300\nrecords = '''\n\
    @ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 127.0.0.1\nwww A 192.0.2.80\n'''\n\
    [signing]\nalgorithms = [ALGS]\nkeys = \"ksk-zsk\"\ndenial = \"nsec3\"\ncds = \"always\"\n\
    propagation_delay = \"60\"\nparent_ds_ttl = \"300\"\nparent_propagation_delay = \"60\"\n\
    key_directory = \"keys\"\n";

/// The child's description with `algorithms` (TOML list items) and extra `[signing]` lines.
fn write_child(path: &Path, algorithms: &str, extra: &str) {
    let text = CHILD_TOML.replace("ALGS", algorithms) + extra;
    std::fs::write(path, text).unwrap();
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

/// The parent and the child served by one server, the child's state file, the anchors.
struct Setup {
    served: Served,
    parent_file: PathBuf,
    child_file: PathBuf,
    state_file: PathBuf,
    /// The parent's DS records, ECDSA and ML-DSA-44 (require-pq needs a post-quantum link
    /// from the anchor on).
    anchors: TrustAnchors,
    /// The parent's ECDSA DS, delv's anchor.
    parent_ds: Record,
    /// The parent's DNSKEY RDATA.
    parent_keys: Vec<Vec<u8>>,
}

fn setup(algorithms: &str, extra: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let child_file = dir.path().join("child.toml");
    let parent_file: PathBuf = dir.path().join("parent.toml");
    write_child(&child_file, algorithms, extra);
    write_parent(&parent_file, &ds_of(&child_file));
    let (keys, _) = LoadedConfig::read(&parent_file)
        .unwrap()
        .keys(true)
        .unwrap();
    let mut anchors = TrustAnchors::default();
    for key in &keys {
        let ds = ds_record(&key.dnskey_record(), DigestType::Sha256).unwrap();
        anchors.add_ds(name("test."), ds.rdata);
    }
    let ecdsa = keys.iter().find(|k| k.number.0 == ECDSA).unwrap();
    let parent_ds = ds_record(&ecdsa.dnskey_record(), DigestType::Sha256).unwrap();
    let state_file = dir.path().join("keys/pqdns.test.keystate");
    let served = serve_tomls(
        dir,
        vec![parent_file.clone(), child_file.clone()],
        false,
        |_| {},
    );
    let parent_keys = keys.iter().map(|k| k.dnskey_rdata()).collect();
    Setup {
        served,
        parent_file,
        child_file,
        state_file,
        anchors,
        parent_ds,
        parent_keys,
    }
}

impl Setup {
    fn state(&self) -> KeyState {
        KeyState::read(&self.state_file).unwrap().unwrap()
    }

    fn resolve(&self, qname: &str, qtype: RrType, policy: PqPolicy, now: u64) -> Answer {
        let mut config = Config::new(Mode::Forward(self.served.addr), self.anchors.clone());
        config.now = Some(now);
        config.pq_policy = policy;
        let resolver = Resolver::new(config, udp_client(Duration::from_secs(3)));
        self.served
            .rt
            .block_on(resolver.resolve(&name(qname), qtype))
            .unwrap()
    }

    /// Runs the simulated clock from `start` in steps of [`TICK`] until `done(state)`, as
    /// the server, the parent and the operator would, checking at each tick what the module
    /// doc says. Returns the versions served, in order, and the time it ended.
    fn drive(&self, start: u64, done: impl Fn(&KeyState) -> bool) -> (Vec<Snapshot>, u64) {
        let served = &self.served;
        // Each version served: (last time served, snapshot).
        let mut versions: Vec<(u64, Snapshot)> = Vec::new();
        let mut confirmed = true;
        let mut now = start;
        loop {
            assert!(
                now < start + 7200,
                "not done in two simulated hours: {:?}",
                self.state()
            );
            if served.refresh_due().is_some_and(|due| due <= now) {
                served.reload_at(now);
            }
            // The parent, polling the child's CDS (validated: RFC 7344 §4.1, §6.1).
            let cds = self.resolve("pqdns.test.", RrType::CDS, PqPolicy::default(), now);
            let status = cds.status();
            assert!(status.is_secure(), "CDS at {}: {status:?}", now - start);
            let wanted: BTreeSet<Vec<u8>> = cds
                .answers()
                .iter()
                .flat_map(|s| s.records())
                .map(|r| r.rdata)
                .collect();
            let at_parent: BTreeSet<Vec<u8>> = snapshot(served).ds.rdatas.into_iter().collect();
            if wanted != at_parent {
                let ds: Vec<String> = wanted
                    .iter()
                    .map(|d| pqdns_core::rdata::to_presentation(RrType::DS, d))
                    .collect();
                write_parent(&self.parent_file, &ds);
                served.reload_at(now);
                confirmed = false;
            } else if !confirmed {
                // What `pqdns-zone rollover --ds-published` does, at the simulated time;
                // then the operator reloads the server.
                let mut state = self.state();
                if state.confirm_ds(now) {
                    state.write(&self.state_file).unwrap();
                    served.reload_at(now);
                }
                confirmed = true;
            }

            let current = snapshot(served);
            if versions.last().map(|v| &v.1) != Some(&current) {
                self.delv_is_never_bogus(&current);
                versions.push((now, current));
            } else {
                versions.last_mut().unwrap().0 = now;
            }

            // A fresh resolver.
            let mut policies = vec![PqPolicy::default()];
            if algorithms_of(&versions.last().unwrap().1.ds).contains(&ML_DSA_44) {
                policies.push(PqPolicy::RequirePq);
            }
            for policy in policies {
                let answer = self.resolve("www.pqdns.test.", RrType::A, policy, now);
                let status = answer.status();
                assert!(
                    status.is_secure(),
                    "{policy:?} at {}: {status:?}",
                    now - start
                );
            }

            // Every cache a resolver could hold now: each part fetched at some time within
            // the last TTL, from the version served then.
            let cached: Vec<&Snapshot> = versions
                .iter()
                .filter(|(last, _)| last + TTL > now)
                .map(|(_, s)| s)
                .collect();
            for ds in &cached {
                for dnskey in &cached {
                    for data in &cached {
                        let parts = (&ds.ds, &dnskey.dnskey, &data.data);
                        self.cache_validates(parts, now - start, now);
                    }
                }
            }
            if done(&self.state()) {
                return (versions.into_iter().map(|(_, s)| s).collect(), now);
            }
            now += TICK;
        }
    }

    /// Checks one combination of cached RRsets at `now` (`at` seconds into the run).
    fn cache_validates(
        &self,
        parts: (&UnverifiedRRset, &UnverifiedRRset, &UnverifiedRRset),
        at: u64,
        now: u64,
    ) {
        let mut policies = vec![PqPolicy::default()];
        if algorithms_of(parts.0).contains(&ML_DSA_44) {
            policies.push(PqPolicy::RequirePq);
        }
        for policy in policies {
            if let Err(e) = validate(&self.parent_keys, parts, policy, now) {
                panic!(
                    "{policy:?} at {at}: cached DS {:?}, DNSKEY {:?}, data signed by {:?}: {e}",
                    tags_of(parts.0),
                    tags_of(parts.1),
                    tags_of(parts.2)
                );
            }
        }
        assert!(
            algorithms_of(parts.1).is_subset(&algorithms_of(parts.2)),
            "at {at}: cached DNSKEY algorithms {:?}, data signed by {:?}",
            algorithms_of(parts.1),
            algorithms_of(parts.2)
        );
    }

    /// delv (real clock) on `version` (just served): Secure while the DS names the ECDSA
    /// key, Insecure (an algorithm it does not know) after; never Bogus.
    fn delv_is_never_bogus(&self, version: &Snapshot) {
        let delv = common::delv(
            self.served.dir.path(),
            self.served.addr,
            &self.parent_ds,
            "www.pqdns.test.",
            "A",
        );
        let ds = algorithms_of(&version.ds);
        assert!(
            !delv.contains("resolution failed"),
            "delv Bogus, DS {ds:?}:\n{delv}"
        );
        if ds.contains(&ECDSA) {
            assert!(delv.contains("fully validated"), "DS {ds:?}:\n{delv}");
        } else {
            assert!(delv.contains("unsigned answer"), "DS {ds:?}:\n{delv}");
        }
    }
}

/// (algorithm, key tag) of DS or DNSKEY records, or of the keys behind RRSIGs.
fn tags_of(set: &UnverifiedRRset) -> BTreeSet<(u8, u16)> {
    match set.rtype {
        RrType::DS => set
            .rdatas
            .iter()
            .map(|d| (d[2], u16::from_be_bytes([d[0], d[1]])))
            .collect(),
        RrType::DNSKEY => set
            .rdatas
            .iter()
            .map(|d| (d[3], pqdns_core::dnssec::dnskey::key_tag(d)))
            .collect(),
        _ => set
            .rrsigs
            .iter()
            .map(|s| (s[2], u16::from_be_bytes([s[16], s[17]])))
            .collect(),
    }
}

#[test]
fn ecdsa_to_ml_dsa_44_rollover_is_never_bogus() {
    let s = setup("\"ECDSAP256SHA256\"", "");
    let start = pqdns_core::time::now();
    s.served.reload_at(start);
    let initial = s.state();
    assert_eq!(initial.algorithms.len(), 1);
    assert_eq!(initial.algorithms[0].phase, Phase::Active);

    // The operator asks for ML-DSA-44 instead of ECDSA.
    write_child(&s.child_file, "\"ML-DSA-44\"", "");
    s.served.reload_at(start);
    let phases: Vec<(u8, Phase)> = s
        .state()
        .algorithms
        .iter()
        .map(|a| (a.number, a.phase))
        .collect();
    assert_eq!(
        phases,
        [(ECDSA, Phase::Active), (ML_DSA_44, Phase::Signing)]
    );
    let (versions, done) = s.drive(start, |state| {
        state.algorithms.len() == 1 && state.algorithms[0].number == ML_DSA_44
    });
    assert_eq!(s.state().algorithms[0].phase, Phase::Active);
    // Every step was served, in order: (DS algorithms, DNSKEY algorithms, data signatures).
    let set = |a: &[u8]| a.iter().copied().collect::<BTreeSet<u8>>();
    let mut steps: Vec<_> = versions
        .iter()
        .map(|v| {
            (
                algorithms_of(&v.ds),
                algorithms_of(&v.dnskey),
                algorithms_of(&v.data),
            )
        })
        .collect();
    steps.dedup();
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
        ]
    );
    // The waits: signing 300 + 60 s, published 300 + 60 s, the parent's DS TTL + 60 s after
    // the confirmation, unpublished 300 + 60 s; the parent polls every 30 s.
    let took = done - start;
    assert!(
        (4 * 360..4 * 360 + 4 * TICK).contains(&took),
        "took {took} s"
    );
}

/// ZSK pre-publication and KSK double-DS rollovers of a dual ECDSA + ML-DSA-44 zone, driven by
/// key lifetimes: every key is replaced once, each change reaching validators in the right
/// order.
#[test]
fn ksk_and_zsk_rollovers_are_never_bogus() {
    let s = setup(
        "\"ECDSAP256SHA256\", \"ML-DSA-44\"",
        "ksk_lifetime = \"900\"\nzsk_lifetime = \"1200\"\n",
    );
    let start = pqdns_core::time::now();
    s.served.reload_at(start);
    let first: BTreeSet<u16> = s.state().keys.iter().map(|k| k.tag).collect();
    assert_eq!(first.len(), 4);
    let (versions, done) = s.drive(start, |state| {
        state.keys.len() == 4 && state.keys.iter().all(|k| !first.contains(&k.tag))
    });
    // (DS, DNSKEY, data signers) as key tags, per version.
    let tags =
        |set: &UnverifiedRRset| -> BTreeSet<u16> { tags_of(set).iter().map(|t| t.1).collect() };
    let mut seen: Vec<_> = versions
        .iter()
        .map(|v| (tags(&v.ds), tags(&v.dnskey), tags(&v.data)))
        .collect();
    seen.dedup();
    let (ds0, dnskey0, data0) = &seen[0];
    let (ds1, dnskey1, data1) = seen.last().unwrap();
    assert!(*dnskey0 == first && dnskey1.is_disjoint(&first), "{seen:?}");
    assert!(ds0.is_subset(&first) && ds1.is_disjoint(&first), "{seen:?}");
    assert!(
        data0.is_subset(&first) && data1.is_disjoint(&first),
        "{seen:?}"
    );
    // The first version in which `part` of a version holds `tag`.
    let first_in = |part: usize, tag: u16| {
        seen.iter()
            .position(|v| [&v.0, &v.1, &v.2][part].contains(&tag))
    };
    let new_in = |part: usize| -> BTreeSet<u16> {
        let all = seen
            .iter()
            .flat_map(|v| [&v.0, &v.1, &v.2][part].iter().copied());
        all.filter(|t| !first.contains(t)).collect()
    };
    let (new_ksks, new_zsks) = (new_in(0), new_in(2));
    assert_eq!((new_ksks.len(), new_zsks.len()), (2, 2), "{seen:?}");
    // Pre-publication: a new ZSK is in the DNSKEY RRset before anything is signed by it.
    for &zsk in &new_zsks {
        assert!(first_in(1, zsk) < first_in(2, zsk), "ZSK {zsk}: {seen:?}");
    }
    // Double-DS: a new KSK's DS is at the parent before its DNSKEY is published.
    for &ksk in &new_ksks {
        assert!(first_in(0, ksk) < first_in(1, ksk), "KSK {ksk}: {seen:?}");
    }
    // KSKs roll at 900 s, ZSKs at 1200 s: active 360 s later, the old ones gone 360 s after.
    let took = done - start;
    assert!(
        (1200 + 720..1200 + 720 + 4 * TICK).contains(&took),
        "took {took} s"
    );
}
