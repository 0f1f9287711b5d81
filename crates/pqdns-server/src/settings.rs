//! Server settings: listen addresses, limits and TLS, from the `[server]` table of the zone
//! descriptions and from the command line (which wins).
//!
//! ```toml
//! [server]
//! udp = ["127.0.0.1:5353", "[::1]:5353"]   # each transport takes a list; [] turns it off
//! tcp = ["127.0.0.1:5353"]
//! dot = ["127.0.0.1:8853"]
//! doh = ["127.0.0.1:8443"]
//! doq = ["127.0.0.1:8853"]   # DNS over QUIC (RFC 9250), UDP beside DoT's TCP port; off
//!                             # unless set
//! doh_path = "/dns-query"
//! udp_payload = 1232          # bytes, EDNS UDP payload size offered and accepted (512..=4096)
//! udp_threads = 1             # threads (and SO_REUSEPORT sockets) per UDP address; one thread
//!                             # answers some 300k queries/s from prepared answers
//! doq_endpoints = 2           # QUIC endpoints (SO_REUSEPORT sockets) per DoQ address; default
//!                             # the cores (quinn signs one endpoint's handshakes one by one)
//! answer_cache_mib = 32       # MiB of prepared responses per catalog; 0 builds each anew
//! signature_cache_mib = 64    # MiB of RRSIGs made by online signing (mode = "online" zones)
//! signing_tasks = 2           # answers of online zones signed at once; more waiting: SERVFAIL
//! tcp_idle_timeout = 10       # seconds a TCP/DoT/DoH connection may sit idle (RFC 7766 §6.2.3)
//! max_connections = 512       # per stream listener (TCP, DoT, DoH each)
//! max_connections_per_ip = 32 # per client /24 (IPv6 /56) and stream listener
//! axfr_allow = ["127.0.0.1", "::1", "10.0.0.0/8", "key:transfer-key"]  # who may AXFR/IXFR
//!                             # over TCP and DoT: addresses or CIDR prefixes, and "key:NAME"
//!                             # for requests signed with that TSIG key from any address (only
//!                             # "key:" entries: a key is required); default [] refuses everyone
//! tsig_keys = ["keys/tsig.conf"]  # TSIG (RFC 8945) key files in BIND's syntax, relative to
//!                             # this file (`pqdns-zone tsig-keygen` writes them); signed
//!                             # requests are verified and answered signed, every message of
//!                             # a transfer included; default none
//! tsig_key = [{ name = "notify-key", algorithm = "hmac-sha256", secret = "c2VjcmV0..." }]
//!                             # keys written inline (base64 secret), beside those files; keep
//!                             # such a description unreadable to others
//! notify = ["192.0.2.53", "127.0.0.1:30053 key transfer-key"]  # secondaries sent NOTIFY at
//!                             # start and after each reload (UDP; port 53 unless given), with
//!                             # "key NAME" signed with that TSIG key (its answer must verify);
//!                             # default []
//! xdp = ["eth0", "eth1@5300"]  # AF_XDP fast path for UDP answers (feature `xdp`, Linux,
//!                             # root): IFACE serves the ports of `udp`, IFACE@PORT that port
//!                             # (crate::xdp); default none
//! metrics = "127.0.0.1:9153"  # Prometheus text endpoint GET /metrics (HTTP/1.1); default off
//! dnstap = "dnstap.fstrm"     # every query and response as dnstap AUTH_QUERY/AUTH_RESPONSE
//!                             # (Frame Streams) to this file, relative to the TOML file, or
//!                             # "unix:/run/dnstap.sock" to a collector; default off
//!                             # (pqdns_net::dnstap: a bounded queue, drops counted)
//! control_socket = "/run/pqdns/control.sock"  # the Unix socket pqdns-ctl talks to (mode
//!                             # 0660, owned by `user`; crate::control), relative to this
//!                             # file; default none
//! fragmentation = "arrf"      # "arrf", "qbf" or "off": UDP answers too large for the client's
//!                             # payload are fragmented (crate::fragment) for clients that send
//!                             # the fragmentation EDNS option; all others get TC=1
//! fragmentation_option = 65108  # EDNS option code of that signal (65001..=65534)
//! rrfrag_type = 65388         # RR type of ARRF's RRFRAG (private use; the experiments: 108)
//! nsid = "ns1.fra"            # NSID (RFC 5001) for queries that ask; "0x..." for hex bytes;
//! identity = "ns1.fra"        # CH TXT id.server./hostname.bind.; version: version.server./
//! version = "pqdns"           # version.bind. All three default to off (crate::identity)
//! cookies = "on"              # DNS cookies (RFC 7873/9018): "on", "off" or "require"
//! cookie_secret = "e5e973e5a6b2a43f48e7dc849e37bfcf"  # 32 hex digits shared by an anycast
//!                             # set; default: random, replaced daily (crate::cookie)
//! rrl_rate = 200              # UDP responses/s per client prefix and kind; 0 = off (crate::rrl)
//! rrl_slip = 2                # every 2nd limited response is sent truncated, the rest dropped
//! rrl_ipv4_prefix = 24        # bucket prefix lengths
//! rrl_ipv6_prefix = 56
//! amplification_limit = 3     # UDP answers to clients without a valid server cookie are at
//!                             # most 3x the query's bytes; larger ones are cut to TC=1 with
//!                             # the server cookie (crate::service); 0 = off
//! user = "pqdns"              # once every listener is bound, run as this account ("USER" or
//!                             # "USER:GROUP"; the server must start as root for that):
//!                             # supplementary groups, group and user ID are switched and no
//!                             # capability is kept; the key and state directories must be
//!                             # writable by it. Default: keep the account it started as
//! [server.tls]
//! policy = "hybrid-preferred" # or "pq-only": only hybrid ML-KEM key exchange groups, or
//!                             # "pq-strict": pq-only and an ML-DSA certificate
//! certificate = "cert.pem"    # PEM chain and key, relative to the TOML file; if absent a
//! private_key = "key.pem"     # self-signed certificate is made in the key directory
//! certificate_algorithm = "ECDSA-P256" # its key: "ECDSA-P256" (default; "ML-DSA-44" under
//!                             # pq-strict), "Ed25519", "ML-DSA-44", "ML-DSA-65", "ML-DSA-87"
//! names = ["dns.example.net"] # names (or addresses) the self-signed certificate covers
//!                             # besides localhost, 127.0.0.1, ::1 and the DoT/DoH addresses
//! ```
//!
//! When several zone descriptions have a `[server]` table, each setting comes from the first
//! description (in `--zone` order) that sets it.
//!
//! Zone transfers (RFC 5936): RFC 5936 §5 says implementations "SHOULD NOT
//! have a default policy for AXFR requests to be 'open to all'", so the default allow-list is
//! empty; clients outside it get REFUSED, as do AXFR and IXFR over UDP and DoH. NOTIFY
//! (RFC 1996) goes to every `notify` target for every zone.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pqdns_net::privilege::Account;
use pqdns_net::ListenConfig;
use serde::Deserialize;

