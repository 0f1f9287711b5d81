//! The daemons as systemd services: the shipped unit files (`dist/systemd/`) checked with
//! `systemd-analyze`, and the notification socket (sd_notify(3)) a test binds as systemd
//! would.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::peers::require;

/// The unit file `dist/systemd/<name>.service` of the workspace.
pub fn unit_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../dist/systemd")
        .join(format!("{name}.service"))
}

/// Checks the unit `name` with `systemd-analyze verify` (its `ExecStart=/usr/sbin/<name>`
/// pointed at `binary`, which must exist; man pages not looked up) and returns the overall
/// exposure of `systemd-analyze security --offline=true`: the figure (0 safest … 10) and its
/// label (`SAFE`, `OK`, `MEDIUM`, `EXPOSED`, `UNSAFE`).
///
/// # Panics
/// If systemd-analyze is missing, rejects the unit, or prints no overall exposure.
pub fn analyze_unit(name: &str, binary: &Path, dir: &Path) -> (f64, String) {
    let analyze = require("systemd-analyze", "systemd");
    let text = std::fs::read_to_string(unit_file(name)).expect("the unit file");
    let installed = format!("/usr/sbin/{name} ");
    assert!(text.contains(&installed), "ExecStart runs {installed}");
    let unit = dir.join(format!("{name}.service"));
    let local = format!("{} ", binary.display());
    std::fs::write(&unit, text.replace(&installed, &local)).expect("a writable directory");
    let verify = std::process::Command::new(&analyze)
        .args(["verify", "--man=no"])
        .arg(&unit)
        .output()
        .expect("running systemd-analyze verify");
    assert!(
        verify.status.success() && verify.stderr.is_empty(),
        "systemd-analyze verify {name}: {}",
        String::from_utf8_lossy(&verify.stderr)
    );
    let security = std::process::Command::new(&analyze)
        .args(["security", "--offline=true"])
        .arg(&unit)
        .output()
        .expect("running systemd-analyze security");
    let out = String::from_utf8_lossy(&security.stdout);
    let line = out
        .lines()
        .find_map(|l| l.split("Overall exposure level for ").nth(1))
        .unwrap_or_else(|| panic!("no overall exposure in:\n{out}"));
    let mut words = line.split_whitespace().skip(1);
    let figure = words.next().and_then(|w| w.parse().ok()).expect("a figure");
    let label = words.next().expect("a label").to_owned();
    (figure, label)
}

/// A notification socket as systemd binds it (`NOTIFY_SOCKET`), at `path`.
pub struct NotifySocket {
    socket: UnixDatagram,
    /// Its path, for `NOTIFY_SOCKET`.
    pub path: PathBuf,
}

impl NotifySocket {
    /// Binds the socket at `path`.
    ///
    /// # Panics
    /// If it cannot be bound.
    pub fn bind(path: PathBuf) -> NotifySocket {
        let socket = UnixDatagram::bind(&path).expect("binding the notify socket");
        NotifySocket { socket, path }
    }

    /// The next message that contains `wanted` (a `KEY=VALUE` line), within `within`; the
    /// messages before it (at most 1,000) are returned too, oldest first, the match last.
    ///
    /// # Panics
    /// If none comes in time.
    pub fn until(&self, wanted: &str, within: Duration) -> Vec<String> {
        let deadline = std::time::Instant::now() + within;
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while seen.len() < 1000 {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            assert!(
                !left.is_zero(),
                "no {wanted} within {within:?}; got {seen:?}"
            );
            self.socket.set_read_timeout(Some(left)).expect("a timeout");
            let Ok(n) = self.socket.recv(&mut buf) else {
                panic!("no {wanted} within {within:?}; got {seen:?}");
            };
            let message = String::from_utf8_lossy(&buf[..n]).into_owned();
            let done = message.lines().any(|l| l == wanted);
            seen.push(message);
            if done {
                return seen;
            }
        }
        panic!("no {wanted} in 1,000 messages: {seen:?}");
    }
}
