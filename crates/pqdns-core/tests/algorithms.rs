//! One test suite run for every algorithm each provider implements: primitive sign/verify and
//! sizes, key files, and a whole-zone sign → verify round trip (delegations, glue, wildcard,
//! empty non-terminals; NSEC and NSEC3) that must detect tampering.

use std::collections::BTreeMap;

use pqdns_core::dnssec::keyfile::{KeyFileFormat, KeyRole, ZoneKey};
use pqdns_core::dnssec::nsec3::Nsec3Params;
use pqdns_core::dnssec::sign::{sign_zone, Denial, SigningPolicy};
use pqdns_core::dnssec::verify::{verify_zone, VerifyOptions};
use pqdns_core::dnssec::{Algorithm, Backend, Profile, Provider};
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::{Name, RrType, Zone};

const NOW: u64 = 1_750_000_000;

const ZONE: &str = "\
$ORIGIN example.
$TTL 300
@        SOA   ns1 hostmaster 2024010101 7200 3600 1209600 300
@        NS    ns1
@        MX    10 mail
ns1      A     192.0.2.1
mail     A     192.0.2.2
www      A     192.0.2.3
www      AAAA  2001:db8::3
alias    CNAME www
*.wild   TXT   \"wildcard\"
a.b.ent  A     192.0.2.4
sub      NS    ns.sub
ns.sub   A     192.0.2.5
sub      DS    12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF
insecure NS    ns.insecure
ns.insecure A  192.0.2.6
";

/// Every implemented algorithm gets a number: the default profile plus private-use numbers
/// for those it leaves out.
fn test_profile() -> Profile {
    let numbers = BTreeMap::from([
        ("SPHINCS+-SHA2-128f".to_string(), 250u8),
        ("SPHINCS+-SHAKE-128f".to_string(), 251),
        ("MAYO-2".to_string(), 252),
        ("Dilithium2".to_string(), 253),
        // The FIPS 205 MTL variants have no number in any built-in profile.
        ("SLH-DSA-MTL-FIPS205-SHA2-128s".to_string(), 135),
        ("SLH-DSA-MTL-FIPS205-SHAKE-128s".to_string(), 136),
    ]);
    Profile::custom("test", "default", &numbers).unwrap()
}

/// The smaller zone for the slow hash-based "s" schemes (about a second per signature): still a
/// delegation with glue and DS, and the names the round-trip test changes.
const SMALL_ZONE: &str = "\
$ORIGIN example.
$TTL 300
@        SOA   ns1 hostmaster 2024010101 7200 3600 1209600 300
@        NS    ns1
ns1      A     192.0.2.1
mail     A     192.0.2.2
www      A     192.0.2.3
sub      NS    ns.sub
ns.sub   A     192.0.2.5
sub      DS    12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF
";

fn zone_from(text: &str) -> Zone {
    let origin: Name = "example.".parse().unwrap();
    let records = ZoneFileReader::new(Some(origin.clone()), None)
        .read_str(text, "test.zone")
        .unwrap();
    Zone::from_records(origin, records).unwrap()
}

fn zone() -> Zone {
    zone_from(ZONE)
}

/// SPHINCS+ and SLH-DSA "s" parameter sets sign in about a second (MTL mode signs only its
/// ladders with them).
fn slow_signer(alg: Algorithm) -> bool {
    !alg.is_mtl() && alg.name().contains("128s")
}

fn keys(alg: Algorithm, provider: &Provider) -> Vec<ZoneKey> {
    let origin: Name = "example.".parse().unwrap();
    [KeyRole::Ksk, KeyRole::Zsk]
        .iter()
        .map(|role| {
            ZoneKey::generate(&origin, alg, *role, &test_profile(), provider, 3600).unwrap()
        })
        .collect()
}

fn policy(denial: Denial) -> SigningPolicy {
    SigningPolicy {
        inception: NOW - 3600,
        expiration: NOW + 86_400,
        denial,
        published_dnskeys: None,
    }
}

