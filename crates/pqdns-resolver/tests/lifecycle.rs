//! Issue 13, must-show 1: a zone dual-signed with ECDSAP256SHA256 and ML-DSA-44 (KSK/ZSK,
//! 14-day signatures, refreshed when a quarter is left, as pqdns-server's serve loop does) is
//! served through 60 simulated days. At every simulated hour a validating resolver whose clock
//! is that hour gets a Secure answer, with the default algorithm policy and, once a day, with
//! require-pq; every RRSIG it is served is valid at that hour (inception ≤ now ≤ expiration,
//! RFC 4035 §5.3.1); and the SOA serial rises with each re-signing.
//! Once a simulated day (at an hour that moves through the day), ldns-verify-zone (an
//! independent classical validator) verifies the whole served zone at that time (`-t`) from
//! the ECDSA DS alone: every ECDSA signature, the NSEC3 chain. delv would be the natural peer,
//! but it has no clock option and libfaketime cannot run it (its jemalloc recurses into
//! libfaketime's clock_gettime at start-up).
//! `ServerHandle::load_zones_at` signs at the simulated time, `ServerHandle::refresh_due` is
//! the schedule.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{name, serve_toml, udp_client};
use pqdns_core::dnssec::validate::PqPolicy;
use pqdns_core::serial::Serial;
use pqdns_core::RrType;
use pqdns_resolver::{Config, Mode, Resolver};

const HOUR: u64 = 3600;
const DAYS: u64 = 60;

/// ldns-verify-zone's verdict on the zone `served` serves, at `now` (UNIX seconds, its `-t`),
/// with the ECDSAP256SHA256 (13) DS record of `ds_file` as trust anchor, from the served
/// zone written as a master file: the classical half of the dual signature (ldns passes over
/// the ML-DSA-44 RRSIGs, whose algorithm it does not know). `None` when it verifies, else its output.
fn ldns_verify_at(now: u64, served: &common::Served, ds_file: &Path, dir: &Path) -> Option<String> {
    let catalog = served.catalog();
    let mut text = Vec::new();
    let zone = &catalog.zones().next().unwrap().zone;
    zone.write_master_file(&mut text).unwrap();
    let file = dir.join("served.zone");
    std::fs::write(&file, text).unwrap();
    let ds: String = std::fs::read_to_string(ds_file)
        .unwrap()
        .lines()
        .filter(|l| l.split_whitespace().nth(5) == Some("13"))
        .map(|l| format!("{l}\n"))
        .collect();
    let anchor = dir.join("classical.ds");
    std::fs::write(&anchor, ds).unwrap();
    let at = Command::new("date")
        .args(["-u", "-d", &format!("@{now}"), "+%Y%m%d%H%M%S"])
        .output()
        .unwrap();
    let out = Command::new("ldns-verify-zone")
        .arg("-k")
        .arg(&anchor)
        .args(["-t", String::from_utf8_lossy(&at.stdout).trim()])
        .arg(&file)
        .output()
        .expect("running ldns-verify-zone: install the Debian package ldnsutils");
    (!out.status.success()).then(|| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn signatures_stay_valid_through_sixty_simulated_days() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("zone.toml");
    std::fs::write(
        &file,
        "origin = \"pqdns.test.\"\ndefault_ttl = 300\nrecords = '''\n\
         @ SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ NS ns1\nns1 A 127.0.0.1\n\
         www A 192.0.2.80\n'''\n[signing]\nalgorithms = [\"ECDSAP256SHA256\", \"ML-DSA-44\"]\n\
         keys = \"ksk-zsk\"\ndenial = \"nsec3\"\nvalidity = \"14d\"\nkey_directory = \"keys\"\n",
    )
    .unwrap();
    let served = serve_toml(dir, file, false, |_| {});
    let ds_file = served.dir.path().join("keys/pqdns.test.ds");
    let start = pqdns_core::time::now();
    // The handle schedules refreshes of the zones it loaded itself (serve_toml hands
    // Server::bind a catalog loaded beforehand).
    served.reload_at(start);
    assert!(served.refresh_due().is_some());
    let mut serials = Vec::new();
    for hour in 0..=DAYS * 24 {
        let now = start + hour * HOUR;
        if served.refresh_due().is_some_and(|due| due <= now) {
            served.reload_at(now);
        }
        let mut config = Config::new(Mode::Forward(served.addr), served.anchors.clone());
        config.now = Some(now);
        if hour % 24 == 0 {
            config.pq_policy = PqPolicy::RequirePq;
        }
        let resolver = Resolver::new(config, udp_client(Duration::from_secs(3)));
        if hour % 24 == (hour / 24 * 7) % 24 {
            if let Some(failure) = ldns_verify_at(now, &served, &ds_file, served.dir.path()) {
                panic!(
                    "day {}, hour {}: ldns-verify-zone: {failure}",
                    hour / 24,
                    hour % 24
                );
            }
        }
        for (qname, qtype) in [("www.pqdns.test.", RrType::A), ("pqdns.test.", RrType::SOA)] {
            let answer = served
                .rt
                .block_on(resolver.resolve(&name(qname), qtype))
                .unwrap();
            assert!(
                answer.status().is_secure(),
                "day {}, hour {}: {qname} {qtype}: {answer:?}",
                hour / 24,
                hour % 24
            );
            for set in answer.answers() {
                for rrsig in set.rrsig_records() {
                    let field = |at: usize| {
                        Serial(u32::from_be_bytes(
                            rrsig.rdata[at..at + 4].try_into().unwrap(),
                        ))
                    };
                    let (expiration, inception) = (field(8), field(12));
                    let t = Serial(now as u32);
                    assert!(
                        inception <= t && t <= expiration,
                        "hour {hour}: RRSIG not valid now: {rrsig}"
                    );
                }
                if qtype == RrType::SOA {
                    let soa = &set.records()[0].rdata;
                    let serial = u32::from_be_bytes(soa[soa.len() - 20..][..4].try_into().unwrap());
                    if serials.last() != Some(&serial) {
                        serials.push(serial);
                    }
                }
            }
        }
    }
    // 60 days of 14-day signatures refreshed 3.5 days before expiry: a re-signing at least
    // every 10.5 days (more often once the jitter has spread the expirations), each under a
    // new serial.
    assert!(serials.len() >= 6, "re-signings seen: {serials:?}");
    assert!(
        serials.windows(2).all(|w| Serial(w[1]) > Serial(w[0])),
        "{serials:?}"
    );
}
