//! `pqdns-resolve`: a dig-like validating client.
//!
//! `pqdns-resolve --dot example.com` asks the local pqdns-server over DNS-over-TLS and
//! validates the answer with the DS records the server wrote to `zones/keys/` or `./keys/`.

#![forbid(unsafe_code)]

use std::io::IsTerminal;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use pqdns_core::dnssec::validate::PqPolicy;
use pqdns_core::dnssec::{Profile, SecAlg};
use pqdns_core::frag::edns::Fragmentation;
use pqdns_core::wire::Rcode;
use pqdns_core::{outln, stdout, Name, Record, RrType};
use pqdns_resolver::fragment::FragConfig;
use pqdns_resolver::transport::default_port;
use pqdns_resolver::{
    Answer, AnswerRRset, Client, Config, Mode, Resolver, TlsOptions, Transport, TrustAnchors,
};
use serde::Serialize;

/// Exit status: an answer (Secure, Insecure or Indeterminate).
const EXIT_ANSWER: u8 = 0;
/// Exit status: validation failed (Bogus).
const EXIT_BOGUS: u8 = 1;
/// Exit status: bad arguments or setup (unreadable trust anchor or CA file).
const EXIT_USAGE: u8 = 2;
/// Exit status: no answer (error RCODE, referral, or resolution failure).
const EXIT_NO_ANSWER: u8 = 3;

/// Directories where pqdns-server keeps keys, DS files and its self-signed certificate: with
/// `--zone zones/example.toml` (the zone's key_directory), and with no `--zone` (./keys).
const KEY_DIRS: [&str; 2] = ["zones/keys", "keys"];

/// Resolve a name and validate its DNSSEC chain of trust (classical and post-quantum).
///
/// Arguments are dig-like: `pqdns-resolve [--udp|--tcp|--dot|--doh] [@SERVER[:PORT]] NAME [TYPE]`.
/// Without @SERVER the local pqdns-server (127.0.0.1, default port of the transport) is asked.
/// Only validated data is printed as the answer; RRsets the server sent that are not part of
/// it are listed as dropped.
#[derive(Parser)]
#[command(
    name = "pqdns-resolve",
    version,
    about,
    long_about = None,
    after_help = "Exit status:\n  \
        0  an answer (positive or negative): Secure, Insecure, or Indeterminate (no trust anchor)\n  \
        1  Bogus: validation failed\n  \
        2  usage or setup error (bad arguments, unreadable trust anchor or CA file), or\n     \
        standard output could not be written (a closed pipe is not an error)\n  \
        3  no answer: error RCODE (SERVFAIL, REFUSED, ...), a referral from a server that is\n     \
        not authoritative for the name, or resolution failed (timeout, malformed response)"
)]
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
    /// DNS-over-QUIC (RFC 9250, UDP port 8853 by default, one stream per query, no 0-RTT).
    #[arg(long, group = "transport")]
    doq: bool,
    /// Trust anchor file (DS or DNSKEY records; repeatable). Default: the DS files pqdns-server
    /// writes, zones/keys/*.ds and keys/*.ds, where present.
    #[arg(long)]
    trust_anchor: Vec<PathBuf>,
    /// Algorithm-number profile: default, oqs-bind or verisign.
    #[arg(long, default_value = "default")]
    profile: String,
    /// Treat a DNSSEC algorithm (number or mnemonic, e.g. RSASHA1) as unsupported: zones
    /// signed only with it are Insecure (repeatable). By default RSASHA1 and
    /// RSASHA1-NSEC3-SHA1 are validated, as RFC 8624 §3.1 requires.
    #[arg(long, value_name = "ALGORITHM")]
    disable_algorithm: Vec<String>,
    /// Refuse TLS handshakes that do not negotiate a hybrid post-quantum group.
    #[arg(long)]
    pq_only: bool,
    /// Refuse DoT/DoH/DoQ servers that do not authenticate with ML-DSA (FIPS 204): only
    /// ML-DSA signatures are accepted, in the handshake and in the certificate chain.
    #[arg(long)]
    pq_certificates_only: bool,
    /// DoQ: UDP payload bytes of this client's QUIC datagrams (1200..=65527). 1452 lets a
    /// server with an ML-DSA-44 certificate answer a round trip sooner (QUIC's
    /// anti-amplification limit, RFC 9000 §8.1), where the path carries such datagrams.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u16).range(1200..=65527))]
    doq_datagram_size: Option<u16>,
    /// Secure only if every link of the chain is post-quantum: the trust anchor or DS must
    /// match a post-quantum key that signs the DNSKEY RRset, and every RRset must carry a
    /// verified post-quantum signature; otherwise Bogus, naming the classical link (departs
    /// from RFC 6840 §5.11 to prevent classical downgrade).
    #[arg(long)]
    require_pq: bool,
    /// Turn off downgrade protection by DS: by default a zone whose authenticated DS RRset (or
    /// trust anchor) names a supported post-quantum algorithm must validate through it, down
    /// to the next secure delegation (else Bogus, EDE 10); off, any algorithm is enough.
    #[arg(long)]
    no_ds_downgrade_protection: bool,
    /// Skip TLS certificate verification (self-signed test servers).
    #[arg(long)]
    insecure_tls: bool,
    /// PEM file of certificates to trust for DoT/DoH (repeatable). Default: the self-signed
    /// certificate the local pqdns-server writes (zones/keys/pqdns-server.crt and
    /// keys/pqdns-server.crt, where present); if there is none, the system's CA store.
    #[arg(long)]
    tls_ca: Vec<PathBuf>,
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
    /// in fragments fetched in parallel, or sends them all at once once a DNS cookie proved
    /// our address; otherwise, or when fragments are lost, the query is retried over TCP as
    /// usual.
    #[arg(long, value_name = "MODE", default_value = "arrf")]
    fragmentation: Fragmentation,
    /// Per-exchange timeout, seconds.
    #[arg(long, default_value_t = 3)]
    timeout: u64,
    /// Print the chain of trust walked.
    #[arg(long)]
    trace: bool,
    /// Print the RRSIGs that verified each Secure RRset.
    #[arg(long)]
    dnssec: bool,
    /// Also print the responses as received, unvalidated (clearly marked).
    #[arg(long)]
    unvalidated: bool,
    /// Machine-readable output (JSON), errors included.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct JsonRRset {
    status: &'static str,
    records: Vec<String>,
    rrsigs: Vec<String>,
}

