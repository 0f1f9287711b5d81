//! The recursor report (`pqdns-bench recursor`, `docs/bench/recursor.md`, issue 12): the
//! resolver service beside unbound on one machine and one hierarchy, run as root (the
//! authorities listen on port 53 of 127.0.4.x, the only port unbound sends queries to).
//!
//! - **Cache hits**: pqdns-resolver (the binary next to this one) and unbound iterate from the
//!   same root hints with the same trust anchor; after a warm-up, the load generator asks 100
//!   names of an ECDSA-signed zone with DO and RD over UDP and over DoT (one persistent
//!   connection per worker), alternating between the two resolvers for `rounds` rounds, and
//!   reads each resolver's CPU time from /proc: server CPU microseconds per answered query.
//!   Both run with one thread (unbound's `num-threads: 1`, pqdns-resolver's `--threads 1`).
//!   A third cell asks 100 names that do not exist, each in an NSEC span of its own, over
//!   UDP: cached NXDOMAIN answers. A fourth asks, after one validated NXDOMAIN, distinct
//!   names of the same NSEC span once each over UDP: NXDOMAIN synthesised from the cached
//!   NSEC records (RFC 8198), the same kind of response as the third's.
//! - **Cold resolution**: a fresh validating resolver (the library the service runs) resolves
//!   `www` of a leaf signed with each algorithm from the root, iteratively over UDP, with ARRF
//!   fragments offered and without (TC=1, then TCP): wall time and DNS bytes from the
//!   authorities per resolution.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use pqdns_core::frag::edns::Fragmentation;
use pqdns_core::{Name, RrType};
use pqdns_resolver::fragment::FragConfig;
use pqdns_resolver::{Client, Config, Mode, Resolver, TlsOptions, Transport, TrustAnchors};
use pqdns_test_support::hierarchy::{serve_zones, write_hierarchy, write_root_hints, Leaf, Tiers};
use pqdns_test_support::peers::{dig, listening, spawn, start_unbound, KillOnDrop, UnboundTls};
use serde::Serialize;

use crate::load::{self, ConnectionMode, Limit, LoadConfig, LoadTransport};
use crate::query_source::{parse_query, QueryOptions};
use crate::resolver_report::{bytes_received, percentile};
use crate::server_process::sibling_binary;
use crate::tls_client::TlsClientOptions;

const TIERS: Tiers = Tiers {
    root: "127.0.4.2",
    tld: "127.0.4.3",
};
const LEAF_IP: &str = "127.0.4.4";
const PQDNS_IP: &str = "127.0.4.9";
const UNBOUND_IP: &str = "127.0.4.10";
/// Plain DNS and DoT ports of both resolvers (each on its own address).
const DNS_PORT: u16 = 5300;
const DOT_PORT: u16 = 8530;
/// Names asked in the cache-hit runs.
const HOSTS: usize = 100;

/// The leaves: label and algorithm.
pub const LEAVES: [(&str, &str); 4] = [
    ("ecdsa", "ECDSAP256SHA256"),
    ("mldsa", "ML-DSA-44"),
    ("falcon", "Falcon-512"),
    ("sphincs", "SPHINCS+-SHA2-128s"),
];

/// Settings of a run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Seconds of each measured load run.
    pub seconds: f64,
    /// Rounds of (pqdns-resolver, unbound) × (UDP, DoT).
    pub rounds: usize,
    /// Load generator workers: each level is measured.
    pub concurrency: Vec<usize>,
    /// Cold resolutions per algorithm and fragmentation setting.
    pub cold: usize,
}