pub use pqdns_net::dnstap::Sink;
pub use pqdns_net::tls::{CertAlgorithm, KxPolicy, TlsSettings};
pub use pqdns_net::{
    DEFAULT_DOH_PATH, DEFAULT_IDLE_TIMEOUT_SECS, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_IP, DEFAULT_UDP_THREADS,
};

use crate::acl::{AllowList, IpPrefix};
use crate::answer::DEFAULT_UDP_PAYLOAD;
use crate::cookie::{self, CookieMode};
pub use crate::fragment::FragSettings;
use crate::identity::{parse_nsid, Identity};
use crate::rrl::RrlSettings;
use pqdns_core::tsig_keyfile;
use pqdns_core::wire::tsig::{self, Key, KeyRing};
use pqdns_core::{Name, RrType};
use std::sync::Arc;

/// Default UDP and TCP listen address.
pub const DEFAULT_DNS_ADDR: &str = "127.0.0.1:5353";
/// Default DNS-over-TLS listen address.
pub const DEFAULT_DOT_ADDR: &str = "127.0.0.1:8853";
/// Default DNS-over-HTTPS listen address.
pub const DEFAULT_DOH_ADDR: &str = "127.0.0.1:8443";
/// Largest EDNS UDP payload size accepted in settings, in bytes.
pub const MAX_UDP_PAYLOAD: u16 = 4096;
/// Most threads per UDP address accepted in settings.
pub const MAX_UDP_THREADS: usize = 64;
/// Default budget of prepared answers, in MiB.
pub const DEFAULT_ANSWER_CACHE_MIB: usize = 32;

/// Default [`Settings::amplification_limit`]: 3, the factor QUIC allows toward an address it
/// has not validated (RFC 9000 §8.1), and what issue 16 asked of cookie-less clients (the
/// shared rule is [`crate::rrl::exceeds_amplification_limit`]).
pub use crate::rrl::DEFAULT_AMPLIFICATION_LIMIT;
/// Port of a NOTIFY target given without one.
pub const DEFAULT_NOTIFY_PORT: u16 = 53;

/// Parses a NOTIFY target: `ADDR:PORT`, `[V6]:PORT`, or a bare address meaning port 53.
///
/// # Errors
/// A message naming the text when it is neither.
pub fn parse_notify_target(text: &str) -> Result<SocketAddr, String> {
    text.parse::<SocketAddr>()
        .or_else(|_| {
            text.parse::<std::net::IpAddr>()
                .map(|ip| SocketAddr::new(ip, DEFAULT_NOTIFY_PORT))
        })
        .map_err(|_| format!("notify target {text:?} is not ADDR, ADDR:PORT or [IPv6]:PORT"))
}

/// The `[server.tls]` table.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsTable {
    /// Key exchange policy.
    pub policy: Option<KxPolicy>,
    /// PEM certificate chain, relative to the TOML file.
    pub certificate: Option<PathBuf>,
    /// PEM private key (PKCS#8, SEC1 or PKCS#1), relative to the TOML file.
    pub private_key: Option<PathBuf>,
    /// DNS names or IP addresses the self-signed certificate covers besides `localhost`, the
    /// loopback and the DoT/DoH listen addresses.
    pub names: Option<Vec<String>>,
    /// Key algorithm of the self-signed certificate.
    pub certificate_algorithm: Option<CertAlgorithm>,
}