fn verify(zone: &Zone, provider: &Provider) -> Vec<String> {
    let opts = VerifyOptions::at(NOW);
    verify_zone(zone, &test_profile(), provider, &opts)
        .failures
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// The default provider, and the liboqs-first one in builds with liboqs.
fn providers() -> Vec<Provider> {
    #[allow(unused_mut)]
    let mut all = vec![Provider::default_provider()];
    #[cfg(feature = "liboqs")]
    all.push(Provider::liboqs_first());
    all
}

fn each_algorithm(mut f: impl FnMut(Algorithm, &Provider)) {
    let default = Provider::default_provider();
    for provider in providers() {
        for alg in provider.algorithms().collect::<Vec<_>>() {
            let scheme = provider.scheme(alg).unwrap();
            // Validation-only schemes (RSASHA1, RFC 8624 §3.1) have their own test below.
            if !scheme.signs() {
                continue;
            }
            let backend = scheme.backend();
            // Test an implementation once: the liboqs-first provider only for the algorithms
            // where it picks another backend than the default provider (ML-DSA).
            if provider.name().starts_with("liboqs")
                && default.scheme(alg).map(|s| s.backend()) == Ok(backend)
            {
                continue;
            }
            f(alg, &provider);
        }
    }
}

#[test]
fn primitive_sign_verify_and_sizes() {
    each_algorithm(|alg, provider| {
        let scheme = provider.scheme(alg).unwrap();
        let key = scheme.generate().unwrap();
        let msg = b"signed data";
        let sig = key.sign(msg).unwrap();
        assert!(scheme.verify(key.public_key(), msg, &sig).is_ok(), "{alg}");
        assert!(
            scheme
                .verify(key.public_key(), b"other data", &sig)
                .is_err(),
            "{alg}"
        );
        let mut bad = sig.clone();
        bad[sig.len() / 2] ^= 0x10;
        assert!(scheme.verify(key.public_key(), msg, &bad).is_err(), "{alg}");
        if alg.public_key_len() > 0 {
            assert_eq!(key.public_key().len(), alg.public_key_len(), "{alg}");
            assert!(sig.len() <= alg.max_signature_len(), "{alg}: {}", sig.len());
        }
    });
}

#[test]
fn key_files_round_trip_with_private_mode_0600() {
    let dir = tempfile::tempdir().unwrap();
    let profile = test_profile();
    each_algorithm(|alg, provider| {
        for format in [KeyFileFormat::Bind, KeyFileFormat::Ldns] {
            // ldns keeps MTL keys with a signing context pqdns does not write (tests/peer_keys.rs).
            if !(alg.is_mtl() && format == KeyFileFormat::Ldns) {
                key_files_round_trip(dir.path(), &profile, alg, provider, format);
            }
        }
    });
}

fn key_files_round_trip(
    dir: &std::path::Path,
    profile: &Profile,
    alg: Algorithm,
    provider: &Provider,
    format: KeyFileFormat,
) {
    let origin: Name = "example.".parse().unwrap();
    let key = &ZoneKey::generate(&origin, alg, KeyRole::Ksk, profile, provider, 3600).unwrap();
    let (key_path, private_path) = key.write_files_as(dir, format).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&private_path)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{alg}");
    }
    let loaded = ZoneKey::read_files(&key_path, profile, provider).unwrap();
    assert_eq!(
        loaded.dnskey_rdata(),
        key.dnskey_rdata(),
        "{alg} {format:?}"
    );
    let sig = loaded.key.sign(b"x").unwrap();
    let scheme = provider.scheme(alg).unwrap();
    assert!(
        scheme.verify(key.key.public_key(), b"x", &sig).is_ok(),
        "{alg}"
    );
}

#[test]
fn truncated_or_mismatched_key_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Provider::default_provider();
    let key = &keys(Algorithm::EcdsaP256Sha256, &provider)[0];
    let (key_path, private_path) = key.write_files(dir.path()).unwrap();
    let text = std::fs::read_to_string(&private_path).unwrap();
    std::fs::write(&private_path, &text[..30]).unwrap();
    let err = ZoneKey::read_files(&key_path, &test_profile(), &provider).unwrap_err();
    assert!(err.to_string().contains(".private"), "{err}");
    // Under the oqs-bind profile, 13 is still ECDSA, but an unmapped number is explained.
    let origin: Name = "example.".parse().unwrap();
    let other = &ZoneKey::generate(
        &origin,
        Algorithm::SlhDsaSha2_128s,
        KeyRole::Zsk,
        &test_profile(),
        &provider,
        3600,
    )
    .unwrap();
    let (other_key, _) = other.write_files(dir.path()).unwrap();
    let err = ZoneKey::read_files(&other_key, &Profile::named("oqs-bind").unwrap(), &provider)
        .unwrap_err();
    assert!(err.to_string().contains("not mapped by profile"), "{err}");
}