/// One load run against one resolver.
#[derive(Clone, Debug, Serialize)]
pub struct CacheRow {
    /// `pqdns-resolver` or `unbound`.
    pub resolver: String,
    /// `udp` or `dot`.
    pub transport: String,
    /// Load generator workers (closed loop: one query outstanding each).
    pub concurrency: usize,
    /// Round number.
    pub round: usize,
    /// Answered queries per second.
    pub qps: f64,
    /// Median latency, milliseconds.
    pub p50_ms: f64,
    /// The resolver's CPU time per answered query, microseconds.
    pub server_cpu_us_per_query: f64,
    /// Answers with RCODE other than NOERROR, and failed exchanges.
    pub failures: u64,
}

/// Cold resolutions of one leaf.
#[derive(Clone, Debug, Serialize)]
pub struct ColdRow {
    /// The leaf's signing algorithm.
    pub algorithm: String,
    /// `arrf` or `off` (TC=1 → TCP).
    pub fragmentation: String,
    /// Resolutions measured.
    pub queries: usize,
    /// Median wall time, milliseconds.
    pub median_ms: f64,
    /// 90th percentile, milliseconds.
    pub p90_ms: f64,
    /// Mean DNS message bytes received from the authorities per resolution.
    pub bytes_from_authorities: f64,
    /// Mean exchanges per resolution.
    pub exchanges: f64,
}

/// Everything measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The machine.
    pub machine: String,
    /// /proc/loadavg before the run (1, 5 and 15 minutes).
    pub load_average: String,
    /// Cache-hit load runs.
    pub cache: Vec<CacheRow>,
    /// Cold resolutions.
    pub cold: Vec<ColdRow>,
}

/// Why the report could not be made.
pub type Error = String;

/// Runs the report; see the module documentation.
///
/// # Errors
/// A missing binary, or a resolver that does not answer as expected.
pub fn run(plan: &Plan) -> Result<Report, Error> {
    let load_average = std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|e| format!("unknown ({e})"));
    let binary = sibling_binary("pqdns-resolver").ok_or(
        "pqdns-resolver is not built next to pqdns-bench: cargo build --release -p pqdns-resolver",
    )?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let d = dir.path();
    let hosts: String = (0..HOSTS)
        .map(|i| format!("h{i} A 192.0.2.{}\n", i % 250))
        .collect();
    // The hierarchy's leaves hold static text; this process makes one report and exits.
    let hosts: &'static str = Box::leak(hosts.into_boxed_str());
    let leaves: Vec<Leaf> = LEAVES
        .iter()
        .map(|&(name, alg)| Leaf {
            name,
            algorithms: Box::leak(vec![alg].into_boxed_slice()),
            denial: "nsec",
            ip: LEAF_IP,
            extra: if name == "ecdsa" { hosts } else { "" },
        })
        .collect();
    let files = write_hierarchy(d, TIERS, &leaves, "ECDSAP256SHA256", "ECDSAP256SHA256", "");
    let servers = crate::resolver_report::runtime();
    let now = pqdns_core::time::now();
    let at = |ip: &str| SocketAddr::new(ip.parse().expect("an address"), 53);
    let handles = [
        (vec![files.root.clone()], at(TIERS.root)),
        (vec![files.tld.clone()], at(TIERS.tld)),
        (files.leaves.clone(), at(LEAF_IP)),
    ]
    .map(|(zones, addr)| serve_zones(&servers, &d.join("cert"), zones, addr, false, now));
    let hints = write_root_hints(d, TIERS.root);
    let anchor = d.join("root.ds");
    std::fs::write(&anchor, format!("{}\n", files.root_ds)).map_err(|e| e.to_string())?;
    let mut anchors = TrustAnchors::default();
    anchors.add_ds(files.root_ds.owner.clone(), files.root_ds.rdata.clone());

    let cold = cold_rows(&anchors, plan.cold)?;
    let cache = cache_rows(&binary, d, &hints, &anchor, plan)?;
    for h in handles {
        servers.block_on(h.shutdown());
    }
    Ok(Report {
        machine: crate::matrix_report::machine(),
        load_average,
        cache,
        cold,
    })
}

