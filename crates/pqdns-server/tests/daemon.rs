//! pqdns-server as a system service (issue 32): the systemd notification protocol
//! (sd_notify(3)) read from a socket the test binds as systemd would, the privilege drop after
//! binding port 53 (checked in `/proc`), and the shipped unit file checked by
//! `systemd-analyze`. Every wait is bounded.

use crate::common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{dig, listening, require, spawn_server, KillOnDrop, RECORDS};
use pqdns_test_support::ports::free_dual_port;
use pqdns_test_support::systemd::{analyze_unit, NotifySocket};

const BIN: &str = env!("CARGO_BIN_EXE_pqdns-server");

fn zone_toml(addr: &str) -> String {
    format!(
        "origin = \"pqdns.test.\"\nrecords = '''{RECORDS}'''\n[signing]\nalgorithms = [\"ECDSAP256SHA256\"]\n\
         key_directory = \"keys\"\n[server]\nudp = [\"{addr}\"]\ntcp = [\"{addr}\"]\ndot = []\ndoh = []\n"
    )
}

fn kill(pid: u32, signal: &str) {
    require("kill", "procps");
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// READY=1 (with a status) once the zone is served, RELOADING=1 (with MONOTONIC_USEC) and
/// READY=1 around a SIGHUP reload, WATCHDOG=1 when systemd asks for it, STOPPING=1 on SIGTERM.
#[test]
fn tells_systemd_when_it_is_ready_reloading_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let addr = format!("127.0.0.1:{}", free_dual_port());
    std::fs::write(dir.path().join("zone.toml"), zone_toml(&addr)).unwrap();
    let notify = NotifySocket::bind(dir.path().join("notify"));
    let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
    let child = Command::new(BIN)
        .args(["--zone", "zone.toml"])
        .current_dir(dir.path())
        .env("NOTIFY_SOCKET", &notify.path)
        .env("WATCHDOG_USEC", "400000")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let pid = child.id();
    let _server = KillOnDrop(child);
    let ready = notify.until("READY=1", Duration::from_secs(120));
    let last = ready.last().unwrap();
    assert!(last.contains("STATUS=serving 1 zone(s)"), "{ready:?}");
    assert!(!ready.iter().any(|m| m.contains("RELOADING")), "{ready:?}");
    // Ready means serving: the zone answers at once.
    let soa = dig(addr.parse().unwrap(), &["pqdns.test.", "SOA"]);
    assert_eq!(soa.status(), "NOERROR", "{}", soa.text);
    notify.until("WATCHDOG=1", Duration::from_secs(5));

    kill(pid, "HUP");
    let reloading = notify.until("RELOADING=1", Duration::from_secs(30));
    assert!(
        reloading.last().unwrap().contains("MONOTONIC_USEC="),
        "{reloading:?}"
    );
    let reloaded = notify.until("READY=1", Duration::from_secs(120));
    assert!(
        reloaded
            .last()
            .unwrap()
            .contains("STATUS=serving 1 zone(s)"),
        "{reloaded:?}"
    );

    kill(pid, "TERM");
    notify.until("STOPPING=1", Duration::from_secs(10));
}

fn status_of(pid: &str, proc_path: &Path) -> String {
    std::fs::read_to_string(proc_path).unwrap_or_else(|e| panic!("{pid}: {e}"))
}

