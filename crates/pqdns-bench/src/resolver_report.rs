//! The resolver report (`pqdns-bench resolver`): for zones signed with each algorithm, served by
//! an in-process pqdns-server on loopback, the time and bytes of a validated resolution per
//! transport — with a fresh resolver per query (new connection and TLS handshake, DNSKEY
//! fetched and validated) and with one reused resolver (connection kept, DNSKEY trust cached).
//! Each query asks a new name under a wildcard, so answers never come from the cache.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use pqdns_core::{Name, RrType};
use pqdns_resolver::{Client, Config, Mode, Resolver, TlsOptions, Transport, TrustAnchors};
use pqdns_server::settings::Settings;
use pqdns_server::zones::{load_all, ZoneSource};
use pqdns_server::{Server, ServerConfig};
use pqdns_test_support::ports::free_dual_port;
use serde::Serialize;

/// One row: an (algorithm, transport, connection mode) cell.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Signing algorithm of the zone.
    pub algorithm: String,
    /// Transport.
    pub transport: String,
    /// `fresh` (new resolver per query) or `reused`.
    pub connection: String,
    /// Resolutions measured.
    pub queries: usize,
    /// Median wall time of one validated resolution, milliseconds.
    pub median_ms: f64,
    /// 90th percentile, milliseconds.
    pub p90_ms: f64,
    /// Mean DNS message bytes sent per resolution (no TCP/TLS/HTTP framing).
    pub bytes_sent: f64,
    /// Mean DNS message bytes received per resolution.
    pub bytes_received: f64,
    /// Mean exchanges per resolution.
    pub exchanges: f64,
}

const TRANSPORTS: [Transport; 4] = [
    Transport::Udp,
    Transport::Tcp,
    Transport::Dot,
    Transport::Doh,
];

fn zone_toml(dir: &Path, algorithm: &str) -> std::path::PathBuf {
    let file = dir.join(format!("{}.toml", algorithm.replace('+', "plus")));
    let text = format!(
        "origin = \"bench.\"\ndefault_ttl = 300\nrecords = '''\n\
         @ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 127.0.0.1\n*.wild A 192.0.2.1\n'''\n\
         [signing]\nalgorithms = [\"{algorithm}\"]\nkeys = \"ksk-zsk\"\ndenial = \"nsec3\"\nkey_directory = \"keys-{}\"\n",
        algorithm.replace('+', "plus")
    );
    std::fs::write(&file, text).expect("temp dir is writable");
    file
}

/// The client-side runtime of the reports: one worker thread, timers and I/O.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime")
}

/// The `p` quantile (0..=1) of ascending `sorted`, nearest rank.
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Runs the report: `queries` resolutions per cell.
///
/// # Panics
/// If the in-process server cannot start or a resolution is not Secure (the report would be
/// meaningless).
pub fn run(algorithms: &[String], queries: usize) -> Vec<Row> {
    let dir = tempfile::tempdir().expect("temp dir");
    let rt = runtime();
    let mut rows = Vec::new();
    for alg in algorithms {
        let toml = zone_toml(dir.path(), alg);
        let sources = vec![ZoneSource::File(toml)];
        let (catalog, reports) = load_all(&sources, pqdns_core::time::now()).expect("zone loads");
        let ds = reports[0].ds.first().expect("a DS record").clone();
        let port = free_dual_port();
        let addr = SocketAddr::new([127, 0, 0, 1].into(), port);
        let mut settings = Settings::new(dir.path().join("cert"));
        settings.udp = vec![addr];
        settings.tcp = vec![addr];
        // One client sends every query: rate limiting would measure itself.
        settings.rrl.rate = 0;
        settings.amplification_limit = 0;
        settings.dot = vec![SocketAddr::new(addr.ip(), 0)];
        settings.doh = vec![SocketAddr::new(addr.ip(), 0)];
        let handle = rt
            .block_on(Server::bind(ServerConfig::new(sources, settings), catalog))
            .expect("server binds");
        for transport in TRANSPORTS {
            let server = match transport {
                Transport::Udp | Transport::Tcp => addr,
                Transport::Dot => handle.addrs.dot[0],
                Transport::Doh => handle.addrs.doh[0],
                other => unreachable!("{other:?} is not in TRANSPORTS"),
            };
            for fresh in [true, false] {
                rows.push(measure(&rt, alg, transport, server, &ds, fresh, queries));
            }
        }
        rt.block_on(handle.shutdown());
    }
    rows
}

fn resolver(transport: Transport, server: SocketAddr, ds: &pqdns_core::Record) -> Resolver {
    let mut anchors = TrustAnchors::default();
    anchors.add_ds(ds.owner.clone(), ds.rdata.clone());
    let mut tls = TlsOptions::default();
    tls.danger_accept_any_certificate = true;
    let config = Config::new(Mode::Forward(server), anchors);
    Resolver::new(
        config,
        Client::new(transport, Duration::from_secs(5), tls).expect("client"),
    )
}

fn measure(
    rt: &tokio::runtime::Runtime,
    alg: &str,
    transport: Transport,
    server: SocketAddr,
    ds: &pqdns_core::Record,
    fresh: bool,
    queries: usize,
) -> Row {
    let reused = resolver(transport, server, ds);
    let mut times = Vec::with_capacity(queries);
    let (mut sent, mut received, mut exchanges) = (0usize, 0usize, 0usize);
    for i in 0..queries {
        let name: Name = format!("q{i}-{}.wild.bench.", u8::from(fresh))
            .parse()
            .expect("valid name");
        let start = Instant::now();
        let answer = if fresh {
            rt.block_on(resolver(transport, server, ds).resolve(&name, RrType::A))
        } else {
            rt.block_on(reused.resolve(&name, RrType::A))
        }
        .expect("resolution works");
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        assert!(answer.status().is_secure(), "{alg} {transport:?}");
        sent += answer
            .exchanges()
            .iter()
            .map(|e| e.bytes_sent)
            .sum::<usize>();
        received += bytes_received(&answer);
        exchanges += answer.exchanges().len();
    }
    times.sort_by(f64::total_cmp);
    let n = queries as f64;
    Row {
        algorithm: alg.to_string(),
        transport: format!("{transport:?}"),
        connection: if fresh { "fresh" } else { "reused" }.into(),
        queries,
        median_ms: percentile(&times, 0.5),
        p90_ms: percentile(&times, 0.9),
        bytes_sent: sent as f64 / n,
        bytes_received: received as f64 / n,
        exchanges: exchanges as f64 / n,
    }
}

/// DNS message bytes received over all exchanges of a resolution.
pub(crate) fn bytes_received(answer: &pqdns_resolver::Answer) -> usize {
    answer.exchanges().iter().map(|e| e.bytes_received).sum()
}

/// The rows as CSV.
pub fn to_csv(rows: &[Row]) -> String {
    let mut out = String::from("algorithm,transport,connection,queries,median_ms,p90_ms,bytes_sent,bytes_received,exchanges\n");
    for r in rows {
        out.push_str(&format!(
            "{},{},{},{},{:.3},{:.3},{:.0},{:.0},{:.2}\n",
            r.algorithm,
            r.transport,
            r.connection,
            r.queries,
            r.median_ms,
            r.p90_ms,
            r.bytes_sent,
            r.bytes_received,
            r.exchanges
        ));
    }
    out
}
