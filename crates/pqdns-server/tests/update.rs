//! Dynamic updates (RFC 2136, RFC 3007) from real clients: BIND's `nsupdate -y` (UDP) and
//! Knot's `knsupdate -y` (TCP, `-v`) against pqdns-server serving a signed zone whose
//! `update_policy` grants `acme-key` the TXT records under `_acme-challenge` and `admin-key`
//! every type in the zone (NS and SOA at the apex by a rule of their own).
//!
//! - Each accepted update is served at once, signed: `dig +dnssec` shows the new RRset with
//!   its RRSIGs, delv (BIND's validator, from the zone's ECDSA DS) fully validates it, and
//!   after the deletion validates the NXDOMAIN, so the NSEC/NSEC3 chain was updated; the
//!   whole served zone verifies with pqdns-core's `dnssec::verify` (every signature of both
//!   algorithms of a dual-signed zone, the denial chain complete).
//! - Unsigned, wrongly signed (BADSIG), outside-policy, NOTZONE, prerequisite-failing and
//!   signer-record updates get the RCODE of RFC 2136 §3 / RFC 3007 and change nothing; an
//!   update that deletes the apex NS is NOERROR and ignored (§3.4.2.3).
//! - A restart (a fresh load of the same description) and a reload serve the update; editing
//!   the zone file drops it (the documented rule of `crate::update`). The `pqdns-server`
//!   binary killed with SIGKILL right after its NOERROR serves the update, signed, after a
//!   restart.
//! - Eight concurrent UPDATEs are all applied, one new serial each.
//! - Durability of the journal (issue 28, must-show 3): 1,000 UPDATEs, then a restart from the
//!   state directory: the served version plus the appended journal replay to the zone served
//!   before, every record and signature byte for byte but the SOA (a start signs a new
//!   serial); a journal entry cut short as by a crash while appending (or with a damaged
//!   record) is dropped: the zone after a restart is the one before that change, never half of
//!   it. The binary stopped dead at each crash point of applying an update (the
//!   `crash-points` feature) serves, after a restart, the zone (by AXFR) exactly before or
//!   exactly after that update, verifying.
//! - A Knot secondary gets the update of a dual-signed NSEC3 zone by IXFR after our NOTIFY.
//! - An ACME DNS-01 cycle (add the challenge, see it validated, delete it) runs 100 times
//!   with no leftover record.
//!
//! Every client runs under `timeout`.

use crate::common;

use std::io::Write;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use base64::Engine;
use common::{dig, require, run};
use pqdns_core::rdata::to_presentation;
use pqdns_core::wire::tsig::{Algorithm, Key, KeyRing};
use pqdns_core::{Name, RrType};
use pqdns_server::settings::Settings;
use pqdns_server::zones::{load_all, ZoneSource};
use pqdns_server::{Server, ServerConfig, ServerHandle};
use pqdns_test_support::cpu::process_cpu_seconds as cpu_seconds;
use pqdns_test_support::ports::free_dual_port;
use pqdns_test_support::verify::assert_zone_verifies;

/// The zone (the one the secondaries of `common::secondary` transfer).
const ORIGIN: &str = common::ORIGIN;
const ZONE: &str = "@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ NS ns1\n@ NS ns2\n\
                    ns1 A 127.0.0.1\nns2 A 127.0.0.2\nwww A 192.0.2.80\n";

/// A zone description, its keys and a server for it on one UDP+TCP port.
struct Fixture {
    dir: tempfile::TempDir,
    sources: Vec<ZoneSource>,
    acme: Key,
    admin: Key,
    port: u16,
    rt: tokio::runtime::Runtime,
    handle: Option<ServerHandle>,
    anchor: String,
    /// Where the server sends NOTIFY (a secondary that never answers).
    secondary: UdpSocket,
    /// The port of a Knot secondary, if the server is to have one: it transfers (and is sent
    /// NOTIFY) with the admin key.
    knot_port: Option<u16>,
}

impl Fixture {
    fn new(algorithms: &[&str], denial: &str) -> Fixture {
        Fixture::with_data(algorithms, denial, "")
    }

    /// [`Fixture::new`] with `extra` records in the zone file.
    fn with_data(algorithms: &[&str], denial: &str, extra: &str) -> Fixture {
        Fixture::build(algorithms, denial, extra, false)
    }

