//! Inline signing of a secondary zone (issue 27; "bump in the wire", as BIND's
//! `inline-signing` and Knot's signing of a secondary zone): the version transferred from the
//! primaries (unsigned) is kept beside the signed version served, and an incoming IXFR (RFC
//! 1995) is signed at a cost in proportion to the change.
//!
//! - **Incremental** (`InlineSigner::incremental`): the IXFR's differences name the
//!   RRsets that changed; their new content in the transferred version goes to
//!   `pqdns_core::dnssec::incremental::resign_changes`, which re-signs them, the SOA (the
//!   signed serial by the `[signing] serial` policy, independent of the primary's) and the
//!   NSEC/NSEC3 records around the changed names, and returns the signed difference: the
//!   outgoing IXFR journal entry (RFC 1995 §4). As for dynamic updates (`resign.rs`),
//!   the version before the last change becomes the next one in place once no catalog serves
//!   it, and the signing keys are read once per version a load or a whole signing made.
//! - **Whole signing** where the incremental signer refuses (a DNSKEY or other record the
//!   signer makes in the primary's change, a rollover step due, ZONEMD, MTL keys, online
//!   signing, a serial policy that keeps the primary's), and for every AXFR: the transferred
//!   version is signed as a master file would be ([`crate::zones::sign_transferred`]).
//! - **Durability**, before the new version is served, in this order:
//!   1. the unsigned differences appended to `<zone>.xfr-journal` beside the stored copy
//!      `<zone>.xfr` (the format of `journal_file.rs`, each entry synced; the copy and a
//!      fresh journal written whole after an AXFR, a whole signing, or when the journal
//!      outgrows the copy). A start reads the copy and replays the journal
//!      (`replay_stored`), so the next IXFR is asked from the last unsigned serial signed;
//!   2. the signed difference appended to the outgoing journal `<zone>.journal` (synced) after
//!      `<zone>.served`, as a dynamic update's (`[signing] persist`), and the signed serial
//!      to `<zone>.serial`, so a restart never serves a lower one (RFC 1982);
//!   3. the mapping of the unsigned serial to the signed serial, `<zone>.inline` (one line
//!      `unsigned U signed S`, written atomically; [`read_map`]).
//!
//!   A crash between 1 and 2 leaves an unsigned copy ahead of the signed version: a start
//!   signs the stored copy again (as every start does), so the change is served, under a
//!   newer signed serial. The map then still names the version before, which the start's
//!   signing replaces.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use pqdns_core::atomic_file::{write_atomic, AtomicFile, FileMode};
use pqdns_core::config::{ConfigError, LoadedConfig, SigningConfig, SigningMode};
use pqdns_core::dnssec::incremental::{resign_changes, IncrementalError, RrsetChange};
use pqdns_core::serial::Serial;
use pqdns_core::{Name, Record, RrType, Zone};
use tracing::{debug, info, warn};

use crate::catalog::{Catalog, ServedZone};
use crate::journal::{Change, Journal};
use crate::journal_file;
use crate::resign::{self, Versions};
use crate::zones::{self, LoadError, ZoneSource};

/// Types a primary's change may not touch for the change to be signed incrementally: the
/// signer makes them (RFC 4034, RFC 5155, RFC 7344, RFC 8976), so a transferred version
/// carrying them is signed whole (`pqdns_core::dnssec::existing` decides what stays).
const SIGNER_MADE: [RrType; 8] = [
    RrType::DNSKEY,
    RrType::RRSIG,
    RrType::NSEC,
    RrType::NSEC3,
    RrType::NSEC3PARAM,
    RrType::CDS,
    RrType::CDNSKEY,
    RrType::ZONEMD,
];

/// The first line of `<zone>.inline`.
const MAP_HEADER: &str =
    "; pqdns inline signing: the unsigned serial and the signed serial of the version served";

