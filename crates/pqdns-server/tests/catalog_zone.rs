//! Catalog zones (RFC 9432, issue 27) through a chain of real servers, over the wire only:
//!
//! ```text
//! Knot (primary: a hand-written catalog `catalog.upstream.` of 10 member zones, and the members)
//!   → pqdns (consumer: members added as secondaries, signed ECDSA P-256 + ML-DSA-44 per the
//!            catalog's template; producer: `catalog.pqdns.` lists every zone it serves)
//!   → Knot (secondary: `catalog-role: interpret` of `catalog.pqdns.`, members per its
//!           `catalog-template`, pulled from pqdns)
//! ```
//!
//! - Every member reaches pqdns and is served signed there, and reaches the downstream Knot,
//!   whose AXFR of a member carries RRSIGs of algorithm 18 (ML-DSA-44) made by pqdns.
//! - A member removed from the upstream catalog is REFUSED by pqdns and then by the
//!   downstream Knot (pqdns's produced catalog dropped it).
//! - A catalog version with the wrong schema version ("1"), listing a new member and leaving
//!   out an old one, changes nothing at pqdns; it is counted as malformed.
//! - A restart of pqdns with the primary gone serves the members of the last catalog version
//!   applied (its stored catalog copy is the malformed one), signed, from their stored copies.
//!
//! TSIG on every transfer and NOTIFY. Every wait is a bounded polling loop; every peer is
//! killed on drop.

use crate::common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use common::require;
use common::secondary::{query_wire, soa_serial, start_knotd, udp_query};
use pqdns_core::message::Message;
use pqdns_core::wire::tsig::{Algorithm, Key, KeyRing};
use pqdns_core::wire::Rcode;
use pqdns_core::RrType;
use pqdns_server::settings::Settings;
use pqdns_server::zones::ZoneSource;
use pqdns_server::{Server, ServerConfig, ServerHandle};

const KEY_NAME: &str = "catalog-key.";
const UPSTREAM: &str = "catalog.upstream.";
const PRODUCED: &str = "catalog.pqdns.";
const MEMBERS: usize = 10;

fn member(i: usize) -> String {
    format!("m{i}.test.")
}

fn secret(key: &Key) -> String {
    base64::engine::general_purpose::STANDARD.encode(key.secret())
}

/// The upstream catalog at `serial`: `version` as the schema version, members `members`.
fn catalog_text(serial: u32, version: &str, members: impl Iterator<Item = usize>) -> String {
    let mut text = format!(
        "$ORIGIN {UPSTREAM}\n$TTL 0\n@ SOA invalid. invalid. {serial} 3600 600 2419200 0\n\
         @ NS invalid.\nversion TXT \"{version}\"\n"
    );
    for i in members {
        text.push_str(&format!("id{i}.zones PTR {}\n", member(i)));
        if i % 2 == 0 {
            text.push_str(&format!("group.id{i}.zones TXT \"even\"\n"));
        }
    }
    text
}

/// Knot as the hidden primary: the catalog and `MEMBERS + 1` member zones (the last one is
/// listed only by the malformed version), transfers with the key, NOTIFY to pqdns.
struct Upstream {
    child: Child,
    dir: tempfile::TempDir,
}

impl Upstream {
    fn start(port: u16, pqdns: SocketAddr, key: &Key) -> Upstream {
        let knotd = require("knotd", "knot");
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let mut zones = format!("  - domain: {UPSTREAM}\n    file: \"{d}/catalog.zone\"\n");
        std::fs::write(
            dir.path().join("catalog.zone"),
            catalog_text(1, "2", 0..MEMBERS),
        )
        .unwrap();
        for i in 0..=MEMBERS {
            let origin = member(i);
            std::fs::write(
                dir.path().join(format!("{origin}zone")),
                format!(
                    "$ORIGIN {origin}\n$TTL 300\n@ SOA ns h 1 3600 60 3600 300\n@ NS ns\n\
                     ns A 192.0.2.1\nwww A 192.0.2.{i}\n"
                ),
            )
            .unwrap();
            zones.push_str(&format!(
                "  - domain: {origin}\n    file: \"{d}/{origin}zone\"\n"
            ));
        }
        let conf = format!(
            "server:\n  rundir: \"{d}\"\n  listen: 127.0.0.1@{port}\n\
             control:\n  listen: \"{d}/knot.sock\"\n\
             database:\n  storage: \"{d}\"\n\
             log:\n  - target: \"{d}/knot.log\"\n    any: info\n\
             key:\n  - id: {KEY_NAME}\n    algorithm: {}\n    secret: {}\n\
             remote:\n  - id: pqdns\n    address: {}@{}\n    key: {KEY_NAME}\n\
             acl:\n  - id: transfer\n    address: 127.0.0.1\n    key: {KEY_NAME}\n    action: transfer\n\
             template:\n  - id: default\n    storage: \"{d}\"\n    zonefile-load: difference\n    \
             journal-content: changes\n    notify: pqdns\n    acl: [transfer]\n\
             zone:\n{zones}",
            key.algorithm(),
            secret(key),
            pqdns.ip(),
            pqdns.port(),
        );
        let child = start_knotd(&knotd, dir.path(), &conf);
        Upstream { child, dir }
    }

