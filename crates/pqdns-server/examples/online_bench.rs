//! Issue 30 must-shows 1 and 2, measured on the answer engine (`pqdns_server::answer::respond`,
//! the server's pipeline without sockets), as `benches/online/run.sh` runs it:
//!
//! ```sh
//! cargo run --release -p pqdns-server --example online_bench -- sizes > sizes.csv
//! cargo run --release -p pqdns-server --example online_bench -- speed 2 3 > speed.csv
//! ```
//!
//! `sizes`: the bytes of NXDOMAIN and NODATA answers (DO, over a stream, so never cut) of one
//! zone (100 hosts, a wildcard-free namespace) signed with ECDSA P-256, ML-DSA-44, Falcon-512
//! and SLH-DSA-MTL (SHA2-128s), pre-signed with NSEC3 (RFC 9276 parameters) and, but for MTL
//! (an MTL signature needs its ladder), online with compact denial (RFC 9824); 200 names
//! that do not exist and 100 NODATA questions each. One CSV row per (algorithm, denial, kind):
//! smallest, median and largest answer and the share of answers that fit 1232 bytes.
//!
//! `speed THREADS SECONDS [ALGORITHM]`: per algorithm (ECDSA P-256, ML-DSA-44, Falcon-512, or
//! only ALGORITHM, e.g. for a profile of one algorithm's arms), THREADS
//! threads for SECONDS each of (a) the raw primitive (`SigningKey::sign` of a 100-byte
//! message, the zone's own key) and (b) cold online answers (every query a new name: one NSEC
//! signed per answer, the SOA's signature cached), as operations per CPU second of the
//! threads (CLOCK_THREAD_CPUTIME_ID, so other load on the machine does not count), and (c)
//! pqdns-core's zone signer on 1000 RRsets (RRSIGs per CPU second of the process); then, on
//! one thread, the CPU per answer of `www A` with DO from the online zone (a signature cache
//! hit) and from the pre-signed zone, prepared answers off in both (else both would be the
//! same replay). Arms alternate over three rounds.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::time::{clock_gettime, ClockId};
use pqdns_core::dnssec::keyfile::{KeyRole, ZoneKey};
use pqdns_core::dnssec::sign::{sign_zone, Denial, SigningPolicy};
use pqdns_core::dnssec::{Algorithm, Profile, Provider};
use pqdns_server::answer::{respond, Transport};
use pqdns_server::catalog::Catalog;
use pqdns_server::zones::{load_all, ZoneSource};

const ORIGIN: &str = "bench.test.";
const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// A query with EDNS (payload 1232) and DO.
fn query(id: u16, qname: &str, qtype: u16) -> Vec<u8> {
    let name: pqdns_core::Name = qname.parse().expect("name");
    let mut p = id.to_be_bytes().to_vec();
    p.extend([0x00, 0x00, 0, 1, 0, 0, 0, 0, 0, 1]);
    p.extend_from_slice(name.as_wire());
    p.extend(qtype.to_be_bytes());
    p.extend(1u16.to_be_bytes());
    p.extend([0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0, 0, 0]);
    p
}

/// The zone signed with `algorithm`, pre-signed (NSEC3) or online, in `dir`, without
/// prepared answers.
fn zone(dir: &Path, algorithm: &str, online: bool) -> Catalog {
    let mut records = String::from("@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ NS ns1\n");
    records.push_str("ns1 A 192.0.2.1\nwww A 192.0.2.80\n");
    for i in 0..100 {
        records.push_str(&format!("h{i} A 192.0.2.{i}\n"));
    }
    let (mode, profile) = match (online, algorithm.contains("MTL")) {
        (true, _) => ("mode = \"online\"\n", ""),
        (false, true) => ("denial = \"nsec3\"\n", "profile = \"verisign-2025\"\n"),
        (false, false) => ("denial = \"nsec3\"\n", ""),
    };
    let sub = dir.join(format!("{algorithm}-{online}"));
    std::fs::create_dir_all(&sub).expect("work directory");
    let toml = sub.join("zone.toml");
    std::fs::write(
        &toml,
        format!(
            "origin = \"{ORIGIN}\"\ndefault_ttl = 3600\nrecords = '''\n{records}'''\n[signing]\n\
             algorithms = [\"{algorithm}\"]\nkeys = \"csk\"\n{mode}{profile}persist = false\n\
             key_directory = \"keys\"\n"
        ),
    )
    .expect("zone description");
    let now = pqdns_core::time::now();
    // Prepared answers off: every answer is built (a replay would hide the difference).
    load_all(&[ZoneSource::File(toml)], now)
        .expect("zone")
        .0
        .with_answer_cache(0)
}