fn cache_rows(
    binary: &Path,
    d: &Path,
    hints: &Path,
    anchor: &Path,
    plan: &Plan,
) -> Result<Vec<CacheRow>, Error> {
    let plain = SocketAddr::new(PQDNS_IP.parse().expect("an address"), DNS_PORT);
    let dot = SocketAddr::new(plain.ip(), DOT_PORT);
    let (plain_s, dot_s) = (plain.to_string(), dot.to_string());
    let tls_dir = d.join("tls");
    let log = d.join("pqdns-resolver.log");
    let args = [
        "--udp",
        &plain_s,
        "--tcp",
        &plain_s,
        "--dot",
        &dot_s,
        "--doh",
        "127.0.4.9:0",
        "--tls-dir",
        tls_dir.to_str().ok_or("path")?,
        "--root-hints",
        hints.to_str().ok_or("path")?,
        "--authority-port",
        "53",
        "--trust-anchor",
        anchor.to_str().ok_or("path")?,
        "--log-level",
        "warn",
        // Load from one address without cookies (unbound limits neither by default): no RRL,
        // no amplification limit.
        "--rrl-rate",
        "0",
        "--amplification-limit",
        "0",
        // unbound serves DoT with the same self-signed certificate: it must cover its address.
        "--tls-name",
        UNBOUND_IP,
        // The same thread count as unbound's `num-threads: 1`.
        "--threads",
        "1",
    ];
    let (child, rx) = spawn(binary, &args, d, &log);
    let pqdns = KillOnDrop(child);
    listening(&rx, "dot", Duration::from_secs(60), &log);
    let cert = tls_dir.join("pqdns-server.crt");
    let key = tls_dir.join("pqdns-server.key");
    let unbound_dir = d.join("unbound");
    std::fs::create_dir_all(&unbound_dir).map_err(|e| e.to_string())?;
    let unbound_plain = SocketAddr::new(UNBOUND_IP.parse().expect("an address"), DNS_PORT);
    let tls = UnboundTls {
        port: DOT_PORT,
        cert: &cert,
        key: &key,
    };
    let unbound = KillOnDrop(start_unbound(
        &unbound_dir,
        unbound_plain,
        Some(tls),
        hints,
        anchor,
        "tld.",
    ));
    let resolvers = [
        ("pqdns-resolver", plain, pqdns.0.id()),
        ("unbound", unbound_plain, unbound.0.id()),
    ];
    // Both validate the zone asked: AD on the first name.
    for (name, addr, _) in resolvers {
        let out = dig(addr, &["+recurse", "+dnssec", "h0.ecdsa.tld.", "A"]);
        if out.status() != "NOERROR" || !out.has_flag("ad") {
            return Err(format!(
                "{name} does not validate h0.ecdsa.tld.:\n{}",
                out.text
            ));
        }
    }
    let queries = (0..HOSTS)
        .map(|i| parse_query(&format!("h{i}.ecdsa.tld."), Some("A")))
        .collect::<Result<Vec<_>, _>>()?;
    // Names that do not exist, each in a span of its own (`h{i}-` sorts right after `h{i}`,
    // before any other name: RFC 4034 §6.1), so each is resolved in the warm-up and kept under
    // its QNAME, never synthesised from another's NSEC record.
    let nx_cached = (0..HOSTS)
        .map(|i| parse_query(&format!("h{i}-.ecdsa.tld."), Some("A")))
        .collect::<Result<Vec<_>, _>>()?;
    let client = crate::resolver_report::runtime();
    let mut rows = Vec::new();
    let mut nx_seed = 0x9e37_79b9_7f4a_7c15_u64;
    for round in 0..=plan.rounds {
        for (&concurrency, (name, addr, pid)) in plan
            .concurrency
            .iter()
            .flat_map(|c| resolvers.iter().map(move |r| (c, *r)))
        {
            let dot = SocketAddr::new(addr.ip(), DOT_PORT);
            let cells = [
                (CACHE_UDP, LoadTransport::Udp, addr),
                (CACHE_DOT, LoadTransport::Dot, dot),
                (NXDOMAIN_HIT_UDP, LoadTransport::Udp, addr),
                (NXDOMAIN_UDP, LoadTransport::Udp, addr),
            ];
            for (cell, transport, target) in cells {
                let nxdomain = cell == NXDOMAIN_UDP;
                if nxdomain && round == 0 {
                    continue;
                }
                // Round 0 is the warm-up: every name into the cache, connections up.
                let limit = if round == 0 {
                    Limit::Count(2 * HOSTS as u64)
                } else if nxdomain {
                    Limit::Count(nx_names(plan.seconds) as u64)
                } else {
                    Limit::Duration(Duration::from_secs_f64(plan.seconds))
                };
                let queries = if nxdomain {
                    nx_seed = nx_seed.wrapping_add(0x6a09_e667_f3bc_c909);
                    warm_nxdomain(name, addr, nx_seed)?;
                    nx_queries(nx_seed, nx_names(plan.seconds))?
                } else if cell == NXDOMAIN_HIT_UDP {
                    nx_cached.clone()
                } else {
                    queries.clone()
                };
                let cfg = LoadConfig {
                    target,
                    transport,
                    mode: ConnectionMode::Reuse,
                    concurrency,
                    rate: None,
                    limit,
                    queries,
                    edns: QueryOptions {
                        udp_payload: Some(1232),
                        dnssec_ok: true,
                        recursion_desired: true,
                    },
                    tls: TlsClientOptions {
                        ca_file: Some(cert.clone()),
                        ..TlsClientOptions::default()
                    },
                    doh_path: "/dns-query".into(),
                    doq_datagram_size: pqdns_net::DOQ_MIN_DATAGRAM,
                    timeout: Duration::from_secs(5),
                    server_pid: Some(pid),
                    progress: false,
                };
                let r = client.block_on(load::run(cfg)).map_err(|e| e.to_string())?;
                if round == 0 {
                    continue;
                }
                // The expected RCODE: NOERROR for the cached names, NXDOMAIN for the others.
                let rcode = if nxdomain || cell == NXDOMAIN_HIT_UDP {
                    3
                } else {
                    0
                };
                let expected = r.rcodes.get(&rcode).copied().unwrap_or(0);
                rows.push(CacheRow {
                    resolver: name.into(),
                    transport: cell.into(),
                    concurrency,
                    round,
                    qps: r.qps,
                    p50_ms: r.latency.p50_ms,
                    server_cpu_us_per_query: r.server_cpu_us_per_query.unwrap_or(f64::NAN),
                    failures: r.answered - expected + r.errors + r.timeouts,
                });
            }
        }
    }
    Ok(rows)
}

