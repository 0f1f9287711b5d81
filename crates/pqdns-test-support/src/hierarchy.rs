//! A delegation hierarchy of zone descriptions for tests and benchmarks of resolvers: the
//! root, `tld.` and leaves below it, each leaf with `www` A, `alias` CNAME www, a wildcard
//! `*.wild` TXT and an empty non-terminal (`a.b.ent` A), each parent holding its children's NS,
//! glue and DS records; and in-process servers for them ([`serve_zones`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use pqdns_core::config::LoadedConfig;
use pqdns_core::dnssec::dnskey::{ds_record, DigestType};
use pqdns_core::Record;

use pqdns_server::settings::Settings;
use pqdns_server::zones::{load_all, ZoneSource};
use pqdns_server::{Server, ServerConfig, ServerHandle};

/// A zone below `tld.`.
#[derive(Clone, Copy, Debug)]
pub struct Leaf {
    /// The label under `tld.`.
    pub name: &'static str,
    /// Signing algorithms (none: unsigned, no DS at the parent).
    pub algorithms: &'static [&'static str],
    /// `nsec` or `nsec3`.
    pub denial: &'static str,
    /// The address of its name server (glue in `tld.`).
    pub ip: &'static str,
    /// Records added to the zone (master-file lines relative to it).
    pub extra: &'static str,
}

/// The addresses of the root's and `tld.`'s name servers.
#[derive(Clone, Copy, Debug)]
pub struct Tiers {
    /// `a.root-servers.`, the root hints' only server.
    pub root: &'static str,
    /// `ns.tld.`.
    pub tld: &'static str,
}

/// The zone descriptions written and the root's trust anchor.
#[derive(Clone, Debug)]
pub struct HierarchyFiles {
    /// The root zone's description.
    pub root: PathBuf,
    /// `tld.`'s description.
    pub tld: PathBuf,
    /// The leaves' descriptions, in the order given.
    pub leaves: Vec<PathBuf>,
    /// The DS record (SHA-256) of the root's key: the trust anchor.
    pub root_ds: Record,
}

/// Writes a zone description `dir/<origin>toml` (keys in `dir/keys`); its path.
///
/// # Panics
/// If `dir` is not writable.
pub fn write_zone(
    dir: &Path,
    origin: &str,
    records: &str,
    algorithms: &[&str],
    denial: &str,
) -> PathBuf {
    let signing = if algorithms.is_empty() {
        String::new()
    } else {
        let algs: Vec<String> = algorithms.iter().map(|a| format!("{a:?}")).collect();
        format!(
            "[signing]\nalgorithms = [{}]\nkeys = \"csk\"\ndenial = \"{denial}\"\nkey_directory = \"keys\"\n",
            algs.join(", ")
        )
    };
    let file = dir.join(format!("{}toml", origin.replace('.', "_")));
    std::fs::write(
        &file,
        format!("origin = \"{origin}\"\ndefault_ttl = 300\nrecords = '''\n{records}'''\n{signing}"),
    )
    .expect("the directory is writable");
    file
}

/// The DS records (SHA-256, presentation format, one per line) of the key-signing keys of a
/// zone description, generating its keys if missing.
///
/// # Panics
/// If the description or its keys cannot be read or made.
pub fn ds_lines(file: &Path) -> String {
    let cfg = LoadedConfig::read(file).expect("a valid zone description");
    let (keys, _) = cfg.keys(true).expect("keys load or generate");
    keys.iter()
        .filter(|k| k.is_sep())
        .map(|k| {
            ds_record(&k.dnskey_record(), DigestType::Sha256)
                .expect("a DS for a DNSKEY")
                .to_string()
                + "\n"
        })
        .collect()
}

