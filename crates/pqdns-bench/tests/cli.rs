//! The `pqdns-bench` binary as a newcomer runs it: a closed stdout (`| head -1`) is not a crash,
//! and the README's one-minute `matrix --quick` demo leaves the committed full-grid report in
//! `docs/bench/matrix/` alone unless asked to write there.

use std::net::UdpSocket;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pqdns-bench"))
}

/// Answers `n` UDP queries with the query itself, QR set (a NOERROR answer with no records).
fn echo_responder(n: usize) -> (std::net::SocketAddr, std::thread::JoinHandle<()>) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let addr = socket.local_addr().unwrap();
    let thread = std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        for _ in 0..n {
            let Ok((len, from)) = socket.recv_from(&mut buf) else {
                return;
            };
            buf[2] |= 0x80;
            let _ = socket.send_to(&buf[..len], from);
        }
    });
    (addr, thread)
}

#[test]
fn load_with_a_closed_stdout_is_not_a_crash() {
    let (addr, responder) = echo_responder(20);
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    let out = bench()
        .args(["load", "-t", &addr.to_string(), "--transport", "udp"])
        .args(["--qname", "www.example.", "-n", "20", "-c", "1", "--quiet"])
        .stdout(Stdio::from(write))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    responder.join().unwrap();
}

fn copy_committed_matrix_json(to: &Path) {
    let committed =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/bench/matrix/matrix.json");
    std::fs::create_dir_all(to).unwrap();
    std::fs::copy(committed, to.join("matrix.json")).unwrap();
}

/// `matrix --quick` (here `--report-only`, which redraws without measuring) writes to a scratch
/// directory by default; the full-grid report is only written when named.
#[test]
fn matrix_quick_does_not_overwrite_the_committed_report() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let committed = d.join("docs/bench/matrix");
    copy_committed_matrix_json(&committed);
    std::fs::write(
        committed.join("README.md"),
        "the committed full-grid report\n",
    )
    .unwrap();
    let scratch = d.join("target/pqdns-bench/matrix-quick");
    copy_committed_matrix_json(&scratch);
    let out = bench()
        .args(["matrix", "--quick", "--report-only"])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(committed.join("README.md")).unwrap(),
        "the committed full-grid report\n"
    );
    assert!(std::fs::read_to_string(scratch.join("README.md"))
        .unwrap()
        .starts_with("# pqdns-bench matrix (--quick)"));
    // Asked explicitly, it writes there.
    let out = bench()
        .args([
            "matrix",
            "--quick",
            "--report-only",
            "--output",
            "docs/bench/matrix",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_ne!(
        std::fs::read_to_string(committed.join("README.md")).unwrap(),
        "the committed full-grid report\n"
    );
}

/// `handshakes` (docs/bench/handshakes.md) against pqdns-server children: one row per
/// certificate and transport (DoQ with 1200- and 1452-byte datagrams), every fresh handshake
/// hybrid, and the charts written.
#[test]
fn handshakes_report_has_a_row_per_certificate_and_transport() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("hs");
    let out = bench()
        .args([
            "handshakes",
            "--certs",
            "ecdsa-p256,ml-dsa-44",
            "--rtt",
            "0",
        ])
        .args(["--queries", "2", "--output", prefix.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let csv = std::fs::read_to_string(prefix.with_extension("csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    let cells: Vec<(&str, &str)> = rows.iter().map(|r| (r[0], r[1])).collect();
    assert_eq!(
        cells,
        [
            ("ecdsa-p256", "dot"),
            ("ecdsa-p256", "doq"),
            ("ecdsa-p256", "doq-1452"),
            ("ml-dsa-44", "dot"),
            ("ml-dsa-44", "doq"),
            ("ml-dsa-44", "doq-1452")
        ],
        "{csv}"
    );
    assert!(rows.iter().all(|r| r[7] == "X25519MLKEM768"), "{csv}");
    for chart in ["hs-latency.svg", "hs-cpu.svg"] {
        assert!(dir.path().join(chart).exists(), "{chart}");
    }
}