/// Cell names: cache hits over UDP and DoT, cached NXDOMAIN answers over UDP, and NXDOMAIN
/// synthesised from cached NSEC records (RFC 8198) over UDP.
const CACHE_UDP: &str = "udp";
const CACHE_DOT: &str = "dot";
const NXDOMAIN_HIT_UDP: &str = "udp-nxdomain-hit";
const NXDOMAIN_UDP: &str = "udp-nxdomain";
/// Queries per second assumed to size the synthesised-NXDOMAIN runs: each run asks
/// `seconds × NX_RATE` distinct names once each (about as long as a cache-hit run).
const NX_RATE: f64 = 50_000.0;

/// Names asked in one synthesised-NXDOMAIN run of about `seconds`.
fn nx_names(seconds: f64) -> usize {
    (seconds * NX_RATE).clamp(1.0, 10_000_000.0) as usize
}

/// `count` distinct names of `ecdsa.tld.` that do not exist, all in the span of the NSEC
/// record `h99` → `ns` (pseudo-random labels `j…` from `seed`, xorshift64*); type A.
fn nx_queries(seed: u64, count: usize) -> Result<Vec<crate::query_source::QuerySpec>, Error> {
    let mut x = seed | 1;
    (0..count)
        .map(|i| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let label = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
            parse_query(&format!("j{label:x}{i:x}.ecdsa.tld."), Some("A"))
        })
        .collect()
}

