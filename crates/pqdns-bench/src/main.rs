//! `pqdns-bench`: generate benchmark zones and write measurement reports.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use pqdns_bench::{fragmentation_report, genzone, resolver_report, signing_report};
use pqdns_core::dnssec::Algorithm;

/// Benchmarks and reports for pqdns.
#[derive(Parser)]
#[command(name = "pqdns-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Write a TLD-like test zone: N delegations (2 NS, glue, DS each) and M hosts.
    GenZone {
        /// Zone apex.
        #[arg(long, default_value = "tld.")]
        origin: String,
        /// Number of delegations.
        #[arg(long, default_value_t = 1500)]
        delegations: usize,
        /// Number of host A records.
        #[arg(long, default_value_t = 0)]
        hosts: usize,
        /// Output file (master-file format).
        #[arg(long, short)]
        output: PathBuf,
    },
    /// Zone-signing report: primitive rate, zone signing time on 1 and all threads, signed
    /// size, efficiency against the primitive limit; ldns-signzone ECDSA in the same run.
    Signing {
        /// Delegations in the generated zone.
        #[arg(long, default_value_t = 1500)]
        delegations: usize,
        /// Algorithms (names as in `pqdns-zone algorithms`).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "ECDSAP256SHA256,ED25519,RSASHA256,ML-DSA-44,ML-DSA-65,ML-DSA-87,Falcon-512,Falcon-padded-512,MAYO-1,SPHINCS+-SHA2-128f,SPHINCS+-SHA2-128s"
        )]
        algorithms: Vec<String>,
        /// Skip single-thread runs estimated to take longer than this, seconds.
        #[arg(long, default_value_t = 120.0)]
        max_single_thread: f64,
        /// Output prefix: writes PREFIX.csv and PREFIX.json.
        #[arg(long, default_value = "docs/bench/signing")]
        output: PathBuf,
    },
    /// Resolver report: validated resolution time and bytes per algorithm and transport, with a
    /// fresh resolver (new connection) per query and with one reused resolver, against an
    /// in-process pqdns-server on loopback.
    Resolver {
        /// Algorithms of the zones to resolve in.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "ECDSAP256SHA256,ED25519,ML-DSA-44,Falcon-512,MAYO-1,SPHINCS+-SHA2-128s"
        )]
        algorithms: Vec<String>,
        /// Resolutions per cell.
        #[arg(long, default_value_t = 50)]
        queries: usize,
        /// Output prefix: writes PREFIX.csv and PREFIX.json.
        #[arg(long, default_value = "docs/bench/resolver")]
        output: PathBuf,
    },
    /// Fragmentation report: time, packets and bytes for a complete DNSKEY or A answer by ARRF,
    /// QBF, TC=1 + TCP fallback and DoT on a reused connection, through a delay shim at each
    /// RTT, against pqdns-server child processes (built next to this binary); server CPU per
    /// query. Run inside its own network namespace (benches/fragmentation/run.sh) so the
    /// loopback packet counters are ours alone.
    Fragmentation {
        /// Algorithms of the zones.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "ML-DSA-44,ML-DSA-87,Falcon-512,SPHINCS+-SHA2-128s"
        )]
        algorithms: Vec<String>,
        /// Round-trip times to emulate, milliseconds.
        #[arg(long, value_delimiter = ',', default_value = "0,20,50")]
        rtt: Vec<u64>,
        /// Queries per cell.
        #[arg(long, default_value_t = 30)]
        queries: usize,
        /// Output prefix: writes PREFIX.csv and PREFIX.json.
        #[arg(long, default_value = "docs/bench/fragmentation")]
        output: PathBuf,
    },
}

fn write_report<T: serde::Serialize>(output: &std::path::Path, csv: &str, rows: &T) -> ExitCode {
    let written = std::fs::write(output.with_extension("csv"), csv).and_then(|()| {
        std::fs::write(
            output.with_extension("json"),
            serde_json::to_string_pretty(rows).unwrap_or_default(),
        )
    });
    if let Err(e) = written {
        eprintln!("pqdns-bench: {}: {e}", output.display());
        return ExitCode::from(2);
    }
    print!("{csv}");
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Cmd::GenZone {
            origin,
            delegations,
            hosts,
            output,
        } => {
            let text = genzone::delegations_zone(&origin, delegations, hosts);
            if let Err(e) = std::fs::write(&output, text) {
                eprintln!("pqdns-bench: {}: {e}", output.display());
                return ExitCode::from(2);
            }
        }
        Cmd::Signing {
            delegations,
            algorithms,
            max_single_thread,
            output,
        } => {
            let mut algs = Vec::new();
            for name in &algorithms {
                match Algorithm::from_name(name) {
                    Some(a) => algs.push(a),
                    None => {
                        eprintln!("pqdns-bench: unknown algorithm {name:?}");
                        return ExitCode::from(2);
                    }
                }
            }
            let rows = signing_report::run(&algs, delegations, max_single_thread);
            return write_report(&output, &signing_report::to_csv(&rows), &rows);
        }
        Cmd::Resolver {
            algorithms,
            queries,
            output,
        } => {
            let rows = resolver_report::run(&algorithms, queries);
            return write_report(&output, &resolver_report::to_csv(&rows), &rows);
        }
        Cmd::Fragmentation {
            algorithms,
            rtt,
            queries,
            output,
        } => {
            let rows = fragmentation_report::run(&algorithms, &rtt, queries);
            return write_report(&output, &fragmentation_report::to_csv(&rows), &rows);
        }
    }
    ExitCode::SUCCESS
}