/// Writes a hierarchy in `dir`: `leaves` under `tld.` (its records plus `extra_tld`), signed
/// with `tld_alg` and NSEC3, under the root signed with `root_alg` and NSEC; name servers at
/// `tiers` and the leaves' addresses.
///
/// # Panics
/// If `dir` is not writable or keys cannot be made.
pub fn write_hierarchy(
    dir: &Path,
    tiers: Tiers,
    leaves: &[Leaf],
    root_alg: &str,
    tld_alg: &str,
    extra_tld: &str,
) -> HierarchyFiles {
    let (root_ip, tld_ip) = (tiers.root, tiers.tld);
    let mut files = Vec::new();
    let mut tld_records =
        format!("@ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A {tld_ip}\n{extra_tld}");
    for leaf in leaves {
        let origin = format!("{}.tld.", leaf.name);
        let records = format!(
            "@ SOA ns hostmaster 1 7200 3600 1209600 300\n@ NS ns\nns A {}\nwww A 192.0.2.1\n\
             alias CNAME www\n*.wild TXT \"wildcard\"\na.b.ent A 192.0.2.2\n{}",
            leaf.ip, leaf.extra
        );
        let file = write_zone(dir, &origin, &records, leaf.algorithms, leaf.denial);
        tld_records.push_str(&format!(
            "{origin} NS ns.{origin}\nns.{origin} A {}\n",
            leaf.ip
        ));
        if !leaf.algorithms.is_empty() {
            tld_records.push_str(&ds_lines(&file));
        }
        files.push(file);
    }
    let tld = write_zone(dir, "tld.", &tld_records, &[tld_alg], "nsec3");
    let root_records = format!(
        "@ SOA a.root-servers hostmaster 1 7200 3600 1209600 300\n@ NS a.root-servers\n\
         a.root-servers A {root_ip}\ntld. NS ns.tld.\nns.tld. A {tld_ip}\n{}",
        ds_lines(&tld)
    );
    let root = write_zone(dir, ".", &root_records, &[root_alg], "nsec");
    let cfg = LoadedConfig::read(&root).expect("the root's description");
    let (keys, _) = cfg.keys(true).expect("the root's keys");
    let root_ds = ds_record(&keys[0].dnskey_record(), DigestType::Sha256).expect("a DS");
    HierarchyFiles {
        root,
        tld,
        leaves: files,
        root_ds,
    }
}

/// A root hints file (IANA's format) in `dir` naming one root server at `ip`; its path.
///
/// # Panics
/// If `dir` is not writable.
pub fn write_root_hints(dir: &Path, ip: &str) -> PathBuf {
    let path = dir.join("root.hints");
    let text =
        format!(".                3600000 NS a.root-servers.\na.root-servers.  3600000 A  {ip}\n");
    std::fs::write(&path, text).expect("the directory is writable");
    path
}

/// Serves `zones`, signed as if the time were `now` (UNIX seconds), on `addr` (UDP and TCP;
/// with `tls`, DoT and DoH on port 0 of its address) inside `rt`, with response-rate limiting
/// off (one resolver asks everything); a self-signed certificate goes to `cert_dir`.
///
/// # Panics
/// If the zones do not load or the address cannot be bound.
pub fn serve_zones(
    rt: &tokio::runtime::Runtime,
    cert_dir: &Path,
    zones: Vec<PathBuf>,
    addr: SocketAddr,
    tls: bool,
    now: u64,
) -> ServerHandle {
    let sources: Vec<ZoneSource> = zones.into_iter().map(ZoneSource::File).collect();
    let (catalog, _) = load_all(&sources, now).expect("the zones load");
    let mut settings = Settings::new(cert_dir.to_path_buf());
    settings.udp = vec![addr];
    settings.tcp = vec![addr];
    settings.rrl.rate = 0;
    if tls {
        settings.dot = vec![SocketAddr::new(addr.ip(), 0)];
        settings.doh = vec![SocketAddr::new(addr.ip(), 0)];
    }
    rt.block_on(Server::bind(ServerConfig::new(sources, settings), catalog))
        .unwrap_or_else(|e| panic!("serving on {addr}: {e}"))
}
