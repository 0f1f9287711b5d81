//! `pqdns-bench load` counts honestly: byte totals against tiny in-test responders on
//! 127.0.0.1 whose message sizes are known exactly (UDP and TCP); DoT handshakes, resumption
//! and the negotiated group against an in-process pqdns-server; and the same answers from NSD
//! (Debian `nsd`) as from pqdns-server for the same zone. Every loop is bounded by a count and
//! every socket by a timeout.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use pqdns_bench::load::{self, ConnectionMode, Limit, LoadConfig, LoadReport, LoadTransport};
use pqdns_bench::query_source::{parse_dnsperf, parse_query, QueryOptions};
use pqdns_bench::tls_client::TlsClientOptions;
use pqdns_server::settings::Settings;
use pqdns_server::zones::{load_all, ZoneSource};
use pqdns_server::{Server, ServerConfig, ServerHandle};
use pqdns_test_support::ports::free_dual_port;

/// Size of every answer the in-test responders send, bytes.
const ANSWER_LEN: usize = 100;
/// `www.example.com. A` with an OPT record: 12 + 21 + 11 bytes (see query_source tests).
const QUERY_LEN: u64 = 44;
const IO_TIMEOUT: Duration = Duration::from_secs(5);

fn config(
    target: SocketAddr,
    transport: LoadTransport,
    mode: ConnectionMode,
    n: u64,
) -> LoadConfig {
    LoadConfig {
        target,
        transport,
        mode,
        concurrency: 1,
        rate: None,
        limit: Limit::Count(n),
        queries: vec![parse_query("www.example.com.", Some("A")).unwrap()],
        edns: QueryOptions {
            udp_payload: Some(1232),
            dnssec_ok: false,
            recursion_desired: false,
        },
        tls: TlsClientOptions::default(),
        doh_path: "/dns-query".into(),
        doq_datagram_size: pqdns_net::DOQ_MIN_DATAGRAM,
        timeout: IO_TIMEOUT,
        server_pid: None,
        progress: false,
    }
}

fn run(cfg: LoadConfig) -> LoadReport {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(load::run(cfg)).unwrap()
}

/// The fixed answer to `query`: its ID, QR set, zero counts, padded to [`ANSWER_LEN`].
fn answer_to(query: &[u8]) -> Vec<u8> {
    let mut a = vec![0u8; ANSWER_LEN];
    a[..2].copy_from_slice(&query[..2]);
    a[2] = 0x84; // QR, AA
    a
}

/// Answers exactly `n` UDP queries, then returns.
fn udp_responder(n: usize) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let addr = socket.local_addr().unwrap();
    let thread = std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        for _ in 0..n {
            let Ok((len, from)) = socket.recv_from(&mut buf) else {
                return;
            };
            assert_eq!(len as u64, QUERY_LEN);
            socket.send_to(&answer_to(&buf[..len]), from).unwrap();
        }
    });
    (addr, thread)
}

/// Answers `n` length-prefixed queries over however many TCP connections the client opens.
fn tcp_responder(n: usize) -> (SocketAddr, std::thread::JoinHandle<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let thread = std::thread::spawn(move || {
        let (mut answered, mut connections) = (0, 0);
        while answered < n {
            let Ok((mut stream, _)) = listener.accept() else {
                break;
            };
            connections += 1;
            stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
            let mut len = [0u8; 2];
            while answered < n && stream.read_exact(&mut len).is_ok() {
                let mut query = vec![0u8; usize::from(u16::from_be_bytes(len))];
                stream.read_exact(&mut query).unwrap();
                let mut out = (ANSWER_LEN as u16).to_be_bytes().to_vec();
                out.extend(answer_to(&query));
                stream.write_all(&out).unwrap();
                answered += 1;
            }
        }
        connections
    });
    (addr, thread)
}

