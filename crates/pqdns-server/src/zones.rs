//! Loading the zones to serve: read each TOML zone description (pqdns-core `config`), generate
//! missing keys, sign (RFC 4035 §2, with NSEC or NSEC3 per the description), and publish the DS
//! records of the key-signing keys (RFC 4034 §5, SHA-256 per RFC 4509) in `<state_dir>/<zone>.ds`
//! (`root.ds` for the root; written atomically).
//!
//! DNSSEC records already in the zone data of a zone to sign are replaced: old RRSIG/NSEC/NSEC3
//! always, DNSKEYs that are not signing keys unless `keep_dnskeys` is set
//! (`pqdns_core::dnssec::existing`); what was removed is logged. A zone without `[signing]` is
//! served as it is, logged as pre-signed if it carries RRSIGs.
//!
//! A signed zone's served version and IXFR journal are written to `<state_dir>/<zone>.served`
//! and `.journal` after each load (`[signing] persist`, default on), and a start with no zone
//! served yet begins from them: unchanged signatures are kept and the journal goes on. The
//! newest serial served is also kept on its own in `<state_dir>/<zone>.serial` (written before
//! the zone is served, whatever `persist` says), so that losing the served version never makes
//! the serial go back (secondaries at a higher serial would never transfer again).
//!
//! MTL keys keep their series in `<state_dir>/<zone>+<alg>+<tag>.mtlseries`
//! (`pqdns_core::dnssec::mtl::series`): a reload or refresh appends the RRsets it signs anew to
//! the series, while it has room, and signs one new ladder; unchanged RRsets keep their leaves.
//!
//! The state directory is the key directory unless `[signing] state_directory` says otherwise;
//! it also holds the lock that keeps a second server off the same keys ([`crate::key_lock`]).
//!
//! Loading is all-or-nothing: a reload that fails anywhere keeps the zones being served.
//! Key files written are logged by path; key material never is.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pqdns_core::atomic_file::{write_atomic, AtomicFile, FileMode};
use pqdns_core::config::{ConfigError, LoadedConfig, RolloverKeys, SigningMode};
use pqdns_core::dnssec::cds;
use pqdns_core::dnssec::dnskey::{ds_record, DigestType};
use pqdns_core::dnssec::existing::{self, UnsignedAlgorithm};
use pqdns_core::dnssec::keyfile::{find_key_files, ZoneKey};
use pqdns_core::dnssec::mtl::series::SeriesStore;
use pqdns_core::dnssec::rollover::Next;
use pqdns_core::dnssec::sign::{resign_zone, Incremental, SignError};
use pqdns_core::serial::Serial;
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::zonemd::{self, ZonemdHash};
use pqdns_core::{Name, Record, Zone};
use tracing::{info, warn};

use crate::catalog::{Catalog, CatalogError, ServedZone};
use crate::catalog_zone::{CatalogSettings, Role};
use crate::journal::{self, Journal};
use crate::journal_file;
use crate::key_lock::{self, KeyLockError};
use crate::online::OnlineZone;
use crate::update;

/// The default zone description, compiled in (`crates/pqdns-server/zones/example.toml`; the
/// repository's `zones/example.toml` links to it, so `cargo package` carries it).
pub const EMBEDDED_ZONE_TOML: &str = include_str!("../zones/example.toml");
/// The default zone's master file, compiled in (`crates/pqdns-server/zones/example.com.zone`).
pub const EMBEDDED_ZONE_FILE: &str = include_str!("../zones/example.com.zone");
/// Zones with at least this many RRsets get signing progress logged (every 10%).
pub const PROGRESS_LOG_THRESHOLD: usize = 10_000;

/// Where a zone description comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZoneSource {
    /// A TOML file; relative paths in it are relative to its directory.
    File(PathBuf),
    /// A zone description inline in pqdns-server's configuration file `config` (a
    /// `[[zone]]` table, [`crate::config_file`]), found again by its origin when re-read.
    Inline {
        /// The configuration file.
        config: PathBuf,
        /// The zone's origin.
        origin: Name,
    },
    /// The embedded default zone; its key directory is relative to `base_dir`.
    Embedded {
        /// Directory that relative paths (the key directory) are resolved against.
        base_dir: PathBuf,
    },
    /// A member zone of a catalog zone this server consumes (RFC 9432,
    /// [`crate::catalog_zone`]): its description is the catalog's `[catalog.template]` with
    /// this origin, read again from the catalog's description each time.
    Member {
        /// The catalog zone's description.
        catalog: Box<ZoneSource>,
        /// The member zone.
        origin: Name,
    },
}

impl std::fmt::Display for ZoneSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ZoneSource::File(p) => write!(f, "{}", p.display()),
            ZoneSource::Inline { config, origin } => {
                write!(f, "{} [[zone]] {origin}", config.display())
            }
            ZoneSource::Embedded { .. } => f.write_str("<embedded zones/example.toml>"),
            ZoneSource::Member { catalog, origin } => write!(f, "{catalog} member {origin}"),
        }
    }
}

