//! Issue 13, must-show 3: a one-record change in an ML-DSA-44 zone reaches a Knot DNS
//! secondary (Debian `knot`, knotd 3.2) by IXFR, and the secondary serves the new record with a
//! signature that validates.
//!
//! pqdns-server serves a zone of `PQDNS_IXFR_HOSTS` hosts (default 1000; the 100k
//! was run by hand, see docs/bench/lifecycle.md) signed with ML-DSA-44 and NSEC. Knot pulls it
//! by AXFR; one host is added to the zone file and the server reloads, re-signing only what
//! changed, and sends NOTIFY; Knot pulls the difference. Then:
//! - Knot's log says the second transfer was an IXFR, and its bytes are a small fraction of
//!   the AXFR's;
//! - a validating resolver (trust anchor: the zone's DS) asking Knot gets a Secure answer for
//!   the new host, and a Secure NXDOMAIN for a name that does not exist;
//! - Knot's answer (records and RRSIGs) for the new host and for an old one is pqdns-server's.
//!
//! Every wait is bounded; knotd runs as a child process killed on drop.

use crate::common;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{name, serve_toml, udp_client, Served};
use pqdns_core::RrType;
use pqdns_resolver::{Config, Mode, Resolver};
use pqdns_server::acl::AllowList;
use pqdns_test_support::ports::free_dual_port;

const ORIGIN: &str = "ixfr.test.";
/// Longest wait for Knot to serve a serial, plus a second per thousand hosts.
const KNOT_WAIT: Duration = Duration::from_secs(120);

/// A Knot DNS secondary of `ORIGIN`, in the foreground, killed on drop.
struct Knot {
    child: Child,
    dir: tempfile::TempDir,
    addr: SocketAddr,
    wait: Duration,
}

