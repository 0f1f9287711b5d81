//! `pqdns-server --config` (issue 32): one configuration file holds the server-wide settings
//! and the zones, by path or inline; relative paths are relative to the file, not to the
//! working directory; SIGHUP re-reads an inline zone; `--check` reads the same file and
//! places its errors at file:line. Every wait is bounded.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{dig, listening, require, spawn_server, KillOnDrop, RECORDS};

const BIN: &str = env!("CARGO_BIN_EXE_pqdns-server");

/// A zone description of `a.test.` (unsigned), for a `description = …` entry.
const A_TOML: &str = "origin = \"a.test.\"\nrecords = '''\n\
    @ 3600 SOA ns hostmaster 7 7200 3600 1209600 300\n@ 3600 NS ns\nns 3600 A 192.0.2.1\n'''\n";

/// The configuration file: UDP on an ephemeral port, `a.test.` by description, `pqdns.test.`
/// inline and signed, with `extra` appended to its records.
fn config(extra: &str) -> String {
    format!(
        "[server]\nudp = [\"127.0.0.1:0\"]\ntcp = []\ndot = []\ndoh = []\namplification_limit = 0\n\n\
         [[zone]]\ndescription = \"zones/a.toml\"\n\n\
         [[zone]]\norigin = \"pqdns.test.\"\nrecords = '''{RECORDS}{extra}'''\n\
         [zone.signing]\nalgorithms = [\"ECDSAP256SHA256\"]\nkey_directory = \"keys\"\n"
    )
}

fn write_layout(etc: &Path, extra: &str) {
    std::fs::create_dir_all(etc.join("zones")).unwrap();
    std::fs::write(etc.join("zones/a.toml"), A_TOML).unwrap();
    std::fs::write(etc.join("pqdns-server.toml"), config(extra)).unwrap();
}

#[test]
fn serves_the_zones_of_its_configuration_file_and_rereads_them_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().join("etc");
    let cwd = dir.path().join("elsewhere");
    std::fs::create_dir_all(&cwd).unwrap();
    write_layout(&etc, "");
    let config = etc.join("pqdns-server.toml");
    let log = dir.path().join("server.log");
    let (child, rx) = spawn_server(&["--config", config.to_str().unwrap()], &cwd, &log);
    let pid = child.id();
    let _server = KillOnDrop(child);
    let udp = listening(&rx, "udp", Duration::from_secs(120), &log);

    let a = dig(udp, &["a.test.", "SOA"]);
    assert_eq!(a.status(), "NOERROR", "{}", a.text);
    assert!(a.has_flag("aa"), "{}", a.text);
    let signed = dig(udp, &["+dnssec", "www.pqdns.test.", "A"]);
    assert_eq!(signed.status(), "NOERROR", "{}", signed.text);
    assert!(
        signed
            .section("ANSWER")
            .iter()
            .any(|rr| rr.rtype == "RRSIG"),
        "{}",
        signed.text
    );
    assert!(
        etc.join("keys").is_dir() && !cwd.join("keys").exists(),
        "the key directory is relative to the configuration file"
    );

    write_layout(&etc, "extra 3600 TXT \"added on reload\"\n");
    require("kill", "procps");
    assert!(Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let txt = dig(udp, &["extra.pqdns.test.", "TXT"]);
        if txt.status() == "NOERROR" && txt.text.contains("added on reload") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the inline zone was not re-read: {}\n{}",
            txt.text,
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs `--check --config FILE`; exit code and everything printed.
fn check(config: &Path) -> (i32, String) {
    let out = Command::new("timeout")
        .args(["60", BIN, "--check", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn check_reads_the_configuration_file_and_places_its_errors() {
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path();
    write_layout(etc, "");
    let file = etc.join("pqdns-server.toml");
    let (code, text) = check(&file);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("zone a.test. ("), "{text}");
    assert!(
        text.contains("zone pqdns.test. (") && text.contains("signed with ECDSAP256SHA256"),
        "{text}"
    );
    assert!(!etc.join("keys").exists(), "--check wrote keys");

    let good = config("");
    let cases = [
        // An unknown key in the inline zone (its [[zone]] header is on line 11).
        (
            good.replace("[zone.signing]", "fiel = \"x\"\n[zone.signing]"),
            "pqdns-server.toml:11: [[zone]]",
            "fiel",
        ),
        // A bad value in the file's [server] table, at the line of its key (line 3).
        (
            good.replace(
                "udp = [\"127.0.0.1:0\"]",
                "udp = [\"127.0.0.1:0\"]\nrrl_rate = -1",
            ),
            "pqdns-server.toml",
            "line 3",
        ),
        // A description that does not exist.
        (
            good.replace("zones/a.toml", "zones/missing.toml"),
            "missing.toml",
            "No such file",
        ),
        // A file without zones.
        (
            "[server]\nudp = []\n".to_owned(),
            "pqdns-server.toml",
            "no zones",
        ),
    ];
    for (text, place, what) in cases {
        std::fs::write(&file, &text).unwrap();
        let (code, out) = check(&file);
        assert_eq!(code, 1, "{text}\n{out}");
        assert!(out.contains(place) && out.contains(what), "{text}\n{out}");
    }
}

/// The three-tier example of `zones/fleet` (issue 27: hidden primary → pqdns signer → NSD and
/// Knot) passes `--check` as shipped, with the TSIG key file its comments say to generate. Only
/// its `user` line is left out: the `pqdns` user exists where the package is installed.
#[test]
fn the_fleet_example_passes_check() {
    let fleet = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../zones/fleet");
    let text = std::fs::read_to_string(fleet.join("pqdns-server.toml")).unwrap();
    let shipped: Vec<&str> = text.lines().collect();
    let kept: Vec<&str> = text.lines().filter(|l| !l.starts_with("user = ")).collect();
    assert_eq!(kept.len() + 1, shipped.len(), "the example drops root");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pqdns-server.toml");
    std::fs::write(&file, kept.join("\n")).unwrap();
    std::fs::write(
        dir.path().join("transfer-key.conf"),
        "key \"transfer-key\" {\n\talgorithm hmac-sha256;\n\t\
         secret \"jjh84RWoTO9eqmfrYrnKnayv1avaDm/wqTMvnt/9aAo=\";\n};\n",
    )
    .unwrap();
    let (code, out) = check(&file);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("zone example.org. ("), "{out}");
    // Without the key file it names what is missing.
    std::fs::remove_file(dir.path().join("transfer-key.conf")).unwrap();
    let (code, out) = check(&file);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("transfer-key.conf"), "{out}");
}
