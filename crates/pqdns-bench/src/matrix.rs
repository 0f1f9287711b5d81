//! `pqdns-bench matrix`: the PQC-DNS study's benchmark grid (Tables 3–15 of
//! `pqc-dns-system-level-study`) against pqdns-server instances started here: TLS key
//! exchange × certificate signature × DNSSEC algorithm × transport × concurrency, plus the
//! questions the study left open (handshake rate of hybrid vs classical key exchange, session
//! resumption, reused connections).
//!
//! Our definitions, and how they differ from the study's:
//! - **latency (ms)** at concurrency 1: median over a timed run of one query's time, connect
//!   and full TLS handshake included (new connection per query, as the study), but measured
//!   inside one long-running client — the study timed a fresh `dig` process per query, so its
//!   ~9 ms includes process start-up; at concurrency N > 1: median time to finish a batch of
//!   N concurrent queries, each on its own new connection (the study's multi-client rows);
//! - **bandwidth (kB)**: socket payload bytes both ways (TLS records and HTTP/2 frames
//!   included) plus *estimated* IP/TCP/UDP headers, ÷ 1024, per query at concurrency 1 and per
//!   batch at N > 1; the study counted captured frame bytes (incl. link layer);
//! - **client / server CPU (%)**: client = CPU time ÷ wall time ÷ cores (over all runs of
//!   the cell); server = peak 100 ms-sampled utilisation ÷ cores (the study's peak definition);
//!   server CPU µs per query is also given (comparable across machines);
//! - **memory (%)**: the server's peak sampled RSS ÷ MemTotal.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::load::{self, ConnectionMode, Limit, LoadConfig, LoadReport, LoadTransport};
use crate::query_source::{parse_query, QueryOptions};
use crate::server_process::{CertAlgorithm, ServerProcess, ServerSpec, ORIGIN};
use crate::tls_client::{parse_group, TlsClientOptions};

/// Key-exchange named groups of the full grid (pure ML-KEM groups are not offered by
/// pqdns-server's policies, so they are not in the grid).
pub const KEMS: [&str; 4] = ["X25519", "secp256r1", "X25519MLKEM768", "secp256r1MLKEM768"];
/// DNSSEC algorithms of the full grid: the study's Table 9 set, with SPHINCS+-SHA2-128s in
/// place of its 128f (pqdns's default algorithm-number profile has no number for 128f).
pub const DNSSEC_ALGS: [&str; 6] = [
    "RSASHA256",
    "ECDSAP256SHA256",
    "ED25519",
    "ML-DSA-44",
    "Falcon-padded-512",
    "SPHINCS+-SHA2-128s",
];

/// How much of the grid to run.
#[derive(Clone, Debug)]
pub struct MatrixOptions {
    /// The reduced grid (a few minutes on 2 cores).
    pub quick: bool,
    /// Concurrency steps.
    pub concurrency: Vec<usize>,
    /// Add the 10,000-concurrent DoT batches (X25519MLKEM768 and X25519, ECDSA P-256).
    pub with_10000: bool,
    /// Seconds of closed-loop load per concurrency-1 and connection-mode cell.
    pub single_seconds: f64,
    /// Most batches per concurrency-N cell (see [`batches_for`]).
    pub max_batches: usize,
    /// Seconds per handshake-rate run.
    pub handshake_seconds: f64,
    /// Rounds of the handshake-rate comparison.
    pub handshake_rounds: usize,
    /// The pqdns-server binary.
    pub server_binary: PathBuf,
    /// Output directory (CSV, JSON, markdown, charts).
    pub output: PathBuf,
    /// Which cells of the grid to measure (default: all).
    pub select: Selection,
    /// Keep the cells of `output/matrix.json` that this run does not measure again, so a part
    /// of the grid can be re-run into the full report.
    pub merge: bool,
}

