//! Shared harness for the over-the-wire tests: an in-process server on 127.0.0.1 (and ::1)
//! port 0 serving a freshly keyed and signed test zone, and runners for real clients (dig,
//! kdig, delv, a Go TLS client) that are bounded in time and fail loudly when missing.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::mpsc;
use std::time::Duration;

use pqdns_core::Record;
use pqdns_server::settings::{KxPolicy, Settings};
use pqdns_server::zones::{load_all, ZoneSource};
use pqdns_server::{Server, ServerConfig, ServerHandle};

pub(crate) use pqdns_test_support::peers::*;

pub(crate) mod secondary;

/// The test zone's apex.
pub(crate) const ORIGIN: &str = "pqdns.test.";

/// The test zone: positive data, CNAME, wildcard, DNAME, a secure and an insecure delegation.
pub(crate) const RECORDS: &str = r#"
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

/// A running server with its temporary key directory.
pub(crate) struct TestServer {
    pub dir: tempfile::TempDir,
    pub ds: Vec<Record>,
    pub ds_path: PathBuf,
    rt: tokio::runtime::Runtime,
    handle: Option<ServerHandle>,
}

impl TestServer {
    /// Signs the test zone with `algorithms` (NSEC3) and serves it on every transport.
    pub(crate) fn start(algorithms: &[&str], policy: KxPolicy) -> TestServer {
        TestServer::start_with(algorithms, |s| s.tls.policy = policy)
    }

    /// As [`TestServer::start`], with `adjust` applied to the settings before binding.
    pub(crate) fn start_with(
        algorithms: &[&str],
        adjust: impl FnOnce(&mut Settings),
    ) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let algs: Vec<String> = algorithms.iter().map(|a| format!("{a:?}")).collect();
        let toml = format!(
            "origin = \"{ORIGIN}\"\ndefault_ttl = 3600\nrecords = '''{RECORDS}'''\n\
             [signing]\nalgorithms = [{}]\ndenial = \"nsec3\"\nkey_directory = \"keys\"\n",
            algs.join(", ")
        );
        std::fs::write(dir.path().join("zone.toml"), toml).unwrap();
        TestServer::start_in(dir, adjust)
    }

    /// Serves the zone that `zone.toml` in `dir` describes (written by the caller, with the
    /// files it names), keys in `dir/keys`, as [`TestServer::start_with`].
    pub(crate) fn start_in(
        dir: tempfile::TempDir,
        adjust: impl FnOnce(&mut Settings),
    ) -> TestServer {
        let zone_file = dir.path().join("zone.toml");
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
        let config = ServerConfig::new(sources, settings);
        let handle = rt.block_on(Server::bind(config, catalog)).unwrap();
        TestServer {
            ds: reports[0].ds.clone(),
            ds_path: reports[0].ds_path.clone().unwrap(),
            dir,
            rt,
            handle: Some(handle),
        }
    }

    pub(crate) fn handle(&self) -> &ServerHandle {
        self.handle.as_ref().unwrap()
    }
    pub(crate) fn udp(&self) -> SocketAddr {
        self.handle().addrs.udp[0]
    }
    pub(crate) fn udp6(&self) -> SocketAddr {
        self.handle().addrs.udp[1]
    }
    pub(crate) fn tcp(&self) -> SocketAddr {
        self.handle().addrs.tcp[0]
    }
    pub(crate) fn tcp6(&self) -> SocketAddr {
        self.handle().addrs.tcp[1]
    }
    pub(crate) fn dot(&self) -> SocketAddr {
        self.handle().addrs.dot[0]
    }
    pub(crate) fn doh(&self) -> SocketAddr {
        self.handle().addrs.doh[0]
    }
    pub(crate) fn doq(&self) -> SocketAddr {
        self.handle().addrs.doq[0]
    }
    pub(crate) fn cert_path(&self) -> PathBuf {
        self.handle().certificate().unwrap().cert_path
    }

    /// Runs a future on the server's runtime (e.g. a reload).
    pub(crate) fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
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

/// Runs the Python client `script` (tests/py: dot_client.py over pyOpenSSL, doq_client.py over
/// aioquic) with `args`: (exit status success, its key=value lines, the whole output). The
/// Python with those packages is `$PQDNS_PYTHON`, or the virtual environment `./dev test`
/// makes in `target/py`.
pub(crate) fn python_client(
    script: &str,
    args: &[&str],
) -> (bool, HashMap<String, String>, String) {
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
/// way (`pqdns_test_support::second_opinion`, issue 16).
///
/// # Panics
/// If either decoder refuses it or they disagree.
pub(crate) fn parse_response(wire: &[u8]) -> pqdns_core::message::Message {
    if let Err(e) = pqdns_test_support::second_opinion(wire) {
        panic!("second opinion: {e}");
    }
    pqdns_core::message::Message::parse(wire).expect("the response parses")
}

/// GET `path` from the HTTP/1.1 server at `addr` (`Connection: close`): the whole response,
/// status line and headers included. Connecting and each read are bounded by 10 s.
pub(crate) fn http_get(addr: SocketAddr, path: &str) -> String {
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
pub(crate) fn spawn_server(
    args: &[&str],
    dir: &Path,
    log: &Path,
) -> (Child, mpsc::Receiver<String>) {
    spawn(
        Path::new(env!("CARGO_BIN_EXE_pqdns-server")),
        args,
        dir,
        log,
    )
}
