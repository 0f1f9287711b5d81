//! Key files of the post-quantum DNSSEC peers (`tests/data/peer-keys`, see its README): every
//! key Verisign's ldns and OQS-bind wrote loads and signs a zone whose signatures verify
//! against the DNSKEY RRset the peer itself published; keys written in ldns's format use its
//! `Key:` layout (ML-DSA expanded), MTL keys are not written in it; BIND files carry the times
//! `dnssec-signzone -S` needs.

#![cfg(feature = "liboqs")]

use std::path::{Path, PathBuf};

use base64::Engine as _;
use pqdns_core::dnssec::keyfile::{
    find_key_files, KeyFileError, KeyFileFormat, KeyRole, LdnsKeyField, ZoneKey,
};
use pqdns_core::dnssec::sign::{sign_zone, Denial, SigningPolicy};
use pqdns_core::dnssec::verify::{verify_zone, VerifyOptions};
use pqdns_core::dnssec::{Algorithm, Profile, Provider};
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::{Name, RrType, Zone};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/peer-keys");

/// 2026-12-01 00:00:00 UTC: inside the validity windows of both peers' signatures.
const NOW: u64 = 1_796_083_200;

/// The sample folders and the profile giving their algorithm numbers.
const SAMPLES: &[(&str, &str)] = &[
    ("ldns/FL_DSA_512", "verisign"),
    ("ldns/ML_DSA_44", "verisign"),
    ("ldns/SLH_DSA_MTL_SHA2_128s", "verisign"),
    ("oqs-bind/FALCON512", "oqs-bind"),
    ("oqs-bind/DILITHIUM2", "oqs-bind"),
    ("oqs-bind/SPHINCS+-SHA256-128S", "oqs-bind"),
];

fn sample(dir: &str) -> PathBuf {
    Path::new(DATA).join(dir)
}

/// The sample's unsigned zone.
fn unsigned_zone(dir: &Path) -> Zone {
    ZoneFileReader::new(None, None)
        .read_zone(&dir.join("zone"))
        .unwrap()
}

/// The peer's DNSKEY RRset (with its RRSIGs) as a zone of its own.
fn peer_dnskeys(dir: &Path, origin: &Name) -> Zone {
    let mut zone = Zone::new(origin.clone());
    for r in ZoneFileReader::new(Some(origin.clone()), None)
        .read_file(&dir.join("dnskey"))
        .unwrap()
    {
        zone.insert(r).unwrap();
    }
    zone
}

fn options(signatures_only: bool) -> VerifyOptions {
    VerifyOptions::signatures_only_at(NOW, signatures_only)
}

/// The key tag in a `K<zone>+<alg>+<tag>.key` file name.
fn tag_in_name(path: &Path) -> u16 {
    let name = path.file_stem().unwrap().to_str().unwrap();
    name.rsplit('+').next().unwrap().parse().unwrap()
}

fn load_sample_keys(
    dir: &Path,
    origin: &Name,
    profile: &Profile,
    provider: &Provider,
) -> Vec<ZoneKey> {
    let paths = find_key_files(dir, origin).unwrap();
    assert_eq!(paths.len(), 2, "{}: a KSK and a ZSK", dir.display());
    paths
        .iter()
        .map(|p| {
            let key = ZoneKey::read_files(p, profile, provider)
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert_eq!(key.key_tag(), tag_in_name(p), "{}", p.display());
            key
        })
        .collect()
}

/// Must-show: each peer's keys load, and a zone pqdns signs with them verifies against the
/// DNSKEY RRset the peer published (whose own RRSIGs verify first, so it is the peer's).
#[test]
fn peer_keys_sign_zones_that_verify_against_the_peers_dnskey_rrset() {
    for (sub, profile) in SAMPLES {
        let dir = sample(sub);
        let profile = Profile::named(profile).unwrap();
        let zone = unsigned_zone(&dir);
        let origin = zone.origin.clone();

        let published = peer_dnskeys(&dir, &origin);
        let report = verify_zone(
            &published,
            &profile,
            &Provider::default_provider(),
            &options(true),
        );
        let peer_set = published.rrset(&origin, RrType::DNSKEY).unwrap();
        assert!(report.is_ok(), "{sub}: {:?}", report.failures);
        assert!(
            !peer_set.rrsigs.is_empty(),
            "{sub}: the peer signed its DNSKEYs"
        );
        assert_eq!(report.signatures_valid, peer_set.rrsigs.len(), "{sub}");
        let peer_rdatas = peer_set.rdatas.clone();

        // ML-DSA through both of its backends: aws-lc-rs (default) and liboqs.
        let mut providers = vec![Provider::default_provider()];
        if sub.contains("ML_DSA") {
            providers.push(Provider::liboqs_first());
        }
        for provider in &providers {
            let keys = load_sample_keys(&dir, &origin, &profile, provider);
            for key in &keys {
                assert!(
                    peer_rdatas.contains(&key.dnskey_rdata()),
                    "{sub}: key {} is not in the peer's DNSKEY RRset",
                    key.key_tag()
                );
            }
            let policy = SigningPolicy {
                inception: NOW - 3600,
                expiration: NOW + 86_400,
                denial: Denial::Nsec,
                published_dnskeys: Some(peer_rdatas.clone()),
            };
            let mut signed = zone.clone();
            let stats = sign_zone(&mut signed, &keys, &policy, &|_, _| {}).unwrap();
            let report = verify_zone(&signed, &profile, provider, &options(false));
            assert!(report.is_ok(), "{sub} {provider:?}: {:?}", report.failures);
            assert_eq!(report.signatures_valid, stats.signatures, "{sub}");
            assert_eq!(
                signed.rrset(&origin, RrType::DNSKEY).unwrap().rdatas,
                peer_rdatas,
                "{sub}: the signed zone publishes the peer's DNSKEYs"
            );
        }
    }
}

