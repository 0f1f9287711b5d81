//! Fresh-connection cost of the encrypted transports by certificate algorithm (issue 15): one
//! query on a new connection (full TLS 1.3 handshake, X25519MLKEM768, no resumption) over DoT
//! and over DoQ (RFC 9250), through the [`crate::delay_shim`] at each round-trip time, against a
//! pqdns-server child process per certificate (ECDSA-P256, ML-DSA-44/65/87); per query the
//! client's wall time and the server's CPU time (handshake included). Queries to every server
//! and transport alternate, so all cells see the same machine load.
//!
//! What to expect: DoT needs the TCP handshake, then the TLS handshake, then the query: three
//! round trips; DoQ folds transport and TLS handshakes into one: two round trips. The
//! certificate algorithm changes the server's signing work (one CertificateVerify signature per
//! handshake) and the bytes of the Certificate message.

use std::time::{Duration, Instant};

use pqdns_core::message::{Message, Question};
use pqdns_core::wire::Edns;
use pqdns_core::{Class, RrType};
use pqdns_resolver::{Client, TlsOptions, Transport};
use serde::Serialize;

use crate::delay_shim;
use crate::resolver_report::{percentile, runtime};
use crate::server_process::{self, CertAlgorithm, ServerProcess, ServerSpec};

/// One (certificate, transport, RTT) cell.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Certificate algorithm ([`CertAlgorithm::name`]).
    pub cert: String,
    /// `dot` or `doq`.
    pub transport: &'static str,
    /// Emulated round-trip time, milliseconds.
    pub rtt_ms: u64,
    /// Queries measured, each on a new connection.
    pub queries: usize,
    /// Median time from starting to connect to having the answer, milliseconds.
    pub median_ms: f64,
    /// 90th percentile, milliseconds.
    pub p90_ms: f64,
    /// Server CPU time per query (handshake, query, connection close), microseconds.
    pub server_cpu_us: f64,
    /// The negotiated key exchange group (of the last query).
    pub group: String,
}

fn query() -> Message {
    let question = Question {
        qname: format!("www.{}", server_process::ORIGIN)
            .parse()
            .expect("name"),
        qtype: RrType::A,
        qclass: Class::IN,
    };
    Message::query(0, question, false, Some(Edns::dnssec_ok(1232)))
}

/// Runs the report for `certs` × {DoT, DoQ} × `rtts_ms`, `queries` per cell; the pqdns-server
/// binary is the one next to this executable. One server per certificate runs throughout, and
/// each round sends one query per certificate and transport, so that every cell sees the same
/// machine load (CPU ratios between certificates are the result, not absolute values).
///
/// # Panics
/// If a server cannot be started or a query fails (a benchmark of a broken server is not a
/// result).
pub fn run(certs: &[CertAlgorithm], rtts_ms: &[u64], queries: usize) -> Vec<Row> {
    let binary = server_process::sibling_binary("pqdns-server").expect("pqdns-server binary");
    let rt = runtime();
    let servers: Vec<ServerProcess> = certs
        .iter()
        .map(|&cert| {
            let spec = ServerSpec {
                dnssec: None,
                cert,
                policy: "hybrid-preferred",
            };
            ServerProcess::start(&binary, &spec).expect("server starts")
        })
        .collect();
    let transports = TRANSPORTS;
    let mut rows = Vec::new();
    for &rtt in rtts_ms {
        // DoQ listens on the DoT port number (UDP beside TCP), so one shim port relays both.
        let shims: Vec<_> = servers
            .iter()
            .map(|s| {
                let delay = Duration::from_millis(rtt);
                rt.block_on(delay_shim::start(Some(s.dot), Some(s.dot), delay))
                    .expect("shim binds")
            })
            .collect();
        let cells = servers.len() * transports.len();
        let mut times = vec![Vec::with_capacity(queries); cells];
        let mut cpu_ns = vec![0u64; cells];
        let mut groups = vec![String::new(); cells];
        for _ in 0..queries {
            for (s, (server, &shim)) in servers.iter().zip(&shims).enumerate() {
                for (t, &(_, transport, datagram)) in transports.iter().enumerate() {
                    let cell = s * transports.len() + t;
                    let (ms, cpu, group) = fresh_query(&rt, server, shim, transport, datagram);
                    times[cell].push(ms);
                    cpu_ns[cell] += cpu;
                    groups[cell] = group;
                }
            }
        }
        for (cell, mut t) in times.into_iter().enumerate() {
            t.sort_by(f64::total_cmp);
            let (s, tr) = (cell / transports.len(), cell % transports.len());
            rows.push(Row {
                cert: certs[s].name().to_string(),
                transport: transports[tr].0,
                rtt_ms: rtt,
                queries,
                median_ms: percentile(&t, 0.5),
                p90_ms: percentile(&t, 0.9),
                server_cpu_us: cpu_ns[cell] as f64 / queries as f64 / 1e3,
                group: std::mem::take(&mut groups[cell]),
            });
        }
    }
    rows
}

