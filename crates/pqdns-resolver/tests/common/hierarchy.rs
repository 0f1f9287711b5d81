//! A three-level hierarchy served by pqdns-server: the root signed with ECDSAP256SHA256,
//! `tld.` with ML-DSA-44 (NSEC3), and leaves under it (by default Falcon-512 with NSEC,
//! SPHINCS+-SHA2-128s with NSEC3, ECDSAP256SHA256 + ML-DSA-44 dual-signed, and one unsigned),
//! each with `www` A, `alias` CNAME www, a wildcard `*.wild` TXT and an empty non-terminal.
//! In iterative mode each tier has its own loopback address, all on one port.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use pqdns_core::config::LoadedConfig;
use pqdns_core::dnssec::dnskey::{ds_record, DigestType};
use pqdns_core::Name;
use pqdns_resolver::TrustAnchors;
use pqdns_server::settings::Settings;
use pqdns_server::zones::{load_all, ZoneSource};
use pqdns_server::{Server, ServerConfig, ServerHandle};

/// A zone below `tld.`.
pub struct Leaf {
    /// The label under `tld.`.
    pub name: &'static str,
    /// Signing algorithms (none: unsigned, no DS at the parent).
    pub algorithms: &'static [&'static str],
    /// `nsec` or `nsec3`.
    pub denial: &'static str,
    /// The loopback address its name server has in iterative mode.
    pub ip: &'static str,
    /// Records added to the zone (relative to it).
    pub extra: &'static str,
}

/// Addresses of the three server tiers in iterative mode (one loopback address each).
pub const ROOT_IP: &str = "127.0.0.2";
pub const TLD_IP: &str = "127.0.0.3";
pub const LEAF_IP: &str = "127.0.0.4";

/// The default leaves.
pub const LEAVES: &[Leaf] = &[
    Leaf {
        name: "falcon",
        algorithms: &["Falcon-512"],
        denial: "nsec",
        ip: LEAF_IP,
        extra: "",
    },
    Leaf {
        name: "sphincs",
        algorithms: &["SPHINCS+-SHA2-128s"],
        denial: "nsec3",
        ip: LEAF_IP,
        extra: "",
    },
    Leaf {
        name: "dual",
        algorithms: &["ECDSAP256SHA256", "ML-DSA-44"],
        denial: "nsec3",
        ip: LEAF_IP,
        extra: "",
    },
    Leaf {
        name: "unsigned",
        algorithms: &[],
        denial: "nsec",
        ip: LEAF_IP,
        extra: "",
    },
];

/// Writes a zone description (keys in `dir/keys`); its path.
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
    .unwrap();
    file
}

/// DS records (presentation) for a zone description's keys, generating them.
pub fn ds_lines(file: &Path) -> String {
    let cfg = LoadedConfig::read(file).unwrap();
    let (keys, _) = cfg.keys(true).unwrap();
    keys.iter()
        .filter(|k| k.is_sep())
        .map(|k| {
            ds_record(&k.dnskey_record(), DigestType::Sha256)
                .unwrap()
                .to_string()
                + "\n"
        })
        .collect()
}

/// The zone descriptions of a hierarchy and the root's DS.
pub struct Hierarchy {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub tld: PathBuf,
    /// In the order of the leaves given to [`build_with`].
    pub leaves: Vec<PathBuf>,
    /// The root KSK's DS RDATA (SHA-256).
    pub root_ds: Vec<u8>,
    /// The root KSK's DS record, presentation format (a trust anchor file's line).
    pub root_ds_text: String,
}

/// The default hierarchy.
pub fn build() -> Hierarchy {
    build_with(LEAVES, "ECDSAP256SHA256", "ML-DSA-44", "")
}

/// The root and `tld.` name server addresses of a hierarchy.
#[derive(Clone, Copy)]
pub struct Tiers {
    pub root: &'static str,
    pub tld: &'static str,
}

/// The default tier addresses.
pub const TIERS: Tiers = Tiers {
    root: ROOT_IP,
    tld: TLD_IP,
};

