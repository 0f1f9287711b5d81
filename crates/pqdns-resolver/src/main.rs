//! `pqdns-resolve`: a dig-like validating client.
//!
//! `pqdns-resolve --dot example.com` asks the local pqdns-server over DNS-over-TLS and
//! validates the answer with the DS records the server wrote to `zones/keys/`.

#![forbid(unsafe_code)]

use std::io::IsTerminal;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use pqdns_core::dnssec::validate::{PqPolicy, Status};
use pqdns_core::dnssec::Profile;
use pqdns_core::frag::edns::Fragmentation;
use pqdns_core::{outln, stdout, Name, RrType};
use pqdns_resolver::fragment::FragConfig;
use pqdns_resolver::{Client, Config, Mode, Resolver, TlsOptions, Transport, TrustAnchors};
use serde::Serialize;

/// Resolve a name and validate its DNSSEC chain of trust (classical and post-quantum).
///
/// Arguments are dig-like: `pqdns-resolve [--udp|--tcp|--dot|--doh] [@SERVER[:PORT]] NAME [TYPE]`.
/// Without @SERVER the local pqdns-server (127.0.0.1, default port of the transport) is asked.
/// Exit status: 0 Secure/Insecure/Indeterminate, 1 Bogus, 2 error.
#[derive(Parser)]
#[command(name = "pqdns-resolve", version, about, long_about = None)]
struct Cli {
    /// `@SERVER[:PORT]`, NAME and TYPE (default A), in any order as dig takes them.
    #[arg(required = true, num_args = 1..=3)]
    args: Vec<String>,
    /// Plain UDP (retried over TCP when truncated). The default.
    #[arg(long, group = "transport")]
    udp: bool,
    /// TCP.
    #[arg(long, group = "transport")]
    tcp: bool,
    /// DNS-over-TLS (RFC 7858).
    #[arg(long, group = "transport")]
    dot: bool,
    /// DNS-over-HTTPS (RFC 8484, POST, HTTP/2).
    #[arg(long, group = "transport")]
    doh: bool,
    /// Trust anchor file (DS or DNSKEY records). Default: the DS files pqdns-server writes to
    /// zones/keys/*.ds, if present.
    #[arg(long)]
    trust_anchor: Vec<PathBuf>,
    /// Algorithm-number profile: default, oqs-bind or verisign.
    #[arg(long, default_value = "default")]
    profile: String,
    /// Refuse TLS handshakes that do not negotiate a hybrid post-quantum group.
    #[arg(long)]
    pq_only: bool,
    /// Bogus unless post-quantum signatures validate wherever the chain offers a post-quantum
    /// algorithm (departs from RFC 6840 §5.11 to prevent classical downgrade).
    #[arg(long)]
    require_pq: bool,
    /// Skip TLS certificate verification (self-signed test servers).
    #[arg(long)]
    insecure_tls: bool,
    /// PEM file of certificates to trust for DoT/DoH. Default: the self-signed certificate the
    /// local pqdns-server writes, zones/keys/pqdns-server.crt, if present; else the system's
    /// CA store.
    #[arg(long)]
    tls_ca: Option<PathBuf>,
    /// Iterate from these root servers instead of asking one server (repeatable).
    #[arg(long = "root")]
    roots: Vec<SocketAddr>,
    /// Port of servers learned from glue in iterative mode.
    #[arg(long, default_value_t = 53)]
    glue_port: u16,
    /// Validate as if the time were this (UNIX seconds).
    #[arg(long)]
    at: Option<u64>,
    /// UDP fragmentation to offer (EDNS option 65108): "arrf" (RRFRAG records), "qbf" (?n?
    /// fragment queries) or "off". A server that supports the scheme answers large responses
    /// in fragments fetched in parallel; otherwise, or when fragments are lost, the query is
    /// retried over TCP as usual.
    #[arg(long, value_name = "MODE", default_value = "arrf")]
    fragmentation: Fragmentation,
    /// Per-exchange timeout, seconds.
    #[arg(long, default_value_t = 3)]
    timeout: u64,
    /// Print the chain of trust walked.
    #[arg(long)]
    trace: bool,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct JsonOut {
    status: String,
    reason: Option<String>,
    ede: Option<u16>,
    rcode: u16,
    answer: Vec<String>,
    authority: Vec<String>,
    chain: Vec<String>,
    exchanges: usize,
    bytes_sent: usize,
    bytes_received: usize,
    milliseconds: f64,
    tls_group: Option<String>,
    tls_cipher: Option<String>,
}

fn parse_args(
    cli: &Cli,
    transport: Transport,
) -> Result<(Option<SocketAddr>, Name, RrType), String> {
    let mut server = None;
    let mut name = None;
    let mut rtype = None;
    for a in &cli.args {
        if let Some(s) = a.strip_prefix('@') {
            let addr = s
                .parse::<SocketAddr>()
                .or_else(|_| {
                    s.parse::<IpAddr>()
                        .map(|ip| SocketAddr::new(ip, transport.default_port()))
                })
                .map_err(|_| format!("bad server {s:?}: use @IP or @IP:PORT ([v6]:PORT)"))?;
            server = Some(addr);
        } else if let (None, Some(t)) = (rtype, name.as_ref().and(RrType::from_mnemonic(a))) {
            rtype = Some(t);
        } else if name.is_none() {
            name = Some(
                Name::parse(a, Some(&Name::root())).map_err(|e| format!("bad name {a:?}: {e}"))?,
            );
        } else {
            return Err(format!("unexpected argument {a:?}"));
        }
    }
    let name = name.ok_or("give a NAME to resolve")?;
    Ok((server, name, rtype.unwrap_or(RrType::A)))
}

fn default_anchors() -> Vec<PathBuf> {
    std::fs::read_dir("zones/keys")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "ds"))
        .collect()
}

