//! The resolver tests' hierarchy ([`pqdns_test_support::hierarchy`]): the root signed with
//! ECDSAP256SHA256, `tld.` with ML-DSA-44 (NSEC3), and by default leaves signed with
//! Falcon-512 (NSEC), SPHINCS+-SHA2-128s (NSEC3), ECDSAP256SHA256 + ML-DSA-44 (dual) and one
//! unsigned. In iterative mode each tier has its own loopback address, all on one port.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use pqdns_core::Name;
use pqdns_resolver::TrustAnchors;
use pqdns_server::ServerHandle;
use pqdns_test_support::hierarchy::{serve_zones, write_hierarchy};
pub(crate) use pqdns_test_support::hierarchy::{Leaf, Tiers};
use pqdns_test_support::ports::free_dual_port;

/// Addresses of the three server tiers in iterative mode (one loopback address each).
pub(crate) const ROOT_IP: &str = "127.0.0.2";
pub(crate) const TLD_IP: &str = "127.0.0.3";
pub(crate) const LEAF_IP: &str = "127.0.0.4";

/// The default leaves.
pub(crate) const LEAVES: &[Leaf] = &[
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

/// The default tier addresses.
pub(crate) const TIERS: Tiers = Tiers {
    root: ROOT_IP,
    tld: TLD_IP,
};

/// The zone descriptions of a hierarchy (in a temporary directory) and the root's DS.
pub(crate) struct Hierarchy {
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
pub(crate) fn build() -> Hierarchy {
    build_with(LEAVES, "ECDSAP256SHA256", "ML-DSA-44", "")
}

/// A hierarchy with `leaves`, the root signed with `root_alg`, `tld.` with `tld_alg`, and
/// `extra_tld` added to `tld.`.
pub(crate) fn build_with(
    leaves: &[Leaf],
    root_alg: &str,
    tld_alg: &str,
    extra_tld: &str,
) -> Hierarchy {
    build_at(TIERS, leaves, root_alg, tld_alg, extra_tld)
}

/// [`build_with`] with the root and `tld.` servers at `tiers`.
pub(crate) fn build_at(
    tiers: Tiers,
    leaves: &[Leaf],
    root_alg: &str,
    tld_alg: &str,
    extra_tld: &str,
) -> Hierarchy {
    let dir = tempfile::tempdir().unwrap();
    let files = write_hierarchy(dir.path(), tiers, leaves, root_alg, tld_alg, extra_tld);
    Hierarchy {
        dir,
        root: files.root,
        tld: files.tld,
        leaves: files.leaves,
        root_ds: files.root_ds.rdata.clone(),
        root_ds_text: files.root_ds.to_string(),
    }
}

/// Servers shut down when dropped.
pub(crate) struct Running {
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
pub(crate) fn serve(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    zones: Vec<PathBuf>,
    addr: SocketAddr,
    tls: bool,
) -> ServerHandle {
    serve_at(rt, dir, zones, addr, tls, pqdns_core::time::now())
}

/// [`serve`] with the zones signed as if the time were `now` (UNIX seconds).
pub(crate) fn serve_at(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    zones: Vec<PathBuf>,
    addr: SocketAddr,
    tls: bool,
    now: u64,
) -> ServerHandle {
    serve_zones(rt, &dir.join("cert"), zones, addr, tls, now)
}

/// 127.0.0.1 with a port free for UDP and TCP (TC → TCP retry goes to the same port, as with a
/// real server).
pub(crate) fn local() -> SocketAddr {
    SocketAddr::new([127, 0, 0, 1].into(), free_dual_port())
}

/// The root's DS as the only trust anchor.
pub(crate) fn anchors(h: &Hierarchy) -> TrustAnchors {
    let mut a = TrustAnchors::default();
    a.add_ds(Name::root(), h.root_ds.clone());
    a
}

/// Serves a hierarchy on `port`: the root and `tld.` at `tiers`, every leaf but the last at
/// `leaf_ip`, and the last at `expired_ip` with signatures made 30 days ago (valid 14 days:
/// expired). The handles, root first.
pub(crate) fn serve_with_expired_last(
    rt: &tokio::runtime::Runtime,
    h: &Hierarchy,
    tiers: Tiers,
    leaf_ip: &str,
    expired_ip: &str,
    port: u16,
) -> Vec<ServerHandle> {
    let at = |ip: &str| SocketAddr::new(ip.parse().unwrap(), port);
    let d = h.dir.path();
    let (expired, normal) = h.leaves.split_last().unwrap();
    let month_ago = pqdns_core::time::now() - 30 * 86_400;
    vec![
        serve(rt, d, vec![h.root.clone()], at(tiers.root), false),
        serve(rt, d, vec![h.tld.clone()], at(tiers.tld), false),
        serve(rt, d, normal.to_vec(), at(leaf_ip), false),
        serve_at(
            rt,
            d,
            vec![expired.clone()],
            at(expired_ip),
            false,
            month_ago,
        ),
    ]
}