    /// [`Fixture::with_data`], with a port for a Knot secondary when `knot`.
    fn build(algorithms: &[&str], denial: &str, extra: &str, knot: bool) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("upd.zone"), format!("{ZONE}{extra}")).unwrap();
        let algs: Vec<String> = algorithms.iter().map(|a| format!("{a:?}")).collect();
        let toml = format!(
            "origin = \"{ORIGIN}\"\ndefault_ttl = 300\nfile = \"upd.zone\"\n\
             update_policy = [\"grant acme-key subdomain _acme-challenge TXT\", \
             \"grant admin-key zonesub\", \"grant admin-key name pqdns.test. NS SOA\"]\n\
             [signing]\nalgorithms = [{}]\ndenial = \"{denial}\"\nkey_directory = \"keys\"\n\
             state_directory = \"state\"\n",
            algs.join(", ")
        );
        std::fs::write(dir.path().join("zone.toml"), toml).unwrap();
        let key =
            |name: &str| Key::generate(&name.parse().unwrap(), Algorithm::HmacSha256).unwrap();
        let mut f = Fixture {
            sources: vec![ZoneSource::File(dir.path().join("zone.toml"))],
            dir,
            acme: key("acme-key."),
            admin: key("admin-key."),
            port: free_dual_port(),
            rt: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap(),
            handle: None,
            anchor: String::new(),
            secondary: UdpSocket::bind("127.0.0.1:0").unwrap(),
            knot_port: knot.then(free_dual_port),
        };
        f.start();
        f
    }

    /// Loads the zone as a starting server does and serves it.
    fn start(&mut self) {
        let (catalog, reports) = load_all(&self.sources, pqdns_core::time::now()).unwrap();
        // delv's trust anchor: the DS of the ECDSA key (algorithm 13), when the zone has one.
        let ds = reports[0]
            .ds
            .iter()
            .map(|r| to_presentation(RrType::DS, &r.rdata))
            .find(|ds| ds.split_whitespace().nth(1) == Some("13"));
        if let Some(ds) = ds {
            let f: Vec<&str> = ds.split_whitespace().collect();
            let anchor = self.dir.path().join("anchor.conf");
            std::fs::write(
                &anchor,
                format!(
                    "trust-anchors {{ {ORIGIN} static-ds {} {} {} \"{}\"; }};\n",
                    f[0],
                    f[1],
                    f[2],
                    f[3..].concat()
                ),
            )
            .unwrap();
            self.anchor = anchor.display().to_string();
        }
        let mut settings = Settings::new(self.dir.path().join("keys"));
        let addr: SocketAddr = ([127, 0, 0, 1], self.port).into();
        (settings.udp, settings.tcp) = (vec![addr], vec![addr]);
        let mut ring = KeyRing::new();
        ring.insert(self.acme.clone());
        ring.insert(self.admin.clone());
        settings.tsig_keys = Arc::new(ring);
        settings.notify = vec![self.secondary.local_addr().unwrap()];
        if let Some(port) = self.knot_port {
            let knot: SocketAddr = ([127, 0, 0, 1], port).into();
            settings.axfr_keys = vec![self.admin.name().clone()];
            settings.notify.push(knot);
            settings.notify_keys = vec![(knot, self.admin.name().clone())];
        }
        let config = ServerConfig::new(self.sources.clone(), settings);
        self.handle = Some(self.rt.block_on(Server::bind(config, catalog)).unwrap());
    }

    /// Shuts the server down and starts a new one from what is on disk.
    fn restart(&mut self) {
        if let Some(h) = self.handle.take() {
            self.rt.block_on(h.shutdown());
        }
        self.start();
    }

    fn addr(&self) -> SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    /// `-y` for `key` (another secret with `wrong`).
    fn y(key: &Key, wrong: bool) -> String {
        let secret = if wrong {
            b"not the secret"
        } else {
            key.secret()
        };
        let b64 = base64::engine::general_purpose::STANDARD.encode(secret);
        format!(
            "hmac-sha256:{}:{b64}",
            key.name().to_string().trim_end_matches('.')
        )
    }

    /// [`nsupdate`] against this server.
    fn nsupdate(&self, knot: bool, y: Option<&str>, lines: &[&str]) -> (bool, String) {
        nsupdate(self.port, knot, y, lines)
    }

    fn delv(&self, qname: &str, qtype: &str) -> String {
        let program = require("delv", "bind9-dnsutils");
        let root = format!("+root={}", ORIGIN.trim_end_matches('.'));
        let args: Vec<String> = [
            "-a",
            &self.anchor,
            &root,
            "@127.0.0.1",
            "-p",
            &self.port.to_string(),
            qname,
            qtype,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        run(&program, &args).1
    }

    /// Whether a NOTIFY for `serial` arrives at the secondary (other NOTIFYs and their
    /// retries are skipped; at most 20 messages, each waited for up to 5 s).
    fn notified(&self, serial: u32) -> bool {
        self.secondary
            .set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut buf = [0u8; 4096];
        for _ in 0..20 {
            let Ok((n, _)) = self.secondary.recv_from(&mut buf) else {
                return false;
            };
            let m = pqdns_core::message::Message::parse(&buf[..n]).unwrap();
            let soa = m.answers.iter().find(|r| r.rtype == RrType::SOA);
            let is_notify = (buf[2] >> 3) & 0xf == 4;
            if is_notify
                && soa.is_some_and(|r| r.rdata[r.rdata.len() - 20..][..4] == serial.to_be_bytes())
            {
                return true;
            }
        }
        false
    }

    /// The served SOA serial (without copying the zone).
    fn serial(&self) -> u32 {
        let origin: Name = ORIGIN.parse().unwrap();
        let catalog = self.handle.as_ref().unwrap().catalog();
        catalog.zone(&origin).unwrap().zone.soa_serial()
    }

    fn served(&self) -> pqdns_core::Zone {
        let origin: Name = ORIGIN.parse().unwrap();
        let catalog = self.handle.as_ref().unwrap().catalog();
        catalog.zone(&origin).unwrap().zone.clone()
    }

    /// The whole served zone verifies: every signature of every algorithm, the denial chain.
    fn assert_verifies(&self) {
        assert_zone_verifies(&self.served(), "the served zone");
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.rt.block_on(h.shutdown());
        }
    }
}

