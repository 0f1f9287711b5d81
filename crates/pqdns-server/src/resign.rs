//! The next version of a served signed zone from a few changed RRsets (a dynamic update,
//! [`crate::update`]), at a cost in proportion to the change (issue 28):
//!
//! - **Signing**: `pqdns_core::dnssec::incremental::resign_changes` signs the changed RRsets,
//!   the SOA (serial by the `[signing] serial` policy) and the NSEC/NSEC3 records around the
//!   changed names, and returns the signed difference, which becomes the IXFR journal entry. The
//!   signing keys are read once per served version a load made (a load also runs the rollover
//!   steps due), not per change.
//! - **Memory**: the new version must not disturb the one being served (queries and outgoing
//!   transfers read it without locks), and copying a zone costs as much as walking it. So each
//!   updated zone has a second copy: the version before the last change, which the catalogs
//!   that served it share until they are dropped. At the next change it is ours alone, is
//!   brought up to the served version by the journal's changes since its serial (the last
//!   change, usually) and becomes the next version in place. Only when it is still in use (a
//!   long outgoing AXFR) is the served version copied instead, as after each load. An updated
//!   zone thus takes twice its memory.
//! - **Durability** ([`crate::journal_file`]): the difference is appended to the journal file
//!   and synced before the new version is served (and the update answered); the zone and
//!   journal are written whole instead when what was appended since they were last written
//!   whole outgrows what was written whole then (so writing costs at most twice the changes'
//!   size over time, and a start replays no more than it reads anyway), or when the file does
//!   not end at the served version.
//! - A change the incremental signer refuses (a rollover step due, ZONEMD, MTL keys, a new
//!   negative TTL) is signed as a reload signs ([`crate::zones`]), from the served version's
//!   data.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use pqdns_core::atomic_file::{write_atomic, FileMode};
use pqdns_core::config::{ConfigError, LoadedConfig, SigningConfig};
use pqdns_core::dnssec::incremental::{
    apply_to_unsigned, resign_changes, IncrementalError, RrsetChange,
};
use pqdns_core::dnssec::keyfile::ZoneKey;
use pqdns_core::serial::Serial;
use pqdns_core::wire::rdata::Soa;
use pqdns_core::{Name, RrType, Zone};
use tracing::{debug, info};

use crate::catalog::{Catalog, ServedZone};
use crate::crash_point::{self, CrashPoint};
use crate::journal::Change;
use crate::journal_file;
use crate::update::{self, Updatable};
use crate::zones::{self, LoadError};

/// Makes the next versions of updated zones; one change at a time (the caller holds the lock
/// on catalog changes).
#[derive(Debug, Default)]
pub(crate) struct Resigner {
    zones: Mutex<HashMap<Name, Versions>>,
}

/// What an incremental signer (this one for UPDATEs, [`crate::inline_signing`] for IXFRs)
/// keeps of one zone between changes.
pub(crate) struct Versions {
    /// The version it made last (served, unless a load replaced it since).
    pub(crate) current: Arc<ServedZone>,
    /// The version before, to become the next one once no catalog serves it.
    pub(crate) retired: Option<Arc<ServedZone>>,
    /// The signing keys and the published DNSKEY RDATA of `current`'s load.
    pub(crate) keys: Arc<(Vec<ZoneKey>, Vec<Vec<u8>>)>,
    /// Bytes appended to the outgoing journal file since it was last written whole.
    pub(crate) appended: u64,
}

impl std::fmt::Debug for Versions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Versions")
            .field("serial", &self.current.zone.soa_serial())
            .field("appended", &self.appended)
            .finish_non_exhaustive()
    }
}

impl Resigner {
    /// The next version of the zone `setup` describes, served in `catalog`, with `changes`
    /// (not empty) made, signed and on disk.
    ///
    /// # Errors
    /// [`LoadError`] for the description, the keys, signing or writing; nothing is served
    /// then, and the served version is untouched.
    pub(crate) fn apply(
        &self,
        setup: &Updatable,
        catalog: &Catalog,
        changes: &[RrsetChange],
        now: u64,
    ) -> Result<Arc<ServedZone>, LoadError> {
        let cfg = zones::read_config(&setup.source)?;
        let invalid = |message: &str| {
            LoadError::Config(ConfigError::Invalid {
                path: cfg.path.clone(),
                message: message.into(),
            })
        };
        let signing = cfg.signing().ok_or_else(|| invalid("no [signing] table"))?;
        let served = catalog
            .shared(&cfg.origin)
            .ok_or_else(|| invalid("the zone is not served"))?;
        let mut zones = self.zones.lock().unwrap_or_else(PoisonError::into_inner);
        let mine = zones
            .remove(&cfg.origin)
            .filter(|v| Arc::ptr_eq(&v.current, &served));
        let (keys, retired, appended) = match mine {
            Some(v) => (v.keys, v.retired, v.appended),
            None => {
                let rollover = cfg.rollover_keys(signing, &served.zone, now)?;
                (Arc::new((rollover.signing, rollover.published)), None, 0)
            }
        };
        let old = served.zone.soa_serial();
        let unsigned = changes
            .iter()
            .find(|c| c.owner == cfg.origin && c.rtype == RrType::SOA)
            .and_then(|c| c.new.as_ref())
            .and_then(|(_, rdatas)| Soa::parse(rdatas.first()?).map(|soa| soa.serial))
            .unwrap_or(old);
        let serial = signing.serial.next(unsigned, Some(old), now);
        if Serial(serial).is_newer_than(Serial(old)) && !signing.zonemd {
            let mut policy = cfg.policy(signing, now)?;
            policy.published_dnskeys = Some(keys.1.clone());
            let jitter = cfg.jitter(signing)?;
            let mut zone = working_copy(retired, &served);
            match resign_changes(&mut zone, changes, serial, &keys.0, &policy, jitter) {
                Ok(signed) => {
                    let (signatures, denial) = (signed.signatures, signed.denial_records);
                    let change = Change::from_records(signed.ixfr_records())
                        .ok_or_else(|| invalid("the signed difference has no SOA"))?;
                    let mut new = ServedZone::new(zone);
                    new.journal = served.journal.with(change);
                    new.updatable.clone_from(&served.updatable);
                    let appended = persist(Some(setup), &cfg, signing, &new, appended)?;
                    crash_point::reached(CrashPoint::JournalSynced);
                    debug!(zone = %cfg.origin, serial, signatures, denial, appended, "re-signed incrementally");
                    let new = Arc::new(new);
                    zones.insert(
                        cfg.origin.clone(),
                        Versions {
                            current: Arc::clone(&new),
                            retired: Some(served),
                            keys,
                            appended,
                        },
                    );
                    return Ok(new);
                }
                Err(IncrementalError::NotIncremental(reason)) => {
                    info!(zone = %cfg.origin, "signing the whole zone: {reason}");
                }
                Err(IncrementalError::Sign(error)) => {
                    return Err(LoadError::Sign {
                        file: setup.source.to_string(),
                        zone: cfg.origin.to_string(),
                        error,
                    })
                }
                Err(other) => return Err(invalid(&other.to_string())),
            }
        }
        drop(zones);
        whole(setup, &cfg, signing, &served, changes, now, catalog)
    }
}

