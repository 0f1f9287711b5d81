//! Dynamic updates (RFC 2136, authenticated by TSIG per RFC 3007) of the zones served, with
//! online re-signing.
//!
//! An UPDATE goes through the request pipeline like a query: its TSIG is verified first
//! (`request::verify_tsig`; a bad one is answered NOTAUTH there) and the response is signed
//! last. Then, in this order (the RCODE of the first failure is the answer):
//!
//! 1. the zone section ([`Update::from_view`]): FORMERR, NOTAUTH for a zone not served here;
//! 2. authorisation: a zone without `update_policy`, an unsigned UPDATE, or one signed with
//!    a key the policy does not name: REFUSED;
//! 3. the prescan (RFC 2136 §3.4.1): NOTZONE, FORMERR; DNSSEC records the signer manages:
//!    REFUSED; then the policy for each update record ([`UpdatePolicy::allows`]): REFUSED;
//! 4. under the server's lock on catalog changes (updates are applied one at a time, in the
//!    order they take it, and never beside a reload), the policy again (a reload may have
//!    changed it) and the prerequisites against the zone as served (§3.2): NXDOMAIN, YXDOMAIN,
//!    NXRRSET, YXRRSET;
//! 5. the update is applied (§3.4.2) to the unsigned form of the names it names (with their
//!    ancestors and first descendant, for the content rules; CDS, CDNSKEY and ZONEMD records
//!    in it change nothing: the signer makes them); if that changed nothing, the answer is
//!    NOERROR and nothing else happens. Otherwise the changed RRsets go to
//!    `resign.rs`: the served zone's next version is made from them incrementally (the
//!    changed RRsets, the SOA with a new serial by the `[signing] serial` policy and the
//!    NSEC/NSEC3 records around the changed names signed anew, nothing else touched), its
//!    signed difference is appended to `<state_dir>/<zone>.journal` and synced
//!    (`journal_file.rs`), and only then is the new version served, NOTIFY sent to the
//!    secondaries and NOERROR returned. A change that needs the whole zone signed (a key
//!    rollover step due, ZONEMD, MTL keys, a new negative TTL) is signed as a reload signs,
//!    and the zone and journal are written whole. A failure on the way is SERVFAIL and the
//!    served zone stays as it was.
//!
//! **Durability across restarts and reloads**: the updated data lives in the served version:
//! `<zone>.served` (written whole at each load, and when the journal's appended part outgrows
//! it) and the changes appended to `<zone>.journal` after it, which a start replays
//! ([`crate::zones`]). `<state_dir>/<zone>.dynamic` records the SHA-256 of the zone data the
//! updates were applied to (the zone file or inline `records` as read, `$INCLUDE`s included,
//! in master-file form). While the zone data still reads the same, a load (start, SIGHUP,
//! refresh) takes the data of the served (or persisted) version, less what the signer makes,
//! with the zone file's own DNSKEY, CDS and CDNSKEY records, so an update is never reverted by
//! a restart; a start that cannot read that version then fails, naming the file. When the zone
//! data has changed (the operator edited the file) the file wins: the `.dynamic` file is
//! removed and a warning names it, so edit the file only with the updates in it, or accept
//! that they are dropped. (A `.dynamic` file of an earlier version, holding the data itself,
//! is still read.) Only signed zones (with a `[signing]` table, whose state directory holds
//! the files) accept updates; their served version and journal are kept whatever `persist`
//! says.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use pqdns_core::atomic_file::{write_atomic, FileMode};
use pqdns_core::config::{ConfigError, LoadedConfig, SigningConfig};
use pqdns_core::dnssec::incremental::RrsetChange;
use pqdns_core::update::policy::UpdatePolicy;
use pqdns_core::update::Update;
use pqdns_core::wire::query::Query;
use pqdns_core::wire::Rcode;
use pqdns_core::zone::{Node, RRset};
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::{Name, RrType, Zone};
use sha2::{Digest, Sha256};
use tracing::{info, warn};

use crate::answer::Outcome;
use crate::catalog::Catalog;
use crate::cookie::CookieCheck;
use crate::finish;
use crate::notify;
use crate::request::{Auth, Exchange, Signer};
use crate::resign::Resigner;
use crate::zones::{LoadError, ZoneSource};

/// The first line of a `.dynamic` file, before the hex SHA-256 of the zone data it updates.
const HEADER: &str = "; pqdns: zone data after dynamic updates (RFC 2136) of data with sha256 ";
/// The second line of a `.dynamic` file that holds no data: the data is the served version's.
const MARK: &str = "; the updated data is the served version: <zone>.served and <zone>.journal";
/// Types the signer makes (or takes from the zone file) at a name: not part of the unsigned data
/// an update sees or a load takes from a served version.
const SIGNER_MADE: [RrType; 6] = [
    RrType::DNSKEY,
    RrType::NSEC,
    RrType::NSEC3PARAM,
    RrType::CDS,
    RrType::CDNSKEY,
    RrType::ZONEMD,
];