#[test]
fn udp_bytes_are_exactly_the_datagrams() {
    let n = 7;
    let (addr, responder) = udp_responder(n);
    for mode in [ConnectionMode::Reuse, ConnectionMode::Fresh] {
        let (addr, responder) = if mode == ConnectionMode::Reuse {
            (addr, None)
        } else {
            let (a, t) = udp_responder(n);
            (a, Some(t))
        };
        let r = run(config(addr, LoadTransport::Udp, mode, n as u64));
        assert_eq!(
            (r.answered, r.errors, r.timeouts),
            (n as u64, 0, 0),
            "{r:?}"
        );
        assert_eq!(r.wire.sent, n as u64 * QUERY_LEN);
        assert_eq!(r.wire.received, (n * ANSWER_LEN) as u64);
        assert_eq!(
            (r.wire.send_calls, r.wire.receive_calls),
            (n as u64, n as u64)
        );
        assert_eq!(r.wire.connections, 0);
        assert_eq!(r.dns_received_per_query, ANSWER_LEN as f64);
        // 20-byte IPv4 + 8-byte UDP header per datagram, both ways: an estimate, but exact here.
        assert_eq!(r.est_headers_per_query, 56.0);
        assert_eq!(r.rcodes.get(&0), Some(&(n as u64)));
        if let Some(t) = responder {
            t.join().unwrap();
        }
    }
    responder.join().unwrap();
}

#[test]
fn tcp_bytes_include_the_length_prefix_and_connections_follow_the_mode() {
    let n = 5;
    for (mode, want_connections) in [(ConnectionMode::Reuse, 1), (ConnectionMode::Fresh, n)] {
        let (addr, responder) = tcp_responder(n);
        let r = run(config(addr, LoadTransport::Tcp, mode, n as u64));
        assert_eq!((r.answered, r.errors), (n as u64, 0), "{r:?}");
        assert_eq!(r.wire.sent, n as u64 * (QUERY_LEN + 2));
        assert_eq!(r.wire.received, (n * (ANSWER_LEN + 2)) as u64);
        assert_eq!(r.wire.connections, want_connections as u64);
        assert_eq!(r.dns_sent_per_query, QUERY_LEN as f64);
        assert_eq!(responder.join().unwrap(), want_connections);
    }
}

#[test]
fn answers_with_the_wrong_id_are_errors_not_answers() {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    socket.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let t = std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        let (len, from) = socket.recv_from(&mut buf).unwrap();
        let mut a = answer_to(&buf[..len]);
        a[0] ^= 0xff;
        socket.send_to(&a, from).unwrap();
    });
    let mut cfg = config(addr, LoadTransport::Udp, ConnectionMode::Reuse, 1);
    cfg.timeout = Duration::from_millis(300);
    let r = run(cfg);
    t.join().unwrap();
    assert_eq!((r.answered, r.timeouts), (0, 1));
}

/// An in-process pqdns-server on 127.0.0.1 serving `records` (unsigned) on UDP, TCP, DoT, DoH.
struct PqdnsServer {
    dir: tempfile::TempDir,
    rt: tokio::runtime::Runtime,
    handle: Option<ServerHandle>,
}

impl PqdnsServer {
    fn start(origin: &str, records: &str) -> PqdnsServer {
        let dir = tempfile::tempdir().unwrap();
        let toml =
            format!("origin = \"{origin}\"\ndefault_ttl = 3600\nrecords = '''{records}'''\n");
        let zone_file = dir.path().join("zone.toml");
        std::fs::write(&zone_file, toml).unwrap();
        let sources = vec![ZoneSource::File(zone_file)];
        let (catalog, _) = load_all(&sources, pqdns_core::time::now()).unwrap();
        let mut settings = Settings::new(dir.path().join("keys"));
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        (
            settings.udp,
            settings.tcp,
            settings.dot,
            settings.doh,
            settings.doq,
        ) = (vec![any], vec![any], vec![any], vec![any], vec![any]);
        // The load generator is one client: response-rate limiting would measure itself.
        settings.rrl.rate = 0;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let config = ServerConfig::new(sources, settings);
        let handle = rt.block_on(Server::bind(config, catalog)).unwrap();
        PqdnsServer {
            dir,
            rt,
            handle: Some(handle),
        }
    }

