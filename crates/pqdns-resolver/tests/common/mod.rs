//! Shared by the resolver's integration tests: an in-process pqdns-server serving one zone
//! signed with fresh keys, on 127.0.0.1 (UDP and TCP on one port, optionally DoT and DoH),
//! and the trust anchor for it.

pub(crate) mod hierarchy;
pub(crate) mod scripted;
pub(crate) mod service;

use std::net::SocketAddr;
use std::time::Duration;

use pqdns_core::{Class, Name, Record, RrType};
use pqdns_resolver::{Client, TlsOptions, Transport, TrustAnchors};
use pqdns_server::settings::Settings;
use pqdns_server::zones::{load_all, ZoneSource};
use pqdns_server::{Server, ServerConfig, ServerHandle};
use pqdns_test_support::ports::free_dual_port;

/// A zone to serve: master-file records relative to `origin`, signed with `algorithms` (none:
/// unsigned) and `denial` (`nsec` or `nsec3`).
pub(crate) struct ZoneSpec<'a> {
    pub origin: &'a str,
    pub records: &'a str,
    pub algorithms: &'a [&'a str],
    pub denial: &'a str,
}

/// A running server; shut down when dropped.
pub(crate) struct Served {
    pub rt: tokio::runtime::Runtime,
    handle: Option<ServerHandle>,
    /// The DS records of the zone's keys.
    pub anchors: TrustAnchors,
    /// UDP and TCP address.
    pub addr: SocketAddr,
    /// DoT, DoH and DoQ addresses, if asked for.
    pub dot: Option<SocketAddr>,
    pub doh: Option<SocketAddr>,
    pub doq: Option<SocketAddr>,
    /// Holds the zone description, keys, DS file (`<origin>ds`) and TLS certificate.
    pub dir: tempfile::TempDir,
}

impl Served {
    /// Re-reads and re-signs the zone description (as SIGHUP does).
    pub(crate) fn reload(&self) {
        let handle = self.handle.as_ref().unwrap();
        self.rt.block_on(handle.reload()).unwrap();
    }

    /// Re-reads and re-signs the zone as if the time were `now` (UNIX seconds).
    pub(crate) fn reload_at(&self, now: u64) {
        let handle = self.handle.as_ref().unwrap();
        self.rt.block_on(handle.load_zones_at(now)).unwrap();
    }

    /// The zones being served.
    pub(crate) fn catalog(&self) -> std::sync::Arc<pqdns_server::catalog::Catalog> {
        self.handle.as_ref().unwrap().catalog()
    }

    /// The server's counters (`pqdns_queries_total{transport=…}` …) as name and value; the
    /// server must have been configured with a metrics address.
    pub(crate) fn stats(&self) -> Vec<(String, f64)> {
        let handle = self.handle.as_ref().unwrap();
        handle
            .stats()
            .unwrap()
            .into_iter()
            .map(|c| (c.name, c.value))
            .collect()
    }

    /// When the served signatures are due for refresh (UNIX seconds).
    pub(crate) fn refresh_due(&self) -> Option<u64> {
        self.handle.as_ref().unwrap().refresh_due()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.rt.block_on(h.shutdown());
        }
    }
}

/// A multi-threaded runtime with two workers.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Serves `example.` (SOA, NS, `www A 192.0.2.2`), signed with ECDSA P-256 and NSEC, on
/// 127.0.0.1 over UDP and TCP.
pub(crate) fn serve_www_example() -> Served {
    serve(
        ZoneSpec {
            origin: "example.",
            records: "@ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 192.0.2.1\n\
                      www A 192.0.2.2\n",
            algorithms: &["ECDSAP256SHA256"],
            denial: "nsec",
        },
        false,
        |_| {},
    )
}