/// A zone that accepts dynamic updates: where its description is and who may update it.
#[derive(Debug)]
pub struct Updatable {
    pub(crate) source: ZoneSource,
    policy: UpdatePolicy,
    /// SHA-256 (hex) of the zone data this version was loaded from (the `.dynamic` record).
    pub(crate) base: String,
    /// Whether the `.dynamic` record was written since this version was loaded.
    marked: AtomicBool,
}

impl Updatable {
    /// The update settings of the zone `cfg` describes (read from `source`, its zone data of
    /// SHA-256 `base`); `None` without `update_policy`.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for a rule that does not parse, or a policy on a zone without
    /// `[signing]`.
    pub(crate) fn of(
        source: &ZoneSource,
        cfg: &LoadedConfig,
        base: &str,
    ) -> Result<Option<Arc<Updatable>>, LoadError> {
        if cfg.config.update_policy.is_empty() {
            return Ok(None);
        }
        let invalid = |message: String| {
            LoadError::Config(ConfigError::Invalid {
                path: cfg.path.clone(),
                message,
            })
        };
        if cfg.signing().is_none() {
            return Err(invalid(
                "update_policy needs a [signing] table (the updated data is kept in its \
                 state directory)"
                    .into(),
            ));
        }
        let policy = UpdatePolicy::parse(&cfg.config.update_policy, &cfg.origin)
            .map_err(|e| invalid(format!("update_policy: {e}")))?;
        Ok(Some(Arc::new(Updatable {
            source: source.clone(),
            policy,
            base: base.to_string(),
            marked: AtomicBool::new(false),
        })))
    }

    /// Writes the `.dynamic` record (atomically, synced) that the served version holds updates
    /// of zone data with this version's digest, once per load.
    ///
    /// # Errors
    /// [`LoadError::WriteState`].
    pub(crate) fn mark(
        &self,
        cfg: &LoadedConfig,
        signing: &SigningConfig,
    ) -> Result<(), LoadError> {
        if self.marked.load(Ordering::SeqCst) {
            return Ok(());
        }
        let path = dynamic_path(cfg, signing);
        let text = format!("{HEADER}{}\n{MARK}\n", self.base);
        write_atomic(&path, text.as_bytes(), FileMode::Public)
            .map_err(|error| LoadError::WriteState { path, error })?;
        self.marked.store(true, Ordering::SeqCst);
        Ok(())
    }
}

/// `<state_dir>/<zone>.dynamic`: the zone's unsigned data as dynamic updates left it.
fn dynamic_path(cfg: &LoadedConfig, signing: &SigningConfig) -> PathBuf {
    let (served, _) = cfg.persisted_paths(signing);
    served.with_extension("dynamic")
}

/// SHA-256 of `zone` in master-file form, lowercase hex.
fn digest(zone: &Zone) -> String {
    let mut text = Vec::new();
    // Writing to memory does not fail.
    let _ = zone.write_master_file(&mut text);
    Sha256::digest(&text)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The zone data to serve for `cfg`, and the digest of its zone file's (or inline records')
/// data: while that digest is the one the `.dynamic` record names, the data of `served` (the
/// served or persisted version) less what the signer makes, with the zone file's own DNSKEY,
/// CDS and CDNSKEY records; else the zone file's (see the module documentation).
///
/// # Errors
/// [`LoadError::Config`] for the zone data; [`LoadError::State`] for a `.dynamic` file that
/// cannot be read, parsed or removed, or whose updates are in a served version that could not
/// be read.
pub(crate) fn read_data(
    cfg: &LoadedConfig,
    served: Option<&Zone>,
) -> Result<(Zone, String), LoadError> {
    let source = cfg.read_zone()?;
    let base = digest(&source);
    let Some(signing) = cfg.signing() else {
        return Ok((source, base));
    };
    let path = dynamic_path(cfg, signing);
    let state = |message: String| LoadError::State {
        path: path.clone(),
        message,
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((source, base)),
        Err(e) => return Err(state(e.to_string())),
    };
    if text.lines().next().and_then(|l| l.strip_prefix(HEADER)) != Some(base.as_str()) {
        warn!(
            zone = %cfg.origin, file = %path.display(),
            "the zone data changed since the last dynamic update: it is served, and the \
             updates kept in the file are dropped (file removed)"
        );
        std::fs::remove_file(&path).map_err(|e| state(e.to_string()))?;
        return Ok((source, base));
    }
    if text.lines().nth(1) == Some(MARK) {
        let served = served.ok_or_else(|| {
            state(
                "the updates are in the served version and journal of the state directory, \
                 which could not be read (see the warning before): restore them, or delete \
                 this file to serve the zone file without the updates"
                    .into(),
            )
        })?;
        info!(zone = %cfg.origin, file = %path.display(), "zone data as dynamic updates left it");
        return Ok((served_data(served, &source), base));
    }
    let records = ZoneFileReader::new(Some(cfg.origin.clone()), None)
        .read_str(&text, &path.display().to_string())
        .map_err(|e| state(e.to_string()))?;
    let zone = Zone::from_records(cfg.origin.clone(), records).map_err(|e| state(e.to_string()))?;
    info!(zone = %cfg.origin, file = %path.display(), "zone data as dynamic updates left it");
    Ok((zone, base))
}