#[derive(Serialize)]
struct JsonReferral {
    zone: String,
    ns: Vec<String>,
    glue: Vec<String>,
    ds: Vec<String>,
    no_ds_proven: bool,
}

#[derive(Serialize)]
struct JsonOut {
    status: String,
    reason: Option<String>,
    ede: Option<u16>,
    rcode: u16,
    rcode_name: String,
    answer: Vec<JsonRRset>,
    authority: Vec<JsonRRset>,
    referral: Option<JsonReferral>,
    dropped: Vec<String>,
    chain: Vec<String>,
    exchanges: usize,
    bytes_sent: usize,
    bytes_received: usize,
    milliseconds: f64,
    tls_group: Option<String>,
    tls_cipher: Option<String>,
    unvalidated: Option<Vec<Vec<String>>>,
    exit_code: u8,
}

#[derive(Serialize)]
struct JsonError {
    error: String,
    exit_code: u8,
}

/// A failure before an answer: message and exit status.
struct Failure {
    message: String,
    code: u8,
}

fn usage(message: impl Into<String>) -> Failure {
    Failure {
        message: message.into(),
        code: EXIT_USAGE,
    }
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
                        .map(|ip| SocketAddr::new(ip, default_port(transport)))
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

/// DS files in the pqdns-server key directories (`*.ds`, and `.ds` for the root zone).
fn default_anchors() -> Vec<PathBuf> {
    KEY_DIRS
        .iter()
        .flat_map(|d| std::fs::read_dir(d).into_iter().flatten())
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "ds") || p.file_name().is_some_and(|n| n == ".ds")
        })
        .collect()
}

/// The self-signed certificates pqdns-server writes, where present.
fn default_ca_files() -> Vec<PathBuf> {
    KEY_DIRS
        .iter()
        .map(|d| Path::new(d).join("pqdns-server.crt"))
        .filter(|p| p.exists())
        .collect()
}

fn render(rs: &[Record]) -> Vec<String> {
    rs.iter().map(ToString::to_string).collect()
}

fn json_rrsets(sets: &[AnswerRRset], dnssec: bool) -> Vec<JsonRRset> {
    sets.iter()
        .map(|s| JsonRRset {
            status: s.status_name(),
            records: render(&s.records()),
            rrsigs: if dnssec {
                render(&s.rrsig_records())
            } else {
                Vec::new()
            },
        })
        .collect()
}

fn exit_code(answer: &Answer) -> u8 {
    if answer.status().is_bogus() {
        EXIT_BOGUS
    } else if answer.referral().is_some()
        || !matches!(answer.rcode(), Rcode::NOERROR | Rcode::NXDOMAIN)
    {
        EXIT_NO_ANSWER
    } else {
        EXIT_ANSWER
    }
}