/// Started as root with `--user nobody`, the server binds port 53, then every thread runs as
/// nobody/nogroup with no capability (permitted and effective sets empty), it answers, and the
/// keys it writes afterwards belong to nobody.
#[test]
fn drops_to_the_service_user_after_binding_port_53() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "this test binds port 53 and switches users: run it as root"
    );
    let nobody = nix::unistd::User::from_name("nobody")
        .unwrap()
        .expect("a nobody user");
    let (uid, gid) = (nobody.uid.as_raw(), nobody.gid.as_raw());
    let dir = tempfile::tempdir().unwrap();
    // The key directory is made (and written) by the server after the switch.
    nix::unistd::chown(dir.path(), Some(nobody.uid), Some(nobody.gid)).unwrap();
    // Port 53 of an address of its own (tests elsewhere use 127.0.0.x and 127.0.2-5.x).
    let addr = "127.0.6.53:53";
    std::fs::write(dir.path().join("zone.toml"), zone_toml(addr)).unwrap();
    let log = dir.path().join("server.log");
    let (child, rx) = spawn_server(
        &["--zone", "zone.toml", "--user", "nobody"],
        dir.path(),
        &log,
    );
    let pid = child.id().to_string();
    let _server = KillOnDrop(child);
    let udp = listening(&rx, "udp", Duration::from_secs(120), &log);
    assert_eq!(udp, addr.parse().unwrap());

    let ids = |field: &str, status: &str| -> Vec<u32> {
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .unwrap_or_else(|| panic!("no {field} in {status}"));
        line.split_whitespace()
            .map(|v| v.parse().unwrap())
            .collect()
    };
    let tasks: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|t| t.unwrap().path().join("status"))
        .collect();
    assert!(tasks.len() > 1, "a multi-threaded server");
    for task in &tasks {
        let status = status_of(&pid, task);
        assert_eq!(
            ids("Uid:", &status),
            [uid; 4],
            "{}: {status}",
            task.display()
        );
        assert_eq!(
            ids("Gid:", &status),
            [gid; 4],
            "{}: {status}",
            task.display()
        );
        for caps in ["CapPrm:", "CapEff:", "CapAmb:"] {
            let line = status.lines().find(|l| l.starts_with(caps)).unwrap();
            assert!(
                line.ends_with("0000000000000000"),
                "{} keeps capabilities: {line}",
                task.display()
            );
        }
    }

    let soa = dig(udp, &["pqdns.test.", "SOA"]);
    assert_eq!(soa.status(), "NOERROR", "{}", soa.text);
    let keys: Vec<_> = std::fs::read_dir(dir.path().join("keys"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(keys
        .iter()
        .any(|k| k.extension().is_some_and(|e| e == "private")));
    for key in &keys {
        let meta = std::fs::metadata(key).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (uid, gid), "{}", key.display());
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("running as"), "{text}");
    assert!(!text.contains("running as root"), "{text}");
}

/// Started as root on port 53 without a user to become, the server refuses to serve (exit
/// status 1, naming the port and the settings); `--user root` keeps root deliberately.
#[test]
fn refuses_to_serve_as_root_on_port_53_unless_told_to() {
    assert!(nix::unistd::Uid::effective().is_root(), "run as root");
    let dir = tempfile::tempdir().unwrap();
    let addr = "127.0.6.55:53";
    std::fs::write(dir.path().join("zone.toml"), zone_toml(addr)).unwrap();
    let out = Command::new("timeout")
        .args(["60", BIN, "--zone", "zone.toml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("running as root with port 53 bound and no user to run as"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("keys").exists(),
        "nothing is signed before the refusal"
    );

    let log = dir.path().join("server.log");
    let (child, rx) = spawn_server(&["--zone", "zone.toml", "--user", "root"], dir.path(), &log);
    let _server = KillOnDrop(child);
    let udp = listening(&rx, "udp", Duration::from_secs(120), &log);
    assert_eq!(dig(udp, &["pqdns.test.", "SOA"]).status(), "NOERROR");
}

/// Without `--user`, a server started as root on unprivileged ports says that it keeps root; `--log-format json`
/// writes every log line as a JSON object.
#[test]
fn warns_when_it_keeps_running_as_root_in_json() {
    assert!(nix::unistd::Uid::effective().is_root(), "run as root");
    let dir = tempfile::tempdir().unwrap();
    let addr = format!("127.0.0.1:{}", free_dual_port());
    std::fs::write(dir.path().join("zone.toml"), zone_toml(&addr)).unwrap();
    let log = dir.path().join("server.log");
    let (child, rx) = spawn_server(
        &["--zone", "zone.toml", "--log-format", "json"],
        dir.path(),
        &log,
    );
    let _server = KillOnDrop(child);
    listening(&rx, "udp", Duration::from_secs(120), &log);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.lines().count() > 1, "{text}");
    for line in text.lines() {
        assert!(
            line.starts_with('{') && line.ends_with('}') && line.contains("\"level\":"),
            "not a JSON log line: {line}"
        );
    }
    let warning = text
        .lines()
        .find(|l| l.contains("running as root: set a user"))
        .unwrap_or_else(|| panic!("no warning about root in {text}"));
    assert!(warning.contains("\"level\":\"WARN\""), "{warning}");
}

/// `dist/systemd/pqdns-server.service` passes `systemd-analyze verify`, and
/// `systemd-analyze security` rates it OK or better.
#[test]
fn the_unit_file_passes_systemd_analyze() {
    let dir = tempfile::tempdir().unwrap();
    let (figure, label) = analyze_unit("pqdns-server", Path::new(BIN), dir.path());
    eprintln!("pqdns-server.service: overall exposure {figure} {label}");
    assert!(
        matches!(label.as_str(), "OK" | "SAFE") && figure < 5.0,
        "exposure {figure} {label}"
    );
}