/// Runs nsupdate (`knot`: knsupdate, over TCP) against 127.0.0.1 `port` with `y` (none:
/// unsigned) and the update `lines` for the zone; (exit success, output).
fn nsupdate(port: u16, knot: bool, y: Option<&str>, lines: &[&str]) -> (bool, String) {
    let program = if knot {
        require("knsupdate", "knot-dnsutils")
    } else {
        require("nsupdate", "bind9-dnsutils")
    };
    let mut args: Vec<String> = Vec::new();
    if knot {
        // TCP, and a 60 s timeout: an update of a large zone takes seconds.
        args.extend(["-v".into(), "-t".into(), "60".into()]);
    }
    if let Some(y) = y {
        args.extend(["-y".into(), y.to_string()]);
    }
    let mut script = format!("server 127.0.0.1 {}\nzone {ORIGIN}\n", port);
    for l in lines {
        script.push_str(l);
        script.push('\n');
    }
    script.push_str("send\n");
    let mut child = Command::new("timeout")
        .arg("30")
        .arg(&program)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn name(label: &str) -> String {
    format!("{label}.{ORIGIN}")
}

#[test]
fn nsupdate_and_knsupdate_change_a_dual_signed_zone_and_wrong_updates_get_their_rcode() {
    let mut f = Fixture::new(&["ECDSAP256SHA256", "ML-DSA-44"], "nsec");
    let (acme, admin) = (Fixture::y(&f.acme, false), Fixture::y(&f.admin, false));
    let challenge = name("_acme-challenge");
    let serial = f.serial();

    // nsupdate (UDP) adds a TXT under the acme key's subdomain.
    let add = format!("update add {challenge} 60 TXT \"token-1\"");
    let (ok, text) = f.nsupdate(false, Some(&acme), &[&add]);
    assert!(ok, "{text}");
    assert!(f.serial() > serial, "a new serial");
    assert!(f.notified(f.serial()), "NOTIFY with the new serial");
    let out = dig(f.addr(), &["+dnssec", &challenge, "TXT"]);
    assert_eq!(out.status(), "NOERROR", "{}", out.text);
    assert!(
        out.text.contains("token-1") && out.has_rrsig("ANSWER", "TXT"),
        "{}",
        out.text
    );
    let v = f.delv(&challenge, "TXT");
    assert!(
        v.contains("; fully validated") && v.contains("token-1"),
        "{v}"
    );
    f.assert_verifies();

    // knsupdate (TCP) adds an A record with the admin key.
    let (ok, text) = f.nsupdate(
        true,
        Some(&admin),
        &[&format!("update add {} 60 A 192.0.2.7", name("new"))],
    );
    assert!(ok && !text.contains("REFUSED"), "{text}");
    let v = f.delv(&name("new"), "A");
    assert!(
        v.contains("; fully validated") && v.contains("192.0.2.7"),
        "{v}"
    );
    f.assert_verifies();

    // Refusals, each changing nothing.
    let before = f.served();
    let www_a = format!("update add {} 60 A 192.0.2.81", name("www"));
    let cases: Vec<(Option<String>, Vec<String>, &str)> = vec![
        // RFC 3007: unsigned, outside the policy (the acme key and an A record).
        (None, vec![add.replace("token-1", "t2")], "REFUSED"),
        (Some(acme.clone()), vec![www_a.clone()], "REFUSED"),
        // RFC 8945 §5.2.2: a wrong secret.
        (
            Some(Fixture::y(&f.admin, true)),
            vec![www_a.clone()],
            "NOTAUTH",
        ),
        // §3.4.1.3: a name outside the zone; records the signer manages.
        (
            Some(admin.clone()),
            vec!["update add www.other.test. 60 A 192.0.2.1".into()],
            "NOTZONE",
        ),
        (
            Some(admin.clone()),
            vec![format!("update add {ORIGIN} 60 DNSKEY 256 3 13 AAAA")],
            "REFUSED",
        ),
        // §3.2: prerequisites.
        (
            Some(admin.clone()),
            vec![format!("prereq nxdomain {}", name("www")), www_a.clone()],
            "YXDOMAIN",
        ),
        (
            Some(admin.clone()),
            vec![format!("prereq yxdomain {}", name("nope")), www_a.clone()],
            "NXDOMAIN",
        ),
        (
            Some(admin.clone()),
            vec![format!("prereq yxrrset {} MX", name("www")), www_a.clone()],
            "NXRRSET",
        ),
        (
            Some(admin.clone()),
            vec![format!("prereq nxrrset {} A", name("www")), www_a.clone()],
            "YXRRSET",
        ),
    ];
    for (y, lines, rcode) in &cases {
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (ok, text) = f.nsupdate(false, y.as_deref(), &lines);
        assert!(!ok && text.contains(rcode), "{rcode} for {lines:?}: {text}");
    }
    // knsupdate sees the same RCODE.
    let (ok, text) = f.nsupdate(true, None, &[&www_a]);
    assert!(!ok && text.contains("REFUSED"), "{text}");
    assert_eq!(f.served(), before, "no refused update changed the zone");

    // §3.4.2.3: deleting the apex NS or SOA is ignored (NOERROR, nothing changes).
    let (ok, text) = f.nsupdate(
        false,
        Some(&admin),
        &[&format!("update delete {ORIGIN} NS")],
    );
    assert!(ok, "{text}");
    assert_eq!(f.served(), before, "the apex NS stays");

    // Deleting the challenge: NXDOMAIN, validated from the updated NSEC chain.
    let (ok, text) = f.nsupdate(
        true,
        Some(&acme),
        &[&format!("update delete {challenge} TXT")],
    );
    assert!(ok, "{text}");
    let v = f.delv(&challenge, "TXT");
    assert!(
        v.contains("; negative response, fully validated") && v.contains("NXDOMAIN"),
        "{v}"
    );
    f.assert_verifies();

    // A restart (as after SIGKILL: a fresh load from the state directory) and a reload serve
    // the update; the served version is signed and verifies.
    let serial = f.serial();
    f.restart();
    let out = dig(f.addr(), &["+dnssec", &name("new"), "A"]);
    assert!(
        out.text.contains("192.0.2.7") && out.has_rrsig("ANSWER", "A"),
        "{}",
        out.text
    );
    assert!(
        f.serial() > serial || f.serial() == serial,
        "the serial does not go back"
    );
    f.assert_verifies();
    f.rt.block_on(f.handle.as_ref().unwrap().reload()).unwrap();
    let out = dig(f.addr(), &[&name("new"), "A"]);
    assert!(
        out.text.contains("192.0.2.7"),
        "after a reload: {}",
        out.text
    );

    // Editing the zone file drops the updates (documented): the file wins.
    let edited = format!("{ZONE}edited A 192.0.2.99\n");
    std::fs::write(f.dir.path().join("upd.zone"), edited).unwrap();
    f.rt.block_on(f.handle.as_ref().unwrap().reload()).unwrap();
    let out = dig(f.addr(), &[&name("new"), "A"]);
    assert_eq!(out.status(), "NXDOMAIN", "{}", out.text);
    assert!(dig(f.addr(), &[&name("edited"), "A"])
        .text
        .contains("192.0.2.99"));
    assert!(!Path::new(&f.dir.path().join("state/pqdns.test.dynamic")).exists());
}

#[test]
fn an_acme_cycle_runs_100_times_with_no_leftover() {
    let f = Fixture::new(&["ECDSAP256SHA256"], "nsec3");
    let acme = Fixture::y(&f.acme, false);
    let challenge = name("_acme-challenge");
    let start = f.served();
    for i in 0..100 {
        let token = format!("token-{i}");
        let knot = i % 2 == 1;
        let (ok, text) = f.nsupdate(
            knot,
            Some(&acme),
            &[&format!("update add {challenge} 60 TXT \"{token}\"")],
        );
        assert!(ok, "cycle {i}: {text}");
        let out = dig(f.addr(), &["+dnssec", &challenge, "TXT"]);
        assert!(
            out.text.contains(&token) && out.has_rrsig("ANSWER", "TXT"),
            "cycle {i}: {}",
            out.text
        );
        if i % 25 == 0 {
            let v = f.delv(&challenge, "TXT");
            assert!(
                v.contains("; fully validated") && v.contains(&token),
                "cycle {i}: {v}"
            );
        }
        let (ok, text) = f.nsupdate(
            !knot,
            Some(&acme),
            &[&format!("update delete {challenge} TXT \"{token}\"")],
        );
        assert!(ok, "cycle {i}: {text}");
        let out = dig(f.addr(), &["+dnssec", &challenge, "TXT"]);
        assert_eq!(out.status(), "NXDOMAIN", "cycle {i}: {}", out.text);
    }
    let v = f.delv(&challenge, "TXT");
    assert!(v.contains("; negative response, fully validated"), "{v}");
    let end = f.served();
    let left: Vec<&Name> = end
        .nodes
        .keys()
        .filter(|n| !start.nodes.contains_key(*n))
        .collect();
    assert!(left.is_empty(), "leftover names: {left:?}");
    assert_eq!(
        end.record_count(),
        start.record_count(),
        "the same records (new signatures)"
    );
    f.assert_verifies();
}

/// Knot 3.2 as a secondary (TSIG-signed transfers and NOTIFY) gets an update of a dual-signed
/// NSEC3 zone by IXFR after our NOTIFY (its refresh timer, 7200 s, cannot explain it) and serves
/// the new record with its signatures.
#[test]
fn a_knot_secondary_receives_an_update_by_ixfr() {
    let f = Fixture::build(&["ECDSAP256SHA256", "ML-DSA-44"], "nsec3", "", true);
    // As an operator of a large dynamic zone runs Knot: the zone kept in its journal (the
    // changes), never its whole zone file rewritten after each change.
    let mut knot = common::secondary::Knot::start_with(
        f.addr(),
        f.knot_port.unwrap(),
        Some(&f.admin),
        "    zonefile-sync: -1\n    journal-content: changes\n",
    );
    knot.wait_for_serial(f.serial());
    let admin = Fixture::y(&f.admin, false);
    let line = format!("update add {} 60 A 192.0.2.33", name("ixfr"));
    let (ok, text) = f.nsupdate(false, Some(&admin), &[&line]);
    assert!(ok, "{text}");
    knot.wait_for_serial(f.serial());
    let log = knot.log();
    assert!(
        log.contains("AXFR, incoming") && log.contains("IXFR, incoming"),
        "knot: AXFR first, then IXFR:\n{log}"
    );
    let out = dig(knot.addr, &["+dnssec", "+tcp", &name("ixfr"), "A"]);
    assert!(
        out.text.contains("192.0.2.33") && out.has_rrsig("ANSWER", "A"),
        "{}",
        out.text
    );
}

/// Concurrent UPDATEs are applied one after the other, none lost: eight clients at once (UDP
/// and TCP), each adding its own record, get NOERROR; the zone then holds all eight, its serial
/// moved on by eight (one per update, serial policy `increment`), and it verifies.
#[test]
fn concurrent_updates_are_all_applied_in_turn() {
    let f = Fixture::new(&["ECDSAP256SHA256"], "nsec");
    let admin = Fixture::y(&f.admin, false);
    let serial = f.serial();
    std::thread::scope(|scope| {
        let clients: Vec<_> = (0..8)
            .map(|i| {
                let (f, admin) = (&f, &admin);
                scope.spawn(move || {
                    let line = format!("update add {} 60 A 192.0.2.{i}", name(&format!("c{i}")));
                    f.nsupdate(i % 2 == 1, Some(admin), &[&line])
                })
            })
            .collect();
        for c in clients {
            let (ok, text) = c.join().unwrap();
            assert!(ok, "{text}");
        }
    });
    let zone = f.served();
    for i in 0..8 {
        let owner: Name = name(&format!("c{i}")).parse().unwrap();
        assert!(zone.rrset(&owner, RrType::A).is_some(), "c{i} applied");
    }
    assert_eq!(f.serial(), serial + 8, "one new serial per update");
    f.assert_verifies();
}

/// The `pqdns-server` binary killed with SIGKILL right after it answered an UPDATE NOERROR
/// serves the update, signed, once started again: the answer went out only after the change
/// was on disk.
#[test]
fn sigkill_right_after_noerror_loses_no_update() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_dual_port();
    let key = Key::generate(&"admin-key.".parse().unwrap(), Algorithm::HmacSha256).unwrap();
    let secret = base64::engine::general_purpose::STANDARD.encode(key.secret());
    std::fs::write(dir.path().join("upd.zone"), ZONE).unwrap();
    let toml = dir.path().join("zone.toml");
    std::fs::write(
        &toml,
        format!(
            "origin = \"{ORIGIN}\"\nfile = \"upd.zone\"\n\
             update_policy = [\"grant admin-key zonesub\"]\n[signing]\n\
             algorithms = [\"ECDSAP256SHA256\"]\nkey_directory = \"keys\"\n[server]\n\
             udp = [\"127.0.0.1:{port}\"]\ntcp = [\"127.0.0.1:{port}\"]\ndot = []\ndoh = []\n\
             tsig_key = [{{ name = \"admin-key\", algorithm = \"hmac-sha256\", secret = \"{secret}\" }}]\n"
        ),
    )
    .unwrap();
    let args = ["--zone", toml.to_str().unwrap()];
    let y = Fixture::y(&key, false);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    for (round, log) in ["first.log", "second.log"].into_iter().enumerate() {
        let log = dir.path().join(log);
        let (mut child, rx) = common::spawn_server(&args, dir.path(), &log);
        common::listening(&rx, "tcp", std::time::Duration::from_secs(60), &log);
        if round == 0 {
            let line = format!("update add {} 60 A 192.0.2.44", name("durable"));
            let (ok, text) = nsupdate(port, true, Some(&y), &[&line]);
            assert!(ok, "{text}");
        } else {
            let out = dig(addr, &["+dnssec", &name("durable"), "A"]);
            assert!(
                out.text.contains("192.0.2.44") && out.has_rrsig("ANSWER", "A"),
                "after SIGKILL and a restart: {}",
                out.text
            );
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// One UPDATE of `ORIGIN` adding `record` (master-file text), TSIG-signed with `key`, over TCP
/// to `addr` (a small client in the test process: no program started per update); the
/// response's RCODE.
fn send_update(addr: SocketAddr, key: &Key, record: &str) -> u8 {
    try_send_update(addr, key, record).unwrap()
}

/// [`send_update`]; an error when the connection fails or closes before the response.
fn try_send_update(addr: SocketAddr, key: &Key, record: &str) -> std::io::Result<u8> {
    use std::io::Read;
    let origin: Name = ORIGIN.parse().unwrap();
    let record = pqdns_core::zonefile::ZoneFileReader::new(Some(origin.clone()), Some(60))
        .read_str(record, "update")
        .unwrap()
        .remove(0);
    // ID, OPCODE UPDATE (5), ZOCOUNT 1, PRCOUNT 0, UPCOUNT 1, ADCOUNT 0 (RFC 2136 §2.2).
    let mut msg = vec![0x12, 0x34, 5 << 3, 0, 0, 1, 0, 0, 0, 1, 0, 0];
    msg.extend_from_slice(origin.as_wire());
    msg.extend_from_slice(&[0, 6, 0, 1]);
    record.write_wire(&mut msg);
    let fields = pqdns_core::wire::tsig::Fields::at(pqdns_core::time::now());
    pqdns_core::wire::tsig::sign(
        key,
        pqdns_core::wire::tsig::Digest::Request,
        &mut msg,
        0,
        &fields,
    )
    .unwrap();
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(60)))?;
    let mut framed = (msg.len() as u16).to_be_bytes().to_vec();
    framed.extend(msg);
    stream.write_all(&framed)?;
    let mut len = [0u8; 2];
    stream.read_exact(&mut len)?;
    let mut response = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut response)?;
    Ok(response[3] & 0xf)
}