/// What the inline signer keeps of one secondary zone signed here.
#[derive(Debug)]
pub(crate) struct InlineSigner {
    /// The transferred (unsigned) version: what IXFR requests carry and apply to.
    unsigned: Mutex<Option<Arc<Zone>>>,
    /// The versions the incremental path made, with the keys it signs with.
    versions: Mutex<Option<Versions>>,
    /// `<zone>.xfr`, the stored unsigned copy.
    stored: PathBuf,
}

/// What [`InlineSigner::incremental`] did.
#[derive(Debug)]
pub(crate) enum Next {
    /// Signed incrementally, stored and ready to serve.
    Signed(Signed),
    /// Nothing: the transferred version, given back, needs a whole signing.
    Whole(Zone),
}

/// A version signed incrementally.
#[derive(Debug)]
pub(crate) struct Signed {
    /// The new signed version, its journal ending with the signed difference.
    pub served: Arc<ServedZone>,
    /// RRSIG records made.
    pub signatures: usize,
}

/// The journal of unsigned differences beside the stored copy `stored` (`<zone>.xfr`).
fn journal_path(stored: &Path) -> PathBuf {
    stored.with_extension("xfr-journal")
}

/// The file mapping the unsigned serial to the signed serial of the zone `cfg` describes.
fn map_path(cfg: &LoadedConfig, signing: &SigningConfig) -> PathBuf {
    let mut path = cfg.serial_path(signing);
    path.set_extension("inline");
    path
}

/// The unsigned and the signed serial `<zone>.inline` records for the zone `cfg` describes
/// (the last version signed by a refresh), if it is inline-signed and the file reads.
pub fn read_map(cfg: &LoadedConfig) -> Option<(u32, u32)> {
    let text = std::fs::read_to_string(map_path(cfg, cfg.signing()?)).ok()?;
    let mut words = text.lines().nth(1)?.split_whitespace();
    match (words.next()?, words.next()?, words.next()?, words.next()?) {
        ("unsigned", u, "signed", s) => Some((u.parse().ok()?, s.parse().ok()?)),
        _ => None,
    }
}

/// Records that unsigned serial `unsigned` is served signed as `signed` (atomically).
fn write_map(cfg: &LoadedConfig, signing: &SigningConfig, unsigned: u32, signed: u32) {
    let path = map_path(cfg, signing);
    let text = format!("{MAP_HEADER}\nunsigned {unsigned} signed {signed}\n");
    if let Err(e) = write_atomic(&path, text.as_bytes(), FileMode::Public) {
        warn!(zone = %cfg.origin, file = %path.display(), "serial map not written: {e}");
    }
}

/// Replays onto `zone`, read from the stored copy `stored`, the unsigned differences its
/// journal holds after the copy's serial (an entry cut short by a crash is dropped whole); a
/// journal that does not apply is logged and left, with the copy as read.
pub(crate) fn replay_stored(stored: &Path, zone: &mut Zone) {
    let path = journal_path(stored);
    if !path.exists() {
        return;
    }
    let origin = zone.origin.clone();
    let entries = match journal_file::read(&path, &origin) {
        Ok(entries) => entries,
        Err(e) => {
            warn!(zone = %origin, file = %path.display(), "unsigned journal unusable, the stored copy is served as it is: {e}");
            return;
        }
    };
    let start = zone.soa_serial();
    let Some(first) = entries.changes.iter().position(|c| c.from == start) else {
        return;
    };
    let mut replayed = zone.clone();
    for change in &entries.changes[first..] {
        if !change.replay(&mut replayed) {
            warn!(zone = %origin, file = %path.display(), from = change.from, to = change.to, "unsigned journal does not apply, the stored copy is served as it is");
            return;
        }
    }
    info!(zone = %origin, from = start, serial = replayed.soa_serial(), file = %path.display(), "stored copy brought up to date by its journal");
    *zone = replayed;
}