/// The `[server]` table of a zone description.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerTable {
    /// UDP listen addresses.
    pub udp: Option<Vec<SocketAddr>>,
    /// TCP listen addresses.
    pub tcp: Option<Vec<SocketAddr>>,
    /// DoT listen addresses.
    pub dot: Option<Vec<SocketAddr>>,
    /// DoH listen addresses.
    pub doh: Option<Vec<SocketAddr>>,
    /// DoQ listen addresses.
    pub doq: Option<Vec<SocketAddr>>,
    /// DoH URI path.
    pub doh_path: Option<String>,
    /// EDNS UDP payload size, bytes.
    pub udp_payload: Option<u16>,
    /// Threads (and sockets) per UDP address.
    pub udp_threads: Option<usize>,
    /// QUIC endpoints (and sockets) per DoQ address.
    pub doq_endpoints: Option<usize>,
    /// Prepared-answer budget, MiB.
    pub answer_cache_mib: Option<usize>,
    /// Online signing's signature cache, MiB ([`crate::online`]).
    pub signature_cache_mib: Option<usize>,
    /// Online signing tasks at once ([`crate::online`]).
    pub signing_tasks: Option<usize>,
    /// Stream idle timeout, seconds.
    pub tcp_idle_timeout: Option<u64>,
    /// Connections per stream listener.
    pub max_connections: Option<usize>,
    /// Connections per client address per stream listener.
    pub max_connections_per_ip: Option<usize>,
    /// Addresses and prefixes allowed to transfer zones, `key:NAME` and `PREFIX key:NAME` entries.
    pub axfr_allow: Option<Vec<String>>,
    /// TSIG key files, relative to the zone description.
    pub tsig_keys: Option<Vec<PathBuf>>,
    /// TSIG keys written inline.
    pub tsig_key: Option<Vec<InlineKey>>,
    /// Secondaries to NOTIFY.
    pub notify: Option<Vec<String>>,
    /// AF_XDP fast path interfaces: `IFACE` or `IFACE@PORT` ([`crate::xdp`]).
    pub xdp: Option<Vec<String>>,
    /// Metrics listen address.
    pub metrics: Option<SocketAddr>,
    /// dnstap output: a file path (relative to the zone description) or `unix:PATH`.
    pub dnstap: Option<String>,
    /// Control socket path (relative to the zone description).
    pub control_socket: Option<PathBuf>,
    /// UDP fragmentation scheme: "arrf", "qbf" or "off".
    pub fragmentation: Option<String>,
    /// EDNS option code clients signal fragmentation support with.
    pub fragmentation_option: Option<u16>,
    /// RR type number of ARRF's RRFRAG.
    pub rrfrag_type: Option<u16>,
    /// NSID payload: text, or `0x` and hex.
    pub nsid: Option<String>,
    /// CH TXT answer for id.server. and hostname.bind.
    pub identity: Option<String>,
    /// CH TXT answer for version.server. and version.bind.
    pub version: Option<String>,
    /// DNS cookie mode.
    pub cookies: Option<CookieMode>,
    /// DNS cookie secret, 32 hex digits.
    pub cookie_secret: Option<String>,
    /// RRL responses per second per bucket.
    pub rrl_rate: Option<u32>,
    /// RRL slip.
    pub rrl_slip: Option<u32>,
    /// RRL IPv4 prefix length.
    pub rrl_ipv4_prefix: Option<u8>,
    /// RRL IPv6 prefix length.
    pub rrl_ipv6_prefix: Option<u8>,
    /// Largest UDP answer to a client without a valid server cookie, as a multiple of its
    /// query's length.
    pub amplification_limit: Option<u32>,
    /// Account to run as once the listeners are bound: `USER` or `USER:GROUP`.
    pub user: Option<String>,
    /// TLS settings.
    pub tls: Option<TlsTable>,
}

/// A TSIG key in the `[server]` table: `{ name, algorithm, secret }` (RFC 8945; the secret
/// in base64, RFC 4648 §4). `Debug` does not show the secret.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InlineKey {
    /// Key name.
    pub name: String,
    /// `hmac-sha256` or `hmac-sha512` (hmac-sha1/224/384 verify only).
    pub algorithm: String,
    /// The secret, base64.
    pub secret: String,
}

impl std::fmt::Debug for InlineKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InlineKey")
            .field("name", &self.name)
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

impl InlineKey {
    fn to_key(&self) -> Result<Key, String> {
        let name = Name::parse(&self.name, Some(&Name::root()))
            .map_err(|e| format!("key name {:?}: {e}", self.name))?;
        let algorithm = tsig::Algorithm::from_text(&self.algorithm)
            .ok_or_else(|| format!("key {name}: unsupported algorithm {:?}", self.algorithm))?;
        let secret = zeroize::Zeroizing::new(
            data_encoding::BASE64
                .decode(self.secret.as_bytes())
                .map_err(|_| format!("key {name}: the secret is not base64"))?,
        );
        Key::new(&name, algorithm, &secret).map_err(|e| format!("key {name}: {e}"))
    }
}

/// Why settings are invalid.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// The `[server]` table has unknown keys or wrong types.
    #[error("{}: [server]: {message}", path.display())]
    Table {
        /// The zone description.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A value is out of range.
    #[error("{0}")]
    Invalid(String),
}

impl ServerTable {
    /// Parses the `[server]` table of a zone description's text (`None` when it has none),
    /// so that errors give the line and column; `path` labels errors.
    ///
    /// # Errors
    /// [`SettingsError::Table`] for unknown keys or mistyped values.
    pub fn parse_document(text: &str, path: &Path) -> Result<Option<ServerTable>, SettingsError> {
        /// The description with only its `[server]` table read.
        #[derive(Deserialize)]
        struct Document {
            server: Option<ServerTable>,
        }
        toml::from_str::<Document>(text)
            .map(|d| d.server)
            .map_err(|e| SettingsError::Table {
                path: path.to_path_buf(),
                message: e.to_string(),
            })
    }

    /// Parses a `[server]` table; `path` labels errors.
    ///
    /// # Errors
    /// [`SettingsError::Table`] for unknown keys or mistyped values.
    pub fn parse(table: &toml::Table, path: &Path) -> Result<ServerTable, SettingsError> {
        table
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| SettingsError::Table {
                path: path.to_path_buf(),
                message: e.to_string(),
            })
    }
}

