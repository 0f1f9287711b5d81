//! Re-signing an MTL zone appends to the key's saved series (issue 34): the series ID stays,
//! unchanged RRsets keep their leaves, new data gets the next indexes, a resolver holding the
//! new ladder verifies the old condensed signatures whose rung survived and asks again
//! (LadderRequired, never Bogus) for the others, whose re-fetched signatures verify; its ladder
//! cache keeps one ladder per series. A full series, or another key, starts a new series; a
//! signer killed before or after saving the series never hands out one leaf index for two
//! messages.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, Ordering};

use pqdns_core::dnssec::keyfile::{KeyRole, ZoneKey};
use pqdns_core::dnssec::mtl::series::{
    SavedSeries, SeriesError, SeriesFiles, SeriesStore, DEFAULT_CAPACITY,
};
use pqdns_core::dnssec::mtl::{self, LadderCache, MtlParams, MtlSignature, SeriesId};
use pqdns_core::dnssec::rrsig::{signed_data, Rrsig};
use pqdns_core::dnssec::sign::{resign_zone, Denial, Incremental, SigningPolicy};
use pqdns_core::dnssec::verify::{verify_zone, VerifyOptions};
use pqdns_core::dnssec::{Algorithm, CryptoError, Profile, Provider};
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::{Class, Name, RrType, Zone};

const NOW: u64 = 1_800_000_000;

/// The zone at version `serial`, with `hosts` hosts `h0`… beside the fixed records.
fn zone(serial: u32, hosts: usize) -> Zone {
    let origin: Name = "mtl.test.".parse().unwrap();
    let mut text = format!(
        "$ORIGIN mtl.test.\n$TTL 300\n@ SOA ns1 hostmaster {serial} 7200 3600 1209600 300\n\
         @ NS ns1\nns1 A 192.0.2.1\nwww A 192.0.2.3\nwww AAAA 2001:db8::3\nmail MX 10 www\n"
    );
    for i in 0..hosts {
        text.push_str(&format!("h{i} A 198.51.100.{i}\n"));
    }
    let records = ZoneFileReader::new(Some(origin.clone()), None)
        .read_str(&text, "mtl.zone")
        .unwrap();
    Zone::from_records(origin, records).unwrap()
}

/// The algorithms under test, each with a profile that numbers it: ML-DSA-MTL (2026 layout)
/// and, with liboqs, SLH-DSA-MTL-SHA2 (2025 layout).
fn algorithms() -> Vec<(Algorithm, Profile)> {
    let provider = Provider::default_provider();
    [
        (Algorithm::MlDsaMtl44, "verisign-2026"),
        (Algorithm::MtlSlhDsaSha2_128s, "verisign-2025"),
    ]
    .into_iter()
    .filter(|(alg, _)| provider.scheme(*alg).is_ok())
    .map(|(alg, p)| (alg, Profile::named(p).unwrap()))
    .collect()
}

fn key(alg: Algorithm, profile: &Profile) -> ZoneKey {
    let origin: Name = "mtl.test.".parse().unwrap();
    let provider = Provider::default_provider();
    ZoneKey::generate(&origin, alg, KeyRole::Csk, profile, &provider, 300).unwrap()
}

/// Signs `zone` with `key` at `now`, keeping what `previous` allows, through `store`.
fn sign(
    mut zone: Zone,
    key: &ZoneKey,
    now: u64,
    previous: Option<&Zone>,
    store: &dyn SeriesStore,
) -> Result<Zone, pqdns_core::dnssec::sign::SignError> {
    let policy = SigningPolicy {
        inception: now - 3600,
        expiration: now + 14 * 86_400,
        denial: Denial::Nsec,
        published_dnskeys: None,
    };
    let incremental = Incremental {
        previous,
        keep_expiring_after: now + 86_400,
        mtl_series: Some(store),
        ..Incremental::default()
    };
    resign_zone(
        &mut zone,
        std::slice::from_ref(key),
        &policy,
        &incremental,
        &|_, _| {},
    )?;
    Ok(zone)
}

/// One published MTL signature: the RRset, its parsed signature field and the data signed.
struct Published {
    owner: Name,
    rtype: RrType,
    field: Vec<u8>,
    sig: MtlSignature,
    data: Vec<u8>,
}