#[test]
#[cfg(feature = "liboqs")]
fn ml_dsa_implementations_verify_each_other() {
    let aws = Provider::default_provider();
    let oqs = Provider::liboqs_first();
    for alg in [Algorithm::MlDsa44, Algorithm::MlDsa65, Algorithm::MlDsa87] {
        let (a, o) = (aws.scheme(alg).unwrap(), oqs.scheme(alg).unwrap());
        assert_eq!(
            (a.backend(), o.backend()),
            (Backend::AwsLc, Backend::Liboqs)
        );
        let ka = a.generate().unwrap();
        let ko = o.generate().unwrap();
        let sa = ka.sign(b"cross").unwrap();
        let so = ko.sign(b"cross").unwrap();
        assert!(
            o.verify(ka.public_key(), b"cross", &sa).is_ok(),
            "liboqs verifies aws-lc {alg}"
        );
        assert!(
            a.verify(ko.public_key(), b"cross", &so).is_ok(),
            "aws-lc verifies liboqs {alg}"
        );
        // A liboqs private key (expanded form) loads under aws-lc-rs and signs the same key.
        let loaded = a.load(&ko.private_fields(), ko.public_key()).unwrap();
        assert_eq!(loaded.public_key(), ko.public_key());
    }
}

#[test]
fn zone_sign_verify_round_trip_detects_tampering() {
    each_algorithm(|alg, provider| {
        let nsec3 = Denial::Nsec3(Nsec3Params {
            iterations: 0,
            salt: vec![],
            opt_out: false,
        });
        // MTL zones have their own suite (tests/mtl.rs). FIPS 205 SLH-DSA signs in pure Rust at
        // seconds per signature; its signatures have SPHINCS+-128s' sizes, whose zones are
        // covered here, and the scheme itself is covered above and by tests/fips205_kat.rs.
        let backend = provider.scheme(alg).unwrap().backend();
        if alg.is_mtl() || backend == Backend::Fips205 {
            return;
        }
        // Slow signers: the small zone, NSEC only (denial is algorithm-independent code).
        let (text, denials) = if slow_signer(alg) {
            (SMALL_ZONE, vec![Denial::Nsec])
        } else {
            (ZONE, vec![Denial::Nsec, nsec3])
        };
        for denial in denials {
            let mut z = zone_from(text);
            let keys = keys(alg, provider);
            let stats = sign_zone(&mut z, &keys, &policy(denial.clone()), &|_, _| {}).unwrap();
            assert!(stats.signatures >= 10, "{alg}");
            let failures = verify(&z, provider);
            assert!(failures.is_empty(), "{alg} {denial:?}: {failures:#?}");

            // Glue and delegation NS are unsigned; DS at the delegation is signed.
            let sub: Name = "sub.example.".parse().unwrap();
            assert!(z.rrset(&sub, RrType::NS).unwrap().rrsigs.is_empty());
            assert!(!z.rrset(&sub, RrType::DS).unwrap().rrsigs.is_empty());
            let glue: Name = "ns.sub.example.".parse().unwrap();
            assert!(z.rrset(&glue, RrType::A).unwrap().rrsigs.is_empty());

            // Change one byte of the www A record.
            let www: Name = "www.example.".parse().unwrap();
            let mut tampered = z.clone();
            let set = tampered
                .nodes
                .get_mut(&www)
                .unwrap()
                .get_mut(&RrType::A)
                .unwrap();
            set.rdatas[0][3] ^= 1;
            let failures = verify(&tampered, provider);
            assert!(
                failures.iter().any(|f| f.starts_with("www.example. A:")),
                "{alg}: {failures:?}"
            );

            // Remove a name: the denial chain must break.
            let mut gap = z.clone();
            gap.nodes.remove(&"mail.example.".parse::<Name>().unwrap());
            assert!(!verify(&gap, provider).is_empty(), "{alg} {denial:?}");
        }
    });
}

#[test]
fn dual_algorithm_zone_needs_both_signatures() {
    let provider = Provider::default_provider();
    let mut z = zone();
    let mut all = keys(Algorithm::EcdsaP256Sha256, &provider);
    all.extend(keys(Algorithm::MlDsa44, &provider));
    sign_zone(&mut z, &all, &policy(Denial::Nsec), &|_, _| {}).unwrap();
    assert!(verify(&z, &provider).is_empty());
    let www: Name = "www.example.".parse().unwrap();
    let set = z.nodes.get_mut(&www).unwrap().get_mut(&RrType::A).unwrap();
    assert_eq!(set.rrsigs.len(), 2);
    // Drop the ML-DSA signature: RFC 4035 §2.2 says each algorithm must sign every RRset.
    set.rrsigs.retain(|s| s[2] != 18);
    let failures = verify(&z, &provider);
    assert!(
        failures
            .iter()
            .any(|f| f.contains("no valid RRSIG with algorithm 18")),
        "{failures:?}"
    );
}
