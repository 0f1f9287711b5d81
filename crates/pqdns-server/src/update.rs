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
//! 5. the update is applied to the zone's unsigned data (§3.4.2); if that changed nothing, the
//!    answer is NOERROR and nothing else happens. Otherwise the zone is signed as a reload
//!    signs it (`zones::sign_data`): a new SOA serial by the `[signing] serial` policy, the
//!    signatures of unchanged RRsets kept, new ones only for the changed RRsets, the SOA and
//!    the NSEC/NSEC3 records whose content changed (`dnssec::sign::resign_zone`; the chain
//!    is recomputed, which costs hashing but no signing), the IXFR journal extended and
//!    `.served`/`.journal`/`.serial` written; then the unsigned data is written to
//!    `<state_dir>/<zone>.dynamic` (atomically, fsync'd): only then is the new zone served,
//!    NOTIFY sent to the secondaries and NOERROR returned. A failure on the way is SERVFAIL
//!    and the served zone stays as it was.
//!
//! **Durability across restarts and reloads**: the `.dynamic` file starts with the SHA-256 of
//! the zone data the updates were applied to (the zone file or inline `records` as read,
//! `$INCLUDE`s included, in master-file form). While the zone data still reads the same, a
//! load (start, SIGHUP, refresh) serves the `.dynamic` data instead, so an update is never
//! reverted by a restart. When the zone data has changed (the operator edited the file) the
//! file wins: the `.dynamic` file is removed and a warning names it, so edit the file only
//! with the updates in it, or accept that they are dropped. Only signed zones (with a
//! `[signing]` table, whose state directory holds the file) accept updates.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use pqdns_core::atomic_file::{AtomicFile, FileMode};
use pqdns_core::config::{ConfigError, LoadedConfig, SigningConfig};
use pqdns_core::update::policy::UpdatePolicy;
use pqdns_core::update::Update;
use pqdns_core::wire::query::Query;
use pqdns_core::wire::Rcode;
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::{Name, Zone};
use sha2::{Digest, Sha256};
use tracing::{info, warn};

use crate::answer::Outcome;
use crate::catalog::{Catalog, ServedZone};
use crate::cookie::CookieCheck;
use crate::finish;
use crate::notify;
use crate::request::{Auth, Exchange, Signer};
use crate::zones::{self, LoadError, ZoneSource};

/// The first line of a `.dynamic` file, before the hex SHA-256 of the zone data it updates.
const HEADER: &str = "; pqdns: zone data after dynamic updates (RFC 2136) of data with sha256 ";

/// A zone that accepts dynamic updates: where its description is and who may update it.
#[derive(Debug)]
pub struct Updatable {
    source: ZoneSource,
    policy: UpdatePolicy,
}

impl Updatable {
    /// The update settings of the zone `cfg` describes (read from `source`); `None` without
    /// `update_policy`.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for a rule that does not parse, or a policy on a zone without
    /// `[signing]`.
    pub(crate) fn of(
        source: &ZoneSource,
        cfg: &LoadedConfig,
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
        })))
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
/// data: the `.dynamic` data while that digest is the one it was made from, else the zone
/// file's (see the module documentation).
///
/// # Errors
/// [`LoadError::Config`] for the zone data; [`LoadError::State`] for a `.dynamic` file that
/// cannot be read, parsed or removed.
pub(crate) fn read_data(cfg: &LoadedConfig) -> Result<(Zone, String), LoadError> {
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
    let records = ZoneFileReader::new(Some(cfg.origin.clone()), None)
        .read_str(&text, &path.display().to_string())
        .map_err(|e| state(e.to_string()))?;
    let zone = Zone::from_records(cfg.origin.clone(), records).map_err(|e| state(e.to_string()))?;
    info!(zone = %cfg.origin, file = %path.display(), "zone data as dynamic updates left it");
    Ok((zone, base))
}

/// Writes `zone` to `path` as data updated from zone data of digest `base` (atomically).
fn write_data(path: &Path, base: &str, zone: &Zone) -> std::io::Result<()> {
    let mut file = AtomicFile::create(path, FileMode::Public)?;
    writeln!(file, "{HEADER}{base}")?;
    zone.write_master_file(&mut file)?;
    file.commit()
}

/// What applies updates: the lock every change of the served catalog takes (updates and
/// reloads), and where NOTIFY goes after an update.
#[derive(Debug)]
pub(crate) struct Updater {
    lock: Mutex<()>,
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
    let new = match apply(&setup, &u, &catalog, now) {
        Ok(Some(new)) => new,
        Ok(None) => return Ok(()),
        Err(error) => {
            warn!(zone = %u.zone, %key, %error, "dynamic update not applied (SERVFAIL)");
            return Err(Rcode::SERVFAIL);
        }
    };
    info!(
        zone = %u.zone, %key, serial = new.zone.soa_serial(), records = u.updates.len(),
        "dynamic update applied"
    );
    served.replace(catalog.with_zone(new));
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

/// Applies `u` to the zone's unsigned data, signs and persists the result; `None` when the
/// update changed nothing.
fn apply(
    setup: &Updatable,
    u: &Update,
    catalog: &Catalog,
    now: u64,
) -> Result<Option<ServedZone>, LoadError> {
    let cfg = zones::read_config(&setup.source)?;
    let (mut data, base) = read_data(&cfg)?;
    let before = data.clone();
    u.apply(&mut data);
    if data == before {
        return Ok(None);
    }
    let (new, _) = zones::sign_data(&setup.source, &cfg, data.clone(), now, Some(catalog))?;
    if let Some(signing) = cfg.signing() {
        let path = dynamic_path(&cfg, signing);
        write_data(&path, &base, &data).map_err(|error| LoadError::WriteState { path, error })?;
    }
    Ok(Some(new))
}