/// The dnstap file `tap` as `dnstap-read -y` prints it (YAML documents, `---` between
/// frames); panics with dnstap-read's error output if it fails (bounded by `timeout 30`).
pub(crate) fn dnstap_frames(tap: &std::path::Path) -> String {
    let out = std::process::Command::new("timeout")
        .args(["30", "dnstap-read", "-y"])
        .arg(tap)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "dnstap-read: {}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Serves `zone` on 127.0.0.1; `configure` may change the settings (fragmentation, …).
/// With `tls`, DoT, DoH and DoQ listen too, with a self-signed certificate in `dir/keys`.
pub(crate) fn serve(
    zone: ZoneSpec<'_>,
    tls: bool,
    configure: impl FnOnce(&mut Settings),
) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("zone.toml");
    let signing = if zone.algorithms.is_empty() {
        String::new()
    } else {
        let algs: Vec<String> = zone.algorithms.iter().map(|a| format!("{a:?}")).collect();
        format!(
            "[signing]\nalgorithms = [{}]\nkeys = \"csk\"\ndenial = \"{}\"\nkey_directory = \"keys\"\n",
            algs.join(", "),
            zone.denial
        )
    };
    std::fs::write(
        &file,
        format!(
            "origin = \"{}\"\ndefault_ttl = 300\nrecords = '''\n{}'''\n{signing}",
            zone.origin, zone.records
        ),
    )
    .unwrap();
    serve_toml(dir, file, tls, configure)
}

/// Serves the zone description `file` (keys in its key directory), in `dir`, like
/// pqdns-server: the DS records are written to `dir/keys/<zone>ds` and a generated
/// certificate to `dir/keys/pqdns-server.crt`.
pub(crate) fn serve_toml(
    dir: tempfile::TempDir,
    file: std::path::PathBuf,
    tls: bool,
    configure: impl FnOnce(&mut Settings),
) -> Served {
    serve_tomls(dir, vec![file], tls, configure)
}

/// [`serve_toml`] for several zone descriptions; the trust anchors and the DS file are the
/// first zone's.
pub(crate) fn serve_tomls(
    dir: tempfile::TempDir,
    files: Vec<std::path::PathBuf>,
    tls: bool,
    configure: impl FnOnce(&mut Settings),
) -> Served {
    let sources: Vec<ZoneSource> = files.into_iter().map(ZoneSource::File).collect();
    let (catalog, reports) = load_all(&sources, pqdns_core::time::now()).unwrap();
    let mut anchors = TrustAnchors::default();
    let mut ds_text = String::new();
    for ds in &reports[0].ds {
        anchors.add_ds(ds.owner.clone(), ds.rdata.clone());
        ds_text.push_str(&format!("{ds}\n"));
    }
    if let Some(ds) = reports[0].ds.first() {
        let keys = dir.path().join("keys");
        std::fs::create_dir_all(&keys).unwrap();
        std::fs::write(keys.join(format!("{}ds", ds.owner)), ds_text).unwrap();
    }
    bind(dir, sources, catalog, anchors, tls, configure)
}

/// Serves `zone`, already signed (e.g. by `pqdns_test_support::signed_zone`, for signing
/// policies a zone description cannot express), on 127.0.0.1 without TLS; the trust anchors
/// are the DS records (SHA-256) of its SEP keys.
pub(crate) fn serve_signed(zone: pqdns_core::Zone) -> Served {
    let mut anchors = TrustAnchors::default();
    for ds in sep_ds_records(&zone) {
        anchors.add_ds(ds.owner, ds.rdata);
    }
    let catalog =
        pqdns_server::catalog::Catalog::new([pqdns_server::catalog::ServedZone::new(zone)])
            .unwrap();
    bind(
        tempfile::tempdir().unwrap(),
        Vec::new(),
        catalog,
        anchors,
        false,
        |_| {},
    )
}

/// The DS records (SHA-256) of the SEP keys in the apex DNSKEY RRset of `zone`.
pub(crate) fn sep_ds_records(zone: &pqdns_core::Zone) -> Vec<Record> {
    use pqdns_core::dnssec::dnskey::{ds_record, DigestType, DnskeyRef};
    let origin = zone.origin.to_string();
    zone.nodes[&zone.origin][&RrType::DNSKEY]
        .rdatas
        .iter()
        .filter(|key| DnskeyRef::parse(key).is_some_and(|k| k.is_sep()))
        .map(|key| {
            let dnskey = record(&origin, RrType::DNSKEY, 300, key.clone());
            ds_record(&dnskey, DigestType::Sha256).unwrap()
        })
        .collect()
}