    fn handle(&self) -> &ServerHandle {
        self.handle.as_ref().unwrap()
    }

    fn ca(&self) -> PathBuf {
        self.handle().certificate().unwrap().cert_path
    }
}

impl Drop for PqdnsServer {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.rt.block_on(h.shutdown());
        }
        let _ = &self.dir;
    }
}

const ORIGIN: &str = "pqdns.test.";
const RECORDS: &str = "@ SOA ns1 hostmaster 2026010101 7200 3600 1209600 300\n@ NS ns1\n@ NS ns2\n\
ns1 A 127.0.0.1\nns2 AAAA ::1\nwww A 192.0.2.80\nmail MX 10 www\n";

fn tls_config(server: &PqdnsServer, group: &str, mode: ConnectionMode, n: u64) -> LoadConfig {
    let mut cfg = config(server.handle().addrs.dot[0], LoadTransport::Dot, mode, n);
    cfg.queries = vec![parse_query("www.pqdns.test.", Some("A")).unwrap()];
    cfg.tls = TlsClientOptions {
        group: Some(pqdns_bench::tls_client::parse_group(group).unwrap()),
        ca_file: Some(server.ca()),
        ..TlsClientOptions::default()
    };
    cfg
}

#[test]
fn dot_counts_tls_records_handshakes_resumption_and_the_group() {
    let server = PqdnsServer::start(ORIGIN, RECORDS);
    let n = 6;
    let fresh = run(tls_config(
        &server,
        "X25519MLKEM768",
        ConnectionMode::Fresh,
        n,
    ));
    assert_eq!((fresh.answered, fresh.errors), (n, 0), "{fresh:?}");
    assert_eq!((fresh.tls_handshakes, fresh.tls_resumed), (n, 0));
    assert_eq!(fresh.tls_group.as_deref(), Some("X25519MLKEM768"));
    // An X25519MLKEM768 key share alone is 1216 bytes (client) and 1120 (server).
    assert!(fresh.wire_sent_per_query > 1216.0 + 46.0, "{fresh:?}");
    assert!(fresh.wire_received_per_query > 1120.0 + 59.0, "{fresh:?}");
    assert_eq!(fresh.dns_received_per_query, 59.0);

    let classical = run(tls_config(&server, "X25519", ConnectionMode::Fresh, n));
    assert_eq!(classical.tls_group.as_deref(), Some("X25519"));
    assert!(classical.wire_sent_per_query + 1000.0 < fresh.wire_sent_per_query);

    let resumed = run(tls_config(
        &server,
        "X25519MLKEM768",
        ConnectionMode::Resumption,
        n,
    ));
    assert_eq!(
        (resumed.answered, resumed.tls_handshakes),
        (n, n),
        "{resumed:?}"
    );
    assert!(resumed.tls_resumed >= n - 2, "{resumed:?}");
    // No certificate chain and CertificateVerify in a resumed handshake.
    assert!(resumed.wire_received_per_query < fresh.wire_received_per_query);

    let reused = run(tls_config(
        &server,
        "X25519MLKEM768",
        ConnectionMode::Reuse,
        n,
    ));
    assert_eq!(
        (reused.answered, reused.tls_handshakes),
        (n, 1),
        "{reused:?}"
    );
    assert_eq!(reused.wire.connections, 1);

    for transport in [LoadTransport::DohPost, LoadTransport::DohGet] {
        let mut cfg = tls_config(&server, "X25519MLKEM768", ConnectionMode::Reuse, n);
        cfg.target = server.handle().addrs.doh[0];
        cfg.transport = transport;
        let doh = run(cfg);
        assert_eq!((doh.answered, doh.errors), (n, 0), "{doh:?}");
        assert_eq!(doh.dns_received_per_query, 59.0);
    }
}

