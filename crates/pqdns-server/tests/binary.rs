//! The `pqdns-server` binary end to end: `--help`, start-up from a zone description whose
//! `[server]` table picks the listeners, generated keys logged by path but never their
//! contents, the DS printed and written, SIGHUP reloading a changed zone and keeping the old
//! zone when the new one is broken (with file and line in the log), `--watch` reloading a
//! changed zone file by itself, and SIGTERM stopping it.
//! Every wait is bounded.

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use common::{dig, listening, require, spawn_server, RECORDS};

const BIN: &str = env!("CARGO_BIN_EXE_pqdns-server");

fn zone_toml(records: &str) -> String {
    format!(
        "origin = \"pqdns.test.\"\nrecords = '''{records}'''\n[signing]\nalgorithms = [\"ECDSAP256SHA256\"]\n\
         key_directory = \"keys\"\n[server]\nudp = [\"127.0.0.1:0\"]\ntcp = [\"127.0.0.1:0\"]\ndot = []\ndoh = []\n"
    )
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Polls `check` up to 40 times, 250 ms apart.
fn eventually(mut check: impl FnMut() -> bool) -> bool {
    (0..40).any(|_| {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(250));
        false
    })
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    for _ in 0..100 {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!("server did not exit within 10 s of SIGTERM");
}

#[test]
fn help_explains_every_option() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for option in [
        "--zone",
        "--udp",
        "--tcp",
        "--dot",
        "--doh",
        "--tls-policy",
        "--log-level",
        "--axfr-allow",
        "--notify",
        "--metrics",
        "--watch",
        "--user",
        "--log-format",
        "--check",
        "SIGHUP",
        "./keys",
    ] {
        assert!(
            text.contains(option),
            "--help does not mention {option}:\n{text}"
        );
    }
}

#[test]
fn starts_reloads_on_sighup_and_stops_on_sigterm() {
    require("kill", "procps");
    let dir = tempfile::tempdir().unwrap();
    let zone = dir.path().join("zone.toml");
    std::fs::write(&zone, zone_toml(RECORDS)).unwrap();
    let log_path = dir.path().join("server.log");
    let (mut child, rx) = spawn_server(&["--zone", zone.to_str().unwrap()], dir.path(), &log_path);
    let mut printed = Vec::new();
    let mut tcp: Option<SocketAddr> = None;
    while tcp.is_none() {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("server printed its listeners");
        tcp = line
            .strip_prefix("listening tcp ")
            .map(|a| a.parse().unwrap());
        printed.push(line);
    }
    let tcp = tcp.unwrap();
    let printed = printed.join("\n");
    assert!(
        printed.contains("pqdns.test.\t3600\tIN\tDS\t"),
        "DS printed:\n{printed}"
    );
    assert!(printed.contains("listening udp 127.0.0.1:"), "{printed}");
    assert!(
        !printed.contains("listening dot"),
        "dot = [] turns DoT off:\n{printed}"
    );
    let ds_file = std::fs::read_to_string(dir.path().join("keys/pqdns.test.ds")).unwrap();
    assert!(
        printed.contains(ds_file.trim()),
        "the DS file holds the printed DS"
    );

    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        log.contains("generated key file") && log.contains(".private"),
        "{log}"
    );
    for entry in std::fs::read_dir(dir.path().join("keys")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "private") {
            assert_no_secret_in(&log, &path);
        }
    }

    let www = dig(tcp, &["+tcp", "www.pqdns.test.", "A"]);
    assert!(www
        .section("ANSWER")
        .iter()
        .any(|a| a.rdata == "192.0.2.80"));
    let r = dig(tcp, &["+tcp", "new.pqdns.test.", "A"]);
    assert_eq!(r.status(), "NXDOMAIN");

    std::fs::write(&zone, zone_toml(&format!("{RECORDS}\nnew A 192.0.2.99\n"))).unwrap();
    signal(&child, "HUP");
    assert!(
        eventually(|| dig(tcp, &["+tcp", "new.pqdns.test.", "A"]).status() == "NOERROR"),
        "SIGHUP loads the changed zone"
    );

    let broken = format!("{RECORDS}\nbroken A not-an-address\n");
    // TOML drops the newline right after the opening quotes of a multi-line string.
    let bad_line = broken[1..]
        .lines()
        .position(|l| l.starts_with("broken"))
        .unwrap()
        + 1;
    std::fs::write(&zone, zone_toml(&broken)).unwrap();
    signal(&child, "HUP");
    assert!(
        eventually(|| std::fs::read_to_string(&log_path)
            .unwrap()
            .contains("reload failed")),
        "the failed reload is logged"
    );
    let log = std::fs::read_to_string(&log_path).unwrap();
    let failure = log.lines().find(|l| l.contains("reload failed")).unwrap();
    let location = format!("zone.toml [records]:{bad_line}:");
    assert!(
        failure.contains(&location),
        "file and line {location}: {failure}"
    );
    let r = dig(tcp, &["+tcp", "new.pqdns.test.", "A"]);
    assert!(
        r.section("ANSWER").iter().any(|a| a.rdata == "192.0.2.99"),
        "old zone kept"
    );

    signal(&child, "TERM");
    assert!(wait_exit(&mut child).success());
}

