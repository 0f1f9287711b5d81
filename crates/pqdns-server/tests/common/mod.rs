//! Shared harness for the over-the-wire tests: an in-process server on 127.0.0.1 (and ::1)
//! port 0 serving a freshly keyed and signed test zone, and runners for real clients (dig,
//! kdig, delv, a Go TLS client) that are bounded in time and fail loudly when missing.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of the harness"
)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

use pqdns_core::Record;
use pqdns_server::settings::{KxPolicy, Settings};
use pqdns_server::zones::{load_all, ZoneSource};
use pqdns_server::{Server, ServerConfig, ServerHandle};

/// The test zone's apex.
pub const ORIGIN: &str = "pqdns.test.";

/// The test zone: positive data, CNAME, wildcard, DNAME, a secure and an insecure delegation.
pub const RECORDS: &str = r#"
@          SOA   ns1 hostmaster 2026010101 7200 3600 1209600 300
@          NS    ns1
@          NS    ns2
ns1        A     127.0.0.1
ns2        AAAA  ::1
www        A     192.0.2.80
www        AAAA  2001:db8::80
ftp        CNAME www
*.apps     TXT   "served by the wildcard"
old-apps   DNAME apps
child      NS    ns1.child
ns1.child  A     192.0.2.53
child      DS    60485 13 2 D4B7D520E7BB5F0F67674A0CCEB1E3E0614B93C4F9E99B8383F6A1E4469DA50A
legacy     NS    ns.legacy
ns.legacy  A     192.0.2.54
"#;

/// Seconds any client command may run before it is killed.
pub const CLIENT_TIMEOUT_SECS: u32 = 30;

/// A running server with its temporary key directory.
pub struct TestServer {
    pub dir: tempfile::TempDir,
    pub ds: Vec<Record>,
    pub ds_path: PathBuf,
    rt: tokio::runtime::Runtime,
    handle: Option<ServerHandle>,
}

impl TestServer {
    /// Signs the test zone with `algorithms` (NSEC3) and serves it on every transport.
    pub fn start(algorithms: &[&str], policy: KxPolicy) -> TestServer {
        TestServer::start_with(algorithms, |s| s.tls.policy = policy)
    }

    /// As [`TestServer::start`], with `adjust` applied to the settings before binding.
    pub fn start_with(algorithms: &[&str], adjust: impl FnOnce(&mut Settings)) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let algs: Vec<String> = algorithms.iter().map(|a| format!("{a:?}")).collect();
        let toml = format!(
            "origin = \"{ORIGIN}\"\ndefault_ttl = 3600\nrecords = '''{RECORDS}'''\n\
             [signing]\nalgorithms = [{}]\ndenial = \"nsec3\"\nkey_directory = \"keys\"\n",
            algs.join(", ")
        );
        let zone_file = dir.path().join("zone.toml");
        std::fs::write(&zone_file, toml).unwrap();
        let sources = vec![ZoneSource::File(zone_file)];
        let (catalog, reports) = load_all(&sources, pqdns_core::time::now()).unwrap();
        let mut settings = Settings::new(dir.path().join("keys"));
        let any4: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let any6: SocketAddr = "[::1]:0".parse().unwrap();
        settings.udp = vec![any4, any6];
        settings.tcp = vec![any4, any6];
        settings.dot = vec![any4];
        settings.doh = vec![any4];
        settings.doq = vec![any4];
        adjust(&mut settings);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let config = ServerConfig {
            zones: sources,
            settings,
        };
        let handle = rt.block_on(Server::bind(config, catalog)).unwrap();
        TestServer {
            ds: reports[0].ds.clone(),
            ds_path: reports[0].ds_path.clone().unwrap(),
            dir,
            rt,
            handle: Some(handle),
        }
    }

    pub fn handle(&self) -> &ServerHandle {
        self.handle.as_ref().unwrap()
    }
    pub fn udp(&self) -> SocketAddr {
        self.handle().addrs.udp[0]
    }
    pub fn udp6(&self) -> SocketAddr {
        self.handle().addrs.udp[1]
    }
    pub fn tcp(&self) -> SocketAddr {
        self.handle().addrs.tcp[0]
    }
    pub fn tcp6(&self) -> SocketAddr {
        self.handle().addrs.tcp[1]
    }
    pub fn dot(&self) -> SocketAddr {
        self.handle().addrs.dot[0]
    }
    pub fn doh(&self) -> SocketAddr {
        self.handle().addrs.doh[0]
    }
    pub fn doq(&self) -> SocketAddr {
        self.handle().addrs.doq[0]
    }
    pub fn cert_path(&self) -> PathBuf {
        self.handle().certificate().unwrap().cert_path
    }

    /// Runs a future on the server's runtime (e.g. a reload).
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.rt.block_on(h.shutdown());
        }
    }
}

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
    pub owner: String,
    pub ttl: u32,
    pub rtype: String,
    pub rdata: String,
}

