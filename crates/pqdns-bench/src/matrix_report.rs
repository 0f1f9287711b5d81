//! Reports of `pqdns-bench matrix`: `matrix.csv`, `matrix.json`, `README.md` (tables with the
//! PQC-DNS study's columns, our definitions, the goals, and the study's published numbers
//! beside ours, labelled "different machine") and charts (SVG + PNG).

use pqdns_core::atomic_file::{write_atomic, FileMode};
use std::fmt::Write as _;
use std::path::Path;

use crate::charts;
use crate::matrix::{paper_dnssec_name, Cell, MatrixOptions};

/// The study's Tables 3–15, transcribed (see docs/bench/matrix/README.md).
pub const PAPER_REFERENCE: &str = include_str!("../../../docs/bench/matrix/paper-reference.csv");

/// One row of `paper-reference.csv`.
#[derive(Clone, Debug, PartialEq)]
pub struct PaperRow {
    /// Table number (3–15).
    pub table: u32,
    /// `DoT`, `DoH`, `DNSSEC`, `DNSSEC+DoT`, `DNSSEC+DoH`.
    pub protocol: String,
    /// Concurrent queries (1, 100, 1000, 10000).
    pub concurrency: usize,
    /// DNSSEC algorithm (Tables 9–11).
    pub dnssec: String,
    /// Key exchange, as the study names it.
    pub kem: String,
    /// Certificate signature, as the study names it.
    pub signature: String,
    /// Latency, ms.
    pub latency_ms: f64,
    /// Bandwidth, kB.
    pub bandwidth_kb: f64,
}

/// Parses `paper-reference.csv` (quoted category column; numeric fields as printed).
pub fn paper_rows(csv: &str) -> Vec<PaperRow> {
    csv.lines()
        .skip(1)
        .filter_map(|line| {
            // The category is the only quoted field and holds no quotes itself.
            let (head, rest) = line.split_once(",\"")?;
            let (_, tail) = rest.split_once("\",")?;
            let h: Vec<&str> = head.split(',').collect();
            let t: Vec<&str> = tail.split(',').collect();
            Some(PaperRow {
                table: h.first()?.parse().ok()?,
                protocol: h.get(1)?.to_string(),
                concurrency: h.get(3)?.parse().ok()?,
                dnssec: t.first()?.to_string(),
                kem: t.get(1)?.to_string(),
                signature: t.get(2)?.to_string(),
                latency_ms: t.get(3)?.parse().ok()?,
                bandwidth_kb: t.get(4)?.parse().ok()?,
            })
        })
        .collect()
}

fn paper_match<'a>(rows: &'a [PaperRow], cell: &Cell) -> Option<&'a PaperRow> {
    let protocol = match (cell.section.as_str(), cell.transport.as_str()) {
        ("DoT", _) => "DoT",
        ("DoH", _) => "DoH",
        ("DNSSEC", "udp") => "DNSSEC",
        ("DNSSEC+DoT", _) => "DNSSEC+DoT",
        _ => return None,
    };
    let dnssec = paper_dnssec_name(&cell.dnssec);
    let cert = paper_cert_name(&cell.cert);
    rows.iter().find(|r| {
        r.protocol == protocol
            && r.concurrency == cell.concurrency
            && r.kem == cell.kem.to_ascii_lowercase()
            && r.signature == cert
            && (cell.dnssec.is_empty()
                || r.dnssec == dnssec
                || r.dnssec == dnssec.trim_end_matches("sha256"))
    })
}

/// The study's name for our certificate algorithm: its tables write `mldsa44` for our
/// `ml-dsa-44`, and name the classical ones as we do (`ecdsa-p256`, `rsa2048`).
fn paper_cert_name(ours: &str) -> String {
    match ours.strip_prefix("ml-dsa-") {
        Some(level) => format!("mldsa{level}"),
        None => ours.to_string(),
    }
}

/// The certificates compared in [`certificate_table`]: the classical baseline and the three
/// ML-DSA levels.
const CERT_COMPARISON: [&str; 4] = ["ecdsa-p256", "ml-dsa-44", "ml-dsa-65", "ml-dsa-87"];