/// Everything the server needs besides zones.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Settings {
    /// UDP listen addresses.
    pub udp: Vec<SocketAddr>,
    /// TCP listen addresses.
    pub tcp: Vec<SocketAddr>,
    /// DoT listen addresses.
    pub dot: Vec<SocketAddr>,
    /// DoH listen addresses.
    pub doh: Vec<SocketAddr>,
    /// DoQ listen addresses (UDP).
    pub doq: Vec<SocketAddr>,
    /// DoH URI path.
    pub doh_path: String,
    /// EDNS UDP payload size, bytes.
    pub udp_payload: u16,
    /// Threads, each with its own `SO_REUSEPORT` socket, per UDP address (1 to 64).
    pub udp_threads: usize,
    /// QUIC endpoints, each with its own `SO_REUSEPORT` socket, per DoQ address (1 to 64;
    /// see [`ListenConfig::doq_endpoints`]).
    pub doq_endpoints: usize,
    /// Memory budget of prepared answers (replayed responses), in bytes; 0 disables them.
    pub answer_cache_bytes: usize,
    /// Online signing's signature cache and signing tasks ([`crate::online`]).
    pub online_signing: crate::online::OnlineLimits,
    /// Stream idle timeout.
    pub idle_timeout: Duration,
    /// Connections per stream listener.
    pub max_connections: usize,
    /// Connections per client address per stream listener.
    pub max_connections_per_ip: usize,
    /// Clients allowed to transfer zones over TCP and DoT (empty: nobody).
    pub axfr_allow: AllowList,
    /// TSIG keys (from [`Settings::tsig_keys`]) whose signed requests may transfer zones over
    /// TCP and DoT from any address (`axfr_allow` entries `key:NAME`).
    pub axfr_keys: Vec<Name>,
    /// TSIG keys whose signed requests may transfer zones over TCP and DoT from a prefix only
    /// (`axfr_allow` entries `PREFIX key:NAME`: key and address must both match).
    pub axfr_prefixed_keys: Vec<(IpPrefix, Name)>,
    /// TSIG keys requests may be signed with (RFC 8945); empty: a signed request gets
    /// NOTAUTH/BADKEY.
    pub tsig_keys: Arc<KeyRing>,
    /// Secondaries sent NOTIFY at start and after each successful reload.
    pub notify: Vec<SocketAddr>,
    /// The TSIG key (in [`Settings::tsig_keys`]) NOTIFY to a target is signed with.
    pub notify_keys: Vec<(SocketAddr, Name)>,
    /// Interfaces of the AF_XDP fast path for UDP answers ([`crate::xdp`]); none by default.
    pub xdp: Vec<crate::xdp::XdpInterface>,
    /// Where to serve `GET /metrics`; `None` turns metrics off (nothing is counted).
    pub metrics: Option<SocketAddr>,
    /// Where to write dnstap (AUTH_QUERY and AUTH_RESPONSE of every answered request);
    /// `None`: off.
    pub dnstap: Option<Sink>,
    /// The Unix socket `pqdns-ctl` talks to ([`crate::control`]); `None`: none.
    pub control_socket: Option<PathBuf>,
    /// UDP fragmentation for clients that signal it.
    pub fragmentation: FragSettings,
    /// What the server discloses about itself (NSID, CH TXT); nothing by default.
    pub identity: Identity,
    /// DNS cookies: on by default.
    pub cookies: CookieMode,
    /// A configured cookie secret; `None`: random, replaced every [`cookie::DEFAULT_ROTATION`].
    pub cookie_secret: Option<[u8; cookie::SECRET_LEN]>,
    /// Response-rate limiting over UDP: on by default.
    pub rrl: RrlSettings,
    /// Largest UDP response to a client without a valid server cookie, as a multiple of its
    /// query's length in bytes; larger responses are cut to their question and OPT with TC set
    /// ([`crate::rrl::exceeds_amplification_limit`]). 0 turns the limit off. Default
    /// [`DEFAULT_AMPLIFICATION_LIMIT`].
    pub amplification_limit: u32,
    /// The account to become once every listener is bound (the server must start as root
    /// for that; [`pqdns_net::privilege`]); `None` keeps the account it started as.
    pub user: Option<Account>,
    /// TLS settings.
    pub tls: TlsSettings,
}

impl Settings {
    /// Settings with no listeners and default limits (for tests and embedding).
    pub fn new(generated_cert_dir: PathBuf) -> Settings {
        Settings {
            udp: Vec::new(),
            tcp: Vec::new(),
            dot: Vec::new(),
            doh: Vec::new(),
            doq: Vec::new(),
            doh_path: DEFAULT_DOH_PATH.into(),
            udp_payload: DEFAULT_UDP_PAYLOAD,
            udp_threads: DEFAULT_UDP_THREADS,
            doq_endpoints: pqdns_net::default_doq_endpoints(),
            answer_cache_bytes: DEFAULT_ANSWER_CACHE_MIB << 20,
            online_signing: crate::online::OnlineLimits::default(),
            idle_timeout: Duration::from_secs(DEFAULT_IDLE_TIMEOUT_SECS),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_ip: DEFAULT_MAX_CONNECTIONS_PER_IP,
            axfr_allow: AllowList::default(),
            axfr_keys: Vec::new(),
            axfr_prefixed_keys: Vec::new(),
            tsig_keys: Arc::default(),
            notify: Vec::new(),
            notify_keys: Vec::new(),
            xdp: Vec::new(),
            metrics: None,
            dnstap: None,
            control_socket: None,
            fragmentation: FragSettings::default(),
            identity: Identity::default(),
            cookies: CookieMode::default(),
            cookie_secret: None,
            rrl: RrlSettings::default(),
            amplification_limit: DEFAULT_AMPLIFICATION_LIMIT,
            user: None,
            tls: TlsSettings::generated_in(generated_cert_dir),
        }
    }

