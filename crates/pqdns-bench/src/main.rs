//! `pqdns-bench`: generate benchmark zones and write measurement reports.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use pqdns_bench::load::{self, ConnectionMode, Limit, LoadConfig, LoadTransport};
use pqdns_bench::query_source::{self, QueryOptions};
use pqdns_bench::tls_client::{self, TlsClientOptions};
use pqdns_bench::{
    fragmentation_report, genzone, handshake_report, lifecycle_report, matrix, mtl_report,
    recursor_report, resolver_report, server_process, signing_report,
};
use pqdns_core::atomic_file::{write_atomic, FileMode};
use pqdns_core::dnssec::Algorithm;
use pqdns_core::{outln, stdout, RrType};

/// Benchmarks and reports for pqdns.
#[derive(Parser)]
#[command(name = "pqdns-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Load generator for any DNS server (pqdns-server, NSD, Knot, BIND): UDP, TCP, DoT, DoH, DoQ;
    /// reports latency percentiles, throughput, errors, bytes on the wire per query (counted
    /// at the socket, TLS records included; IP/TCP headers estimated), client CPU and, with
    /// --server-pid, server CPU and peak RSS from /proc.
    Load(Box<LoadArgs>),
    /// The SIDN method: replay a query log with its timing, X % of the queries first over UDP
    /// then again over TCP (X = 0..100), and all over TCP; report server CPU per step, a linear
    /// fit with R² and the cut-over point. Without --target a pqdns-server is started here.
    Replay {
        /// Server address (UDP and TCP); needs --server-pid.
        #[arg(long, short, requires = "server_pid")]
        target: Option<std::net::SocketAddr>,
        /// Server process to sample.
        #[arg(long)]
        server_pid: Option<u32>,
        /// Query log: "TIME NAME TYPE" lines, or "NAME TYPE" spread at --rate.
        #[arg(long, conflicts_with = "generate")]
        log: Option<PathBuf>,
        /// Generate a log of N queries for host names of the started server's zone at --rate.
        #[arg(long, default_value_t = 20_000)]
        generate: usize,
        /// Queries per second for logs without times.
        #[arg(long, default_value_t = 5_000.0)]
        rate: f64,
        /// Replay speed factor (2 = twice as fast as logged).
        #[arg(long, default_value_t = 1.0)]
        speed: f64,
        /// TCP percentages.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "0,10,20,30,40,50,60,70,80,90,100"
        )]
        steps: Vec<u32>,
        /// Set the DO bit.
        #[arg(long)]
        dnssec: bool,
        /// Output prefix: writes PREFIX.csv, PREFIX.json, PREFIX.svg and PREFIX.png.
        #[arg(long, default_value = "docs/bench/replay")]
        output: PathBuf,
    },
    /// The PQC-DNS study's benchmark grid (TLS key exchange × certificate × DNSSEC algorithm ×
    /// transport × concurrency) against pqdns-server instances started here on 127.0.0.1;
    /// writes CSV, JSON, a README with the study's columns and charts to --output.
    Matrix {
        /// Reduced grid that finishes in a few minutes on 2 cores.
        #[arg(long)]
        quick: bool,
        /// Also run 10,000 concurrent DoT queries (X25519MLKEM768 and X25519, ECDSA P-256).
        #[arg(long)]
        with_10000: bool,
        /// Concurrency steps [default: 1,100 with --quick, else 1,100,1000].
        #[arg(long, value_delimiter = ',')]
        concurrency: Option<Vec<usize>>,
        /// pqdns-server binary [default: next to this executable].
        #[arg(long)]
        server: Option<PathBuf>,
        /// Output directory [default: docs/bench/matrix for the full grid; with --quick
        /// target/pqdns-bench/matrix-quick, so the demo does not overwrite the committed report].
        #[arg(long)]
        output: Option<PathBuf>,
        /// Measure nothing: redraw README.md and the charts from OUTPUT/matrix.json (give
        /// the selection and --merge of the run that wrote it, for its note).
        #[arg(long)]
        report_only: bool,
        /// Measure only these sections (DoT, DoH, DoQ, DNSSEC, DNSSEC+DoT, connection-modes,
        /// handshake-rate) [default: all].
        #[arg(long, value_delimiter = ',')]
        sections: Vec<String>,
        /// Measure only TLS cells offering these named groups (e.g. X25519,X25519MLKEM768)
        /// [default: all].
        #[arg(long, value_delimiter = ',')]
        kems: Vec<String>,
        /// Measure only TLS cells with these certificates (ecdsa-p256, ed25519, rsa2048,
        /// ml-dsa-44, ml-dsa-65, ml-dsa-87) [default: all].
        #[arg(long, value_delimiter = ',')]
        certs: Vec<String>,
        /// Keep the cells of OUTPUT/matrix.json this run does not measure again (re-run part
        /// of the grid into the full report).
        #[arg(long)]
        merge: bool,
    },
    /// Reflection and amplification: streams of queries from one address (as a spoofing
    /// attacker sends them) to a UDP server, per query kind (apex DNSKEY, apex ANY, NXDOMAIN
    /// under the apex with random labels, DNSKEY with the fragmentation option), and bytes out
    /// ÷ bytes in. Prints CSV (with a header unless --no-header).
    Amplification {
        /// Server address (UDP).
        #[arg(long, short)]
        target: std::net::SocketAddr,
        /// The zone's apex.
        #[arg(long)]
        zone: String,
        /// Queries per second of each stream.
        #[arg(long, default_value_t = 5000)]
        rate: u32,
        /// Seconds per stream.
        #[arg(long, default_value_t = 4.0)]
        seconds: f64,
        /// Also run each stream with a valid server cookie (learnt first).
        #[arg(long)]
        with_cookies: bool,
        /// Also run each stream with a client cookie only (8 random bytes, no server cookie):
        /// what a spoofing attacker can add to get our server cookie reflected too.
        #[arg(long)]
        with_client_cookies: bool,
        /// Label for the first CSV column (e.g. the server and its settings).
        #[arg(long, default_value = "server")]
        label: String,
        /// Leave out the CSV header.
        #[arg(long)]
        no_header: bool,
    },
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
    /// Zone-maintenance report: CPU and time to absorb a one-record change incrementally
    /// against re-signing the whole zone, and IXFR against AXFR bytes (docs/bench/lifecycle.md).
    Lifecycle {
        /// Zone sizes, host records.
        #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
        sizes: Vec<usize>,
        /// Algorithms (names as in `pqdns-zone algorithms`).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "ECDSAP256SHA256,ML-DSA-44,Falcon-512"
        )]
        algorithms: Vec<String>,
        /// Output prefix: writes PREFIX.csv, PREFIX.json and PREFIX-{cpu,bytes}.{svg,png}.
        #[arg(long, default_value = "docs/bench/lifecycle")]
        output: PathBuf,
    },
    /// MTL-mode report: condensed and full signature sizes and verification cost (cached
    /// ladder or not) per series size, from the core API; per delegation zone and algorithm,
    /// signing and verification time, signed size, and pqdns-server's answers (referrals, DS,
    /// NXDOMAIN: bytes and the share within 1232). Writes PREFIX.csv (zones),
    /// PREFIX-series.csv, PREFIX.json after every step and PREFIX-size/-answers/-fit/
    /// -signatures.svg/.png at the end. The full run takes minutes; `--quick` seconds.
    Mtl {
        /// A run of seconds (20 delegations, ECDSA / ML-DSA-44 / MTL-SHA2, series up to 1000
        /// leaves): for checking the tool, not for numbers.
        #[arg(long)]
        quick: bool,
        /// Delegations of the generated zones, one zone each (default: 20,1500, or 20 with
        /// --quick).
        #[arg(long, value_delimiter = ',')]
        delegations: Vec<usize>,
        /// Zone algorithms (names as in `pqdns-zone algorithms`; default: ECDSAP256SHA256,
        /// ML-DSA-44, Falcon-512, ML-DSA-MTL-44, FL-DSA-MTL-512, SLH-DSA-MTL-SHA2-128s,
        /// SLH-DSA-MTL-SHA2-128s-2026).
        #[arg(long, value_delimiter = ',')]
        algorithms: Vec<String>,
        /// Output prefix.
        #[arg(long, default_value = "docs/bench/mtl")]
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
    /// Recursor report (docs/bench/recursor.md): pqdns-resolver beside unbound on one
    /// hierarchy served by in-process pqdns-servers on port 53 of 127.0.4.x (run as root):
    /// resolver CPU per validated cache hit over UDP and DoT and per NXDOMAIN synthesised from
    /// cached NSEC records (RFC 8198) over UDP, both resolvers on one thread, and cold
    /// validated resolution time and bytes per leaf algorithm with and without ARRF; CSV,
    /// JSON, Markdown, charts.
    Recursor {
        /// Seconds of each measured load run.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Rounds (each measures both resolvers over UDP and DoT).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Load generator workers (closed loop); each level listed is measured.
        #[arg(long, value_delimiter = ',', default_value = "4,32")]
        concurrency: Vec<usize>,
        /// Cold resolutions per algorithm and fragmentation setting.
        #[arg(long, default_value_t = 20)]
        cold: usize,
        /// Output prefix: writes PREFIX.md, PREFIX.csv, PREFIX.json and the charts.
        #[arg(long, default_value = "docs/bench/recursor")]
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
    /// Fresh-connection report: one query per new connection (full TLS 1.3 handshake) over DoT
    /// and DoQ through a delay shim at each RTT, per TLS certificate algorithm, against
    /// pqdns-server child processes (built next to this binary): client time and server CPU
    /// per query.
    Handshakes {
        /// Certificate algorithms (ecdsa-p256, ed25519, rsa2048, ml-dsa-44, ml-dsa-65,
        /// ml-dsa-87).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "ecdsa-p256,ml-dsa-44,ml-dsa-65,ml-dsa-87"
        )]
        certs: Vec<String>,
        /// Round-trip times to emulate, milliseconds.
        #[arg(long, value_delimiter = ',', default_value = "0,20")]
        rtt: Vec<u64>,
        /// Queries per cell.
        #[arg(long, default_value_t = 30)]
        queries: usize,
        /// Output prefix: writes PREFIX.csv and PREFIX.json.
        #[arg(long, default_value = "docs/bench/handshakes")]
        output: PathBuf,
    },
    /// Soak: thousands of DoT and DoH clients (steady, idle, reconnecting) for minutes against
    /// one server, with RSS and open descriptors of --pid processes sampled each second;
    /// prints a CSV row per second, then a summary on stderr (benches/soak/run.sh).
    Soak(Box<SoakArgs>),
}

