//! The zone-maintenance report (`pqdns-bench lifecycle`): what it costs pqdns-server to absorb
//! a one-record change in a signed zone, incrementally (the served zone's signatures kept for
//! what did not change, `pqdns_core::dnssec::sign::resign_zone`) against re-signing the whole
//! zone, and what the change costs secondaries: IXFR bytes against AXFR bytes.
//!
//! Per algorithm and zone size, in one process and one run:
//! 1. a zone of N host A records (`genzone`, NSEC3 with RFC 9276 parameters, KSK + ZSK) is
//!    written as a zone description and loaded the way pqdns-server loads it
//!    (`pqdns_server::zones::load_all`);
//! 2. one host is appended to the zone file and the zone is reloaded against the served catalog
//!    (`reload_all` with the catalog: incremental), then reloaded without it (whole zone
//!    re-signed: the baseline), both at the same simulated time;
//! 3. each reload's wall time and process CPU time (all threads, `getrusage`) are recorded;
//!    the incremental reload is run three times and its least CPU kept (it is short, so a
//!    neighbour's burst on this shared machine would weigh on it most).
//!
//! Both reloads read and parse the zone file, build the NSEC3 chain and the served zone; they
//! differ only in what is signed. AXFR bytes are the whole signed zone's records, IXFR bytes the
//! journal difference, both as uncompressed wire records (name compression shrinks both).

use std::path::Path;
use std::time::Instant;

use pqdns_core::dnssec::Algorithm;
use pqdns_server::catalog::Catalog;
use pqdns_server::zones::{load_all, reload_all, ZoneSource};
use serde::Serialize;

use crate::genzone::delegations_zone;
use crate::proc_stat::self_cpu_time;

/// One row: one algorithm and zone size.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Algorithm name.
    pub algorithm: String,
    /// Host A records in the zone (besides SOA, NS and two glue records).
    pub records: usize,
    /// RRSIGs in the signed zone.
    pub signatures: usize,
    /// Incremental reload: wall time, seconds.
    pub incremental_seconds: f64,
    /// Incremental reload: CPU time of all threads, seconds.
    pub incremental_cpu_seconds: f64,
    /// Signatures the incremental reload made (not kept).
    pub incremental_signatures_made: usize,
    /// Whole-zone re-signing: wall time, seconds.
    pub full_seconds: f64,
    /// Whole-zone re-signing: CPU time, seconds.
    pub full_cpu_seconds: f64,
    /// full_cpu_seconds ÷ incremental_cpu_seconds.
    pub cpu_ratio: f64,
    /// The whole signed zone as uncompressed wire records (SOA twice, as AXFR sends it), bytes.
    pub axfr_bytes: usize,
    /// The journal difference (both SOAs twice, as IXFR sends it), bytes.
    pub ixfr_bytes: usize,
}

/// Wall and CPU seconds of `f`, and its result.
fn measured<T>(f: impl FnOnce() -> T) -> (f64, f64, T) {
    let (cpu, wall) = (self_cpu_time(), Instant::now());
    let out = f();
    let wall = wall.elapsed().as_secs_f64();
    (wall, (self_cpu_time() - cpu).as_secs_f64(), out)
}

fn wire_size(r: &pqdns_core::Record) -> usize {
    r.owner.wire_len() + 10 + r.rdata.len()
}

fn signatures(catalog: &Catalog) -> usize {
    catalog
        .zones()
        .flat_map(|z| {
            z.zone
                .nodes
                .values()
                .flat_map(|n| n.values())
                .chain(z.zone.nsec3.values())
        })
        .map(|s| s.rrsigs.len())
        .sum()
}

