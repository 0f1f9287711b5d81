//! The fragmentation report (`pqdns-bench fragmentation`): for zones signed with each
//! algorithm, the time, packets and bytes to get a complete DNSKEY or A (+RRSIG) answer from a
//! pqdns-server child process through the [`crate::delay_shim`] at several round-trip times,
//! by ARRF, QBF, TC=1 + TCP fallback (new connection per query, as a resolver's fallback), and
//! DNS over TLS on one reused connection; plus the server's CPU time per answered query.
//! ARRF and QBF run twice: requested (a client without a server cookie: first fragment, then
//! requests for the rest) and pushed (`arrf-push`, `qbf-push`: a client that learnt its server
//! cookie in an untimed exchange before, so the server sends every fragment at once).
//!
//! Packets and IP bytes come from the loopback interface counters, so run it in a network
//! namespace of its own (`benches/fragmentation/run.sh` does): the shim relays every packet on
//! a second loopback leg, so the counters are halved. Server CPU is the sum of the server's
//! threads' `/proc/PID/task/*/schedstat` run time (nanoseconds) over the batch.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pqdns_core::frag::edns::Fragmentation;
use pqdns_core::message::{Message, Question};
use pqdns_core::wire::{Edns, Rcode, FLAG_CD, FLAG_TC};
use pqdns_core::{Class, Name, RrType};
use pqdns_resolver::fragment::FragConfig;
use pqdns_resolver::{Client, TlsOptions, Transport};
use pqdns_test_support::ports::free_dual_port;
use serde::Serialize;

use crate::delay_shim;
use crate::resolver_report::{percentile, runtime};

/// One row: (algorithm, method, RTT, QTYPE).
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Signing algorithm of the zone.
    pub algorithm: String,
    /// `arrf`, `qbf`, `arrf-push`, `qbf-push`, `tc+tcp` or `dot-reused`.
    pub method: String,
    /// Emulated round-trip time, milliseconds.
    pub rtt_ms: u64,
    /// `DNSKEY` or `A`.
    pub qtype: String,
    /// Queries measured.
    pub queries: usize,
    /// Median time to the complete answer, milliseconds.
    pub median_ms: f64,
    /// 90th percentile, milliseconds.
    pub p90_ms: f64,
    /// IP packets per query, both directions, one leg.
    pub packets: f64,
    /// IP bytes per query (loopback: IP header and payload), both directions, one leg.
    pub ip_bytes: f64,
    /// DNS message bytes per query, both directions (fragments and retries included).
    pub dns_bytes: f64,
    /// Server CPU time per answered query, microseconds.
    pub server_cpu_us: f64,
}

/// Methods compared.
const METHODS: [&str; 6] = [
    "arrf",
    "qbf",
    "arrf-push",
    "qbf-push",
    "tc+tcp",
    "dot-reused",
];

/// True for the methods whose client holds a server cookie, so fragments are pushed.
fn pushed(method: &str) -> bool {
    method.ends_with("-push")
}

fn zone_toml(dir: &Path, algorithm: &str, mode: Fragmentation, udp: u16, dot: u16) -> PathBuf {
    let tag = algorithm.replace('+', "plus");
    let file = dir.join(format!("{tag}-{mode}.toml"));
    let text = format!(
        "origin = \"bench.\"\ndefault_ttl = 300\nrecords = '''\n\
         @ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 127.0.0.1\nwww A 192.0.2.1\n'''\n\
         [signing]\nalgorithms = [\"{algorithm}\"]\nkeys = \"csk\"\ndenial = \"nsec3\"\nkey_directory = \"keys-{tag}\"\n\
         [server]\nudp = [\"127.0.0.1:{udp}\"]\ntcp = [\"127.0.0.1:{udp}\"]\ndot = [\"127.0.0.1:{dot}\"]\ndoh = []\n\
         fragmentation = \"{mode}\"\nrrl_rate = 0\namplification_limit = 0\n"
    );
    std::fs::write(&file, text).expect("temp dir is writable");
    file
}