/// The transports measured: (name in the report, transport, DoQ client datagram size). DoQ
/// runs twice: with QUIC's minimum 1200-byte datagrams (the default) and with 1452-byte ones,
/// whose larger Initial datagrams raise the server's anti-amplification allowance (RFC 9000
/// §8.1) above an ML-DSA-44 first flight.
pub const TRANSPORTS: [(&str, Transport, Option<u16>); 3] = [
    ("dot", Transport::Dot, None),
    ("doq", Transport::Doq, None),
    ("doq-1452", Transport::Doq, Some(1452)),
];

/// One query on a new connection (a new client: full handshake, no resumption) through
/// `shim`, DoQ datagrams of `datagram` bytes: (milliseconds, server CPU nanoseconds,
/// negotiated group).
fn fresh_query(
    rt: &tokio::runtime::Runtime,
    server: &ServerProcess,
    shim: std::net::SocketAddr,
    transport: Transport,
    datagram: Option<u16>,
) -> (f64, u64, String) {
    let mut tls = TlsOptions::default();
    tls.ca_files = vec![server.ca.clone()];
    tls.doq_datagram_size = datagram;
    let client = Client::new(transport, Duration::from_secs(10), tls).expect("client");
    let cpu0 = server_process::cpu_ns(server.pid());
    let start = Instant::now();
    let (answer, info) = rt
        .block_on(client.exchange(shim, &query()))
        .unwrap_or_else(|e| panic!("{transport:?} via {shim}: {e}"));
    let ms = start.elapsed().as_secs_f64() * 1e3;
    drop(client);
    let cpu = server_process::cpu_ns(server.pid()) - cpu0;
    assert_eq!(answer.answers.len(), 1, "{transport:?}: one A record");
    (ms, cpu, info.tls_group.unwrap_or_default())
}

/// Writes two bar charts beside `output` (`PREFIX-latency` and `PREFIX-cpu`, SVG and PNG): the
/// median time of a fresh-connection query at the largest RTT measured, and the server CPU per
/// query at the smallest, per certificate and transport.
///
/// # Errors
/// Drawing or file errors.
pub fn charts(rows: &[Row], output: &std::path::Path) -> crate::charts::DrawResult {
    let (Some(max), Some(min)) = (
        rows.iter().map(|r| r.rtt_ms).max(),
        rows.iter().map(|r| r.rtt_ms).min(),
    ) else {
        return Ok(());
    };
    let items = |rtt: u64, value: fn(&Row) -> f64| -> Vec<(String, f64)> {
        rows.iter()
            .filter(|r| r.rtt_ms == rtt)
            .map(|r| (format!("{} {}", r.transport, r.cert), value(r)))
            .collect()
    };
    let stem = |suffix: &str| crate::charts::suffixed(output, suffix);
    crate::charts::bars(
        &stem("-latency"),
        &format!("Query on a new connection, {max} ms RTT (median)"),
        "ms",
        &items(max, |r| r.median_ms),
    )?;
    crate::charts::bars(
        &stem("-cpu"),
        &format!("Server CPU per fresh-connection query, {min} ms RTT"),
        "µs",
        &items(min, |r| r.server_cpu_us),
    )
}

/// The rows as CSV with a header line.
pub fn to_csv(rows: &[Row]) -> String {
    let mut out =
        String::from("cert,transport,rtt_ms,queries,median_ms,p90_ms,server_cpu_us,group\n");
    for r in rows {
        out.push_str(&format!(
            "{},{},{},{},{:.3},{:.3},{:.1},{}\n",
            r.cert,
            r.transport,
            r.rtt_ms,
            r.queries,
            r.median_ms,
            r.p90_ms,
            r.server_cpu_us,
            r.group
        ));
    }
    out
}