/// ECDSA-P256 vs ML-DSA certificates per transport, named group and concurrency: latency,
/// bytes and server CPU per query, with the server CPU as a ratio to ECDSA-P256 (issue 15's
/// measure).
fn certificate_table(cells: &[Cell], md: &mut String) {
    let tls = |c: &Cell| matches!(c.section.as_str(), "DoT" | "DoH" | "DoQ");
    let rows: Vec<&Cell> = cells
        .iter()
        .filter(|c| tls(c) && CERT_COMPARISON.contains(&c.cert.as_str()))
        .filter(|c| c.kem == "X25519" || c.kem == "X25519MLKEM768")
        .collect();
    if !rows.iter().any(|c| c.cert.starts_with("ml-dsa")) {
        return;
    }
    let _ = writeln!(
        md,
        "### Certificates: ECDSA-P256 vs ML-DSA, per transport (fresh connection per query)\n\n\
         Per query: latency (concurrency 1: median query; N > 1: median batch), bytes on the wire \
         both ways incl. estimated headers, and server CPU; the last column is the server CPU per \
         query over the ECDSA-P256 cell of the same transport, group and concurrency.\n\n\
         | transport | KEM | concurrency | certificate | latency (ms) | bytes/query | server µs/query | CPU ÷ ECDSA | failures |\n\
         |---|---|---:|---|---:|---:|---:|---:|---:|"
    );
    for section in ["DoT", "DoH", "DoQ"] {
        for kem in ["X25519", "X25519MLKEM768"] {
            let mut steps: Vec<usize> = rows.iter().map(|c| c.concurrency).collect();
            steps.sort_unstable();
            steps.dedup();
            for n in steps {
                let at = |cert: &str| {
                    rows.iter().find(|c| {
                        c.section == section && c.kem == kem && c.concurrency == n && c.cert == cert
                    })
                };
                let base = at("ecdsa-p256").map(|b| b.server_cpu_us_per_query);
                for cert in CERT_COMPARISON {
                    let Some(c) = at(cert) else { continue };
                    let ratio = base.filter(|b| *b > 0.0).map_or(String::new(), |b| {
                        format!("{:.2}×", c.server_cpu_us_per_query / b)
                    });
                    let _ = writeln!(
                        md,
                        "| {section} | {kem} | {n} | {cert} | {:.2} | {:.0} | {:.0} | {ratio} | {} |",
                        c.latency_ms,
                        c.wire_bytes_per_query + c.est_header_bytes_per_query,
                        c.server_cpu_us_per_query,
                        c.failures
                    );
                }
            }
        }
    }
    md.push('\n');
}

/// The study's rows with Dilithium (ML-DSA) certificates beside our cells of the same
/// protocol, concurrency and ML-DSA level: with the study's key exchange where rustls has it
/// (secp256r1, X25519), else our hybrid X25519MLKEM768 (ML-KEM-768) in place of its ML-KEM,
/// HQC, FFDHE or other groups.
fn dilithium_table(cells: &[Cell], paper: &[PaperRow], md: &mut String) {
    let study: Vec<&PaperRow> = paper
        .iter()
        .filter(|r| {
            r.signature.starts_with("mldsa") && (r.protocol == "DoT" || r.protocol == "DoH")
        })
        .collect();
    let ours = |r: &PaperRow| {
        let cert = format!("ml-dsa-{}", r.signature.trim_start_matches("mldsa"));
        let kem = match r.kem.as_str() {
            "secp256r1" => "secp256r1",
            "x25519" => "X25519",
            _ => "X25519MLKEM768",
        };
        cells.iter().find(|c| {
            c.section == r.protocol
                && c.concurrency == r.concurrency
                && c.cert == cert
                && c.kem == kem
        })
    };
    if !study.iter().any(|r| ours(r).is_some()) {
        return;
    }
    let _ = writeln!(
        md,
        "### The study's Dilithium (ML-DSA) certificate rows beside ours\n\n\
         The study ran OQS-BIND and OQS OpenSSL on a **different machine** and timed a `dig` process per \
         query; compare ratios within each source. Our KEM is the study's where rustls has it, else \
         X25519MLKEM768.\n\n\
         | protocol | concurrency | study KEM + signature | study latency (ms) / bandwidth (kB) | our KEM + certificate | our latency (ms) / bandwidth (kB) |\n\
         |---|---:|---|---:|---|---:|"
    );
    for r in study {
        let (who, numbers) = match ours(r) {
            Some(c) => (
                format!("{} + {}", c.kem, c.cert),
                format!("{:.2} / {:.2}", c.latency_ms, c.bandwidth_kb),
            ),
            None => ("not measured".to_string(), String::new()),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} + {} (T{}) | {:.2} / {:.2} | {who} | {numbers} |",
            r.protocol, r.concurrency, r.kem, r.signature, r.table, r.latency_ms, r.bandwidth_kb
        );
    }
    md.push('\n');
}