#[derive(Args)]
struct SoakArgs {
    /// DoT server address.
    #[arg(long)]
    dot: std::net::SocketAddr,
    /// DoH server address (POST to /dns-query over HTTP/2).
    #[arg(long)]
    doh: std::net::SocketAddr,
    /// Concurrent clients (half DoT, half DoH).
    #[arg(long, default_value_t = 10_000)]
    clients: usize,
    /// Seconds to run.
    #[arg(long, default_value_t = 600)]
    seconds: u64,
    /// Seconds over which clients start.
    #[arg(long, default_value_t = 60)]
    ramp: u64,
    /// Clients per source /24 (loopback 127.1.0.0/24 and up).
    #[arg(long, default_value_t = 25)]
    per_prefix: usize,
    /// Question names (type A), asked in turn.
    #[arg(long, value_delimiter = ',', default_value = "www.example.com.")]
    qname: Vec<String>,
    /// Set RD (for a resolver).
    #[arg(long)]
    rd: bool,
    /// Process to sample, LABEL=PID (repeatable).
    #[arg(long)]
    pid: Vec<String>,
}

#[derive(Args)]
struct LoadArgs {
    /// Server address, e.g. 127.0.0.1:5353 or [::1]:853.
    #[arg(long, short)]
    target: std::net::SocketAddr,
    /// Transport.
    #[arg(long, value_enum, default_value = "udp")]
    transport: LoadTransport,
    /// fresh: new connection and TLS handshake per query; reuse: one connection per worker;
    /// resumption: new connection per query resuming the TLS session.
    #[arg(long, value_enum, default_value = "reuse")]
    mode: ConnectionMode,
    /// Concurrent workers, each with one query outstanding.
    #[arg(long, short, default_value_t = 1)]
    concurrency: usize,
    /// Fixed total rate, queries/s (latency counted from the scheduled send time). Without
    /// it: closed loop.
    #[arg(long)]
    rate: Option<f64>,
    /// Stop after this many queries.
    #[arg(long, short = 'n', conflicts_with = "duration")]
    count: Option<u64>,
    /// Stop after this many seconds [default: 10 when --count is not given].
    #[arg(long, short)]
    duration: Option<f64>,
    /// dnsperf-format query file: one "NAME TYPE" per line, # comments.
    #[arg(long, short = 'f', conflicts_with_all = ["qname", "generate"])]
    queries: Option<PathBuf>,
    /// Single query name (with --qtype).
    #[arg(long)]
    qname: Option<String>,
    /// Query type for --qname and --generate.
    #[arg(long, default_value = "A")]
    qtype: String,
    /// Generate N names host0.ORIGIN … (see gen-zone --hosts); ORIGIN from --origin.
    #[arg(long, value_name = "N")]
    generate: Option<usize>,
    /// Origin of generated names.
    #[arg(long, default_value = "example.com.")]
    origin: String,
    /// Set the DNSSEC OK bit.
    #[arg(long)]
    dnssec: bool,
    /// Set the RD bit (recursion desired): for recursive resolvers such as pqdns-resolver or
    /// unbound.
    #[arg(long)]
    recursion_desired: bool,
    /// EDNS(0) UDP payload size, bytes; 0 sends no OPT record.
    #[arg(long, default_value_t = 1232)]
    edns_size: u16,
    /// Offer only this TLS named group (X25519, secp256r1, secp384r1, X25519MLKEM768,
    /// secp256r1MLKEM768, MLKEM768, MLKEM1024) [default: rustls's list, X25519MLKEM768 first].
    #[arg(long)]
    group: Option<String>,
    /// Offer only post-quantum/hybrid named groups.
    #[arg(long)]
    pq_only: bool,
    /// Accept any server certificate (the handshake signature is still checked).
    #[arg(long)]
    insecure: bool,
    /// PEM file of CA certificates (or the server's self-signed one) to trust.
    #[arg(long, value_name = "FILE")]
    ca: Option<PathBuf>,
    /// TLS server name (SNI and verification) [default: the target's IP address].
    #[arg(long)]
    server_name: Option<String>,
    /// DoH URI path.
    #[arg(long, default_value = "/dns-query")]
    doh_path: String,
    /// DoQ: UDP payload bytes of this client's QUIC datagrams (1200..=65527; 1452 lets a
    /// server with an ML-DSA-44 certificate answer a round trip sooner where the path carries
    /// it).
    #[arg(long, value_name = "BYTES", default_value_t = 1200,
          value_parser = clap::value_parser!(u16).range(1200..=65527))]
    doq_datagram_size: u16,
    /// Per-query timeout, seconds (connect + handshake + exchange).
    #[arg(long, default_value_t = 5.0)]
    timeout: f64,
    /// Server process ID: sample its CPU time and RSS from /proc during the run.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value = "json")]
    format: OutputFormat,
    /// Hide the progress bar.
    #[arg(long)]
    quiet: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum OutputFormat {
    Json,
    Csv,
}