/// Every record of `zone` as text, sorted, but the apex SOA and its RRSIGs.
fn records_but_soa(zone: &pqdns_core::Zone) -> Vec<String> {
    let mut out: Vec<String> = zone
        .records()
        .into_iter()
        .filter(|r| r.rtype != RrType::SOA && r.covered_type() != Some(RrType::SOA))
        .map(|r| r.to_string())
        .collect();
    out.sort();
    out
}

/// Issue 28, must-show 3: 1,000 updates (each appended to the journal file) then a restart:
/// the served version and the journal replay to the zone served before (compared record by
/// record, signatures included, but the SOA, which the start signs anew with a new serial).
#[test]
fn a_thousand_updates_replay_from_the_journal_after_a_restart() {
    for denial in ["nsec", "nsec3"] {
        let mut f = Fixture::new(&["ECDSAP256SHA256"], denial);
        for i in 0..1000 {
            let record = format!("r{i} 60 A 192.0.2.{}", i % 250);
            assert_eq!(send_update(f.addr(), &f.admin, &record), 0, "update {i}");
        }
        let before = f.served();
        let journal = f.dir.path().join("state/pqdns.test.journal");
        let text = std::fs::read_to_string(&journal).unwrap();
        assert!(
            text.matches("; end ").count() >= 1000,
            "each update is in the journal file"
        );
        f.restart();
        let after = f.served();
        assert!(after.soa_serial() > before.soa_serial());
        assert_eq!(
            records_but_soa(&after),
            records_but_soa(&before),
            "{denial}"
        );
        f.assert_verifies();
    }
}