fn published(zone: &Zone, alg: Algorithm) -> Vec<Published> {
    let format = MtlParams::of(alg).unwrap().format;
    let mut out = Vec::new();
    for (owner, node) in &zone.nodes {
        for (rtype, set) in node {
            for rdata in &set.rrsigs {
                let rrsig = Rrsig::parse(rdata).unwrap();
                let data = signed_data(
                    &rrsig.fields,
                    owner,
                    Class::IN,
                    set.rdatas.iter().map(Vec::as_slice),
                );
                out.push(Published {
                    owner: owner.clone(),
                    rtype: *rtype,
                    field: rrsig.signature.to_vec(),
                    sig: MtlSignature::parse_as(format, rrsig.signature).unwrap(),
                    data,
                });
            }
        }
    }
    out
}

fn series_of(sigs: &[Published]) -> SeriesId {
    let first = sigs[0].sig.path.series;
    assert!(sigs.iter().all(|p| p.sig.path.series == first));
    first
}

fn leaves(sigs: &[Published]) -> BTreeMap<(Name, RrType), u64> {
    sigs.iter()
        .map(|p| ((p.owner.clone(), p.rtype), p.sig.path.leaf))
        .collect()
}

/// The verified ladder of the zone's full DNSKEY signature.
fn ladder(alg: Algorithm, key: &ZoneKey, sigs: &[Published]) -> mtl::VerifiedLadder {
    let full = sigs
        .iter()
        .find(|p| p.rtype == RrType::DNSKEY && p.sig.is_full())
        .unwrap();
    mtl::verify_full(alg, key.key.public_key(), &full.data, &full.field).unwrap()
}

fn verifies(zone: &Zone, profile: &Profile) {
    let opts = VerifyOptions::at(NOW + 7200);
    let report = verify_zone(zone, profile, &Provider::default(), &opts);
    assert!(report.is_ok(), "{:?}", report.failures);
}