/// CSV header of `matrix.csv`.
pub const CSV_HEADER: &str = "section,transport,mode,kem,cert,dnssec,concurrency,runs,queries,\
failures,truncated,latency_ms,query_p50_ms,query_p99_ms,bandwidth_kB,wire_bytes_per_query,\
est_header_bytes_per_query,answer_bytes,qps,client_cpu_pct,server_cpu_pct,\
server_cpu_us_per_query,memory_pct,tls_group,tls_resumed,load_avg";

/// One `matrix.csv` line.
pub fn csv_row(c: &Cell) -> String {
    format!(
        "{},{},{},{},{},{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.1},{:.1},{:.1},{:.1},{:.2},{:.2},{:.1},{:.3},{},{},{:.2}",
        c.section, c.transport, c.mode, c.kem, c.cert, c.dnssec, c.concurrency, c.runs, c.queries,
        c.failures, c.truncated, c.latency_ms, c.query_p50_ms, c.query_p99_ms, c.bandwidth_kb,
        c.wire_bytes_per_query, c.est_header_bytes_per_query, c.answer_bytes, c.qps,
        c.client_cpu_pct, c.server_cpu_pct, c.server_cpu_us_per_query, c.memory_pct, c.tls_group,
        c.tls_resumed, c.load_avg
    )
}

/// The machine: cores, CPU model and memory (for the reports).
pub(crate) fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
            })
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let mem_gib = crate::proc_stat::mem_total_kib().unwrap_or(0) as f64 / 1024.0 / 1024.0;
    format!(
        "{} cores ({cpu}), {mem_gib:.1} GiB RAM",
        crate::proc_stat::cores()
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn find<'a>(cells: &'a [Cell], section: &str, kem: &str, mode: &str, c: usize) -> Option<&'a Cell> {
    cells
        .iter()
        .find(|x| x.section == section && x.kem == kem && x.mode == mode && x.concurrency == c)
}