/// The fields of a `.private` file: (name, value) in order.
fn fields(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_string(), v.trim().to_string())
        })
        .collect()
}

/// The (secret key, public key) lengths in a `.private` file's `Key:` field, and the length of
/// what follows them.
fn key_field_lengths(text: &str) -> (usize, usize, usize) {
    let (_, value) = fields(text)
        .into_iter()
        .find(|(n, _)| n == "Key")
        .expect("a Key: field");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(value)
        .unwrap();
    let parts = LdnsKeyField::split(&bytes).unwrap();
    (parts.secret.len(), parts.public.len(), parts.rest.len())
}

/// Must-show: keys written in ldns's format have the fields and encodings of the ldns samples
/// (one `Key:` field, ML-DSA-44 expanded to 2,560 bytes even when the key is a seed), and load
/// back, also with liboqs, which only takes the expanded key.
#[test]
fn ldns_files_we_write_match_the_ldns_samples() {
    let profile = Profile::named("verisign").unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (sub, alg) in [
        ("ldns/ML_DSA_44", Algorithm::MlDsa44),
        ("ldns/FL_DSA_512", Algorithm::Falcon512),
    ] {
        let peer_private = find_key_files(&sample(sub), &unsigned_zone(&sample(sub)).origin)
            .unwrap()[0]
            .with_extension("private");
        let peer = std::fs::read_to_string(&peer_private).unwrap();
        let origin: Name = "example.".parse().unwrap();
        let provider = Provider::default_provider();
        let key = ZoneKey::generate(&origin, alg, KeyRole::Ksk, &profile, &provider, 3600).unwrap();
        let (key_path, private_path) = key.write_files_as(dir.path(), KeyFileFormat::Ldns).unwrap();
        let ours = std::fs::read_to_string(&private_path).unwrap();

        let names = |t: &str| fields(t).into_iter().map(|(n, _)| n).collect::<Vec<_>>();
        assert_eq!(names(&ours), names(&peer), "{alg}");
        let first = |t: &str, i: usize| {
            fields(t)[i]
                .1
                .split_whitespace()
                .next()
                .unwrap()
                .to_string()
        };
        assert_eq!(first(&ours, 0), first(&peer, 0), "{alg}: format version");
        assert_eq!(first(&ours, 1), first(&peer, 1), "{alg}: algorithm number");
        assert_eq!(key_field_lengths(&ours), key_field_lengths(&peer), "{alg}");
        assert_eq!(key_field_lengths(&ours).2, 0, "{alg}");

        for provider in [Provider::default_provider(), Provider::liboqs_first()] {
            let loaded = ZoneKey::read_files(&key_path, &profile, &provider)
                .unwrap_or_else(|e| panic!("{alg} {provider:?}: {e}"));
            assert_eq!(loaded.dnskey_rdata(), key.dnskey_rdata(), "{alg}");
            let sig = loaded.key.sign(b"m").unwrap();
            provider
                .scheme(alg)
                .unwrap()
                .verify(key.key.public_key(), b"m", &sig)
                .unwrap();
        }
    }
}

