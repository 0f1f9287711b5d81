//! `pqdns-resolver`: a validating recursive resolver service for stubs, browsers and operating
//! systems, over UDP, TCP, DNS over TLS, DNS over HTTPS and DNS over QUIC.

#![forbid(unsafe_code)]

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use pqdns_core::dnssec::validate::PqPolicy;
use pqdns_core::dnssec::{Profile, SecAlg};
use pqdns_core::frag::edns::Fragmentation;
use pqdns_core::stdout;
use pqdns_core::Name;
use pqdns_net::acl::{AllowList, IpPrefix};
use pqdns_net::cookie::{self, CookieMode};
use pqdns_net::manual::{self, DaemonArgs};
use pqdns_net::rrl;
use pqdns_net::systemd;
use pqdns_net::tls::{CertAlgorithm, KxPolicy};
use pqdns_net::{ListenConfig, Listeners};
use pqdns_resolver::anchor_update::{retry_interval, StateFile};
use pqdns_resolver::fragment::FragConfig;
use pqdns_resolver::policy::forward::Upstream;
use pqdns_resolver::policy::PolicySource;
use pqdns_resolver::service::{RecursiveService, ServiceConfig};
use pqdns_resolver::{
    cache, root_hints, Client, Config, Mode, Resolver, TlsOptions, Transport, TrustAnchors,
};
use tracing::{error, info, warn};

/// Root hints and root trust anchor of Debian's dns-root-data package, used when neither
/// --forward nor --root-hints (or --trust-anchor) is given.
const SYSTEM_ROOT_HINTS: &str = "/usr/share/dns/root.hints";
const SYSTEM_ROOT_KEY: &str = "/usr/share/dns/root.key";

/// Validating recursive resolver for classical and post-quantum DNSSEC.
///
/// It answers stubs on UDP, TCP, DNS over TLS (RFC 7858), DNS over HTTPS (RFC 8484) and DNS
/// over QUIC (RFC 9250), with the listeners, TLS policies and limits of pqdns-server. It
/// resolves iteratively from root hints (fetching large UDP answers as ARRF or QBF fragments
/// where the authority offers them, else over TCP), or forwards to upstream resolvers over
/// UDP/TCP, DoT or DoH, and validates every answer from the trust anchors (all algorithms of
/// pqdns-core, post-quantum ones included):
///
///   Secure data gets AD when the query has DO or AD; Bogus data is SERVFAIL with an
///   Extended DNS Error (RFC 8914) giving the reason; CD=1 returns the data unvalidated;
///   DO=1 adds the RRSIGs and denial proofs.
///
/// Answers are cached (positive and negative, RFC 2308) within --cache-size. Only addresses
/// in --allow may query (default: loopback), or as the [[access-control]] tables say. Each resolution is bounded in queries, referrals
/// and glueless NS names; each client address in resolutions in flight.
///
/// Against reflection, as pqdns-server: every response to a query with a DNS cookie carries
/// a server cookie; over UDP, clients without a valid one get at most --amplification-limit
/// times their query's size (else TC=1) and at most --rrl-rate responses per second per
/// network.
///
/// Policy (in the --config file, beside the options): [[forward-zone]] (name, upstreams,
/// pq-only, insecure), [[stub-zone]] (name, servers, insecure), [[local-zone]] (name, type =
/// static | refuse | nxdomain | redirect, records; answered with AA, never AD),
/// [[access-control]] (prefix, action = allow | allow-snoop | refuse | deny),
/// [[domain-insecure]] (name) and [[negative-trust-anchor]] (name, until); see the guide's
/// resolver configuration page.
///
/// Signals: SIGHUP re-reads the TLS certificate and key and the policy tables of --config
/// (a file with an error is refused, naming file and line, and the policy in use stays; the
/// caches and connections stay, but a change of insecure domains or negative trust anchors
/// empties the answer cache); SIGINT and SIGTERM shut down gracefully.
#[derive(Debug, Parser)]
#[command(name = "pqdns-resolver", version, verbatim_doc_comment)]
struct Cli {
    /// Configuration file (TOML) whose keys are the long options below, e.g.
    /// `udp = ["192.0.2.53:53"]`, `root-hints = "root.hints"` (relative paths are relative to
    /// the file), `require-pq = true`, and the policy tables: forward zones (`[[forward-zone]]`
    /// name = "corp.example.", upstreams = ["tls://192.0.2.1:853#dns.corp.example"] with
    /// udp://, tcp://, tls://, https://IP/dns-query or quic:// and #NAME the TLS name,
    /// pq-only = true), stub zones (`[[stub-zone]]` name, servers = ["IP[:PORT]"]: iterate
    /// from them), local
    /// zones (`[[local-zone]]` name, type = "static" | "refuse" | "nxdomain" | "redirect",
    /// records = ["nas.home.arpa. 3600 IN A 192.0.2.7"]) and access control
    /// (`[[access-control]]` prefix = "10.0.0.0/8", action = "allow" | "allow-snoop" |
    /// "refuse" | "deny"; the longest prefix decides; excludes --allow), insecure domains
    /// (`[[domain-insecure]]` name = "lab.example.", or insecure = true on a forward or stub
    /// zone: the zones at and below it are Insecure, never validated, as unbound's
    /// domain-insecure) and negative trust anchors (`[[negative-trust-anchor]]` name =
    /// "broken.example.", until = 2026-11-27T12:00:00Z: an offset date-time at most a week
    /// ahead; Insecure until then, RFC 7646; removed and logged when it passes). An option
    /// given on the command line wins over the file's; SIGHUP re-reads the tables (options
    /// need a restart). Installed from the package: /etc/pqdns/pqdns-resolver.toml.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// UDP listen address. Repeatable. [default: 127.0.0.1:5300]
    #[arg(long, value_name = "ADDR")]
    udp: Vec<SocketAddr>,

