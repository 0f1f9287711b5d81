//! `pqdns-server` as operators run it: a closed standard output, the root zone's DS file name,
//! pre-signed zone data, and DNSKEYs left in zone data to sign. Every wait is bounded.

use crate::common;

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{dig, require, RECORDS};
use pqdns_core::dnssec::keyfile::{KeyRole, ZoneKey};
use pqdns_core::dnssec::sign::{sign_zone, Denial, SigningPolicy};
use pqdns_core::dnssec::{Algorithm, Profile, Provider};
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::{Name, RrType, Zone};
use pqdns_server::zones::{load_all, ZoneSource};

const BIN: &str = env!("CARGO_BIN_EXE_pqdns-server");

const LISTEN: &str =
    "[server]\nudp = [\"127.0.0.1:0\"]\ntcp = [\"127.0.0.1:0\"]\ndot = []\ndoh = []\n";

/// A server process whose standard error goes to a log file.
struct Running {
    child: Child,
    log: PathBuf,
}

impl Running {
    fn start(dir: &Path, toml: &str, stdout: Stdio) -> Running {
        require("kill", "procps");
        let zone = dir.join("zone.toml");
        std::fs::write(&zone, toml).unwrap();
        let log = dir.join("server.log");
        let child = Command::new(BIN)
            .args(["--zone", zone.to_str().unwrap()])
            .stdout(stdout)
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Running { child, log }
    }

    fn log(&self) -> String {
        let mut text = String::new();
        std::fs::File::open(&self.log)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        text
    }