fn run(cli: Cli) -> Result<ExitCode, String> {
    let transport = if cli.tcp {
        Transport::Tcp
    } else if cli.dot {
        Transport::Dot
    } else if cli.doh {
        Transport::Doh
    } else {
        Transport::Udp
    };
    let (server, name, rtype) = parse_args(&cli, transport)?;
    let mut anchors = TrustAnchors::default();
    let files = if cli.trust_anchor.is_empty() {
        default_anchors()
    } else {
        cli.trust_anchor.clone()
    };
    for f in &files {
        anchors.extend(TrustAnchors::read(f).map_err(|e| e.to_string())?);
    }
    let mode = if cli.roots.is_empty() {
        let addr = server
            .unwrap_or_else(|| SocketAddr::new([127, 0, 0, 1].into(), transport.default_port()));
        Mode::Forward(addr)
    } else {
        Mode::Iterative {
            roots: cli.roots.clone(),
            port: cli.glue_port,
        }
    };
    let local_cert = PathBuf::from("zones/keys/pqdns-server.crt");
    let ca_file = cli
        .tls_ca
        .clone()
        .or_else(|| local_cert.exists().then_some(local_cert));
    let tls = TlsOptions {
        pq_only: cli.pq_only,
        insecure: cli.insecure_tls,
        ca_file,
        server_name: None,
    };
    let mut client =
        Client::new(transport, Duration::from_secs(cli.timeout), tls).map_err(|e| e.to_string())?;
    client.set_fragmentation(FragConfig::new(cli.fragmentation));
    let profile = Profile::named(&cli.profile).map_err(|e| e.to_string())?;
    let config = Config {
        profile,
        pq_policy: if cli.require_pq {
            PqPolicy::RequirePq
        } else {
            PqPolicy::AnyAlgorithm
        },
        now: cli.at,
        ..Config::new(mode, anchors)
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut resolver = Resolver::new(config, client);
    let answer = runtime
        .block_on(resolver.resolve(&name, rtype))
        .map_err(|e| e.to_string())?;
    let sent: usize = answer.exchanges.iter().map(|e| e.bytes_sent).sum();
    let received: usize = answer.exchanges.iter().map(|e| e.bytes_received).sum();
    let ms: f64 = answer
        .exchanges
        .iter()
        .map(|e| e.elapsed.as_secs_f64() * 1000.0)
        .sum();
    let tls_group = answer.exchanges.iter().find_map(|e| e.tls_group.clone());
    let tls_cipher = answer.exchanges.iter().find_map(|e| e.tls_cipher.clone());
    let (status, reason, ede) = match &answer.status {
        Status::Secure => ("Secure", None, None),
        Status::Insecure(r) => ("Insecure", Some(r.text.clone()), Some(r.ede)),
        Status::Bogus(r) => ("Bogus", Some(r.text.clone()), Some(r.ede)),
        Status::Indeterminate(r) => ("Indeterminate", Some(r.text.clone()), Some(r.ede)),
    };
    let render = |rs: &[pqdns_core::Record]| rs.iter().map(ToString::to_string).collect::<Vec<_>>();
    if cli.json {
        let out = JsonOut {
            status: status.into(),
            reason,
            ede,
            rcode: answer.message.rcode(),
            answer: render(&answer.message.answers),
            authority: render(&answer.message.authority),
            chain: answer.chain.clone(),
            exchanges: answer.exchanges.len(),
            bytes_sent: sent,
            bytes_received: received,
            milliseconds: ms,
            tls_group,
            tls_cipher,
        };
        outln!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?
        );
    } else {
        outln!(";; {name} {rtype}: RCODE {}", answer.message.rcode());
        for r in render(&answer.message.answers) {
            outln!("{r}");
        }
        if answer.message.answers.is_empty() {
            for r in render(&answer.message.authority) {
                outln!("{r}");
            }
        }
        match &reason {
            Some(r) => outln!(";; status: {status} ({r}, EDE {})", ede.unwrap_or(0)),
            None => outln!(";; status: {status}"),
        }
        if cli.trace {
            for step in &answer.chain {
                outln!(";; chain: {step}");
            }
        }
        if let Some(g) = &tls_group {
            outln!(
                ";; TLS: group {g}, cipher {}",
                tls_cipher.as_deref().unwrap_or("?")
            );
        }
        outln!(
            ";; {} exchange(s), {sent} bytes sent, {received} bytes received, {ms:.1} ms",
            answer.exchanges.len()
        );
    }
    Ok(if matches!(answer.status, Status::Bogus(_)) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    // A reader that closed the pipe is not a failure; a full disk under `> file` is.
    let result = run(Cli::parse())
        .and_then(|code| stdout::status().map(|()| code).map_err(|e| e.to_string()));
    result.unwrap_or_else(|e| {
        eprintln!("pqdns-resolve: {e}");
        ExitCode::from(2)
    })
}