    /// TCP listen address (RFC 7766: pipelining, out-of-order answers, idle timeout as
    /// --tcp-idle-timeout).
    /// Repeatable. [default: 127.0.0.1:5300]
    #[arg(long, value_name = "ADDR")]
    tcp: Vec<SocketAddr>,

    /// DNS-over-TLS listen address (ALPN "dot"). Repeatable. [default: 127.0.0.1:8530]
    #[arg(long, value_name = "ADDR")]
    dot: Vec<SocketAddr>,

    /// DNS-over-HTTPS listen address (path /dns-query; GET and POST; HTTP/1.1 and HTTP/2).
    /// Repeatable. [default: 127.0.0.1:4430]
    #[arg(long, value_name = "ADDR")]
    doh: Vec<SocketAddr>,

    /// DNS-over-QUIC listen address (UDP, ALPN "doq"). Repeatable. [default: none]
    #[arg(long, value_name = "ADDR")]
    doq: Vec<SocketAddr>,

    /// TLS key exchange policy for DoT, DoH and DoQ: "hybrid-preferred" (X25519MLKEM768 first,
    /// then classical groups), "pq-only" (hybrid ML-KEM groups only) or "pq-strict" (pq-only
    /// and an ML-DSA certificate). [default: hybrid-preferred]
    #[arg(long, value_name = "POLICY", default_value = "hybrid-preferred")]
    tls_policy: KxPolicy,

    /// Key algorithm of the self-signed certificate: ECDSA-P256, Ed25519, ML-DSA-44,
    /// ML-DSA-65 or ML-DSA-87. [default: ECDSA-P256, or ML-DSA-44 under pq-strict]
    #[arg(long, value_name = "ALGORITHM")]
    tls_cert_algorithm: Option<CertAlgorithm>,

    /// Certificate chain (PEM) for DoT/DoH/DoQ; with --tls-key. Without them a self-signed
    /// certificate is made and kept in --tls-dir.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,

    /// Private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,

    /// Directory of the self-signed certificate (pqdns-server.crt) and its key (mode 0600).
    #[arg(long, value_name = "DIR", default_value = "resolver-tls")]
    tls_dir: PathBuf,

    /// DNS name or IP address the self-signed certificate covers besides localhost, the
    /// loopback addresses and the listen addresses. Repeatable.
    #[arg(long, value_name = "NAME")]
    tls_name: Vec<String>,

    /// Resolve iteratively from the root servers in FILE (IANA's named.root format).
    /// [default: /usr/share/dns/root.hints when no --forward is given]
    #[arg(long, value_name = "FILE", conflicts_with = "forward")]
    root_hints: Option<PathBuf>,

    /// Port of the authorities in iterative mode (root hints and glue addresses).
    #[arg(long, value_name = "PORT", default_value_t = 53)]
    authority_port: u16,