fn print_text(cli: &Cli, a: &Answer) {
    outln!(";; {} {}: {}", a.qname(), a.qtype(), a.rcode_name());
    for s in a.answers().iter().chain(a.authority()) {
        for r in s.records() {
            outln!("{r}");
        }
        if cli.dnssec {
            for r in s.rrsig_records() {
                outln!("{r}");
            }
        }
        if !s.is_secure() {
            outln!(";; ^ {} (not validated)", s.status_name());
        }
    }
    if let Some(r) = a.referral() {
        outln!(";; referral to {} (not followed):", r.zone);
        for rec in r.ns.records() {
            outln!("{rec}");
        }
        for rec in r.ds.iter().flat_map(|d| d.records()) {
            outln!("{rec}");
        }
        for rec in r.glue.iter().flat_map(|g| g.records()) {
            outln!("{rec}");
        }
    }
    match a.status().reason() {
        Some(r) => outln!(";; status: {} ({r})", a.status().name()),
        None => outln!(";; status: {}", a.status().name()),
    }
    if !a.dropped().is_empty() {
        let list: Vec<String> = a
            .dropped()
            .iter()
            .map(|d| format!("{} {} ({:?})", d.owner, d.rtype, d.section))
            .collect();
        outln!(
            ";; dropped {} RRset(s) not part of the validated answer: {}",
            list.len(),
            list.join(", ")
        );
    }
    if cli.trace {
        for step in a.chain() {
            outln!(";; chain: {step}");
        }
    }
    if cli.unvalidated {
        for (i, m) in a.unvalidated_messages().iter().enumerate() {
            outln!(";; UNVALIDATED response {}:", i + 1);
            for r in m.answers.iter().chain(&m.authority).chain(&m.additional) {
                outln!(";; {r}");
            }
        }
    }
    let (sent, received, ms) = totals(a);
    if let Some(tls) = a.exchanges().iter().find(|e| e.tls_group.is_some()) {
        let field = |f: &Option<String>| f.clone().unwrap_or_else(|| "?".into());
        outln!(
            ";; TLS: group {}, cipher {}, certificate {}",
            field(&tls.tls_group),
            field(&tls.tls_cipher),
            field(&tls.tls_certificate)
        );
    }
    let pushed = a.exchanges().iter().filter(|e| e.fragments_pushed).count();
    if pushed > 0 {
        outln!(";; fragments pushed by the server (DNS cookie) in {pushed} exchange(s)");
    }
    outln!(
        ";; {} exchange(s), {sent} bytes sent, {received} bytes received, {ms:.1} ms",
        a.exchanges().len()
    );
}

fn totals(a: &Answer) -> (usize, usize, f64) {
    let sent = a.exchanges().iter().map(|e| e.bytes_sent).sum();
    let received = a.exchanges().iter().map(|e| e.bytes_received).sum();
    let ms = a
        .exchanges()
        .iter()
        .map(|e| e.elapsed.as_secs_f64() * 1000.0)
        .sum();
    (sent, received, ms)
}

fn json_answer(cli: &Cli, a: &Answer) -> JsonOut {
    let (sent, received, ms) = totals(a);
    let reason = a.status().reason();
    JsonOut {
        status: a.status().name().into(),
        reason: reason.map(|r| r.text.clone()),
        ede: reason.map(|r| r.ede.0),
        rcode: a.rcode().0,
        rcode_name: a.rcode_name(),
        answer: json_rrsets(a.answers(), cli.dnssec),
        authority: json_rrsets(a.authority(), cli.dnssec),
        referral: a.referral().map(|r| JsonReferral {
            zone: r.zone.to_string(),
            ns: render(&r.ns.records()),
            glue: r.glue.iter().flat_map(|g| render(&g.records())).collect(),
            ds: r.ds.iter().flat_map(|d| render(&d.records())).collect(),
            no_ds_proven: r.no_ds.is_some(),
        }),
        dropped: a
            .dropped()
            .iter()
            .map(|d| format!("{} {} {:?}", d.owner, d.rtype, d.section))
            .collect(),
        chain: a.chain().to_vec(),
        exchanges: a.exchanges().len(),
        bytes_sent: sent,
        bytes_received: received,
        milliseconds: ms,
        tls_group: a.exchanges().iter().find_map(|e| e.tls_group.clone()),
        tls_cipher: a.exchanges().iter().find_map(|e| e.tls_cipher.clone()),
        unvalidated: cli.unvalidated.then(|| {
            a.unvalidated_messages()
                .iter()
                .map(|m| {
                    render(&[m.answers.clone(), m.authority.clone(), m.additional.clone()].concat())
                })
                .collect()
        }),
        exit_code: exit_code(a),
    }
}