/// `--watch 1`: a change of the zone's master file is served without a signal.
#[test]
fn watching_reloads_a_changed_zone_file() {
    require("kill", "procps");
    let dir = tempfile::tempdir().unwrap();
    let zone = dir.path().join("zone.toml");
    let master = dir.path().join("pqdns.test.zone");
    let toml = zone_toml("").replace("records = ''''''", "file = \"pqdns.test.zone\"");
    std::fs::write(&zone, toml).unwrap();
    std::fs::write(&master, RECORDS).unwrap();
    let log_path = dir.path().join("server.log");
    let args = ["--zone", zone.to_str().unwrap(), "--watch", "1"];
    let (mut child, rx) = spawn_server(&args, dir.path(), &log_path);
    let tcp = listening(&rx, "tcp", Duration::from_secs(60), &log_path);
    assert_eq!(
        dig(tcp, &["+tcp", "new.pqdns.test.", "A"]).status(),
        "NXDOMAIN"
    );
    std::fs::write(&master, format!("{RECORDS}\nnew A 192.0.2.99\n")).unwrap();
    assert!(
        eventually(|| dig(tcp, &["+tcp", "new.pqdns.test.", "A"]).status() == "NOERROR"),
        "the changed zone file is served"
    );
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.contains("zone files changed: reloading zones"), "{log}");
    assert!(!log.contains("SIGHUP"), "{log}");
    signal(&child, "TERM");
    assert!(wait_exit(&mut child).success());
}

/// Issue 31 item 9: one key directory, one server. A second server on the same zone
/// description (same key directory) refuses to start, naming the first by its process ID, and
/// generates no key of its own.
#[test]
fn a_second_server_on_the_same_key_directory_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let zone = dir.path().join("zone.toml");
    std::fs::write(&zone, zone_toml(RECORDS)).unwrap();
    let args = ["--zone", zone.to_str().unwrap()];
    let first_log = dir.path().join("first.log");
    let (mut first, rx) = spawn_server(&args, dir.path(), &first_log);
    listening(&rx, "udp", Duration::from_secs(60), &first_log);
    let keys = || std::fs::read_dir(dir.path().join("keys")).unwrap().count();
    let before = keys();
    let second_log = dir.path().join("second.log");
    let (mut second, _rx) = spawn_server(&args, dir.path(), &second_log);
    assert!(!wait_exit(&mut second).success());
    let log = std::fs::read_to_string(&second_log).unwrap();
    assert!(log.contains(&format!("pid {}", first.id())), "{log}");
    assert!(log.contains("key directory in use"), "{log}");
    assert_eq!(keys(), before, "the second server wrote nothing");
    signal(&first, "TERM");
    assert!(wait_exit(&mut first).success());
}