    /// Waits up to 60 s for `needle` in the log.
    fn wait_for(&mut self, needle: &str) -> String {
        for _ in 0..600 {
            let log = self.log();
            if log.contains(needle) {
                return log;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("server exited ({status}) before logging {needle:?}:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("no {needle:?} in the log within 60 s:\n{}", self.log());
    }

    /// Waits for the "listening tcp" line (in the log when standard output is closed); the
    /// log so far and the address.
    fn tcp_address(&mut self) -> (String, SocketAddr) {
        let log = self.wait_for("listening tcp ");
        let tcp = log
            .lines()
            .find_map(|l| l.split("listening tcp ").nth(1))
            .and_then(|a| a.split_whitespace().next())
            .unwrap()
            .parse()
            .unwrap();
        (log, tcp)
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// SIGTERM, then the exit status (at most 10 s).
    fn stop(mut self) -> std::process::ExitStatus {
        self.signal("TERM");
        for _ in 0..100 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        panic!("server did not exit within 10 s of SIGTERM");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A standard output whose reader has already gone: every write gets EPIPE.
fn closed_stdout() -> Stdio {
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    Stdio::from(write)
}

fn signed_toml(origin: &str, records: &str) -> String {
    format!(
        "origin = \"{origin}\"\nrecords = '''{records}'''\n[signing]\n\
         algorithms = [\"ECDSAP256SHA256\"]\nkey_directory = \"keys\"\n{LISTEN}"
    )
}

/// `pqdns-server … | head -1`: the server keeps serving, reloads on SIGHUP (which prints the
/// DS records again) and stops cleanly; what it would print is in the log.
#[test]
fn a_closed_stdout_does_not_stop_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Running::start(
        dir.path(),
        &signed_toml("pqdns.test.", RECORDS),
        closed_stdout(),
    );
    let (log, tcp) = server.tcp_address();
    assert!(
        log.contains("writing standard output"),
        "the closed stdout is noted once:\n{log}"
    );
    let www = |server: SocketAddr| dig(server, &["+tcp", "www.pqdns.test.", "A"]);
    assert_eq!(www(tcp).status(), "NOERROR");
    server.signal("HUP");
    server.wait_for("SIGHUP: reloading zones");
    for _ in 0..600 {
        if server.log().matches("zones loaded").count() >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(server.log().matches("zones loaded").count(), 2, "reloaded");
    assert_eq!(
        www(tcp).status(),
        "NOERROR",
        "still serving after the reload"
    );
    let log = server.log();
    assert!(!log.contains("panicked"), "{log}");
    let status = server.stop();
    assert!(status.success(), "{status}");
}

/// The root zone's DS file is `root.ds`, which `*.ds` globs (the resolver's trust anchors)
/// see; a hidden `.ds` they skip.
#[test]
fn the_root_zone_ds_file_is_root_ds() {
    let dir = tempfile::tempdir().unwrap();
    let records = "@ SOA a.root-servers.net. nstld.verisign-grs.com. 1 1800 900 604800 86400\n\
                   @ NS a.root-servers.net.\nexample NS ns.example.\nns.example A 192.0.2.1\n";
    let zone = dir.path().join("root.toml");
    std::fs::write(&zone, signed_toml(".", records)).unwrap();
    let (_, reports) = load_all(&[ZoneSource::File(zone)], pqdns_core::time::now()).unwrap();
    let keys = dir.path().join("keys");
    assert_eq!(reports[0].ds_path, Some(keys.join("root.ds")));
    let text = std::fs::read_to_string(keys.join("root.ds")).unwrap();
    assert!(text.starts_with(".\t"), "{text}");
    assert!(!keys.join(".ds").exists());
}

/// DNSKEYs already in zone data that is to be signed are not served beside the new keys
/// (they would have no signatures of their algorithm, RFC 4035 §2.2); the log says so.
#[test]
fn dnskeys_in_zone_data_to_sign_are_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let records = format!("{RECORDS}\n@ DNSKEY 257 3 8 AwEAAcE=\n");
    let zone = dir.path().join("zone.toml");
    std::fs::write(&zone, signed_toml("pqdns.test.", &records)).unwrap();
    let (catalog, _) = load_all(&[ZoneSource::File(zone)], pqdns_core::time::now()).unwrap();
    let served = catalog.zones().next().unwrap();
    let dnskeys = served
        .zone
        .rrset(&served.zone.origin, RrType::DNSKEY)
        .unwrap();
    assert_eq!(dnskeys.rdatas.len(), 2, "our KSK and ZSK only");
    assert!(dnskeys.rdatas.iter().all(|k| k[3] == 13));
}

/// A zone signed elsewhere and served as it is is logged as pre-signed, not unsigned.
#[test]
fn a_pre_signed_zone_is_logged_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let origin: Name = "pqdns.test.".parse().unwrap();
    let records = ZoneFileReader::new(Some(origin.clone()), Some(3600))
        .read_str(RECORDS, "records")
        .unwrap();
    let mut zone = Zone::from_records(origin.clone(), records).unwrap();
    let key = ZoneKey::generate(
        &origin,
        Algorithm::Ed25519,
        KeyRole::Csk,
        &Profile::default_profile(),
        &Provider::default_provider(),
        3600,
    )
    .unwrap();
    let now = pqdns_core::time::now();
    let policy = SigningPolicy {
        inception: now - 3600,
        expiration: now + 86_400,
        denial: Denial::Nsec,
        published_dnskeys: None,
    };
    sign_zone(&mut zone, &[key], &policy, &|_, _| {}).unwrap();
    let mut text = Vec::new();
    zone.write_master_file(&mut text).unwrap();
    std::fs::write(dir.path().join("signed.zone"), text).unwrap();
    let toml = format!("origin = \"pqdns.test.\"\nfile = \"signed.zone\"\n{LISTEN}");
    let mut server = Running::start(dir.path(), &toml, Stdio::null());
    let log = server.wait_for("zone loaded");
    assert!(log.contains("zone loaded (pre-signed)"), "{log}");
    assert!(!log.contains("(unsigned)"), "{log}");
    assert!(server.stop().success());
}

/// A zone whose signing takes seconds: SPHINCS+-SHAKE-128s signs in about half a second of CPU
/// per RRset, and this zone has 6 RRsets to sign.
const SLOW_TOML: &str = "origin = \"slow.test.\"\nrecords = '''\n@ SOA ns1 hm 1 2 3 4 5\n\
    @ NS ns1\nns1 A 192.0.2.1\n'''\n[signing]\nalgorithms = [\"SPHINCS+-SHAKE-128s-simple\"]\n\
    keys = \"csk\"\ndenial = \"nsec\"\nkey_directory = \"keys\"\n";

/// SIGTERM during the initial load or a reload stops the server without waiting for the
/// signing to finish.
#[test]
fn sigterm_does_not_wait_for_a_zone_load() {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!("{SLOW_TOML}{LISTEN}");
    // During the initial load: a clean exit, and no zone was ever loaded.
    let mut server = Running::start(dir.path(), &toml, Stdio::null());
    server.wait_for("generated key file");
    let status = server.stop();
    assert!(status.success(), "{status}");
    let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap();
    assert!(log.contains("signal during zone loading"), "{log}");
    assert!(!log.contains("zones loaded"), "{log}");
    // During a reload: the reload is abandoned, not waited for.
    let mut server = Running::start(dir.path(), &toml, Stdio::null());
    server.wait_for("zones loaded");
    server.signal("HUP");
    server.wait_for("SIGHUP: reloading zones");
    let status = server.stop();
    assert!(status.success(), "{status}");
    let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap();
    assert_eq!(
        log.matches("zones loaded").count(),
        1,
        "exited before the reload finished:\n{log}"
    );
}

/// A start that cannot bind its addresses writes no keys and no DS file.
#[test]
fn a_start_that_cannot_bind_writes_no_files() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let toml = format!(
        "origin = \"pqdns.test.\"\nrecords = '''{RECORDS}'''\n[signing]\n\
         algorithms = [\"ECDSAP256SHA256\"]\nkey_directory = \"keys\"\n[server]\n\
         udp = [\"127.0.0.1:0\"]\ntcp = [\"{addr}\"]\ndot = []\ndoh = []\n"
    );
    let mut server = Running::start(dir.path(), &toml, Stdio::null());
    let mut status = None;
    for _ in 0..300 {
        status = server.child.try_wait().unwrap();
        if status.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = status.expect("the server gives up within 30 s");
    assert!(!status.success());
    let log = server.log();
    assert!(log.contains(&format!("binding TCP {addr}")), "{log}");
    assert!(
        !dir.path().join("keys").exists(),
        "no key or DS file written: {:?}",
        std::fs::read_dir(dir.path().join("keys"))
            .map(|d| d.map(|e| e.unwrap().file_name()).collect::<Vec<_>>())
    );
    drop(taken);
}

/// Signatures refresh themselves: with an 8-second validity re-signed when less than 6 s are
/// left, a running server re-signs every 2 s or so without SIGHUP. Over 7 s of polling no
/// RRSIG served is expired, the expiration moves forward, and every re-signing raises the SOA
/// serial (RFC 1982) so that secondaries see the new signatures.
/// (SOA serial, expiration of its RRSIG in UNIX seconds) of `pqdns.test.` as the server on
/// `tcp` serves it now.
fn served_soa(tcp: SocketAddr) -> (u32, u64) {
    let out = dig(tcp, &["+tcp", "+dnssec", "pqdns.test.", "SOA"]);
    let answer = out.section("ANSWER");
    let serial: u32 = answer
        .iter()
        .find(|r| r.rtype == "SOA")
        .and_then(|r| r.rdata.split_whitespace().nth(2))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no SOA in:\n{}", out.text));
    let expiration = answer
        .iter()
        .find(|r| r.rtype == "RRSIG")
        .and_then(|r| r.rdata.split_whitespace().nth(4))
        .and_then(pqdns_core::time::from_yyyymmddhhmmss)
        .unwrap_or_else(|| panic!("no RRSIG in:\n{}", out.text));
    (serial, expiration)
}

/// `cds = "always"` publishes CDS/CDNSKEY for the KSK, equal to the DS file and signed by the
/// KSK (RFC 7344 §4.1); `cds = "delete"` publishes the RFC 8078 §4 deletion records.
#[test]
fn cds_and_cdnskey_follow_the_ksk_and_can_ask_for_deletion() {
    let dir = tempfile::tempdir().unwrap();
    let toml = signed_toml("pqdns.test.", RECORDS).replace(
        "key_directory = \"keys\"\n",
        "key_directory = \"keys\"\nkeys = \"ksk-zsk\"\ncds = \"always\"\n",
    );
    let mut server = Running::start(dir.path(), &toml, closed_stdout());
    let (_, tcp) = server.tcp_address();
    let hex = |text: &str| text.replace(' ', "").to_ascii_uppercase();
    let ds_file = std::fs::read_to_string(dir.path().join("keys/pqdns.test.ds")).unwrap();
    // "pqdns.test. TTL IN DS tag alg digest-type digest"
    let ds: Vec<String> = ds_file
        .lines()
        .map(|l| hex(&l.split_whitespace().skip(4).collect::<Vec<_>>().join(" ")))
        .collect();
    assert_eq!(ds.len(), 1, "{ds_file}");
    let ksk_tag = ds_file.split_whitespace().nth(4).unwrap().to_string();

    let out = dig(tcp, &["+tcp", "+dnssec", "pqdns.test.", "CDS"]);
    let answer = out.section("ANSWER");
    let cds: Vec<String> = answer
        .iter()
        .filter(|r| r.rtype == "CDS")
        .map(|r| hex(&r.rdata))
        .collect();
    assert_eq!(cds, ds, "CDS equals the DS the server wrote:\n{}", out.text);
    let signer_tags: Vec<&str> = answer
        .iter()
        .filter(|r| r.rtype == "RRSIG")
        .filter_map(|r| r.rdata.split_whitespace().nth(6))
        .collect();
    assert_eq!(
        signer_tags,
        [ksk_tag.as_str()],
        "signed by the KSK:\n{}",
        out.text
    );

    let out = dig(tcp, &["+tcp", "+dnssec", "pqdns.test.", "CDNSKEY"]);
    let cdnskey: Vec<_> = out
        .section("ANSWER")
        .into_iter()
        .filter(|r| r.rtype == "CDNSKEY")
        .collect();
    let dnskey = dig(tcp, &["+tcp", "pqdns.test.", "DNSKEY"]);
    let ksk = dnskey
        .section("ANSWER")
        .into_iter()
        .find(|r| r.rdata.starts_with("257 "))
        .expect("a KSK");
    assert_eq!(cdnskey.len(), 1, "{}", out.text);
    assert_eq!(hex(&cdnskey[0].rdata), hex(&ksk.rdata));

    // The operator asks the parent to remove the DS: reload with cds = "delete".
    std::fs::write(
        dir.path().join("zone.toml"),
        toml.replace("cds = \"always\"", "cds = \"delete\""),
    )
    .unwrap();
    server.signal("HUP");
    server.wait_for("zones loaded");
    let deletion = |rtype: &str| {
        dig(tcp, &["+tcp", "pqdns.test.", rtype])
            .section("ANSWER")
            .into_iter()
            .map(|r| r.rdata)
            .collect::<Vec<_>>()
    };
    let mut cds = deletion("CDS");
    for _ in 0..50 {
        if cds == ["0 0 0 00"] {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        cds = deletion("CDS");
    }
    assert_eq!(cds, ["0 0 0 00"]);
    assert_eq!(deletion("CDNSKEY"), ["0 3 0 AA=="]);
}

#[test]
fn dateserial_policy_numbers_the_changes_of_the_day() {
    let dir = tempfile::tempdir().unwrap();
    let toml = signed_toml("pqdns.test.", RECORDS).replace(
        "key_directory = \"keys\"\n",
        "key_directory = \"keys\"\nvalidity = \"8\"\nrefresh = \"6\"\nserial = \"dateserial\"\n",
    );
    let today = || {
        let date = &pqdns_core::time::to_yyyymmddhhmmss(pqdns_core::time::now())[..8];
        date.parse::<u32>().unwrap() * 100
    };
    let day_before = today();
    let mut server = Running::start(dir.path(), &toml, closed_stdout());
    let (_, tcp) = server.tcp_address();
    let (first, _) = served_soa(tcp);
    assert!(
        first == day_before || first == today(),
        "the first signing is YYYYMMDD00: {first}"
    );
    // The refresh re-signs 2 s after the start: the day's second serial.
    let mut serial = first;
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(200));
        serial = served_soa(tcp).0;
        if serial != first {
            break;
        }
    }
    assert_eq!(serial, first + 1, "the re-signing is the day's change 01");
    assert!(!server.log().contains("panicked"));
}

#[test]
fn signatures_are_refreshed_before_they_expire() {
    let dir = tempfile::tempdir().unwrap();
    let toml = signed_toml("pqdns.test.", RECORDS).replace(
        "key_directory = \"keys\"\n",
        "key_directory = \"keys\"\nvalidity = \"8\"\nrefresh = \"6\"\n",
    );
    // A closed standard output sends the "listening" lines to the log.
    let mut server = Running::start(dir.path(), &toml, closed_stdout());
    let (_, tcp) = server.tcp_address();
    let served = || served_soa(tcp);
    let (first_serial, first_expiration) = served();
    let mut seen = vec![(first_serial, first_expiration)];
    for _ in 0..28 {
        std::thread::sleep(Duration::from_millis(250));
        let (serial, expiration) = served();
        let now = pqdns_core::time::now();
        assert!(
            expiration > now,
            "expired RRSIG served: {expiration} at {now}"
        );
        seen.push((serial, expiration));
    }
    let last = *seen.last().unwrap();
    assert!(last.1 > first_expiration, "never re-signed: {seen:?}");
    assert!(
        pqdns_core::serial::Serial(last.0) > pqdns_core::serial::Serial(first_serial),
        "serial not raised: {seen:?}"
    );
    // Serials only go up, and a new expiration always comes with a new serial.
    for pair in seen.windows(2) {
        let ((s0, e0), (s1, e1)) = (pair[0], pair[1]);
        assert!(s1 == s0 || pqdns_core::serial::Serial(s1) > pqdns_core::serial::Serial(s0));
        assert!(e1 >= e0);
        assert!(e1 == e0 || s1 != s0, "{seen:?}");
    }
    let log = server.log();
    assert!(log.contains("re-signing zones"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}