    /// Merges `[server]` tables (first one setting a key wins) over the defaults; `base_dirs`
    /// resolve relative certificate paths per table.
    ///
    /// # Errors
    /// [`SettingsError::Invalid`] for out-of-range values or a certificate without a key.
    pub fn from_tables(
        tables: &[(ServerTable, PathBuf)],
        generated_cert_dir: PathBuf,
    ) -> Result<Settings, SettingsError> {
        let first = |f: &dyn Fn(&ServerTable) -> Option<Vec<SocketAddr>>, default: &str| {
            tables
                .iter()
                .find_map(|(t, _)| f(t))
                .unwrap_or_else(|| vec![default.parse().expect("default addresses are valid")])
        };
        let mut s = Settings::new(generated_cert_dir);
        s.udp = first(&|t| t.udp.clone(), DEFAULT_DNS_ADDR);
        s.tcp = first(&|t| t.tcp.clone(), DEFAULT_DNS_ADDR);
        s.dot = first(&|t| t.dot.clone(), DEFAULT_DOT_ADDR);
        s.doh = first(&|t| t.doh.clone(), DEFAULT_DOH_ADDR);
        s.doq = tables
            .iter()
            .find_map(|(t, _)| t.doq.clone())
            .unwrap_or_default();
        let pick = |f: &dyn Fn(&ServerTable) -> Option<u64>| tables.iter().find_map(|(t, _)| f(t));
        if let Some(path) = tables.iter().find_map(|(t, _)| t.doh_path.clone()) {
            if !path.starts_with('/') {
                return Err(SettingsError::Invalid(format!(
                    "doh_path {path:?} must start with '/'"
                )));
            }
            s.doh_path = path;
        }
        if let Some(p) = pick(&|t| t.udp_payload.map(u64::from)) {
            if !(512..=u64::from(MAX_UDP_PAYLOAD)).contains(&p) {
                return Err(SettingsError::Invalid(format!(
                    "udp_payload {p} is outside 512..=4096 bytes"
                )));
            }
            s.udp_payload = p as u16;
        }
        let sockets = |name: &str, n: u64| {
            if (1..=MAX_UDP_THREADS as u64).contains(&n) {
                Ok(n as usize)
            } else {
                Err(SettingsError::Invalid(format!(
                    "{name} {n} is outside 1..={MAX_UDP_THREADS}"
                )))
            }
        };
        if let Some(n) = pick(&|t| t.udp_threads.map(|v| v as u64)) {
            s.udp_threads = sockets("udp_threads", n)?;
        }
        if let Some(n) = pick(&|t| t.doq_endpoints.map(|v| v as u64)) {
            s.doq_endpoints = sockets("doq_endpoints", n)?;
        }
        if let Some(mib) = pick(&|t| t.answer_cache_mib.map(|v| v as u64)) {
            s.answer_cache_bytes = usize::try_from(mib)
                .ok()
                .and_then(|m| m.checked_mul(1 << 20))
                .ok_or_else(|| {
                    SettingsError::Invalid(format!("answer_cache_mib {mib} is too large"))
                })?;
        }
        if let Some(mib) = pick(&|t| t.signature_cache_mib.map(|v| v as u64)) {
            s.online_signing.cache_bytes = usize::try_from(mib)
                .ok()
                .and_then(|m| m.checked_mul(1 << 20))
                .ok_or_else(|| {
                    SettingsError::Invalid(format!("signature_cache_mib {mib} is too large"))
                })?;
        }
        if let Some(n) = pick(&|t| t.signing_tasks.map(|v| v as u64)) {
            s.online_signing.signing_tasks = match usize::try_from(n) {
                Ok(n) if n <= crate::online::MAX_SIGNING_TASKS => n,
                _ => {
                    return Err(SettingsError::Invalid(format!(
                        "signing_tasks {n} is outside 0..={}",
                        crate::online::MAX_SIGNING_TASKS
                    )))
                }
            };
        }
        if let Some(t) = pick(&|t| t.tcp_idle_timeout) {
            if t == 0 {
                return Err(SettingsError::Invalid(
                    "tcp_idle_timeout must be at least 1 second".into(),
                ));
            }
            s.idle_timeout = Duration::from_secs(t);
        }
        if let Some(m) = pick(&|t| t.max_connections.map(|v| v as u64)) {
            s.max_connections = m.max(1) as usize;
        }
        if let Some(m) = pick(&|t| t.max_connections_per_ip.map(|v| v as u64)) {
            s.max_connections_per_ip = m.max(1) as usize;
        }
        let files = tables
            .iter()
            .find_map(|(t, base)| Some((t.tsig_keys.as_ref()?, base)));
        let inline = tables.iter().find_map(|(t, _)| t.tsig_key.as_ref());
        if files.is_some() || inline.is_some() {
            let mut keys = Vec::new();
            if let Some((list, base)) = files {
                for file in list {
                    keys.extend(
                        tsig_keyfile::read(&base.join(file))
                            .map_err(|e| SettingsError::Invalid(format!("tsig_keys: {e}")))?,
                    );
                }
            }
            for key in inline.into_iter().flatten() {
                keys.push(
                    key.to_key()
                        .map_err(|e| SettingsError::Invalid(format!("tsig_key: {e}")))?,
                );
            }
            let mut ring = KeyRing::new();
            for key in keys {
                let name = key.name().clone();
                if ring.insert(key).is_some() {
                    return Err(SettingsError::Invalid(format!(
                        "tsig_keys: key {name} is defined twice"
                    )));
                }
            }
            s.tsig_keys = Arc::new(ring);
        }
        if let Some(list) = tables.iter().find_map(|(t, _)| t.axfr_allow.as_ref()) {
            let mut prefixes = Vec::new();
            for entry in list {
                let invalid = |e: &dyn std::fmt::Display| {
                    SettingsError::Invalid(format!("axfr_allow: {entry:?}: {e}"))
                };
                let mut words = entry.split_whitespace();
                let (prefix, key) = match (words.next(), words.next(), words.next()) {
                    (Some(key), None, _) if key.starts_with("key:") => (None, key),
                    (Some(prefix), Some(key), None) if key.starts_with("key:") => (
                        Some(prefix.parse::<IpPrefix>().map_err(|e| invalid(&e))?),
                        key,
                    ),
                    (Some(prefix), None, _) => {
                        prefixes.push(prefix.parse::<IpPrefix>().map_err(|e| invalid(&e))?);
                        continue;
                    }
                    _ => {
                        return Err(invalid(
                            &"expected ADDRESS[/LEN], key:NAME or ADDRESS[/LEN] key:NAME",
                        ))
                    }
                };
                let name = Name::parse(&key["key:".len()..], Some(&Name::root()))
                    .map_err(|e| invalid(&e))?
                    .to_lowercase();
                if s.tsig_keys.get(name.as_wire()).is_none() {
                    return Err(invalid(&"names a key no tsig_keys file defines"));
                }
                match prefix {
                    Some(prefix) => s.axfr_prefixed_keys.push((prefix, name)),
                    None => s.axfr_keys.push(name),
                }
            }
            s.axfr_allow = AllowList::new(prefixes);
        }
        if let Some(list) = tables.iter().find_map(|(t, _)| t.notify.as_ref()) {
            for entry in list {
                let mut words = entry.split_whitespace();
                let target = parse_notify_target(words.next().unwrap_or_default())
                    .map_err(SettingsError::Invalid)?;
                s.notify.push(target);
                match (words.next(), words.next(), words.next()) {
                    (None, _, _) => {}
                    (Some("key"), Some(key), None) => {
                        let name = Name::parse(key, Some(&Name::root()))
                            .ok()
                            .filter(|n| s.tsig_keys.get(n.as_wire()).is_some())
                            .ok_or_else(|| {
                                SettingsError::Invalid(format!(
                                    "notify: {entry:?} names a key no tsig_keys file defines"
                                ))
                            })?;
                        s.notify_keys.push((target, name.to_lowercase()));
                    }
                    _ => {
                        return Err(SettingsError::Invalid(format!(
                            "notify: {entry:?} is not ADDR[:PORT] [key NAME]"
                        )))
                    }
                }
            }
        }
        if let Some(entries) = tables.iter().find_map(|(t, _)| t.xdp.as_ref()) {
            s.xdp = entries
                .iter()
                .map(|e| e.parse())
                .collect::<Result<_, _>>()
                .map_err(SettingsError::Invalid)?;
        }
        s.metrics = tables.iter().find_map(|(t, _)| t.metrics);
        s.control_socket = tables
            .iter()
            .find_map(|(t, base)| t.control_socket.as_ref().map(|p| base.join(p)));
        if let Some((text, base)) = tables
            .iter()
            .find_map(|(t, base)| t.dnstap.as_ref().map(|d| (d, base)))
        {
            s.dnstap = Some(match text.parse().map_err(SettingsError::Invalid)? {
                Sink::File(path) => Sink::File(base.join(path)),
                Sink::Socket(path) => Sink::Socket(base.join(path)),
            });
        }
        if let Some(mode) = tables.iter().find_map(|(t, _)| t.fragmentation.as_ref()) {
            s.fragmentation.mode = mode.parse().map_err(SettingsError::Invalid)?;
        }
        if let Some(code) = pick(&|t| t.fragmentation_option.map(u64::from)) {
            if !(65_001..=65_534).contains(&code) {
                return Err(SettingsError::Invalid(format!(
                    "fragmentation_option {code} is outside the local/experimental range 65001..=65534"
                )));
            }
            s.fragmentation.option_code = code as u16;
        }
        if let Some(t) = pick(&|t| t.rrfrag_type.map(u64::from)) {
            if t == 0 || t == u64::from(RrType::OPT.0) {
                return Err(SettingsError::Invalid(format!(
                    "rrfrag_type {t} is reserved"
                )));
            }
            s.fragmentation.rrfrag_type = RrType(t as u16);
        }
        if let Some(nsid) = tables.iter().find_map(|(t, _)| t.nsid.as_deref()) {
            s.identity.nsid = Some(parse_nsid(nsid).map_err(SettingsError::Invalid)?);
        }
        s.identity.id = tables.iter().find_map(|(t, _)| t.identity.clone());
        s.identity.version = tables.iter().find_map(|(t, _)| t.version.clone());
        if let Some(mode) = tables.iter().find_map(|(t, _)| t.cookies) {
            s.cookies = mode;
        }
        if let Some(secret) = tables.iter().find_map(|(t, _)| t.cookie_secret.as_deref()) {
            s.cookie_secret = Some(cookie::parse_secret(secret).map_err(SettingsError::Invalid)?);
        }
        if let Some(user) = tables.iter().find_map(|(t, _)| t.user.as_ref()) {
            s.user = Some(
                user.parse()
                    .map_err(|e: pqdns_net::privilege::PrivilegeError| {
                        SettingsError::Invalid(e.to_string())
                    })?,
            );
        }
        if let Some(limit) = tables.iter().find_map(|(t, _)| t.amplification_limit) {
            s.amplification_limit = limit;
        }
        if let Some(rate) = tables.iter().find_map(|(t, _)| t.rrl_rate) {
            s.rrl.rate = rate;
        }
        if let Some(slip) = tables.iter().find_map(|(t, _)| t.rrl_slip) {
            s.rrl.slip = slip;
        }
        if let Some(p) = tables.iter().find_map(|(t, _)| t.rrl_ipv4_prefix) {
            if p > 32 {
                return Err(SettingsError::Invalid(format!(
                    "rrl_ipv4_prefix {p} exceeds 32"
                )));
            }
            s.rrl.ipv4_prefix = p;
        }
        if let Some(p) = tables.iter().find_map(|(t, _)| t.rrl_ipv6_prefix) {
            if p > 128 {
                return Err(SettingsError::Invalid(format!(
                    "rrl_ipv6_prefix {p} exceeds 128"
                )));
            }
            s.rrl.ipv6_prefix = p;
        }
        for (table, base) in tables {
            let Some(tls) = &table.tls else { continue };
            match (&tls.certificate, &tls.private_key) {
                (Some(c), Some(k)) if s.tls.cert_and_key.is_none() => {
                    s.tls.cert_and_key = Some((base.join(c), base.join(k)));
                }
                (Some(_), None) | (None, Some(_)) => {
                    return Err(SettingsError::Invalid(
                        "[server.tls] needs both certificate and private_key, or neither".into(),
                    ))
                }
                _ => {}
            }
        }
        if let Some(p) = tables.iter().find_map(|(t, _)| t.tls.as_ref()?.policy) {
            s.tls.policy = p;
        }
        if let Some(a) = tables
            .iter()
            .find_map(|(t, _)| t.tls.as_ref()?.certificate_algorithm)
        {
            s.tls.certificate_algorithm = Some(a);
        }
        if let Some(names) = tables
            .iter()
            .find_map(|(t, _)| t.tls.as_ref()?.names.clone())
        {
            s.tls.names = names;
        }
        Ok(s)
    }

