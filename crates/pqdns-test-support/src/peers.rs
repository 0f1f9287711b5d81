//! Peer programs the integration tests of several crates run: finding installed ones, and
//! building the Go TLS clients whose sources are this crate's `go/` and `godoq/`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

/// The path of a peer program, or a panic naming the Debian package that provides it.
pub fn require(program: &str, package: &str) -> PathBuf {
    for dir in [
        "/usr/bin",
        "/usr/local/bin",
        "/usr/local/go/bin",
        "/usr/sbin",
    ] {
        let p = Path::new(dir).join(program);
        if p.exists() {
            return p;
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(program);
            if p.exists() {
                return p;
            }
        }
    }
    panic!("{program} is not installed: this test needs it; install the Debian package `{package}` (apt-get install {package})");
}

/// Builds the Go module in this crate's `DIR` (its dependencies come from the Go module proxy)
/// into a binary named `name`; its path.
///
/// The binary lives in one directory of the temporary directory per version of the sources
/// (named by a hash of them), so test processes share one build and reruns leave nothing new
/// behind; it is built under a name of this process and renamed into place, so processes
/// building at the same time never run a half-written binary.
fn build_go(dir: &str, name: &str) -> PathBuf {
    let go = require("go", "golang-go (or Go 1.26+ from go.dev in /usr/local/go)");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(dir);
    let out_dir = std::env::temp_dir().join(format!("pqdns-{name}-{:016x}", sources_hash(&src)));
    let bin = out_dir.join(name);
    if bin.exists() {
        return bin;
    }
    std::fs::create_dir_all(&out_dir).unwrap();
    let partial = out_dir.join(format!("{name}.{}", std::process::id()));
    let out = Command::new("timeout")
        .args([
            "300",
            go.to_str().unwrap(),
            "build",
            "-o",
            partial.to_str().unwrap(),
            ".",
        ])
        .current_dir(&src)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod")
        .output()
        .expect("running go build");
    assert!(
        out.status.success(),
        "go build in {} failed:\n{}{}",
        src.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&partial, &bin).unwrap();
    bin
}

/// A hash of the names and contents of the files in `dir` (not recursive), in name order.
fn sources_hash(dir: &Path) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for file in files {
        file.file_name().hash(&mut hasher);
        std::fs::read(&file).unwrap().hash(&mut hasher);
    }
    hasher.finish()
}

/// Builds the Go TLS client (`go/`: crypto/tls DoT and DoH) once per test run; its path.
pub fn go_client() -> PathBuf {
    static CLIENT: OnceLock<PathBuf> = OnceLock::new();
    CLIENT.get_or_init(|| build_go("go", "tlsclient")).clone()
}

/// Builds the Go DoQ client (`godoq/`: quic-go over crypto/tls) once per test run; its path.
pub fn go_doq_client() -> PathBuf {
    static CLIENT: OnceLock<PathBuf> = OnceLock::new();
    CLIENT
        .get_or_init(|| build_go("godoq", "doqclient"))
        .clone()
}

/// Seconds any client command may run before it is killed.
pub const CLIENT_TIMEOUT_SECS: u32 = 30;