/// Issue 28, must-show 3: a change whose journal entry was cut short (a crash while
/// appending: no end line, or a damaged record under its digest) is not there after a restart,
/// and everything before it is, signed.
#[test]
fn a_torn_journal_entry_is_dropped_at_a_restart() {
    let mut f = Fixture::new(&["ECDSAP256SHA256"], "nsec3");
    for i in 0..3 {
        let record = format!("kept{i} 60 A 192.0.2.{i}");
        assert_eq!(send_update(f.addr(), &f.admin, &record), 0);
    }
    let journal = f.dir.path().join("state/pqdns.test.journal");
    let snapshot = f.dir.path().join("state/pqdns.test.served");
    let complete = std::fs::read_to_string(&journal).unwrap();
    let served = std::fs::read(&snapshot).unwrap();
    assert_eq!(send_update(f.addr(), &f.admin, "torn 60 A 192.0.2.66"), 0);
    let with_torn = std::fs::read_to_string(&journal).unwrap();
    let entry = &with_torn[complete.len()..];
    assert!(entry.contains("torn.pqdns.test."), "{entry}");
    let end = entry.find("; end ").unwrap();
    for cut in [
        // Cut inside the records, before the end line.
        entry[..end / 2].to_string(),
        // Whole, but a record damaged after it was written.
        entry.replacen("192.0.2.66", "192.0.2.67", 1),
    ] {
        if let Some(h) = f.handle.take() {
            f.rt.block_on(h.shutdown());
        }
        std::fs::write(&snapshot, &served).unwrap();
        std::fs::write(&journal, format!("{complete}{cut}")).unwrap();
        f.start();
        let zone = f.served();
        let torn: Name = name("torn").parse().unwrap();
        assert!(
            !zone.nodes.contains_key(&torn),
            "the torn change is not served"
        );
        for i in 0..3 {
            let kept: Name = name(&format!("kept{i}")).parse().unwrap();
            assert!(zone.rrset(&kept, RrType::A).is_some(), "kept{i} served");
        }
        f.assert_verifies();
        // The next start rewrote the journal whole: the torn part is gone from the file.
        assert!(!std::fs::read_to_string(&journal).unwrap().contains("torn"));
    }
}