/// dig's text output, parsed just enough for assertions.
#[derive(Debug)]
pub struct DigOutput {
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
    let program = require("dig", "bind9-dnsutils");
    let mut all = vec![
        format!("@{}", server.ip()),
        "-p".into(),
        server.port().to_string(),
        "+norecurse".into(),
        "+tries=1".into(),
        "+time=5".into(),
    ];
    all.extend(args.iter().map(|s| s.to_string()));
    let (ok, text) = run(&program, &all);
    assert!(ok, "dig {all:?} failed:\n{text}");
    DigOutput { text }
}

/// Runs kdig against `server` with `args`; kdig prints the same section layout as dig.
pub fn kdig(server: SocketAddr, args: &[&str]) -> DigOutput {
    let program = require("kdig", "knot-dnsutils");
    let mut all = vec![
        format!("@{}", server.ip()),
        "-p".into(),
        server.port().to_string(),
        "+norecurse".into(),
        "+retry=0".into(),
        "+time=5".into(),
    ];
    all.extend(args.iter().map(|s| s.to_string()));
    let (ok, text) = run(&program, &all);
    assert!(ok, "kdig {all:?} failed:\n{text}");
    DigOutput { text }
}

/// Builds the Go module in `tests/DIR` (its dependencies come from the Go module proxy) into a
/// binary named `name` in a temporary directory; its path.
fn build_go(dir: &str, name: &str) -> PathBuf {
    let go = require("go", "golang-go (or Go 1.26+ from go.dev in /usr/local/go)");
    let out_dir = std::env::temp_dir().join(format!("pqdns-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir).unwrap();
    let bin = out_dir.join(name);
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(dir);
    let out = Command::new("timeout")
        .args([
            "300",
            go.to_str().unwrap(),
            "build",
            "-o",
            bin.to_str().unwrap(),
            ".",
        ])
        .current_dir(&src)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod")
        .output()
        .expect("running go build");
    assert!(
        out.status.success(),
        "go build in tests/{dir} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// Builds the Go TLS client (tests/go: crypto/tls DoT and DoH) once per test run; its path.
pub fn go_client() -> PathBuf {
    static CLIENT: OnceLock<PathBuf> = OnceLock::new();
    CLIENT.get_or_init(|| build_go("go", "tlsclient")).clone()
}

/// Builds the Go DoQ client (tests/godoq: quic-go over crypto/tls) once per test run; its path.
pub fn go_doq_client() -> PathBuf {
    static CLIENT: OnceLock<PathBuf> = OnceLock::new();
    CLIENT
        .get_or_init(|| build_go("godoq", "doqclient"))
        .clone()
}

/// Runs the Python client `script` (tests/py: dot_client.py over pyOpenSSL, doq_client.py over
/// aioquic) with `args`: (exit status success, its key=value lines, the whole output). The
/// Python with those packages is `$PQDNS_PYTHON`, or the virtual environment `./dev test`
/// makes in `target/py`.
pub fn python_client(script: &str, args: &[&str]) -> (bool, HashMap<String, String>, String) {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = std::env::var_os("PQDNS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target/py/bin/python"));
    assert!(
        python.exists(),
        "{} not found: ./dev test makes it (python3 -m venv target/py; pip install pyOpenSSL aioquic)",
        python.display()
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/py")
        .join(script);
    let mut all = vec![script.to_string_lossy().into_owned()];
    all.extend(args.iter().map(|a| a.to_string()));
    let (ok, text) = run(&python, &all);
    (ok, key_values(&text), text)
}

/// A response of the server as pqdns-core reads it, after hickory-proto has read it the same
/// way (`harness::second_opinion`, issue 16).
///
/// # Panics
/// If either decoder refuses it or they disagree.
pub fn parse_response(wire: &[u8]) -> pqdns_core::message::Message {
    if let Err(e) = pqdns_server::harness::second_opinion(wire) {
        panic!("second opinion: {e}");
    }
    pqdns_core::message::Message::parse(wire).expect("the response parses")
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
fn key_values(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// GET `path` from the HTTP/1.1 server at `addr` (`Connection: close`): the whole response,
/// status line and headers included. Connecting and each read are bounded by 10 s.
pub fn http_get(addr: SocketAddr, path: &str) -> String {
    let limit = Duration::from_secs(10);
    let mut s = TcpStream::connect_timeout(&addr, limit).unwrap();
    s.set_read_timeout(Some(limit)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}

/// Starts the `pqdns-server` binary with `args` in `dir`, its log (stderr) going to `log`;
/// the child and the lines it prints on stdout (DS records, `listening …`), as they come.
pub fn spawn_server(args: &[&str], dir: &Path, log: &Path) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pqdns-server"))
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}