#[test]
fn resigning_appends_to_the_series_and_a_resolver_keeps_one_ladder() {
    for (alg, profile) in algorithms() {
        let dir = tempfile::tempdir().unwrap();
        let key = key(alg, &profile);
        let v1 = {
            let store = SeriesFiles::open(dir.path(), "mtl.test", DEFAULT_CAPACITY).unwrap();
            sign(zone(1, 8), &key, NOW, None, &store).unwrap()
        };
        verifies(&v1, &profile);
        let p1 = published(&v1, alg);
        let series = series_of(&p1);
        let count1 = p1.len() as u64;
        assert_eq!(
            leaves(&p1).values().copied().max(),
            Some(count1 - 1),
            "{alg}: one leaf per RRset, from 0"
        );

        // A restart (a new store on the same directory), then one changed RRset (h3 A): the
        // SOA, h3 A and the NSEC RRsets around it are new leaves; the rest keep theirs.
        let store = SeriesFiles::open(dir.path(), "mtl.test", DEFAULT_CAPACITY).unwrap();
        let mut changed = zone(2, 8);
        let h3: Name = "h3.mtl.test.".parse().unwrap();
        changed
            .nodes
            .get_mut(&h3)
            .unwrap()
            .get_mut(&RrType::A)
            .unwrap()
            .rdatas = vec![vec![203, 0, 113, 3]];
        let v2 = sign(changed, &key, NOW + 60, Some(&v1), &store).unwrap();
        verifies(&v2, &profile);
        let p2 = published(&v2, alg);
        assert_eq!(series_of(&p2), series, "{alg}: the series goes on");
        let (l1, l2) = (leaves(&p1), leaves(&p2));
        let new: Vec<_> = l2.iter().filter(|(k, l)| l1.get(*k) != Some(l)).collect();
        let soa = ("mtl.test.".parse::<Name>().unwrap(), RrType::SOA);
        assert!(new.iter().any(|(k, _)| **k == soa), "{alg}");
        assert!(
            new.iter().any(|(k, _)| **k == (h3.clone(), RrType::A)),
            "{alg}"
        );
        assert!(new.len() < 6, "{alg}: only what changed is new: {new:?}");
        let mut new_leaves: Vec<u64> = new.iter().map(|(_, l)| **l).collect();
        new_leaves.sort_unstable();
        let expected: Vec<u64> = (count1..count1 + new.len() as u64).collect();
        assert_eq!(
            new_leaves, expected,
            "{alg}: indexes continue after the last"
        );

        // A resolver holding the new ladder: every new signature verifies condensed; an old
        // condensed signature verifies when its rung survived, else a newer ladder is asked
        // for (never Bogus), and the re-fetched signature of the same RRset verifies.
        let pk = key.key.public_key();
        let mut cache = LadderCache::new(8);
        cache.insert(ladder(alg, &key, &p1));
        let l2_ladder = ladder(alg, &key, &p2);
        cache.insert(l2_ladder.clone());
        assert_eq!(cache.len(), 1, "{alg}: one ladder per series");
        assert_eq!(cache.get(pk, series).unwrap().tag(), l2_ladder.tag());
        for p in &p2 {
            let condensed = MtlSignature::condensed_bytes(&p.sig.path);
            mtl::verify_signature(alg, pk, &p.data, &condensed, &cache).unwrap();
        }
        let (mut survived, mut refetched) = (0, 0);
        for old in p1.iter().filter(|p| !p.sig.is_full()) {
            let rung_kept =
                l2_ladder.ladder().rungs.iter().any(|r| {
                    (r.left, r.right) == (old.sig.path.rung_left, old.sig.path.rung_right)
                });
            match mtl::verify_signature(alg, pk, &old.data, &old.field, &cache) {
                Ok(None) => {
                    assert!(rung_kept, "{alg}");
                    survived += 1;
                }
                Err(CryptoError::LadderRequired(_)) => {
                    assert!(!rung_kept, "{alg}");
                    refetched += 1;
                    if let Some(now) = p2.iter().find(|p| {
                        p.owner == old.owner && p.rtype == old.rtype && p.data == old.data
                    }) {
                        assert_eq!(now.sig.path.leaf, old.sig.path.leaf, "{alg}: same leaf");
                        let condensed = MtlSignature::condensed_bytes(&now.sig.path);
                        mtl::verify_signature(alg, pk, &now.data, &condensed, &cache).unwrap();
                    }
                }
                other => panic!(
                    "{alg}: old signature of {} {}: {other:?}",
                    old.owner, old.rtype
                ),
            }
        }
        assert!(
            survived > 0 && survived + refetched + 2 == p1.len(),
            "{alg}"
        );

        // A third signing with nothing changed but the serial: still one series, one ladder
        // held, indexes going on.
        let v3 = sign(zone(3, 8), &key, NOW + 120, Some(&v2), &store).unwrap();
        verifies(&v3, &profile);
        let p3 = published(&v3, alg);
        assert_eq!(series_of(&p3), series, "{alg}");
        assert!(leaves(&p3)
            .values()
            .any(|&l| l >= count1 + new.len() as u64));
        cache.insert(ladder(alg, &key, &p3));
        assert_eq!(
            cache.len(),
            1,
            "{alg}: ladders do not pile up per re-signing"
        );
    }
}

#[test]
fn a_full_series_or_another_key_starts_a_new_series() {
    let (alg, profile) = algorithms().remove(0);
    let dir = tempfile::tempdir().unwrap();
    let key_a = key(alg, &profile);
    let v1 = {
        let store = SeriesFiles::open(dir.path(), "mtl.test", DEFAULT_CAPACITY).unwrap();
        sign(zone(1, 4), &key_a, NOW, None, &store).unwrap()
    };
    let p1 = published(&v1, alg);
    let first = series_of(&p1);
    // Room for 3 more leaves.
    let store = SeriesFiles::open(dir.path(), "mtl.test", p1.len() as u64 + 3).unwrap();
    // SOA and three new hosts' A and NSEC RRsets: more than 3 new leaves.
    let v2 = sign(zone(2, 7), &key_a, NOW + 60, Some(&v1), &store).unwrap();
    verifies(&v2, &profile);
    let p2 = published(&v2, alg);
    let second = series_of(&p2);
    assert_ne!(second, first, "a full series gives way");
    assert_eq!(
        leaves(&p2).values().copied().max(),
        Some(p2.len() as u64 - 1),
        "the new series starts at leaf 0 and holds every RRset"
    );
    let saved = store.load(&key_a).unwrap().unwrap();
    assert_eq!((saved.series, saved.leaves.len()), (second, p2.len()));

    // Another key: its own series, and the first key's is not touched.
    let key_b = key(alg, &profile);
    let v3 = sign(zone(3, 7), &key_b, NOW + 120, Some(&v2), &store).unwrap();
    let third = series_of(&published(&v3, alg));
    assert!(third != second && third != first);
    assert_eq!(store.load(&key_a).unwrap().unwrap().series, second);
}