#[test]
fn doq_counts_connections_datagrams_and_the_group() {
    let server = PqdnsServer::start(ORIGIN, RECORDS);
    let n = 5;
    let doq = |mode, datagram| {
        let mut cfg = tls_config(&server, "X25519MLKEM768", mode, n);
        cfg.target = server.handle().addrs.doq[0];
        cfg.transport = LoadTransport::Doq;
        cfg.doq_datagram_size = datagram;
        run(cfg)
    };
    let fresh = doq(ConnectionMode::Fresh, 1200);
    assert_eq!((fresh.answered, fresh.errors), (n, 0), "{fresh:?}");
    assert_eq!((fresh.tls_handshakes, fresh.wire.connections), (n, n));
    assert_eq!(fresh.tls_group.as_deref(), Some("X25519MLKEM768"));
    assert_eq!(fresh.dns_received_per_query, 59.0);
    // The hybrid ClientHello takes two Initial datagrams, each padded to 1200 bytes.
    assert!(fresh.wire.send_calls >= 2 * n, "{fresh:?}");
    assert!(fresh.wire_sent_per_query >= 2400.0, "{fresh:?}");
    // Headers are estimated per datagram (IPv4 + UDP), not per TCP segment.
    let datagrams = fresh.wire.send_calls + fresh.wire.receive_calls;
    assert_eq!(
        fresh.est_headers.sent + fresh.est_headers.received,
        28 * datagrams
    );

    let big = doq(ConnectionMode::Fresh, 1452);
    assert_eq!(big.answered, n, "{big:?}");
    assert!(
        big.wire_sent_per_query >= 2904.0,
        "two 1452-byte Initials: {big:?}"
    );

    let reused = doq(ConnectionMode::Reuse, 1200);
    assert_eq!(
        (reused.answered, reused.tls_handshakes),
        (n, 1),
        "{reused:?}"
    );
    assert!(reused.wire_sent_per_query * 2.0 < fresh.wire_sent_per_query);
}

/// NSD 4.6 on 127.0.0.1 serving `records` with minimal responses (as pqdns-server answers).
struct Nsd {
    child: Child,
    dir: tempfile::TempDir,
    addr: SocketAddr,
}