/// The unsigned form of `node`: its RRsets but those the signer makes, without RRSIGs.
fn unsigned(node: &Node) -> Node {
    node.iter()
        .filter(|(t, _)| !SIGNER_MADE.contains(t))
        .map(|(t, s)| {
            let set = RRset {
                ttl: s.ttl,
                rdatas: s.rdatas.clone(),
                rrsigs: Vec::new(),
                rrsig_ttl: 0,
            };
            (*t, set)
        })
        .collect()
}

/// The data of the signed `served` with the records of the signer's types from `file`.
pub(crate) fn served_data(served: &Zone, file: &Zone) -> Zone {
    let mut zone = Zone::new(served.origin.clone());
    for (name, node) in &served.nodes {
        let node = unsigned(node);
        if !node.is_empty() {
            zone.nodes.insert(name.clone(), node);
        }
    }
    for (name, node) in &file.nodes {
        for (t, set) in node.iter().filter(|(t, _)| SIGNER_MADE.contains(t)) {
            zone.nodes
                .entry(name.clone())
                .or_default()
                .insert(*t, set.clone());
        }
    }
    zone
}

/// The RRsets `u` changes in `zone` (signed, as served): the update applied (RFC 2136 §3.4.2)
/// to the unsigned form of the names it names, with the apex, their ancestors and the first
/// name below each (what the content rules of [`Zone::insert_checked`] look at).
pub(crate) fn changes(zone: &Zone, u: &Update) -> Vec<RrsetChange> {
    let owners: BTreeSet<&Name> = u.updates.iter().map(|r| &r.owner).collect();
    let mut view = Zone::new(zone.origin.clone());
    let mut copy = |name: &Name| {
        if let Some(node) = zone.nodes.get(name) {
            view.nodes.insert(name.clone(), unsigned(node));
        }
    };
    copy(&zone.origin);
    for owner in &owners {
        copy(owner);
        let mut cur = owner.parent();
        while let Some(a) = cur.filter(|a| a.is_subdomain_of(&zone.origin)) {
            copy(&a);
            cur = a.parent();
        }
        let below = zone
            .nodes
            .range((
                std::ops::Bound::Excluded(*owner),
                std::ops::Bound::Unbounded,
            ))
            .next()
            .filter(|(n, _)| n.is_subdomain_of(owner));
        if let Some((name, _)) = below {
            copy(name);
        }
    }
    let before = view.clone();
    u.apply(&mut view);
    let empty = Node::new();
    let mut changes = Vec::new();
    for owner in owners {
        let b = before.nodes.get(owner).unwrap_or(&empty);
        let a = view.nodes.get(owner).unwrap_or(&empty);
        let types: BTreeSet<RrType> = b.keys().chain(a.keys()).copied().collect();
        for rtype in types.into_iter().filter(|t| !SIGNER_MADE.contains(t)) {
            let (old, new) = (b.get(&rtype), a.get(&rtype));
            let same = match (old, new) {
                (Some(o), Some(n)) => {
                    o.ttl == n.ttl
                        && o.rdatas.len() == n.rdatas.len()
                        && o.rdatas.iter().all(|r| n.rdatas.contains(r))
                }
                (None, None) => true,
                _ => false,
            };
            if !same {
                changes.push(RrsetChange {
                    owner: owner.clone(),
                    rtype,
                    new: new.map(|s| (s.ttl, s.rdatas.clone())),
                });
            }
        }
    }
    changes
}

/// What applies updates: the lock every change of the served catalog takes (updates and
/// reloads), and where NOTIFY goes after an update.
#[derive(Debug)]
pub(crate) struct Updater {
    lock: Mutex<()>,
    /// Makes the next version of an updated zone.
    resigner: Resigner,
    notify: Vec<notify::Target>,
    /// The runtime NOTIFY tasks run on (UDP listener threads are not tokio's).
    runtime: Option<tokio::runtime::Handle>,
}