/// Runs `program args` under `timeout`, returning (success, stdout + stderr).
pub fn run(program: &Path, args: &[String]) -> (bool, String) {
    let out = Command::new("timeout")
        .arg(CLIENT_TIMEOUT_SECS.to_string())
        .arg(program)
        .args(args)
        .output()
        .expect("running timeout(1) from coreutils");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// One record line of dig/kdig output.
#[derive(Debug, Clone, PartialEq)]
pub struct Rr {
    /// Owner name as printed.
    pub owner: String,
    /// TTL, seconds.
    pub ttl: u32,
    /// Type mnemonic.
    pub rtype: String,
    /// RDATA, presentation format (fields joined by one space).
    pub rdata: String,
}

/// dig's text output, parsed just enough for assertions.
#[derive(Debug)]
pub struct DigOutput {
    /// The whole output.
    pub text: String,
}

impl DigOutput {
    /// The header flags (`qr aa tc` …; dig writes `flags:`, kdig `Flags:`).
    pub fn flags(&self) -> Vec<String> {
        let line = self
            .text
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with(";; flags:"))
            .unwrap_or_else(|| panic!("no flags line in:\n{}", self.text));
        let flags = line[";; flags:".len()..].split(';').next().unwrap();
        flags.split_whitespace().map(String::from).collect()
    }

    /// True if the header has `flag` (`aa`, `ad`, `tc`, …).
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags().iter().any(|f| f == flag)
    }

    /// The status (NOERROR, NXDOMAIN, …).
    pub fn status(&self) -> String {
        let line = self
            .text
            .lines()
            .find(|l| l.contains("status:"))
            .unwrap_or_else(|| panic!("no status in:\n{}", self.text));
        let after = line.split("status:").nth(1).unwrap();
        after.split([',', ';']).next().unwrap().trim().to_string()
    }

    /// Records of the section titled `name` (ANSWER, AUTHORITY, ADDITIONAL).
    pub fn section(&self, name: &str) -> Vec<Rr> {
        let title = format!(";; {name} SECTION:");
        let mut out = Vec::new();
        let mut inside = false;
        for line in self.text.lines() {
            if line.starts_with(&title) {
                inside = true;
                continue;
            }
            if !inside {
                continue;
            }
            if line.trim().is_empty() || line.starts_with(";;") {
                break;
            }
            let mut f = line.split_whitespace();
            let owner = f.next().unwrap().to_string();
            let ttl = f.next().unwrap().parse().unwrap();
            let _class = f.next();
            let rtype = f.next().unwrap().to_string();
            let rdata = f.collect::<Vec<_>>().join(" ");
            out.push(Rr {
                owner,
                ttl,
                rtype,
                rdata,
            });
        }
        out
    }

    /// True if `section` holds a record of `rtype` at `owner` (case-insensitive owner).
    pub fn has(&self, section: &str, owner: &str, rtype: &str) -> bool {
        self.section(section)
            .iter()
            .any(|r| r.owner.eq_ignore_ascii_case(owner) && r.rtype == rtype)
    }

    /// True if `section` holds an RRSIG covering `covered`.
    pub fn has_rrsig(&self, section: &str, covered: &str) -> bool {
        self.section(section)
            .iter()
            .any(|r| r.rtype == "RRSIG" && r.rdata.split_whitespace().next() == Some(covered))
    }

    /// True if any section holds an RRSIG.
    pub fn any_rrsig(&self) -> bool {
        ["ANSWER", "AUTHORITY", "ADDITIONAL"]
            .iter()
            .any(|s| self.section(s).iter().any(|r| r.rtype == "RRSIG"))
    }
}

/// Runs dig against `server` with `args` (always +norecurse, one try, 5 s per try).
pub fn dig(server: SocketAddr, args: &[&str]) -> DigOutput {
    dig_like(("dig", "bind9-dnsutils"), "+tries=1", server, args)
}

/// Runs kdig against `server` with `args`; kdig prints the same section layout as dig.
pub fn kdig(server: SocketAddr, args: &[&str]) -> DigOutput {
    dig_like(("kdig", "knot-dnsutils"), "+retry=0", server, args)
}

/// Runs `program` (from Debian `package`), which takes dig's options, against `server`: no
/// recursion, `one_try` (how it spells a single try), 5 s per try, then `args`.
fn dig_like(
    (program, package): (&str, &str),
    one_try: &str,
    server: SocketAddr,
    args: &[&str],
) -> DigOutput {
    let path = require(program, package);
    let mut all = vec![
        format!("@{}", server.ip()),
        "-p".into(),
        server.port().to_string(),
        "+norecurse".into(),
        one_try.into(),
        "+time=5".into(),
    ];
    all.extend(args.iter().map(|s| s.to_string()));
    let (ok, text) = run(&path, &all);
    assert!(ok, "{program} {all:?} failed:\n{text}");
    DigOutput { text }
}

/// Runs the Go TLS client; (success, key=value map, raw output).
pub fn go(args: &[&str]) -> (bool, HashMap<String, String>, String) {
    run_client(&go_client(), args)
}

/// Runs the Go DoQ client; (success, key=value map, raw output).
pub fn go_doq(args: &[&str]) -> (bool, HashMap<String, String>, String) {
    run_client(&go_doq_client(), args)
}

fn run_client(program: &Path, args: &[&str]) -> (bool, HashMap<String, String>, String) {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let (ok, text) = run(program, &args);
    (ok, key_values(&text), text)
}

/// The `key=value` lines of a client's output.
pub fn key_values(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Starts `program` with `args` in `dir`, its log (stderr) going to `log`; the child and the
/// lines it prints on stdout (`listening …`, …), as they come.
///
/// # Panics
/// If the program cannot be started.
pub fn spawn(
    program: &Path,
    args: &[&str],
    dir: &Path,
    log: &Path,
) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

/// Waits up to `within` for the line `listening KIND ADDR` among the lines `rx` brings (as
/// [`spawn`] gives them) and returns ADDR (also from `http://ADDR/…` and `https://ADDR/…`);
/// the lines before it are dropped.
///
/// # Panics
/// If no such line comes in time, showing the program's log `log`.
pub fn listening(
    rx: &mpsc::Receiver<String>,
    kind: &str,
    within: Duration,
    log: &Path,
) -> SocketAddr {
    let prefix = format!("listening {kind} ");
    loop {
        let line = rx.recv_timeout(within).unwrap_or_else(|e| {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            panic!("no `{prefix}` line ({e}); log:\n{text}")
        });
        if let Some(a) = line.strip_prefix(&prefix) {
            let a = a
                .trim_start_matches("https://")
                .trim_start_matches("http://");
            let a = a.split('/').next().unwrap_or(a);
            return a.parse().unwrap_or_else(|e| panic!("{line:?}: {e}"));
        }
    }
}

/// DNS over TLS of an unbound instance: its port and PEM certificate and key.
#[derive(Clone, Copy, Debug)]
pub struct UnboundTls<'a> {
    /// TCP port of the DoT listener, on the same address.
    pub port: u16,
    /// Certificate chain (PEM).
    pub cert: &'a Path,
    /// Private key (PEM).
    pub key: &'a Path,
}