fn goals(cells: &[Cell], md: &mut String) {
    let rate = |kem: &str| {
        median(
            cells
                .iter()
                .filter(|c| c.section == "handshake-rate" && c.kem == kem)
                .map(|c| c.qps)
                .collect(),
        )
    };
    let cpu = |kem: &str| {
        median(
            cells
                .iter()
                .filter(|c| c.section == "handshake-rate" && c.kem == kem)
                .map(|c| c.server_cpu_us_per_query)
                .collect(),
        )
    };
    let (x, h) = (rate("X25519"), rate("X25519MLKEM768"));
    let (cx, ch) = (cpu("X25519"), cpu("X25519MLKEM768"));
    let _ = writeln!(md, "## Goals\n");
    let _ = writeln!(
        md,
        "- **Hybrid handshake rate** (closed-loop fresh DoT handshakes, 8 workers, ECDSA P-256, rounds \
         alternating): X25519 {x:.0}/s, X25519MLKEM768 {h:.0}/s → hybrid/X25519 = **{:.2}** (goal ≥ 0.90, \
         i.e. ≤ 10 % cost: **{}**). Client and server share the 2 cores here, so this rate includes the \
         client's hybrid cost too. Server CPU per handshake+query: X25519 {cx:.0} µs, hybrid {ch:.0} µs: the \
         server alone could do **{:.2}×** as many hybrid handshakes as X25519 ones.",
        h / x,
        if h / x >= 0.9 { "met" } else { "missed" },
        cx / ch,
    );
    for kem in ["X25519MLKEM768", "X25519"] {
        if let Some(c) = cells
            .iter()
            .find(|c| c.section == "DoT" && c.kem == kem && c.concurrency == 10_000)
        {
            let _ = writeln!(
                md,
                "- **10,000 concurrent DoT** ({kem} + {}): batch finished in **{:.2} s** with {} failures \
                 (goal ≤ 1.11 s, no failures: **{}**; the study: 11.1 s for mlkem512+mldsa44).",
                c.cert,
                c.latency_ms / 1000.0,
                c.failures,
                if c.latency_ms <= 1110.0 && c.failures == 0 { "met" } else { "missed" },
            );
        }
    }
    for (kem, c) in [
        ("X25519MLKEM768", 1),
        ("X25519MLKEM768", 100),
        ("X25519", 1),
    ] {
        let (Some(f), Some(r), Some(u)) = (
            find(cells, "connection-modes", kem, "fresh", c),
            find(cells, "connection-modes", kem, "resumption", c),
            find(cells, "connection-modes", kem, "reuse", c),
        ) else {
            continue;
        };
        let _ = writeln!(
            md,
            "- **Session resumption** ({kem}, concurrency {c}): per query, fresh handshake {:.2} ms / {:.0} B / \
             {:.0} µs server CPU; resumed {:.2} ms / {:.0} B / {:.0} µs ({} of the run's handshakes resumed); \
             reused connection {:.2} ms / {:.0} B / {:.0} µs. Resumption saves **{:.0} % of the bytes** and \
             **{:.0} % of the server CPU** per query.",
            f.query_p50_ms, f.wire_bytes_per_query, f.server_cpu_us_per_query,
            r.query_p50_ms, r.wire_bytes_per_query, r.server_cpu_us_per_query, r.tls_resumed,
            u.query_p50_ms, u.wire_bytes_per_query, u.server_cpu_us_per_query,
            (1.0 - r.wire_bytes_per_query / f.wire_bytes_per_query) * 100.0,
            (1.0 - r.server_cpu_us_per_query / f.server_cpu_us_per_query) * 100.0,
        );
    }
    for section in ["DoT", "DoH", "DoQ"] {
        let cpu = |cert: &str| {
            cells
                .iter()
                .find(|c| {
                    c.section == section
                        && c.kem == "X25519MLKEM768"
                        && c.cert == cert
                        && c.concurrency == 1
                })
                .map(|c| c.server_cpu_us_per_query)
        };
        if let (Some(ecdsa), Some(ml_dsa)) = (cpu("ecdsa-p256"), cpu("ml-dsa-44")) {
            let ratio = ml_dsa / ecdsa;
            let _ = writeln!(
                md,
                "- **ML-DSA-44 certificate, server CPU per fresh {section} handshake + query** \
                 (X25519MLKEM768, concurrency 1): {ml_dsa:.0} µs vs ECDSA-P256 {ecdsa:.0} µs = \
                 **{ratio:.2}×** (goal ≤ 1.3×: **{}**; one run; docs/bench/handshakes.md \
                 interleaves the servers query by query, which is steadier).",
                if ratio <= 1.3 { "met" } else { "missed" },
            );
        }
    }
    let _ = writeln!(
        md,
        "- Why resumption saves little here: a TLS 1.3 resumption in rustls is PSK *with* (EC)DHE \
         (psk_dhe_ke), so the hybrid key share is still generated, sent and decapsulated; only the \
         certificate, CertificateVerify and its verification are skipped — small for an ECDSA P-256 \
         certificate. A reused connection is what removes the handshake cost.\n"
    );
}

