//! `pqdns-ctl` against the `pqdns-server` binary (issue 28, must-show 5): each command over
//! the control socket, its effect checked over the wire with dig, nsupdate and NOTIFY
//! received by the test, its `--json` output parsed.
//!
//! - `zone-sign` makes every signature anew (the RRSIG of an unchanged RRset differs) and
//!   raises the serial; `zone-reload` serves an edited zone file and keeps fresh signatures
//!   (the same RRSIG); `zone-notify` sends a NOTIFY; `zone-freeze` makes BIND's nsupdate get
//!   REFUSED and `zone-thaw` lets it through; `stats` counts the queries dig sent; `key-list`
//!   lists the keys the zone publishes; errors exit 1 with the reason.
//! - `ds-published` takes an algorithm rollover (ECDSA → ECDSA + ML-DSA-44, every wait 0)
//!   past the parent's DS, as `pqdns-zone rollover --ds-published` and a reload do.
//! - `zone-retransfer` makes a pqdns secondary transfer from its pqdns primary (changed by
//!   `zone-reload` on the primary) at once, where its SOA REFRESH (1 h) would not.
//! - The socket refuses a user who is neither root, the server's user nor in its group: by
//!   the file's mode (0660), and by the peer's credentials when the file is opened to all.
//! - Queries at 1,000/s are all answered while `reload` and `zone-sign` (of 2,000 RRsets)
//!   run, and while a zone is added to the `--config` file and `reload` serves it, then
//!   removed and SIGHUP drops it (REFUSED); a file that no longer reads is refused with its
//!   line, the zones served staying.
//! - A frozen zone stays frozen across a restart, until `zone-thaw`.
//! - Listeners follow the `--config` file on `reload`: a UDP+TCP address added answers, one
//!   removed refuses, a TCP connection opened before on an address kept is answered on after;
//!   an address in use fails the reload, naming it, and changes nothing; a zone whose
//!   `primaries` are added becomes a secondary zone, and a primary one again when they go.
//!
//! Every wait is bounded; every server is killed on drop.

use crate::common;

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{dig, listening, require, spawn_server, KillOnDrop};
use pqdns_test_support::ports::free_dual_port;
use serde_json::Value;

const CTL: &str = env!("CARGO_BIN_EXE_pqdns-ctl");
const ORIGIN: &str = "pqdns.test.";
/// The TSIG key updates are signed with (hmac-sha256, 32 bytes).
const SECRET: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

/// A pqdns-server process with its control socket.
struct Daemon {
    child: KillOnDrop,
    /// The option naming the file served (`--zone`, `--config`) and the file.
    serves: (String, String),
    dir: tempfile::TempDir,
    addr: SocketAddr,
    socket: PathBuf,
}

impl Daemon {
    /// Serves `zone.toml` (written from `description` with a `[server]` table listening on a
    /// free port plus `server`) and `zone.zone` (`zone`) from a fresh directory.
    fn start(description: &str, zone: &str, server: &str) -> Daemon {
        Daemon::start_as(
            "--zone",
            "zone.toml",
            |addr| {
                format!(
                    "{description}\n[server]\nudp = [\"{addr}\"]\ntcp = [\"{addr}\"]\ndot = []\n\
                 doh = []\nrrl_rate = 0\n{server}"
                )
            },
            zone,
        )
    }

    /// Serves the configuration file `pqdns-server.toml` (`--config`), written from `config`
    /// (given the address to listen on), and `zone.zone` (`zone`) from a fresh directory.
    fn start_config(config: impl FnOnce(SocketAddr) -> String, zone: &str) -> Daemon {
        Daemon::start_as("--config", "pqdns-server.toml", config, zone)
    }