/// Writes `<zone>.serial`, the newest signed serial served (never served lower after a
/// restart), atomically.
///
/// # Errors
/// [`LoadError::WriteState`] if the file cannot be written.
pub(crate) fn write_serial(
    cfg: &LoadedConfig,
    signing: &SigningConfig,
    serial: u32,
) -> Result<(), LoadError> {
    let path = cfg.serial_path(signing);
    write_atomic(&path, format!("{serial}\n").as_bytes(), FileMode::Public)
        .map_err(|error| LoadError::WriteState { path, error })
}

/// The zone of `retired`, the version before `served`, brought up to `served` by the
/// journal's changes since it, when no catalog shares it any more; else a copy of `served`'s.
pub(crate) fn working_copy(retired: Option<Arc<ServedZone>>, served: &ServedZone) -> Zone {
    if let Some(old) = retired.and_then(|r| Arc::try_unwrap(r).ok()) {
        let mut zone = old.zone;
        let caught_up = served
            .journal
            .since(zone.soa_serial())
            .is_some_and(|since| since.iter().all(|c| c.replay(&mut zone)));
        if caught_up && zone.soa_serial() == served.zone.soa_serial() {
            return zone;
        }
    }
    info!(
        zone = %served.zone.origin,
        "copying the served version to change (the first change since a load, or the \
         version before is still in use)"
    );
    served.zone.clone()
}

/// Makes `new` durable: the `.dynamic` record (of an updated zone, `setup`), then its last change appended to the journal
/// file (synced) while what was appended since the last whole write (`appended` bytes) is no
/// more than what that write wrote, else the zone and journal written whole (and the serial).
/// Returns the bytes appended since the last whole write.
///
/// # Errors
/// [`LoadError::WriteState`] naming the file.
pub(crate) fn persist(
    setup: Option<&Updatable>,
    cfg: &LoadedConfig,
    signing: &SigningConfig,
    new: &ServedZone,
    appended: u64,
) -> Result<u64, LoadError> {
    if let Some(setup) = setup {
        setup.mark(cfg, signing)?;
        crash_point::reached(CrashPoint::Marked);
    }
    let paths = cfg.persisted_paths(signing);
    let serial = new.zone.soa_serial();
    if let Some(change) = new.journal.changes().last().filter(|c| c.to == serial) {
        let size = |path| std::fs::metadata(path).map_or(0, |m| m.len());
        let whole = (size(&paths.0) + size(&paths.1)).saturating_sub(appended);
        if appended <= whole {
            match journal_file::append(&paths.1, change) {
                Ok(Some(bytes)) => return Ok(appended + bytes),
                Ok(None) => {}
                Err(error) => {
                    return Err(LoadError::WriteState {
                        path: paths.1,
                        error,
                    })
                }
            }
        }
    }
    info!(zone = %cfg.origin, serial, "writing the zone and its journal whole");
    write_serial(cfg, signing, serial)?;
    zones::write_persisted(new, &paths, Some(CrashPoint::ServedWritten))
        .map_err(|(path, error)| LoadError::WriteState { path, error })?;
    Ok(0)
}

/// The next version of `served` with `changes`, signed whole as a reload signs it (and
/// written whole).
fn whole(
    setup: &Updatable,
    cfg: &LoadedConfig,
    signing: &SigningConfig,
    served: &ServedZone,
    changes: &[RrsetChange],
    now: u64,
    catalog: &Catalog,
) -> Result<Arc<ServedZone>, LoadError> {
    let file = cfg.read_zone()?;
    let mut data = update::served_data(&served.zone, &file);
    apply_to_unsigned(&mut data, changes);
    setup.mark(cfg, signing)?;
    let (new, _) = zones::sign_data(&setup.source, cfg, data, &setup.base, now, Some(catalog))?;
    Ok(Arc::new(new))
}