fn tls_table(cells: &[Cell], paper: &[PaperRow], section: &str, c: usize, md: &mut String) {
    let rows: Vec<&Cell> = cells
        .iter()
        .filter(|x| x.section == section && x.concurrency == c)
        .collect();
    if rows.is_empty() {
        return;
    }
    let what = if c == 1 { "per query" } else { "per batch" };
    let _ = writeln!(
        md,
        "### {section}, concurrency {c} (fresh TLS connection per query; latency and bandwidth {what})\n\n\
         | KEM | DS | DNSSEC | Latency (ms) | Bandwidth (kB) | Client / Server CPU (%) | Memory (%) | query p99 (ms) | server µs/query | failures | paper latency / bandwidth (different machine) |\n\
         |---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for x in rows {
        let p = paper_match(paper, x).map_or(String::new(), |p| {
            format!("{:.2} / {:.2} (T{})", p.latency_ms, p.bandwidth_kb, p.table)
        });
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.2} | {:.2} | {:.2} / {:.2} | {:.3} | {:.2} | {:.0} | {} | {p} |",
            x.kem,
            x.cert,
            x.dnssec,
            x.latency_ms,
            x.bandwidth_kb,
            x.client_cpu_pct,
            x.server_cpu_pct,
            x.memory_pct,
            x.query_p99_ms,
            x.server_cpu_us_per_query,
            x.failures
        );
    }
    md.push('\n');
}

fn dnssec_table(cells: &[Cell], paper: &[PaperRow], md: &mut String) {
    let rows: Vec<&Cell> = cells.iter().filter(|x| x.section == "DNSSEC").collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "### DNSSEC (query `www A` with DO=1, EDNS 4096; UDP on one socket per worker, TCP one connection per query)\n\n\
         | DNSSEC | transport | concurrency | Latency (ms) | Bandwidth (kB) | Client / Server CPU (%) | Memory (%) | answer (B) | TC answers | server µs/query | failures | paper (T9, different machine) |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for x in rows {
        let p = paper_match(paper, x).map_or(String::new(), |p| {
            format!("{:.2} ms / {:.2} kB", p.latency_ms, p.bandwidth_kb)
        });
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.2} | {:.2} | {:.2} / {:.2} | {:.3} | {:.0} | {} | {:.1} | {} | {p} |",
            x.dnssec, x.transport, x.concurrency, x.latency_ms, x.bandwidth_kb, x.client_cpu_pct,
            x.server_cpu_pct, x.memory_pct, x.answer_bytes, x.truncated, x.server_cpu_us_per_query, x.failures
        );
    }
    md.push('\n');
}

fn other_table(cells: &[Cell], section: &str, title: &str, md: &mut String) {
    let rows: Vec<&Cell> = cells.iter().filter(|x| x.section == section).collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "### {title}\n\n| mode | KEM | concurrency | query p50 (ms) | query p99 (ms) | queries/s | bytes/query | server µs/query | resumed | failures | load avg |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for x in rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.2} | {:.2} | {:.0} | {:.0} | {:.0} | {} | {} | {:.2} |",
            x.mode,
            x.kem,
            x.concurrency,
            x.query_p50_ms,
            x.query_p99_ms,
            x.qps,
            x.wire_bytes_per_query,
            x.server_cpu_us_per_query,
            x.tls_resumed,
            x.failures,
            x.load_avg
        );
    }
    md.push('\n');
}