/// Why zones could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The description, zone file or keys are wrong (the message has file and line).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Signing failed.
    #[error("{file}: signing {zone}: {error}")]
    Sign {
        /// The zone description.
        file: String,
        /// The zone.
        zone: String,
        /// The reason.
        error: SignError,
    },
    /// The zone data holds DNSKEYs to keep that no signing key covers.
    #[error("{file}: {error}")]
    Existing {
        /// The zone description.
        file: String,
        /// The DNSKEY left without signatures of its algorithm.
        error: UnsignedAlgorithm,
    },
    /// The CDS/CDNSKEY records could not be added (a key of another zone).
    #[error("{file}: CDS/CDNSKEY: {error}")]
    Cds {
        /// The zone description.
        file: String,
        /// Why the zone refused the record.
        error: pqdns_core::zone::ZoneError,
    },
    /// The DS file could not be written.
    #[error("{}: {error}", path.display())]
    WriteDs {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A state file (the last served serial) could not be read or holds garbage.
    #[error("{}: {message}", path.display())]
    State {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A state file (the last served serial) could not be written.
    #[error("{}: {error}", path.display())]
    WriteState {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// Another server uses the key directory.
    #[error(transparent)]
    KeyLock(#[from] KeyLockError),
    /// Zones conflict.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The configuration file (`--config`) re-read by a reload is wrong (file and line).
    #[error(transparent)]
    ConfigFile(#[from] crate::config_file::ConfigFileError),
    /// A listener the reloaded configuration adds cannot be bound, or TLS cannot be set up
    /// for it ([`crate::reconfigure`]); the listeners and zones served before stay.
    #[error("{0}; nothing changed")]
    Listen(#[from] pqdns_net::ListenError),
    /// The server settings of the reloaded configuration are wrong (file and line).
    #[error("{0}")]
    Settings(Box<dyn std::error::Error + Send + Sync>),
}

/// What loading one zone produced besides the zone itself.
#[derive(Debug, Default)]
pub struct ZoneReport {
    /// The zone apex.
    pub origin: Option<pqdns_core::Name>,
    /// DS records of its key-signing keys (empty if unsigned).
    pub ds: Vec<Record>,
    /// Where the DS records were written.
    pub ds_path: Option<PathBuf>,
    /// Key files generated during this load.
    pub written_keys: Vec<PathBuf>,
    /// The `[server]` table, unparsed, with the file it came from.
    pub server_table: Option<toml::Table>,
    /// Directory keys live in (also where a generated TLS certificate goes).
    pub key_dir: Option<PathBuf>,
    /// The SOA serial served (signed zones).
    pub serial: Option<u32>,
    /// When the zone's signatures are to be refreshed, UNIX seconds: the earliest expiration
    /// minus the `refresh` setting (signed zones; see [`next_refresh`]).
    pub refresh_at: Option<u64>,
}

/// The earliest time any of `reports`' zones needs re-signing, UNIX seconds; `None` if none
/// is signed here.
pub fn next_refresh(reports: &[ZoneReport]) -> Option<u64> {
    reports.iter().filter_map(|r| r.refresh_at).min()
}

/// Reads the zone description of `source`.
///
/// # Errors
/// [`ConfigError`] for I/O or TOML errors.
pub fn read_config(source: &ZoneSource) -> Result<LoadedConfig, ConfigError> {
    match source {
        ZoneSource::File(path) => LoadedConfig::read(path),
        ZoneSource::Inline { config, origin } => crate::config_file::read_inline(config, origin),
        ZoneSource::Embedded { base_dir } => {
            let mut cfg = LoadedConfig::parse(
                EMBEDDED_ZONE_TOML,
                Path::new("<embedded example.toml>"),
                base_dir,
            )?;
            cfg.config.file = None;
            cfg.config.records = Some(EMBEDDED_ZONE_FILE.to_string());
            Ok(cfg)
        }
        ZoneSource::Member { catalog, origin } => {
            let cat = read_config(catalog)?;
            let invalid = |message: String| ConfigError::Invalid {
                path: cat.path.clone(),
                message,
            };
            let settings = CatalogSettings::of(&cat)
                .map_err(|e| invalid(e.to_string()))?
                .filter(|s| s.role == Role::Consumer)
                .ok_or_else(|| invalid(format!("member {origin}: no longer a catalog consumer")))?;
            let label = PathBuf::from(format!(
                "{} [catalog.template] for {origin}",
                cat.path.display()
            ));
            LoadedConfig::from_table(settings.member_table(&cat, origin), &label, &cat.base_dir)
        }
    }
}

/// The files a reload of `sources` reads first: each zone description (the configuration
/// file for inline ones, once) and the master file it names (`$INCLUDE`d files are not
/// followed); none for the embedded zone. Descriptions that cannot be read are listed alone.
pub fn zone_files(sources: &[ZoneSource]) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = Vec::new();
    for source in sources {
        let description = match source {
            ZoneSource::File(path) => path,
            ZoneSource::Inline { config, .. } => config,
            ZoneSource::Embedded { .. } | ZoneSource::Member { .. } => continue,
        };
        if !files.contains(description) {
            files.push(description.clone());
        }
        if let Ok(cfg) = read_config(source) {
            files.extend(cfg.config.file.as_ref().map(|f| cfg.base_dir.join(f)));
        }
    }
    files
}

/// What [`check_zone`] found in one zone description.
#[derive(Clone, Debug)]
pub struct Checked {
    /// The zone's apex.
    pub origin: Name,
    /// Records read (zone file and inline).
    pub records: usize,
    /// Signing algorithms (none: served as read).
    pub algorithms: Vec<String>,
    /// Key files found and read in the key directory.
    pub keys: usize,
    /// The key directory when keys are missing there (the server generates them at start).
    pub keys_to_generate: Option<PathBuf>,
}

/// Checks one zone as [`load_zone`] would read it, writing nothing (`pqdns-server --check`):
/// the description, the zone data (errors with file and line), the signing settings
/// (algorithms of the profile, validity, refresh and jitter), the `update_policy` rules (a
/// signed zone's only) and every key file already in the key directory (readable, of this
/// zone, of a known algorithm). Keys missing there are not
/// an error: the server generates them at start; they are reported.
///
/// # Errors
/// [`LoadError`] naming the file (and line, for zone-file errors).
pub fn check_zone(source: &ZoneSource, now: u64) -> Result<Checked, LoadError> {
    let cfg = read_config(source)?;
    let catalog = CatalogSettings::of(&cfg).map_err(|e| ConfigError::Invalid {
        path: cfg.path.clone(),
        message: e.to_string(),
    })?;
    if cfg.secondary().is_some() || catalog.is_some_and(|c| c.role == Role::Producer) {
        // Primaries were checked with the description; the data comes by transfer.
        let stored = crate::secondary::read_stored(&cfg);
        return Ok(Checked {
            origin: cfg.origin.clone(),
            records: stored.map_or(0, |z| z.record_count()),
            algorithms: Vec::new(),
            keys: 0,
            keys_to_generate: None,
        });
    }
    let zone = cfg.read_zone()?;
    update::Updatable::of(source, &cfg, "")?;
    let mut checked = Checked {
        origin: zone.origin.clone(),
        records: zone.record_count(),
        algorithms: Vec::new(),
        keys: 0,
        keys_to_generate: None,
    };
    let Some(signing) = cfg.signing() else {
        return Ok(checked);
    };
    let profile = cfg.profile(signing)?;
    let provider = cfg.provider(signing)?;
    checked.algorithms = cfg
        .algorithms(signing)?
        .iter()
        .map(ToString::to_string)
        .collect();
    cfg.policy(signing, now)?;
    cfg.refresh(signing)?;
    cfg.jitter(signing)?;
    let key_dir = cfg.key_directory(signing);
    let files = if key_dir.exists() {
        find_key_files(&key_dir, &zone.origin).map_err(ConfigError::from)?
    } else {
        Vec::new()
    };
    for file in &files {
        ZoneKey::read_files(file, &profile, &provider).map_err(ConfigError::from)?;
    }
    checked.keys = files.len();
    if cfg.keys(false).is_err() {
        checked.keys_to_generate = Some(key_dir);
    }
    Ok(checked)
}

/// Loads, keys and signs one zone; `now` is the signing time in UNIX seconds.
///
/// When `served` has the zone, its signatures are kept for the RRsets that did not change and
/// that expire later than `now` + `refresh` + a quarter of the `jitter` (the quarter makes
/// refreshes come in batches); only the rest is signed ([`resign_zone`]). The difference to the
/// served version is appended to the zone's IXFR journal ([`ServedZone::after`]). A signed zone's
/// SOA serial follows the `[signing] serial` policy ([`SerialPolicy`]): when `served` (the
/// catalog being served) has the zone, the new serial is newer than the served one (RFC 1982)
/// unless the policy is `keep`, so that secondaries transfer the new signatures (a re-signing
/// or a reload of unchanged data).
///
/// [`SerialPolicy`]: pqdns_core::serial::SerialPolicy
///
/// # Errors
/// [`LoadError`] naming the file (and line, for zone-file errors).
pub fn load_zone(
    source: &ZoneSource,
    now: u64,
    served: Option<&Catalog>,
) -> Result<(ServedZone, ZoneReport), LoadError> {
    load_zone_with(source, now, served, Signatures::Keep)
}

/// [`load_zone`], keeping the served signatures `signatures` says.
fn load_zone_with(
    source: &ZoneSource,
    now: u64,
    served: Option<&Catalog>,
    signatures: Signatures,
) -> Result<(ServedZone, ZoneReport), LoadError> {
    let cfg = read_config(source)?;
    let persisted = persisted_version(&cfg, served);
    let previous = served
        .and_then(|c| c.zone(&cfg.origin))
        .or(persisted.as_ref());
    let (zone, base) = update::read_data(&cfg, previous.map(|p| &p.zone))?;
    sign_after(source, &cfg, zone, &base, now, previous, signatures)
}

/// Inline signing of a secondary zone ([`crate::secondary`]): [`load_zone`] with the
/// transferred (unsigned) `zone` in place of the master file. Its signed SOA serial follows
/// the `[signing] serial` policy from the served one, independent of the primary's.
///
/// # Errors
/// As [`load_zone`].
pub fn sign_transferred(
    source: &ZoneSource,
    zone: Zone,
    now: u64,
    served: Option<&Catalog>,
) -> Result<(ServedZone, ZoneReport), LoadError> {
    let cfg = read_config(source)?;
    sign_data(source, &cfg, zone, "", now, served)
}

/// [`load_zone`] for zone data already read (the zone file's, as dynamic updates left it,
/// [`update::read_data`], or as transferred) of the zone `cfg` describes; `base` is the
/// SHA-256 of the zone file's data those updates were made to (empty: none).
///
/// # Errors
/// As [`load_zone`].
pub(crate) fn sign_data(
    source: &ZoneSource,
    cfg: &LoadedConfig,
    zone: Zone,
    base: &str,
    now: u64,
    served: Option<&Catalog>,
) -> Result<(ServedZone, ZoneReport), LoadError> {
    sign_data_with(source, cfg, zone, base, now, served, Signatures::Keep)
}

/// Which signatures of the version served a load keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signatures {
    /// Those of unchanged RRsets that are still fresh ([`load_zone`]): a reload, a refresh.
    Keep,
    /// None: every RRset is signed anew (`pqdns-ctl zone-sign`).
    Renew,
}

/// [`sign_data`], keeping the served signatures `signatures` says.
fn sign_data_with(
    source: &ZoneSource,
    cfg: &LoadedConfig,
    zone: Zone,
    base: &str,
    now: u64,
    served: Option<&Catalog>,
    signatures: Signatures,
) -> Result<(ServedZone, ZoneReport), LoadError> {
    let persisted = persisted_version(cfg, served);
    let previous = served
        .and_then(|c| c.zone(&cfg.origin))
        .or(persisted.as_ref());
    sign_after(source, cfg, zone, base, now, previous, signatures)
}

/// The version persisted in the state directory, when `served` does not have the zone and the
/// zone keeps one (`[signing] persist`, or an `update_policy`: its updates are kept there).
fn persisted_version(cfg: &LoadedConfig, served: Option<&Catalog>) -> Option<ServedZone> {
    let signing = cfg.signing()?;
    let keeps = signing.persist || !cfg.config.update_policy.is_empty();
    if !keeps || served.and_then(|c| c.zone(&cfg.origin)).is_some() {
        return None;
    }
    read_persisted(&cfg.persisted_paths(signing), &cfg.origin)
}

/// [`sign_data`] after the version `previous` (served or persisted).
fn sign_after(
    source: &ZoneSource,
    cfg: &LoadedConfig,
    mut zone: Zone,
    base: &str,
    now: u64,
    previous: Option<&ServedZone>,
    signatures: Signatures,
) -> Result<(ServedZone, ZoneReport), LoadError> {
    let updatable = update::Updatable::of(source, cfg, base)?;
    let mut report = ZoneReport {
        origin: Some(zone.origin.clone()),
        server_table: cfg.config.server.clone(),
        ..ZoneReport::default()
    };
    let Some(signing) = cfg.signing() else {
        let signatures: usize = zone
            .nodes
            .values()
            .flat_map(|n| n.values())
            .chain(zone.nsec3.values())
            .map(|s| s.rrsigs.len())
            .sum();
        let kind = if signatures > 0 {
            "zone loaded (pre-signed)"
        } else {
            "zone loaded (unsigned)"
        };
        info!(zone = %zone.origin, %source, records = zone.record_count(), signatures, "{kind}");
        let mut new = ServedZone::new(zone).after(previous);
        new.updatable = updatable;
        return Ok((new, report));
    };
    let key_dir = cfg.key_directory(signing);
    // Before any key is generated, rolled or retired, or any state written: one server per
    // key (and state) directory. The lock file sits with the state, which is writable.
    let state_dir = cfg.state_directory(signing);
    key_lock::hold(&state_dir)?;
    let RolloverKeys {
        signing: keys,
        published,
        ds: ds_keys,
        written,
        retired,
        orphans,
        steps,
        next,
        ..
    } = cfg.rollover_keys(signing, &zone, now)?;
    for path in &written {
        info!(zone = %zone.origin, file = %path.display(), "generated key file");
    }
    for step in &steps {
        info!(zone = %zone.origin, "rollover: {step}");
    }
    for path in &retired {
        info!(zone = %zone.origin, file = %path.display(), "retired key file moved");
    }
    for path in &orphans {
        warn!(
            zone = %zone.origin, file = %path.display(),
            "private key file without its .key file (a key generation cut short?): not used; \
             move or delete it"
        );
    }
    let prepared =
        existing::prepare(&mut zone, &keys, cfg.existing_dnssec(signing)).map_err(|error| {
            LoadError::Existing {
                file: source.to_string(),
                error,
            }
        })?;
    if !prepared.is_empty() {
        info!(zone = %zone.origin, %source, "zone data had DNSSEC records: {prepared}");
    }
    let mut policy = cfg.policy(signing, now)?;
    policy.published_dnskeys = Some(published);
    let refresh = cfg.refresh(signing)?;
    let jitter = cfg.jitter(signing)?;
    let origin = zone.origin.clone();
    let serial_path = cfg.serial_path(signing);
    let recorded = read_serial(&serial_path)?;
    let served_serial = newest(previous.map(|z| z.zone.soa_serial()), recorded);
    if previous.is_none() {
        if let Some(recorded) = recorded {
            warn!(
                zone = %origin, serial = recorded, file = %serial_path.display(),
                "no served version to start from (lost, unreadable or not persisted): the \
                 zone is signed anew, and its serial continues after the one last served"
            );
        }
    }
    let file = zone.soa_serial();
    let serial = signing.serial.next(file, served_serial, now);
    if serial != file && zone.set_soa_serial(serial) {
        info!(zone = %origin, file, served = served_serial, serial, policy = ?signing.serial, "SOA serial set");
    }
    for record in cds::records(&ds_keys, signing.cds) {
        zone.insert(record).map_err(|error| LoadError::Cds {
            file: source.to_string(),
            error,
        })?;
    }
    report.serial = Some(zone.soa_serial());
    let last_decile = std::sync::atomic::AtomicUsize::new(0);
    let progress = |done: usize, total: usize| {
        if total < PROGRESS_LOG_THRESHOLD {
            return;
        }
        let decile = done * 10 / total;
        if last_decile.fetch_max(decile, std::sync::atomic::Ordering::Relaxed) < decile {
            info!(zone = %origin, done, total, "signing: {}%", decile * 10);
        }
    };
    // Held until the zone is signed: MTL keys append to their saved series.
    let series = cfg.mtl_series(signing, &keys)?;
    let incremental = Incremental {
        previous: previous.map(|z| &z.zone),
        keep_expiring_after: match signatures {
            Signatures::Keep => now + refresh + jitter / 4,
            Signatures::Renew => u64::MAX,
        },
        jitter,
        mtl_series: series.as_ref().map(|s| s as &dyn SeriesStore),
    };
    // RFC 8976 §3.1, §3.5: ZONEMD placed before the denial chain, computed and signed last.
    let zonemd_hashes = zonemd::hashes_to_place(
        &zone,
        if signing.zonemd {
            &[ZonemdHash::Sha384]
        } else {
            &[]
        },
    );
    if !zonemd_hashes.is_empty() {
        zonemd::add_placeholder(&mut zone, &zonemd_hashes);
    }
    let sign_error = |error| LoadError::Sign {
        file: source.to_string(),
        zone: origin.to_string(),
        error,
    };
    let stats =
        resign_zone(&mut zone, &keys, &policy, &incremental, &progress).map_err(sign_error)?;
    if !zonemd_hashes.is_empty() {
        zonemd::sign_digests(&mut zone, &keys, &policy).map_err(sign_error)?;
    }
    info!(
        zone = %origin, %source, rrsets = stats.rrsets, signatures = stats.signatures,
        kept = stats.kept, denial_records = stats.denial_records, keys = keys.len(),
        "zone signed"
    );
    let step_at = match &next {
        Next::At(at, steps) => {
            let steps: Vec<String> = steps.iter().map(ToString::to_string).collect();
            info!(zone = %origin, at, "rollover: next step {}", steps.join(", "));
            Some(*at)
        }
        Next::ParentDs => {
            info!(
                zone = %origin, %source,
                "rollover: waiting for the parent's DS RRset to equal the DS file \
                 (and CDS); then run `pqdns-zone rollover --ds-published` on this zone and reload"
            );
            None
        }
        Next::Settled => None,
    };
    report.refresh_at = stats
        .earliest_expiration
        .map(|e| e.saturating_sub(refresh))
        .into_iter()
        .chain(step_at)
        .min();
    report.ds = ds_keys
        .iter()
        .filter_map(|k| ds_record(k, DigestType::Sha256))
        .collect();
    let ds_path = cfg.ds_path(signing);
    let text: String = report.ds.iter().map(|r| format!("{r}\n")).collect();
    std::fs::create_dir_all(&state_dir)
        .and_then(|()| write_atomic(&ds_path, text.as_bytes(), FileMode::Public))
        .map_err(|error| LoadError::WriteDs {
            path: ds_path.clone(),
            error,
        })?;
    report.ds_path = Some(ds_path);
    // Before the zone is served: a serial once served is never served lower (RFC 1982), or
    // secondaries that have it never transfer again.
    write_atomic(
        &serial_path,
        format!("{}\n", zone.soa_serial()).as_bytes(),
        FileMode::Public,
    )
    .map_err(|error| LoadError::WriteState {
        path: serial_path,
        error,
    })?;
    report.written_keys = written;
    report.key_dir = Some(key_dir);
    let mut new = ServedZone::new(zone).after(previous);
    if signing.mode == SigningMode::Online {
        new.online = Some(Arc::new(OnlineZone::new(
            origin.clone(),
            keys,
            now.saturating_sub(policy.inception),
            policy.expiration.saturating_sub(now),
            refresh,
        )));
    }
    if signing.persist || updatable.is_some() {
        let written = write_persisted(&new, &cfg.persisted_paths(signing), None);
        // The updates of an updatable zone live there: not written is not loaded.
        if let (Err((path, error)), Some(_)) = (written, &updatable) {
            return Err(LoadError::WriteState { path, error });
        }
    }
    new.updatable = updatable;
    Ok((new, report))
}

/// The serial recorded in `path` by an earlier load, if the file exists.
///
/// # Errors
/// [`LoadError::State`] if it exists but cannot be read or holds no serial: starting anyway
/// could serve a lower serial than secondaries have, so the operator decides (fix or delete).
fn read_serial(path: &Path) -> Result<Option<u32>, LoadError> {
    let error = |message: String| LoadError::State {
        path: path.to_path_buf(),
        message,
    };
    match std::fs::read_to_string(path) {
        Ok(text) => text.trim().parse().map(Some).map_err(|_| {
            error(format!(
                "{:?} is not a serial (delete the file to start from the zone file's serial)",
                text.trim()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(error(e.to_string())),
    }
}

/// The newer of two serials (RFC 1982), either possibly unknown.
fn newest(a: Option<u32>, b: Option<u32>) -> Option<u32> {
    match (a, b) {
        (Some(a), Some(b)) if Serial(b).is_newer_than(Serial(a)) => Some(b),
        (Some(a), _) => Some(a),
        (None, b) => b,
    }
}

/// The served version [`write_persisted`] left, with the changes its journal file holds after
/// it replayed ([`crate::journal_file`]: appended by dynamic updates), if they read and agree:
/// the journal leads to the served version or continues from it. Problems are logged, not
/// fatal: the files spare work, and for an updatable zone [`update::read_data`] refuses to go
/// on without them.
fn read_persisted((version, journal): &(PathBuf, PathBuf), origin: &Name) -> Option<ServedZone> {
    if !version.exists() {
        return None;
    }
    let zone = ZoneFileReader::new(Some(origin.clone()), None)
        .read_file(version)
        .map_err(|e| e.to_string())
        .and_then(|records| Zone::from_records(origin.clone(), records).map_err(|e| e.to_string()));
    let mut zone = match zone {
        Ok(zone) => zone,
        Err(e) => {
            warn!(zone = %origin, file = %version.display(), "persisted version unusable: {e}");
            return None;
        }
    };
    let snapshot = zone.soa_serial();
    let read = if journal.exists() {
        journal_file::read(journal, origin)
    } else {
        Ok(journal_file::Entries {
            changes: Vec::new(),
            torn: false,
        })
    };
    let replayed = read.and_then(|read| {
        if read.torn {
            warn!(
                zone = %origin, file = %journal.display(),
                "the last journal entry is incomplete (a crash while it was written): dropped"
            );
        }
        let start = read
            .changes
            .iter()
            .position(|c| c.from == snapshot)
            .unwrap_or(read.changes.len());
        let mut chain = Journal::new(journal::DEFAULT_MAX_BYTES);
        for (i, change) in read.changes.into_iter().enumerate() {
            if i >= start && !change.replay(&mut zone) {
                return Err(format!(
                    "the change {} -> {} does not apply to the served version",
                    change.from, change.to
                ));
            }
            chain = chain.with(change);
        }
        match chain.changes().last() {
            Some(c) if c.to != zone.soa_serial() => Err(format!(
                "it ends at serial {}, the served version is at {}",
                c.to,
                zone.soa_serial()
            )),
            _ => Ok((chain, start)),
        }
    });
    let served = match replayed {
        Ok((chain, start)) => {
            let mut served = ServedZone::new(zone);
            let replayed = chain.changes().len().saturating_sub(start);
            served.journal = chain;
            info!(
                zone = %origin, snapshot, serial = served.zone.soa_serial(), replayed,
                file = %version.display(), changes = served.journal.changes().len(),
                "starting from the persisted version"
            );
            served
        }
        Err(reason) => {
            warn!(
                zone = %origin, file = %journal.display(),
                "persisted journal unusable, dropped (secondaries behind get AXFR): {reason}"
            );
            // The snapshot alone, unless replaying half changed it.
            return read_persisted_snapshot(version, origin);
        }
    };
    Some(served)
}

/// The served version alone, without its journal.
fn read_persisted_snapshot(version: &Path, origin: &Name) -> Option<ServedZone> {
    let records = ZoneFileReader::new(Some(origin.clone()), None)
        .read_file(version)
        .ok()?;
    Zone::from_records(origin.clone(), records)
        .ok()
        .map(ServedZone::new)
}

/// Writes `served`'s zone and journal to `paths` (master-file text, each atomically and
/// synced; the journal in the form of [`crate::journal_file`], ending at the zone's serial);
/// a failure is logged and returned with the file. `crash`: the crash point between the two
/// writes ([`crate::crash_point`]: the update path's, for its tests).
pub(crate) fn write_persisted(
    served: &ServedZone,
    (version, journal): &(PathBuf, PathBuf),
    crash: Option<crate::crash_point::CrashPoint>,
) -> Result<(), (PathBuf, std::io::Error)> {
    let write = |path: &Path, body: &dyn Fn(&mut AtomicFile) -> std::io::Result<()>| {
        AtomicFile::create(path, FileMode::Public)
            .and_then(|mut file| {
                body(&mut file)?;
                file.commit()
            })
            .map_err(|e| {
                warn!(zone = %served.zone.origin, file = %path.display(), "not persisted: {e}");
                (path.to_path_buf(), e)
            })
    };
    let serial = served.zone.soa_serial();
    write(version, &|f| served.zone.write_master_file(f))?;
    if let Some(point) = crash {
        crate::crash_point::reached(point);
    }
    write(journal, &|f| {
        journal_file::write(f, &served.journal, serial)
    })
}

/// Loads every zone and builds the catalog; fails as a whole if any zone fails.
///
/// # Errors
/// The first [`LoadError`].
pub fn load_all(sources: &[ZoneSource], now: u64) -> Result<(Catalog, Vec<ZoneReport>), LoadError> {
    reload_all(sources, now, None)
}

/// [`load_all`] for a server already serving `served`: SOA serials of signed zones never go
/// back or stay the same ([`load_zone`]).
///
/// # Errors
/// The first [`LoadError`].
pub fn reload_all(
    sources: &[ZoneSource],
    now: u64,
    served: Option<&Catalog>,
) -> Result<(Catalog, Vec<ZoneReport>), LoadError> {
    reload_with(sources, now, served, Signatures::Keep)
}

/// [`reload_all`], keeping the served signatures `signatures` says (the control channel's
/// reload and re-signing of one zone, [`crate::control`]).
///
/// # Errors
/// The first [`LoadError`].
pub fn reload_with(
    sources: &[ZoneSource],
    now: u64,
    served: Option<&Catalog>,
    signatures: Signatures,
) -> Result<(Catalog, Vec<ZoneReport>), LoadError> {
    let mut zones = Vec::with_capacity(sources.len());
    let mut reports = Vec::with_capacity(sources.len());
    for source in sources {
        let (zone, report) = load_source(source, now, served, signatures)?;
        zones.extend(zone);
        reports.push(report);
    }
    if zones.is_empty() {
        warn!("no zones configured: every query will be REFUSED");
    }
    Ok((Catalog::new(zones)?, reports))
}

/// One zone of [`reload_with`], keeping the served signatures `signatures` says: signed from
/// its data; a secondary zone's version served, else
/// its stored copy (signed again when signed here), else none until its first transfer; a
/// produced catalog zone's version served, else none until [`crate::provisioning`] makes it.
///
/// # Errors
/// As [`load_zone`].
pub fn load_source(
    source: &ZoneSource,
    now: u64,
    served: Option<&Catalog>,
    signatures: Signatures,
) -> Result<(Option<ServedZone>, ZoneReport), LoadError> {
    let cfg = read_config(source)?;
    if cfg.secondary().is_some() && cfg.signing().is_some() {
        // Inline signing: the stored unsigned copy is signed again (refreshing
        // signatures); without one, the version served (if any) stays.
        if let Some(unsigned) = crate::secondary::read_stored(&cfg) {
            let (zone, report) =
                sign_data_with(source, &cfg, unsigned, "", now, served, signatures)?;
            return Ok((Some(zone), report));
        }
    }
    let produced = CatalogSettings::of(&cfg)
        .map_err(|e| ConfigError::Invalid {
            path: cfg.path.clone(),
            message: e.to_string(),
        })?
        .is_some_and(|c| c.role == Role::Producer);
    if cfg.secondary().is_some() || produced {
        // Its data comes from its primaries (crate::secondary): the version served, else
        // the stored copy, else nothing until the first transfer.
        let zone = match served.and_then(|c| c.zone(&cfg.origin)) {
            Some(z) => Some(z.clone()),
            None if produced => None,
            None => crate::secondary::read_stored(&cfg).map(ServedZone::new),
        };
        let report = ZoneReport {
            origin: Some(cfg.origin.clone()),
            server_table: cfg.config.server.clone(),
            serial: zone.as_ref().map(|z| z.zone.soa_serial()),
            ..ZoneReport::default()
        };
        return Ok((zone, report));
    }
    let (zone, report) = load_zone_with(source, now, served, signatures)?;
    Ok((Some(zone), report))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;
    const LOCK: &str = crate::key_lock::LOCK_FILE;

    fn serial(catalog: &Catalog) -> u32 {
        let origin: Name = "pqdns.test.".parse().unwrap();
        catalog.zone(&origin).unwrap().zone.soa_serial()
    }

    /// Issue 31 item 7: the serial goes 1, 2, 3 and then, after `<zone>.served` is lost (or
    /// never written), on to 4, never back to 1.
    #[test]
    fn the_serial_never_goes_back_when_the_served_version_is_lost() {
        for persist in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let toml = dir.path().join("zone.toml");
            std::fs::write(
                &toml,
                format!(
                    "origin = \"pqdns.test.\"\nrecords = '''@ SOA ns h 1 7200 3600 1209600 300\n\
                     @ NS ns\nns A 192.0.2.1\n'''\n[signing]\nalgorithms = [\"ECDSAP256SHA256\"]\n\
                     key_directory = \"keys\"\npersist = {persist}\n"
                ),
            )
            .unwrap();
            let sources = [ZoneSource::File(toml)];
            let (mut catalog, _) = load_all(&sources, NOW).unwrap();
            assert_eq!(serial(&catalog), 1);
            for expected in [2, 3] {
                catalog = reload_all(&sources, NOW + 60, Some(&catalog)).unwrap().0;
                assert_eq!(serial(&catalog), expected);
            }
            let keys = dir.path().join("keys");
            let _ = std::fs::remove_file(keys.join("pqdns.test.served"));
            let (catalog, _) = load_all(&sources, NOW + 120).unwrap();
            assert_eq!(serial(&catalog), 4, "persist = {persist}");
            assert_eq!(
                std::fs::read_to_string(keys.join("pqdns.test.serial")).unwrap(),
                "4\n"
            );
            // A garbled state file stops the load, naming the file.
            std::fs::write(keys.join("pqdns.test.serial"), "garbage").unwrap();
            let _ = std::fs::remove_file(keys.join("pqdns.test.served"));
            let error = load_all(&sources, NOW + 180).err().unwrap().to_string();
            assert!(
                error.contains("pqdns.test.serial") && error.contains("garbage"),
                "{error}"
            );
        }
    }

    /// The (series, leaf) of every MTL signature served for pqdns.test.
    fn mtl_leaves(catalog: &Catalog) -> Vec<(pqdns_core::dnssec::mtl::SeriesId, u64)> {
        use pqdns_core::dnssec::mtl::{Format, MtlSignature};
        let origin: Name = "pqdns.test.".parse().unwrap();
        let zone = &catalog.zone(&origin).unwrap().zone;
        zone.nodes
            .values()
            .flat_map(|node| node.values())
            .flat_map(|set| &set.rrsigs)
            .map(|rdata| {
                let sig = pqdns_core::dnssec::rrsig::Rrsig::parse(rdata).unwrap();
                let path = MtlSignature::parse_as(Format::V2026, sig.signature)
                    .unwrap()
                    .path;
                (path.series, path.leaf)
            })
            .collect()
    }

    /// Issue 34: reloads, a refresh and a restart of an ML-DSA-MTL zone append to one series
    /// (its `.mtlseries` file in the state directory): the series ID stays, every new leaf's
    /// index comes after every leaf signed before, and the served zone has one ladder.
    #[test]
    fn mtl_reloads_and_restarts_append_to_one_series() {
        let dir = tempfile::tempdir().unwrap();
        let toml = dir.path().join("zone.toml");
        let write = |hosts: usize| {
            let extra: String = (0..hosts)
                .map(|i| format!("h{i} A 198.51.100.{i}\n"))
                .collect();
            std::fs::write(
                &toml,
                format!(
                    "origin = \"pqdns.test.\"\nrecords = '''@ SOA ns h 1 7200 3600 1209600 300\n\
                     @ NS ns\nns A 192.0.2.1\n{extra}'''\n[signing]\n\
                     algorithms = [\"ML-DSA-MTL-44\"]\nprofile = \"verisign-2026\"\n\
                     keys = \"csk\"\nkey_directory = \"keys\"\nstate_directory = \"state\"\n"
                ),
            )
            .unwrap();
        };
        write(2);
        let sources = [ZoneSource::File(toml.clone())];
        let (mut catalog, _) = load_all(&sources, NOW).unwrap();
        let mut before = mtl_leaves(&catalog);
        let series = before[0].0;
        let origin: Name = "pqdns.test.".parse().unwrap();
        // A reload with a new host, a reload with nothing changed, a refresh (every signature
        // due), then a restart from the persisted version with another new host.
        for (hosts, at, restart) in [
            (3, NOW + 60, false),
            (3, NOW + 120, false),
            (3, NOW + 20 * 86_400, false),
            (4, NOW + 20 * 86_400 + 60, true),
        ] {
            write(hosts);
            catalog = if restart {
                load_all(&sources, at).unwrap().0
            } else {
                reload_all(&sources, at, Some(&catalog)).unwrap().0
            };
            let now = mtl_leaves(&catalog);
            assert!(now.iter().all(|l| l.0 == series), "one series throughout");
            let next = before.iter().map(|l| l.1).max().unwrap() + 1;
            let new: Vec<u64> = now
                .iter()
                .filter(|l| !before.contains(l))
                .map(|l| l.1)
                .collect();
            assert!(!new.is_empty(), "the SOA is new each time");
            assert!(new.iter().all(|&l| l >= next), "{new:?} from {next}");
            let ladders = &catalog.zone(&origin).unwrap().mtl_ladders;
            assert!(
                ladders.iter().all(|l| l.tag == ladders[0].tag),
                "one ladder"
            );
            before = now;
        }
        let files: Vec<String> = std::fs::read_dir(dir.path().join("state"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".mtlseries"))
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        assert!(files[0].starts_with("pqdns.test+129+"), "{files:?}");
    }

    /// Issue 28: `--check` and a load name a bad `update_policy` rule and a policy on an
    /// unsigned zone, with the file.
    #[test]
    fn bad_update_policies_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let toml = dir.path().join("zone.toml");
        let zone = "origin = \"pqdns.test.\"\nrecords = '''@ SOA ns h 1 7200 3600 1209600 300\n\
                    @ NS ns\nns A 192.0.2.1\n'''\n";
        let signing = "[signing]\nalgorithms = [\"ECDSAP256SHA256\"]\nkey_directory = \"keys\"\n";
        for (policy, signed, says) in [
            ("grant k subdomain www.other. TXT", true, "outside the zone"),
            ("grant k zonesub", false, "needs a [signing] table"),
        ] {
            let table = if signed { signing } else { "" };
            std::fs::write(
                &toml,
                format!("{zone}update_policy = [\"{policy}\"]\n{table}"),
            )
            .unwrap();
            let source = ZoneSource::File(toml.clone());
            for error in [
                check_zone(&source, NOW).err().unwrap().to_string(),
                load_all(std::slice::from_ref(&source), NOW)
                    .err()
                    .unwrap()
                    .to_string(),
            ] {
                assert!(
                    error.contains("zone.toml") && error.contains(says),
                    "{error}"
                );
            }
        }
    }

    /// Issue 31 item 10: with `state_directory`, the key directory is only read once its keys
    /// exist (it may be a read-only volume): every state file and the lock go to the state
    /// directory.
    #[test]
    fn state_files_go_to_the_state_directory() {
        let dir = tempfile::tempdir().unwrap();
        let toml = dir.path().join("zone.toml");
        std::fs::write(
            &toml,
            "origin = \"pqdns.test.\"\nrecords = '''@ SOA ns h 1 7200 3600 1209600 300\n\
             @ NS ns\nns A 192.0.2.1\n'''\n[signing]\nalgorithms = [\"ECDSAP256SHA256\"]\n\
             key_directory = \"keys\"\nstate_directory = \"state\"\n",
        )
        .unwrap();
        let sources = [ZoneSource::File(toml)];
        let listing = |d: &str| -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(dir.path().join(d))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        let (catalog, _) = load_all(&sources, NOW).unwrap();
        let keys = listing("keys");
        assert!(
            keys.iter().all(|n| n.starts_with("Kpqdns.test.+")),
            "{keys:?}"
        );
        let state = listing("state");
        for file in [
            "pqdns.test.ds",
            "pqdns.test.serial",
            "pqdns.test.keystate",
            LOCK,
        ] {
            assert!(state.iter().any(|n| n == file), "{file} in {state:?}");
        }
        let mtimes = |names: &[String]| -> Vec<std::time::SystemTime> {
            names
                .iter()
                .map(|n| {
                    let path = dir.path().join("keys").join(n);
                    std::fs::metadata(path).unwrap().modified().unwrap()
                })
                .collect()
        };
        let before = mtimes(&keys);
        reload_all(&sources, NOW + 60, Some(&catalog)).unwrap();
        assert_eq!(listing("keys"), keys);
        assert_eq!(
            mtimes(&keys),
            before,
            "nothing written in the key directory"
        );
    }
}
