//! `pqdns-server`: serve DNSSEC-signed zones (classical and post-quantum algorithms) over UDP,
//! TCP, DNS over TLS and DNS over HTTPS.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use pqdns_core::config::LoadedConfig;
use pqdns_core::frag::edns::Fragmentation;
use pqdns_core::stdout;
use pqdns_net::manual::{self, DaemonArgs};
use pqdns_net::privilege::Account;
use pqdns_net::systemd;
use pqdns_server::acl::{AllowList, IpPrefix};
use pqdns_server::catalog::Catalog;
use pqdns_server::config_file::ConfigFile;
use pqdns_server::control::socket::ControlSocket;
use pqdns_server::cookie::CookieMode;
use pqdns_server::identity::parse_nsid;
use pqdns_server::reconfigure::SettingsSource;
use pqdns_server::settings::{parse_notify_target, CertAlgorithm, KxPolicy, ServerTable, Settings};
use pqdns_server::zones::{read_config, zone_files, ZoneReport, ZoneSource};
use pqdns_server::{Server, ServerConfig, ServerHandle};
use tracing::{error, info, warn};

/// Authoritative DNS server for zones signed with classical and post-quantum DNSSEC algorithms.
///
/// On start it reads each zone description, generates missing keys in the zone's key directory
/// (logging the files written, never key material), signs the zone, prints the DS records of
/// the key-signing keys and writes them to `<key_dir>/<zone>.ds` (`root.ds` for the root;
/// zone-file syntax, usable as a trust anchor), then prints every listening address. Every
/// file is written atomically (temporary file and rename). If standard output is closed, what
/// would be printed goes to the log.
///
/// Signals: SIGHUP re-reads the TLS certificate and key and re-reads and re-signs all zones
/// (keeping the old ones if anything fails) and then sends NOTIFY to the --notify secondaries;
/// with --config it re-reads the file first, and serves the [[zone]] tables added to it and
/// stops serving those removed, and listens on the udp/tcp/dot/doh/doq addresses of its
/// [server] table now, without a restart (connections on unchanged listeners stay open;
/// other [server] changes are logged as needing a restart; pqdns-ctl reload does the same);
/// SIGINT and SIGTERM shut down gracefully, without waiting for a load or reload in progress.
/// With --watch, a changed zone description or zone file starts the same reload.
/// Without --config, listen addresses and limits are read at start only.
///
/// Signatures refresh themselves: when less than a zone's `refresh` setting (default a
/// quarter of `validity`) is left of them, the zones are re-read and re-signed as on SIGHUP,
/// the configuration file excepted (retried every minute if that fails). Every reload of a signed zone raises its SOA serial
/// above the served one unless the file's is higher, and sends NOTIFY.
///
/// Memory: a reload builds the new zones beside the ones being served and swaps them when
/// complete, so during a reload the server needs about twice the memory of its zones (plus
/// up to `answer_cache_mib` for each catalog's prepared answers). Plan for that peak.
///
/// Listen addresses come from the command line, else from the `[server]` table of the zone
/// descriptions, else the defaults. A transport can be turned off with an empty list in the
/// `[server]` table (e.g. `doh = []`).
#[derive(Debug, Parser)]
#[command(name = "pqdns-server", version, verbatim_doc_comment)]
struct Cli {
    /// Configuration file (TOML): a [server] table with the server-wide settings and the zones,
    /// each a [[zone]] table naming a zone description (`description = "FILE"`) or holding one
    /// inline (`origin = …`, `file = …`, [zone.signing] …). Relative paths are relative to
    /// the file. Installed from the package: /etc/pqdns/pqdns-server.toml. Command-line
    /// options override its [server] settings; --zone adds zones.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Zone description (TOML; see zones/example.toml). Repeat for several zones. Without any
    /// (and without --config), the embedded example.com zone is served with its keys in ./keys
    /// (relative to the current directory).
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