impl InlineSigner {
    /// The inline signer of a zone whose stored copy is `stored`, holding `unsigned`.
    pub(crate) fn new(stored: PathBuf, unsigned: Option<Zone>) -> InlineSigner {
        InlineSigner {
            unsigned: Mutex::new(unsigned.map(Arc::new)),
            versions: Mutex::new(None),
            stored,
        }
    }

    /// The transferred (unsigned) version held.
    pub(crate) fn unsigned(&self) -> Option<Arc<Zone>> {
        self.unsigned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Signs the transferred version `new`, which the IXFR `differences` (old SOA, deletions,
    /// new SOA, additions, for each change) made from the version held, incrementally after
    /// the version `catalog` serves (see the module doc), and makes it durable;
    /// [`Next::Whole`] when it needs a whole signing ([`InlineSigner::whole`]), nothing
    /// changed then. The
    /// caller holds the lock on catalog changes and serves the result at once.
    ///
    /// # Errors
    /// [`LoadError`] for the description, the keys, signing or writing; nothing is served
    /// then and the version held stays (the next refresh transfers again).
    pub(crate) fn incremental(
        &self,
        source: &ZoneSource,
        new: Zone,
        differences: &[Record],
        catalog: &Catalog,
        now: u64,
    ) -> Result<Next, LoadError> {
        let cfg = zones::read_config(source)?;
        let Some(signing) = cfg.signing() else {
            return Ok(Next::Whole(new));
        };
        let held = self.unsigned();
        let reason = if differences.is_empty() {
            Some("a whole transfer (AXFR)")
        } else if signing.mode == SigningMode::Online || signing.zonemd {
            Some("online signing or ZONEMD")
        } else if differences.iter().any(|r| SIGNER_MADE.contains(&r.rtype)) {
            Some("the primary's change has DNSSEC records")
        } else if held.as_ref().map(|z| z.soa_serial()) != first_serial(differences) {
            Some("the differences start from another version than the one held")
        } else {
            None
        };
        if let Some(reason) = reason {
            debug!(zone = %cfg.origin, "signing the whole zone: {reason}");
            return Ok(Next::Whole(new));
        }
        let Some(served) = catalog.shared(&cfg.origin) else {
            return Ok(Next::Whole(new));
        };
        let mut versions = self.versions.lock().unwrap_or_else(PoisonError::into_inner);
        let mine = versions.take().filter(|v| Arc::ptr_eq(&v.current, &served));
        let (keys, retired, appended) = match mine {
            Some(v) => (v.keys, v.retired, v.appended),
            None => {
                let rollover = cfg.rollover_keys(signing, &served.zone, now)?;
                if !rollover.steps.is_empty() {
                    info!(zone = %cfg.origin, "signing the whole zone: a rollover step is due");
                    return Ok(Next::Whole(new));
                }
                (Arc::new((rollover.signing, rollover.published)), None, 0)
            }
        };
        let old = served.zone.soa_serial();
        let serial = signing.serial.next(new.soa_serial(), Some(old), now);
        if !Serial(serial).is_newer_than(Serial(old)) {
            info!(zone = %cfg.origin, "signing the whole zone: the serial policy keeps the primary's serial");
            return Ok(Next::Whole(new));
        }
        let changes = rrset_changes(&new, differences);
        let mut policy = cfg.policy(signing, now)?;
        policy.published_dnskeys = Some(keys.1.clone());
        let jitter = cfg.jitter(signing)?;
        let mut zone = resign::working_copy(retired, &served);
        let signed = match resign_changes(&mut zone, &changes, serial, &keys.0, &policy, jitter) {
            Ok(signed) => signed,
            Err(IncrementalError::NotIncremental(reason)) => {
                info!(zone = %cfg.origin, "signing the whole zone: {reason}");
                return Ok(Next::Whole(new));
            }
            Err(IncrementalError::Sign(error)) => {
                return Err(LoadError::Sign {
                    file: source.to_string(),
                    zone: cfg.origin.to_string(),
                    error,
                })
            }
            Err(other) => return Err(invalid(&cfg, &other.to_string())),
        };
        let signatures = signed.signatures;
        let change = Change::from_records(signed.ixfr_records())
            .ok_or_else(|| invalid(&cfg, "the signed difference has no SOA"))?;
        let mut next = ServedZone::new(zone);
        next.journal = served.journal.with(change);
        // 1. The unsigned version, 2. the signed one, 3. the map (see the module doc).
        let unsigned = new.soa_serial();
        let new = Arc::new(new);
        self.store_differences(&new, differences)?;
        let appended = if signing.persist {
            resign::persist(None, &cfg, signing, &next, appended)?
        } else {
            0
        };
        resign::write_serial(&cfg, signing, serial)?;
        write_map(&cfg, signing, unsigned, serial);
        *self.unsigned.lock().unwrap_or_else(PoisonError::into_inner) = Some(new);
        info!(zone = %cfg.origin, unsigned, serial, signatures, rrsets = changes.len(), "IXFR signed incrementally");
        let next = Arc::new(next);
        *versions = Some(Versions {
            current: Arc::clone(&next),
            retired: Some(served),
            keys,
            appended,
        });
        Ok(Next::Signed(Signed {
            served: next,
            signatures,
        }))
    }

    /// Signs the transferred version `new` whole ([`zones::sign_transferred`], keeping the
    /// fresh signatures of unchanged RRsets of the version `served` serves), stores it whole
    /// with a fresh journal and records the serial map; on a blocking thread.
    ///
    /// # Errors
    /// A message for signing or storing; nothing is served then and the version held stays.
    pub(crate) async fn whole(
        self: &Arc<InlineSigner>,
        source: &ZoneSource,
        new: Zone,
        served: Arc<Catalog>,
    ) -> Result<ServedZone, String> {
        let source = source.clone();
        let now = pqdns_core::time::now();
        let me = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let cfg = zones::read_config(&source).map_err(|e| e.to_string())?;
            let (signed, _) = zones::sign_transferred(&source, new.clone(), now, Some(&served))
                .map_err(|e| e.to_string())?;
            me.store_whole(&new).map_err(|e| e.to_string())?;
            if let Some(signing) = cfg.signing() {
                write_map(&cfg, signing, new.soa_serial(), signed.zone.soa_serial());
            }
            *me.versions.lock().unwrap_or_else(PoisonError::into_inner) = None;
            *me.unsigned.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(new));
            Ok(signed)
        })
        .await
        .map_err(|e| e.to_string())?
    }

    /// Appends the unsigned `differences` to the journal beside the stored copy (synced);
    /// writes the copy and a fresh journal whole instead when the journal does not end where
    /// they start or has outgrown the copy.
    fn store_differences(&self, new: &Zone, differences: &[Record]) -> Result<(), LoadError> {
        let path = journal_path(&self.stored);
        let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
        if size(&path) <= size(&self.stored) {
            let mut all = true;
            for change in split(differences) {
                match journal_file::append(&path, &change) {
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        all = false;
                        break;
                    }
                    Err(error) => return Err(LoadError::WriteState { path, error }),
                }
            }
            if all {
                return Ok(());
            }
        }
        self.store_whole(new)
    }

    /// Writes the stored copy whole (master-file text, atomically), then an empty journal
    /// ending at its serial.
    fn store_whole(&self, zone: &Zone) -> Result<(), LoadError> {
        let error = |path: &Path| {
            let path = path.to_path_buf();
            move |error| LoadError::WriteState { path, error }
        };
        if let Some(dir) = self.stored.parent() {
            std::fs::create_dir_all(dir).map_err(error(dir))?;
        }
        let write = |path: &Path, body: &dyn Fn(&mut AtomicFile) -> std::io::Result<()>| {
            AtomicFile::create(path, FileMode::Public)
                .and_then(|mut file| {
                    body(&mut file)?;
                    file.commit()
                })
                .map_err(error(path))
        };
        write(&self.stored, &|f| zone.write_master_file(f))?;
        let journal = journal_path(&self.stored);
        write(&journal, &|f| {
            journal_file::write(f, &Journal::default(), zone.soa_serial())
        })
    }
}