/// A part of the grid: cells whose section, offered named group and certificate are in the
/// lists; an empty list selects everything. Sections are `DoT`, `DoH`, `DoQ`, `DNSSEC`,
/// `DNSSEC+DoT`, `connection-modes`, `handshake-rate`; groups and certificates are named as in
/// the tables (`X25519MLKEM768`, `ml-dsa-44`), case-insensitively.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// Grid sections.
    pub sections: Vec<String>,
    /// TLS named groups (cells without TLS are not filtered by it).
    pub kems: Vec<String>,
    /// Certificate algorithms (cells without TLS are not filtered by it).
    pub certs: Vec<CertAlgorithm>,
}

impl Selection {
    fn selects(&self, plan: &Plan) -> bool {
        let any = |list: &[String], v: &str| {
            list.is_empty() || list.iter().any(|x| x.eq_ignore_ascii_case(v))
        };
        any(&self.sections, plan.section)
            && plan.kem.is_none_or(|k| any(&self.kems, k))
            && (plan.kem.is_none()
                || self.certs.is_empty()
                || self.certs.contains(&plan.server.cert))
    }
}

impl MatrixOptions {
    /// Defaults for `--quick` or the full grid.
    pub fn new(quick: bool, server_binary: PathBuf, output: PathBuf) -> MatrixOptions {
        MatrixOptions {
            quick,
            concurrency: if quick {
                vec![1, 100]
            } else {
                vec![1, 100, 1000]
            },
            with_10000: false,
            single_seconds: if quick { 0.5 } else { 2.0 },
            max_batches: if quick { 5 } else { 15 },
            handshake_seconds: if quick { 1.5 } else { 4.0 },
            handshake_rounds: if quick { 2 } else { 3 },
            server_binary,
            output,
            select: Selection::default(),
            merge: false,
        }
    }
}

/// One measured cell of the grid.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Cell {
    /// Grid section: `DoT`, `DoH`, `DoQ`, `DNSSEC`, `DNSSEC+DoT`, `connection-modes`,
    /// `handshake-rate`.
    pub section: String,
    /// Transport (`udp`, `tcp`, `dot`, `doh-post`, `doq`).
    pub transport: String,
    /// Connection mode (`fresh`, `reuse`, `resumption`).
    pub mode: String,
    /// TLS named group offered (empty for UDP/TCP).
    pub kem: String,
    /// TLS certificate signature (empty for UDP/TCP).
    pub cert: String,
    /// DNSSEC algorithm of the zone, when queried with DO=1 (else empty).
    pub dnssec: String,
    /// Concurrent queries.
    pub concurrency: usize,
    /// Load runs aggregated (batches at N > 1; repetitions for handshake rate).
    pub runs: usize,
    /// Queries sent in all runs.
    pub queries: u64,
    /// Failed queries (errors + timeouts) in all runs.
    pub failures: u64,
    /// Answers with TC=1.
    pub truncated: u64,
    /// Study-comparable latency, ms: per query (N = 1) or per batch (N > 1), median.
    pub latency_ms: f64,
    /// Per-query latency p50 / p99 of the median run, ms.
    pub query_p50_ms: f64,
    /// See `query_p50_ms`.
    pub query_p99_ms: f64,
    /// Study-comparable bandwidth, kB (1024 bytes): per query (N = 1) or per batch (N > 1).
    pub bandwidth_kb: f64,
    /// Socket payload bytes per query, both directions, bytes.
    pub wire_bytes_per_query: f64,
    /// Estimated IP/TCP/UDP header bytes per query, both directions, bytes.
    pub est_header_bytes_per_query: f64,
    /// DNS answer size, bytes.
    pub answer_bytes: f64,
    /// Answers (or handshakes) per second of the median run.
    pub qps: f64,
    /// Client CPU, average percent of all cores.
    pub client_cpu_pct: f64,
    /// Server CPU, peak 100 ms sample, percent of all cores.
    pub server_cpu_pct: f64,
    /// Server CPU time per answered query, µs.
    pub server_cpu_us_per_query: f64,
    /// Server peak RSS over MemTotal, percent.
    pub memory_pct: f64,
    /// Negotiated group.
    pub tls_group: String,
    /// Resumed handshakes in the median run.
    pub tls_resumed: u64,
    /// 1-minute load average when the cell started.
    pub load_avg: f64,
}