/// A store that dies at its next save, before or after writing, as a signer killed there
/// would; the signing fails, so nothing it signed is published.
#[derive(Debug)]
struct Dying<'a> {
    files: &'a SeriesFiles,
    /// 0: healthy; 1: killed before the write; 2: killed after it.
    mode: AtomicU8,
}

impl SeriesStore for Dying<'_> {
    fn capacity(&self) -> u64 {
        self.files.capacity()
    }
    fn load(&self, key: &ZoneKey) -> Result<Option<SavedSeries>, SeriesError> {
        self.files.load(key)
    }
    fn save(&self, key: &ZoneKey, series: &SavedSeries) -> Result<(), SeriesError> {
        let killed = || SeriesError::Io {
            path: "killed".into(),
            error: std::io::Error::other("killed"),
        };
        match self.mode.load(Ordering::Relaxed) {
            1 => Err(killed()),
            2 => self.files.save(key, series).and(Err(killed())),
            _ => self.files.save(key, series),
        }
    }
}

#[test]
fn a_signer_killed_before_or_after_saving_never_reuses_a_leaf_index() {
    for (alg, profile) in algorithms() {
        let dir = tempfile::tempdir().unwrap();
        let key = key(alg, &profile);
        let mut served: Option<Zone> = None;
        // Every (series, leaf) ever published, with the data it signed.
        let mut seen: BTreeMap<(SeriesId, u64), Vec<u8>> = BTreeMap::new();
        let mut hosts = 3;
        for (round, mode) in [0u8, 2, 0, 1, 0, 2, 2, 0].into_iter().enumerate() {
            // Each round is a new process: a new store on the same directory.
            let files = SeriesFiles::open(dir.path(), "mtl.test", DEFAULT_CAPACITY).unwrap();
            let before = files.load(&key).unwrap().map_or(0, |s| s.leaves.len());
            let dying = Dying {
                files: &files,
                mode: AtomicU8::new(mode),
            };
            hosts += 1;
            let now = NOW + 60 * round as u64;
            let result = sign(
                zone(round as u32 + 1, hosts),
                &key,
                now,
                served.as_ref(),
                &dying,
            );
            let after = files.load(&key).unwrap().map_or(0, |s| s.leaves.len());
            match mode {
                0 => {
                    let zone = result.unwrap();
                    for p in published(&zone, alg) {
                        let id = (p.sig.path.series, p.sig.path.leaf);
                        if let Some(data) = seen.get(&id) {
                            assert_eq!(*data, p.data, "{alg}: leaf {id:?} reused for new data");
                        } else {
                            assert!(
                                p.sig.path.leaf >= before as u64,
                                "{alg}: a new leaf below the saved count"
                            );
                        }
                        seen.insert(id, p.data);
                    }
                    served = Some(zone);
                }
                1 => {
                    assert!(result.is_err());
                    assert_eq!(
                        after, before,
                        "{alg}: killed before the save: nothing saved"
                    );
                }
                _ => {
                    assert!(result.is_err());
                    assert!(
                        after > before,
                        "{alg}: killed after the save: the leaves are reserved"
                    );
                }
            }
        }
        assert_eq!(
            seen.keys()
                .map(|(s, _)| *s)
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            1,
            "{alg}: one series throughout"
        );
    }
}

#[test]
fn a_second_signer_cannot_open_the_series_while_one_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let held = SeriesFiles::open(dir.path(), "mtl.test", DEFAULT_CAPACITY).unwrap();
    let second = SeriesFiles::open(dir.path(), "mtl.test", DEFAULT_CAPACITY);
    assert!(
        matches!(second, Err(SeriesError::Locked { .. })),
        "{second:?}"
    );
    drop(held);
    SeriesFiles::open(dir.path(), "mtl.test", DEFAULT_CAPACITY).unwrap();
}