/// Binds a server for `catalog` (reloading from `sources`) in `dir`.
fn bind(
    dir: tempfile::TempDir,
    sources: Vec<ZoneSource>,
    catalog: pqdns_server::catalog::Catalog,
    anchors: TrustAnchors,
    tls: bool,
    configure: impl FnOnce(&mut Settings),
) -> Served {
    // One port for UDP and TCP (the fallback): free for both, or another test's TCP
    // connection may hold it.
    let addr = SocketAddr::from(([127, 0, 0, 1], free_dual_port()));
    let mut settings = Settings::new(dir.path().join("keys"));
    settings.udp = vec![addr];
    settings.tcp = vec![addr];
    // Every query of these tests comes from 127.0.0.1, hundreds at once: response-rate
    // limiting (tested in pqdns-server's cookies_rrl.rs) would turn them into TCP retries.
    settings.rrl.rate = 0;
    if tls {
        settings.dot = vec![SocketAddr::from(([127, 0, 0, 1], 0))];
        settings.doh = vec![SocketAddr::from(([127, 0, 0, 1], 0))];
        settings.doq = vec![SocketAddr::from(([127, 0, 0, 1], 0))];
    }
    configure(&mut settings);
    let rt = runtime();
    let handle = rt
        .block_on(Server::bind(ServerConfig::new(sources, settings), catalog))
        .unwrap();
    Served {
        dot: handle.addrs.dot.first().copied(),
        doh: handle.addrs.doh.first().copied(),
        doq: handle.addrs.doq.first().copied(),
        rt,
        handle: Some(handle),
        anchors,
        addr,
        dir,
    }
}

/// A name from presentation format.
pub(crate) fn name(s: &str) -> Name {
    s.parse().unwrap()
}

/// An IN record.
pub(crate) fn record(owner: &str, rtype: RrType, ttl: u32, rdata: Vec<u8>) -> Record {
    Record {
        owner: name(owner),
        rtype,
        class: Class::IN,
        ttl,
        rdata,
    }
}

/// Answers datagrams on `socket` with `reply(datagram, sender)` (or stays silent), for at
/// most 1000 datagrams; the task ends with the test's runtime.
pub(crate) fn spawn_udp<F>(socket: tokio::net::UdpSocket, mut reply: F)
where
    F: FnMut(&[u8], SocketAddr) -> Option<Vec<u8>> + Send + 'static,
{
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65_535];
        for _ in 0..1000 {
            let Ok((n, peer)) = socket.recv_from(&mut buf).await else {
                return;
            };
            if let Some(answer) = reply(&buf[..n], peer) {
                let _ = socket.send_to(&answer, peer).await;
            }
        }
    });
}

/// A UDP client without fragmentation (TC → TCP).
pub(crate) fn udp_client(timeout: Duration) -> Client {
    Client::new(Transport::Udp, timeout, TlsOptions::default()).unwrap()
}