/// One validated NXDOMAIN in the span [`nx_queries`] asks from (resolved, or synthesised if
/// the span is still cached): the resolver then holds the NSEC records that prove the others.
fn warm_nxdomain(name: &str, addr: SocketAddr, seed: u64) -> Result<(), Error> {
    let qname = format!("j{seed:x}.ecdsa.tld.");
    let out = dig(addr, &["+recurse", "+dnssec", &qname, "A"]);
    if out.status() != "NXDOMAIN" || !out.has_flag("ad") {
        return Err(format!(
            "{name}: no validated NXDOMAIN for {qname}:\n{}",
            out.text
        ));
    }
    Ok(())
}

fn cold_rows(anchors: &TrustAnchors, queries: usize) -> Result<Vec<ColdRow>, Error> {
    let rt = crate::resolver_report::runtime();
    let mut rows = Vec::new();
    for (label, alg) in LEAVES {
        for mode in [Fragmentation::Arrf, Fragmentation::Off] {
            let name: Name = format!("www.{label}.tld.")
                .parse()
                .map_err(|e| format!("{e}"))?;
            let mut times = Vec::with_capacity(queries);
            let (mut bytes, mut exchanges) = (0usize, 0usize);
            for _ in 0..queries {
                let mut client = Client::new(
                    Transport::Udp,
                    Duration::from_secs(5),
                    TlsOptions::default(),
                )
                .map_err(|e| e.to_string())?;
                client.set_fragmentation(FragConfig::new(mode));
                let roots = vec![SocketAddr::new(TIERS.root.parse().expect("an address"), 53)];
                let config = Config::new(Mode::Iterative { roots, port: 53 }, anchors.clone());
                let resolver = Resolver::new(config, client);
                let start = Instant::now();
                let answer = rt
                    .block_on(resolver.resolve(&name, RrType::A))
                    .map_err(|e| format!("{name}: {e}"))?;
                times.push(start.elapsed().as_secs_f64() * 1000.0);
                if !answer.status().is_secure() {
                    return Err(format!("{name}: {:?}", answer.status()));
                }
                bytes += bytes_received(&answer);
                exchanges += answer.exchanges().len();
            }
            times.sort_by(f64::total_cmp);
            let n = queries.max(1) as f64;
            rows.push(ColdRow {
                algorithm: alg.into(),
                fragmentation: format!("{mode:?}").to_lowercase(),
                queries,
                median_ms: percentile(&times, 0.5),
                p90_ms: percentile(&times, 0.9),
                bytes_from_authorities: bytes as f64 / n,
                exchanges: exchanges as f64 / n,
            });
        }
    }
    Ok(rows)
}

/// The median of `values` (NaN if empty).
fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    percentile(&v, 0.5)
}

/// Median CPU µs per query of `resolver` over `transport` with `concurrency` workers.
pub fn cache_cpu(rows: &[CacheRow], resolver: &str, transport: &str, concurrency: usize) -> f64 {
    median(
        rows.iter()
            .filter(|r| {
                r.resolver == resolver && r.transport == transport && r.concurrency == concurrency
            })
            .map(|r| r.server_cpu_us_per_query),
    )
}

