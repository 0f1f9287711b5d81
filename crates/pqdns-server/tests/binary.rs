//! The `pqdns-server` binary end to end: `--help`, start-up from a zone description whose
//! `[server]` table picks the listeners, generated keys logged by path but never their
//! contents, the DS printed and written, SIGHUP reloading a changed zone and keeping the old
//! zone when the new one is broken (with file and line in the log), and SIGTERM stopping it.
//! Every wait is bounded.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use common::{dig, require, spawn_server, RECORDS};

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