impl LoadArgs {
    fn into_config(self) -> Result<LoadConfig, String> {
        let queries = if let Some(path) = &self.queries {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            query_source::parse_dnsperf(&text, 1_000_000)
                .map_err(|e| format!("{}: {e}", path.display()))?
        } else if let Some(n) = self.generate {
            let origin = query_source::parse_query(&self.origin, None)?.qname;
            let qtype = query_source::parse_query(&self.origin, Some(&self.qtype))?.qtype;
            query_source::generated(&origin, n, qtype)?
        } else {
            let name = self.qname.as_deref().unwrap_or(&self.origin);
            vec![query_source::parse_query(name, Some(&self.qtype))?]
        };
        let limit = match (self.count, self.duration) {
            (Some(n), _) => Limit::Count(n),
            (None, Some(d)) if d > 0.0 && d.is_finite() => {
                Limit::Duration(Duration::from_secs_f64(d))
            }
            (None, Some(_)) => return Err("--duration must be positive".into()),
            (None, None) => Limit::Duration(Duration::from_secs(10)),
        };
        if !(self.timeout > 0.0 && self.timeout.is_finite()) {
            return Err("--timeout must be positive".into());
        }
        Ok(LoadConfig {
            target: self.target,
            transport: self.transport,
            mode: self.mode,
            concurrency: self.concurrency,
            rate: self.rate,
            limit,
            queries,
            edns: QueryOptions {
                udp_payload: (self.edns_size > 0).then_some(self.edns_size),
                dnssec_ok: self.dnssec,
                recursion_desired: self.recursion_desired,
            },
            tls: TlsClientOptions {
                group: self
                    .group
                    .as_deref()
                    .map(tls_client::parse_group)
                    .transpose()?,
                pq_only: self.pq_only,
                danger_accept_any_certificate: self.insecure,
                ca_file: self.ca,
                server_name: self.server_name,
            },
            doh_path: self.doh_path,
            doq_datagram_size: self.doq_datagram_size,
            timeout: Duration::from_secs_f64(self.timeout),
            server_pid: self.server_pid,
            progress: !self.quiet,
        })
    }
}