    /// DNS-over-QUIC listen address (RFC 9250, UDP, ALPN "doq"; one stream per query, 0-RTT
    /// off, idle timeout and connection caps as for TCP; same TLS policy and certificate as
    /// DoT), e.g. 127.0.0.1:8853 beside DoT's TCP port. Repeatable. [default: none]
    #[arg(long, value_name = "ADDR")]
    doq: Vec<SocketAddr>,

    /// TLS policy for DoT and DoH: "hybrid-preferred" (X25519MLKEM768 first, then X25519,
    /// P-256, P-384), "pq-only" (hybrid ML-KEM groups only, TLS 1.3 only) or "pq-strict"
    /// (pq-only, and the certificate must have an ML-DSA key: post-quantum key exchange and
    /// authentication; clients without either fail the handshake, counted by reason in
    /// pqdns_tls_handshake_failures_total). Overrides `tls.policy` in [server].
    /// [default: hybrid-preferred]
    #[arg(long, value_name = "POLICY")]
    tls_policy: Option<KxPolicy>,

    /// Key algorithm of the self-signed TLS certificate: ECDSA-P256, Ed25519, ML-DSA-44,
    /// ML-DSA-65 or ML-DSA-87 (FIPS 204; clients without ML-DSA, such as Go's crypto/tls,
    /// GnuTLS or OpenSSL before 3.5, cannot connect). A stored certificate of another
    /// algorithm is replaced. Overrides `tls.certificate_algorithm` in [server].
    /// [default: ECDSA-P256, or ML-DSA-44 under pq-strict]
    #[arg(long, value_name = "ALGORITHM")]
    tls_cert_algorithm: Option<CertAlgorithm>,

    /// DNS name (or IP address) the self-signed TLS certificate covers, besides localhost,
    /// 127.0.0.1, ::1 and the --dot/--doh addresses. Repeatable; replaces `tls.names` in
    /// [server]. A stored self-signed certificate that does not cover them is replaced.
    #[arg(long, value_name = "NAME")]
    tls_name: Vec<String>,

    /// Client address or CIDR prefix allowed to transfer zones (AXFR, and IXFR answered with
    /// the whole zone) over TCP and DoT, e.g. 127.0.0.1, ::1 or 10.0.0.0/8. Repeatable;
    /// replaces the addresses of `axfr_allow` in [server] (its `key:NAME` entries stay). Others,
    /// and any transfer over UDP or DoH, get REFUSED. [default: nobody]
    #[arg(long, value_name = "PREFIX")]
    axfr_allow: Vec<IpPrefix>,

    /// Secondary to send NOTIFY (RFC 1996, UDP, 3 tries 2 s apart) for every zone at start and
    /// after each successful SIGHUP reload: ADDR or ADDR:PORT (port 53 if omitted).
    /// Repeatable; replaces `notify` in [server]. [default: none]
    #[arg(long, value_name = "ADDR", value_parser = parse_notify_target)]
    notify: Vec<SocketAddr>,

    /// Answer UDP queries on network interface IFACE through AF_XDP (an XDP program and one
    /// AF_XDP socket per receive queue; root, Linux, the build feature `xdp`): IFACE serves the
    /// ports of the UDP addresses, IFACE@PORT that port. Other traffic reaches the kernel as
    /// before. Repeatable; replaces `xdp` in [server]. [default: none]
    #[arg(long, value_name = "IFACE[@PORT]")]
    xdp: Vec<pqdns_server::xdp::XdpInterface>,

    /// Serve Prometheus counters at http://ADDR/metrics (queries by transport, type and rcode,
    /// TC responses, response sizes, TLS handshakes by key exchange group and failures).
    /// Overrides `metrics` in [server]. [default: off]
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,

    /// Unix socket for pqdns-ctl (zone status, reload, re-signing, freeze, …): created mode
    /// 0660, owned by the --user account when privileges are dropped; peers must be root,
    /// that user or in its group. Overrides `control_socket` in [server]. [default: none;
    /// the package's configuration: /run/pqdns/control.sock]
    #[arg(long, value_name = "PATH")]
    control_socket: Option<PathBuf>,

