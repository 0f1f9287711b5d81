//! pqdns-resolver as a system service (issue 32): the privilege drop after binding, checked in
//! `/proc`, and the shipped unit file checked by `systemd-analyze`. The notification protocol
//! is pqdns-net's `systemd` module, tested through pqdns-server (its `tests/daemon.rs`).

use crate::common;

use std::path::Path;

use common::dnstap_frames;
use common::service::{unused_anchor, Service};
use pqdns_test_support::systemd::analyze_unit;

/// Started as root with `--user nobody`, the resolver runs as nobody with no capability once
/// its listeners are bound, and still answers.
#[test]
fn drops_to_the_service_user_after_binding() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "this test switches users: run it as root"
    );
    let nobody = nix::unistd::User::from_name("nobody")
        .unwrap()
        .expect("a nobody user");
    let dir = tempfile::tempdir().unwrap();
    let anchor = unused_anchor(dir.path());
    let s = Service::start(
        dir.path(),
        "dropped",
        &[
            "--forward",
            "127.0.0.1:9",
            "--trust-anchor",
            anchor.to_str().unwrap(),
            "--user",
            "nobody",
        ],
    );
    let status = s.proc_status();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {status}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let (uid, gid) = (nobody.uid.to_string(), nobody.gid.to_string());
    assert_eq!(field("Uid:"), vec![uid; 4], "{status}");
    assert_eq!(field("Gid:"), vec![gid; 4], "{status}");
    assert_eq!(field("CapEff:"), ["0000000000000000"], "{status}");
    assert_eq!(field("CapPrm:"), ["0000000000000000"], "{status}");
    // The forwarder at port 9 does not answer: SERVFAIL, but answered by the dropped process.
    let out = s.dig(&["+tries=1", "+time=10", "example.", "A"]);
    assert_eq!(out.status(), "SERVFAIL", "{}", out.text);
    assert!(s.log().contains("running as"), "{}", s.log());
}

/// `dist/systemd/pqdns-resolver.service` passes `systemd-analyze verify`, and
/// `systemd-analyze security` rates it OK or better.
#[test]
fn the_unit_file_passes_systemd_analyze() {
    let dir = tempfile::tempdir().unwrap();
    let binary = Path::new(env!("CARGO_BIN_EXE_pqdns-resolver"));
    let (figure, label) = analyze_unit("pqdns-resolver", binary, dir.path());
    eprintln!("pqdns-resolver.service: overall exposure {figure} {label}");
    assert!(
        matches!(label.as_str(), "OK" | "SAFE") && figure < 5.0,
        "exposure {figure} {label}"
    );
}

/// `pqdns-resolver --check` accepts a sound command line without binding or writing, and names
/// each kind of bad input (with file and line where it is a file) with exit status 1.
#[test]
fn check_names_each_bad_input_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let anchor = unused_anchor(d);
    let anchor = anchor.to_str().unwrap();
    std::fs::write(
        d.join("hints"),
        ".  3600000 NS a.root-servers.\na.root-servers.  3600000 A 192.0.2.1\n",
    )
    .unwrap();
    std::fs::write(d.join("bad.ds"), ". IN DS 20326 8 2 00\n. IN DS garbage\n").unwrap();
    let check = |args: &[&str]| {
        let out = std::process::Command::new("timeout")
            .args([
                "60",
                env!("CARGO_BIN_EXE_pqdns-resolver"),
                "--check",
                "--tls-dir",
                "tls",
            ])
            .args(args)
            .current_dir(d)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    };
    let (code, text) = check(&["--root-hints", "hints", "--trust-anchor", anchor]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("configuration ok"), "{text}");
    assert!(!d.join("tls").exists(), "--check wrote the TLS directory");

    let cases: [(&[&str], &str); 5] = [
        (
            &["--root-hints", "missing.hints", "--trust-anchor", anchor],
            "missing.hints",
        ),
        (
            &["--root-hints", "hints", "--trust-anchor", "bad.ds"],
            "bad.ds:2:",
        ),
        (
            &["--forward", "192.0.2.1:domain", "--trust-anchor", anchor],
            "--forward \"192.0.2.1:domain\"",
        ),
        (
            &[
                "--root-hints",
                "hints",
                "--trust-anchor",
                anchor,
                "--user",
                "no-such-user-pqdns",
            ],
            "no user \"no-such-user-pqdns\"",
        ),
        (
            &[
                "--root-hints",
                "hints",
                "--trust-anchor",
                anchor,
                "--tls-cert",
                "none.pem",
                "--tls-key",
                "none.key",
            ],
            "none.pem",
        ),
    ];
    for (args, wanted) in cases {
        let (code, text) = check(args);
        assert_eq!(code, Some(1), "{args:?}: {text}");
        assert!(text.contains(wanted), "{args:?}: {wanted:?} not in {text}");
        assert!(
            !text.contains("listening"),
            "{args:?}: bound a listener: {text}"
        );
    }
}