    /// Forward every query (outside forward and stub zones) to an upstream resolver instead
    /// of iterating: IP[:PORT] (UDP, TCP when truncated), tcp://IP[:PORT],
    /// tls://IP[:PORT][#NAME] (DoT), https://IP[:PORT]/dns-query[#NAME] (DoH, HTTP/2) or
    /// quic://IP[:PORT][#NAME] (DoQ). Repeatable (all with one scheme; tried in order).
    #[arg(long, value_name = "URL")]
    forward: Vec<String>,

    /// PEM file of CA certificates (or the upstream's self-signed certificate) that DoT/DoH
    /// forwarders must chain to. Repeatable. [default: the system's CA store]
    #[arg(long, value_name = "FILE")]
    forward_ca: Vec<PathBuf>,

    /// TLS server name to verify for DoT/DoH forwarders. [default: their IP address]
    #[arg(long, value_name = "NAME")]
    forward_tls_name: Option<String>,

    /// Refuse TLS handshakes with forwarders that do not negotiate a hybrid post-quantum group.
    #[arg(long)]
    forward_pq_only: bool,

    /// Trust anchor file: DS or DNSKEY records (the root.key format). Repeatable.
    /// [default: /usr/share/dns/root.key]
    #[arg(long, value_name = "FILE")]
    trust_anchor: Vec<PathBuf>,

    /// Automated updates of the trust anchors (RFC 5011), with the state of every key kept in
    /// FILE (created if absent, written atomically; the service user must be able to write
    /// its directory): each anchored zone's DNSKEY RRset is fetched again every
    /// max(1 hour, min(15 days, TTL/2)); a new SEP key signed by a trusted key becomes an
    /// anchor after 30 days of hold-down, a key published with the REVOKE bit and signing the
    /// RRset is dropped. Once FILE holds a zone, it, not --trust-anchor, is that zone's
    /// anchor. [default: off]
    #[arg(long, value_name = "FILE")]
    trust_anchor_state: Option<PathBuf>,

    /// Algorithm-number profile: default, oqs-bind or verisign.
    #[arg(long, default_value = "default")]
    profile: String,
    /// Treat a DNSSEC algorithm (number or mnemonic, e.g. RSASHA1) as unsupported: zones
    /// signed only with it are Insecure (repeatable). By default RSASHA1 and
    /// RSASHA1-NSEC3-SHA1 are validated, as RFC 8624 §3.1 requires.
    #[arg(long, value_name = "ALGORITHM")]
    disable_algorithm: Vec<String>,

    /// Secure only if every link of the chain is post-quantum (the anchor's DS and every
    /// RRset's verified signature); otherwise Bogus, naming the classical link.
    #[arg(long)]
    require_pq: bool,

    /// Turn off downgrade protection by DS. With it on (the default), when a zone's
    /// authenticated DS RRset (or the trust anchor) names a post-quantum algorithm the
    /// validator supports (ML-DSA-44 = 18, or a post-quantum number of the --profile), the
    /// zone's DNSKEY RRset and every RRset signed with its keys (its data, denial proofs and
    /// its children's DS RRsets) must carry a verified RRSIG of such an algorithm, else Bogus
    /// (SERVFAIL, EDE 10 "RRSIGs Missing" naming the DS); each child's DS RRset decides
    /// afresh for the child. Off: any supported algorithm is enough (RFC 6840 §5.11).
    /// --require-pq is stricter still: post-quantum at every link from the anchor.
    #[arg(long)]
    no_ds_downgrade_protection: bool,

    /// Client address or CIDR prefix allowed to query. Repeatable; others get REFUSED.
    /// [default: 127.0.0.0/8 and ::1]
    #[arg(long, value_name = "PREFIX")]
    allow: Vec<IpPrefix>,

    /// Memory for cached answers, MiB: three quarters for prepared responses to clients, one
    /// quarter for the servers' raw responses the validator works from.
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    cache_size: usize,

    /// Shortest time an answer stays cached, seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    cache_min_ttl: u32,

    /// Longest time an answer stays cached and largest TTL served, seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 86_400)]
    cache_max_ttl: u32,

    /// Serve-stale (RFC 8767): how long past its TTL a validated answer (Secure or Insecure,
    /// never Bogus or unvalidated) may still be sent when the authorities give no fresh one
    /// within 1.8 s or fail: with TTL 30 s and EDE 3 (Stale Answer). At most 259200 (3 days);
    /// 0 turns serve-stale off.
    #[arg(long, value_name = "SECONDS", default_value_t = pqdns_resolver::service::stale::DEFAULT_MAX_STALE,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(pqdns_resolver::service::stale::MAX_MAX_STALE)))]
    serve_stale_max: u32,