fn draw_charts(dir: &Path, cells: &[Cell]) -> Vec<String> {
    let mut written = Vec::new();
    let mut bar = |name: &str, title: &str, unit: &str, items: Vec<(String, f64)>| {
        if items.is_empty() {
            return;
        }
        match charts::bars(&dir.join(name), title, unit, &items) {
            Ok(()) => written.push(name.to_string()),
            Err(e) => tracing::warn!(chart = name, error = %e, "chart not drawn"),
        }
    };
    for section in ["DoT", "DoH", "DoQ"] {
        let c1: Vec<&Cell> = cells
            .iter()
            .filter(|c| c.section == section && c.concurrency == 1)
            .collect();
        let label = |c: &Cell| format!("{} + {}", c.kem, c.cert);
        let lower = section.to_ascii_lowercase();
        bar(
            &format!("{lower}-latency"),
            &format!("{section}: latency per query, fresh connection (ms)"),
            "ms",
            c1.iter().map(|c| (label(c), c.latency_ms)).collect(),
        );
        bar(
            &format!("{lower}-bandwidth"),
            &format!("{section}: bytes per query incl. handshake (kB)"),
            "kB",
            c1.iter().map(|c| (label(c), c.bandwidth_kb)).collect(),
        );
    }
    let dnssec: Vec<&Cell> = cells
        .iter()
        .filter(|c| c.section == "DNSSEC" && c.concurrency == 1)
        .collect();
    let label = |c: &Cell| format!("{} {}", c.dnssec, c.transport);
    bar(
        "dnssec-latency",
        "DNSSEC: latency per query (ms)",
        "ms",
        dnssec.iter().map(|c| (label(c), c.latency_ms)).collect(),
    );
    bar(
        "dnssec-bandwidth",
        "DNSSEC: bytes per query (kB)",
        "kB",
        dnssec.iter().map(|c| (label(c), c.bandwidth_kb)).collect(),
    );
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for c in cells.iter().filter(|c| c.section == "DoT") {
        let label = format!("{} + {}", c.kem, c.cert);
        let point = (c.concurrency as f64, c.latency_ms);
        match series.iter_mut().find(|(l, _)| *l == label) {
            Some((_, pts)) => pts.push(point),
            None => series.push((label, vec![point])),
        }
    }
    if !series.is_empty() {
        let name = "dot-batch-time";
        match charts::lines(
            &dir.join(name),
            "DoT: time to finish N concurrent fresh-connection queries (N = 1: one query)",
            "concurrent queries N",
            "batch time (ms)",
            &series,
        ) {
            Ok(()) => written.push(name.to_string()),
            Err(e) => tracing::warn!(chart = name, error = %e, "chart not drawn"),
        }
    }
    written
}