thread_local! {
    /// A cold-rate thread's query (QNAME `r<round>t<thread>n<12 digits>.`) and answer buffer.
    static COLD: std::cell::RefCell<(Vec<u8>, Vec<u8>)> =
        std::cell::RefCell::new((Vec::new(), Vec::with_capacity(4096)));
}

/// Writes `i` (mod 10^12) as the 12 digits that end the first label of `query`'s QNAME, and
/// its low 16 bits as the ID.
fn set_counter(query: &mut [u8], i: u64) {
    query[..2].copy_from_slice(&(i as u16).to_be_bytes());
    // Header 12 bytes, then the first label: its length, then the text.
    let end = 12 + 1 + usize::from(query[12]);
    let mut n = i;
    for digit in query[end - 12..end].iter_mut().rev() {
        *digit = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// The length of the answer to `packet` over a stream (never cut).
fn answer_len(catalog: &Catalog, packet: &[u8], out: &mut Vec<u8>) -> usize {
    respond(catalog, packet, Transport::Tcp, CLIENT, 1232, out, 0).len
}

fn sizes(dir: &Path) {
    println!("algorithm,denial,kind,answers,min_bytes,median_bytes,max_bytes,share_fit_1232");
    for algorithm in [
        "ECDSAP256SHA256",
        "ML-DSA-44",
        "Falcon-512",
        "SLH-DSA-MTL-SHA2-128s",
    ] {
        for online in [false, true] {
            let denial = if online {
                "online-compact"
            } else {
                "nsec3-presigned"
            };
            if online && algorithm.contains("MTL") {
                println!("{algorithm},{denial},nxdomain,0,,,,");
                println!("{algorithm},{denial},nodata,0,,,,");
                continue;
            }
            let catalog = zone(dir, algorithm, online);
            let mut out = Vec::new();
            let kinds: [(&str, Vec<Vec<u8>>); 2] = [
                (
                    "nxdomain",
                    (0..200)
                        .map(|i| query(i, &format!("nx{i}.{ORIGIN}"), 1))
                        .collect(),
                ),
                (
                    "nodata",
                    (0..100)
                        .map(|i| query(i, &format!("h{i}.{ORIGIN}"), 16))
                        .collect(),
                ),
            ];
            for (kind, queries) in kinds {
                let mut lens: Vec<usize> = queries
                    .iter()
                    .map(|q| answer_len(&catalog, q, &mut out))
                    .collect();
                lens.sort_unstable();
                let fit = lens.iter().filter(|&&l| l <= 1232).count() as f64 / lens.len() as f64;
                println!(
                    "{algorithm},{denial},{kind},{},{},{},{},{fit:.3}",
                    lens.len(),
                    lens[0],
                    lens[lens.len() / 2],
                    lens[lens.len() - 1]
                );
            }
        }
    }
}

/// This thread's CPU time.
fn cpu() -> Duration {
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(Duration::from)
        .expect("thread CPU clock")
}

/// pqdns-core's zone signer (`sign_zone`, rayon on every core) on 1000 A RRsets with NSEC
/// and `key`: RRSIGs per CPU second of the process while it runs.
fn zone_sign_rate(key: &ZoneKey) -> f64 {
    let origin: pqdns_core::Name = ORIGIN.parse().expect("origin");
    let mut text = String::from("@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ NS ns1\n");
    for i in 0..1000 {
        text.push_str(&format!("z{i} A 192.0.2.{}\n", i % 256));
    }
    let records = pqdns_core::zonefile::ZoneFileReader::new(Some(origin.clone()), Some(3600))
        .read_str(&text, "bench")
        .expect("zone text");
    let mut zone = pqdns_core::Zone::from_records(origin, records).expect("zone");
    let now = pqdns_core::time::now();
    let policy = SigningPolicy {
        inception: now - 3600,
        expiration: now + 14 * 86_400,
        denial: Denial::Nsec,
        published_dnskeys: None,
    };
    let process = || {
        clock_gettime(ClockId::CLOCK_PROCESS_CPUTIME_ID)
            .map(Duration::from)
            .expect("process CPU clock")
    };
    let cpu0 = process();
    let stats =
        sign_zone(&mut zone, std::slice::from_ref(key), &policy, &|_, _| {}).expect("signing");
    stats.signatures as f64 / (process() - cpu0).as_secs_f64()
}

/// Runs `op(thread, i)` on `threads` threads for `seconds` each: operations per CPU second.
fn rate(threads: usize, seconds: f64, op: &(dyn Fn(usize, u64) + Sync)) -> f64 {
    let results: Vec<(u64, Duration)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let (start, cpu0) = (Instant::now(), cpu());
                    let mut n = 0u64;
                    while start.elapsed().as_secs_f64() < seconds {
                        op(t, n);
                        n += 1;
                    }
                    (n, cpu() - cpu0)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    let ops: u64 = results.iter().map(|r| r.0).sum();
    let secs: f64 = results.iter().map(|r| r.1.as_secs_f64()).sum();
    ops as f64 / secs
}

/// CPU per answer to `packet`, nanoseconds, over `n` answers on this thread.
fn cpu_per_answer(catalog: &Catalog, packet: &[u8], n: u32) -> f64 {
    let mut out = Vec::with_capacity(4096);
    let mut p = packet.to_vec();
    let cpu0 = cpu();
    for i in 0..n {
        p[..2].copy_from_slice(&(i as u16).to_be_bytes());
        assert!(answer_len(catalog, &p, &mut out) > 0);
    }
    (cpu() - cpu0).as_nanos() as f64 / f64::from(n)
}

fn speed(dir: &Path, threads: usize, seconds: f64, only: Option<&str>) {
    println!("algorithm,round,metric,value,unit");
    let algorithms = [
        ("ECDSAP256SHA256", Algorithm::EcdsaP256Sha256),
        ("ML-DSA-44", Algorithm::MlDsa44),
        ("Falcon-512", Algorithm::Falcon512),
    ];
    for (algorithm, alg) in algorithms
        .into_iter()
        .filter(|(name, _)| only.is_none_or(|o| o == *name))
    {
        let origin: pqdns_core::Name = ORIGIN.parse().expect("origin");
        let key = ZoneKey::generate(
            &origin,
            alg,
            KeyRole::Csk,
            &Profile::default_profile(),
            &Provider::default_provider(),
            3600,
        )
        .expect("key");
        let message = [0x5a_u8; 100];
        let presigned = zone(dir, algorithm, false);
        for round in 0..3 {
            let raw = rate(threads, seconds, &|_, _| {
                key.key.sign(&message).expect("signature");
            });
            // A fresh online zone per round: every name new, the cache cold but for the SOA.
            // Each thread writes its next name into its own query (no allocation, no parse:
            // the rate is the server's, as the raw rate is the primitive's).
            let online = Arc::new(zone(dir, algorithm, true));
            let cold = rate(threads, seconds, &|t, i| {
                COLD.with_borrow_mut(|(q, out)| {
                    if q.is_empty() {
                        *q = query(0, &format!("r{round}t{t}n{:012}.{ORIGIN}", 0), 1);
                    }
                    set_counter(q, i);
                    assert!(answer_len(&online, q, out) > 0);
                });
            });
            let zone_sign = zone_sign_rate(&key);
            let www = query(1, &format!("www.{ORIGIN}"), 1);
            cpu_per_answer(&online, &www, 1000);
            let hit = cpu_per_answer(&online, &www, 20_000);
            let pre = cpu_per_answer(&presigned, &www, 20_000);
            for (metric, value, unit) in [
                ("raw_sign_rate", raw, "signatures per CPU second"),
                ("online_cold_rate", cold, "answers per CPU second"),
                ("zone_sign_rate", zone_sign, "signatures per CPU second"),
                ("cold_vs_raw", cold / raw, "ratio"),
                ("cold_vs_zone_sign", cold / zone_sign, "ratio"),
                ("online_hit_cpu", hit, "ns per answer"),
                ("presigned_cpu", pre, "ns per answer"),
                ("hit_vs_presigned", hit / pre, "ratio"),
            ] {
                println!("{algorithm},{round},{metric},{value:.3},{unit}");
            }
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap_or_else(|| "sizes".into());
    let dir = tempfile::tempdir().expect("temporary directory");
    match what.as_str() {
        "sizes" => sizes(dir.path()),
        "speed" => {
            let threads = args.next().map_or(2, |s| s.parse().expect("threads"));
            let seconds = args.next().map_or(3.0, |s| s.parse().expect("seconds"));
            let only = args.next();
            speed(dir.path(), threads, seconds, only.as_deref());
        }
        other => panic!("unknown mode {other}: sizes or speed THREADS SECONDS [ALGORITHM]"),
    }
}