/// The zone served at `addr`, as `dig AXFR` gets it (one SOA).
fn axfr(addr: SocketAddr) -> pqdns_core::Zone {
    let program = require("dig", "bind9-dnsutils");
    let args: Vec<String> = [
        "@127.0.0.1",
        "-p",
        &addr.port().to_string(),
        "+noall",
        "+answer",
        "+onesoa",
        "+tries=1",
        "+time=10",
        ORIGIN,
        "AXFR",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let (ok, text) = run(&program, &args);
    assert!(ok, "dig AXFR: {text}");
    let origin: Name = ORIGIN.parse().unwrap();
    let records = pqdns_core::zonefile::ZoneFileReader::new(Some(origin.clone()), None)
        .read_str(&text, "axfr")
        .unwrap_or_else(|e| panic!("{e}: {text}"));
    pqdns_core::Zone::from_records(origin, records).unwrap()
}

/// The zone's data as the signer was given it: every record but the apex SOA and what the
/// signer makes (RRSIG, NSEC, NSEC3, NSEC3PARAM, DNSKEY), sorted.
fn unsigned_data(zone: &pqdns_core::Zone) -> Vec<String> {
    let signer = [
        RrType::SOA,
        RrType::RRSIG,
        RrType::NSEC,
        RrType::NSEC3,
        RrType::NSEC3PARAM,
        RrType::DNSKEY,
    ];
    records_but_soa(zone)
        .into_iter()
        .filter(|r| {
            let rtype = r.split_whitespace().nth(3).unwrap_or_default();
            !signer.iter().any(|t| t.to_string() == rtype)
        })
        .collect()
}

/// Issue 28, must-show 3: the `pqdns-server` binary stopped dead in the middle of applying an
/// UPDATE (`PQDNS_TEST_CRASH_AT`, the `crash-points` feature: the process aborts there, as
/// SIGKILL would stop it) serves, once started again, exactly the zone before the update or
/// exactly the zone after it, signed and verifying, never something between. For each point,
/// updates are sent one by one until the server dies in the middle of one (the whole-write
/// point is reached at the first update whose journal entries outgrow the zone file); the zone
/// is fetched by AXFR before that update and after the restart:
///
/// - `marked` (the `.dynamic` record written, nothing of the change) and `journal-torn` (half
///   the journal entry written): the zone before, every record and signature as it was but
///   the SOA (a start signs a new serial);
/// - `journal-written` (the entry written, not synced: a process crash leaves the kernel's
///   copy), `journal-synced` (not yet served nor answered) and `served-written` (the zone file
///   written whole, its journal not): the zone after it, with the new record signed.
#[test]
fn a_crash_in_the_middle_of_an_update_leaves_the_zone_before_or_after_it() {
    let key = Key::generate(&"admin-key.".parse().unwrap(), Algorithm::HmacSha256).unwrap();
    let secret = base64::engine::general_purpose::STANDARD.encode(key.secret());
    let server = env!("CARGO_BIN_EXE_pqdns-server");
    for (point, applied) in [
        ("marked", false),
        ("journal-torn", false),
        ("journal-written", true),
        ("journal-synced", true),
        ("served-written", true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let port = free_dual_port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        std::fs::write(dir.path().join("upd.zone"), ZONE).unwrap();
        let toml = dir.path().join("zone.toml");
        std::fs::write(
            &toml,
            format!(
                "origin = \"{ORIGIN}\"\nfile = \"upd.zone\"\n\
                 update_policy = [\"grant admin-key zonesub\"]\n[signing]\n\
                 algorithms = [\"ECDSAP256SHA256\"]\ndenial = \"nsec3\"\nkey_directory = \"keys\"\n\
                 [server]\nudp = [\"{addr}\"]\ntcp = [\"{addr}\"]\ndot = []\ndoh = []\n\
                 axfr_allow = [\"127.0.0.1\"]\n\
                 tsig_key = [{{ name = \"admin-key\", algorithm = \"hmac-sha256\", secret = \"{secret}\" }}]\n"
            ),
        )
        .unwrap();
        let crash_at = format!("PQDNS_TEST_CRASH_AT={point}");
        let toml = toml.to_str().unwrap();
        let log = dir.path().join("crash.log");
        let (mut child, rx) = common::spawn(
            Path::new("env"),
            &[&crash_at, server, "--zone", toml],
            dir.path(),
            &log,
        );
        common::listening(&rx, "tcp", std::time::Duration::from_secs(60), &log);
        let mut crashed = None;
        for i in 0..10 {
            let before = axfr(addr);
            let record = format!("crash{i} 60 A 192.0.2.{i}");
            match try_send_update(addr, &key, &record) {
                Ok(rcode) => assert_eq!(rcode, 0, "{point}: update {i}"),
                Err(_) => {
                    crashed = Some((before, name(&format!("crash{i}")), i));
                    break;
                }
            }
        }
        let status = child.wait().unwrap();
        let (before, owner, i) =
            crashed.unwrap_or_else(|| panic!("{point}: the server did not stop in 10 updates"));
        let log_text = std::fs::read_to_string(&log).unwrap();
        assert!(
            !status.success() && log_text.contains(&crash_at),
            "{point}: {status:?}\n{log_text}"
        );
        let log = dir.path().join("restart.log");
        let (mut child, rx) = common::spawn_server(&["--zone", toml], dir.path(), &log);
        common::listening(&rx, "tcp", std::time::Duration::from_secs(60), &log);
        let after = axfr(addr);
        child.kill().unwrap();
        child.wait().unwrap();
        let context = format!("{point} (update {i})");
        assert_zone_verifies(&after, &context);
        assert!(after.soa_serial() > before.soa_serial(), "{context}");
        if applied {
            let (was, is) = (unsigned_data(&before), unsigned_data(&after));
            let added: Vec<Vec<&str>> = is
                .iter()
                .filter(|r| !was.contains(r))
                .map(|r| r.split_whitespace().collect())
                .collect();
            let address = format!("192.0.2.{i}");
            let expected = vec![vec![&*owner, "60", "IN", "A", &*address]];
            assert_eq!(added, expected, "{context}: the zone after");
            assert!(
                was.iter().all(|r| is.contains(r)),
                "{context}: the zone after"
            );
            let owner: Name = owner.parse().unwrap();
            let signed = after
                .rrset(&owner, RrType::A)
                .is_some_and(|s| !s.rrsigs.is_empty());
            assert!(signed, "{context}: the new record is signed");
        } else {
            assert_eq!(
                records_but_soa(&after),
                records_but_soa(&before),
                "{context}: the zone before"
            );
        }
    }
}

/// The cost of one UPDATE in a large zone against signing it whole, side by side in one run
/// (docs/bench/lifecycle.md, "Dynamic updates"; `benches/lifecycle/run.sh` runs it for each
/// algorithm). The start signs the zone whole (no state directory yet): the baseline. Then
/// one UPDATE (the first after a load copies the zone, see `crate::resign`), then
/// `PQDNS_UPDATE_BENCH_UPDATES` more, one after the other from a client in this process, each
/// timed from sending to the answer (which comes after the change is signed, served and
/// synced to the journal file). CPU is this process's (server and client) over all of them,
/// divided by their number. Prints one CSV row (and appends it to `PQDNS_UPDATE_BENCH_CSV`).
#[test]
#[ignore = "a measurement, minutes at 100,000 records"]
fn measure_one_update_against_a_full_signing() {
    let env = |name: &str, default: &str| std::env::var(name).unwrap_or(default.into());
    let hosts: usize = env("PQDNS_UPDATE_BENCH_HOSTS", "100000").parse().unwrap();
    let updates: usize = env("PQDNS_UPDATE_BENCH_UPDATES", "1000").parse().unwrap();
    let alg = env("PQDNS_UPDATE_BENCH_ALG", "ECDSAP256SHA256");
    let hosts_text: String = (0..hosts)
        .map(|i| format!("h{i} A 10.{}.{}.{}\n", i >> 16, (i >> 8) & 255, i & 255))
        .collect();
    let before = cpu_seconds();
    let started = std::time::Instant::now();
    let f = Fixture::with_data(&[&alg], "nsec3", &hosts_text);
    let (full_cpu, full_wall) = (cpu_seconds() - before, started.elapsed().as_secs_f64());
    let before = cpu_seconds();
    let started = std::time::Instant::now();
    assert_eq!(send_update(f.addr(), &f.admin, "first 60 A 192.0.2.1"), 0);
    let (first_cpu, first_wall) = (cpu_seconds() - before, started.elapsed().as_secs_f64());
    let mut latencies = Vec::with_capacity(updates);
    let before = cpu_seconds();
    let all = std::time::Instant::now();
    for i in 0..updates {
        let started = std::time::Instant::now();
        let record = format!("new{i} 60 A 192.0.2.{}", i % 250);
        assert_eq!(send_update(f.addr(), &f.admin, &record), 0, "update {i}");
        latencies.push(started.elapsed().as_secs_f64());
    }
    let (cpu, wall) = (cpu_seconds() - before, all.elapsed().as_secs_f64());
    let out = dig(
        f.addr(),
        &["+dnssec", &name(&format!("new{}", updates - 1)), "A"],
    );
    assert!(out.has_rrsig("ANSWER", "A"), "{}", out.text);
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize] * 1e3;
    let per_update = cpu / updates as f64;
    let row = format!(
        "{alg},{hosts},{full_cpu:.3},{full_wall:.3},{first_cpu:.3},{first_wall:.3},{updates},\
         {per_update:.5},{:.2},{:.2},{:.1},{:.0}",
        at(0.5),
        at(0.99),
        updates as f64 / wall,
        full_cpu / per_update
    );
    println!("algorithm,hosts,full_cpu_s,full_wall_s,first_update_cpu_s,first_update_wall_s,updates,cpu_per_update_s,p50_ms,p99_ms,updates_per_s,full_over_update");
    println!("{row}");
    if let Ok(path) = std::env::var("PQDNS_UPDATE_BENCH_CSV") {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        writeln!(file, "{row}").unwrap();
    }
}

/// How long after an UPDATE's NOERROR a Knot secondary (`zonefile-sync: -1`, `journal-content:
/// changes`: its zone file is not rewritten after each change) serves the new serial (NOTIFY,
/// then IXFR of the signed difference), for `PQDNS_UPDATE_BENCH_UPDATES` updates (default 100) one after
/// the other in a zone of `PQDNS_UPDATE_BENCH_HOSTS` hosts (default 10,000) signed with
/// `PQDNS_UPDATE_BENCH_ALG`; Knot's SOA is polled every 2 ms (at most 10 s per update). Prints
/// p50, p99 and the maximum, and appends them to `PQDNS_UPDATE_BENCH_SECONDARY_CSV`. Run by
/// `benches/lifecycle/run.sh`.
#[test]
#[ignore = "a measurement with Knot, seconds to minutes"]
fn measure_update_to_a_knot_secondary() {
    let env = |name: &str, default: &str| std::env::var(name).unwrap_or(default.into());
    let hosts: usize = env("PQDNS_UPDATE_BENCH_HOSTS", "10000").parse().unwrap();
    let updates: usize = env("PQDNS_UPDATE_BENCH_UPDATES", "100").parse().unwrap();
    let alg = env("PQDNS_UPDATE_BENCH_ALG", "ML-DSA-44");
    let hosts_text: String = (0..hosts)
        .map(|i| format!("h{i} A 10.{}.{}.{}\n", i >> 16, (i >> 8) & 255, i & 255))
        .collect();
    let f = Fixture::build(&[&alg], "nsec3", &hosts_text, true);
    // As an operator of a large dynamic zone runs Knot: the zone kept in its journal (the
    // changes), never its whole zone file rewritten after each change.
    let mut knot = common::secondary::Knot::start_with(
        f.addr(),
        f.knot_port.unwrap(),
        Some(&f.admin),
        "    zonefile-sync: -1\n    journal-content: changes\n",
    );
    knot.wait_for_serial(f.serial());
    let soa = common::secondary::query_wire(ORIGIN, RrType::SOA, false);
    let mut delays = Vec::with_capacity(updates);
    for i in 0..updates.min(1000) {
        let record = format!("knot{i} 60 A 192.0.2.{}", i % 250);
        assert_eq!(send_update(f.addr(), &f.admin, &record), 0, "update {i}");
        let answered = std::time::Instant::now();
        let serial = f.serial();
        let limit = std::time::Duration::from_secs(10);
        loop {
            let seen = common::secondary::udp_query(knot.addr, &soa)
                .and_then(|m| common::secondary::soa_serial(&m));
            if seen == Some(serial) {
                break;
            }
            assert!(
                answered.elapsed() < limit,
                "update {i}: Knot did not serve {serial}"
            );
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        delays.push(answered.elapsed().as_secs_f64() * 1e3);
    }
    delays.sort_by(f64::total_cmp);
    let at = |q: f64| delays[((delays.len() - 1) as f64 * q).round() as usize];
    let row = format!(
        "{alg},{hosts},{},{:.1},{:.1},{:.1}",
        delays.len(),
        at(0.5),
        at(0.99),
        at(1.0)
    );
    println!("algorithm,hosts,updates,p50_ms,p99_ms,max_ms\n{row}");
    if let Ok(path) = std::env::var("PQDNS_UPDATE_BENCH_SECONDARY_CSV") {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        writeln!(file, "{row}").unwrap();
    }
}
