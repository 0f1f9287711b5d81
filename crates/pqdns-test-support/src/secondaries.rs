//! Real secondaries of the test zone pulling it from a pqdns-server: NSD 4.6, Knot 3.2 and
//! BIND 9.18 (`named`, Debian `bind9`) in the foreground, in a temporary directory, killed on
//! drop; optionally with a TSIG key for their transfer requests (RFC 8945). And BIND as a
//! primary feeding a pqdns-server secondary ([`NamedPrimary`]). Every wait is bounded.

use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use pqdns_core::message::{Message, Question};
use pqdns_core::wire::rdata::Soa;
use pqdns_core::wire::tsig::Key;
use pqdns_core::wire::{Edns, Rcode, EDNS_DO};
use pqdns_core::{Class, RrType};

use crate::peers::require;

/// The zone the secondaries ask for.
pub const ORIGIN: &str = "pqdns.test.";

/// A response as pqdns-core reads it, after hickory-proto has read it the same way.
fn parse_response(wire: &[u8]) -> Message {
    if let Err(e) = crate::second_opinion(wire) {
        panic!("second opinion: {e}");
    }
    Message::parse(wire).expect("the response parses")
}

/// Longest wait for a secondary to serve a serial.
pub const SECONDARY_WAIT: Duration = Duration::from_secs(20);