    /// Prefetch (as unbound's `prefetch: yes`): a cached answer asked for when less than 10 %
    /// of its TTL is left is sent at once and refreshed from the authorities in the
    /// background (at most 16 refreshes at once), so popular names do not drop out of the
    /// cache. Off by default, as in unbound.
    #[arg(long)]
    prefetch: bool,

    /// Aggressive use of DNSSEC-validated cache (RFC 8198): memory, MiB, for the verified
    /// NSEC/NSEC3 records of Secure negative and wildcard answers, from which NXDOMAIN and
    /// NODATA for other names they cover are answered without asking the authorities (never
    /// from NSEC3 opt-out spans). 0 turns it off.
    #[arg(long, value_name = "MIB", default_value_t = pqdns_resolver::DEFAULT_AGGRESSIVE_NSEC_BYTES >> 20)]
    aggressive_nsec_size: usize,

    /// Send authorities the whole QNAME and QTYPE at every level of the iteration: turns QNAME
    /// minimisation (RFC 9156, relaxed mode: at each zone only the next label, with QTYPE A;
    /// a minimised query that fails is sent again in full) off.
    #[arg(long)]
    no_qname_minimisation: bool,

    /// Negative trust anchor (RFC 7646): names at and below DOMAIN are not validated but
    /// treated as unsigned (Insecure: answers without AD, never SERVFAIL for a broken
    /// signature) until --nta-lifetime has passed. Repeatable.
    #[arg(long, value_name = "DOMAIN")]
    nta: Vec<Name>,

    /// How long the --nta domains stay negative trust anchors, seconds from start (RFC 7646
    /// §8: they expire). At most 604800 (one week). To add and remove negative trust anchors
    /// while running: [[negative-trust-anchor]] tables in --config and SIGHUP.
    #[arg(long, value_name = "SECONDS", default_value_t = pqdns_resolver::nta::DEFAULT_LIFETIME,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(pqdns_resolver::nta::MAX_LIFETIME)))]
    nta_lifetime: u32,

    /// Connections open at once per stream listener (TCP, DoT, DoH each); at the cap the
    /// longest-idle connection is closed for a new one, or the new one refused when none is
    /// idle.
    #[arg(long, value_name = "N", default_value_t = pqdns_net::DEFAULT_MAX_CONNECTIONS as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,

    /// Connections open at once per client network (/24 for IPv4, /56 for IPv6) and stream
    /// listener.
    #[arg(long, value_name = "N", default_value_t = pqdns_net::DEFAULT_MAX_CONNECTIONS_PER_IP as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_connections_per_ip: u32,

    /// Seconds a TCP, DoT or DoH connection may sit idle before it is closed (RFC 7766
    /// §6.2.3).
    #[arg(long, value_name = "SECONDS", default_value_t = pqdns_net::DEFAULT_IDLE_TIMEOUT_SECS,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    tcp_idle_timeout: u64,

    /// Resolutions in flight per client network (/24 for IPv4, /56 for IPv6); more get
    /// SERVFAIL at once.
    #[arg(long, value_name = "N", default_value_t = 64)]
    max_per_client: usize,

    /// Resolutions in flight in all (each holds at most some 4 MiB of responses); more get
    /// SERVFAIL at once.
    #[arg(long, value_name = "N", default_value_t = 256)]
    max_in_flight: usize,