/// Starts unbound (Debian package `unbound`) in the foreground as a validating recursive
/// resolver on `addr` (UDP and TCP, and DoT with `tls`), iterating from the root hints file
/// `hints` with the trust anchor file `anchor`, allowed to query loopback authorities; its
/// configuration, log and PID file live in `dir`. Returns once it answers `probe` SOA (within
/// 10 s).
///
/// # Panics
/// If unbound is missing, or does not answer in time (its log is shown).
pub fn start_unbound(
    dir: &Path,
    addr: SocketAddr,
    tls: Option<UnboundTls<'_>>,
    hints: &Path,
    anchor: &Path,
    probe: &str,
) -> Child {
    let mut conf = unbound_server_conf(dir, addr, anchor);
    conf.push_str(&format!("  root-hints: \"{}\"\n", hints.display()));
    // Explicit: the 43-name comparison runs against unbound's QNAME minimisation (RFC 9156).
    conf.push_str("  qname-minimisation: yes\n");
    if let Some(t) = tls {
        conf.push_str(&format!(
            "  interface: {}@{}\n  tls-port: {}\n  tls-service-pem: \"{}\"\n  tls-service-key: \"{}\"\n",
            addr.ip(),
            t.port,
            t.port,
            t.cert.display(),
            t.key.display()
        ));
    }
    run_unbound(dir, addr, conf, probe)
}

/// Starts unbound as [`start_unbound`] does, but as a validating resolver of the one zone
/// `zone` served by `server` (a stub zone: no root, no port 53), with the trust anchor file
/// `anchor` (the zone's DS); returns once it answers `zone` SOA.
///
/// # Panics
/// As [`start_unbound`].
pub fn start_unbound_stub(
    dir: &Path,
    addr: SocketAddr,
    zone: &str,
    server: SocketAddr,
    anchor: &Path,
) -> Child {
    let mut conf = unbound_server_conf(dir, addr, anchor);
    conf.push_str(&format!(
        "stub-zone:\n  name: \"{zone}\"\n  stub-addr: {}@{}\n",
        server.ip(),
        server.port()
    ));
    run_unbound(dir, addr, conf, zone)
}

/// The `server:` clause of both unbound configurations (its log, PID file and validator).
fn unbound_server_conf(dir: &Path, addr: SocketAddr, anchor: &Path) -> String {
    let d = dir.display();
    format!(
        "server:\n  interface: {ip}@{port}\n  port: {port}\n  do-ip6: no\n  num-threads: 1\n  \
         do-not-query-localhost: no\n  access-control: 127.0.0.0/8 allow\n  directory: \"{d}\"\n  \
         chroot: \"\"\n  username: \"\"\n  pidfile: \"{d}/unbound.pid\"\n  use-syslog: no\n  \
         logfile: \"{d}/unbound.log\"\n  verbosity: 1\n  \
         trust-anchor-file: \"{}\"\n  module-config: \"validator iterator\"\n  val-log-level: 2\n",
        anchor.display(),
        ip = addr.ip(),
        port = addr.port(),
    )
}

/// Runs unbound with the configuration `conf` (control off) in `dir` and waits (10 s at
/// most) until it answers `probe` SOA on `addr`.
fn run_unbound(dir: &Path, addr: SocketAddr, mut conf: String, probe: &str) -> Child {
    let unbound = require("unbound", "unbound");
    conf.push_str("remote-control:\n  control-enable: no\n");
    let path = dir.join("unbound.conf");
    std::fs::write(&path, conf).expect("the directory is writable");
    let child = Command::new(unbound)
        .args(["-d", "-c"])
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("unbound.stderr")).expect("writable"))
        .spawn()
        .expect("starting unbound");
    let dig = require("dig", "bind9-dnsutils");
    let ready = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        Command::new(&dig)
            .args(["+time=1", "+tries=1", &format!("@{}", addr.ip()), "-p"])
            .arg(addr.port().to_string())
            .args([probe, "SOA"])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("status: NOERROR"))
    });
    assert!(
        ready,
        "unbound did not answer:\n{}{}",
        std::fs::read_to_string(dir.join("unbound.log")).unwrap_or_default(),
        std::fs::read_to_string(dir.join("unbound.stderr")).unwrap_or_default()
    );
    child
}

/// A child process killed (and reaped) when dropped, so a failing test leaves nothing
/// running.
#[derive(Debug)]
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
