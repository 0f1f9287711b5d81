//! A `pqdns-resolver` process for the tests: UDP and TCP on one free port of 127.0.0.1, DoT,
//! DoQ, DoH and metrics on port 0, its self-signed certificate and log in the test's directory.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use pqdns_test_support::peers::{dig, listening, require, run, spawn, DigOutput, KillOnDrop};
use pqdns_test_support::ports::free_dual_port;

/// A trust anchor file in `dir` (the root's published DS) for services started in forwarding
/// mode that resolve nothing: the service needs an anchor to start.
pub(crate) fn unused_anchor(dir: &Path) -> std::path::PathBuf {
    let anchor = dir.join("root.ds");
    std::fs::write(
        &anchor,
        ". IN DS 20326 8 2 E06D44B80B8F1D39A95C0B0D7C65D08458E880409BBC683457104237C7F8EC8D\n",
    )
    .unwrap();
    anchor
}

/// A running `pqdns-resolver` process; killed when dropped.
pub(crate) struct Service {
    _child: KillOnDrop,
    pub udp: SocketAddr,
    pub tcp: SocketAddr,
    pub dot: SocketAddr,
    pub doq: SocketAddr,
    pub doh: SocketAddr,
    pub metrics: SocketAddr,
    /// Its self-signed certificate.
    pub cert: std::path::PathBuf,
    pub log: std::path::PathBuf,
}

impl Service {
    /// Starts `pqdns-resolver` in `dir` with `args` besides the listeners; `name` names its
    /// log and certificate directory.
    pub(crate) fn start(dir: &Path, name: &str, args: &[&str]) -> Service {
        let tls_dir = dir.join(format!("{name}-tls"));
        let log = dir.join(format!("{name}.log"));
        // UDP and TCP on one port: dig retries truncated answers over TCP there.
        let plain = format!("127.0.0.1:{}", free_dual_port());
        let mut all = vec![
            "--udp",
            &plain,
            "--tcp",
            &plain,
            "--dot",
            "127.0.0.1:0",
            "--doq",
            "127.0.0.1:0",
            "--doh",
            "127.0.0.1:0",
            "--tls-dir",
            tls_dir.to_str().unwrap(),
            "--metrics",
            "127.0.0.1:0",
            "--log-level",
            "debug",
        ];
        all.extend_from_slice(args);
        let (child, rx) = spawn(
            Path::new(env!("CARGO_BIN_EXE_pqdns-resolver")),
            &all,
            dir,
            &log,
        );
        let within = Duration::from_secs(60);
        Service {
            udp: listening(&rx, "udp", within, &log),
            tcp: listening(&rx, "tcp", within, &log),
            dot: listening(&rx, "dot", within, &log),
            doq: listening(&rx, "doq", within, &log),
            doh: listening(&rx, "doh", within, &log),
            metrics: listening(&rx, "metrics", within, &log),
            cert: tls_dir.join("pqdns-server.crt"),
            _child: KillOnDrop(child),
            log,
        }
    }

    /// Its `/proc/PID/status`.
    pub(crate) fn proc_status(&self) -> String {
        std::fs::read_to_string(format!("/proc/{}/status", self._child.0.id())).unwrap()
    }

    /// Its resident memory, bytes (`VmRSS` of `/proc/PID/status`).
    pub(crate) fn rss(&self) -> u64 {
        let kib: u64 = self
            .proc_status()
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap();
        kib * 1024
    }

    /// The value of the metrics series `series` (name and labels as printed).
    pub(crate) fn metric(&self, series: &str) -> u64 {
        let url = format!("http://{}/metrics", self.metrics);
        let (ok, text) = run(&require("curl", "curl"), &["-s".into(), url]);
        assert!(ok, "{text}");
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
    }

    /// Stops it with SIGTERM (a graceful shutdown) and waits, at most 30 s, for it to exit.
    pub(crate) fn terminate(&mut self) {
        let pid = self._child.0.id().to_string();
        let (sent, text) = run(&require("kill", "procps"), &["-TERM".into(), pid]);
        assert!(sent, "{text}");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while self._child.0.try_wait().unwrap().is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends it the signal `name` (`HUP`, `TERM`, …) with kill(1).
    pub(crate) fn signal(&self, name: &str) {
        let pid = self._child.0.id().to_string();
        let (sent, text) = run(&require("kill", "procps"), &[format!("-{name}"), pid]);
        assert!(sent, "{text}");
    }

    /// Its log so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// dig at the UDP address with recursion desired and `args`.
    pub(crate) fn dig(&self, args: &[&str]) -> DigOutput {
        let mut all = vec!["+recurse", "+time=20"];
        all.extend_from_slice(args);
        dig(self.udp, &all)
    }
}
