//! `pqdns-server`: serve DNSSEC-signed zones (classical and post-quantum algorithms) over UDP,
//! TCP, DNS over TLS and DNS over HTTPS.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use pqdns_core::frag::edns::Fragmentation;
use pqdns_server::acl::{AllowList, IpPrefix};
use pqdns_server::settings::{parse_notify_target, KxPolicy, ServerTable, Settings};
use pqdns_server::zones::{load_all, ZoneReport, ZoneSource};
use pqdns_server::{Server, ServerConfig, ServerHandle};
use tracing::{error, info, warn};
use tracing_subscriber::EnvFilter;

/// Authoritative DNS server for zones signed with classical and post-quantum DNSSEC algorithms.
///
/// On start it reads each zone description, generates missing keys in the zone's key directory
/// (logging the files written, never key material), signs the zone, prints the DS records of
/// the key-signing keys and writes them to `<key_dir>/<zone>ds` (zone-file syntax, usable as a
/// trust anchor), then prints every listening address.
///
/// Signals: SIGHUP re-reads the TLS certificate and key and re-reads and re-signs all zones
/// (keeping the old ones if anything fails) and then sends NOTIFY to the --notify secondaries;
/// SIGINT and SIGTERM shut down gracefully. Listen addresses and limits are read at start only.
///
/// Listen addresses come from the command line, else from the `[server]` table of the zone
/// descriptions, else the defaults. A transport can be turned off with an empty list in the
/// `[server]` table (e.g. `doh = []`).
#[derive(Debug, Parser)]
#[command(name = "pqdns-server", version, verbatim_doc_comment)]
struct Cli {
    /// Zone description (TOML; see zones/example.toml). Repeat for several zones. Without any,
    /// the embedded example.com zone is served with its keys in ./keys (relative to the current
    /// directory).
    #[arg(long = "zone", value_name = "FILE")]
    zones: Vec<PathBuf>,

    /// UDP listen address, e.g. 127.0.0.1:5353 or [::1]:5353. Repeatable.
    /// [default: 127.0.0.1:5353]
    #[arg(long, value_name = "ADDR")]
    udp: Vec<SocketAddr>,

    /// TCP listen address (RFC 7766: length framing, pipelining, 10 s idle timeout, at most
    /// 512 connections per listener and 32 per client address). Repeatable.
    /// [default: 127.0.0.1:5353]
    #[arg(long, value_name = "ADDR")]
    tcp: Vec<SocketAddr>,

    /// DNS-over-TLS listen address (RFC 7858, ALPN "dot"; idle timeout and connection caps as
    /// for TCP). Repeatable.
    /// [default: 127.0.0.1:8853]
    #[arg(long, value_name = "ADDR")]
    dot: Vec<SocketAddr>,

    /// DNS-over-HTTPS listen address (RFC 8484, HTTP/1.1 and HTTP/2, path /dns-query unless
    /// `doh_path` is set in [server]; GET, HEAD and POST; idle timeout and connection caps as
    /// for TCP, whatever the HTTP version). Repeatable. [default: 127.0.0.1:8443]
    #[arg(long, value_name = "ADDR")]
    doh: Vec<SocketAddr>,

    /// TLS key exchange policy for DoT and DoH: "hybrid-preferred" (X25519MLKEM768 first, then
    /// X25519, P-256, P-384) or "pq-only" (hybrid ML-KEM groups only, TLS 1.3 only). Overrides
    /// `tls.policy` in [server]. [default: hybrid-preferred]
    #[arg(long, value_name = "POLICY")]
    tls_policy: Option<KxPolicy>,

    /// DNS name (or IP address) the self-signed TLS certificate covers, besides localhost,
    /// 127.0.0.1, ::1 and the --dot/--doh addresses. Repeatable; replaces `tls.names` in
    /// [server]. A stored self-signed certificate that does not cover them is replaced.
    #[arg(long, value_name = "NAME")]
    tls_name: Vec<String>,

    /// Client address or CIDR prefix allowed to transfer zones (AXFR, and IXFR answered with
    /// the whole zone) over TCP and DoT, e.g. 127.0.0.1, ::1 or 10.0.0.0/8. Repeatable;
    /// replaces `axfr_allow` in [server]. Others, and any transfer over UDP or DoH, get
    /// REFUSED. [default: nobody]
    #[arg(long, value_name = "PREFIX")]
    axfr_allow: Vec<IpPrefix>,

    /// Secondary to send NOTIFY (RFC 1996, UDP, 3 tries 2 s apart) for every zone at start and
    /// after each successful SIGHUP reload: ADDR or ADDR:PORT (port 53 if omitted).
    /// Repeatable; replaces `notify` in [server]. [default: none]
    #[arg(long, value_name = "ADDR", value_parser = parse_notify_target)]
    notify: Vec<SocketAddr>,

    /// Serve Prometheus counters at http://ADDR/metrics (queries by transport, type and rcode,
    /// TC responses, response sizes, TLS handshakes by key exchange group and failures).
    /// Overrides `metrics` in [server]. [default: off]
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,

    /// UDP fragmentation for clients that send the fragmentation EDNS option (code 65108 unless
    /// `fragmentation_option` is set in [server]): "arrf" (RRFRAG records, Goertzen & Stebila),
    /// "qbf" (?n? fragment queries, Rawat & Jhanwar) or "off". Other clients always get TC=1
    /// and retry over TCP. Overrides `fragmentation` in [server]. [default: arrf]
    #[arg(long, value_name = "MODE")]
    fragmentation: Option<Fragmentation>,