impl Updater {
    /// An updater announcing updated zones to `notify`; NOTIFY tasks run on the runtime this
    /// is called in (none outside one: no NOTIFY).
    pub(crate) fn new(notify: Vec<notify::Target>) -> Updater {
        Updater {
            lock: Mutex::new(()),
            resigner: Resigner::default(),
            notify,
            runtime: tokio::runtime::Handle::try_current().ok(),
        }
    }

    /// Holds the lock on catalog changes.
    pub(crate) fn lock(&self) -> MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The catalog being served and how to replace it.
pub(crate) trait Served {
    /// The catalog in force.
    fn current(&self) -> Arc<Catalog>;
    /// Serves `catalog` from now on.
    fn replace(&self, catalog: Catalog);
    /// Whether the zone's updates are held (`pqdns-ctl zone-freeze`).
    fn frozen(&self, zone: &Name) -> bool;
}

/// Handles the UPDATE `q` (signed by `signer`, if at all) and writes the response into
/// `out[base..]`: the header and zone section with the RCODE (and OPT when the request had
/// one), signed last when the request was.
pub(crate) fn respond(
    updater: &Updater,
    served: &impl Served,
    q: &Query<'_>,
    signer: Option<Signer<'_>>,
    x: &Exchange,
    out: &mut Vec<u8>,
    base: usize,
) -> Outcome {
    let now = pqdns_core::time::now();
    let rcode = match update(updater, served, q, signer, now) {
        Ok(()) => Rcode::NOERROR,
        Err(rcode) => rcode,
    };
    let catalog = served.current();
    let w = finish::open(&catalog, q, &Auth::none(), x, out, base);
    let mut len = w.finish(rcode);
    if let Some(s) = signer {
        len = s.sign(out, base, now);
    }
    Outcome {
        len,
        rcode,
        truncated: false,
        qtype: Some(q.qtype),
        error: None,
        cache_ttl: None,
        cookie: CookieCheck::Absent,
    }
}

/// Steps 1–5 of the module documentation; `Err` carries the RCODE.
fn update(
    updater: &Updater,
    served: &impl Served,
    q: &Query<'_>,
    signer: Option<Signer<'_>>,
    now: u64,
) -> Result<(), Rcode> {
    let u = Update::from_view(&q.message)?;
    // Held while the zone is frozen (`pqdns-ctl zone-freeze`): REFUSED, as BIND answers.
    if served.frozen(&u.zone) {
        return Err(Rcode::REFUSED);
    }
    let setup = served
        .current()
        .zone(&u.zone)
        .ok_or(Rcode::NOTAUTH)?
        .updatable
        .clone()
        .ok_or(Rcode::REFUSED)?;
    let key = signer.ok_or(Rcode::REFUSED)?.key.name().to_lowercase();
    if !setup.policy.keys().any(|k| *k == key) {
        return Err(Rcode::REFUSED);
    }
    u.prescan(&u.zone)?;
    authorised(&served.current(), &u, &key)?;
    let _applying = updater.lock();
    // Again with the catalog this update applies to: a reload may have changed the policy.
    let catalog = served.current();
    let setup = authorised(&catalog, &u, &key)?;
    let zone = catalog.zone(&u.zone).ok_or(Rcode::NOTAUTH)?;
    u.check_prerequisites(&zone.zone)?;
    let changes = changes(&zone.zone, &u);
    if changes.is_empty() {
        return Ok(());
    }
    let new = match updater.resigner.apply(&setup, &catalog, &changes, now) {
        Ok(new) => new,
        Err(error) => {
            warn!(zone = %u.zone, %key, %error, "dynamic update not applied (SERVFAIL)");
            return Err(Rcode::SERVFAIL);
        }
    };
    info!(
        zone = %u.zone, %key, serial = new.zone.soa_serial(), records = u.updates.len(),
        rrsets = changes.len(), "dynamic update applied"
    );
    served.replace(catalog.with_shared(new));
    if let (Some(runtime), false) = (&updater.runtime, updater.notify.is_empty()) {
        let _entered = runtime.enter();
        notify::spawn_zone(&served.current(), &u.zone, &updater.notify);
    }
    Ok(())
}

/// The update settings of `u`'s zone in `catalog`, if its policy lets `key` make every change
/// of `u`; else NOTAUTH (the zone is not served) or REFUSED.
fn authorised(catalog: &Catalog, u: &Update, key: &Name) -> Result<Arc<Updatable>, Rcode> {
    let setup = catalog
        .zone(&u.zone)
        .ok_or(Rcode::NOTAUTH)?
        .updatable
        .clone()
        .ok_or(Rcode::REFUSED)?;
    if !setup.policy.allows(key, &u.updates) {
        return Err(Rcode::REFUSED);
    }
    Ok(setup)
}
