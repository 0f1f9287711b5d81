//! pqdns-server instances for the benchmark matrix: a temporary directory with a small test
//! zone (signed with one DNSSEC algorithm, or unsigned), a TLS certificate of a chosen
//! signature algorithm made with rcgen, a `[server]` table with listeners on free 127.0.0.1
//! ports and connection limits raised for 10,000 concurrent clients, and the `pqdns-server`
//! binary started as a child process (so its CPU and memory can be sampled from `/proc`).
//! The child is killed when the [`ServerProcess`] is dropped.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pqdns_test_support::ports::free_dual_port;

/// Origin of the benchmark zone.
pub const ORIGIN: &str = "bench.test.";
/// Host records in the benchmark zone (`host0` … `host19`), besides `www` (few, so that
/// slow signers such as SPHINCS+ start in seconds).
pub const HOSTS: usize = 20;
/// How long a server may take to sign its zone and start listening.
pub const START_TIMEOUT: Duration = Duration::from_secs(120);
/// Connection limits of matrix servers (per listener and per client address): above the
/// largest concurrency step, 10,000.
pub const MAX_CONNECTIONS: usize = 20_000;

/// Signature algorithm of the server's TLS certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[non_exhaustive]
pub enum CertAlgorithm {
    /// ECDSA P-256 with SHA-256.
    EcdsaP256,
    /// Ed25519.
    Ed25519,
    /// RSA 2048-bit, PKCS#1 v1.5 SHA-256 certificate signature (rustls signs handshakes
    /// with RSA-PSS).
    Rsa2048,
    /// ML-DSA-44 (FIPS 204), the study's Dilithium2 level.
    MlDsa44,
    /// ML-DSA-65 (FIPS 204), the study's Dilithium3 level.
    MlDsa65,
    /// ML-DSA-87 (FIPS 204), the study's Dilithium5 level.
    MlDsa87,
}

impl CertAlgorithm {
    /// Every certificate algorithm of the matrix (rcgen 0.14 with aws-lc-rs issues them all).
    pub const ALL: [CertAlgorithm; 6] = [
        Self::EcdsaP256,
        Self::Ed25519,
        Self::Rsa2048,
        Self::MlDsa44,
        Self::MlDsa65,
        Self::MlDsa87,
    ];

    /// Name as in the study's tables (`ecdsa-p256`, `ed25519`, `rsa2048`), and `ml-dsa-44`,
    /// `ml-dsa-65`, `ml-dsa-87`.
    pub fn name(self) -> &'static str {
        match self {
            Self::EcdsaP256 => "ecdsa-p256",
            Self::Ed25519 => "ed25519",
            Self::Rsa2048 => "rsa2048",
            Self::MlDsa44 => "ml-dsa-44",
            Self::MlDsa65 => "ml-dsa-65",
            Self::MlDsa87 => "ml-dsa-87",
        }
    }

    /// The algorithm called `name` (see [`CertAlgorithm::name`]).
    pub fn from_name(name: &str) -> Option<CertAlgorithm> {
        Self::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(name))
    }

    fn key_pair(self) -> Result<rcgen::KeyPair, rcgen::Error> {
        match self {
            Self::EcdsaP256 => rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256),
            Self::Ed25519 => rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519),
            Self::Rsa2048 => {
                rcgen::KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_2048)
            }
            Self::MlDsa44 => rcgen::KeyPair::generate_for(&rcgen::PKCS_ML_DSA_44),
            Self::MlDsa65 => rcgen::KeyPair::generate_for(&rcgen::PKCS_ML_DSA_65),
            Self::MlDsa87 => rcgen::KeyPair::generate_for(&rcgen::PKCS_ML_DSA_87),
        }
    }
}

/// Why a server could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// Files in the temporary directory could not be written.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Certificate generation failed.
    #[error("certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    /// The server exited or did not listen in time; its log is attached.
    #[error("pqdns-server did not start: {reason}\n{log}")]
    NotListening {
        /// What happened.
        reason: String,
        /// The server's output.
        log: String,
    },
}

/// What one matrix server serves.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServerSpec {
    /// DNSSEC algorithm name (`pqdns-zone algorithms`), or `None` for an unsigned zone.
    pub dnssec: Option<String>,
    /// TLS certificate signature algorithm.
    pub cert: CertAlgorithm,
    /// TLS key-exchange policy (`hybrid-preferred` or `pq-only`).
    pub policy: &'static str,
}

/// A running pqdns-server child process.
pub struct ServerProcess {
    child: Child,
    dir: tempfile::TempDir,
    /// UDP and TCP address.
    pub dns: SocketAddr,
    /// DNS-over-TLS address (TCP), and DNS-over-QUIC on the same port number (UDP).
    pub dot: SocketAddr,
    /// DNS-over-HTTPS address.
    pub doh: SocketAddr,
    /// The certificate (PEM) to trust.
    pub ca: PathBuf,
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())
}