/// `--config FILE` holds the options: relative paths are relative to the file (the check runs
/// from another directory), the command line wins over the file, and a bad setting is named
/// with its file and line, exit status 1.
#[test]
fn the_configuration_file_holds_the_options() {
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    let anchor = unused_anchor(&etc);
    std::fs::write(
        etc.join("hints"),
        ".  3600000 NS a.root-servers.\na.root-servers.  3600000 A 192.0.2.1\n",
    )
    .unwrap();
    let config = etc.join("pqdns-resolver.toml");
    let check = |file: &str, args: &[&str]| {
        std::fs::write(&config, file).unwrap();
        let out = std::process::Command::new("timeout")
            .args([
                "60",
                env!("CARGO_BIN_EXE_pqdns-resolver"),
                "--check",
                "--config",
            ])
            .arg(&config)
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    };
    let good = format!(
        "udp = [\"127.0.0.1:5353\"]\ntls-dir = \"tls\"\nroot_hints = \"hints\"\n\
         trust-anchor = [\"{}\"]\ncache-size = 32\n",
        anchor.file_name().unwrap().to_str().unwrap()
    );
    let (code, text) = check(&good, &[]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("configuration ok"), "{text}");
    // The command line's --root-hints replaces the file's.
    let (code, text) = check(&good, &["--root-hints", "missing.hints"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("missing.hints"), "{text}");
    let cases = [
        (
            format!("{good}colour = 1\n"),
            "pqdns-resolver.toml:6: unknown setting `colour`",
        ),
        (
            good.replace("5353\"]", "5353\", \"nonsense\"]"),
            "pqdns-resolver.toml:1: udp",
        ),
        (
            good.replace("\"hints\"", "\"elsewhere.hints\""),
            "elsewhere.hints",
        ),
        (
            format!("{good}require-pq = \"yes\"\n"),
            "pqdns-resolver.toml:6: require-pq",
        ),
    ];
    for (file, wanted) in cases {
        let (code, text) = check(&file, &[]);
        assert_eq!(code, Some(1), "{file}: {text}");
        assert!(text.contains(wanted), "{file}: {wanted:?} not in {text}");
    }
}

/// `--dnstap FILE`: CLIENT_QUERY and CLIENT_RESPONSE for every answered query, over UDP and
/// TCP, decoded by BIND's `dnstap-read` after a graceful stop (queries from outside `--allow`,
/// which the resolver answers REFUSED itself, so no authority is needed).
#[test]
fn dnstap_logs_client_queries_and_responses() {
    pqdns_test_support::peers::require("dnstap-read", "bind9-dnsutils");
    let dir = tempfile::tempdir().unwrap();
    let anchor = unused_anchor(dir.path());
    let tap = dir.path().join("tap.fstrm");
    let mut s = Service::start(
        dir.path(),
        "tap",
        &[
            "--forward",
            "127.0.0.1:9",
            "--trust-anchor",
            anchor.to_str().unwrap(),
            "--dnstap",
            tap.to_str().unwrap(),
            "--allow",
            "192.0.2.0/24",
        ],
    );
    for (how, name) in [("+notcp", "udp.example."), ("+tcp", "tcp.example.")] {
        let out = s.dig(&[how, name, "A"]);
        assert_eq!(out.status(), "REFUSED", "{}", out.text);
    }
    s.terminate();
    let text = dnstap_frames(&tap);
    let frames: Vec<&str> = text.split("\n---").collect();
    let count = |what: &str| frames.iter().filter(|f| f.contains(what)).count();
    assert_eq!(count("type: CLIENT_QUERY"), 2, "{text}");
    assert_eq!(count("type: CLIENT_RESPONSE"), 2, "{text}");
    assert_eq!(count("identity: pqdns-resolver"), 4, "{text}");
    assert_eq!(count("socket_protocol: TCP"), 2, "{text}");
    let tcp: Vec<_> = frames
        .iter()
        .filter(|f| f.contains("tcp.example."))
        .collect();
    assert_eq!(tcp.len(), 2, "{text}");
    assert!(
        tcp.iter().all(|f| f.contains("socket_protocol: TCP")),
        "{text}"
    );
    assert_eq!(
        count("status: REFUSED"),
        2,
        "the responses are logged whole\n{text}"
    );
}
