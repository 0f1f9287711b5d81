//! Runs the authoritative server in-process on a zone signed in memory, then resolves and
//! validates a name through the library over DNS-over-TLS with hybrid X25519MLKEM768 key
//! exchange. Everything stays on 127.0.0.1; the only file written is the server's self-signed
//! TLS certificate, in a temporary directory.
//!
//! ```sh
//! cargo run --release -p pqdns-resolver --example serve_and_resolve
//! ```
//!
//! Steps: sign `example.com.` with a Falcon-512 CSK (NSEC chain); serve it from an in-memory
//! [`Catalog`] with [`Server::bind`] (DoT on an ephemeral port); build a [`Resolver`] in
//! forwarding mode whose trust anchor is the zone's DS (RFC 4034 §5); spawn the resolution
//! (`resolve` futures are `Send + 'static`) and print the validated RRsets, the status and
//! the TLS key-exchange group.

use std::error::Error;
use std::process::ExitCode;
use std::time::Duration;

use pqdns_core::dnssec::dnskey::{ds_record, DigestType};
use pqdns_core::dnssec::keyfile::{KeyRole, ZoneKey};
use pqdns_core::dnssec::sign::{sign_zone, Denial, SigningPolicy};
use pqdns_core::dnssec::{Algorithm, Profile, Provider};
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::{time, Name, RrType, Zone};
use pqdns_resolver::{Client, Config, Mode, Resolver, TlsOptions, Transport, TrustAnchors};
use pqdns_server::catalog::{Catalog, ServedZone};
use pqdns_server::settings::Settings;
use pqdns_server::{Server, ServerConfig};

const ZONE: &str = "\
$TTL 3600
@    SOA  ns1 hostmaster 2026112301 7200 3600 1209600 300
     NS   ns1
ns1  A    192.0.2.53
www  A    192.0.2.80
";

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("serve_and_resolve: {e}");
            ExitCode::from(2)
        }
    }
}

/// Signs the zone with one Falcon-512 CSK; returns it with the DS RDATA for the anchor.
fn signed_zone(origin: &Name) -> Result<(Zone, Vec<u8>), Box<dyn Error>> {
    let mut zone = Zone::new(origin.clone());
    ZoneFileReader::new(Some(origin.clone()), None).read_str_into(ZONE, "example", &mut zone)?;
    let (profile, provider) = (Profile::default_profile(), Provider::default_provider());
    let csk = ZoneKey::generate(
        origin,
        Algorithm::Falcon512,
        KeyRole::Csk,
        &profile,
        &provider,
        3600,
    )?;
    let now = time::now();
    let policy = SigningPolicy {
        inception: now - 3600,
        expiration: now + 7 * 86400,
        denial: Denial::Nsec,
        published_dnskeys: None,
    };
    sign_zone(&mut zone, std::slice::from_ref(&csk), &policy, &|_, _| {})?;
    let ds = ds_record(&csk.dnskey_record(), DigestType::Sha256).ok_or("no DS for the CSK")?;
    Ok((zone, ds.rdata))
}

/// Returns whether the answer was Secure.
async fn run() -> Result<bool, Box<dyn Error>> {
    let origin = Name::parse("example.com.", None)?;
    let (zone, ds) = signed_zone(&origin)?;

    let cert_dir = tempfile::tempdir()?;
    let mut settings = Settings::new(cert_dir.path().to_path_buf());
    settings.dot = vec!["127.0.0.1:0".parse()?];
    let catalog = Catalog::new([ServedZone::new(zone)])?;
    let config = ServerConfig::new(Vec::new(), settings);
    let server = Server::bind(config, catalog).await?;
    let dot = server.addrs.dot[0];
    let cert = server
        .certificate()
        .ok_or("DoT listens without a certificate")?;

    let mut anchors = TrustAnchors::default();
    anchors.add_ds(origin.clone(), ds);
    let mut tls = TlsOptions::default();
    tls.ca_files = vec![cert.cert_path];
    let client = Client::new(Transport::Dot, Duration::from_secs(3), tls)?;
    let resolver = Resolver::new(Config::new(Mode::Forward(dot), anchors), client);

    let qname = Name::parse("www.example.com.", None)?;
    let answer = tokio::spawn(resolver.resolve(&qname, RrType::A)).await??;
    for rrset in answer.answers() {
        for record in rrset.records() {
            println!("{record}    ; {}", rrset.status_name());
        }
    }
    println!("status: {}", answer.status());
    if let Some(group) = answer
        .exchanges()
        .iter()
        .find_map(|e| e.tls_group.as_deref())
    {
        println!("TLS key exchange: {group}");
    }
    server.shutdown().await;
    Ok(answer.status().is_secure())
}