/// Both tables as CSV (cache rows, a blank line, cold rows).
pub fn to_csv(report: &Report) -> String {
    let mut out =
        String::from("resolver,transport,round,qps,p50_ms,server_cpu_us_per_query,failures\n");
    for r in &report.cache {
        out.push_str(&format!(
            "{},{},{},{:.0},{:.3},{:.2},{}\n",
            r.resolver,
            r.transport,
            r.round,
            r.qps,
            r.p50_ms,
            r.server_cpu_us_per_query,
            r.failures
        ));
    }
    out.push_str(
        "\nalgorithm,fragmentation,queries,median_ms,p90_ms,bytes_from_authorities,exchanges\n",
    );
    for r in &report.cold {
        out.push_str(&format!(
            "{},{},{},{:.2},{:.2},{:.0},{:.1}\n",
            r.algorithm,
            r.fragmentation,
            r.queries,
            r.median_ms,
            r.p90_ms,
            r.bytes_from_authorities,
            r.exchanges
        ));
    }
    out
}

/// The (transport, concurrency) cells measured, in order.
fn cells(report: &Report) -> Vec<(&'static str, usize)> {
    let mut levels: Vec<usize> = report.cache.iter().map(|r| r.concurrency).collect();
    levels.sort_unstable();
    levels.dedup();
    [CACHE_UDP, CACHE_DOT, NXDOMAIN_HIT_UDP, NXDOMAIN_UDP]
        .into_iter()
        .flat_map(|t| levels.iter().map(move |&c| (t, c)))
        .collect()
}

/// Writes `PREFIX-cache.{svg,png}` (CPU per cache hit) and `PREFIX-cold.{svg,png}` (cold
/// resolution time).
///
/// # Errors
/// Drawing or file errors.
pub fn charts(output: &Path, report: &Report) -> crate::charts::DrawResult {
    let mut cache = Vec::new();
    for (transport, c) in cells(report) {
        for resolver in ["pqdns-resolver", "unbound"] {
            let v = cache_cpu(&report.cache, resolver, transport, c);
            cache.push((format!("{resolver} {transport} ×{c}"), v));
        }
    }
    crate::charts::bars(
        &crate::charts::suffixed(output, "-cache"),
        "Validated cache hits (DO=1): resolver CPU per query",
        "µs",
        &cache,
    )?;
    let cold: Vec<(String, f64)> = report
        .cold
        .iter()
        .map(|r| (format!("{} {}", r.algorithm, r.fragmentation), r.median_ms))
        .collect();
    crate::charts::bars(
        &crate::charts::suffixed(output, "-cold"),
        "Cold validated resolution from the root (median)",
        "ms",
        &cold,
    )
}