    /// Replaces the catalog and has Knot reload it (a new serial, NOTIFY to pqdns).
    fn change_catalog(&self, text: &str) {
        std::fs::write(self.dir.path().join("catalog.zone"), text).unwrap();
        let knotc = require("knotc", "knot");
        let out = Command::new("timeout")
            .arg("10")
            .arg(knotc)
            .arg("-c")
            .arg(self.dir.path().join("knot.conf"))
            .args(["zone-reload", UPSTREAM])
            .output()
            .unwrap();
        assert!(out.status.success(), "knotc: {out:?}");
    }
}

impl Upstream {
    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Knot as the downstream secondary interpreting pqdns's catalog (`catalog-role: interpret`
/// with a `catalog-template` whose members come from pqdns with the key).
struct Downstream {
    child: Child,
    dir: tempfile::TempDir,
    addr: SocketAddr,
}

impl Downstream {
    fn start(port: u16, pqdns: SocketAddr, key: &Key) -> Downstream {
        let knotd = require("knotd", "knot");
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let conf = format!(
            "server:\n  rundir: \"{d}\"\n  listen: 127.0.0.1@{port}\n\
             control:\n  listen: \"{d}/knot.sock\"\n\
             database:\n  storage: \"{d}\"\n\
             log:\n  - target: \"{d}/knot.log\"\n    any: info\n\
             key:\n  - id: {KEY_NAME}\n    algorithm: {}\n    secret: {}\n\
             remote:\n  - id: pqdns\n    address: {}@{}\n    key: {KEY_NAME}\n\
             acl:\n  - id: notify\n    address: 127.0.0.1\n    key: {KEY_NAME}\n    action: notify\n  \
             - id: transfer\n    address: 127.0.0.1\n    key: {KEY_NAME}\n    action: transfer\n\
             template:\n  - id: default\n    storage: \"{d}\"\n  \
             - id: member\n    storage: \"{d}\"\n    master: pqdns\n    acl: [notify, transfer]\n\
             zone:\n  - domain: {PRODUCED}\n    master: pqdns\n    acl: [notify]\n    \
             catalog-role: interpret\n    catalog-template: member\n",
            key.algorithm(),
            secret(key),
            pqdns.ip(),
            pqdns.port(),
        );
        let child = start_knotd(&knotd, dir.path(), &conf);
        Downstream {
            child,
            dir,
            addr: ([127, 0, 0, 1], port).into(),
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("knot.log")).unwrap_or_default()
    }
}

/// `kdig` AXFR of `origin` from `server`, signed with `key`, as text.
fn axfr(server: SocketAddr, origin: &str, key: &Key) -> String {
    let kdig = require("kdig", "knot-dnsutils");
    let out = Command::new("timeout")
        .arg("10")
        .arg(kdig)
        .arg(format!("@{}", server.ip()))
        .args(["-p", &server.port().to_string()])
        .arg("-y")
        .arg(format!(
            "{}:{}:{}",
            key.algorithm(),
            key.name(),
            secret(key)
        ))
        .args(["+tcp", "AXFR", origin])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The PTR targets (member zones) in the AXFR text `axfr` of a catalog zone.
fn ptr_targets(axfr: &str) -> Vec<String> {
    let mut targets: Vec<String> = axfr
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(3) == Some(&"PTR")).then(|| f[4].to_string())
        })
        .collect();
    targets.sort();
    targets
}