/// Starts `knotd` with the configuration `conf`, written to `dir/knot.conf`.
pub fn start_knotd(knotd: &std::path::Path, dir: &std::path::Path, conf: &str) -> Child {
    let conf_path = dir.join("knot.conf");
    std::fs::write(&conf_path, conf).unwrap();
    Command::new(knotd)
        .arg("-c")
        .arg(&conf_path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting knotd")
}

/// A query for `qname`/`qtype` with EDNS (DO when `dnssec`), ID 0x5151.
pub fn query_wire(qname: &str, qtype: RrType, dnssec: bool) -> Vec<u8> {
    let edns = Edns {
        udp_payload: 1232,
        ext_rcode: 0,
        version: 0,
        flags: if dnssec { EDNS_DO } else { 0 },
        options: Vec::new(),
    };
    let question = Question {
        qname: qname.parse().unwrap(),
        qtype,
        qclass: Class::IN,
    };
    Message::query(0x5151, question, false, Some(edns)).to_wire()
}

/// One UDP exchange with `server` (2 s to answer); the parsed response.
pub fn udp_query(server: SocketAddr, wire: &[u8]) -> Option<Message> {
    let local = if server.is_ipv4() {
        "127.0.0.1:0"
    } else {
        "[::1]:0"
    };
    let s = UdpSocket::bind(local).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s.send_to(wire, server).unwrap();
    let mut buf = vec![0u8; 65535];
    let (n, _) = s.recv_from(&mut buf).ok()?;
    Some(parse_response(&buf[..n]))
}

/// The serial of the first SOA in the answer section.
pub fn soa_serial(m: &Message) -> Option<u32> {
    m.answers
        .iter()
        .find(|r| r.rtype == RrType::SOA)
        .and_then(|r| Soa::parse(&r.rdata))
        .map(|s| s.serial)
}

fn secret(key: &Key) -> String {
    base64::engine::general_purpose::STANDARD.encode(key.secret())
}

/// A running secondary: the child, its directory, its address and its log file name.
pub struct Secondary {
    child: Child,
    /// Its working directory (configuration, zone file, log).
    pub dir: tempfile::TempDir,
    /// Where it answers (UDP and TCP).
    pub addr: SocketAddr,
    name: &'static str,
    log: &'static str,
}

/// NSD as a secondary of `primary`, listening on 127.0.0.1:`port`, asking with `key` when
/// given (`request-xfr: … KEYNAME`) and then accepting only NOTIFY from 127.0.0.1 signed with
/// it (`allow-notify: 127.0.0.1 KEYNAME`) and serving AXFR to 127.0.0.1 signed with it
/// (`provide-xfr`); unsigned NOTIFY and AXFR otherwise.
pub struct Nsd;

impl Nsd {
    /// Starts NSD (Debian `nsd`).
    #[allow(clippy::new_ret_no_self, reason = "a kind of Secondary")]
    pub fn start(primary: SocketAddr, port: u16, key: Option<&Key>) -> Secondary {
        let nsd = require("nsd", "nsd");
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let (key_clause, key_name) = match key {
            Some(k) => (
                format!(
                    "key:\n  name: \"{}\"\n  algorithm: {}\n  secret: \"{}\"\n",
                    k.name(),
                    k.algorithm(),
                    secret(k)
                ),
                k.name().to_string(),
            ),
            None => (String::new(), "NOKEY".to_string()),
        };
        let conf = format!(
            "server:\n  username: \"\"\n  chroot: \"\"\n  zonesdir: \"{d}\"\n  pidfile: \"{d}/nsd.pid\"\n  \
             xfrdfile: \"{d}/xfrd.state\"\n  zonelistfile: \"{d}/zone.list\"\n  database: \"\"\n  \
             logfile: \"{d}/nsd.log\"\n  ip-address: 127.0.0.1@{port}\n  verbosity: 2\n  \
             server-count: 1\n  rrl-ratelimit: 0\n  rrl-whitelist-ratelimit: 0\n  \
             xfrd-reload-timeout: 0\n\
             remote-control:\n  control-enable: no\n\
             {key_clause}\
             pattern:\n  name: \"from-pqdns\"\n  request-xfr: {ip}@{pport} {key_name}\n  \
             allow-notify: 127.0.0.1 {key_name}\n  provide-xfr: 127.0.0.1 {key_name}\n\
             zone:\n  name: \"{ORIGIN}\"\n  zonefile: \"{d}/secondary.zone\"\n  include-pattern: \"from-pqdns\"\n",
            ip = primary.ip(),
            pport = primary.port(),
        );
        let conf_path = dir.path().join("nsd.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new(nsd)
            .args(["-d", "-c"])
            .arg(&conf_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting nsd");
        Secondary {
            child,
            dir,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            name: "nsd",
            log: "nsd.log",
        }
    }
}

/// Knot as a secondary of `primary` on 127.0.0.1:`port`, transferring with `key` when given
/// and then accepting only NOTIFY from 127.0.0.1 signed with it, and serving transfers to
/// 127.0.0.1 signed with it; unsigned NOTIFY and transfers otherwise.
pub struct Knot;

impl Knot {
    /// Starts knotd (Debian `knot`).
    #[allow(clippy::new_ret_no_self, reason = "a kind of Secondary")]
    pub fn start(primary: SocketAddr, port: u16, key: Option<&Key>) -> Secondary {
        Knot::start_with(primary, port, key, "")
    }

    /// [`Knot::start`] with `zone_options` (lines of Knot's `zone` section, each indented by
    /// four spaces and ended by a newline) added to the zone's settings.
    #[allow(clippy::new_ret_no_self, reason = "a kind of Secondary")]
    pub fn start_with(
        primary: SocketAddr,
        port: u16,
        key: Option<&Key>,
        zone_options: &str,
    ) -> Secondary {
        let knotd = require("knotd", "knot");
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let (key_clause, remote_key) = match key {
            Some(k) => (
                format!(
                    "key:\n  - id: {}\n    algorithm: {}\n    secret: {}\n",
                    k.name(),
                    k.algorithm(),
                    secret(k)
                ),
                format!("\n    key: {}", k.name()),
            ),
            None => (String::new(), String::new()),
        };
        let conf = format!(
            "server:\n  rundir: \"{d}\"\n  listen: 127.0.0.1@{port}\n\
             control:\n  listen: \"{d}/knot.sock\"\n\
             database:\n  storage: \"{d}\"\n\
             log:\n  - target: \"{d}/knot.log\"\n    any: info\n\
             {key_clause}\
             remote:\n  - id: primary\n    address: {ip}@{pport}{remote_key}\n\
             acl:\n  - id: notify\n    address: 127.0.0.1{remote_key}\n    action: notify\n  \
             - id: transfer\n    address: 127.0.0.1{remote_key}\n    action: transfer\n\
             template:\n  - id: default\n    storage: \"{d}\"\n\
             zone:\n  - domain: {ORIGIN}\n    master: primary\n    acl: [notify, transfer]\n    file: \"{d}/secondary.zone\"\n\
             {zone_options}",
            ip = primary.ip(),
            pport = primary.port(),
        );
        let child = start_knotd(&knotd, dir.path(), &conf);
        Secondary {
            child,
            dir,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            name: "knotd",
            log: "knot.log",
        }
    }
}

/// BIND's named as a secondary of `primary` on 127.0.0.1:`port`. With `key_file` (a BIND key
/// file holding the key `key_name`), it transfers with that key and accepts only NOTIFY signed
/// with it; unsigned otherwise. It talks to the primary over TCP only (`tcp-only`): the test
/// server's UDP and TCP ports differ.
pub struct Named;

impl Named {
    /// Starts named (Debian `bind9`).
    #[allow(clippy::new_ret_no_self, reason = "a kind of Secondary")]
    pub fn start(
        primary: SocketAddr,
        port: u16,
        key: Option<(&std::path::Path, &str)>,
    ) -> Secondary {
        let named = require("named", "bind9");
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let (include, primary_key, notify_acl) = match key {
            Some((file, name)) => (
                format!("include \"{}\";\n", file.display()),
                format!(" key \"{name}\""),
                format!("key \"{name}\";"),
            ),
            None => (String::new(), String::new(), "127.0.0.1;".to_string()),
        };
        let conf = format!(
            "{include}\
             options {{\n  directory \"{d}\";\n  pid-file \"{d}/named.pid\";\n  \
             session-keyfile \"{d}/session.key\";\n  managed-keys-directory \"{d}\";\n  \
             listen-on port {port} {{ 127.0.0.1; }};\n  listen-on-v6 {{ none; }};\n  \
             recursion no;\n  dnssec-validation no;\n  notify no;\n}};\n\
             controls {{ }};\n\
             server {ip} {{ tcp-only yes; }};\n\
             logging {{\n  channel log {{ file \"{d}/named.log\"; severity info; print-time yes; }};\n  \
             category default {{ log; }};\n  category xfer-in {{ log; }};\n  category notify {{ log; }};\n}};\n\
             zone \"{ORIGIN}\" {{\n  type secondary;\n  file \"{d}/secondary.db\";\n  \
             primaries port {pport} {{ {ip}{primary_key}; }};\n  allow-notify {{ {notify_acl} }};\n}};\n",
            ip = primary.ip(),
            pport = primary.port(),
        );
        let conf_path = dir.path().join("named.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new(named)
            .arg("-f")
            .arg("-c")
            .arg(&conf_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting named");
        Secondary {
            child,
            dir,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            name: "named",
            log: "named.log",
        }
    }
}

impl Secondary {
    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join(self.log)).unwrap_or_default()
    }

    /// Polls its SOA over UDP until it has `serial`, up to [`SECONDARY_WAIT`].
    pub fn wait_for_serial(&mut self, serial: u32) {
        let start = Instant::now();
        while start.elapsed() < SECONDARY_WAIT {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("{} exited ({status}):\n{}", self.name, self.log());
            }
            let q = query_wire(ORIGIN, RrType::SOA, false);
            if let Some(m) = udp_query(self.addr, &q) {
                if m.rcode() == Rcode::NOERROR && soa_serial(&m) == Some(serial) {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!(
            "{} did not serve serial {serial} within {SECONDARY_WAIT:?}; its log:\n{}",
            self.name,
            self.log()
        );
    }
}

impl Drop for Secondary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// BIND's named as the primary of `origin` (master-file text `zone`) on 127.0.0.1:`port`:
/// transfers and UPDATEs only with `key`, NOTIFY signed with it to `notify` only, at once after
/// a change (`notify-delay 0`; BIND waits 5 s by default). Killed on drop.
pub struct NamedPrimary {
    child: Child,
    /// Its working directory (configuration, zone file, journal, log).
    pub dir: tempfile::TempDir,
    /// Where it answers (UDP and TCP).
    pub addr: SocketAddr,
    origin: String,
}

impl NamedPrimary {
    /// Starts named (Debian `bind9`).
    pub fn start(
        origin: &str,
        zone: &str,
        port: u16,
        notify: SocketAddr,
        key: &Key,
    ) -> NamedPrimary {
        let named = require("named", "bind9");
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        std::fs::write(dir.path().join("primary.db"), zone).unwrap();
        let name = key.name();
        let conf = format!(
            "key \"{name}\" {{ algorithm {}; secret \"{}\"; }};\n\
             options {{\n  directory \"{d}\";\n  pid-file \"{d}/named.pid\";\n  \
             session-keyfile \"{d}/session.key\";\n  managed-keys-directory \"{d}\";\n  \
             listen-on port {port} {{ 127.0.0.1; }};\n  listen-on-v6 {{ none; }};\n  \
             recursion no;\n  dnssec-validation no;\n  notify explicit;\n}};\n\
             controls {{ }};\n\
             logging {{\n  channel log {{ file \"{d}/named.log\"; severity info; print-time yes; }};\n  \
             category default {{ log; }};\n  category xfer-out {{ log; }};\n  category notify {{ log; }};\n}};\n\
             zone \"{origin}\" {{\n  type primary;\n  file \"{d}/primary.db\";\n  \
             notify-delay 0;\n  allow-transfer {{ key \"{name}\"; }};\n  allow-update {{ key \"{name}\"; }};\n  \
             also-notify {{ {} port {} key \"{name}\"; }};\n}};\n",
            key.algorithm(),
            secret(key),
            notify.ip(),
            notify.port(),
        );
        let conf_path = dir.path().join("named.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new(named)
            .arg("-f")
            .arg("-c")
            .arg(&conf_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting named");
        NamedPrimary {
            child,
            dir,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            origin: origin.to_string(),
        }
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("named.log")).unwrap_or_default()
    }

    /// Sends one UPDATE of `lines` (nsupdate commands such as `update add NAME TTL TYPE RDATA`)
    /// signed with `key` by `nsupdate -y`; panics with named's log when it fails. named bumps
    /// the serial, journals the change and sends NOTIFY.
    pub fn nsupdate(&self, key: &Key, lines: &[&str]) {
        let nsupdate = require("nsupdate", "bind9-dnsutils");
        let y = format!("{}:{}:{}", key.algorithm(), key.name(), secret(key));
        let mut script = format!(
            "server {} {}\nzone {}\n",
            self.addr.ip(),
            self.addr.port(),
            self.origin
        );
        for line in lines {
            script.push_str(line);
            script.push('\n');
        }
        script.push_str("send\n");
        let mut child = Command::new("timeout")
            .args(["10", nsupdate.to_str().unwrap(), "-y", &y])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), script.as_bytes()).unwrap();
        assert!(
            child.wait().unwrap().success(),
            "nsupdate failed\n{}",
            self.log()
        );
    }
}

impl Drop for NamedPrimary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