impl Nsd {
    fn start(origin: &str, records: &str) -> Nsd {
        let dir = tempfile::tempdir().unwrap();
        let port = free_dual_port();
        let d = dir.path().display();
        std::fs::write(
            dir.path().join("z.zone"),
            format!("$ORIGIN {origin}\n$TTL 3600\n{records}"),
        )
        .unwrap();
        let conf = format!(
            "server:\n  username: \"\"\n  chroot: \"\"\n  zonesdir: \"{d}\"\n  pidfile: \"{d}/nsd.pid\"\n  \
             xfrdfile: \"{d}/xfrd.state\"\n  zonelistfile: \"{d}/zone.list\"\n  database: \"\"\n  \
             logfile: \"{d}/nsd.log\"\n  ip-address: 127.0.0.1@{port}\n  server-count: 1\n  \
             rrl-ratelimit: 0\n  rrl-whitelist-ratelimit: 0\n  minimal-responses: yes\n\
             remote-control:\n  control-enable: no\nzone:\n  name: \"{origin}\"\n  zonefile: \"z.zone\"\n"
        );
        std::fs::write(dir.path().join("nsd.conf"), conf).unwrap();
        let nsd = ["/usr/sbin/nsd", "nsd"]
            .into_iter()
            .find(|p| Command::new(p).arg("-v").output().is_ok())
            .expect("nsd is required (apt-get install nsd; see .ci/run)");
        let child = Command::new(nsd)
            .args(["-d", "-c"])
            .arg(dir.path().join("nsd.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting nsd");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut nsd = Nsd { child, dir, addr };
        nsd.wait_until_serving();
        nsd
    }

    /// Polls with a TCP connect (bounded: 50 × 100 ms).
    fn wait_until_serving(&mut self) {
        for _ in 0..50 {
            if std::net::TcpStream::connect_timeout(&self.addr, Duration::from_millis(100)).is_ok()
            {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("nsd exited ({status}): {}", self.log());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("nsd did not listen on {}: {}", self.addr, self.log());
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("nsd.log")).unwrap_or_default()
    }
}

impl Drop for Nsd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// MX is left out: pqdns-server adds the exchange's address records (RFC 1035 §3.3.9
/// additional section processing) where NSD with `minimal-responses` does not.
#[test]
fn load_against_nsd_gives_the_same_answer_bytes_as_against_pqdns_server() {
    let ours = PqdnsServer::start(ORIGIN, RECORDS);
    let nsd = Nsd::start(ORIGIN, RECORDS);
    let queries = parse_dnsperf(
        "www.pqdns.test A\nns2.pqdns.test AAAA\nnothere.pqdns.test A\npqdns.test SOA\n",
        10,
    )
    .unwrap();
    let n = 40;
    for (transport, ours_addr) in [
        (LoadTransport::Udp, ours.handle().addrs.udp[0]),
        (LoadTransport::Tcp, ours.handle().addrs.tcp[0]),
    ] {
        let mut reports = Vec::new();
        for target in [ours_addr, nsd.addr] {
            let mut cfg = config(target, transport, ConnectionMode::Reuse, n);
            cfg.queries = queries.clone();
            cfg.concurrency = 2;
            reports.push(run(cfg));
        }
        let (a, b) = (&reports[0], &reports[1]);
        assert_eq!(
            (a.answered, b.answered),
            (n, n),
            "{a:?}\n{b:?}\n{}",
            nsd.log()
        );
        assert_eq!(a.rcodes, b.rcodes);
        assert_eq!(a.rcodes.get(&3), Some(&(n / 4)), "NXDOMAIN for nothere");
        assert_eq!(
            a.dns_received_per_query, b.dns_received_per_query,
            "{transport:?}"
        );
        assert_eq!(a.wire.received, b.wire.received, "{transport:?}");
        assert_eq!(a.wire.sent, b.wire.sent);
    }
}

/// The replay sends exactly X % of the queries again over TCP, every query over TCP in the
/// TCP-only step, and samples the server's CPU (here: this process, where the server runs).
#[test]
fn replay_retries_the_asked_share_over_tcp() {
    use pqdns_bench::replay;
    let server = PqdnsServer::start(ORIGIN, RECORDS);
    let log = replay::parse_log(&"www.pqdns.test A\n".repeat(40), 2000.0, 100).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let addr = replay::Endpoints {
        udp: server.handle().addrs.udp[0],
        tcp: server.handle().addrs.tcp[0],
    };
    let edns = QueryOptions {
        udp_payload: Some(1232),
        dnssec_ok: false,
        recursion_desired: false,
    };
    let report = rt.block_on(replay::run(
        addr,
        std::process::id(),
        &log,
        &[0, 25, 100],
        1.0,
        edns,
    ));
    let got: Vec<(Option<u32>, u64, u64, u64)> = report
        .steps
        .iter()
        .map(|s| (s.tcp_percent, s.udp_answered, s.tcp_answered, s.failures))
        .collect();
    assert_eq!(
        got,
        vec![
            (Some(0), 40, 0, 0),
            (Some(25), 40, 10, 0),
            (Some(100), 40, 40, 0),
            (None, 0, 40, 0)
        ]
    );
    assert!(
        report.steps.iter().all(|s| s.wall_seconds >= 0.015),
        "timing kept: 40 at 2000/s"
    );
    assert!(report.fit.is_some());
    assert!(report
        .to_csv()
        .lines()
        .last()
        .unwrap()
        .starts_with("tcp-only,40,0,40,0,"));
}