impl Drop for Downstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// pqdns in process: the consumer of the upstream catalog and the producer of its own.
struct Pqdns {
    rt: tokio::runtime::Runtime,
    handle: Option<ServerHandle>,
}

impl Pqdns {
    fn start(
        dir: &Path,
        port: u16,
        upstream: SocketAddr,
        downstream: SocketAddr,
        key: &Key,
    ) -> Pqdns {
        let consumer: PathBuf = dir.join("upstream-catalog.toml");
        std::fs::write(
            &consumer,
            format!(
                "origin = \"{UPSTREAM}\"\n\
                 [secondary]\nprimaries = [\"{upstream} key {KEY_NAME}\"]\ntransfer_timeout = \"10s\"\n\
                 [catalog]\nrole = \"consumer\"\nmax_members = 20\n\
                 [catalog.template.signing]\nalgorithms = [\"ECDSAP256SHA256\", \"ML-DSA-44\"]\n\
                 keys = \"csk\"\nserial = \"unixtime\"\nkey_directory = \"keys\"\n"
            ),
        )
        .unwrap();
        let producer = dir.join("produced-catalog.toml");
        std::fs::write(
            &producer,
            format!(
                "origin = \"{PRODUCED}\"\n[catalog]\nrole = \"producer\"\ngroup = \"member\"\n"
            ),
        )
        .unwrap();
        let sources = vec![ZoneSource::File(consumer), ZoneSource::File(producer)];
        let mut ring = KeyRing::new();
        ring.insert(key.clone());
        let name = key.name().clone();
        let mut settings = Settings::new(dir.join("keys"));
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        settings.udp = vec![addr];
        settings.tcp = vec![addr];
        settings.dot = Vec::new();
        settings.doh = Vec::new();
        settings.doq = Vec::new();
        settings.tsig_keys = Arc::new(ring);
        settings.axfr_keys = vec![name.clone()];
        settings.notify = vec![downstream];
        settings.notify_keys = vec![(downstream, name)];
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let config = ServerConfig::new(sources, settings);
        let handle = rt.block_on(async {
            let handle = Server::bind(config, Default::default()).await.unwrap();
            handle.load_zones().await.unwrap();
            handle
        });
        Pqdns {
            rt,
            handle: Some(handle),
        }
    }

    fn malformed(&self) -> u64 {
        self.handle
            .as_ref()
            .unwrap()
            .provisioning()
            .malformed_catalogs()
    }
}

impl Drop for Pqdns {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.rt.block_on(h.shutdown());
        }
    }
}

/// Polls `server` with a query for `origin`'s SOA until `done` holds, up to `limit`.
fn wait(server: SocketAddr, origin: &str, limit: Duration, done: impl Fn(&Message) -> bool) {
    let start = Instant::now();
    let ask = || udp_query(server, &query_wire(origin, RrType::SOA, false));
    while start.elapsed() < limit {
        if ask().as_ref().is_some_and(&done) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "{server} {origin}: not as expected within {limit:?}; last answer {:?}",
        ask()
    );
}

/// Served as signed by pqdns: NOERROR with pqdns's signed serial (the template's `serial =
/// "unixtime"`; the primary's is 1). A DO query would be truncated over UDP (an ML-DSA-44
/// RRSIG is 2,420 bytes); the signatures are checked in an AXFR.
fn signed(m: &Message) -> bool {
    m.rcode() == Rcode::NOERROR && soa_serial(m).is_some_and(|s| s > 1_000_000_000)
}

fn served(m: &Message) -> bool {
    m.rcode() == Rcode::NOERROR && m.answers.iter().any(|r| r.rtype == RrType::SOA)
}

fn refused(m: &Message) -> bool {
    m.rcode() == Rcode::REFUSED
}