    /// dnstap (the Frame Streams format of NSD, Knot, BIND and unbound): every answered query
    /// and its response, as AUTH_QUERY and AUTH_RESPONSE, to this file (created afresh) or to
    /// a collector's socket as unix:PATH (e.g. fstrm_capture). Off the answering path: a
    /// bounded queue; what does not fit is dropped and counted in the log at shutdown.
    /// Overrides `dnstap` in [server]. [default: off]
    #[arg(long, value_name = "FILE|unix:PATH")]
    dnstap: Option<pqdns_server::settings::Sink>,

    /// UDP fragmentation for clients that send the fragmentation EDNS option (code 65108 unless
    /// `fragmentation_option` is set in [server]): "arrf" (RRFRAG records, Goertzen & Stebila),
    /// "qbf" (?n? fragment queries, Rawat & Jhanwar) or "off". Other clients always get TC=1
    /// and retry over TCP. Overrides `fragmentation` in [server]. [default: arrf]
    #[arg(long, value_name = "MODE")]
    fragmentation: Option<Fragmentation>,

    /// Name server identifier sent to queries carrying the NSID EDNS option (RFC 5001; `dig
    /// +nsid`): text, or 0x followed by hex bytes. Overrides `nsid` in [server]. [default: off]
    #[arg(long, value_name = "TEXT")]
    nsid: Option<String>,

    /// Text answered to CH TXT queries for id.server. and hostname.bind. (RFC 4892). Overrides
    /// `identity` in [server]; `version` there sets version.server./version.bind.
    /// [default: off, REFUSED]
    #[arg(long, value_name = "TEXT")]
    identity: Option<String>,

    /// DNS cookies (RFC 7873, RFC 9018 server cookies): "on" (answer them; a valid server
    /// cookie exempts a client from rate limiting), "off", or "require" (UDP queries without a
    /// valid server cookie get BADCOOKIE or TC=1, and no data). Overrides `cookies` in
    /// [server]; `cookie_secret` there sets a secret shared by an anycast set. [default: on]
    #[arg(long, value_name = "MODE")]
    cookies: Option<CookieMode>,

    /// Response-rate limiting over UDP: responses per second per client prefix (/24, /56)
    /// and kind (NOERROR, NXDOMAIN, error); beyond it every 2nd response is sent truncated
    /// (TC=1) and the others dropped. 0 turns it off. Clients with a valid server cookie and
    /// TCP/DoT/DoH are not limited. Overrides `rrl_rate` in [server]. [default: 200]
    #[arg(long, value_name = "N")]
    rrl_rate: Option<u32>,

    /// Anti-amplification over UDP: a client without a valid server cookie (RFC 7873) gets
    /// answers of at most N times its query's size; a larger answer is sent as its question
    /// and OPT with TC=1 and the server cookie, so the client retries over TCP or with the
    /// cookie. At any query rate, a spoofed query is then amplified at most N times. 0 turns
    /// it off (e.g. for load tests without cookies). Overrides `amplification_limit` in
    /// [server]. [default: 3]
    #[arg(long, value_name = "N")]
    amplification_limit: Option<u32>,

    /// Watch the zone descriptions and their zone files: every SECONDS, a file whose size or
    /// modification time changed makes the server reload as on SIGHUP. 0 (the default):
    /// reload on SIGHUP only. `$INCLUDE`d files are not watched.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    watch: u64,

    #[command(flatten)]
    daemon: DaemonArgs,