    /// DNS cookies (RFC 7873, RFC 9018 server cookies): "on" answers every COOKIE option
    /// with a server cookie (FORMERR for a malformed one), and a valid server cookie exempts
    /// its client from the UDP limits below; "off" ignores COOKIE options.
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = parse_cookie_mode)]
    cookies: CookieMode,

    /// Server cookie secret shared by the servers of an anycast set: 32 hex digits (16
    /// bytes). [default: random, replaced daily]
    #[arg(long, value_name = "HEX", value_parser = cookie::parse_secret)]
    cookie_secret: Option<[u8; cookie::SECRET_LEN]>,

    /// UDP responses per second per client network (/24, /56) and kind (NOERROR, NXDOMAIN,
    /// errors) to clients without a valid server cookie; beyond it every second response is
    /// sent truncated (TC=1), the others dropped. 0 turns response-rate limiting off.
    #[arg(long, value_name = "N", default_value_t = rrl::DEFAULT_RATE)]
    rrl_rate: u32,

    /// Largest UDP response to a client without a valid server cookie, as a multiple of its
    /// query's size; a larger one is sent truncated (TC=1, with our server cookie) so the
    /// client retries with the cookie or over TCP. 0 turns the limit off.
    #[arg(long, value_name = "FACTOR", default_value_t = rrl::DEFAULT_AMPLIFICATION_LIMIT)]
    amplification_limit: u32,

    /// UDP fragmentation offered to authorities: "arrf", "qbf" or "off" (TC → TCP only).
    #[arg(long, value_name = "MODE", default_value = "arrf")]
    fragmentation: Fragmentation,

    /// Worker threads of the runtime that serves TCP, DoT, DoH and DoQ and runs resolutions
    /// (as unbound's `num-threads`; UDP cache hits are answered on one serving thread per UDP
    /// address besides them). [default: the available cores]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,

    /// Timeout of one exchange with an authority or forwarder, seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 3)]
    timeout: u64,

    /// Serve Prometheus counters at http://ADDR/metrics: responses by transport and RCODE,
    /// cache hits, validation outcomes by DNSSEC algorithm, upstream round-trip times, TLS
    /// handshakes by key exchange group. [default: off]
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,

    /// dnstap (the Frame Streams format of NSD, Knot, BIND and unbound): every client query
    /// and its response, as CLIENT_QUERY and CLIENT_RESPONSE, and every query to an authority
    /// or forwarder and its answer, as RESOLVER_QUERY and RESOLVER_RESPONSE, to this file
    /// (created afresh) or to a collector's socket as unix:PATH. Off the answering path:
    /// bounded buffers; what does not fit is dropped and counted in the log at shutdown.
    /// [default: off]
    #[arg(long, value_name = "FILE|unix:PATH")]
    dnstap: Option<pqdns_net::dnstap::Sink>,

    #[command(flatten)]
    daemon: DaemonArgs,

    /// Check the command line and exit, like unbound-checkconf: root hints, trust anchors,
    /// forwarders, CA files, the TLS certificate and key, and the user. Binds nothing and
    /// writes nothing; exit status 0 when all is well, 1 otherwise.
    #[arg(long)]
    check: bool,
}

fn main() -> ExitCode {
    let cli: Cli =
        pqdns_net::option_file::parse_beside_tables("config", pqdns_resolver::policy::TABLES);
    let command = <Cli as clap::CommandFactory>::command;
    if let Some(code) = manual::start(&cli.daemon, command) {
        return code;
    }
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = cli.threads {
        runtime.worker_threads(usize::from(threads));
    }
    let runtime = match runtime.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            error!("starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    if cli.check {
        let checked = runtime.block_on(async { check(&cli) });
        runtime.shutdown_background();
        return match checked {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("error: {message}");
                ExitCode::FAILURE
            }
        };
    }
    let result = setup(&cli).and_then(|(service, listen, policy)| {
        runtime.block_on(serve(
            service,
            listen,
            policy,
            cli.metrics,
            cli.daemon.user.as_ref(),
        ))
    });
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            error!("{message}");
            ExitCode::FAILURE
        }
    }
}

/// `--cookies`: "on" or "off" (the service never demands cookies).
fn parse_cookie_mode(text: &str) -> Result<CookieMode, String> {
    match text {
        "on" => Ok(CookieMode::On),
        "off" => Ok(CookieMode::Off),
        _ => Err(format!("{text:?}: use \"on\" or \"off\"")),
    }
}

/// A file given explicitly, else the system default if it exists.
fn or_system(given: Vec<PathBuf>, system: &str, what: &str) -> Result<Vec<PathBuf>, String> {
    if !given.is_empty() {
        return Ok(given);
    }
    if Path::new(system).exists() {
        return Ok(vec![PathBuf::from(system)]);
    }
    Err(format!(
        "no {what} given and {system} does not exist (apt-get install dns-root-data)"
    ))
}

type Setup = (Arc<RecursiveService>, ListenConfig, Option<PolicySource>);