/// The served version and its IXFR journal survive a restart (`<key_dir>/<zone>.served` and
/// `.journal`): the restarted server keeps the unchanged signatures, and a secondary two
/// versions behind still gets an incremental transfer spanning the restart.
#[test]
fn a_restart_keeps_signatures_and_incremental_transfers() {
    require("kill", "procps");
    let dir = tempfile::tempdir().unwrap();
    let zone = dir.path().join("zone.toml");
    let write = |extra: &str| {
        let toml = zone_toml(&format!("{RECORDS}{extra}")) + "axfr_allow = [\"127.0.0.1\"]\n";
        std::fs::write(&zone, toml).unwrap();
    };
    let start = |log: &Path| {
        let args = ["--zone", zone.to_str().unwrap()];
        let (child, rx) = spawn_server(&args, dir.path(), log);
        let tcp = listening(&rx, "tcp", Duration::from_secs(60), log);
        (child, tcp)
    };
    let serial = |tcp| {
        let soa = dig(tcp, &["+tcp", "+short", "pqdns.test.", "SOA"]);
        let text = soa.text.split_whitespace().nth(2).unwrap().to_string();
        text.parse::<u32>().unwrap()
    };
    write("");
    let (mut child, tcp) = start(&dir.path().join("first.log"));
    let first = serial(tcp);
    write("\nnew1 A 192.0.2.91\n");
    signal(&child, "HUP");
    assert!(eventually(|| dig(tcp, &["+tcp", "new1.pqdns.test.", "A"])
        .status()
        == "NOERROR"));
    signal(&child, "TERM");
    assert!(wait_exit(&mut child).success());

    write("\nnew1 A 192.0.2.91\nnew2 A 192.0.2.92\n");
    let second = dir.path().join("second.log");
    let (mut child, tcp) = start(&second);
    assert_eq!(
        dig(tcp, &["+tcp", "new2.pqdns.test.", "A"]).status(),
        "NOERROR"
    );
    let log = std::fs::read_to_string(&second).unwrap();
    assert!(log.contains("starting from the persisted version"), "{log}");
    let signed = log.lines().find(|l| l.contains("zone signed")).unwrap();
    let kept: usize = signed
        .split_whitespace()
        .find_map(|w| w.strip_prefix("kept="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        kept > 5,
        "unchanged signatures kept across the restart: {signed}"
    );
    let ixfr = dig(tcp, &["+tcp", "pqdns.test.", &format!("IXFR={first}")]);
    let soas: Vec<u32> = ixfr
        .text
        .lines()
        .filter(|l| !l.starts_with(';'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(3) == Some(&"SOA")).then(|| f[6].parse().unwrap())
        })
        .collect();
    // RFC 1995 §4: new SOA, then per change old SOA … new SOA …, then the new SOA again.
    let last = serial(tcp);
    assert!(
        soas.len() >= 6 && soas[0] == last && soas[1] == first,
        "{soas:?}\n{}",
        ixfr.text
    );
    assert_eq!(soas.last(), Some(&last));
    signal(&child, "TERM");
    assert!(wait_exit(&mut child).success());
}

/// The private key value in a BIND private-key file must not appear in the log.
fn assert_no_secret_in(log: &str, private_file: &Path) {
    let text = std::fs::read_to_string(private_file).unwrap();
    for line in text.lines() {
        if let Some(value) = line.strip_prefix("PrivateKey:") {
            let value = value.trim();
            assert!(
                value.len() > 8 && !log.contains(value),
                "private key material in the log"
            );
        }
    }
}