    /// Log filter: a level (error, warn, info, debug, trace) or tracing-subscriber directives
    /// such as `pqdns_server=debug` (debug shows TLS key exchange groups per connection).
    #[arg(long, value_name = "FILTER", default_value = "info")]
    log_level: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut filter = match EnvFilter::try_new(&cli.log_level) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("--log-level {:?}: {e}", cli.log_level);
            return ExitCode::from(2);
        }
    };
    // Dependencies that log per remote event (h2 on HTTP/2 reset floods) are quietened unless
    // the filter names them; pqdns-net counts and summarizes those events instead.
    for directive in pqdns_net::LOG_DIRECTIVES {
        let target = directive.split('=').next().unwrap_or_default();
        if !cli.log_level.contains(target) {
            if let Ok(d) = directive.parse() {
                filter = filter.add_directive(d);
            }
        }
    }
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            error!("{message}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    let sources: Vec<ZoneSource> = if cli.zones.is_empty() {
        info!("no --zone given: serving the embedded default zone (zones/example.toml with zones/example.com.zone); keys in ./keys relative to the current directory");
        vec![ZoneSource::Embedded {
            base_dir: PathBuf::from("."),
        }]
    } else {
        cli.zones.iter().cloned().map(ZoneSource::File).collect()
    };
    let (catalog, reports) =
        load_all(&sources, pqdns_core::time::now()).map_err(|e| e.to_string())?;
    print_ds(&reports);

    let mut tables = Vec::new();
    for (report, source) in reports.iter().zip(&sources) {
        let (path, base) = match source {
            ZoneSource::File(p) => (p.clone(), p.parent().map(PathBuf::from).unwrap_or_default()),
            ZoneSource::Embedded { base_dir } => {
                (PathBuf::from("<embedded example.toml>"), base_dir.clone())
            }
        };
        if let Some(table) = &report.server_table {
            tables.push((
                ServerTable::parse(table, &path).map_err(|e| e.to_string())?,
                base,
            ));
        }
    }
    let cert_dir = reports
        .iter()
        .find_map(|r| r.key_dir.clone())
        .unwrap_or_else(|| PathBuf::from("keys"));
    let mut settings = Settings::from_tables(&tables, cert_dir).map_err(|e| e.to_string())?;
    for (cli_addrs, target) in [
        (&cli.udp, &mut settings.udp),
        (&cli.tcp, &mut settings.tcp),
        (&cli.dot, &mut settings.dot),
        (&cli.doh, &mut settings.doh),
    ] {
        if !cli_addrs.is_empty() {
            target.clone_from(cli_addrs);
        }
    }
    if let Some(policy) = cli.tls_policy {
        settings.tls.policy = policy;
    }
    if !cli.tls_name.is_empty() {
        settings.tls.names.clone_from(&cli.tls_name);
    }
    if !cli.axfr_allow.is_empty() {
        settings.axfr_allow = AllowList::new(cli.axfr_allow.clone());
    }
    if !cli.notify.is_empty() {
        settings.notify.clone_from(&cli.notify);
    }
    if let Some(mode) = cli.fragmentation {
        settings.fragmentation.mode = mode;
    }
    if cli.metrics.is_some() {
        settings.metrics = cli.metrics;
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the runtime: {e}"))?;
    runtime.block_on(async move {
        let policy = settings.tls.policy;
        let doh_path = settings.doh_path.clone();
        let config = ServerConfig {
            zones: sources,
            settings,
        };
        let handle = Server::bind(config, catalog)
            .await
            .map_err(|e| e.to_string())?;
        print_listeners(&handle, policy, &doh_path);
        wait_for_signals(&handle).await?;
        info!("shutting down");
        handle.shutdown().await;
        Ok(())
    })
}

fn print_ds(reports: &[ZoneReport]) {
    for report in reports {
        for ds in &report.ds {
            println!("{ds}");
        }
        if let Some(path) = &report.ds_path {
            info!(file = %path.display(), "DS records written");
        }
    }
}

fn print_listeners(handle: &ServerHandle, policy: KxPolicy, doh_path: &str) {
    let a = &handle.addrs;
    for (kind, addrs) in [("udp", &a.udp), ("tcp", &a.tcp), ("dot", &a.dot)] {
        for addr in addrs {
            println!("listening {kind} {addr}");
        }
    }
    for addr in &a.doh {
        println!("listening doh https://{addr}{doh_path}");
    }
    if let Some(addr) = a.metrics {
        println!("listening metrics http://{addr}/metrics");
    }
    if let Some(cert) = handle.certificate() {
        let kind = if cert.self_signed {
            "self-signed certificate"
        } else {
            "certificate"
        };
        println!(
            "tls {kind} {} sha256 {}",
            cert.cert_path.display(),
            cert.fingerprint
        );
        info!(?policy, "TLS key exchange policy");
    }
}

#[cfg(unix)]
async fn wait_for_signals(handle: &ServerHandle) -> Result<(), String> {
    use tokio::signal::unix::{signal, SignalKind};
    let install = |kind| signal(kind).map_err(|e| format!("installing signal handler: {e}"));
    let mut hup = install(SignalKind::hangup())?;
    let mut term = install(SignalKind::terminate())?;
    let mut int = install(SignalKind::interrupt())?;
    loop {
        tokio::select! {
            _ = hup.recv() => {
                info!("SIGHUP: reloading zones");
                match handle.reload().await {
                    Ok(reports) => print_ds(&reports),
                    Err(e) => warn!("reload failed, still serving the previous zones: {e}"),
                }
            }
            _ = term.recv() => return Ok(()),
            _ = int.recv() => return Ok(()),
        }
    }
}

#[cfg(not(unix))]
async fn wait_for_signals(_handle: &ServerHandle) -> Result<(), String> {
    tokio::signal::ctrl_c().await.map_err(|e| e.to_string())
}