    /// Writes `file` from `text` and `zone.zone`, and starts the server with `option file`.
    fn start_as(
        option: &str,
        file: &str,
        text: impl FnOnce(SocketAddr) -> String,
        zone: &str,
    ) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let port = free_dual_port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        std::fs::write(dir.path().join("zone.zone"), zone).unwrap();
        std::fs::write(dir.path().join(file), text(addr)).unwrap();
        let socket = dir.path().join("control.sock");
        let serves = (option.to_owned(), file.to_owned());
        Daemon {
            child: Daemon::spawn(dir.path(), &serves, &socket),
            serves,
            dir,
            addr,
            socket,
        }
    }

    /// The server serving `serves` in `dir`, once it listens.
    fn spawn(dir: &Path, serves: &(String, String), socket: &Path) -> KillOnDrop {
        let log = dir.join("server.log");
        let (child, rx) = spawn_server(
            &[
                serves.0.as_str(),
                serves.1.as_str(),
                "--control-socket",
                socket.to_str().unwrap(),
            ],
            dir,
            &log,
        );
        let child = KillOnDrop(child);
        listening(&rx, "udp", Duration::from_secs(60), &log);
        child
    }

    /// Kills the server (SIGKILL) and starts it again from the same files.
    fn restart(&mut self) {
        self.child.0.kill().unwrap();
        self.child.0.wait().unwrap();
        self.child = Daemon::spawn(self.dir.path(), &self.serves, &self.socket);
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs pqdns-ctl with `args` against this server.
    fn ctl(&self, args: &[&str]) -> Output {
        ctl_as(&self.socket, &[], args)
    }

    /// `pqdns-ctl --json ARGS`, which must succeed; the `result` object.
    fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend(args);
        let o = self.ctl(&all);
        assert!(o.status.success(), "pqdns-ctl {args:?}: {}", text(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(v["ok"], true);
        v["result"].clone()
    }

    /// The SOA serial served.
    fn serial(&self) -> u32 {
        let soa = dig(self.addr, &[ORIGIN, "SOA", "+short"]);
        soa.text.split_whitespace().nth(2).unwrap().parse().unwrap()
    }

    /// The RRSIG RDATA over `qname`'s `qtype` RRset.
    fn rrsig(&self, qname: &str, qtype: &str) -> String {
        let d = dig(self.addr, &["+dnssec", qname, qtype]);
        d.section("ANSWER")
            .into_iter()
            .find(|r| r.rtype == "RRSIG" && r.rdata.starts_with(&format!("{qtype} ")))
            .unwrap_or_else(|| panic!("no RRSIG {qtype}:\n{}", d.text))
            .rdata
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.path("server.log")).unwrap_or_default()
    }
}

/// pqdns-ctl at `socket` with `args`, run through `wrapper` (e.g. setpriv) when not empty.
fn ctl_as(socket: &Path, wrapper: &[&str], args: &[&str]) -> Output {
    let (program, rest) = match wrapper.split_first() {
        Some((p, rest)) => (*p, rest.to_vec()),
        None => (CTL, Vec::new()),
    };
    let mut cmd = Command::new("timeout");
    cmd.arg("60").arg(program).args(rest);
    if !wrapper.is_empty() {
        cmd.arg(CTL);
    }
    cmd.arg("--socket").arg(socket).args(args);
    cmd.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// nsupdate -y (UDP) adding `record` to the zone at `addr`; its output.
fn nsupdate_add(addr: SocketAddr, record: &str) -> String {
    let program = require("nsupdate", "bind9-dnsutils");
    let script = format!(
        "server 127.0.0.1 {}\nzone {ORIGIN}\nupdate add {record}\nsend\n",
        addr.port()
    );
    let script_path = std::env::temp_dir().join(format!("ctl-nsupdate-{}", addr.port()));
    std::fs::write(&script_path, script).unwrap();
    let o = Command::new("timeout")
        .arg("30")
        .arg(program)
        .args(["-y", &format!("hmac-sha256:ctl-key:{SECRET}")])
        .arg(&script_path)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&script_path);
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A NOTIFY (OPCODE 4) for the zone arrives at `secondary` within 10 s; it is answered, so
/// that it is not sent again.
fn receive_notify(secondary: &UdpSocket) -> bool {
    secondary
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 4096];
    let Ok((n, from)) = secondary.recv_from(&mut buf) else {
        return false;
    };
    let is_notify = n > 12 && (buf[2] >> 3) & 0xf == 4;
    buf[2] |= 0x80;
    let _ = secondary.send_to(&buf[..n], from);
    is_notify
}

const ZONE: &str = "$ORIGIN pqdns.test.\n$TTL 300\n@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n\
                    @ NS ns1\nns1 A 127.0.0.1\nwww A 192.0.2.80\n";

fn signed_description() -> String {
    "origin = \"pqdns.test.\"\nfile = \"zone.zone\"\nupdate_policy = [\"grant ctl-key zonesub\"]\n\
     [signing]\nalgorithms = [\"ECDSAP256SHA256\"]\nkey_directory = \"keys\"\n"
        .to_owned()
}