fn invalid(cfg: &LoadedConfig, message: &str) -> LoadError {
    LoadError::Config(ConfigError::Invalid {
        path: cfg.path.clone(),
        message: message.into(),
    })
}

/// The serial the first difference starts from (its old SOA's).
fn first_serial(differences: &[Record]) -> Option<u32> {
    let soa = differences.first().filter(|r| r.rtype == RrType::SOA)?;
    let at = soa.rdata.len().checked_sub(20)?;
    Some(u32::from_be_bytes(soa.rdata[at..at + 4].try_into().ok()?))
}

/// The differences one by one as journal changes (each from its old SOA to the next old SOA).
fn split(differences: &[Record]) -> Vec<Change> {
    let mut changes = Vec::new();
    let mut start = 0;
    let mut soas = 0;
    for (i, r) in differences.iter().enumerate() {
        if r.rtype == RrType::SOA {
            if soas == 2 {
                changes.extend(Change::from_records(differences[start..i].to_vec()));
                start = i;
                soas = 0;
            }
            soas += 1;
        }
    }
    changes.extend(Change::from_records(differences[start..].to_vec()));
    changes
}

/// The RRsets the `differences` touch (the apex SOA included), each with its content in the
/// transferred version `new` (none: deleted).
fn rrset_changes(new: &Zone, differences: &[Record]) -> Vec<RrsetChange> {
    let touched: BTreeSet<(&Name, RrType)> =
        differences.iter().map(|r| (&r.owner, r.rtype)).collect();
    touched
        .into_iter()
        .map(|(owner, rtype)| RrsetChange {
            owner: owner.clone(),
            rtype,
            new: new
                .rrset(owner, rtype)
                .map(|set| (set.ttl, set.rdatas.clone())),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqdns_core::zonefile::ZoneFileReader;

    fn records(text: &str) -> Vec<Record> {
        ZoneFileReader::new(Some("example.".parse().unwrap()), Some(300))
            .read_str(text, "t")
            .unwrap()
    }

    /// Two differences (1 → 2 → 3) are two journal changes; the RRsets they touch are each
    /// named once with their content in the new version, a deleted one without content.
    #[test]
    fn differences_split_into_changes_and_rrsets() {
        let differences = records(
            "@ SOA ns h 1 60 30 600 300\nold A 192.0.2.9\n\
             @ SOA ns h 2 60 30 600 300\nnew A 192.0.2.10\n\
             @ SOA ns h 2 60 30 600 300\n\
             @ SOA ns h 3 60 30 600 300\nnew A 192.0.2.11\n",
        );
        let changes = split(&differences);
        assert_eq!(
            changes.iter().map(|c| (c.from, c.to)).collect::<Vec<_>>(),
            [(1, 2), (2, 3)]
        );
        assert_eq!(first_serial(&differences), Some(1));
        let new = Zone::from_records(
            "example.".parse().unwrap(),
            records(
                "@ SOA ns h 3 60 30 600 300\n@ NS ns\nns A 192.0.2.1\nnew A 192.0.2.10\nnew A 192.0.2.11\n",
            ),
        )
        .unwrap();
        let rrsets = rrset_changes(&new, &differences);
        let named: Vec<(String, RrType, usize)> = rrsets
            .iter()
            .map(|c| {
                (
                    c.owner.to_string(),
                    c.rtype,
                    c.new.as_ref().map_or(0, |(_, r)| r.len()),
                )
            })
            .collect();
        assert_eq!(
            named,
            [
                ("example.".to_string(), RrType::SOA, 1),
                ("new.example.".to_string(), RrType::A, 2),
                ("old.example.".to_string(), RrType::A, 0),
            ]
        );
    }
}