fn run(cli: &Cli) -> Result<u8, Failure> {
    let transport = if cli.tcp {
        Transport::Tcp
    } else if cli.dot {
        Transport::Dot
    } else if cli.doh {
        Transport::Doh
    } else if cli.doq {
        Transport::Doq
    } else {
        Transport::Udp
    };
    let (server, name, rtype) = parse_args(cli, transport).map_err(usage)?;
    let mut anchors = TrustAnchors::default();
    let files = if cli.trust_anchor.is_empty() {
        default_anchors()
    } else {
        cli.trust_anchor.clone()
    };
    for f in &files {
        anchors.extend(TrustAnchors::read(f).map_err(|e| usage(e.to_string()))?);
    }
    let mode = if cli.roots.is_empty() {
        let addr = server
            .unwrap_or_else(|| SocketAddr::new([127, 0, 0, 1].into(), default_port(transport)));
        Mode::Forward(addr)
    } else {
        Mode::Iterative {
            roots: cli.roots.clone(),
            port: cli.glue_port,
        }
    };
    let mut tls = TlsOptions::default();
    tls.pq_only = cli.pq_only;
    tls.pq_certificates_only = cli.pq_certificates_only;
    tls.doq_datagram_size = cli.doq_datagram_size;
    tls.danger_accept_any_certificate = cli.insecure_tls;
    tls.ca_files = if cli.tls_ca.is_empty() {
        default_ca_files()
    } else {
        cli.tls_ca.clone()
    };
    let mut client = Client::new(transport, Duration::from_secs(cli.timeout), tls)
        .map_err(|e| usage(e.to_string()))?;
    client.set_fragmentation(FragConfig::new(cli.fragmentation));
    let mut profile = Profile::named(&cli.profile).map_err(|e| usage(e.to_string()))?;
    for alg in &cli.disable_algorithm {
        let number = SecAlg::parse(alg)
            .ok_or_else(|| usage(format!("--disable-algorithm: unknown algorithm {alg:?}")))?;
        profile = profile.without(number);
    }
    let mut config = Config::new(mode, anchors);
    config.profile = profile;
    config.pq_policy = if cli.require_pq {
        PqPolicy::RequirePq
    } else {
        PqPolicy::AnyAlgorithm
    };
    config.ds_downgrade_protection = !cli.no_ds_downgrade_protection;
    config.now = cli.at;
    config.verify_threads = 1;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| usage(e.to_string()))?;
    let resolver = Resolver::new(config, client);
    let answer = runtime
        .block_on(resolver.resolve(&name, rtype))
        .map_err(|e| Failure {
            message: e.to_string(),
            code: EXIT_NO_ANSWER,
        })?;
    if cli.json {
        let json = serde_json::to_string_pretty(&json_answer(cli, &answer))
            .map_err(|e| usage(format!("encoding the answer as JSON: {e}")))?;
        outln!("{json}");
    } else {
        print_text(cli, &answer);
    }
    Ok(exit_code(&answer))
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let json = std::env::args().any(|a| a == "--json");
            if json && e.use_stderr() {
                let j = JsonError {
                    error: e.to_string().trim().to_string(),
                    exit_code: EXIT_USAGE,
                };
                outln!("{}", serde_json::to_string(&j).unwrap_or_default());
                return ExitCode::from(EXIT_USAGE);
            }
            e.exit()
        }
    };
    let code = match run(&cli) {
        Ok(code) => code,
        Err(f) => {
            if cli.json {
                let j = JsonError {
                    error: f.message,
                    exit_code: f.code,
                };
                outln!("{}", serde_json::to_string(&j).unwrap_or_default());
            } else {
                eprintln!("pqdns-resolve: {}", f.message);
                if cli.pq_certificates_only && f.message.contains("Handshake") {
                    eprintln!(
                        "pqdns-resolve: (--pq-certificates-only accepts only ML-DSA server \
                         certificates; the server may have a classical one)"
                    );
                }
            }
            f.code
        }
    };
    // A reader that closed the pipe (`| head`) is not a failure; a full disk under `> file` is.
    match stdout::status() {
        Ok(()) => ExitCode::from(code),
        Err(e) => {
            eprintln!("pqdns-resolve: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_documented_in_help() {
        use clap::CommandFactory;
        let help = Cli::command().render_long_help().to_string();
        for line in ["0  an answer", "1  Bogus", "2  usage", "3  no answer"] {
            assert!(help.contains(line), "{line:?} missing from --help:\n{help}");
        }
    }
}