fn setup(cli: &Cli) -> Result<Setup, String> {
    let mut forward_tls_name = cli.forward_tls_name.clone();
    let (mode, transport) = if cli.forward.is_empty() {
        let hints = match &cli.root_hints {
            Some(p) => p.clone(),
            None => {
                or_system(Vec::new(), SYSTEM_ROOT_HINTS, "--forward or --root-hints")?.remove(0)
            }
        };
        let roots = root_hints::read(&hints).map_err(|e| e.to_string())?;
        let roots = roots
            .into_iter()
            .map(|ip: IpAddr| SocketAddr::new(ip, cli.authority_port))
            .collect();
        info!(file = %hints.display(), "iterative resolution from the root hints");
        let mode = Mode::Iterative {
            roots,
            port: cli.authority_port,
        };
        (mode, Transport::Udp)
    } else {
        let upstreams = cli
            .forward
            .iter()
            .map(|f| f.parse::<Upstream>().map_err(|e| format!("--forward {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let first = upstreams[0].clone();
        if upstreams
            .iter()
            .any(|u| u.transport != first.transport || u.tls_name != first.tls_name)
        {
            return Err("--forward: all forwarders must use one scheme and TLS name".into());
        }
        if forward_tls_name.is_none() {
            forward_tls_name = first.tls_name;
        }
        let addrs = upstreams.into_iter().map(|u| u.addr).collect();
        (Mode::ForwardAny(addrs), first.transport)
    };
    let mut anchors = TrustAnchors::default();
    for file in or_system(cli.trust_anchor.clone(), SYSTEM_ROOT_KEY, "--trust-anchor")? {
        anchors.extend(TrustAnchors::read(&file).map_err(|e| e.to_string())?);
    }
    let mut tls = TlsOptions::default();
    tls.pq_only = cli.forward_pq_only;
    tls.ca_files = cli.forward_ca.clone();
    tls.server_name = forward_tls_name;
    // Opened only to serve: --check writes nothing.
    let dnstap = match (&cli.dnstap, cli.check) {
        (Some(sink), false) => Some(Arc::new(
            pqdns_net::dnstap::Dnstap::open(
                sink.clone(),
                "pqdns-resolver",
                concat!("pqdns-resolver ", env!("CARGO_PKG_VERSION")),
                pqdns_net::dnstap::DEFAULT_QUEUE,
            )
            .map_err(|e| e.to_string())?,
        )),
        _ => None,
    };
    let mut client =
        Client::new(transport, Duration::from_secs(cli.timeout), tls).map_err(|e| e.to_string())?;
    client.set_dnstap(dnstap.clone());
    if transport == Transport::Udp {
        client.set_fragmentation(FragConfig::new(cli.fragmentation));
    }
    let cache_bytes = cli.cache_size.saturating_mul(1 << 20);
    let mut profile = Profile::named(&cli.profile).map_err(|e| format!("--profile: {e}"))?;
    for alg in &cli.disable_algorithm {
        let number = SecAlg::parse(alg)
            .ok_or_else(|| format!("--disable-algorithm: unknown algorithm {alg:?}"))?;
        profile = profile.without(number);
    }
    let mut config = Config::new(mode, anchors);
    config.profile = profile;
    config.pq_policy = if cli.require_pq {
        PqPolicy::RequirePq
    } else {
        PqPolicy::AnyAlgorithm
    };
    config.anchor_state = match &cli.trust_anchor_state {
        Some(path) => Some(StateFile::open(path).map_err(|e| e.to_string())?),
        None => None,
    };
    config.ds_downgrade_protection = !cli.no_ds_downgrade_protection;
    config.cache = cache::Limits::new(cache_bytes / 4, cli.cache_max_ttl);
    config.aggressive_nsec_bytes = cli.aggressive_nsec_size.saturating_mul(1 << 20);
    config.qname_minimisation = !cli.no_qname_minimisation;
    let nta_until = pqdns_core::time::now() + u64::from(cli.nta_lifetime);
    for domain in &cli.nta {
        config.negative_trust_anchors.add(domain.clone(), nta_until);
    }
    let resolver = Resolver::new(config, client);
    let mut service = ServiceConfig::default();
    if !cli.allow.is_empty() {
        service.allow = AllowList::new(cli.allow.clone());
    }
    let policy = cli.config.as_ref().map(|path| {
        PolicySource::new(path.clone(), service.allow.clone(), !cli.allow.is_empty())
            .with_upstreams(
                Duration::from_secs(cli.timeout),
                cli.forward_ca.clone(),
                dnstap.clone(),
            )
    });
    let loaded = match &policy {
        Some(source) => Some(source.load().map_err(|e| e.to_string())?),
        None => None,
    };
    service.cache.bytes = cache_bytes - cache_bytes / 4;
    service.cache.min_ttl = cli.cache_min_ttl;
    service.cache.max_ttl = cli.cache_max_ttl;
    service.cache.max_stale = cli.serve_stale_max;
    service.max_per_client = cli.max_per_client.max(1);
    service.max_in_flight = cli.max_in_flight.max(1);
    service.cookies = cli.cookies;
    service.cookie_secret = cli.cookie_secret;
    service.rrl.rate = cli.rrl_rate;
    service.amplification_limit = cli.amplification_limit;
    service.prefetch = cli.prefetch;
    let service = Arc::new(RecursiveService::new(resolver, service).with_dnstap(dnstap));
    if let Some(loaded) = loaded {
        service.install_policy(loaded);
    }

    let mut listen = ListenConfig::new(cli.tls_dir.clone());
    let pick = |given: &[SocketAddr], default: &str| {
        if given.is_empty() {
            vec![default.parse().expect("a valid default address")]
        } else {
            given.to_vec()
        }
    };
    listen.udp = pick(&cli.udp, "127.0.0.1:5300");
    listen.tcp = pick(&cli.tcp, "127.0.0.1:5300");
    listen.dot = pick(&cli.dot, "127.0.0.1:8530");
    listen.doh = pick(&cli.doh, "127.0.0.1:4430");
    listen.doq.clone_from(&cli.doq);
    listen.max_connections = cli.max_connections as usize;
    listen.max_connections_per_ip = cli.max_connections_per_ip as usize;
    listen.idle_timeout = Duration::from_secs(cli.tcp_idle_timeout);
    listen.tls.policy = cli.tls_policy;
    listen.tls.certificate_algorithm = cli.tls_cert_algorithm;
    listen.tls.names.clone_from(&cli.tls_name);
    if let (Some(cert), Some(key)) = (&cli.tls_cert, &cli.tls_key) {
        listen.tls.cert_and_key = Some((cert.clone(), key.clone()));
    }
    Ok((service, listen, policy))
}

/// `--check`: everything [`setup`] reads (root hints, trust anchors, forwarders, CA files),
/// the TLS certificate and key if given, and the user to run as; binds and writes nothing.
fn check(cli: &Cli) -> Result<(), String> {
    let (_, listen, _) = setup(cli)?;
    if let Some(cert) = pqdns_net::tls::check_files(&listen.tls).map_err(|e| e.to_string())? {
        print(format_args!(
            "tls certificate {} {}",
            cert.cert_path.display(),
            cert.algorithm
        ));
    }
    if let Some(account) = &cli.daemon.user {
        pqdns_net::privilege::look_up(account).map_err(|e| format!("--user: {e}"))?;
    }
    print(format_args!("configuration ok"));
    Ok(())
}

/// Prints one line on standard output, or logs it if standard output is closed.
fn print(args: std::fmt::Arguments<'_>) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    if let Err(e) = stdout::line(args) {
        WARNED.call_once(|| warn!("{e}; printing to the log instead"));
        info!("{args}");
    }
}

/// Starts the active refresh (RFC 5011 §2.3) of every anchored zone under automated updates,
/// each in a task of its own that lives as long as the runtime.
fn refresh_trust_anchors(resolver: &Resolver) {
    for zone in resolver.managed_zones() {
        let resolver = resolver.clone();
        tokio::spawn(async move {
            let mut original_ttl = 0;
            loop {
                let now = pqdns_core::time::now();
                let wait = match resolver.refresh_trust_anchor(&zone, now).await {
                    Ok(refresh) => {
                        original_ttl = refresh.original_ttl;
                        refresh.next
                    }
                    Err(e) => {
                        warn!(%zone, error = %e, "trust anchor refresh (RFC 5011)");
                        retry_interval(original_ttl, u64::MAX)
                    }
                };
                tokio::time::sleep(Duration::from_secs(wait)).await;
            }
        });
    }
}

/// Removes the negative trust anchors (of --nta and of the --config file) as they expire
/// (RFC 7646 §8), logging each, and then empties the answer cache: answers made Insecure by
/// an anchor must not outlive it. `reloaded` wakes it when a reload may have brought new
/// anchors; otherwise it sleeps until the next expiry.
async fn expire_negative_trust_anchors(
    service: Arc<RecursiveService>,
    reloaded: Arc<tokio::sync::Notify>,
) {
    loop {
        let now = pqdns_core::time::now();
        let resolver = service.resolver();
        if !resolver.expire_negative_trust_anchors(now).is_empty() {
            service.cache().clear();
        }
        // Without any, a reload is what brings one (an anchor of a file read meanwhile may
        // have ended already: at once).
        let wait = resolver
            .next_negative_trust_anchor_expiry()
            .map_or(u64::from(pqdns_resolver::nta::MAX_LIFETIME), |at| {
                at.saturating_sub(now)
            });
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(wait)) => {}
            () = reloaded.notified() => {}
        }
    }
}