/// Runs one algorithm and size in `dir` (which it fills with the zone and keys).
///
/// # Errors
/// A message if the zone cannot be written or loaded.
pub fn run_one(dir: &Path, algorithm: Algorithm, records: usize) -> Result<Row, String> {
    let db = dir.join("zone.db");
    let text = delegations_zone("bench.", 0, records);
    std::fs::write(&db, &text).map_err(|e| e.to_string())?;
    let toml = dir.join("zone.toml");
    std::fs::write(
        &toml,
        format!(
            "origin = \"bench.\"\ndefault_ttl = 3600\nfile = \"zone.db\"\n[signing]\n\
             algorithms = [\"{}\"]\nkeys = \"ksk-zsk\"\ndenial = \"nsec3\"\nkey_directory = \"keys\"\n",
            algorithm.name()
        ),
    )
    .map_err(|e| e.to_string())?;
    let sources = [ZoneSource::File(toml)];
    let now = pqdns_core::time::now();
    let (served, _) = load_all(&sources, now).map_err(|e| e.to_string())?;

    std::fs::write(&db, format!("{text}new-host A 192.0.2.250\n")).map_err(|e| e.to_string())?;
    let later = now + 3600;
    let mut runs = Vec::new();
    for _ in 0..3 {
        let (wall, cpu, loaded) = measured(|| reload_all(&sources, later, Some(&served)));
        runs.push((cpu, wall, loaded.map_err(|e| e.to_string())?.0));
    }
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (incremental_cpu_seconds, incremental_seconds, incremental) =
        runs.into_iter().next().ok_or("no run")?;
    let (full_seconds, full_cpu_seconds, full) = measured(|| reload_all(&sources, later, None));
    let (full, _) = full.map_err(|e| e.to_string())?;

    let zone = incremental.zones().next().ok_or("no zone")?;
    let change = zone
        .journal
        .changes()
        .last()
        .ok_or("the change is not in the journal")?;
    let soa = wire_size(&change.records()[0]);
    let made = change
        .records()
        .iter()
        .skip(change.deleted() + 1)
        .filter(|r| r.rtype == pqdns_core::RrType::RRSIG)
        .count();
    Ok(Row {
        algorithm: algorithm.name().to_string(),
        records,
        signatures: signatures(&full),
        incremental_seconds,
        incremental_cpu_seconds,
        incremental_signatures_made: made,
        full_seconds,
        full_cpu_seconds,
        cpu_ratio: full_cpu_seconds / incremental_cpu_seconds.max(1e-9),
        axfr_bytes: zone.zone.records().iter().map(wire_size).sum::<usize>() + soa,
        ixfr_bytes: change.bytes() + 2 * soa,
    })
}

/// Runs every algorithm at every size, each in a fresh temporary directory.
///
/// # Errors
/// The first failure.
pub fn run(algorithms: &[Algorithm], sizes: &[usize]) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for &records in sizes {
        for &algorithm in algorithms {
            let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
            let row = run_one(dir.path(), algorithm, records)?;
            eprintln!("{row:?}");
            rows.push(row);
        }
    }
    Ok(rows)
}

/// The rows as CSV.
pub fn to_csv(rows: &[Row]) -> String {
    let mut out = String::from(
        "algorithm,records,signatures,incremental_seconds,incremental_cpu_seconds,\
         incremental_signatures_made,full_seconds,full_cpu_seconds,cpu_ratio,axfr_bytes,ixfr_bytes\n",
    );
    for r in rows {
        out.push_str(&format!(
            "{},{},{},{:.3},{:.3},{},{:.3},{:.3},{:.1},{},{}\n",
            r.algorithm,
            r.records,
            r.signatures,
            r.incremental_seconds,
            r.incremental_cpu_seconds,
            r.incremental_signatures_made,
            r.full_seconds,
            r.full_cpu_seconds,
            r.cpu_ratio,
            r.axfr_bytes,
            r.ixfr_bytes
        ));
    }
    out
}

/// Writes `OUTPUT-cpu.{svg,png}` (CPU of a whole-zone re-sign ÷ the incremental reload) and
/// `OUTPUT-bytes.{svg,png}` (AXFR ÷ IXFR bytes), one bar per algorithm and size.
///
/// # Errors
/// Drawing or file errors.
pub fn charts(output: &Path, rows: &[Row]) -> crate::charts::DrawResult {
    let items = |value: fn(&Row) -> f64| -> Vec<(String, f64)> {
        rows.iter()
            .map(|r| (format!("{} {}k", r.algorithm, r.records / 1000), value(r)))
            .collect()
    };
    let stem = |suffix: &str| crate::charts::suffixed(output, suffix);
    crate::charts::bars(
        &stem("-cpu"),
        "One-record change: CPU of whole-zone re-signing ÷ incremental",
        "×",
        &items(|r| r.cpu_ratio),
    )?;
    crate::charts::bars(
        &stem("-bytes"),
        "One-record change: AXFR bytes ÷ IXFR bytes",
        "×",
        &items(|r| r.axfr_bytes as f64 / r.ixfr_bytes.max(1) as f64),
    )
}
