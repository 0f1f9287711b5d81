//! The zone-signing report (`pqdns-bench signing`): per algorithm, the raw signing rate of the
//! primitive, the time to sign a generated delegation zone on one thread and on all cores, the
//! signed zone's size, and how close signing gets to the primitive's limit
//! (signatures ÷ (sign ops/s × threads)). `ldns-signzone` signs the same zone with ECDSA in
//! the same run, for a side-by-side reference.

use std::process::Command;
use std::time::{Duration, Instant};

use pqdns_core::dnssec::keyfile::{KeyRole, ZoneKey};
use pqdns_core::dnssec::sign::{sign_zone, Denial, SigningPolicy};
use pqdns_core::dnssec::{Algorithm, Profile, Provider};
use pqdns_core::zonefile::{write_records, ZoneFileReader};
use pqdns_core::{time, Name, Zone};
use serde::Serialize;

use crate::genzone::delegations_zone;

/// One row of the report.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Signer: `pqdns` or `ldns-signzone`.
    pub signer: String,
    /// Algorithm name.
    pub algorithm: String,
    /// Primitive signing rate on one thread, signatures per second.
    pub sign_ops_per_s: f64,
    /// RRSIGs in the signed zone.
    pub signatures: usize,
    /// Zone signing time on one thread, seconds (`None` if skipped as too slow).
    pub seconds_1_thread: Option<f64>,
    /// Zone signing time on all threads, seconds.
    pub seconds_all_threads: f64,
    /// Threads used for the all-threads run.
    pub threads: usize,
    /// Signed zone size as a master file, bytes.
    pub signed_zone_bytes: usize,
    /// signatures ÷ (sign_ops_per_s × threads) ÷ seconds_all_threads: 1.0 = primitive limit.
    pub efficiency_all_threads: f64,
}

/// Signs `message` repeatedly for about `budget`; returns signatures per second.
fn primitive_rate(key: &ZoneKey, budget: Duration) -> f64 {
    let message = [0x5au8; 200];
    let start = Instant::now();
    let mut n = 0u32;
    while n < 3 || start.elapsed() < budget {
        key.key.sign(&message).expect("signing works");
        n += 1;
    }
    f64::from(n) / start.elapsed().as_secs_f64()
}

fn sign_once(zone: &Zone, key: &ZoneKey, threads: usize) -> (f64, Zone, usize) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool");
    let mut z = zone.clone();
    let now = time::now();
    let policy = SigningPolicy {
        inception: now - 3600,
        expiration: now + 14 * 86_400,
        denial: Denial::Nsec,
        published_dnskeys: None,
    };
    let start = Instant::now();
    let stats = pool
        .install(|| sign_zone(&mut z, std::slice::from_ref(key), &policy, &|_, _| {}))
        .expect("signing works");
    (start.elapsed().as_secs_f64(), z, stats.signatures)
}

/// Runs the report for `algorithms` on a zone of `delegations` delegations. Single-thread runs
/// whose estimated time exceeds `max_single_thread` seconds are skipped.
pub fn run(algorithms: &[Algorithm], delegations: usize, max_single_thread: f64) -> Vec<Row> {
    let origin: Name = "tld.".parse().expect("valid");
    let text = delegations_zone("tld.", delegations, 0);
    let records = ZoneFileReader::new(None, None)
        .read_str(&text, "generated")
        .expect("generated zone parses");
    let zone = Zone::from_records(origin.clone(), records).expect("generated zone is valid");
    let profile = {
        let numbers = [("SPHINCS+-SHA2-128f".to_string(), 250u8)]
            .into_iter()
            .collect();
        Profile::custom("bench", "default", &numbers).expect("valid profile")
    };
    let provider = Provider::default_provider();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut rows = Vec::new();
    for &alg in algorithms {
        let key = ZoneKey::generate(&origin, alg, KeyRole::Csk, &profile, &provider, 3600)
            .expect("key generation works");
        let rate = primitive_rate(&key, Duration::from_secs(2));
        let (all, signed, signatures) = sign_once(&zone, &key, threads);
        let estimate = signatures as f64 / rate;
        let one = (estimate <= max_single_thread).then(|| sign_once(&zone, &key, 1).0);
        let mut out = String::new();
        write_records(&mut out, &signed.records()).expect("string write");
        let row = Row {
            signer: "pqdns".into(),
            algorithm: alg.name().into(),
            sign_ops_per_s: rate,
            signatures,
            seconds_1_thread: one,
            seconds_all_threads: all,
            threads,
            signed_zone_bytes: out.len(),
            efficiency_all_threads: signatures as f64 / (rate * threads as f64) / all,
        };
        eprintln!("{row:?}");
        rows.push(row);
    }
    if let Some(row) = ldns_signzone(&text, delegations) {
        rows.push(row);
    }
    rows
}

/// Signs the same zone with `ldns-signzone` (ECDSAP256SHA256, NSEC) and times it.
fn ldns_signzone(text: &str, _delegations: usize) -> Option<Row> {
    let dir = std::env::temp_dir().join(format!("pqdns-bench-ldns-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    std::fs::write(dir.join("tld.zone"), text).ok()?;
    let keygen = Command::new("ldns-keygen")
        .args(["-a", "ECDSAP256SHA256", "-k", "tld."])
        .current_dir(&dir)
        .output()
        .ok()?;
    let stem = String::from_utf8_lossy(&keygen.stdout).trim().to_string();
    let start = Instant::now();
    let status = Command::new("ldns-signzone")
        .args(["-f", "tld.signed", "tld.zone", &stem])
        .current_dir(&dir)
        .status()
        .ok()?;
    let seconds = start.elapsed().as_secs_f64();
    let signed = std::fs::read_to_string(dir.join("tld.signed")).ok()?;
    let _ = std::fs::remove_dir_all(&dir);
    status.success().then(|| Row {
        signer: "ldns-signzone".into(),
        algorithm: "ECDSAP256SHA256".into(),
        sign_ops_per_s: f64::NAN,
        signatures: signed.lines().filter(|l| l.contains("\tRRSIG\t")).count(),
        seconds_1_thread: Some(seconds),
        seconds_all_threads: seconds,
        threads: 1,
        signed_zone_bytes: signed.len(),
        efficiency_all_threads: f64::NAN,
    })
}

/// The rows as CSV.
pub fn to_csv(rows: &[Row]) -> String {
    let mut out = String::from("signer,algorithm,sign_ops_per_s,signatures,seconds_1_thread,seconds_all_threads,threads,signed_zone_bytes,efficiency_all_threads\n");
    for r in rows {
        out.push_str(&format!(
            "{},{},{:.1},{},{},{:.3},{},{},{:.3}\n",
            r.signer,
            r.algorithm,
            r.sign_ops_per_s,
            r.signatures,
            r.seconds_1_thread
                .map_or(String::new(), |s| format!("{s:.3}")),
            r.seconds_all_threads,
            r.threads,
            r.signed_zone_bytes,
            r.efficiency_all_threads
        ));
    }
    out
}