fn run_amplification(
    target: std::net::SocketAddr,
    zone: &str,
    rate: u32,
    seconds: f64,
    cookies: &[pqdns_bench::amplification::CookieUse],
    label: &str,
    no_header: bool,
) -> ExitCode {
    use pqdns_bench::amplification::{reflect, CookieUse, Probe};
    let Ok(apex) = zone.parse::<pqdns_core::Name>() else {
        eprintln!("pqdns-bench: --zone {zone:?} is not a domain name");
        return ExitCode::from(2);
    };
    let probe = |label: &str, qtype, random_label, fragmentation| Probe {
        label: label.into(),
        qname: apex.clone(),
        qtype,
        random_label,
        fragmentation,
        cookie: CookieUse::None,
    };
    let kinds = [
        probe("DNSKEY", RrType::DNSKEY, false, false),
        probe("ANY", RrType::ANY, false, false),
        probe("NXDOMAIN", RrType::A, true, false),
        probe("DNSKEY+fragment option", RrType::DNSKEY, false, true),
    ];
    let probes: Vec<Probe> = cookies
        .iter()
        .flat_map(|&cookie| {
            kinds.iter().map(move |p| Probe {
                label: match cookie {
                    CookieUse::None => p.label.clone(),
                    CookieUse::ClientOnly => format!("{} (client cookie only)", p.label),
                    CookieUse::Valid => format!("{} (valid cookie)", p.label),
                },
                cookie,
                ..p.clone()
            })
        })
        .collect();
    if !no_header {
        outln!(
            "server,probe,rate_qps,queries,bytes_in,responses,truncated,bytes_out,ratio,ip_ratio"
        );
    }
    let duration = std::time::Duration::from_secs_f64(seconds);
    for p in &probes {
        match reflect(target, p, rate, duration) {
            Ok(r) => outln!(
                "{label},{},{rate},{},{},{},{},{},{:.3},{:.3}",
                r.probe,
                r.queries,
                r.bytes_in,
                r.responses,
                r.truncated,
                r.bytes_out,
                r.ratio,
                r.ip_ratio
            ),
            Err(e) => eprintln!("pqdns-bench: {label} {}: {e}", p.label),
        }
    }
    ExitCode::SUCCESS
}