/// Issue 13, must-show 4: the server is killed (SIGKILL) in the middle of re-signing a zone
/// that just gained an algorithm (ECDSA → ECDSA + ML-DSA-44, the first step of an algorithm
/// rollover), and started again. No key is lost or changed, the new algorithm's keys written
/// before the signing survive whole (private key files 0600), the DS file is whole, and the
/// restarted server serves the zone signed with both algorithms: its AXFR, read back by `dig`,
/// verifies completely (every RRset signed by each algorithm, NSEC chain whole).
#[test]
fn killed_mid_resigning_restarts_with_every_key_and_a_valid_zone() {
    use std::os::unix::fs::PermissionsExt;

    require("kill", "procps");
    let dir = tempfile::tempdir().unwrap();
    let zone = dir.path().join("zone.toml");
    let mut hosts = String::new();
    for i in 0..6_000 {
        hosts.push_str(&format!("host{i} A 10.0.{}.{}\n", i >> 8 & 255, i & 255));
    }
    let write_zone = |algorithms: &str, extra: &str| {
        std::fs::write(dir.path().join("hosts.zone"), format!("{hosts}{extra}")).unwrap();
        std::fs::write(
            &zone,
            format!(
                "origin = \"pqdns.test.\"\nrecords = '''\n@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n\
                 @ NS ns1\nns1 A 127.0.0.1\n$INCLUDE hosts.zone\n'''\n[signing]\nalgorithms = [{algorithms}]\n\
                 keys = \"ksk-zsk\"\ndenial = \"nsec\"\nkey_directory = \"keys\"\n[server]\n\
                 udp = [\"127.0.0.1:0\"]\ntcp = [\"127.0.0.1:0\"]\ndot = []\ndoh = []\ndoq = []\n\
                 axfr_allow = [\"127.0.0.1\"]\n"
            ),
        )
        .unwrap();
    };
    let start = |log: &Path| {
        let (child, rx) = spawn_server(&["--zone", zone.to_str().unwrap()], dir.path(), log);
        let tcp = listening(&rx, "tcp", Duration::from_secs(120), log);
        // The listeners come up before the zones are loaded.
        assert!(
            (0..2400).any(|_| {
                std::thread::sleep(Duration::from_millis(50));
                std::fs::read_to_string(log)
                    .unwrap()
                    .contains("zone signed")
            }),
            "the zone was not signed within 120 s"
        );
        (child, tcp)
    };
    let keys_dir = dir.path().join("keys");
    let key_files = || -> std::collections::BTreeMap<String, Vec<u8>> {
        std::fs::read_dir(&keys_dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "key" || e == "private"))
            .map(|p| {
                (
                    p.file_name().unwrap().to_string_lossy().into_owned(),
                    std::fs::read(&p).unwrap(),
                )
            })
            .collect()
    };

    write_zone("\"ECDSAP256SHA256\"", "");
    let first_log = dir.path().join("first.log");
    let (mut child, _) = start(&first_log);
    let classical = key_files();
    assert_eq!(
        classical.len(),
        4,
        "ECDSA KSK and ZSK: {:?}",
        classical.keys()
    );

    write_zone(
        "\"ECDSAP256SHA256\", \"ML-DSA-44\"",
        "new-host A 192.0.2.250\n",
    );
    let before_hup = std::fs::read_to_string(&first_log).unwrap().len();
    signal(&child, "HUP");
    // Kill as soon as the re-signing has made progress, before it ends.
    let killed_mid_signing = (0..2000).any(|_| {
        let log = std::fs::read_to_string(&first_log).unwrap();
        let reload = &log[before_hup..];
        if reload.contains("signing: ") && !reload.contains("zone signed") {
            signal(&child, "KILL");
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
        false
    });
    let _ = child.wait();
    let log = std::fs::read_to_string(&first_log).unwrap();
    assert!(
        killed_mid_signing,
        "no signing progress seen to kill during:\n{log}"
    );
    assert!(
        !log[before_hup..].contains("zone signed"),
        "killed after the re-signing ended:\n{log}"
    );

    let after_kill = key_files();
    for (name, bytes) in &classical {
        assert_eq!(after_kill.get(name), Some(bytes), "{name} lost or changed");
    }
    assert_eq!(
        after_kill.len(),
        8,
        "ML-DSA-44 KSK and ZSK written whole: {:?}\n{log}",
        after_kill.keys()
    );
    for name in after_kill.keys().filter(|n| n.ends_with(".private")) {
        let mode = std::fs::metadata(keys_dir.join(name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{name}");
    }
    // The rollover state was written whole, before the signing it drives: ML-DSA-44 signs,
    // unpublished, as the first step of adding an algorithm.
    let state = pqdns_core::dnssec::rollover::KeyState::read(&keys_dir.join("pqdns.test.keystate"))
        .unwrap()
        .unwrap();
    let phases: Vec<_> = state
        .algorithms
        .iter()
        .map(|a| (a.number, a.phase))
        .collect();
    {
        use pqdns_core::dnssec::rollover::Phase;
        assert_eq!(phases, [(13, Phase::Active), (18, Phase::Signing)]);
    }
    let ds = std::fs::read_to_string(keys_dir.join("pqdns.test.ds")).unwrap();
    assert!(
        ds.lines().count() >= 1 && ds.lines().all(|l| l.contains("\tDS\t")),
        "{ds}"
    );

    let (mut child, tcp) = start(&dir.path().join("second.log"));
    assert_eq!(
        key_files(),
        after_kill,
        "the restart generated or changed no key"
    );
    let axfr = dig(tcp, &["+tcp", "+onesoa", "pqdns.test.", "AXFR"]);
    // dig prints the transfer as master-file lines (comments start with ';').
    let text = &axfr.text;
    let origin: pqdns_core::Name = "pqdns.test.".parse().unwrap();
    let records = pqdns_core::zonefile::ZoneFileReader::new(Some(origin.clone()), None)
        .read_str(text, "axfr")
        .unwrap();
    let served = pqdns_core::Zone::from_records(origin, records).unwrap();
    assert!(served
        .rrset(
            &"new-host.pqdns.test.".parse().unwrap(),
            pqdns_core::RrType::A
        )
        .is_some());
    // The ML-DSA-44 keys sign without being published yet: the DNSKEY RRset is ECDSA's, and
    // the ML-DSA-44 signatures verify with the key files.
    let dnskey_algorithms: Vec<u8> = served
        .rrset(&served.origin, pqdns_core::RrType::DNSKEY)
        .unwrap()
        .rdatas
        .iter()
        .map(|k| k[3])
        .collect();
    assert_eq!(dnskey_algorithms, [13, 13]);
    let unpublished: Vec<Vec<u8>> = after_kill
        .iter()
        .filter(|(name, _)| name.contains("+018+") && name.ends_with(".key"))
        .flat_map(|(_, text)| {
            pqdns_core::zonefile::ZoneFileReader::new(None, Some(3600))
                .read_str(std::str::from_utf8(text).unwrap(), "key")
                .unwrap()
        })
        .map(|r| r.rdata)
        .collect();
    assert_eq!(unpublished.len(), 2);
    let report = pqdns_core::dnssec::verify::verify_zone_with(
        &served,
        &unpublished,
        &pqdns_core::dnssec::Profile::default_profile(),
        &pqdns_core::dnssec::Provider::default_provider(),
        &pqdns_core::dnssec::verify::VerifyOptions::at(pqdns_core::time::now()),
    );
    assert!(
        report.failures.is_empty(),
        "{:?}",
        &report.failures[..report.failures.len().min(5)]
    );
    assert!(
        report.signatures_valid > 2 * 6_000,
        "both algorithms sign: {report:?}"
    );
    signal(&child, "TERM");
    assert!(wait_exit(&mut child).success());
}