#[test]
fn catalog_from_knot_through_pqdns_to_knot() {
    let key = Key::generate(&KEY_NAME.parse().unwrap(), Algorithm::HmacSha256).unwrap();
    let ports = [(); 3].map(|()| pqdns_test_support::ports::free_dual_port());
    let [up_addr, pq_addr, down_addr]: [SocketAddr; 3] =
        ports.map(|p| SocketAddr::from(([127, 0, 0, 1], p)));
    let mut upstream = Upstream::start(ports[0], pq_addr, &key);
    let state = tempfile::tempdir().unwrap();
    let mut pqdns = Pqdns::start(state.path(), ports[1], up_addr, down_addr, &key);
    let downstream = Downstream::start(ports[2], pq_addr, &key);
    let start = Instant::now();
    eprintln!("upstream Knot {up_addr}, pqdns {pq_addr}, downstream Knot {down_addr}");

    // Every member reaches pqdns signed, and the downstream Knot through pqdns's catalog.
    for i in 0..MEMBERS {
        wait(pq_addr, &member(i), Duration::from_secs(30), signed);
    }
    eprintln!(
        "{MEMBERS} members signed at pqdns after {:?}",
        start.elapsed()
    );
    for i in 0..MEMBERS {
        wait(down_addr, &member(i), Duration::from_secs(30), signed);
    }
    eprintln!(
        "{MEMBERS} members at the downstream Knot after {:?}",
        start.elapsed()
    );
    let signed_member = axfr(downstream.addr, &member(3), &key);
    let ml_dsa = signed_member
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(3) == Some(&"RRSIG") && f.get(5) == Some(&"18")
        })
        .count();
    assert!(
        ml_dsa >= 3,
        "ML-DSA-44 RRSIGs (algorithm 18) at the downstream Knot:\n{signed_member}"
    );
    assert!(
        signed_member.contains("www.m3.test.") && signed_member.contains("192.0.2.3"),
        "{signed_member}"
    );
    // pqdns's catalog, by AXFR with TSIG: schema version 2, the members and not the
    // catalogs, the group Knot's template is named by.
    let produced = axfr(pq_addr, PRODUCED, &key);
    let mut members: Vec<String> = (0..MEMBERS).map(member).collect();
    members.sort();
    assert_eq!(ptr_targets(&produced), members, "{produced}");
    assert!(
        produced.contains("TXT\t\"2\"") || produced.contains("TXT \"2\""),
        "{produced}"
    );
    assert_eq!(
        produced.matches("\"member\"").count(),
        MEMBERS,
        "{produced}"
    );
    wait(pq_addr, UPSTREAM, Duration::from_secs(1), served);
    wait(down_addr, UPSTREAM, Duration::from_secs(1), refused);

    // A member dropped upstream is REFUSED at pqdns, then at the downstream Knot.
    upstream.change_catalog(&catalog_text(2, "2", 0..MEMBERS - 1));
    let gone = member(MEMBERS - 1);
    wait(pq_addr, &gone, Duration::from_secs(10), refused);
    wait(down_addr, &gone, Duration::from_secs(20), refused);
    wait(pq_addr, &member(0), Duration::from_secs(1), signed);
    wait(down_addr, &member(0), Duration::from_secs(1), signed);

    // A malformed version (schema "1", m0 dropped, m10 new) changes nothing at pqdns.
    assert_eq!(pqdns.malformed(), 0);
    upstream.change_catalog(&catalog_text(3, "1", 1..=MEMBERS));
    let deadline = Instant::now() + Duration::from_secs(10);
    while pqdns.malformed() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        pqdns.malformed(),
        1,
        "the wrong version was seen and counted"
    );
    wait(pq_addr, &member(0), Duration::from_secs(1), signed);
    wait(pq_addr, &member(MEMBERS), Duration::from_secs(1), refused);
    wait(down_addr, &member(0), Duration::from_secs(1), signed);
    assert!(
        downstream.log().contains("catalog"),
        "the downstream Knot interpreted the catalog:\n{}",
        downstream.log()
    );

    // A restart without the primary: the last applied members, from their stored copies.
    drop(pqdns);
    upstream.stop();
    pqdns = Pqdns::start(state.path(), ports[1], up_addr, down_addr, &key);
    for i in 0..MEMBERS - 1 {
        wait(pq_addr, &member(i), Duration::from_secs(10), signed);
    }
    wait(pq_addr, &gone, Duration::from_secs(1), refused);
    wait(pq_addr, &member(MEMBERS), Duration::from_secs(1), refused);
    assert_eq!(
        pqdns.malformed(),
        1,
        "the stored catalog is the malformed version"
    );
}