impl Knot {
    fn start(primary: SocketAddr, addr: SocketAddr, hosts: usize) -> Knot {
        let knotd = ["/usr/sbin/knotd", "/usr/bin/knotd"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .expect("knotd not found: install the Debian package knot (./dev test does)");
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let conf = format!(
            "server:\n  rundir: \"{d}\"\n  listen: {ip}@{port}\n\
             log:\n  - target: \"{d}/knot.log\"\n    any: info\n\
             database:\n  storage: \"{d}\"\n\
             remote:\n  - id: primary\n    address: {pip}@{pport}\n\
             acl:\n  - id: notify\n    address: {pip}\n    action: notify\n\
             zone:\n  - domain: {ORIGIN}\n    storage: \"{d}\"\n    file: secondary.zone\n    \
             master: primary\n    acl: notify\n    zonefile-sync: -1\n",
            ip = addr.ip(),
            port = addr.port(),
            pip = primary.ip(),
            pport = primary.port(),
        );
        let conf_path = dir.path().join("knot.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new(knotd)
            .arg("-c")
            .arg(&conf_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting knotd");
        let wait = KNOT_WAIT + Duration::from_secs(hosts as u64 / 1000);
        Knot {
            child,
            dir,
            addr,
            wait,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("knot.log")).unwrap_or_default()
    }

    /// Polls Knot's SOA over UDP until it has `serial`, up to its wait.
    fn wait_for_serial(&mut self, served: &Served, serial: u32) {
        let start = Instant::now();
        while start.elapsed() < self.wait {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("knotd exited ({status}):\n{}", self.log());
            }
            if soa_serial(served, self.addr) == Some(serial) {
                return;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!(
            "knotd did not serve serial {serial} within {:?}; its log:\n{}",
            self.wait,
            self.log()
        );
    }

    /// The byte count Knot logged for the finished incoming transfer of `kind` (AXFR/IXFR).
    fn transfer_bytes(&self, kind: &str) -> Option<u64> {
        let log = self.log();
        let line = log
            .lines()
            .find(|l| l.contains(&format!("{kind}, incoming")) && l.contains("finished"))?;
        let before = line.split(" bytes").next()?;
        before.rsplit([' ', ',']).next()?.parse().ok()
    }
}

impl Drop for Knot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The SOA serial `server` answers with (plain query over UDP), if it answers.
fn soa_serial(served: &Served, server: SocketAddr) -> Option<u32> {
    let client = udp_client(Duration::from_secs(2));
    let query = pqdns_core::message::Message::query(
        7,
        pqdns_core::message::Question {
            qname: name(ORIGIN),
            qtype: RrType::SOA,
            qclass: pqdns_core::Class::IN,
        },
        false,
        None,
    );
    let (reply, _) = served.rt.block_on(client.exchange(server, &query)).ok()?;
    let soa = reply.answers.iter().find(|r| r.rtype == RrType::SOA)?;
    pqdns_core::wire::rdata::Soa::parse(&soa.rdata).map(|s| s.serial)
}

#[test]
fn a_one_record_change_reaches_knot_by_ixfr_and_validates_there() {
    let hosts: usize = std::env::var("PQDNS_IXFR_HOSTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let dir = tempfile::tempdir().unwrap();
    let mut zone =
        String::from("@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ NS ns1\nns1 A 127.0.0.1\n");
    for i in 0..hosts {
        zone.push_str(&format!(
            "host{i} A 10.{}.{}.{}\n",
            i >> 16,
            (i >> 8) & 255,
            i & 255
        ));
    }
    std::fs::write(dir.path().join("zone.db"), &zone).unwrap();
    let file = dir.path().join("zone.toml");
    std::fs::write(
        &file,
        format!(
            "origin = \"{ORIGIN}\"\ndefault_ttl = 300\nfile = \"zone.db\"\n[signing]\n\
             algorithms = [\"ML-DSA-44\"]\nkeys = \"ksk-zsk\"\ndenial = \"nsec\"\n\
             key_directory = \"keys\"\n"
        ),
    )
    .unwrap();
    let knot_addr = SocketAddr::from(([127, 0, 0, 1], free_dual_port()));
    let served = serve_toml(dir, file, false, |s| {
        s.axfr_allow = AllowList::new(vec!["127.0.0.1".parse().unwrap()]);
        s.notify = vec![knot_addr];
    });
    let mut knot = Knot::start(served.addr, knot_addr, hosts);
    knot.wait_for_serial(&served, 1);
    let axfr = knot.transfer_bytes("AXFR").expect("Knot logged the AXFR");

    // One new host in the zone file; the reload re-signs what changed and notifies Knot.
    let db = served.dir.path().join("zone.db");
    std::fs::write(&db, format!("{zone}new-host A 192.0.2.250\n")).unwrap();
    served.reload();
    knot.wait_for_serial(&served, 2);
    let ixfr = knot
        .transfer_bytes("IXFR")
        .unwrap_or_else(|| panic!("the update was not an IXFR; Knot's log:\n{}", knot.log()));
    assert!(
        ixfr * 20 < axfr,
        "IXFR {ixfr} bytes is not small beside AXFR {axfr} bytes"
    );
    eprintln!("{hosts} hosts: AXFR {axfr} bytes, IXFR {ixfr} bytes");

    let resolve = |server: SocketAddr, qname: &str, qtype: RrType| {
        let config = Config::new(Mode::Forward(server), served.anchors.clone());
        let resolver = Resolver::new(config, udp_client(Duration::from_secs(5)));
        served
            .rt
            .block_on(resolver.resolve(&name(qname), qtype))
            .unwrap()
    };
    let new_host = format!("new-host.{ORIGIN}");
    let theirs = resolve(knot.addr, &new_host, RrType::A);
    assert!(theirs.status().is_secure(), "Knot's new record: {theirs:?}");
    let nx = resolve(knot.addr, &format!("nothing-here.{ORIGIN}"), RrType::A);
    assert!(nx.status().is_secure(), "Knot's NXDOMAIN: {nx:?}");
    for qname in [new_host.clone(), format!("host7.{ORIGIN}")] {
        let ours = resolve(served.addr, &qname, RrType::A);
        let theirs = resolve(knot.addr, &qname, RrType::A);
        let records = |a: &pqdns_resolver::Answer| {
            let mut r: Vec<String> = a
                .answers()
                .iter()
                .flat_map(|s| s.records().into_iter().chain(s.rrsig_records()))
                .map(|r| r.to_string())
                .collect();
            r.sort();
            r
        };
        assert!(!records(&ours).is_empty());
        assert_eq!(records(&ours), records(&theirs), "{qname}");
    }
}