/// Writes `matrix.csv`, `matrix.json`, `README.md` and the charts into `dir`.
///
/// # Errors
/// I/O errors of the CSV, JSON and markdown files (chart failures are logged and skipped).
/// `skipped` lists configurations whose server did not start.
pub fn write(
    dir: &Path,
    cells: &[Cell],
    opts: &MatrixOptions,
    skipped: &[String],
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut csv = String::from(CSV_HEADER);
    csv.push('\n');
    for c in cells {
        csv.push_str(&csv_row(c));
        csv.push('\n');
    }
    write_atomic(&dir.join("matrix.csv"), csv.as_bytes(), FileMode::Public)?;
    write_atomic(
        &dir.join("matrix.json"),
        serde_json::to_string_pretty(cells)
            .unwrap_or_default()
            .as_bytes(),
        FileMode::Public,
    )?;
    let paper = paper_rows(PAPER_REFERENCE);
    let charts = draw_charts(dir, cells);
    let mut md = String::new();
    let grid = if opts.quick { "--quick" } else { "full grid" };
    let _ = writeln!(
        md,
        "# pqdns-bench matrix ({grid})\n\nMachine: {}. Load average when the cells started: {:.2}–{:.2} \
         (other builds share the 2 cores; compare rows of this run with each other — ratios — rather than \
         with other runs). Concurrency steps: {:?}{}.\n",
        machine(),
        cells.iter().map(|c| c.load_avg).fold(f64::MAX, f64::min),
        cells.iter().map(|c| c.load_avg).fold(0.0, f64::max),
        opts.concurrency,
        if opts.with_10000 { " + 10000 (DoT)" } else { "" },
    );
    let _ = writeln!(
        md,
        "Reproduce: `cargo build --release && target/release/pqdns-bench matrix {}` \
         (the full grid: `pqdns-bench matrix --with-10000`).\n",
        if opts.quick {
            "--quick"
        } else {
            "--with-10000"
        }
    );
    if opts.merge {
        let list = |v: &[String]| {
            if v.is_empty() {
                "all".to_string()
            } else {
                v.join(",")
            }
        };
        let certs: Vec<String> = opts
            .select
            .certs
            .iter()
            .map(|c| c.name().to_string())
            .collect();
        let _ = writeln!(
            md,
            "This report merges a partial re-run into the earlier one: sections {}, groups {}, \
             certificates {}, concurrency {:?} were measured again (side by side in one run) with \
             `pqdns-bench matrix --merge` and these selections; every other cell is from the earlier \
             run (see `load_avg` in matrix.csv).\n",
            list(&opts.select.sections),
            list(&opts.select.kems),
            list(&certs),
            opts.concurrency,
        );
    }
    md.push_str(DEFINITIONS);
    if !skipped.is_empty() {
        let _ = writeln!(md, "**Skipped** (server did not start):\n");
        for s in skipped {
            let _ = writeln!(md, "- {s}");
        }
        md.push('\n');
    }
    goals(cells, &mut md);
    let _ = writeln!(md, "## Tables\n");
    // Every step some cell has (a merged report keeps the earlier run's 10,000 batches).
    let mut steps: Vec<usize> = cells
        .iter()
        .filter(|c| matches!(c.section.as_str(), "DoT" | "DoH" | "DoQ"))
        .map(|c| c.concurrency)
        .collect();
    steps.sort_unstable();
    steps.dedup();
    for c in steps {
        tls_table(cells, &paper, "DoT", c, &mut md);
        tls_table(cells, &paper, "DoH", c, &mut md);
        tls_table(cells, &paper, "DoQ", c, &mut md);
    }
    certificate_table(cells, &mut md);
    dilithium_table(cells, &paper, &mut md);
    dnssec_table(cells, &paper, &mut md);
    tls_table(cells, &paper, "DNSSEC+DoT", 1, &mut md);
    other_table(
        cells,
        "connection-modes",
        "DoT: fresh handshake vs session resumption vs reused connection (ECDSA P-256)",
        &mut md,
    );
    other_table(cells, "handshake-rate", "DoT handshake rate (closed loop, 8 workers, fresh connection per query; queries/s = handshakes/s)", &mut md);
    let _ = writeln!(md, "## Charts\n");
    for c in &charts {
        let _ = writeln!(md, "![{c}]({c}.svg) ([PNG]({c}.png))\n");
    }
    md.push_str(PAPER_NOTE);
    write_atomic(&dir.join("README.md"), md.as_bytes(), FileMode::Public)
}

const DEFINITIONS: &str = "## Definitions (ours vs the study's)\n\n\
- **Latency (ms)**, concurrency 1: median time of one query on a new TCP connection with a full TLS \
handshake (UDP: one datagram each way) over a closed-loop run of 0.5 s (`--quick`) or 2 s, measured \
inside one long-running client. The study timed a \
fresh `dig` process per query, so its ~9 ms includes process start-up; ours is the network exchange only.\n\
- **Latency (ms)**, concurrency N > 1: median (over the batches) time until all N concurrent queries, each \
on its own new connection, are answered — the study's multi-client definition.\n\
- **Bandwidth (kB = 1024 B)**: bytes counted at the socket in both directions (TLS records, HTTP/2 frames \
included) plus *estimated* IP/TCP/UDP headers (20 B IPv4 + 32 B TCP with timestamps per packet; SYN, \
SYN-ACK, ACK, FIN×2, ACK×2 per connection; no link layer); per query at N = 1, per batch at N > 1. The study \
counted captured frames incl. link-layer headers. DoQ: the UDP payloads quinn counts on each client \
connection (both ways, its CONNECTION_CLOSE not included) plus 28 B per datagram. QUIC pads every \
datagram that carries an Initial packet to 1200 bytes (RFC 9000 §14.1). Path-MTU discovery is off \
in pqdns's DoQ server and clients (`pqdns_net::doq_client_config`): quinn's probes, up to 1452 bytes on \
every new connection, doubled the bytes of a one-query connection (`pqdns-bench load --transport doq \
--mode fresh` against an ECDSA-certified server: 15.2 kB per query with probing on both sides, 7.0 kB \
without).\n\
- **connection-modes** and **handshake-rate** rows: closed loop with N workers for a fixed time; \
latency is per query (p50), bytes and server CPU per query.\n\
- **Client CPU (%)**: the load generator's CPU time ÷ wall time ÷ cores, over all runs of the cell. **Server CPU (%)**: peak over \
100 ms samples of pqdns-server's CPU utilisation ÷ cores (the study's peak definition). **server µs/query**: \
server CPU time ÷ answered queries — the number to compare across machines.\n\
- **Memory (%)**: pqdns-server's peak sampled RSS ÷ MemTotal.\n\
- KEM names are TLS named groups: we have X25519, secp256r1 and the hybrids X25519MLKEM768 and \
secp256r1MLKEM768 (ML-KEM-768, NIST level 3); the study's mlkem512/hqc/ffdhe groups come from OQS \
OpenSSL and are not in rustls. SPHINCS+ is SHA2-128s here (7856-byte signatures; the study's 128f \
has 17088) because pqdns's default algorithm-number profile has no number for 128f; its row is \
matched with the study's sphincssha2128fsimple. ML-DSA-44/65/87 certificates (FIPS 204; the study's \
Dilithium2/3/5 levels, its `mldsa44/65/87`) are issued by rcgen 0.14 with aws-lc-rs and signed and \
verified by rustls through rustls-post-quantum.\n\n";