/// `ServerHandle::add_zone` and `remove_zone` without peers: an added zone is answered at
/// once and kept by a reload; a removed one is REFUSED at once and stays so after a reload; a
/// second zone of the same origin and the removal of a zone not served are errors that
/// change nothing. A reload that reads a configuration file serves the zones it gives (a
/// zone given again is served again, one no longer given is not) and keeps the zones added
/// at run time.
#[test]
fn zones_are_added_and_removed_at_run_time() {
    use pqdns_server::provisioning::ProvisionError;
    let dir = tempfile::tempdir().unwrap();
    let port = pqdns_test_support::ports::free_dual_port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let describe = |origin: &str| {
        let path = dir.path().join(format!("{origin}toml"));
        std::fs::write(
            &path,
            format!(
                "origin = \"{origin}\"\nrecords = \"\"\"\n@ SOA ns h 7 3600 60 3600 300\n@ NS ns\n\
                 ns A 192.0.2.1\n\"\"\"\n"
            ),
        )
        .unwrap();
        ZoneSource::File(path)
    };
    let configured = describe("configured.test.");
    let mut settings = Settings::new(dir.path().join("keys"));
    settings.udp = vec![addr];
    settings.tcp = vec![addr];
    settings.dot = Vec::new();
    settings.doh = Vec::new();
    settings.doq = Vec::new();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let handle = rt.block_on(async {
        let config = ServerConfig::new(vec![configured], settings);
        let handle = Server::bind(config, Default::default()).await.unwrap();
        handle.load_zones().await.unwrap();
        handle
    });
    let rcode = |origin: &str| {
        udp_query(addr, &query_wire(origin, RrType::SOA, false))
            .unwrap()
            .rcode()
    };
    assert_eq!(rcode("added.test."), Rcode::REFUSED);
    let report = rt
        .block_on(handle.add_zone(describe("added.test.")))
        .unwrap();
    assert_eq!(report.origin, Some("added.test.".parse().unwrap()));
    assert_eq!(rcode("added.test."), Rcode::NOERROR, "served at once");
    let again = rt.block_on(handle.add_zone(describe("added.test.")));
    assert!(
        matches!(again, Err(ProvisionError::Duplicate(_))),
        "{again:?}"
    );
    rt.block_on(handle.reload()).unwrap();
    assert_eq!(rcode("added.test."), Rcode::NOERROR, "kept by a reload");

    let origin = "configured.test.".parse().unwrap();
    let removed = rt.block_on(handle.remove_zone(&origin)).unwrap();
    assert!(
        removed.to_string().ends_with("configured.test.toml"),
        "{removed}"
    );
    assert_eq!(rcode("configured.test."), Rcode::REFUSED, "refused at once");
    rt.block_on(handle.reload()).unwrap();
    assert_eq!(
        rcode("configured.test."),
        Rcode::REFUSED,
        "still after a reload"
    );
    assert_eq!(rcode("added.test."), Rcode::NOERROR);
    let twice = rt.block_on(handle.remove_zone(&origin));
    assert!(
        matches!(twice, Err(ProvisionError::NotServed(_))),
        "{twice:?}"
    );

    // With a configuration file, a reload serves the zones the file gives now; a zone added
    // at run time (as a catalog member is) is not the file's and stays.
    let file = dir.path().join("pqdns-server.toml");
    std::fs::write(&file, "[[zone]]\ndescription = \"configured.test.toml\"\n").unwrap();
    let read = pqdns_server::config_file::ConfigFile::read(&file).unwrap();
    handle.reload_configuration_from(&read, Vec::new());
    rt.block_on(handle.reload()).unwrap();
    assert_eq!(
        rcode("configured.test."),
        Rcode::NOERROR,
        "the file's again"
    );
    assert_eq!(rcode("added.test."), Rcode::NOERROR, "added at run time");
    std::fs::write(&file, "").unwrap();
    rt.block_on(handle.reload()).unwrap();
    assert_eq!(
        rcode("configured.test."),
        Rcode::REFUSED,
        "no longer the file's"
    );
    assert_eq!(rcode("added.test."), Rcode::NOERROR, "added at run time");
    rt.block_on(handle.shutdown());
}