/// ldns keeps a whole MTL signing context in its key files: pqdns refuses to write MTL keys in
/// that format, naming the file, rather than write one ldns would misread. (ldns's own MTL
/// files load: their SPHINCS+ key is all pqdns needs, see the first test.)
#[test]
fn mtl_keys_are_not_written_in_ldns_format() {
    let profile = Profile::named("verisign").unwrap();
    let provider = Provider::default_provider();
    let dir = tempfile::tempdir().unwrap();
    let origin: Name = "example.".parse().unwrap();
    let key = ZoneKey::generate(
        &origin,
        Algorithm::MtlSlhDsaSha2_128s,
        KeyRole::Ksk,
        &profile,
        &provider,
        3600,
    )
    .unwrap();
    let err = key
        .write_files_as(dir.path(), KeyFileFormat::Ldns)
        .unwrap_err();
    assert!(
        matches!(err, KeyFileError::FormatUnsupported { .. }),
        "{err}"
    );
    let message = err.to_string();
    assert!(
        message.contains(&format!("{}.private", key.file_stem())),
        "{message}"
    );
    assert!(message.contains("MTL"), "{message}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
    // BIND's format still works.
    key.write_files_as(dir.path(), KeyFileFormat::Bind).unwrap();
}

/// A damaged ldns `Key:` field is an error naming the file and line, never a panic.
#[test]
fn damaged_ldns_key_fields_are_clear_errors() {
    let dir = sample("ldns/FL_DSA_512");
    let profile = Profile::named("verisign").unwrap();
    let key_path = find_key_files(&dir, &unsigned_zone(&dir).origin).unwrap()[0].clone();
    let key_text = std::fs::read_to_string(&key_path).unwrap();
    let private_path = key_path.with_extension("private");
    let private = std::fs::read_to_string(&private_path).unwrap();
    let (_, value) = fields(&private)
        .into_iter()
        .find(|(n, _)| n == "Key")
        .unwrap();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(value)
        .unwrap();
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let mut wrong_public = bytes.clone();
    *wrong_public.last_mut().unwrap() ^= 1;
    let mut trailing = bytes.clone();
    trailing.push(0);
    for (damaged, expect) in [
        (b64(&bytes[..100]), "length runs past"),
        (b64(&bytes[..2]), "length runs past"),
        (b64(&wrong_public), "differs"),
        (b64(&trailing), "after the public key"),
    ] {
        let text =
            format!("Private-key-format: v1.2\nAlgorithm: 244 (FL_DSA_512)\nKey: {damaged}\n");
        let err = ZoneKey::from_texts(
            &key_text,
            &text,
            &key_path,
            &private_path,
            &profile,
            &Provider::default_provider(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(".private:3:"), "{err}");
        assert!(err.contains(expect), "{err}");
    }
}

/// Must-show: BIND files we write carry `Created:`, `Publish:` and `Activate:` (the time the
/// files were written, `YYYYMMDDHHMMSS` UTC) in `.private` and as `.key` comments, as
/// dnssec-keygen and the OQS-bind samples do, and still load.
#[test]
fn bind_files_carry_created_publish_and_activate() {
    let sample_key = std::fs::read_to_string(
        sample("oqs-bind/FALCON512").join("Kfalcon512.bind2pq.example.+017+32148.key"),
    )
    .unwrap();
    let profile = Profile::default_profile();
    let provider = Provider::default_provider();
    let dir = tempfile::tempdir().unwrap();
    let origin: Name = "example.".parse().unwrap();
    for alg in [Algorithm::MlDsa44, Algorithm::EcdsaP256Sha256] {
        let key = ZoneKey::generate(&origin, alg, KeyRole::Zsk, &profile, &provider, 3600).unwrap();
        let before = pqdns_core::time::now();
        let (key_path, private_path) = key.write_files(dir.path()).unwrap();
        let after = pqdns_core::time::now();
        let private = fields(&std::fs::read_to_string(&private_path).unwrap());
        let key_text = std::fs::read_to_string(&key_path).unwrap();
        for name in ["Created", "Publish", "Activate"] {
            let value = &private
                .iter()
                .find(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("{alg}: no {name}: line"))
                .1;
            let t = pqdns_core::time::from_yyyymmddhhmmss(value)
                .unwrap_or_else(|| panic!("{alg}: {name}: {value}"));
            assert!((before..=after).contains(&t), "{alg}: {name}: {value}");
            // The .key comment, in the sample's form: `; Name: YYYYMMDDHHMMSS (ctime)`.
            let comment = format!("; {name}: {value} ({})", pqdns_core::time::to_ctime(t));
            assert!(
                key_text.contains(&comment),
                "{alg}: {comment:?} in\n{key_text}"
            );
            assert!(
                sample_key.contains(&format!("; {name}: ")),
                "the sample has {name}"
            );
        }
        let loaded = ZoneKey::read_files(&key_path, &profile, &provider).unwrap();
        assert_eq!(loaded.dnskey_rdata(), key.dnskey_rdata(), "{alg}");
    }
    // The samples' own comment lines come out of to_ctime unchanged.
    for line in sample_key.lines().filter(|l| l.starts_with("; Created: ")) {
        let (stamp, readable) = line["; Created: ".len()..].split_once(' ').unwrap();
        let t = pqdns_core::time::from_yyyymmddhhmmss(stamp).unwrap();
        assert_eq!(format!("({})", pqdns_core::time::to_ctime(t)), readable);
    }
}

/// A malformed time in a BIND private file is an error naming the file and line.
#[test]
fn malformed_bind_times_are_clear_errors() {
    let dir = sample("oqs-bind/FALCON512");
    let key_path = dir.join("Kfalcon512.bind2pq.example.+017+32148.key");
    let private_path = key_path.with_extension("private");
    let key_text = std::fs::read_to_string(&key_path).unwrap();
    let private = std::fs::read_to_string(&private_path)
        .unwrap()
        .replace("Publish: 20261125225514", "Publish: 2026-11-25");
    let err = ZoneKey::from_texts(
        &key_text,
        &private,
        &key_path,
        &private_path,
        &Profile::named("oqs-bind").unwrap(),
        &Provider::default_provider(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains(".private:6: Publish"), "{err}");
}