/// Why the matrix stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MatrixError {
    /// A server did not start.
    #[error(transparent)]
    Start(#[from] crate::server_process::StartError),
    /// A load run could not start.
    #[error(transparent)]
    Load(#[from] load::LoadError),
    /// Output could not be written.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The 1-minute load average (`/proc/loadavg`), 0 if unreadable.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

/// One cell to measure.
#[derive(Clone, Debug)]
struct Plan {
    section: &'static str,
    server: ServerSpec,
    transport: LoadTransport,
    mode: ConnectionMode,
    kem: Option<&'static str>,
    concurrency: usize,
    dnssec_ok: bool,
    handshake_rate: bool,
}

fn policy_for(kem: &str) -> &'static str {
    // pqdns-server offers secp256r1MLKEM768 only under the pq-only policy.
    if kem == "secp256r1MLKEM768" {
        "pq-only"
    } else {
        "hybrid-preferred"
    }
}

fn tls_plan(
    section: &'static str,
    transport: LoadTransport,
    kem: &'static str,
    cert: CertAlgorithm,
    dnssec: Option<&str>,
    concurrency: usize,
) -> Plan {
    Plan {
        section,
        server: ServerSpec {
            dnssec: dnssec.map(str::to_string),
            cert,
            policy: policy_for(kem),
        },
        transport,
        mode: ConnectionMode::Fresh,
        kem: Some(kem),
        concurrency,
        dnssec_ok: dnssec.is_some(),
        handshake_rate: false,
    }
}

fn plans(opts: &MatrixOptions) -> Vec<Plan> {
    let (kems, certs, algs): (&[&'static str], &[CertAlgorithm], &[&str]) = if opts.quick {
        (
            &["X25519", "X25519MLKEM768"],
            &[CertAlgorithm::EcdsaP256, CertAlgorithm::Ed25519],
            &["ECDSAP256SHA256", "ML-DSA-44"],
        )
    } else {
        (&KEMS, &CertAlgorithm::ALL, &DNSSEC_ALGS)
    };
    let mut out = Vec::new();
    for &c in &opts.concurrency {
        for (section, transport) in [
            ("DoT", LoadTransport::Dot),
            ("DoH", LoadTransport::DohPost),
            ("DoQ", LoadTransport::Doq),
        ] {
            for &kem in kems {
                for &cert in certs {
                    out.push(tls_plan(section, transport, kem, cert, None, c));
                }
            }
        }
        for &alg in algs {
            for transport in [LoadTransport::Udp, LoadTransport::Tcp] {
                out.push(Plan {
                    section: "DNSSEC",
                    server: ServerSpec {
                        dnssec: Some(alg.to_string()),
                        cert: CertAlgorithm::EcdsaP256,
                        policy: "hybrid-preferred",
                    },
                    transport,
                    mode: if transport == LoadTransport::Tcp {
                        ConnectionMode::Fresh
                    } else {
                        ConnectionMode::Reuse
                    },
                    kem: None,
                    concurrency: c,
                    dnssec_ok: true,
                    handshake_rate: false,
                });
            }
        }
    }
    // Table 10: DNSSEC with DoT, concurrency 1.
    for &alg in algs {
        for kem in ["X25519", "X25519MLKEM768"] {
            let cert = CertAlgorithm::EcdsaP256;
            out.push(tls_plan(
                "DNSSEC+DoT",
                LoadTransport::Dot,
                kem,
                cert,
                Some(alg),
                1,
            ));
        }
    }
    // Fresh vs resumed vs reused connections (the study's open question).
    for c in [1, 100] {
        for mode in [
            ConnectionMode::Fresh,
            ConnectionMode::Resumption,
            ConnectionMode::Reuse,
        ] {
            for kem in ["X25519", "X25519MLKEM768"] {
                let mut p = tls_plan(
                    "connection-modes",
                    LoadTransport::Dot,
                    kem,
                    CertAlgorithm::EcdsaP256,
                    None,
                    c,
                );
                p.mode = mode;
                out.push(p);
            }
        }
    }
    if opts.with_10000 {
        for kem in ["X25519", "X25519MLKEM768"] {
            out.push(tls_plan(
                "DoT",
                LoadTransport::Dot,
                kem,
                CertAlgorithm::EcdsaP256,
                None,
                10_000,
            ));
        }
    }
    // Handshake rate: closed-loop fresh DoT handshakes, X25519 vs hybrid, alternating rounds.
    for _ in 0..opts.handshake_rounds {
        for kem in ["X25519", "X25519MLKEM768"] {
            let mut p = tls_plan(
                "handshake-rate",
                LoadTransport::Dot,
                kem,
                CertAlgorithm::EcdsaP256,
                None,
                8,
            );
            p.handshake_rate = true;
            out.push(p);
        }
    }
    out.retain(|p| opts.select.selects(p));
    out
}

fn load_config(
    plan: &Plan,
    server: &ServerProcess,
    limit: Limit,
) -> Result<LoadConfig, load::LoadError> {
    let target = match plan.transport {
        LoadTransport::Udp | LoadTransport::Tcp => server.dns,
        // DoQ listens on UDP at DoT's port number (RFC 9250 shares port 853).
        LoadTransport::Dot | LoadTransport::Doq => server.dot,
        LoadTransport::DohPost | LoadTransport::DohGet => server.doh,
    };
    let query =
        parse_query(&format!("www.{ORIGIN}"), Some("A")).map_err(load::LoadError::Invalid)?;
    let group = plan
        .kem
        .map(parse_group)
        .transpose()
        .map_err(load::LoadError::Invalid)?;
    Ok(LoadConfig {
        target,
        transport: plan.transport,
        mode: plan.mode,
        concurrency: plan.concurrency,
        rate: None,
        limit,
        queries: vec![query],
        edns: QueryOptions {
            udp_payload: Some(if plan.dnssec_ok { 4096 } else { 1232 }),
            dnssec_ok: plan.dnssec_ok,
            recursion_desired: false,
        },
        tls: TlsClientOptions {
            group,
            ca_file: Some(server.ca.clone()),
            ..TlsClientOptions::default()
        },
        doh_path: "/dns-query".into(),
        doq_datagram_size: pqdns_net::DOQ_MIN_DATAGRAM,
        // A lost UDP datagram is not retried: it counts as a failure after 2 s.
        timeout: Duration::from_secs(match (plan.transport, plan.concurrency) {
            (LoadTransport::Udp, _) => 2,
            (_, c) if c >= 1000 => 60,
            _ => 10,
        }),
        server_pid: Some(server.pid()),
        progress: false,
    })
}

fn median_by<T>(mut v: Vec<T>, key: impl Fn(&T) -> f64) -> Option<T> {
    v.sort_by(|a, b| key(a).total_cmp(&key(b)));
    let mid = v.len() / 2;
    v.into_iter().nth(mid)
}

/// Batches of `concurrency` queries per cell: enough for about 2,000 queries (so CPU time,
/// sampled in 10 ms ticks, is measurable), at least 3 (a median), at most `max`.
pub fn batches_for(concurrency: usize, max: usize) -> usize {
    (2000 / concurrency.max(1)).clamp(3, max.max(3))
}

async fn measure(
    plan: &Plan,
    server: &ServerProcess,
    opts: &MatrixOptions,
) -> Result<Cell, MatrixError> {
    let load_avg = load_average();
    let timed = plan.handshake_rate || plan.section == "connection-modes" || plan.concurrency == 1;
    let runs: Vec<LoadReport> = if timed {
        let seconds = if plan.handshake_rate {
            opts.handshake_seconds
        } else {
            opts.single_seconds
        };
        let limit = Limit::Duration(Duration::from_secs_f64(seconds));
        vec![load::run(load_config(plan, server, limit)?).await?]
    } else {
        let mut v = Vec::new();
        for _ in 0..batches_for(plan.concurrency, opts.max_batches) {
            let limit = Limit::Count(plan.concurrency as u64);
            v.push(load::run(load_config(plan, server, limit)?).await?);
        }
        v
    };
    let n_runs = runs.len();
    let sum = |f: &dyn Fn(&LoadReport) -> f64| runs.iter().map(f).sum::<f64>();
    let answered = sum(&|r| r.answered as f64).max(1.0);
    let wall = sum(&|r| r.wall_seconds).max(1e-9);
    let client_cpu_pct =
        sum(&|r| r.client.cpu_seconds) / wall / crate::proc_stat::cores() as f64 * 100.0;
    let server_cpu_us = sum(&|r| r.server.map_or(0.0, |s| s.cpu_seconds)) * 1e6 / answered;
    let server_peak = runs
        .iter()
        .filter_map(|r| r.server)
        .map(|s| s.cpu_pct_peak)
        .fold(0.0, f64::max);
    let memory_pct = runs
        .iter()
        .filter_map(|r| r.server)
        .map(|s| s.mem_pct_peak)
        .fold(0.0, f64::max);
    let queries = runs.iter().map(|r| r.queries).sum();
    let failures = runs.iter().map(|r| r.errors + r.timeouts).sum();
    let truncated = runs.iter().map(|r| r.truncated).sum();
    let mid = median_by(runs, |r| r.wall_seconds).expect("at least one run");
    let per_query_bytes = mid.wire_sent_per_query + mid.wire_received_per_query;
    let batch = !timed;
    Ok(Cell {
        section: plan.section.into(),
        transport: plan.transport.name().into(),
        mode: plan.mode.name().into(),
        kem: plan.kem.unwrap_or_default().into(),
        cert: if plan.kem.is_some() {
            plan.server.cert.name().into()
        } else {
            String::new()
        },
        dnssec: if plan.dnssec_ok {
            plan.server.dnssec.clone().unwrap_or_default()
        } else {
            String::new()
        },
        concurrency: plan.concurrency,
        runs: n_runs,
        queries,
        failures,
        truncated,
        latency_ms: if batch {
            mid.wall_seconds * 1000.0
        } else {
            mid.latency.p50_ms
        },
        query_p50_ms: mid.latency.p50_ms,
        query_p99_ms: mid.latency.p99_ms,
        bandwidth_kb: (per_query_bytes + mid.est_headers_per_query)
            * if batch { mid.answered as f64 } else { 1.0 }
            / 1024.0,
        wire_bytes_per_query: per_query_bytes,
        est_header_bytes_per_query: mid.est_headers_per_query,
        answer_bytes: mid.dns_received_per_query,
        qps: mid.qps,
        client_cpu_pct,
        server_cpu_pct: server_peak,
        server_cpu_us_per_query: server_cpu_us,
        memory_pct,
        tls_group: mid.tls_group.clone().unwrap_or_default(),
        tls_resumed: mid.tls_resumed,
        load_avg,
    })
}

/// The cells of `dir/matrix.json` (none if it does not exist) with each one `new` measured
/// again replaced in place, followed by the cells `new` adds.
fn merged(dir: &std::path::Path, new: Vec<Cell>) -> Result<Vec<Cell>, MatrixError> {
    let mut old = match std::fs::read_to_string(dir.join("matrix.json")) {
        Ok(json) => serde_json::from_str::<Vec<Cell>>(&json)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    // handshake-rate cells repeat one key per round: a new run replaces all of them.
    if new.iter().any(|c| c.section == "handshake-rate") {
        old.retain(|c| c.section != "handshake-rate");
    }
    for cell in new {
        match old.iter_mut().find(|o| o.key() == cell.key()) {
            Some(slot) => *slot = cell,
            None => old.push(cell),
        }
    }
    Ok(old)
}

impl Cell {
    /// What identifies a cell of the grid.
    fn key(&self) -> (&str, &str, &str, &str, &str, &str, usize) {
        (
            &self.section,
            &self.transport,
            &self.mode,
            &self.kem,
            &self.cert,
            &self.dnssec,
            self.concurrency,
        )
    }
}

/// Redraws the tables and charts in `opts.output` from its `matrix.json` (no measurement).
///
/// # Errors
/// [`MatrixError::Io`] if `matrix.json` cannot be read or parsed, or output cannot be written.
pub fn report_only(opts: &MatrixOptions) -> Result<Vec<Cell>, MatrixError> {
    let json = std::fs::read_to_string(opts.output.join("matrix.json"))?;
    let cells: Vec<Cell> = serde_json::from_str(&json)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    crate::matrix_report::write(&opts.output, &cells, opts, &[])?;
    Ok(cells)
}

/// Runs the grid, starting one pqdns-server per (certificate, policy, DNSSEC algorithm), and
/// writes the reports into `opts.output`. `progress` is called with (done, total, cell).
///
/// # Errors
/// [`MatrixError`] if a server does not start, a run cannot be configured, or output cannot
/// be written. Failed queries are counted in the cells, not returned.
pub async fn run(
    opts: &MatrixOptions,
    mut progress: impl FnMut(usize, usize, &Cell),
) -> Result<Vec<Cell>, MatrixError> {
    let all = plans(opts);
    // Group cells by server so each server starts once; keep the plan order inside a group.
    let mut by_server: BTreeMap<ServerSpec, Vec<usize>> = BTreeMap::new();
    for (i, p) in all.iter().enumerate() {
        by_server.entry(p.server.clone()).or_default().push(i);
    }
    let mut cells: Vec<Option<Cell>> = vec![None; all.len()];
    let mut done = 0;
    let mut skipped = Vec::new();
    for (spec, indices) in by_server {
        let server = match ServerProcess::start(&opts.server_binary, &spec) {
            Ok(s) => s,
            Err(e) => {
                // One configuration the server refuses must not cost the rest of the grid.
                tracing::warn!(?spec, error = %e, "server did not start; its cells are skipped");
                let first_line = e.to_string().lines().next().unwrap_or_default().to_string();
                skipped.push(format!("{spec:?}: {first_line} ({} cells)", indices.len()));
                done += indices.len();
                continue;
            }
        };
        for i in indices {
            let cell = measure(&all[i], &server, opts).await?;
            done += 1;
            progress(done, all.len(), &cell);
            cells[i] = Some(cell);
        }
    }
    let mut cells: Vec<Cell> = cells.into_iter().flatten().collect();
    if opts.merge {
        cells = merged(&opts.output, cells)?;
    }
    crate::matrix_report::write(&opts.output, &cells, opts, &skipped)?;
    Ok(cells)
}

/// The study's name for our DNSSEC algorithm (Table 9 writes e.g. `rsa2048sha256`,
/// `mldsa44`, `sphincssha2128fsimple`), for matching rows of `paper-reference.csv`.
pub fn paper_dnssec_name(ours: &str) -> String {
    match ours {
        "RSASHA256" => "rsa2048sha256".into(),
        "Falcon-padded-512" => "falconpadded512".into(),
        "SPHINCS+-SHA2-128s" => "sphincssha2128fsimple".into(),
        other => other.to_ascii_lowercase().replace(['-', '+'], ""),
    }
}