/// The benchmark zone: SOA, two NS, `www` A and AAAA, and [`HOSTS`] host A records.
pub fn zone_text() -> String {
    let mut z = format!(
        "$ORIGIN {ORIGIN}\n$TTL 3600\n@ SOA ns1 hostmaster 2026010101 7200 3600 1209600 300\n\
         @ NS ns1\n@ NS ns2\nns1 A 127.0.0.1\nns2 A 127.0.0.2\nwww A 192.0.2.80\n\
         www AAAA 2001:db8::80\n"
    );
    for i in 0..HOSTS {
        z.push_str(&format!("host{i} A 198.51.100.{}\n", i % 250));
    }
    z
}

impl ServerProcess {
    /// Writes the zone, certificate and configuration for `spec` and starts `binary`, waiting
    /// (at most [`START_TIMEOUT`]) until its DoT port accepts connections.
    ///
    /// # Errors
    /// [`StartError`] if files cannot be written or the server does not come up.
    pub fn start(binary: &Path, spec: &ServerSpec) -> Result<ServerProcess, StartError> {
        let dir = tempfile::tempdir()?;
        let key = spec.cert.key_pair()?;
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()])?;
        params.subject_alt_names.push(rcgen::SanType::IpAddress(
            std::net::Ipv4Addr::LOCALHOST.into(),
        ));
        let cert = params.self_signed(&key)?;
        let ca = dir.path().join("cert.pem");
        std::fs::write(&ca, cert.pem())?;
        write_private(&dir.path().join("key.pem"), &key.serialize_pem())?;
        std::fs::write(dir.path().join("zone.db"), zone_text())?;
        // Ports free for both UDP and TCP at the moment of asking (another process may take
        // one before the server binds; start() then fails with the server's log).
        let (dns, dot, doh) = (free_dual_port(), free_dual_port(), free_dual_port());
        let signing = spec.dnssec.as_ref().map_or(String::new(), |alg| {
            format!(
                "[signing]\nalgorithms = [\"{alg}\"]\nkeys = \"csk\"\ndenial = \"nsec3\"\n\
                 key_directory = \"keys\"\n"
            )
        });
        let toml = format!(
            "origin = \"{ORIGIN}\"\ndefault_ttl = 3600\nfile = \"zone.db\"\n{signing}\
             [server]\nudp = [\"127.0.0.1:{dns}\"]\ntcp = [\"127.0.0.1:{dns}\"]\n\
             dot = [\"127.0.0.1:{dot}\"]\ndoh = [\"127.0.0.1:{doh}\"]\n\
             doq = [\"127.0.0.1:{dot}\"]\nudp_payload = 4096\n\
             max_connections = {MAX_CONNECTIONS}\nmax_connections_per_ip = {MAX_CONNECTIONS}\n\
             rrl_rate = 0\namplification_limit = 0\n\
             [server.tls]\npolicy = \"{}\"\ncertificate = \"cert.pem\"\nprivate_key = \"key.pem\"\n",
            spec.policy
        );
        let config = dir.path().join("zone.toml");
        std::fs::write(&config, toml)?;
        let log = std::fs::File::create(dir.path().join("server.log"))?;
        let child = Command::new(binary)
            .arg("--zone")
            .arg(&config)
            .current_dir(dir.path())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let localhost = |port| SocketAddr::from(([127, 0, 0, 1], port));
        let mut server = ServerProcess {
            child,
            dir,
            dns: localhost(dns),
            dot: localhost(dot),
            doh: localhost(doh),
            ca,
        };
        server.wait_until_listening()?;
        Ok(server)
    }

    fn wait_until_listening(&mut self) -> Result<(), StartError> {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(StartError::NotListening {
                    reason: format!("exited with {status}"),
                    log: self.log(),
                });
            }
            let up = [self.dot, self.doh, self.dns].iter().all(|a| {
                std::net::TcpStream::connect_timeout(a, Duration::from_millis(100)).is_ok()
            });
            if up {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(StartError::NotListening {
            reason: format!("not listening after {START_TIMEOUT:?}"),
            log: self.log(),
        })
    }

    /// Process ID, for `/proc` sampling.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's stdout and stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU time process `pid` has run so far, nanoseconds: the sum over its threads of
/// `/proc/PID/task/TID/schedstat`'s first field (finer than `/proc/PID/stat`'s clock ticks).
pub fn cpu_ns(pid: u32) -> u64 {
    let dir = format!("/proc/{pid}/task");
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// The `pqdns-server` binary next to the running executable (`target/release/`), or its
/// parent directory (test executables live in `target/release/deps/`).
pub fn sibling_binary(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.join(name), dir.parent()?.join(name)]
        .into_iter()
        .find(|p| p.is_file())
}