fn run_load(args: LoadArgs) -> ExitCode {
    let format = args.format;
    let cfg = match args.into_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("pqdns-bench load: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("pqdns-bench load: tokio runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(load::run(cfg)) {
        Ok(report) => {
            match format {
                OutputFormat::Json => outln!(
                    "{}",
                    serde_json::to_string_pretty(&report).unwrap_or_default()
                ),
                OutputFormat::Csv => {
                    outln!("{}\n{}", load::LoadReport::CSV_HEADER, report.csv_row())
                }
            }
            if report.answered == 0 {
                return ExitCode::from(1);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pqdns-bench load: {e}");
            ExitCode::from(2)
        }
    }
}

fn run_soak(args: SoakArgs) -> ExitCode {
    let mut queries = Vec::new();
    for name in &args.qname {
        match pqdns_bench::query_source::parse_query(name, Some("A")) {
            Ok(q) => queries.push(q),
            Err(e) => {
                eprintln!("pqdns-bench soak: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let mut processes = Vec::new();
    for p in &args.pid {
        match p.split_once('=').map(|(l, n)| (l, n.parse::<u32>())) {
            Some((label, Ok(pid))) => processes.push((label.to_string(), pid)),
            _ => {
                eprintln!("pqdns-bench soak: --pid wants LABEL=PID, not {p:?}");
                return ExitCode::from(2);
            }
        }
    }
    let cfg = pqdns_bench::soak::SoakConfig {
        dot: args.dot,
        doh: args.doh,
        clients: args.clients,
        duration: Duration::from_secs(args.seconds),
        ramp: Duration::from_secs(args.ramp),
        per_prefix: args.per_prefix,
        queries,
        edns: pqdns_bench::query_source::QueryOptions {
            udp_payload: Some(1232),
            dnssec_ok: true,
            recursion_desired: args.rd,
        },
        tls: pqdns_bench::tls_client::TlsClientOptions {
            danger_accept_any_certificate: true,
            ..Default::default()
        },
        processes,
    };
    let labels: Vec<String> = cfg.processes.iter().map(|(l, _)| l.clone()).collect();
    let mut header = "second,answers,errors,timeouts,handshakes,open".to_string();
    for l in &labels {
        header.push_str(&format!(",{l}_rss_kib,{l}_fds"));
    }
    outln!("{header}");
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("pqdns-bench soak: tokio runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let print = |s: &pqdns_bench::soak::Sample| {
        let mut line = format!(
            "{},{},{},{},{},{}",
            s.second, s.answers, s.errors, s.timeouts, s.handshakes, s.open
        );
        for (rss, fds) in &s.processes {
            line.push_str(&format!(",{rss},{fds}"));
        }
        outln!("{line}");
    };
    match runtime.block_on(pqdns_bench::soak::run(cfg, print)) {
        Ok(report) => {
            let summary = serde_json::json!({
                "answers": report.answers,
                "errors": report.errors,
                "timeouts": report.timeouts,
                "slower_than_1s": report.slow,
                "latency_ms_p50_p99_p999_max": report.latency_ms,
                "error_kinds": report.error_kinds,
            });
            eprintln!("{summary}");
            runtime.shutdown_timeout(Duration::from_secs(1));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pqdns-bench soak: {e}");
            ExitCode::from(2)
        }
    }
}

struct MatrixArgs {
    quick: bool,
    with_10000: bool,
    concurrency: Option<Vec<usize>>,
    server: Option<PathBuf>,
    output: Option<PathBuf>,
    report_only: bool,
    select: matrix::Selection,
    merge: bool,
}

/// Where `matrix` writes unless told: the committed report for the full grid, a scratch
/// directory for the quick demo.
fn matrix_output(quick: bool, output: Option<PathBuf>) -> PathBuf {
    output.unwrap_or_else(|| {
        PathBuf::from(if quick {
            "target/pqdns-bench/matrix-quick"
        } else {
            "docs/bench/matrix"
        })
    })
}

fn run_matrix(a: MatrixArgs) -> ExitCode {
    use std::io::IsTerminal as _;
    let MatrixArgs {
        quick,
        with_10000,
        concurrency,
        server,
        output,
        report_only,
        select,
        merge,
    } = a;
    let output = matrix_output(quick, output);
    if report_only {
        let mut opts = matrix::MatrixOptions::new(quick, PathBuf::new(), output);
        opts.with_10000 = with_10000;
        opts.select = select;
        opts.merge = merge;
        if let Some(c) = concurrency {
            opts.concurrency = c;
        }
        return match matrix::report_only(&opts) {
            Ok(cells) => {
                outln!("{} cells redrawn in {}", cells.len(), opts.output.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("pqdns-bench matrix: {e}");
                ExitCode::from(1)
            }
        };
    }
    let Some(binary) = server.or_else(|| server_process::sibling_binary("pqdns-server")) else {
        eprintln!("pqdns-bench matrix: pqdns-server not found next to pqdns-bench; build it (cargo build --release) or pass --server");
        return ExitCode::from(2);
    };
    let mut opts = matrix::MatrixOptions::new(quick, binary, output);
    opts.with_10000 = with_10000;
    opts.select = select;
    opts.merge = merge;
    if let Some(c) = concurrency {
        opts.concurrency = c;
    }
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {elapsed} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("pqdns-bench matrix: tokio runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(matrix::run(&opts, |done, total, cell| {
        let line = format!(
            "{} {} {} {} {} c={} {:.2} ms {:.2} kB fail={}",
            cell.section,
            cell.transport,
            cell.mode,
            cell.kem,
            if cell.dnssec.is_empty() {
                &cell.cert
            } else {
                &cell.dnssec
            },
            cell.concurrency,
            cell.latency_ms,
            cell.bandwidth_kb,
            cell.failures
        );
        match &bar {
            Some(b) => {
                b.set_length(total as u64);
                b.set_position(done as u64);
                b.set_message(line);
            }
            None => eprintln!("[{done}/{total}] {line}"),
        }
    }));
    if let Some(b) = bar {
        b.finish();
    }
    match result {
        Ok(cells) => {
            outln!("{} cells written to {}", cells.len(), opts.output.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pqdns-bench matrix: {e}");
            ExitCode::from(1)
        }
    }
}

struct ReplayArgs {
    target: Option<std::net::SocketAddr>,
    server_pid: Option<u32>,
    log: Option<PathBuf>,
    generate: usize,
    rate: f64,
    speed: f64,
    steps: Vec<u32>,
    dnssec: bool,
    output: PathBuf,
}

fn run_replay(a: ReplayArgs) -> ExitCode {
    use pqdns_bench::replay;
    let fail = |e: String| {
        eprintln!("pqdns-bench replay: {e}");
        ExitCode::from(2)
    };
    let text = match &a.log {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => return fail(format!("{}: {e}", path.display())),
        },
        None => (0..a.generate)
            .map(|i| {
                format!(
                    "host{}.{} A\n",
                    i % server_process::HOSTS,
                    server_process::ORIGIN
                )
            })
            .collect(),
    };
    let log = match replay::parse_log(&text, a.rate, 10_000_000) {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    let started;
    let (target, pid) = match (a.target, a.server_pid) {
        (Some(t), Some(p)) => (t, p),
        _ => {
            let Some(binary) = server_process::sibling_binary("pqdns-server") else {
                return fail(
                    "pqdns-server not found next to pqdns-bench; pass --target and --server-pid"
                        .into(),
                );
            };
            let spec = server_process::ServerSpec {
                dnssec: Some("ECDSAP256SHA256".into()),
                cert: server_process::CertAlgorithm::EcdsaP256,
                policy: "hybrid-preferred",
            };
            started = match server_process::ServerProcess::start(&binary, &spec) {
                Ok(s) => s,
                Err(e) => return fail(e.to_string()),
            };
            (started.dns, started.pid())
        }
    };
    let edns = QueryOptions {
        udp_payload: Some(1232),
        dnssec_ok: a.dnssec,
        recursion_desired: false,
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => return fail(e.to_string()),
    };
    let report = runtime.block_on(replay::run(
        replay::Endpoints {
            udp: target,
            tcp: target,
        },
        pid,
        &log,
        &a.steps,
        a.speed,
        edns,
    ));
    let csv = report.to_csv();
    if let (Some(fit), Some(tcp_only)) = (report.fit, report.steps.last()) {
        let points: Vec<(f64, f64)> = report
            .steps
            .iter()
            .filter_map(|s| {
                s.tcp_percent
                    .map(|p| (f64::from(p), s.server_cpu_us_per_query))
            })
            .collect();
        let title = format!(
            "Server CPU per query vs share retried over TCP (R² = {:.3}, cut-over {:.0} %)",
            fit.r_squared,
            report.cut_over_percent.unwrap_or(f64::NAN)
        );
        if let Err(e) = pqdns_bench::charts::fit(
            &a.output,
            &title,
            ("% of queries UDP then TCP", "server CPU µs per query"),
            &points,
            (fit.intercept, fit.slope),
            ("TCP only", tcp_only.server_cpu_us_per_query),
        ) {
            eprintln!("pqdns-bench replay: chart: {e}");
        }
    }
    if let Some(fit) = report.fit {
        eprintln!(
            "fit: {:.2} + {:.4} µs per TCP percent, R² {:.3}; cut-over at {:.1} %",
            fit.intercept,
            fit.slope,
            fit.r_squared,
            report.cut_over_percent.unwrap_or(f64::NAN)
        );
    }
    write_report(&a.output, &csv, &report)
}

/// Writes `OUTPUT.csv` and `OUTPUT.json` (atomically).
fn write_files<T: serde::Serialize>(
    output: &std::path::Path,
    csv: &str,
    rows: &T,
) -> std::io::Result<()> {
    let json = serde_json::to_string_pretty(rows).unwrap_or_default();
    write_atomic(
        &output.with_extension("csv"),
        csv.as_bytes(),
        FileMode::Public,
    )
    .and_then(|()| {
        write_atomic(
            &output.with_extension("json"),
            json.as_bytes(),
            FileMode::Public,
        )
    })
}

fn write_report<T: serde::Serialize>(output: &std::path::Path, csv: &str, rows: &T) -> ExitCode {
    if let Err(e) = write_files(output, csv, rows) {
        eprintln!("pqdns-bench: {}: {e}", output.display());
        return ExitCode::from(2);
    }
    outln!("{}", csv.trim_end_matches('\n'));
    ExitCode::SUCCESS
}

/// The algorithms named, or `None` after saying which name is unknown.
fn algorithms_named(names: &[String]) -> Option<Vec<Algorithm>> {
    names
        .iter()
        .map(|name| {
            let alg = Algorithm::from_name(name);
            if alg.is_none() {
                eprintln!("pqdns-bench: unknown algorithm {name:?}");
            }
            alg
        })
        .collect()
}

fn main() -> ExitCode {
    let code = run(Cli::parse().command);
    // A reader that closed the pipe is not a failure; a full disk under `> file` is.
    match stdout::status() {
        Ok(()) => code,
        Err(e) => {
            eprintln!("pqdns-bench: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(command: Cmd) -> ExitCode {
    match command {
        Cmd::Load(args) => return run_load(*args),
        Cmd::Replay {
            target,
            server_pid,
            log,
            generate,
            rate,
            speed,
            steps,
            dnssec,
            output,
        } => {
            return run_replay(ReplayArgs {
                target,
                server_pid,
                log,
                generate,
                rate,
                speed,
                steps,
                dnssec,
                output,
            })
        }
        Cmd::Matrix {
            quick,
            with_10000,
            concurrency,
            server,
            output,
            report_only,
            sections,
            kems,
            certs,
            merge,
        } => {
            let mut cert_algorithms = Vec::new();
            for name in &certs {
                match server_process::CertAlgorithm::from_name(name) {
                    Some(a) => cert_algorithms.push(a),
                    None => {
                        eprintln!(
                            "pqdns-bench matrix: --certs: unknown certificate algorithm {name:?}"
                        );
                        return ExitCode::from(2);
                    }
                }
            }
            return run_matrix(MatrixArgs {
                quick,
                with_10000,
                concurrency,
                server,
                output,
                report_only,
                select: matrix::Selection {
                    sections,
                    kems,
                    certs: cert_algorithms,
                },
                merge,
            });
        }
        Cmd::Amplification {
            target,
            zone,
            rate,
            seconds,
            with_cookies,
            with_client_cookies,
            label,
            no_header,
        } => {
            use pqdns_bench::amplification::CookieUse;
            let cookies: Vec<CookieUse> = [
                (true, CookieUse::None),
                (with_client_cookies, CookieUse::ClientOnly),
                (with_cookies, CookieUse::Valid),
            ]
            .into_iter()
            .filter_map(|(wanted, c)| wanted.then_some(c))
            .collect();
            return run_amplification(target, &zone, rate, seconds, &cookies, &label, no_header);
        }
        Cmd::GenZone {
            origin,
            delegations,
            hosts,
            output,
        } => {
            let text = genzone::delegations_zone(&origin, delegations, hosts);
            if let Err(e) = write_atomic(&output, text.as_bytes(), FileMode::Public) {
                eprintln!("pqdns-bench: {}: {e}", output.display());
                return ExitCode::from(2);
            }
        }
        Cmd::Lifecycle {
            sizes,
            algorithms,
            output,
        } => {
            let Some(algs) = algorithms_named(&algorithms) else {
                return ExitCode::from(2);
            };
            let rows = match lifecycle_report::run(&algs, &sizes) {
                Ok(rows) => rows,
                Err(e) => {
                    eprintln!("pqdns-bench lifecycle: {e}");
                    return ExitCode::from(2);
                }
            };
            if let Err(e) = lifecycle_report::charts(&output, &rows) {
                eprintln!("pqdns-bench: charts: {e}");
            }
            return write_report(&output, &lifecycle_report::to_csv(&rows), &rows);
        }
        Cmd::Signing {
            delegations,
            algorithms,
            max_single_thread,
            output,
        } => {
            let Some(algs) = algorithms_named(&algorithms) else {
                return ExitCode::from(2);
            };
            let rows = signing_report::run(&algs, delegations, max_single_thread);
            return write_report(&output, &signing_report::to_csv(&rows), &rows);
        }
        Cmd::Mtl {
            quick,
            delegations,
            algorithms,
            output,
        } => {
            let mut opts = if quick {
                mtl_report::Options::quick()
            } else {
                mtl_report::Options::full()
            };
            if !delegations.is_empty() {
                opts.delegations = delegations;
            }
            if !algorithms.is_empty() {
                let Some(algs) = algorithms_named(&algorithms) else {
                    return ExitCode::from(2);
                };
                opts.algorithms = algs;
            }
            // After every step: files only (a long run leaves its results behind as it goes).
            let save = |report: &mtl_report::Report| {
                let series = output.with_file_name(format!(
                    "{}-series.csv",
                    output.file_name().unwrap_or_default().to_string_lossy()
                ));
                write_atomic(
                    &series,
                    mtl_report::series_csv(report).as_bytes(),
                    FileMode::Public,
                )
                .and_then(|()| write_files(&output, &mtl_report::to_csv(report), report))
            };
            let report = mtl_report::run(&opts, &|r| {
                if let Err(e) = save(r) {
                    eprintln!("pqdns-bench: {}: {e}", output.display());
                }
            });
            if let Err(e) = save(&report) {
                eprintln!("pqdns-bench: {}: {e}", output.display());
                return ExitCode::from(2);
            }
            if let Err(e) = mtl_report::chart(&output, &report) {
                eprintln!("pqdns-bench: chart not drawn: {e}");
            }
            outln!("{}", mtl_report::series_csv(&report).trim_end_matches('\n'));
            outln!("{}", mtl_report::to_csv(&report).trim_end_matches('\n'));
            return ExitCode::SUCCESS;
        }
        Cmd::Resolver {
            algorithms,
            queries,
            output,
        } => {
            let rows = resolver_report::run(&algorithms, queries);
            return write_report(&output, &resolver_report::to_csv(&rows), &rows);
        }
        Cmd::Recursor {
            seconds,
            rounds,
            concurrency,
            cold,
            output,
        } => {
            let plan = recursor_report::Plan {
                seconds,
                rounds,
                concurrency,
                cold,
            };
            let report = match recursor_report::run(&plan) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("pqdns-bench recursor: {e}");
                    return ExitCode::from(2);
                }
            };
            if let Err(e) = recursor_report::charts(&output, &report) {
                eprintln!("pqdns-bench: charts: {e}");
            }
            let command = std::env::args().collect::<Vec<_>>().join(" ");
            let md = recursor_report::markdown(&report, &plan, &command, &output);
            if let Err(e) = std::fs::write(output.with_extension("md"), md) {
                eprintln!("pqdns-bench: {}: {e}", output.display());
                return ExitCode::from(2);
            }
            return write_report(&output, &recursor_report::to_csv(&report), &report);
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
        Cmd::Handshakes {
            certs,
            rtt,
            queries,
            output,
        } => {
            let mut algorithms = Vec::new();
            for name in &certs {
                match server_process::CertAlgorithm::from_name(name) {
                    Some(a) => algorithms.push(a),
                    None => {
                        eprintln!("pqdns-bench: unknown certificate algorithm {name:?}");
                        return ExitCode::from(2);
                    }
                }
            }
            let rows = handshake_report::run(&algorithms, &rtt, queries);
            if let Err(e) = handshake_report::charts(&rows, &output) {
                eprintln!("pqdns-bench: charts: {e}");
            }
            return write_report(&output, &handshake_report::to_csv(&rows), &rows);
        }
        Cmd::Soak(args) => return run_soak(*args),
    }
    ExitCode::SUCCESS
}