/// A hierarchy with `leaves`, the root signed with `root_alg` (NSEC), `tld.` with `tld_alg`
/// (NSEC3), and `extra_tld` added to the records of `tld.` (relative to `tld.`).
pub fn build_with(leaves: &[Leaf], root_alg: &str, tld_alg: &str, extra_tld: &str) -> Hierarchy {
    build_at(TIERS, leaves, root_alg, tld_alg, extra_tld)
}

/// [`build_with`] with the root and `tld.` servers at `tiers`.
pub fn build_at(
    tiers: Tiers,
    leaves: &[Leaf],
    root_alg: &str,
    tld_alg: &str,
    extra_tld: &str,
) -> Hierarchy {
    let (root_ip, tld_ip) = (tiers.root, tiers.tld);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
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
        let file = write_zone(d, &origin, &records, leaf.algorithms, leaf.denial);
        tld_records.push_str(&format!(
            "{origin} NS ns.{origin}\nns.{origin} A {}\n",
            leaf.ip
        ));
        if !leaf.algorithms.is_empty() {
            tld_records.push_str(&ds_lines(&file));
        }
        files.push(file);
    }
    let tld = write_zone(d, "tld.", &tld_records, &[tld_alg], "nsec3");
    let root_records = format!(
        "@ SOA a.root-servers hostmaster 1 7200 3600 1209600 300\n@ NS a.root-servers\n\
         a.root-servers A {root_ip}\ntld. NS ns.tld.\nns.tld. A {tld_ip}\n{}",
        ds_lines(&tld)
    );
    let root = write_zone(d, ".", &root_records, &[root_alg], "nsec");
    let cfg = LoadedConfig::read(&root).unwrap();
    let (keys, _) = cfg.keys(true).unwrap();
    let ds = ds_record(&keys[0].dnskey_record(), DigestType::Sha256).unwrap();
    Hierarchy {
        dir,
        root,
        tld,
        leaves: files,
        root_ds: ds.rdata.clone(),
        root_ds_text: ds.to_string(),
    }
}

/// Servers shut down when dropped.
pub struct Running {
    pub rt: tokio::runtime::Runtime,
    pub handles: Vec<ServerHandle>,
}

impl Drop for Running {
    fn drop(&mut self) {
        for h in self.handles.drain(..) {
            self.rt.block_on(h.shutdown());
        }
    }
}

/// Serves `zones` on `addr` (UDP and TCP; with `tls`, DoT and DoH on port 0).
pub fn serve(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    zones: Vec<PathBuf>,
    addr: SocketAddr,
    tls: bool,
) -> ServerHandle {
    serve_at(rt, dir, zones, addr, tls, pqdns_core::time::now())
}

/// [`serve`] with the zones signed as if the time were `now` (UNIX seconds).
pub fn serve_at(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    zones: Vec<PathBuf>,
    addr: SocketAddr,
    tls: bool,
    now: u64,
) -> ServerHandle {
    let sources: Vec<ZoneSource> = zones.into_iter().map(ZoneSource::File).collect();
    let (catalog, _) = load_all(&sources, now).unwrap();
    let mut settings = Settings::new(dir.join("cert"));
    settings.udp = vec![addr];
    settings.tcp = vec![addr];
    // One resolver on 127.0.0.1 asks everything: no response-rate limiting.
    settings.rrl.rate = 0;
    if tls {
        settings.dot = vec![SocketAddr::new(addr.ip(), 0)];
        settings.doh = vec![SocketAddr::new(addr.ip(), 0)];
    }
    rt.block_on(Server::bind(
        ServerConfig {
            zones: sources,
            settings,
        },
        catalog,
    ))
    .unwrap()
}

/// A UDP port free on `ip` right now, so that UDP and TCP can share it (TC → TCP retry goes to
/// the same port, as with a real server).
pub fn free_port(ip: &str) -> u16 {
    let probe = std::net::UdpSocket::bind((ip, 0)).unwrap();
    probe.local_addr().unwrap().port()
}

/// 127.0.0.1 with a free port.
pub fn local() -> SocketAddr {
    SocketAddr::new([127, 0, 0, 1].into(), free_port("127.0.0.1"))
}

/// The root's DS as the only trust anchor.
pub fn anchors(h: &Hierarchy) -> TrustAnchors {
    let mut a = TrustAnchors::default();
    a.add_ds(Name::root(), h.root_ds.clone());
    a
}