#[test]
fn each_command_acts_on_the_running_server() {
    let secondary = UdpSocket::bind("127.0.0.1:0").unwrap();
    let notify_to = secondary.local_addr().unwrap();
    let d = Daemon::start(
        &signed_description(),
        ZONE,
        &format!(
            "notify = [\"{notify_to}\"]\n\
             tsig_key = [{{ name = \"ctl-key\", algorithm = \"hmac-sha256\", secret = \"{SECRET}\" }}]\n"
        ),
    );
    // The NOTIFY of the start, then the one zone-notify sends.
    assert!(receive_notify(&secondary), "{}", d.log());
    let o = d.ctl(&["zone-notify", "pqdns.test"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("NOTIFY sent to 1 secondaries"),
        "{}",
        text(&o)
    );
    assert!(receive_notify(&secondary), "zone-notify sent nothing");

    // status and zone-list, for people and as JSON.
    let o = d.ctl(&["status"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success() && out.contains("zones:     1"),
        "{}",
        text(&o)
    );
    assert!(out.contains(&format!("listening: udp {}", d.addr)), "{out}");
    let status = d.json(&["status"]);
    assert_eq!(status["type"], "status");
    assert_eq!(status["zones"], 1);
    let serial0 = d.serial();
    let list = d.json(&["zone-list"]);
    assert_eq!(list["zones"][0]["zone"], ORIGIN);
    assert_eq!(list["zones"][0]["role"], "primary");
    assert_eq!(list["zones"][0]["signed"], true);
    assert_eq!(list["zones"][0]["serial"], serial0);

    // zone-status: times in the future where they must be, the rollover settled.
    let now = pqdns_core::time::now();
    let st = d.json(&["zone-status", "pqdns.test."]);
    assert_eq!(st["serial"], serial0);
    assert!(st["last_load"].as_u64().unwrap() <= now + 1, "{st}");
    let expiry = st["earliest_expiry"].as_u64().unwrap();
    let resign = st["next_resign"].as_u64().unwrap();
    assert!(now < resign && resign < expiry, "{st}");
    assert_eq!(st["frozen"], false);
    assert_eq!(st["rollover"]["next"], "nothing: every algorithm is active");
    assert_eq!(st["rollover"]["algorithms"][0]["name"], "ECDSAP256SHA256");
    assert!(st["secondary"].is_null());

    // key-list: the keys the zone publishes, all active.
    let keys = d.json(&["key-list", "pqdns.test"]);
    let keys = keys["keys"].as_array().unwrap();
    let dnskeys = dig(d.addr, &[ORIGIN, "DNSKEY"]).section("ANSWER");
    assert_eq!(keys.len(), dnskeys.len(), "{keys:?}");
    for k in keys {
        assert_eq!(k["phase"], "active");
        assert_eq!(k["algorithm"], 13);
        assert!(
            dnskeys
                .iter()
                .any(|r| r.rdata.starts_with(&format!("{} 3 13 ", k["flags"]))),
            "{k}"
        );
    }

    // zone-sign: every signature anew (an unchanged RRset's RRSIG differs), a new serial.
    let www_before = d.rrsig("www.pqdns.test.", "A");
    let signed = d.json(&["zone-sign", "pqdns.test"]);
    let serial1 = d.serial();
    assert!(serial1 > serial0, "{serial0} → {serial1}");
    assert_eq!(signed["zones"][0]["serial"], serial1);
    let www_signed = d.rrsig("www.pqdns.test.", "A");
    assert_ne!(www_before, www_signed);

    // zone-reload: the edited file is served; the fresh signature of www is kept.
    std::fs::write(d.path("zone.zone"), format!("{ZONE}new A 192.0.2.99\n")).unwrap();
    let o = d.ctl(&["zone-reload", "pqdns.test"]);
    assert!(o.status.success(), "{}", text(&o));
    let new = dig(d.addr, &["new.pqdns.test.", "A", "+short"]);
    assert_eq!(new.text.trim(), "192.0.2.99", "{}", new.text);
    assert!(d.serial() > serial1);
    assert_eq!(d.rrsig("www.pqdns.test.", "A"), www_signed);

    // zone-freeze: nsupdate is REFUSED; zone-thaw: accepted.
    let o = d.ctl(&["zone-freeze", "pqdns.test"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(d.json(&["zone-status", "pqdns.test"])["frozen"], true);
    assert_eq!(d.json(&["status"])["frozen"][0], ORIGIN);
    let refused = nsupdate_add(d.addr, "frozen.pqdns.test. 300 A 192.0.2.7");
    assert!(refused.contains("REFUSED"), "{refused}");
    let absent = dig(d.addr, &["frozen.pqdns.test.", "A"]);
    assert_eq!(absent.status(), "NXDOMAIN", "{}", absent.text);
    let o = d.ctl(&["zone-thaw", "pqdns.test"]);
    assert!(o.status.success(), "{}", text(&o));
    let accepted = nsupdate_add(d.addr, "thawed.pqdns.test. 300 A 192.0.2.8");
    assert!(!accepted.contains("REFUSED"), "{accepted}");
    let added = dig(d.addr, &["thawed.pqdns.test.", "A", "+short"]);
    assert_eq!(added.text.trim(), "192.0.2.8", "{}", added.text);

    // stats: the UDP queries dig sent are counted.
    let stats = d.json(&["stats"]);
    let udp_queries: f64 = stats["counters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            let name = c["name"].as_str().unwrap();
            name.starts_with("pqdns_queries_total{") && name.contains("udp")
        })
        .map(|c| c["value"].as_f64().unwrap())
        .sum();
    assert!(udp_queries >= 10.0, "{stats}");

    // reload: every zone, as SIGHUP.
    let reloaded = d.json(&["reload"]);
    assert_eq!(reloaded["type"], "loaded");
    assert_eq!(reloaded["zones"][0]["zone"], ORIGIN);

    // Errors: exit status 1 and the reason.
    for (args, reason) in [
        (
            &["zone-status", "nosuch.test"][..],
            "no zone nosuch.test. is configured",
        ),
        (
            &["zone-retransfer", "pqdns.test"][..],
            "is not a secondary zone",
        ),
        (
            &["ds-published", "pqdns.test"][..],
            "no algorithm or key waits",
        ),
        (&["zone-sign", "a..b"][..], "is not a zone name"),
    ] {
        let o = d.ctl(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(reason),
            "{args:?}: {}",
            text(&o)
        );
    }
    let o = d.ctl(&["--json", "zone-status", "nosuch.test"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["ok"].clone(), o.status.code()),
        (Value::Bool(false), Some(1))
    );
}

/// A frozen zone stays frozen across a restart (`<state_dir>/<zone>.frozen`): its UPDATEs get
/// REFUSED until `zone-thaw`, which a restart does not undo either.
#[test]
fn a_frozen_zone_stays_frozen_across_a_restart() {
    let mut d = Daemon::start(
        &signed_description(),
        ZONE,
        &format!(
            "tsig_key = [{{ name = \"ctl-key\", algorithm = \"hmac-sha256\", secret = \"{SECRET}\" }}]\n"
        ),
    );
    let o = d.ctl(&["zone-freeze", "pqdns.test"]);
    assert!(o.status.success(), "{}", text(&o));
    let mark = d.path("keys/pqdns.test.frozen");
    assert!(mark.exists());
    d.restart();
    assert_eq!(d.json(&["zone-status", "pqdns.test"])["frozen"], true);
    let refused = nsupdate_add(d.addr, "frozen.pqdns.test. 300 A 192.0.2.7");
    assert!(refused.contains("REFUSED"), "{refused}");
    assert!(d.log().contains("frozen before the restart"), "{}", d.log());
    let o = d.ctl(&["zone-thaw", "pqdns.test"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!mark.exists());
    d.restart();
    assert_eq!(d.json(&["zone-status", "pqdns.test"])["frozen"], false);
    let accepted = nsupdate_add(d.addr, "thawed.pqdns.test. 300 A 192.0.2.8");
    assert!(!accepted.contains("REFUSED"), "{accepted}");
}

#[test]
fn ds_published_advances_an_algorithm_rollover() {
    // Every wait of the rollover 0 (TTL 0, no propagation delays): a reload takes each step
    // up to the parent's DS at once.
    let description = |algorithms: &str| {
        format!(
            "origin = \"pqdns.test.\"\nfile = \"zone.zone\"\n[signing]\nalgorithms = [{algorithms}]\n\
             key_directory = \"keys\"\nkeys = \"ksk-zsk\"\ndnskey_ttl = 0\npropagation_delay = \"0\"\n\
             parent_ds_ttl = \"0\"\nparent_propagation_delay = \"0\"\n"
        )
    };
    let zone = ZONE.replace("$TTL 300", "$TTL 0").replace(" 300\n", " 0\n");
    let d = Daemon::start(&description("\"ECDSAP256SHA256\""), &zone, "");
    let toml = std::fs::read_to_string(d.path("zone.toml")).unwrap();
    std::fs::write(
        d.path("zone.toml"),
        toml.replace(
            &description("\"ECDSAP256SHA256\""),
            &description("\"ECDSAP256SHA256\", \"ML-DSA-44\""),
        ),
    )
    .unwrap();
    let o = d.ctl(&["zone-reload", "pqdns.test"]);
    assert!(o.status.success(), "{}", text(&o));
    let st = d.json(&["zone-status", "pqdns.test"]);
    let next = st["rollover"]["next"].as_str().unwrap();
    assert!(next.contains("the parent's DS RRset must equal"), "{st}");
    let phase = |st: &Value| {
        st["rollover"]["algorithms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == "ML-DSA-44")
            .map(|a| a["phase"].as_str().unwrap().to_owned())
            .unwrap()
    };
    let waiting = phase(&st);
    let o = d.ctl(&["ds-published", "pqdns.test"]);
    assert!(o.status.success(), "{}", text(&o));
    let state = std::fs::read_to_string(d.path("keys/pqdns.test.keystate")).unwrap();
    assert!(state.contains("ds_confirmed_at"), "{state}");
    let st = d.json(&["zone-status", "pqdns.test"]);
    assert_ne!(phase(&st), waiting, "{st}");
    assert_eq!(phase(&st), "active", "{st}");
    assert_eq!(st["rollover"]["next"], "nothing: every algorithm is active");
    // Both algorithms sign the served DNSKEY RRset now.
    let dnskey = dig(d.addr, &["+dnssec", ORIGIN, "DNSKEY"]);
    for alg in ["13", "18"] {
        assert!(
            dnskey
                .section("ANSWER")
                .iter()
                .any(|r| r.rtype == "RRSIG" && r.rdata.split_whitespace().nth(1) == Some(alg)),
            "{alg}: {}",
            dnskey.text
        );
    }
    // Nothing waits any more.
    let o = d.ctl(&["ds-published", "pqdns.test"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn zone_retransfer_pulls_from_the_primary_at_once() {
    let primary = Daemon::start(
        "origin = \"pqdns.test.\"\nfile = \"zone.zone\"\n",
        ZONE,
        "axfr_allow = [\"127.0.0.1\"]\n",
    );
    let secondary = Daemon::start(
        &format!(
            "origin = \"pqdns.test.\"\n[secondary]\nprimaries = [\"{}\"]\n",
            primary.addr
        ),
        "",
        "",
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while dig(secondary.addr, &[ORIGIN, "SOA"]).status() != "NOERROR" {
        assert!(Instant::now() < deadline, "{}", secondary.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(secondary.serial(), 1);
    // Once the refresh task has taken the success in, the next refresh is an hour (REFRESH
    // 3600) away.
    let st = loop {
        let st = secondary.json(&["zone-status", "pqdns.test"]);
        let next = st["secondary"]["next_refresh"].as_u64().unwrap_or(0);
        if next > pqdns_core::time::now() + 3000 {
            break st;
        }
        assert!(Instant::now() < deadline, "{st}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(st["role"], "secondary");
    assert_eq!(st["secondary"]["primaries"][0], primary.addr.to_string());
    assert!(st["secondary"]["last_success"].as_u64().is_some(), "{st}");
    // zone-reload of an unsigned secondary zone makes no sense.
    let o = secondary.ctl(&["zone-reload", "pqdns.test"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));

    // The primary serves serial 2 after its zone-reload; the secondary only once told.
    std::fs::write(
        primary.path("zone.zone"),
        ZONE.replace(" 1 7200", " 2 7200") + "new A 192.0.2.99\n",
    )
    .unwrap();
    let o = primary.ctl(&["zone-reload", "pqdns.test"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(primary.serial(), 2);
    assert_eq!(secondary.serial(), 1);
    let o = secondary.ctl(&["zone-retransfer", "pqdns.test"]);
    assert!(o.status.success(), "{}", text(&o));
    let deadline = Instant::now() + Duration::from_secs(10);
    while secondary.serial() != 2 {
        assert!(Instant::now() < deadline, "{}", secondary.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let new = dig(secondary.addr, &["new.pqdns.test.", "A", "+short"]);
    assert_eq!(new.text.trim(), "192.0.2.99");
    assert!(
        secondary.log().contains("AXFR received"),
        "{}",
        secondary.log()
    );
}

#[test]
fn the_socket_refuses_users_without_permission() {
    let setpriv = require("setpriv", "util-linux");
    let setpriv = setpriv.to_str().unwrap();
    let d = Daemon::start(&signed_description(), ZONE, "");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&d.socket).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o660);
    // Everyone may reach the directory; the socket's mode keeps "nobody" out.
    let open = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap()
    };
    open(d.dir.path(), 0o755);
    let nobody = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"];
    let o = ctl_as(&d.socket, &nobody, &["status"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Permission denied"),
        "{}",
        text(&o)
    );
    // With the file open to all, the server refuses by the peer's credentials.
    open(&d.socket, 0o666);
    let o = ctl_as(&d.socket, &nobody, &["status"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("permission denied: uid 65534") && err.contains("neither root"),
        "{}",
        text(&o)
    );
    // A member of the server's group (root's, gid 0) may.
    let member = [setpriv, "--reuid=65534", "--regid=0", "--clear-groups"];
    let o = ctl_as(&d.socket, &member, &["zone-list"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// Queries for `www.pqdns.test. A` to `addr` at 1,000/s (issue 28's rate), one at a time,
/// each waited for up to 2 s, until `stop` (at most 60,000); (sent, lost, time).
fn query_load(
    addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<(u32, u32, Duration)> {
    std::thread::spawn(move || {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let (mut sent, mut lost) = (0u32, 0u32);
        let mut buf = [0u8; 4096];
        let start = Instant::now();
        while !stop.load(std::sync::atomic::Ordering::SeqCst) && sent < 60_000 {
            let id = (sent % 65536) as u16;
            let mut q =
                common::secondary::query_wire("www.pqdns.test.", pqdns_core::RrType::A, false);
            q[..2].copy_from_slice(&id.to_be_bytes());
            socket.send_to(&q, addr).unwrap();
            sent += 1;
            loop {
                match socket.recv(&mut buf) {
                    // Answered, and with the data: NOERROR (RCODE 0) and one answer.
                    Ok(n) if n >= 12 && buf[..2] == id.to_be_bytes() => {
                        if buf[3] & 0xf != 0 || buf[7] == 0 {
                            lost += 1;
                        }
                        break;
                    }
                    Ok(_) => continue,
                    Err(_) => {
                        lost += 1;
                        break;
                    }
                }
            }
            let due = start + Duration::from_millis(u64::from(sent));
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        (sent, lost, start.elapsed())
    })
}

#[test]
fn queries_are_answered_while_reloading() {
    let many: String = (0..2000)
        .map(|i| format!("h{i} A 192.0.2.{}\n", i % 250))
        .collect();
    let d = Daemon::start(&signed_description(), &format!("{ZONE}{many}"), "");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let queries = query_load(d.addr, std::sync::Arc::clone(&stop));
    let began = Instant::now();
    for args in [
        ["reload"].as_slice(),
        &["zone-sign", "pqdns.test"],
        &["reload"],
    ] {
        let o = d.ctl(args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
    }
    let control = began.elapsed();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (sent, lost, elapsed) = queries.join().unwrap();
    eprintln!("{sent} queries in {elapsed:?} ({control:?} of reloads and re-signing), {lost} lost");
    assert_eq!(lost, 0, "{sent} sent");
    assert!(sent >= 20, "too few queries during the reloads: {sent}");
}

/// Issue 28, must-show 5: with `--config`, a `[[zone]]` table added to the file is served after
/// `pqdns-ctl reload`, and no longer served (REFUSED) once removed again and SIGHUP sent (the
/// same reload); a file that no longer reads is refused with its file and line, and the zones
/// served stay. All the while, queries for the zone configured from the start run at
/// 1,000/s, and every one is answered with its data.
#[test]
fn a_zone_added_and_removed_by_configuration_reload_loses_no_query() {
    let base = |addr: SocketAddr| {
        format!(
            "[server]\nudp = [\"{addr}\"]\ntcp = [\"{addr}\"]\ndot = []\ndoh = []\nrrl_rate = 0\n\n\
             [[zone]]\norigin = \"pqdns.test.\"\nfile = \"zone.zone\"\n[zone.signing]\n\
             algorithms = [\"ECDSAP256SHA256\"]\nkey_directory = \"keys\"\n"
        )
    };
    let added = "\n[[zone]]\norigin = \"added.test.\"\n\
                 records = \"@ 300 SOA ns1 hostmaster 7 7200 3600 1209600 300\\n@ 300 NS ns1\\n\
                 ns1 300 A 127.0.0.1\\nnew 300 A 192.0.2.77\"\n[zone.signing]\n\
                 algorithms = [\"ECDSAP256SHA256\"]\nkey_directory = \"keys\"\n";
    let d = Daemon::start_config(base, ZONE);
    let config = d.path("pqdns-server.toml");
    let first = std::fs::read_to_string(&config).unwrap();
    let refused = dig(d.addr, &["new.added.test.", "A"]);
    assert_eq!(refused.status(), "REFUSED", "{}", refused.text);

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let queries = query_load(d.addr, std::sync::Arc::clone(&stop));

    // Added by pqdns-ctl reload: served, signed, listed.
    std::fs::write(&config, format!("{first}{added}")).unwrap();
    let reloaded = d.json(&["reload"]);
    let zones: Vec<&str> = reloaded["zones"]
        .as_array()
        .unwrap()
        .iter()
        .map(|z| z["zone"].as_str().unwrap())
        .collect();
    assert_eq!(zones, ["added.test.", ORIGIN], "{reloaded}");
    let new = dig(d.addr, &["+dnssec", "new.added.test.", "A"]);
    assert!(
        new.text.contains("192.0.2.77") && new.has_rrsig("ANSWER", "A"),
        "{}",
        new.text
    );

    // A file that no longer reads: refused with its line; both zones stay.
    let bad_line = first.lines().count() + added.lines().count() + 2;
    std::fs::write(
        &config,
        format!("{first}{added}\n[[zone]]\norigin = \"relative\"\n"),
    )
    .unwrap();
    let o = d.ctl(&["reload"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("pqdns-server.toml:{bad_line}: [[zone]]")),
        "line {bad_line}: {}",
        text(&o)
    );
    let still = dig(d.addr, &["new.added.test.", "A", "+short"]);
    assert_eq!(still.text.trim(), "192.0.2.77", "{}", still.text);

    // Removed by SIGHUP: REFUSED once the reload is through (bounded wait).
    std::fs::write(&config, &first).unwrap();
    let hup = Command::new("kill")
        .args(["-HUP", &d.child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let gone = dig(d.addr, &["new.added.test.", "A"]);
        if gone.status() == "REFUSED" {
            break;
        }
        assert!(Instant::now() < deadline, "{}\n{}", gone.text, d.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(d.json(&["status"])["zones"], 1);

    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (sent, lost, elapsed) = queries.join().unwrap();
    eprintln!("{sent} queries in {elapsed:?}, {lost} lost or not NOERROR with the data");
    assert_eq!(lost, 0, "{sent} sent");
    // At 1,000/s for as long as the reloads take: about 0.1 s on a quiet machine.
    assert!(sent >= 20, "too few queries during the reloads: {sent}");
    assert!(
        d.log().contains("zone added by the configuration"),
        "{}",
        d.log()
    );
    assert!(
        d.log().contains("zone removed by the configuration"),
        "{}",
        d.log()
    );
}

/// A `--config` file listening on UDP and TCP at each of `addrs`, with `rrl_rate` and the
/// zone `pqdns.test.` (`zone`: its table's other lines, or a file if empty).
fn listening_on(addrs: &[SocketAddr], rrl_rate: u32, zone: &str) -> String {
    let list: Vec<String> = addrs.iter().map(|a| format!("\"{a}\"")).collect();
    let list = list.join(", ");
    let zone = if zone.is_empty() {
        "file = \"zone.zone\"\n"
    } else {
        zone
    };
    format!(
        "[server]\nudp = [{list}]\ntcp = [{list}]\ndot = []\ndoh = []\nrrl_rate = {rrl_rate}\n\
         tcp_idle_timeout = 60\n\n[[zone]]\norigin = \"pqdns.test.\"\n{zone}"
    )
}

/// Asks `www.pqdns.test. A` with ID `id` over the open TCP connection `stream` (RFC 1035
/// §4.2.2 framing); whether the answer is NOERROR with the data.
fn tcp_answered(stream: &mut std::net::TcpStream, id: u16) -> bool {
    use std::io::{Read, Write};
    let mut q = common::secondary::query_wire("www.pqdns.test.", pqdns_core::RrType::A, false);
    q[..2].copy_from_slice(&id.to_be_bytes());
    let mut framed = u16::try_from(q.len()).unwrap().to_be_bytes().to_vec();
    framed.extend(q);
    if stream.write_all(&framed).is_err() {
        return false;
    }
    let mut len = [0u8; 2];
    if stream.read_exact(&mut len).is_err() {
        return false;
    }
    let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut buf).is_ok()
        && buf.len() >= 12
        && buf[..2] == id.to_be_bytes()
        && buf[3] & 0xf == 0
        && buf[7] == 1
}

/// Whether `www.pqdns.test. A` sent over UDP to `addr` is answered within 2 s.
fn udp_answered(addr: SocketAddr) -> bool {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.connect(addr).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let q = common::secondary::query_wire("www.pqdns.test.", pqdns_core::RrType::A, false);
    let mut buf = [0u8; 4096];
    socket.send(&q).is_ok()
        && matches!(socket.recv(&mut buf), Ok(n) if n >= 12 && buf[..2] == q[..2])
}

/// The listeners `pqdns-ctl status` lists.
fn listeners(d: &Daemon) -> Vec<String> {
    let status = d.json(&["status"]);
    (status["listeners"].as_array().unwrap().iter())
        .map(|l| l.as_str().unwrap().to_owned())
        .collect()
}

/// Issue 28: listeners changed by `pqdns-ctl reload` without a restart. The `--config` file
/// first listens on UDP and TCP at A and B; the reload adds C and removes B (and changes
/// `rrl_rate`). A TCP connection opened to A before the reload is answered on after it; C
/// answers over UDP and TCP (dig); B refuses TCP connections and leaves UDP queries
/// unanswered; the reply names the listeners started and stopped and `rrl_rate` as needing a
/// restart; `status` lists the new set.
#[test]
fn a_reload_changes_listeners_and_keeps_connections_on_unchanged_ones() {
    let b: SocketAddr = ([127, 0, 0, 1], free_dual_port()).into();
    let d = Daemon::start_config(|a| listening_on(&[a, b], 0, ""), ZONE);
    let a = d.addr;
    let c: SocketAddr = ([127, 0, 0, 1], free_dual_port()).into();
    let mut open = std::net::TcpStream::connect(a).unwrap();
    open.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert!(tcp_answered(&mut open, 1));
    assert!(udp_answered(b));
    assert!(std::net::TcpStream::connect(b).is_ok());

    std::fs::write(d.path("pqdns-server.toml"), listening_on(&[a, c], 5, "")).unwrap();
    let reply = d.json(&["reload"]);
    assert_eq!(
        reply["started"],
        serde_json::json!([format!("udp {c}"), format!("tcp {c}")]),
        "{reply}"
    );
    assert_eq!(
        reply["stopped"],
        serde_json::json!([format!("udp {b}"), format!("tcp {b}")]),
        "{reply}"
    );
    assert_eq!(reply["needs_restart"], serde_json::json!(["rrl_rate"]));

    // The connection opened before the reload, on the listener that stayed.
    assert!(tcp_answered(&mut open, 2), "{}", d.log());
    for transport in ["+notcp", "+tcp"] {
        let answer = dig(c, &[transport, "www.pqdns.test.", "A", "+short"]);
        assert_eq!(
            answer.text.trim(),
            "192.0.2.80",
            "{transport}: {}",
            answer.text
        );
    }
    let refused = std::net::TcpStream::connect(b);
    assert_eq!(
        refused.map_err(|e| e.kind()).err(),
        Some(std::io::ErrorKind::ConnectionRefused)
    );
    assert!(!udp_answered(b));
    assert_eq!(
        listeners(&d),
        [
            format!("udp {a}"),
            format!("udp {c}"),
            format!("tcp {a}"),
            format!("tcp {c}")
        ]
    );
    assert!(tcp_answered(&mut open, 3));
}

/// A reload whose configuration adds a TCP address in use fails with an error naming it and
/// changes nothing: the UDP address added with it is not listened on, the listeners and
/// zone served before stay and answer.
#[test]
fn a_reload_with_an_address_in_use_changes_nothing() {
    let d = Daemon::start_config(|a| listening_on(&[a], 0, ""), ZONE);
    let before = listeners(&d);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = taken.local_addr().unwrap();
    let free: SocketAddr = ([127, 0, 0, 1], free_dual_port()).into();
    let config =
        listening_on(&[d.addr], 0, "").replacen("tcp = [", &format!("tcp = [\"{busy}\", "), 1);
    let config = config.replacen("udp = [", &format!("udp = [\"{free}\", "), 1);
    std::fs::write(d.path("pqdns-server.toml"), config).unwrap();
    let o = d.ctl(&["reload"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("binding TCP {busy}")) && err.contains("nothing changed"),
        "{}",
        text(&o)
    );
    assert!(
        !udp_answered(free),
        "the UDP address of the failed reload answers"
    );
    assert_eq!(listeners(&d), before);
    assert!(udp_answered(d.addr));
    let tcp = dig(d.addr, &["+tcp", "www.pqdns.test.", "A", "+short"]);
    assert_eq!(tcp.text.trim(), "192.0.2.80", "{}", tcp.text);
}

/// A zone whose `primaries` a reload adds becomes a secondary zone (role `secondary`, the
/// primary's data transferred, `zone-retransfer` accepted); once they are removed again, a
/// primary zone served from its file (role `primary`, `zone-retransfer` refused: its refresh
/// task is gone).
#[test]
fn a_zone_changes_role_when_a_reload_adds_or_removes_its_primaries() {
    let primary = Daemon::start(
        "origin = \"pqdns.test.\"\nfile = \"zone.zone\"\n",
        &(ZONE.replace(" 1 7200", " 5 7200") + "new A 192.0.2.99\n"),
        "axfr_allow = [\"127.0.0.1\"]\n",
    );
    let d = Daemon::start_config(|a| listening_on(&[a], 0, ""), ZONE);
    let config = d.path("pqdns-server.toml");
    let own = std::fs::read_to_string(&config).unwrap();
    let role = |d: &Daemon| d.json(&["zone-list"])["zones"][0]["role"].clone();
    assert_eq!(d.serial(), 1);
    assert_eq!(role(&d), "primary");

    let secondary = format!("[zone.secondary]\nprimaries = [\"{}\"]\n", primary.addr);
    std::fs::write(&config, listening_on(&[d.addr], 0, &secondary)).unwrap();
    d.json(&["reload"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while dig(d.addr, &[ORIGIN, "SOA"]).status() != "NOERROR" || d.serial() != 5 {
        assert!(Instant::now() < deadline, "{}", d.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(role(&d), "secondary");
    let new = dig(d.addr, &["new.pqdns.test.", "A", "+short"]);
    assert_eq!(new.text.trim(), "192.0.2.99", "{}", new.text);
    let o = d.ctl(&["zone-retransfer", "pqdns.test"]);
    assert!(o.status.success(), "{}", text(&o));

    std::fs::write(&config, own).unwrap();
    d.json(&["reload"]);
    assert_eq!(role(&d), "primary");
    assert_eq!(d.serial(), 1);
    let gone = dig(d.addr, &["new.pqdns.test.", "A"]);
    assert_eq!(gone.status(), "NXDOMAIN", "{}", gone.text);
    let o = d.ctl(&["zone-retransfer", "pqdns.test"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not a secondary zone"),
        "{}",
        text(&o)
    );
}
