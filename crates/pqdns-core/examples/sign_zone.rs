//! Signs a zone in memory with post-quantum keys and checks the result, using only the library:
//! no files, no network.
//!
//! ```sh
//! cargo run --release -p pqdns-core --example sign_zone
//! ```
//!
//! Steps: parse RFC 1035 zone-file text into a [`Zone`], generate an ML-DSA-44 KSK and ZSK
//! (FIPS 204, numbered by the default profile), sign with an NSEC3 chain (RFC 5155, RFC 9276
//! parameters), verify every signature and the chain with [`verify_zone`], and print the DS
//! record for the parent (RFC 4034 §5, SHA-256).

use std::process::ExitCode;

use pqdns_core::dnssec::dnskey::{ds_record, DigestType};
use pqdns_core::dnssec::keyfile::{KeyRole, ZoneKey};
use pqdns_core::dnssec::nsec3::Nsec3Params;
use pqdns_core::dnssec::sign::{sign_zone, Denial, SigningPolicy};
use pqdns_core::dnssec::verify::{verify_zone, VerifyOptions};
use pqdns_core::dnssec::{Algorithm, Profile, Provider};
use pqdns_core::name::Name;
use pqdns_core::time;
use pqdns_core::zone::Zone;
use pqdns_core::zonefile::ZoneFileReader;

const ZONE: &str = "\
$TTL 3600
@    SOA  ns1 hostmaster 2026112301 7200 3600 1209600 300
     NS   ns1
ns1  A    192.0.2.53
www  A    192.0.2.80
     AAAA 2001:db8::80
";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sign_zone: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let origin = Name::parse("example.com.", None)?;
    let mut zone = Zone::new(origin.clone());
    ZoneFileReader::new(Some(origin.clone()), None).read_str_into(
        ZONE,
        "example.com",
        &mut zone,
    )?;
    zone.check_apex()?;

    let profile = Profile::default_profile();
    let provider = Provider::default_provider();
    let keys = [KeyRole::Ksk, KeyRole::Zsk]
        .into_iter()
        .map(|role| ZoneKey::generate(&origin, Algorithm::MlDsa44, role, &profile, &provider, 3600))
        .collect::<Result<Vec<_>, _>>()?;

    let now = time::now();
    let policy = SigningPolicy {
        inception: now - 3600,
        expiration: now + 14 * 86400,
        denial: Denial::Nsec3(Nsec3Params::default()),
        published_dnskeys: None,
    };
    let stats = sign_zone(&mut zone, &keys, &policy, &|_, _| {})?;
    println!(
        "signed {origin}: {} RRsets, {} RRSIGs, {} NSEC3 records",
        stats.rrsets, stats.signatures, stats.denial_records
    );

    let report = verify_zone(&zone, &profile, &provider, &VerifyOptions::at(now));
    if let Some(failure) = report.failures.first() {
        return Err(format!("the signed zone does not verify: {failure}").into());
    }
    println!(
        "verified: {} of {} signatures valid",
        report.signatures_valid, report.signatures_checked
    );

    let ksk = keys.iter().find(|k| k.is_sep()).ok_or("no KSK")?;
    let ds = ds_record(&ksk.dnskey_record(), DigestType::Sha256).ok_or("no DS for the KSK")?;
    println!("DS for the parent: {ds}");
    Ok(())
}
