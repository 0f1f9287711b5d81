//! The Debian package (issue 32 must-show 1), on this machine, as root: `dist/build-deb.sh`
//! packages the binaries this test run built (cargo-deb), `dpkg -i` installs it (the `pqdns`
//! user and /var/lib/pqdns made by its postinst), `pqdns-server --check` accepts the installed
//! configuration, `man pqdns-server` renders, the installed server started as root on port 53
//! of a loopback address runs as `pqdns` with no capability, answers and writes its keys as
//! `pqdns`, and `pqdns-ctl` (root) lists its zone over the control socket the server handed to
//! `pqdns` (mode 0660); `dpkg -r` then removes the programs and leaves the keys. The machine is left as
//! found: the package purged, and the user and state removed if this test made them.

use crate::common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{dig, listening, require, spawn, KillOnDrop};

fn run(program: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new("timeout")
        .arg("300")
        .arg(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Purges the package, and removes the user and state directory when the test made them.
struct Cleanup {
    made_state: bool,
    made_user: bool,
    /// /run/pqdns, which the server makes for its control socket outside systemd.
    made_run: bool,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = run("dpkg", &["--purge", "pqdns"]);
        if self.made_state {
            let _ = std::fs::remove_dir_all("/var/lib/pqdns");
        }
        if self.made_run {
            let _ = std::fs::remove_dir_all("/run/pqdns");
        }
        if self.made_user {
            let _ = run("deluser", &["--quiet", "--system", "pqdns"]);
        }
    }
}

#[test]
fn the_debian_package_installs_serves_as_its_user_and_leaves_the_keys() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "this test installs a package: run it as root"
    );
    require("dpkg", "dpkg");
    require("cargo-deb", "cargo-deb (cargo install cargo-deb --locked)");
    let (installed, _) = run("dpkg-query", &["-W", "-f=${Status}", "pqdns"]);
    assert!(
        !installed,
        "a pqdns package is installed already: this test would replace it"
    );
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    // The target directory of this run: …/release/pqdns-server.
    let target = Path::new(env!("CARGO_BIN_EXE_pqdns-server"))
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf();
    for bin in ["pqdns-resolver", "pqdns-zone", "pqdns-resolve", "pqdns-ctl"] {
        assert!(
            target.join("release").join(bin).exists(),
            "{bin} is not built in {}: run the workspace's tests (./dev test)",
            target.display()
        );
    }
    let _cleanup = Cleanup {
        made_state: !Path::new("/var/lib/pqdns").exists(),
        made_user: nix::unistd::User::from_name("pqdns").unwrap().is_none(),
        made_run: !Path::new("/run/pqdns").exists(),
    };

    let out = Command::new("timeout")
        .args(["600", workspace.join("dist/build-deb.sh").to_str().unwrap()])
        .env("PQDNS_DEB_NO_BUILD", "1")
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "build-deb.sh: {stderr}");
    let deb = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        deb.ends_with(".deb") && Path::new(&deb).exists(),
        "{deb}\n{stderr}"
    );

    let (ok, text) = run("dpkg", &["-i", &deb]);
    assert!(ok, "dpkg -i: {text}");
    let pqdns = nix::unistd::User::from_name("pqdns")
        .unwrap()
        .expect("postinst made the pqdns user");
    let state = std::fs::metadata("/var/lib/pqdns").unwrap();
    assert_eq!(
        state.uid(),
        pqdns.uid.as_raw(),
        "/var/lib/pqdns belongs to pqdns"
    );

    let (ok, text) = run(
        "/usr/sbin/pqdns-server",
        &["--check", "--config", "/etc/pqdns/pqdns-server.toml"],
    );
    assert!(ok && text.contains("configuration ok"), "--check: {text}");
    let (ok, text) = run(
        "/usr/sbin/pqdns-resolver",
        &["--check", "--config", "/etc/pqdns/pqdns-resolver.toml"],
    );
    assert!(
        ok && text.contains("configuration ok"),
        "resolver --check: {text}"
    );
    if let Ok(man) = which("man") {
        // Found by name, then formatted from the installed file (`-l`): a formatted copy
        // that man-db cached from an earlier install would show old text.
        let (ok, path) = run(&man, &["-w", "pqdns-server"]);
        assert!(
            ok && path.trim() == "/usr/share/man/man8/pqdns-server.8.gz",
            "{path}"
        );
        let (ok, page) = run(&man, &["-P", "cat", "-l", path.trim()]);
        assert!(
            ok && page.contains("--config") && page.contains("pqdns-server"),
            "{page}"
        );
    }
    assert!(Path::new("/usr/share/man/man8/pqdns-server.8.gz").exists());

    // The installed configuration on port 53 of an address of its own.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("installed.log");
    let addr = "127.0.6.54:53";
    let (child, rx) = spawn(
        Path::new("/usr/sbin/pqdns-server"),
        &[
            "--config",
            "/etc/pqdns/pqdns-server.toml",
            "--udp",
            addr,
            "--tcp",
            addr,
        ],
        dir.path(),
        &log,
    );
    let pid = child.id();
    let server = KillOnDrop(child);
    let udp = listening(&rx, "udp", Duration::from_secs(180), &log);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let (uid, gid) = (pqdns.uid.to_string(), pqdns.gid.to_string());
    assert_eq!(field("Uid:"), vec![uid; 4], "{status}");
    assert_eq!(field("Gid:"), vec![gid; 4], "{status}");
    assert_eq!(field("CapEff:"), ["0000000000000000"], "{status}");
    let soa = dig(udp, &["+dnssec", "example.com.", "SOA"]);
    assert_eq!(soa.status(), "NOERROR", "{}", soa.text);
    assert!(soa.has_rrsig("ANSWER", "SOA"), "{}", soa.text);
    // The packaged control socket, handed to pqdns before the drop, and pqdns-ctl on it.
    let socket = std::fs::metadata("/run/pqdns/control.sock").unwrap();
    assert_eq!(
        (socket.uid(), socket.gid(), socket.mode() & 0o777),
        (pqdns.uid.as_raw(), pqdns.gid.as_raw(), 0o660)
    );
    let (ok, text) = run("/usr/sbin/pqdns-ctl", &["zone-list"]);
    assert!(ok && text.contains("example.com."), "pqdns-ctl: {text}");
    assert!(Path::new("/usr/share/man/man8/pqdns-ctl.8.gz").exists());
    let keys: Vec<PathBuf> = std::fs::read_dir("/var/lib/pqdns/keys")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "private"))
        .collect();
    assert!(!keys.is_empty(), "no private keys written");
    for key in &keys {
        let meta = std::fs::metadata(key).unwrap();
        assert_eq!(meta.uid(), pqdns.uid.as_raw(), "{}", key.display());
        assert_eq!(meta.mode() & 0o777, 0o600, "{}", key.display());
    }
    drop(server);

    let (ok, text) = run("dpkg", &["-r", "pqdns"]);
    assert!(ok, "dpkg -r: {text}");
    assert!(!Path::new("/usr/sbin/pqdns-server").exists());
    for key in &keys {
        assert!(key.exists(), "dpkg -r removed {}", key.display());
    }
}

fn which(program: &str) -> Result<String, ()> {
    std::env::split_paths(&std::env::var_os("PATH").ok_or(())?)
        .map(|d| d.join(program))
        .find(|p| p.exists())
        .map(|p| p.display().to_string())
        .ok_or(())
}