    /// The listener part of these settings, for [`pqdns_net::Listeners::bind`].
    pub fn listen_config(&self) -> ListenConfig {
        let mut c = ListenConfig::new(self.tls.generated_cert_dir.clone());
        c.udp.clone_from(&self.udp);
        c.tcp.clone_from(&self.tcp);
        c.dot.clone_from(&self.dot);
        c.doh.clone_from(&self.doh);
        c.doq.clone_from(&self.doq);
        c.doh_path.clone_from(&self.doh_path);
        c.udp_threads = self.udp_threads;
        c.doq_endpoints = self.doq_endpoints;
        c.idle_timeout = self.idle_timeout;
        c.max_connections = self.max_connections;
        c.max_connections_per_ip = self.max_connections_per_ip;
        c.tls = self.tls.clone();
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tsig_keys` files are read relative to the zone description; `axfr_allow` mixes
    /// prefixes and `key:NAME`; `notify` targets may name a key; keys that no file defines,
    /// and broken key files, are errors naming the problem.
    #[test]
    fn tsig_keys_and_key_entries() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("keys.conf"),
            "key \"Transfer-Key\" { algorithm hmac-sha256; secret \"c2VjcmV0\"; };\n\
             key notify-key { algorithm hmac-sha512; secret \"c2VjcmV0\"; };\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("bad.conf"),
            "key k {\n algorithm hmac-md5;\n};\n",
        )
        .unwrap();
        let settings = |text: &str| {
            let t: toml::Table = toml::from_str(text).unwrap();
            let table = ServerTable::parse(&t, Path::new("s.toml")).unwrap();
            Settings::from_tables(&[(table, dir.path().to_path_buf())], PathBuf::new())
        };
        let s = settings(
            "tsig_keys = [\"keys.conf\"]\naxfr_allow = [\"10.0.0.0/8\", \"key:transfer-key\"]\n\
             notify = [\"192.0.2.1\", \"192.0.2.2:5300 key notify-key\"]\n",
        )
        .unwrap();
        assert_eq!(s.tsig_keys.len(), 2);
        assert!(s.axfr_allow.allows("10.1.2.3".parse().unwrap()));
        assert!(!s.axfr_allow.allows("127.0.0.1".parse().unwrap()));
        assert_eq!(s.axfr_keys, vec!["transfer-key.".parse::<Name>().unwrap()]);
        assert_eq!(s.notify.len(), 2);
        assert_eq!(
            s.notify_keys,
            vec![(
                "192.0.2.2:5300".parse().unwrap(),
                "notify-key.".parse().unwrap()
            )]
        );
        // Inline keys join the files' keys (the secret is not in Debug output).
        let s = settings(
            "tsig_keys = [\"keys.conf\"]\ntsig_key = [{ name = \"inline\", algorithm = \"hmac-sha512\", secret = \"aW5saW5l\" }]\n",
        )
        .unwrap();
        assert_eq!(s.tsig_keys.len(), 3);
        let inline = s.tsig_keys.get(b"\x06inline\x00").unwrap();
        assert_eq!(inline.secret(), b"inline");
        assert!(!format!("{s:?}").contains("aW5saW5l"));
        // Only a key: no address may transfer without it.
        let s =
            settings("tsig_keys = [\"keys.conf\"]\naxfr_allow = [\"key:transfer-key\"]\n").unwrap();
        assert!(s.axfr_allow.is_empty() && s.axfr_keys.len() == 1);
        // A key from a prefix only: both must hold, and the prefix is not allowed alone.
        let s = settings(
            "tsig_keys = [\"keys.conf\"]\naxfr_allow = [\"10.0.0.0/8 key:transfer-key\"]\n",
        )
        .unwrap();
        assert!(s.axfr_allow.is_empty() && s.axfr_keys.is_empty());
        assert_eq!(
            s.axfr_prefixed_keys,
            vec![(
                "10.0.0.0/8".parse().unwrap(),
                "transfer-key.".parse().unwrap()
            )]
        );
        for (text, needle) in [
            ("axfr_allow = [\"key:transfer-key\"]\n", "no tsig_keys file"),
            (
                "tsig_keys = [\"keys.conf\"]\naxfr_allow = [\"key:other\"]\n",
                "key:other",
            ),
            (
                "tsig_keys = [\"keys.conf\"]\naxfr_allow = [\"10.0.0.0/8 10.1.0.0/16\"]\n",
                "expected ADDRESS",
            ),
            (
                "tsig_keys = [\"keys.conf\"]\naxfr_allow = [\"10.0.0.0/99 key:transfer-key\"]\n",
                "10.0.0.0/99",
            ),
            (
                "tsig_keys = [\"keys.conf\"]\nnotify = [\"192.0.2.1 key other\"]\n",
                "no tsig_keys file",
            ),
            (
                "tsig_keys = [\"keys.conf\"]\nnotify = [\"192.0.2.1 secret x\"]\n",
                "[key NAME]",
            ),
            (
                "tsig_keys = [\"bad.conf\"]\n",
                "bad.conf:2: unsupported algorithm",
            ),
            ("tsig_keys = [\"missing.conf\"]\n", "missing.conf"),
            (
                "tsig_keys = [\"keys.conf\", \"keys.conf\"]\n",
                "defined twice",
            ),
            (
                "tsig_key = [{ name = \"k\", algorithm = \"hmac-md5\", secret = \"AA==\" }]\n",
                "unsupported algorithm",
            ),
            (
                "tsig_key = [{ name = \"k\", algorithm = \"hmac-sha256\", secret = \"!\" }]\n",
                "not base64",
            ),
        ] {
            let err = settings(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn tables_merge_first_wins_and_reject_unknown_keys() {
        let a: toml::Table = toml::from_str(
            "udp = [\"127.0.0.1:1053\"]\n[tls]\npolicy = \"pq-only\"\nnames = [\"dns.example\"]\ncertificate_algorithm = \"ML-DSA-65\"\n",
        )
        .unwrap();
        let b: toml::Table =
            toml::from_str("udp = [\"127.0.0.1:2053\"]\ntcp = []\nudp_payload = 1400\n").unwrap();
        let tables = vec![
            (
                ServerTable::parse(&a, Path::new("a.toml")).unwrap(),
                PathBuf::from("/a"),
            ),
            (
                ServerTable::parse(&b, Path::new("b.toml")).unwrap(),
                PathBuf::from("/b"),
            ),
        ];
        let s = Settings::from_tables(&tables, PathBuf::from("keys")).unwrap();
        assert_eq!(s.udp, vec!["127.0.0.1:1053".parse::<SocketAddr>().unwrap()]);
        assert!(s.tcp.is_empty());
        assert_eq!(s.dot, vec![DEFAULT_DOT_ADDR.parse::<SocketAddr>().unwrap()]);
        assert_eq!(s.udp_payload, 1400);
        assert_eq!(s.doq_endpoints, pqdns_net::default_doq_endpoints());
        assert_eq!(s.tls.policy, KxPolicy::PqOnly);
        assert_eq!(s.tls.certificate_algorithm, Some(CertAlgorithm::MlDsa65));
        assert_eq!(s.tls.names, ["dns.example"]);
        assert_eq!(s.listen_config().tls.names, ["dns.example"]);

        assert!(s.axfr_allow.is_empty() && s.notify.is_empty() && s.metrics.is_none());
        let sockets = |text: &str| {
            let t: toml::Table = toml::from_str(text).unwrap();
            let table = ServerTable::parse(&t, Path::new("s.toml")).unwrap();
            Settings::from_tables(&[(table, PathBuf::new())], PathBuf::new())
        };
        let s = sockets("doq_endpoints = 3\nudp_threads = 2\n").unwrap();
        assert_eq!((s.doq_endpoints, s.udp_threads), (3, 2));
        assert_eq!(s.listen_config().doq_endpoints, 3);
        for bad in ["doq_endpoints = 0", "udp_threads = 65"] {
            assert!(
                matches!(sockets(bad), Err(SettingsError::Invalid(_))),
                "{bad}"
            );
        }

        let xfr: toml::Table = toml::from_str(
            "axfr_allow = [\"127.0.0.1\", \"2001:db8::/32\"]\nnotify = [\"192.0.2.1\", \"[::1]:30053\"]\nmetrics = \"127.0.0.1:9153\"\n",
        )
        .unwrap();
        let t = vec![(
            ServerTable::parse(&xfr, Path::new("x")).unwrap(),
            PathBuf::new(),
        )];
        let s = Settings::from_tables(&t, PathBuf::new()).unwrap();
        assert!(s.axfr_allow.allows("127.0.0.1".parse().unwrap()));
        assert!(s.axfr_allow.allows("2001:db8::9".parse().unwrap()));
        assert!(!s.axfr_allow.allows("127.0.0.2".parse().unwrap()));
        assert_eq!(
            s.notify,
            vec![
                "192.0.2.1:53".parse::<SocketAddr>().unwrap(),
                "[::1]:30053".parse().unwrap()
            ]
        );
        assert_eq!(s.metrics, Some("127.0.0.1:9153".parse().unwrap()));
        assert_eq!(s.fragmentation, FragSettings::default());
        let frag: toml::Table = toml::from_str(
            "fragmentation = \"qbf\"\nfragmentation_option = 65001\nrrfrag_type = 65280\n",
        )
        .unwrap();
        let t = vec![(
            ServerTable::parse(&frag, Path::new("f")).unwrap(),
            PathBuf::new(),
        )];
        let f = Settings::from_tables(&t, PathBuf::new())
            .unwrap()
            .fragmentation;
        assert_eq!(f.mode, pqdns_core::frag::edns::Fragmentation::Qbf);
        assert_eq!((f.option_code, f.rrfrag_type), (65001, RrType(65280)));
        for (bad, needle) in [
            ("axfr_allow = [\"10.0.0.0/99\"]\n", "axfr_allow"),
            ("notify = [\"ns1.example\"]\n", "ns1.example"),
            ("fragmentation = \"tcp\"\n", "tcp"),
            ("fragmentation_option = 10\n", "65001"),
            ("rrfrag_type = 41\n", "rrfrag_type"),
        ] {
            let table: toml::Table = toml::from_str(bad).unwrap();
            let t = vec![(
                ServerTable::parse(&table, Path::new("b")).unwrap(),
                PathBuf::new(),
            )];
            let err = Settings::from_tables(&t, PathBuf::new())
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{err}");
        }

        let bad: toml::Table = toml::from_str("udp_port = 53\n").unwrap();
        let err = ServerTable::parse(&bad, Path::new("z.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("z.toml") && err.contains("udp_port"), "{err}");
        let small: toml::Table = toml::from_str("udp_payload = 100\n").unwrap();
        let t = vec![(
            ServerTable::parse(&small, Path::new("s")).unwrap(),
            PathBuf::new(),
        )];
        assert!(Settings::from_tables(&t, PathBuf::new()).is_err());
    }
}