    /// Check the configuration and exit, like named-checkconf: every zone description and its
    /// [server] table, the zone data (errors with file and line), the signing settings, the key
    /// files already in each key directory, the TLS certificate and key files if configured,
    /// and the user to run as. Binds nothing and writes nothing. Exit status 0 when all is
    /// well, 1 otherwise (each problem printed on standard error).
    #[arg(long)]
    check: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = <Cli as clap::CommandFactory>::command;
    if let Some(code) = manual::start(&cli.daemon, command) {
        return code;
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            error!("{message}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    let file = cli
        .config
        .as_deref()
        .map(ConfigFile::read)
        .transpose()
        .map_err(|e| e.to_string())?;
    let mut sources: Vec<ZoneSource> = file.iter().flat_map(|f| f.zones.clone()).collect();
    sources.extend(cli.zones.iter().cloned().map(ZoneSource::File));
    if sources.is_empty() {
        if let Some(file) = &file {
            return Err(format!(
                "{}: no zones: add a [[zone]] table (or give --zone)",
                file.path.display()
            ));
        }
        info!("no --zone given: serving the embedded default zone (zones/example.toml with zones/example.com.zone); keys in ./keys relative to the current directory");
        sources.push(ZoneSource::Embedded {
            base_dir: PathBuf::from("."),
        });
    }
    // Only the descriptions are read before binding: keys, signatures and DS files are made
    // after every listener is bound, so a start that cannot bind writes nothing.
    let configs = sources
        .iter()
        .map(read_config)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let settings = settings(&cli, file.as_ref(), &sources, &configs)?;
    if cli.check {
        return check(&sources, &settings);
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the runtime: {e}"))?;
    let watch = (cli.watch > 0).then(|| Duration::from_secs(cli.watch));
    // A reload re-reads the configuration file: its [[zone]] tables, then the --zone files, and
    // its listen addresses (the command line still overriding them).
    let beside: Vec<ZoneSource> = cli.zones.iter().cloned().map(ZoneSource::File).collect();
    let cli = std::sync::Arc::new(cli);
    let reread = file.map(|f| {
        let source: SettingsSource = std::sync::Arc::new(move |file: &ConfigFile| {
            let mut sources = file.zones.clone();
            sources.extend(cli.zones.iter().cloned().map(ZoneSource::File));
            let configs = sources
                .iter()
                .map(read_config)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(crate::settings(&cli, Some(file), &sources, &configs)?)
        });
        (f, beside, source)
    });
    let result = runtime.block_on(serve(sources, settings, watch, reread));
    // A zone load still running when a signal came is abandoned, not waited for.
    runtime.shutdown_background();
    result
}

/// A `[server]` table, the directory its relative paths are relative to, and the file it was
/// read from (`None` for the embedded description).
type Table = (ServerTable, PathBuf, Option<PathBuf>);

/// `message`, an error of the combined `[server]` tables, prefixed with the file and line of
/// the setting: the first file whose table alone gives the error, and the line of its
/// `[server]` key that the message names.
fn locate_setting_error(message: &str, tables: &[Table], cert_dir: &std::path::Path) -> String {
    for (table, base, file) in tables {
        let Some(path) = file else {
            continue;
        };
        if Settings::from_tables(&[(table.clone(), base.clone())], cert_dir.to_path_buf()).is_ok() {
            continue;
        }
        let line = std::fs::read_to_string(path)
            .ok()
            .and_then(|text| server_key_line(&text, message));
        return match line {
            Some(n) => format!("{}:{n}: [server]: {message}", path.display()),
            None => format!("{}: [server]: {message}", path.display()),
        };
    }
    message.to_owned()
}

/// The line (from 1) of the key of the `[server]` table in `text` that `message` names first
/// (messages start with the setting they are about).
fn server_key_line(text: &str, message: &str) -> Option<usize> {
    let mut in_server = false;
    let mut best: Option<(usize, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with('[') {
            in_server = line == "[server]";
            continue;
        }
        let Some((key, _)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if !in_server || key.is_empty() {
            continue;
        }
        if let Some(at) = message.find(key) {
            if best.is_none_or(|(b, _)| at < b) {
                best = Some((at, i + 1));
            }
        }
    }
    best.map(|(_, line)| line)
}

/// `--check`: every zone, the TLS files and the user, as the server would use them, without
/// binding or writing; prints a line per zone and every problem.
fn check(sources: &[ZoneSource], settings: &Settings) -> Result<(), String> {
    let now = pqdns_core::time::now();
    let mut problems = Vec::new();
    for source in sources {
        match pqdns_server::zones::check_zone(source, now) {
            Ok(c) => {
                let signing = if c.algorithms.is_empty() {
                    "served as read".to_owned()
                } else {
                    format!("signed with {}", c.algorithms.join(", "))
                };
                let keys = match &c.keys_to_generate {
                    Some(dir) => format!(
                        "; {} key file(s), missing keys are generated at start in {}",
                        c.keys,
                        dir.display()
                    ),
                    None if c.algorithms.is_empty() => String::new(),
                    None => format!("; {} key file(s)", c.keys),
                };
                print(format_args!(
                    "zone {} ({source}): {} records, {signing}{keys}",
                    c.origin, c.records
                ));
            }
            Err(e) => problems.push(e.to_string()),
        }
    }
    match pqdns_net::tls::check_files(&settings.tls) {
        Ok(Some(cert)) => print(format_args!(
            "tls certificate {} {}",
            cert.cert_path.display(),
            cert.algorithm
        )),
        Ok(None) => {}
        Err(e) => problems.push(e.to_string()),
    }
    if let Some(account) = &settings.user {
        if let Err(e) = pqdns_net::privilege::look_up(account) {
            problems.push(format!("user: {e}"));
        }
    }
    if problems.is_empty() {
        print(format_args!("configuration ok"));
        return Ok(());
    }
    for problem in &problems {
        eprintln!("error: {problem}");
    }
    Err(format!(
        "{} problem(s) in the configuration",
        problems.len()
    ))
}

/// Listener settings: the configuration file's `[server]` table, those of the zone
/// descriptions, then the command line.
fn settings(
    cli: &Cli,
    file: Option<&ConfigFile>,
    sources: &[ZoneSource],
    configs: &[LoadedConfig],
) -> Result<Settings, String> {
    let mut tables: Vec<Table> = Vec::new();
    if let Some(file) = file {
        if let Some(table) = &file.server {
            tables.push((
                table.clone(),
                file.base_dir.clone(),
                Some(file.path.clone()),
            ));
        }
    }
    for (cfg, source) in configs.iter().zip(sources) {
        let Some(table) = &cfg.config.server else {
            continue;
        };
        let parsed = match source {
            // From the file's text, so that errors give the line.
            ZoneSource::File(p) => std::fs::read_to_string(p)
                .map_err(|e| format!("{}: {e}", p.display()))
                .and_then(|text| ServerTable::parse_document(&text, p).map_err(|e| e.to_string()))?
                .unwrap_or_default(),
            // Refused when the configuration file is read.
            ZoneSource::Inline { .. } | ZoneSource::Member { .. } => continue,
            ZoneSource::Embedded { .. } => {
                ServerTable::parse(table, &cfg.path).map_err(|e| e.to_string())?
            }
        };
        let file = matches!(source, ZoneSource::File(_)).then(|| cfg.path.clone());
        tables.push((parsed, cfg.base_dir.clone(), file));
    }
    let cert_dir = configs
        .iter()
        .find_map(|c| c.signing().map(|s| c.key_directory(s)))
        .unwrap_or_else(|| PathBuf::from("keys"));
    let merged: Vec<(ServerTable, PathBuf)> = tables
        .iter()
        .map(|(t, base, _)| (t.clone(), base.clone()))
        .collect();
    let mut settings = Settings::from_tables(&merged, cert_dir.clone())
        .map_err(|e| locate_setting_error(&e.to_string(), &tables, &cert_dir))?;
    for (cli_addrs, target) in [
        (&cli.udp, &mut settings.udp),
        (&cli.tcp, &mut settings.tcp),
        (&cli.dot, &mut settings.dot),
        (&cli.doh, &mut settings.doh),
        (&cli.doq, &mut settings.doq),
    ] {
        if !cli_addrs.is_empty() {
            target.clone_from(cli_addrs);
        }
    }
    if let Some(policy) = cli.tls_policy {
        settings.tls.policy = policy;
    }
    if let Some(algorithm) = cli.tls_cert_algorithm {
        settings.tls.certificate_algorithm = Some(algorithm);
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
    if !cli.xdp.is_empty() {
        settings.xdp.clone_from(&cli.xdp);
    }
    if cli.metrics.is_some() {
        settings.metrics = cli.metrics;
    }
    if cli.control_socket.is_some() {
        settings.control_socket.clone_from(&cli.control_socket);
    }
    if cli.dnstap.is_some() {
        settings.dnstap.clone_from(&cli.dnstap);
    }
    if let Some(nsid) = &cli.nsid {
        settings.identity.nsid = Some(parse_nsid(nsid).map_err(|e| format!("--nsid: {e}"))?);
    }
    if cli.identity.is_some() {
        settings.identity.id.clone_from(&cli.identity);
    }
    if let Some(mode) = cli.cookies {
        settings.cookies = mode;
    }
    if let Some(rate) = cli.rrl_rate {
        settings.rrl.rate = rate;
    }
    if let Some(limit) = cli.amplification_limit {
        settings.amplification_limit = limit;
    }
    if cli.daemon.user.is_some() {
        settings.user.clone_from(&cli.daemon.user);
    }
    Ok(settings)
}

/// Binds, loads the zones (answering REFUSED until they are in), prints what an operator
/// needs, and serves until SIGINT or SIGTERM, which also cut the initial load short.
async fn serve(
    sources: Vec<ZoneSource>,
    settings: Settings,
    watch: Option<Duration>,
    reread: Option<(ConfigFile, Vec<ZoneSource>, SettingsSource)>,
) -> Result<(), String> {
    let mut signals = Signals::install()?;
    let watcher = watch.map(|every| Watcher::new(every, &sources));
    let policy = settings.tls.policy;
    let doh_path = settings.doh_path.clone();
    let account = settings.user.clone();
    let cert_dir = settings.tls.generated_cert_dir.clone();
    let control_path = settings.control_socket.clone();
    let config = ServerConfig::new(sources, settings);
    let empty = Catalog::new([]).map_err(|e| e.to_string())?;
    let handle = Server::bind(config, empty)
        .await
        .map_err(|e| e.to_string())?;
    if let Some((file, beside, source)) = reread {
        handle.reload_configuration_from(&file, beside);
        handle.reload_settings_with(source);
    }
    let bound: Vec<SocketAddr> = handle.addrs.all().collect();
    let control = match &control_path {
        Some(path) => Some(bind_control(path, account.as_ref())?),
        None => None,
    };
    pqdns_net::privilege::drop_after_bind(account.as_ref(), &cert_dir, &bound)
        .map_err(|e| format!("dropping privileges: {e}"))?;
    if let Some(every) = systemd::watchdog_interval() {
        tokio::spawn(systemd::watchdog(every));
    }
    let loaded = tokio::select! {
        loaded = handle.load_zones() => Some(loaded),
        () = signals.stop() => None,
    };
    let result = match loaded {
        Some(Ok(reports)) => {
            print_ds(&reports);
            print_listeners(&handle, policy, &doh_path);
            systemd::ready(&serving_status(&reports));
            let control = async {
                match &control {
                    Some(socket) => socket.serve(&handle).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = signals.serve(&handle, watcher) => {}
                () = control => {}
            }
            Ok(())
        }
        Some(Err(e)) => Err(e.to_string()),
        None => {
            info!("signal during zone loading");
            Ok(())
        }
    };
    info!("shutting down");
    systemd::stopping();
    handle.shutdown().await;
    result
}

/// Binds the control socket at `path`, handed to `account` (the user privileges are dropped
/// to), and prints where it listens.
fn bind_control(
    path: &std::path::Path,
    account: Option<&Account>,
) -> Result<ControlSocket, String> {
    let owner = match account {
        Some(account) => {
            let (user, gid) = pqdns_net::privilege::look_up(account)
                .map_err(|e| format!("control socket: {e}"))?;
            Some((user.uid, gid))
        }
        None => None,
    };
    let socket = ControlSocket::bind(path, owner).map_err(|e| format!("control socket: {e}"))?;
    print(format_args!("listening control {}", path.display()));
    Ok(socket)
}

/// The status line systemd shows for the loaded zones.
fn serving_status(reports: &[ZoneReport]) -> String {
    format!("serving {} zone(s)", reports.len())
}

/// Prints one line on standard output; if the reader is gone (a closed pipe), says so once and
/// logs the line instead, and carries on serving.
fn print(args: std::fmt::Arguments<'_>) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    if let Err(e) = stdout::line(args) {
        WARNED.call_once(|| warn!("{e}; printing to the log instead"));
        info!("{args}");
    }
}

fn print_ds(reports: &[ZoneReport]) {
    for report in reports {
        for ds in &report.ds {
            print(format_args!("{ds}"));
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
            print(format_args!("listening {kind} {addr}"));
        }
    }
    for addr in &a.doh {
        print(format_args!("listening doh https://{addr}{doh_path}"));
    }
    for addr in &a.doq {
        print(format_args!("listening doq {addr}"));
    }
    for (interface, ports) in handle.xdp_interfaces() {
        print(format_args!(
            "listening xdp {interface} udp ports {ports:?}"
        ));
    }
    if let Some(addr) = a.metrics {
        print(format_args!("listening metrics http://{addr}/metrics"));
    }
    if let Some(cert) = handle.certificate() {
        let kind = if cert.self_signed {
            "self-signed certificate"
        } else {
            "certificate"
        };
        print(format_args!(
            "tls {kind} {} {} sha256 {}",
            cert.cert_path.display(),
            cert.algorithm,
            cert.fingerprint
        ));
        info!(?policy, "TLS key exchange policy");
    }
}

/// `--watch`: the zone files of the sources, checked for changes every `every`.
struct Watcher {
    every: Duration,
    sources: Vec<ZoneSource>,
    /// Size and modification time of each file at the last check (`None`: unreadable).
    seen: Vec<(PathBuf, Option<(u64, std::time::SystemTime)>)>,
}

impl Watcher {
    fn new(every: Duration, sources: &[ZoneSource]) -> Watcher {
        let mut w = Watcher {
            every,
            sources: sources.to_vec(),
            seen: Vec::new(),
        };
        w.changed();
        w
    }

    /// Whether any watched file changed since the last call (the files are those the zone
    /// descriptions name now).
    fn changed(&mut self) -> bool {
        let now: Vec<_> = zone_files(&self.sources)
            .into_iter()
            .map(|path| {
                let meta = std::fs::metadata(&path).ok();
                let stamp = meta.and_then(|m| Some((m.len(), m.modified().ok()?)));
                (path, stamp)
            })
            .collect();
        std::mem::replace(&mut self.seen, now) != self.seen
    }
}

/// How long after a failed re-signing it is tried again.
const REFRESH_RETRY: Duration = Duration::from_secs(60);

/// SIGHUP (reload), SIGINT and SIGTERM (stop), installed before anything is loaded so that a
/// stop request during a long load or reload is acted on at once.
struct Signals {
    #[cfg(unix)]
    hup: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    fn install() -> Result<Signals, String> {
        use tokio::signal::unix::{signal, SignalKind};
        let install = |kind| signal(kind).map_err(|e| format!("installing signal handler: {e}"));
        Ok(Signals {
            hup: install(SignalKind::hangup())?,
            term: install(SignalKind::terminate())?,
            int: install(SignalKind::interrupt())?,
        })
    }

    /// Resolves on SIGINT or SIGTERM.
    async fn stop(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }

    /// Reloads on SIGHUP, and re-signs the zones when their signatures are due for refresh
    /// ([`ServerHandle::refresh_due`]), until SIGINT or SIGTERM. A reload runs beside the
    /// signal handling: a stop request does not wait for it (the half-done load is dropped),
    /// and a SIGHUP during a reload starts one more reload after it (the files may have
    /// changed since the running one read them). A failed re-signing is tried again after
    /// [`REFRESH_RETRY`] (the previous signatures are served meanwhile). With a `watcher`,
    /// a change of a zone file starts a reload as SIGHUP does. A zone loaded through the
    /// control socket may move the refresh time: it is read again then.
    async fn serve(&mut self, handle: &ServerHandle, mut watcher: Option<Watcher>) {
        let mut running: Option<Reloading<'_>> = None;
        let mut again = false;
        let mut retry_at: Option<u64> = None;
        let mut refreshing = false;
        loop {
            let due = retry_at.or_else(|| handle.refresh_due());
            let refresh = async {
                match due {
                    Some(at) => {
                        let wait = at.saturating_sub(pqdns_core::time::now());
                        tokio::time::sleep(Duration::from_secs(wait)).await;
                    }
                    None => std::future::pending().await,
                }
            };
            let tick = async {
                match &watcher {
                    Some(w) => tokio::time::sleep(w.every).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = tick, if running.is_none() => {
                    if watcher.as_mut().is_some_and(Watcher::changed) {
                        info!("zone files changed: reloading zones");
                        running = Some(start_reload(handle));
                    }
                }
                () = refresh, if running.is_none() => {
                    info!("re-signing zones: signatures are due for refresh");
                    refreshing = true;
                    running = Some(start_refresh(handle));
                }
                // A control operation loaded a zone: the refresh time is read again.
                () = handle.refresh_due_changed(), if running.is_none() => {}
                _ = self.hup.recv() => {
                    if running.is_some() {
                        info!("SIGHUP during a reload: reloading again when it finishes");
                        again = true;
                    } else {
                        info!("SIGHUP: reloading zones");
                        running = Some(start_reload(handle));
                    }
                }
                result = async { running.as_mut().expect("guarded").await }, if running.is_some() => {
                    running = None;
                    retry_at = None;
                    match result {
                        Ok(reports) => {
                            print_ds(&reports);
                            systemd::ready(&serving_status(&reports));
                        }
                        Err(e) => {
                            warn!("reload failed, still serving the previous zones: {e}");
                            systemd::ready(&format!("reload failed, serving the previous zones: {e}"));
                            if refreshing {
                                retry_at = Some(pqdns_core::time::now() + REFRESH_RETRY.as_secs());
                            }
                        }
                    }
                    refreshing = false;
                    if std::mem::take(&mut again) {
                        info!("reloading zones again (SIGHUP came during the last reload)");
                        running = Some(start_reload(handle));
                    }
                }
                _ = self.term.recv() => return,
                _ = self.int.recv() => return,
            }
        }
    }
}

/// Starts a reload of every zone, telling systemd (`RELOADING=1`; `READY=1` follows when it
/// ends, either way).
#[cfg(unix)]
fn start_reload(handle: &ServerHandle) -> Reloading<'_> {
    systemd::reloading();
    Box::pin(handle.reload())
}

/// Starts re-signing the zones served (the configuration file is not read again), telling
/// systemd as [`start_reload`] does.
#[cfg(unix)]
fn start_refresh(handle: &ServerHandle) -> Reloading<'_> {
    systemd::reloading();
    Box::pin(handle.load_zones())
}

/// A reload (SIGHUP, `--watch`: the configuration file and every zone) or a re-signing (the
/// zones only) running.
#[cfg(unix)]
type Reloading<'a> = std::pin::Pin<
    Box<
        dyn std::future::Future<Output = Result<Vec<ZoneReport>, pqdns_server::zones::LoadError>>
            + 'a,
    >,
>;

#[cfg(not(unix))]
impl Signals {
    fn install() -> Result<Signals, String> {
        Ok(Signals {})
    }

    async fn stop(&mut self) {
        let _ = tokio::signal::ctrl_c().await;
    }

    async fn serve(&mut self, _handle: &ServerHandle, _watcher: Option<Watcher>) {
        self.stop().await;
    }
}