/// BIND's delv asking `server` for `name` `t`, with the DS record `ds` as its only trust
/// anchor (`+root` at its owner): its whole output.
pub(crate) fn delv(
    dir: &std::path::Path,
    server: SocketAddr,
    ds: &pqdns_core::Record,
    name: &str,
    t: &str,
) -> String {
    let rdata = pqdns_core::rdata::to_presentation(RrType::DS, &ds.rdata);
    let f: Vec<&str> = rdata.split_whitespace().collect();
    let anchor = dir.join("delv-anchor.conf");
    std::fs::write(
        &anchor,
        format!(
            "trust-anchors {{ {} static-ds {} {} {} \"{}\"; }};\n",
            ds.owner,
            f[0],
            f[1],
            f[2],
            f[3..].concat()
        ),
    )
    .unwrap();
    let out = std::process::Command::new("timeout")
        .args(["30", "delv", "-a"])
        .arg(&anchor)
        .arg(format!(
            "+root={}",
            ds.owner.to_string().trim_end_matches('.')
        ))
        .arg(format!("@{}", server.ip()))
        .args(["-p", &server.port().to_string(), name, t])
        .output()
        .unwrap_or_else(|e| panic!("cannot run delv ({e}): apt-get install bind9-dnsutils"));
    assert!(
        out.status.code() != Some(127),
        "delv missing: apt-get install bind9-dnsutils"
    );
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A UDP relay on 127.0.0.1 in front of `backend` that counts the queries it forwards (what
/// the authority behind it would see); its address and the count. The relay ends with `rt`.
pub(crate) fn counting_relay(
    rt: &tokio::runtime::Runtime,
    backend: SocketAddr,
) -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let front = Arc::new(
        rt.block_on(tokio::net::UdpSocket::bind("127.0.0.1:0"))
            .unwrap(),
    );
    let addr = front.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    rt.spawn(async move {
        let mut buf = vec![0u8; 65_535];
        while let Ok((n, peer)) = front.recv_from(&mut buf).await {
            counted.fetch_add(1, Ordering::SeqCst);
            let query = buf[..n].to_vec();
            let front = front.clone();
            tokio::spawn(async move {
                let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
                socket.send_to(&query, backend).await.unwrap();
                let mut answer = vec![0u8; 65_535];
                let wait = tokio::time::timeout(Duration::from_secs(5), socket.recv(&mut answer));
                if let Ok(Ok(n)) = wait.await {
                    let _ = front.send_to(&answer[..n], peer).await;
                }
            });
        }
    });
    (addr, count)
}

/// example. signed with ECDSA P-256 and NSEC3 with Opt-Out (RFC 5155 §6): the unsigned
/// delegation `insecure.` is left out of the chain, the signed delegation `secure.` (it has a
/// DS) stays in it.
pub(crate) fn opt_out_zone() -> Served {
    let text = "@ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A 192.0.2.1\n\
                www A 192.0.2.2\n*.w TXT \"wild\"\n\
                insecure NS ns.insecure\nns.insecure A 192.0.2.3\n\
                secure NS ns.secure\nns.secure A 192.0.2.4\n\
                secure DS 1 13 2 0000000000000000000000000000000000000000000000000000000000000000\n";
    let params = pqdns_core::dnssec::nsec3::Nsec3Params {
        opt_out: true,
        ..Default::default()
    };
    let zone = pqdns_test_support::signed_zone(
        &name("example."),
        text,
        &[pqdns_core::dnssec::Algorithm::EcdsaP256Sha256],
        pqdns_core::dnssec::sign::Denial::Nsec3(params),
    );
    serve_signed(zone)
}

/// The response of the in-process resolver service `s` to `name` `qtype` with DO over TCP
/// from 127.0.0.1, resolved (the query must not be answered at once by the service: neither
/// from its cache nor synthesised, RFC 8198).
pub(crate) async fn resolve_in_service(
    s: &std::sync::Arc<pqdns_resolver::service::RecursiveService>,
    name: &str,
    qtype: RrType,
) -> Vec<u8> {
    let (out, at_once) = ask_service(s, name, qtype).await;
    assert!(!at_once, "{name}: answered at once by the service");
    out
}

/// The response of the in-process resolver service `s` to `name` `qtype` with DO over TCP
/// from 127.0.0.1, and whether the service answered at once (on the serving thread:
/// `Service::respond`) rather than deferred it to a resolution (`Service::respond_later`).
pub(crate) async fn ask_service(
    s: &std::sync::Arc<pqdns_resolver::service::RecursiveService>,
    name: &str,
    qtype: RrType,
) -> (Vec<u8>, bool) {
    ask_service_over(s, name, qtype, pqdns_net::Transport::Tcp).await
}

/// As [`ask_service`], over `transport` (UDP: a 1232-byte EDNS payload size).
pub(crate) async fn ask_service_over(
    s: &std::sync::Arc<pqdns_resolver::service::RecursiveService>,
    name: &str,
    qtype: RrType,
    transport: pqdns_net::Transport,
) -> (Vec<u8>, bool) {
    use pqdns_core::message::{Message, Question};
    use pqdns_net::service::{Reply, Request, Service};
    let question = Question {
        qname: name.parse().unwrap(),
        qtype,
        qclass: Class::IN,
    };
    let edns = Some(pqdns_core::wire::Edns::dnssec_ok(1232));
    let packet = Message::query(9, question, true, edns).to_wire();
    let request = Request::new(&packet, "127.0.0.1:5301".parse().unwrap(), transport);
    let mut out = Vec::new();
    match s.respond(&(), &request, &mut out, 0) {
        Reply::Ready(info) => {
            out.truncate(info.len);
            (out, true)
        }
        Reply::Defer(deferred) => {
            let (mut out, info) = std::sync::Arc::clone(s)
                .respond_later(request.to_owned(), deferred, out, 0)
                .await;
            out.truncate(info.len);
            (out, false)
        }
        _ => panic!("{name}: neither an answer nor a deferred query"),
    }
}