const PAPER_NOTE: &str = "## The study's numbers\n\n\
`paper-reference.csv` holds Tables 3–15 of *pqc-dns-system-level-study* (OQS-BIND + OQS OpenSSL in \
Docker, **different machine**), one row per printed line: table, protocol, NIST level, concurrency, category, \
DNSSEC algorithm, KEM, signature, latency (ms), bandwidth (kB), client / server CPU (%), memory (%). The \
tables above show the study's latency / bandwidth beside ours where the configuration names are the same \
(e.g. x25519 + rsa2048); use ratios within each source, not absolute values across them.\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_reference_has_every_table_with_the_printed_row_counts() {
        let rows = paper_rows(PAPER_REFERENCE);
        let count = |t| rows.iter().filter(|r| r.table == t).count();
        let expected = [
            (3, 20),
            (4, 20),
            (5, 16),
            (6, 16),
            (7, 20),
            (8, 20),
            (9, 6),
            (10, 12),
            (11, 12),
            (12, 20),
            (13, 20),
            (14, 20),
            (15, 20),
        ];
        for (t, n) in expected {
            assert_eq!(count(t), n, "table {t}");
        }
        // Spot checks against the paper's text.
        let r = rows
            .iter()
            .find(|r| r.table == 3 && r.kem == "x25519" && r.signature == "rsa2048")
            .unwrap();
        assert_eq!((r.latency_ms, r.bandwidth_kb), (9.17, 3.71));
        let r = rows
            .iter()
            .find(|r| r.table == 15 && r.kem == "mlkem512" && r.signature == "mldsa44")
            .unwrap();
        assert_eq!((r.latency_ms, r.concurrency), (11097.96, 10000));
        let r = rows
            .iter()
            .find(|r| r.table == 9 && r.dnssec == "mldsa44")
            .unwrap();
        assert_eq!((r.latency_ms, r.bandwidth_kb), (6.83, 3.46));
    }

    #[test]
    fn cells_match_paper_rows_by_name() {
        let rows = paper_rows(PAPER_REFERENCE);
        let cell = Cell {
            section: "DoT".into(),
            kem: "X25519".into(),
            cert: "rsa2048".into(),
            concurrency: 100,
            ..Cell::default()
        };
        assert_eq!(paper_match(&rows, &cell).unwrap().table, 12);
        let dnssec = Cell {
            section: "DNSSEC".into(),
            transport: "udp".into(),
            dnssec: "ML-DSA-44".into(),
            concurrency: 1,
            ..Cell::default()
        };
        assert_eq!(paper_match(&rows, &dnssec).unwrap().latency_ms, 6.83);
    }
}
