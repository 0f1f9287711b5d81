//! What `dnssec::verify` reports about broken zones: one failure per bad signature (not two on
//! an expired zone), type bitmaps by mnemonic, an orphaned NSEC3 RRSIG named as such, and the
//! signer's limits on NSEC3 iterations (RFC 9276).

use pqdns_core::dnssec::keyfile::{KeyRole, ZoneKey};
use pqdns_core::dnssec::nsec3::Nsec3Params;
use pqdns_core::dnssec::sign::{sign_zone, Denial, SignError, SigningPolicy};
use pqdns_core::dnssec::verify::{verify_zone, VerifyOptions, VerifyReport};
use pqdns_core::dnssec::{Algorithm, Profile, Provider};
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::{Name, Record, RrType, Zone};

const NOW: u64 = 1_750_000_000;

const ZONE: &str = "\
@    SOA  ns1 hostmaster 1 7200 3600 1209600 300
@    NS   ns1
ns1  A    192.0.2.1
www  A    192.0.2.3
";

fn origin() -> Name {
    "example.".parse().unwrap()
}

/// Signs the test zone with an ECDSA CSK, valid from an hour before [`NOW`] for a day.
fn sign(denial: Denial) -> Result<Zone, SignError> {
    let records = ZoneFileReader::new(Some(origin()), Some(300))
        .read_str(ZONE, "t")
        .unwrap();
    let mut zone = Zone::from_records(origin(), records).unwrap();
    let key = ZoneKey::generate(
        &origin(),
        Algorithm::EcdsaP256Sha256,
        KeyRole::Csk,
        &Profile::default_profile(),
        &Provider::default_provider(),
        300,
    )
    .unwrap();
    let policy = SigningPolicy {
        inception: NOW - 3600,
        expiration: NOW + 86_400,
        denial,
        published_dnskeys: None,
    };
    sign_zone(&mut zone, &[key], &policy, &|_, _| {})?;
    Ok(zone)
}

fn signed(denial: Denial) -> Zone {
    sign(denial).unwrap()
}

fn verify(zone: &Zone, now: u64) -> VerifyReport {
    let opts = VerifyOptions::at(now);
    verify_zone(
        zone,
        &Profile::default_profile(),
        &Provider::default_provider(),
        &opts,
    )
}

#[test]
fn an_expired_zone_has_one_failure_per_signature() {
    let zone = signed(Denial::Nsec);
    let fresh = verify(&zone, NOW);
    assert!(fresh.is_ok(), "{:?}", fresh.failures);
    let expired = verify(&zone, NOW + 2 * 86_400);
    assert_eq!(expired.signatures_valid, 0);
    assert_eq!(
        expired.failures.len(),
        expired.signatures_checked,
        "{:#?}",
        expired.failures
    );
    assert!(expired
        .failures
        .iter()
        .all(|f| f.reason.contains("has expired")));
}

#[test]
fn nsec_type_bitmaps_are_printed_by_mnemonic() {
    let mut zone = signed(Denial::Nsec);
    // Give www an AAAA its NSEC does not list.
    let www: Name = "www.example.".parse().unwrap();
    zone.insert(Record {
        owner: www.clone(),
        rtype: RrType::AAAA,
        class: pqdns_core::Class::IN,
        ttl: 300,
        rdata: vec![0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3],
    })
    .unwrap();
    let report = verify(&zone, NOW);
    let nsec = report
        .failures
        .iter()
        .find(|f| f.owner == www && f.rtype == RrType::NSEC)
        .expect("the NSEC bitmap mismatch is reported");
    assert_eq!(
        nsec.reason,
        "type bitmap {A RRSIG NSEC} should be {A AAAA RRSIG NSEC}"
    );
    assert!(!report.failures.iter().any(|f| f.reason.contains("RrType(")));
}

#[test]
fn an_orphaned_nsec3_rrsig_is_named_as_such() {
    let mut zone = signed(Denial::Nsec3(Nsec3Params::default()));
    let (owner, set) = zone
        .nsec3
        .iter_mut()
        .next()
        .map(|(o, s)| (o.clone(), s))
        .unwrap();
    set.rdatas.clear();
    let report = verify(&zone, NOW);
    let about_owner: Vec<&str> = report
        .failures
        .iter()
        .filter(|f| f.owner == owner)
        .map(|f| f.reason.as_str())
        .collect();
    assert_eq!(
        about_owner,
        ["RRSIG covers a type with no records here"],
        "{:#?}",
        report.failures
    );
    assert!(!report
        .failures
        .iter()
        .any(|f| f.reason.contains("NSEC3 owner is not")));
}

#[test]
fn nsec3_iterations_above_150_are_refused_when_signing() {
    let err = sign(Denial::Nsec3(Nsec3Params {
        iterations: 500,
        ..Nsec3Params::default()
    }))
    .unwrap_err();
    assert!(matches!(err, SignError::Nsec3Iterations(500)), "{err}");
    assert!(err.to_string().contains("RFC 9276"), "{err}");
}