/// The Markdown report: what was measured, the ratios, both tables, the command and the
/// machine.
pub fn markdown(report: &Report, plan: &Plan, command: &str, output: &Path) -> String {
    let stem = output
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut md = String::from("# Recursor: pqdns-resolver beside unbound\n\n");
    md.push_str(&format!(
        "Command: `{command}` (as root: the authorities listen on port 53 of 127.0.4.x). \
         Machine: {}. Each cache-hit cell is the median of {} runs of {} s with {:?} closed-loop \
         workers, the two resolvers alternating; a warm-up run puts the {HOSTS} names in each cache first. \
         Same thread count: unbound 1.17 from Debian 12 with `num-threads: 1`, pqdns-resolver \
         with `--threads 1` (one runtime worker, for DoT and resolutions; UDP has its one \
         serving thread as always). Load average before the run: {}.\n\n",
        report.machine, plan.rounds, plan.seconds, plan.concurrency, report.load_average
    ));
    md.push_str("## Cache hits: resolver CPU per validated answer (DO=1, RD=1)\n\n");
    md.push_str(&format!(
        "`udp` and `dot`: the {HOSTS} cached names. `udp-nxdomain-hit`: {HOSTS} names that do \
         not exist (`h<i>-.ecdsa.tld.`, each in an NSEC span of its own), resolved in the \
         warm-up and then answered from the cache: the same kind of response as a synthesised \
         one (SOA, two NSEC records, their RRSIGs). `udp-nxdomain`: after one validated \
         NXDOMAIN, distinct names of the same NSEC span (`j….ecdsa.tld.`, between `h99` and \
         `ns`), each asked once, {} per run: answers synthesised from the cached NSEC records \
         (RFC 8198; both resolvers do it, unbound's `aggressive-nsec: yes` is its default).\n\n",
        nx_names(plan.seconds)
    ));
    md.push_str("| cell | workers | pqdns-resolver µs/query | unbound µs/query | ratio (goal ≤ 0.6) |\n|---|---:|---:|---:|---:|\n");
    for (transport, c) in cells(report) {
        let ours = cache_cpu(&report.cache, "pqdns-resolver", transport, c);
        let theirs = cache_cpu(&report.cache, "unbound", transport, c);
        md.push_str(&format!(
            "| {transport} | {c} | {ours:.1} | {theirs:.1} | {:.2} |\n",
            ours / theirs
        ));
    }
    for c in report
        .cache
        .iter()
        .map(|r| r.concurrency)
        .collect::<std::collections::BTreeSet<_>>()
    {
        let hit = cache_cpu(&report.cache, "pqdns-resolver", CACHE_UDP, c);
        let nx_hit = cache_cpu(&report.cache, "pqdns-resolver", NXDOMAIN_HIT_UDP, c);
        let nx = cache_cpu(&report.cache, "pqdns-resolver", NXDOMAIN_UDP, c);
        md.push_str(&format!(
            "\npqdns-resolver, {c} workers, over UDP: synthesised NXDOMAIN / cache hit = \
             **{:.2}**, synthesised NXDOMAIN / cached NXDOMAIN = **{:.2}** (goal ≤ 1).\n",
            nx / hit,
            nx / nx_hit
        ));
    }
    md.push_str(&format!("\n![CPU per cache hit]({stem}-cache.png)\n\n"));
    md.push_str("Every run:\n\n| resolver | transport | workers | round | queries/s | p50 ms | CPU µs/query | failures |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
    for r in &report.cache {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} | {:.3} | {:.1} | {} |\n",
            r.resolver,
            r.transport,
            r.concurrency,
            r.round,
            r.qps,
            r.p50_ms,
            r.server_cpu_us_per_query,
            r.failures
        ));
    }
    md.push_str("\n## Cold validated resolution from the root\n\n");
    md.push_str(
        "A fresh resolver (the library the service runs) per resolution of `www.<leaf>.tld. A`: \
         root and `tld.` signed with ECDSAP256SHA256, the leaf with the algorithm named; iterative \
         over UDP with ARRF fragments offered (`arrf`) or not (`off`: TC=1, then TCP).\n\n",
    );
    md.push_str("| algorithm | fragmentation | median ms | p90 ms | bytes from authorities | exchanges |\n|---|---|---:|---:|---:|---:|\n");
    for r in &report.cold {
        md.push_str(&format!(
            "| {} | {} | {:.2} | {:.2} | {:.0} | {:.1} |\n",
            r.algorithm,
            r.fragmentation,
            r.median_ms,
            r.p90_ms,
            r.bytes_from_authorities,
            r.exchanges
        ));
    }
    let cold = |alg: &str| {
        report
            .cold
            .iter()
            .find(|r| r.algorithm == alg && r.fragmentation == "arrf")
            .map_or(f64::NAN, |r| r.median_ms)
    };
    md.push_str(&format!(
        "\nML-DSA-44 / ECDSA cold resolution time with ARRF: **{:.2}** (goal ≤ 1.2). On \
         loopback there is no round-trip time, so ARRF's saving (no TCP handshake after TC=1) \
         barely shows; `pqdns-bench fragmentation` measures it behind a delay shim.\n\n\
         ![Cold resolution]({stem}-cold.png)\n\nData: `{stem}.csv` (the cache runs, a blank \
         line, the cold rows) and `{stem}.json`.\n",
        cold("ML-DSA-44") / cold("ECDSAP256SHA256")
    ));
    md
}