/// A pqdns-server child process.
struct ServerProcess {
    child: Child,
    udp: SocketAddr,
    dot: SocketAddr,
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ServerProcess {
    fn cpu_ns(&self) -> u64 {
        crate::server_process::cpu_ns(self.child.id())
    }
}

fn start_server(server_bin: &Path, dir: &Path, alg: &str, mode: Fragmentation) -> ServerProcess {
    let (udp, dot) = (free_dual_port(), free_dual_port());
    let toml = zone_toml(dir, alg, mode, udp, dot);
    let child = Command::new(server_bin)
        .arg("--zone")
        .arg(&toml)
        .arg("--log-level")
        .arg("warn")
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("pqdns-server starts");
    let server = ServerProcess {
        child,
        udp: SocketAddr::from(([127, 0, 0, 1], udp)),
        dot: SocketAddr::from(([127, 0, 0, 1], dot)),
    };
    // Bounded wait until the zone is served (listeners open before signing ends, and
    // signing SPHINCS+ takes a few seconds; until then queries are REFUSED).
    for _ in 0..600 {
        if std::net::TcpStream::connect(server.dot).is_ok() && serves_zone(server.udp) {
            return server;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("pqdns-server for {alg} did not start");
}

/// True if `server` answers the zone's SOA query over UDP with NOERROR within 100 ms.
fn serves_zone(server: SocketAddr) -> bool {
    let Ok(socket) = std::net::UdpSocket::bind("127.0.0.1:0") else {
        return false;
    };
    let soa = Message::query(
        1,
        Question {
            qname: Name::root().prepend_label(b"bench").expect("valid name"),
            qtype: RrType::SOA,
            qclass: Class::IN,
        },
        false,
        None,
    );
    let mut buf = [0u8; 512];
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .is_ok()
        && socket.send_to(&soa.to_wire(), server).is_ok()
        && socket
            .recv(&mut buf)
            .is_ok_and(|n| Message::parse(&buf[..n]).is_ok_and(|m| m.rcode() == Rcode::NOERROR))
}

fn lo_counters() -> (u64, u64) {
    let read = |f: &str| {
        std::fs::read_to_string(format!("/sys/class/net/lo/statistics/{f}"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    };
    (read("tx_packets"), read("tx_bytes"))
}

fn query(id: u16, qtype: RrType) -> Message {
    let qname = if qtype == RrType::DNSKEY {
        "bench."
    } else {
        "www.bench."
    };
    let mut m = Message::query(
        id,
        Question {
            qname: qname.parse().expect("valid name"),
            qtype,
            qclass: Class::IN,
        },
        false,
        Some(Edns::dnssec_ok(1232)),
    );
    m.flags |= FLAG_CD;
    m
}

fn client(method: &str) -> Client {
    let mut tls = TlsOptions::default();
    tls.danger_accept_any_certificate = true;
    let transport = if method == "dot-reused" {
        Transport::Dot
    } else {
        Transport::Udp
    };
    let mut c = Client::new(transport, Duration::from_secs(5), tls).expect("client");
    let mode = match method.trim_end_matches("-push") {
        "arrf" => Fragmentation::Arrf,
        "qbf" => Fragmentation::Qbf,
        _ => Fragmentation::Off,
    };
    c.set_fragmentation(FragConfig::new(mode));
    c
}

/// Runs the report: `queries` per cell, at each of `rtts_ms`.
///
/// # Panics
/// If a server cannot start, or an answer is truncated or empty (the report would be
/// meaningless).
pub fn run(algorithms: &[String], rtts_ms: &[u64], queries: usize) -> Vec<Row> {
    let dir = tempfile::tempdir().expect("temp dir");
    let server_bin = std::env::current_exe()
        .expect("own path")
        .with_file_name("pqdns-server");
    let rt = runtime();
    let mut rows = Vec::new();
    for alg in algorithms {
        let arrf = start_server(&server_bin, dir.path(), alg, Fragmentation::Arrf);
        let qbf = start_server(&server_bin, dir.path(), alg, Fragmentation::Qbf);
        for &rtt in rtts_ms {
            for method in METHODS {
                let server = if method.starts_with("qbf") {
                    &qbf
                } else {
                    &arrf
                };
                let target = if method == "dot-reused" {
                    server.dot
                } else {
                    server.udp
                };
                let shim = rt
                    .block_on(delay_shim::start(
                        Some(target),
                        Some(target),
                        Duration::from_millis(rtt),
                    ))
                    .expect("shim binds");
                for qtype in [RrType::DNSKEY, RrType::A] {
                    let row = measure(&rt, server, shim, method, alg, rtt, qtype, queries);
                    eprintln!(
                        "{alg} {method} {rtt} ms {qtype:?}: {:.2} ms, {:.1} packets",
                        row.median_ms, row.packets
                    );
                    rows.push(row);
                }
            }
        }
    }
    rows
}

#[expect(clippy::too_many_arguments, reason = "one cell's coordinates")]
fn measure(
    rt: &tokio::runtime::Runtime,
    server: &ServerProcess,
    shim: SocketAddr,
    method: &str,
    alg: &str,
    rtt: u64,
    qtype: RrType,
    queries: usize,
) -> Row {
    let reused = client(method);
    if method == "dot-reused" {
        // Connection and TLS handshake before the clock starts.
        rt.block_on(reused.exchange(shim, &query(1, qtype)))
            .expect("warm-up answer");
    }
    // Pushed: each client learns its server cookie before the clock (and counters) start.
    let warm: Vec<Client> = (0..if pushed(method) { queries } else { 0 })
        .map(|_| {
            let c = client(method);
            rt.block_on(c.exchange(shim, &query(1, RrType::SOA)))
                .expect("warm-up answer");
            c
        })
        .collect();
    let mut times = Vec::with_capacity(queries);
    let mut dns_bytes = 0;
    let (p0, b0) = lo_counters();
    let cpu0 = server.cpu_ns();
    for i in 0..queries {
        let q = query(i as u16 + 2, qtype);
        // A new client per query: new sockets, and a new TCP connection on fallback.
        let fresh;
        let c = if method == "dot-reused" {
            &reused
        } else if let Some(w) = warm.get(i) {
            w
        } else {
            fresh = client(method);
            &fresh
        };
        let start = Instant::now();
        let (answer, info) = rt.block_on(c.exchange(shim, &q)).expect("answer");
        times.push(start.elapsed().as_secs_f64() * 1e3);
        assert!(
            !answer.has_flag(FLAG_TC) && answer.answers.len() >= 2,
            "{alg} {method} {qtype:?}: incomplete answer (RCODE {})",
            answer.rcode()
        );
        assert!(
            !pushed(method) || info.fragments_pushed || info.bytes_received <= 1232,
            "{alg} {method} {qtype:?}: fragments not pushed"
        );
        dns_bytes += info.bytes_sent + info.bytes_received;
    }
    let cpu = server.cpu_ns() - cpu0;
    let (p1, b1) = lo_counters();
    times.sort_by(f64::total_cmp);
    let n = queries as f64;
    Row {
        algorithm: alg.to_string(),
        method: method.to_string(),
        rtt_ms: rtt,
        qtype: if qtype == RrType::DNSKEY {
            "DNSKEY"
        } else {
            "A"
        }
        .into(),
        queries,
        median_ms: percentile(&times, 0.5),
        p90_ms: percentile(&times, 0.9),
        packets: (p1 - p0) as f64 / 2.0 / n,
        ip_bytes: (b1 - b0) as f64 / 2.0 / n,
        dns_bytes: dns_bytes as f64 / n,
        server_cpu_us: cpu as f64 / 1e3 / n,
    }
}

/// The rows as CSV with a header line.
pub fn to_csv(rows: &[Row]) -> String {
    let mut out = String::from(
        "algorithm,method,rtt_ms,qtype,queries,median_ms,p90_ms,packets,ip_bytes,dns_bytes,server_cpu_us\n",
    );
    for r in rows {
        out.push_str(&format!(
            "{},{},{},{},{},{:.3},{:.3},{:.1},{:.0},{:.0},{:.1}\n",
            r.algorithm,
            r.method,
            r.rtt_ms,
            r.qtype,
            r.queries,
            r.median_ms,
            r.p90_ms,
            r.packets,
            r.ip_bytes,
            r.dns_bytes,
            r.server_cpu_us
        ));
    }
    out
}