/// Binds, prints the listening addresses and serves until SIGINT or SIGTERM; on SIGHUP
/// re-reads the certificate and the `policy` tables.
async fn serve(
    service: Arc<RecursiveService>,
    listen: ListenConfig,
    policy: Option<PolicySource>,
    metrics: Option<SocketAddr>,
    user: Option<&pqdns_net::privilege::Account>,
) -> Result<(), String> {
    use tokio::signal::unix::{signal, SignalKind};
    let dnstap = service.dnstap().cloned();
    let install = |kind| signal(kind).map_err(|e| format!("installing signal handler: {e}"));
    let (mut hup, mut term, mut int) = (
        install(SignalKind::hangup())?,
        install(SignalKind::terminate())?,
        install(SignalKind::interrupt())?,
    );
    let metrics_listener = match metrics {
        Some(addr) => {
            Some(pqdns_net::listen_tcp(addr).map_err(|e| format!("binding metrics {addr}: {e}"))?)
        }
        None => None,
    };
    let listeners = Listeners::bind(&listen, Arc::clone(&service))
        .await
        .map_err(|e| e.to_string())?;
    refresh_trust_anchors(service.resolver());
    let reloaded = Arc::new(tokio::sync::Notify::new());
    tokio::spawn(expire_negative_trust_anchors(
        Arc::clone(&service),
        Arc::clone(&reloaded),
    ));
    let metrics_addr = metrics_listener.as_ref().and_then(|l| l.local_addr().ok());
    let bound: Vec<SocketAddr> = listeners.addrs.all().chain(metrics_addr).collect();
    pqdns_net::privilege::drop_after_bind(user, &listen.tls.generated_cert_dir, &bound)
        .map_err(|e| format!("dropping privileges: {e}"))?;
    if let Some(every) = systemd::watchdog_interval() {
        tokio::spawn(systemd::watchdog(every));
    }
    let a = &listeners.addrs;
    for (kind, addrs) in [
        ("udp", &a.udp),
        ("tcp", &a.tcp),
        ("dot", &a.dot),
        ("doq", &a.doq),
    ] {
        for addr in addrs {
            print(format_args!("listening {kind} {addr}"));
        }
    }
    for addr in &a.doh {
        print(format_args!(
            "listening doh https://{addr}{}",
            listen.doh_path
        ));
    }
    if let Some(l) = metrics_listener {
        let addr = l.local_addr().map_err(|e| e.to_string())?;
        let metered = Arc::clone(&service);
        let render = move || Some(metered.render_metrics());
        tokio::spawn(pqdns_net::metrics_http::serve(
            l,
            Arc::new(render),
            listen.idle_timeout,
            listeners.shutdown_signal(),
        ));
        print(format_args!("listening metrics http://{addr}/metrics"));
    }
    if let Some(cert) = listeners.certificate() {
        print(format_args!(
            "tls certificate {} {} sha256 {}",
            cert.cert_path.display(),
            cert.algorithm,
            cert.fingerprint
        ));
    }
    systemd::ready("resolving");
    loop {
        tokio::select! {
            _ = hup.recv() => {
                systemd::reloading();
                match listeners.reload_tls() {
                    Ok(_) => info!("SIGHUP: TLS certificate re-read"),
                    Err(e) => warn!("SIGHUP: keeping the TLS certificate in use: {e}"),
                }
                if let Some(source) = &policy {
                    match source.load() {
                        Ok(p) => {
                            service.install_policy(p);
                            reloaded.notify_one();
                            info!(file = %source.path().display(), "SIGHUP: policy reloaded");
                        }
                        Err(e) => warn!("SIGHUP: keeping the policy in use: {e}"),
                    }
                }
                systemd::ready("resolving");
            }
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    info!("shutting down");
    systemd::stopping();
    listeners.shutdown().await;
    if let Some(tap) = dnstap {
        tap.close();
        info!(sink = %tap.sink(), dropped = tap.dropped(), "dnstap closed");
    }
    Ok(())
}
