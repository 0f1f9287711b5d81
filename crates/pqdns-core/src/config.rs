//! The TOML zone description (`zones/example.toml`): origin, TTL, records (inline or a master
//! file), and the signing policy. The `[server]` table belongs to pqdns-server and is kept here
//! unparsed.
//!
//! ```toml
//! origin = "example.com."
//! default_ttl = 3600
//! file = "example.com.zone"          # relative to this file; or `records = """..."""`
//! update_policy = ["grant acme-key subdomain _acme-challenge TXT"]
//!                                    # dynamic updates (RFC 2136/3007), TSIG-signed by the
//!                                    # keys named (crate::update::policy has the syntax);
//!                                    # default []: every UPDATE is REFUSED. Needs [signing]:
//!                                    # the updated data is kept in <state_dir>/<zone>.dynamic
//! [signing]
//! algorithms = ["ECDSAP256SHA256", "ML-DSA-44"]   # several = dual signing
//! keys = "ksk-zsk"                   # or "csk"
//! denial = "nsec3"                   # or "nsec"; NSEC3 defaults per RFC 9276
//! mode = "offline"                   # or "online": answers signed when first needed, denials
//!                                    # compact (RFC 9824); `denial` is then not used
//! validity = "14d"
//! refresh = "3d12h"                  # re-sign when less than this is left (default validity/4)
//! jitter = "12h"                     # spread new expirations over this (default validity/28)
//! key_directory = "keys"
//! state_directory = "state"          # .ds, .keystate, .served, .journal, .serial, .mtlseries
//!                                    # (default: the key directory, which may then be read-only)
//! profile = "default"
//! keep_dnskeys = false               # true: keep DNSKEYs found in the zone data
//! zonemd = false                     # true: ZONEMD (RFC 8976, SHA-384) at the apex
//! mtl_series_capacity = 16384        # MTL: leaves per series before re-signing starts anew
//! propagation_delay = "1h"           # rollover waits (dnssec::rollover)
//! parent_ds_ttl = "1d"
//! parent_propagation_delay = "1h"
//! ```
//!
//! A secondary zone (pqdns-server's `secondary` module) names its primaries instead of giving
//! records; its data comes by zone transfer (RFC 5936, RFC 1995) and is kept in its state
//! directory:
//!
//! ```toml
//! origin = "example.net."
//! [secondary]
//! primaries = ["192.0.2.1", "192.0.2.2:5300 key transfer-key"]  # ADDR[:PORT] [key NAME];
//!                                    # the key is one of the server's `tsig_keys`
//! state_directory = "state"          # <zone>.xfr, the last copy transferred (default "state")
//! max_transfer_bytes = 268435456     # largest transfer accepted (default 256 MiB)
//! transfer_timeout = "5m"            # longest transfer, connecting included (default 5m)
//! ```
//!
//! Changing `algorithms` of a served zone starts an algorithm rollover
//! ([`crate::dnssec::rollover`]), whose state is kept in [`LoadedConfig::key_state_path`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::dnssec::algorithm::{Algorithm, SecAlg};
use crate::dnssec::existing::ExistingDnssec;
use crate::dnssec::keyfile::{find_key_files, KeyFileError, KeyRole, ZoneKey};
use crate::dnssec::mtl::series::{SeriesError, SeriesFiles, DEFAULT_CAPACITY, MAX_CAPACITY};
use crate::dnssec::mtl::MtlParams;
use crate::dnssec::nsec3::Nsec3Params;
use crate::dnssec::profile::{Profile, ProfileError};
use crate::dnssec::provider::Provider;
use crate::dnssec::rollover::{KeyState, KeyStateError, Next, Step, Timings, Usage};
use crate::dnssec::sign::{Denial, SigningPolicy};
use crate::name::Name;
use crate::rr::Record;
use crate::zone::{Zone, ZoneError};
use crate::zonefile::{parse_ttl, ZoneFileError, ZoneFileReader, MAX_TTL};

/// A zone's name as used in file names: the name without its trailing dot (`example.com`),
/// and `root` for the root zone, whose name would otherwise make hidden files (`.ds`).
pub fn zone_file_stem(origin: &Name) -> String {
    if origin.is_root() {
        return "root".to_string();
    }
    let text = origin.to_string();
    // A `/` inside a label must not become a directory separator.
    text.strip_suffix('.')
        .unwrap_or(&text)
        .replace('/', "\\047")
}

/// The zone's `K<zone>+*.private` files in `dir` whose `.key` file is missing (a directory
/// that cannot be read has none to report).
fn orphan_private_files(dir: &Path, zone: &Name) -> Vec<PathBuf> {
    let prefix = format!("K{zone}+").to_ascii_lowercase();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut orphans: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.to_ascii_lowercase().starts_with(&prefix))
                && p.extension().is_some_and(|e| e == "private")
                && !p.with_extension("key").exists()
        })
        .collect();
    orphans.sort();
    orphans
}

/// The algorithm number in a key file name `K<zone>+<algorithm>+<key tag>.key`.
fn key_file_algorithm(path: &Path) -> Option<SecAlg> {
    let name = path.file_name()?.to_str()?;
    let mut fields = name.rsplitn(3, '+');
    let _tag = fields.next()?;
    fields.next()?.parse().ok().map(SecAlg)
}

/// Why a zone description could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The TOML file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The TOML is malformed or has unknown or mistyped keys (the message has line and column).
    #[error("{}: {message}", path.display())]
    Toml {
        /// The file.
        path: PathBuf,
        /// The parser's message, with position.
        message: String,
    },
    /// A value is out of range or meaningless.
    #[error("{}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The zone data has an error.
    #[error(transparent)]
    ZoneFile(#[from] ZoneFileError),
    /// The records do not form a zone.
    #[error("{}: {source}", path.display())]
    Zone {
        /// The TOML file.
        path: PathBuf,
        /// The reason.
        source: ZoneError,
    },
    /// A key file problem.
    #[error(transparent)]
    Key(#[from] KeyFileError),
    /// The rollover state file could not be read or written.
    #[error(transparent)]
    KeyState(#[from] KeyStateError),
    /// The MTL series files could not be opened (another signer holds them).
    #[error(transparent)]
    MtlSeries(#[from] SeriesError),
    /// A profile problem.
    #[error("{}: {source}", path.display())]
    Profile {
        /// The TOML file.
        path: PathBuf,
        /// The reason.
        source: ProfileError,
    },
}

/// Key layout.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum KeyLayout {
    /// A KSK signing the DNSKEY RRset and a ZSK signing the rest, per algorithm.
    #[default]
    KskZsk,
    /// One combined signing key per algorithm.
    Csk,
}

/// Denial of existence choice.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum DenialKind {
    /// NSEC (RFC 4034 §4).
    Nsec,
    /// NSEC3 (RFC 5155).
    #[default]
    Nsec3,
}

/// When a zone's signatures are made.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum SigningMode {
    /// The whole zone is signed when loaded, with an NSEC or NSEC3 chain (pre-signing).
    #[default]
    Offline,
    /// Only the apex DNSKEY, CDS and CDNSKEY RRsets are signed when loaded; pqdns-server signs
    /// the other RRsets when an answer first needs them, and answers denials with compact
    /// denial of existence (RFC 9824): [`Denial::Compact`]. Not for MTL algorithms.
    Online,
}

/// A custom algorithm-number profile.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomProfile {
    /// Built-in profile to start from.
    #[serde(default = "default_profile_name")]
    pub base: String,
    /// Algorithm name → number overrides.
    pub numbers: BTreeMap<String, u8>,
}

fn default_profile_name() -> String {
    "default".into()
}

/// What [`LoadedConfig::rollover_keys`] found and did.
#[derive(Debug)]
pub struct RolloverKeys {
    /// The keys that sign now.
    pub signing: Vec<ZoneKey>,
    /// The apex DNSKEY RRset to publish: DNSKEY RDATA, wire format (for
    /// [`SigningPolicy::published_dnskeys`]).
    pub published: Vec<Vec<u8>>,
    /// DNSKEY RDATA of the keys that sign without being published (the first step of an
    /// algorithm rollover), for [`crate::dnssec::verify::verify_zone_with`].
    pub unpublished: Vec<Vec<u8>>,
    /// DNSKEY records of the keys the parent's DS RRset is to point to (the `.ds` file,
    /// CDS/CDNSKEY).
    pub ds: Vec<Record>,
    /// Key files generated.
    pub written: Vec<PathBuf>,
    /// Key files moved to `<key_dir>/retired/` (`.key` paths).
    pub retired: Vec<PathBuf>,
    /// `.private` files of the zone without their `.key` file (a key generation cut short,
    /// e.g. by a full disk): not used; for the operator to move or delete.
    pub orphans: Vec<PathBuf>,
    /// The algorithm state after the steps.
    pub state: KeyState,
    /// The steps taken now, in order.
    pub steps: Vec<Step>,
    /// What the rollover waits for next.
    pub next: Next,
}

/// The `[signing]` table.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SigningConfig {
    /// Algorithm names (see `pqdns-zone algorithms`); several means multi-algorithm signing.
    pub algorithms: Vec<String>,
    /// KSK/ZSK split or CSK.
    #[serde(default)]
    pub keys: KeyLayout,
    /// NSEC or NSEC3.
    #[serde(default)]
    pub denial: DenialKind,
    /// Pre-signing (default) or online signing with compact denial.
    #[serde(default)]
    pub mode: SigningMode,
    /// NSEC3 extra iterations (RFC 9276: 0).
    #[serde(default)]
    pub nsec3_iterations: u16,
    /// NSEC3 salt in hex, empty for none (RFC 9276: none).
    #[serde(default)]
    pub nsec3_salt: String,
    /// Signature validity (`14d`, `3600`, …).
    #[serde(default = "default_validity")]
    pub validity: String,
    /// Re-sign when less than this much validity is left (`3d12h`, seconds, …); default a
    /// quarter of `validity`, as Knot DNS does. A running pqdns-server re-signs by itself then.
    pub refresh: Option<String>,
    /// New signatures expire up to this much earlier than `validity` says, chosen per RRset,
    /// so that later refreshes come in batches (RFC 6781 §4.4.2.2); default 1/28 of
    /// `validity` (12 h of 14 d, as BIND's default).
    pub jitter: Option<String>,
    /// How the SOA serial of a (re-)signed zone is chosen: `increment` (default), `unixtime`,
    /// `dateserial` or `keep`; see [`crate::serial::SerialPolicy`].
    #[serde(default)]
    pub serial: crate::serial::SerialPolicy,
    /// CDS/CDNSKEY at the apex for the parent: `none` (default), `always` or `delete`; see
    /// [`crate::dnssec::cds::CdsPublish`].
    #[serde(default)]
    pub cds: crate::dnssec::cds::CdsPublish,
    /// How far before now the inception is set, for clock skew (`1h`).
    #[serde(default = "default_skew")]
    pub inception_offset: String,
    /// Key directory, relative to the TOML file.
    #[serde(default = "default_key_dir")]
    pub key_directory: PathBuf,
    /// Directory of the files pqdns writes about the zone (DS, rollover state, served version,
    /// journal, last serial, MTL series), relative to the TOML file; default the key
    /// directory. With its own, the key directory may be read-only (a secrets volume) once
    /// every key is there.
    pub state_directory: Option<PathBuf>,
    /// Built-in profile name, or `custom` to use `custom_profile`.
    #[serde(default = "default_profile_name")]
    pub profile: String,
    /// The custom profile, when `profile = "custom"`.
    pub custom_profile: Option<CustomProfile>,
    /// Crypto provider: `default` (aws-lc-rs + liboqs) or `liboqs`.
    #[serde(default = "default_profile_name")]
    pub provider: String,
    /// DNSKEY TTL in seconds (default: the zone's default TTL).
    pub dnskey_ttl: Option<u32>,
    /// Time for a change of the zone to reach all its secondaries (`1h`), a wait of each
    /// rollover step ([`crate::dnssec::rollover`]).
    #[serde(default = "default_propagation_delay")]
    pub propagation_delay: String,
    /// TTL of the zone's DS RRset at the parent (`1d`).
    #[serde(default = "default_parent_ds_ttl")]
    pub parent_ds_ttl: String,
    /// Time for a DS change to reach every server of the parent (`1h`).
    #[serde(default = "default_propagation_delay")]
    pub parent_propagation_delay: String,
    /// How long a KSK is active before pqdns-server replaces it by a double-DS rollover
    /// (`365d`); default for ever. Not with `keys = "csk"`.
    pub ksk_lifetime: Option<String>,
    /// How long a ZSK is active before pqdns-server replaces it by pre-publication (`90d`);
    /// default for ever. Not with `keys = "csk"`.
    pub zsk_lifetime: Option<String>,
    /// Keep the served version and its IXFR journal on disk (`<key_dir>/<zone>.served` and
    /// `.journal`, pqdns-server): a restart starts from them, keeping unchanged signatures
    /// and incremental transfers (default `true`).
    #[serde(default = "default_true")]
    pub persist: bool,
    /// Keep DNSKEYs in the zone data that are not signing keys (e.g. pre-published for a
    /// rollover) instead of removing them; see `dnssec::existing`.
    #[serde(default)]
    pub keep_dnskeys: bool,
    /// Put a ZONEMD record (RFC 8976, SIMPLE scheme, SHA-384) at the apex, computed after the
    /// rest of the zone is signed and then signed itself ([`crate::zonemd`]).
    #[serde(default)]
    pub zonemd: bool,
    /// Most leaves (signed RRsets, counted over every signing) in one MTL series before a
    /// re-signing starts a new series (default 16384,
    /// [`crate::dnssec::mtl::series::DEFAULT_CAPACITY`]; at most 2^24). Each doubling of a
    /// series adds up to 16 bytes to its condensed signatures.
    pub mtl_series_capacity: Option<u64>,
}

fn default_validity() -> String {
    "14d".into()
}
fn default_skew() -> String {
    "1h".into()
}
fn default_true() -> bool {
    true
}
fn default_propagation_delay() -> String {
    "1h".into()
}
fn default_parent_ds_ttl() -> String {
    "1d".into()
}
fn default_key_dir() -> PathBuf {
    PathBuf::from("keys")
}

/// A zone description as read from TOML.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ZoneConfig {
    /// The zone apex, absolute.
    pub origin: String,
    /// Default TTL for records without one, seconds.
    #[serde(default = "default_ttl")]
    pub default_ttl: u32,
    /// Master file, relative to the TOML file.
    pub file: Option<PathBuf>,
    /// Inline master-file text (relative names are relative to the origin).
    pub records: Option<String>,
    /// Directory `$INCLUDE` may read from, relative to this file (default: the directory of
    /// `file`, or of this file for inline `records`). Includes outside it are refused.
    pub include_directory: Option<PathBuf>,
    /// Signing policy; absent means the zone is served unsigned (or as pre-signed).
    pub signing: Option<SigningConfig>,
    /// Dynamic update rules (RFC 3007; syntax in [`crate::update::policy`]); empty: UPDATE
    /// is refused.
    #[serde(default)]
    pub update_policy: Vec<String>,
    /// Settings for pqdns-server, parsed there.
    pub server: Option<toml::Table>,
    /// The zone's primaries, when this server is a secondary for it; the zone then has no
    /// `file` or `records`.
    pub secondary: Option<SecondaryConfig>,
    /// Catalog zone settings (RFC 9432) for pqdns-server, parsed there (its `catalog_zone`
    /// module): the zone is a catalog it consumes or produces.
    pub catalog: Option<toml::Table>,
}

/// The `[secondary]` table: where a secondary zone is transferred from.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SecondaryConfig {
    /// Primaries, tried in order: `ADDR`, `ADDR:PORT` or `[IPv6]:PORT` (port 53 if omitted),
    /// optionally followed by `key NAME` (a TSIG key of pqdns-server's `tsig_keys`).
    pub primaries: Vec<String>,
    /// Directory of the last transferred copy (`<zone>.xfr`), relative to the TOML file.
    #[serde(default = "default_secondary_state")]
    pub state_directory: PathBuf,
    /// Largest transfer accepted, bytes of DNS messages (default 256 MiB).
    #[serde(default = "default_max_transfer")]
    pub max_transfer_bytes: u64,
    /// Longest transfer, connecting included (`5m`, seconds).
    #[serde(default = "default_transfer_timeout")]
    pub transfer_timeout: String,
}

fn default_secondary_state() -> PathBuf {
    PathBuf::from("state")
}
fn default_max_transfer() -> u64 {
    256 << 20
}
fn default_transfer_timeout() -> String {
    "5m".into()
}

/// One primary of a secondary zone, as [`LoadedConfig::primaries`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Primary {
    /// Address and port.
    pub addr: std::net::SocketAddr,
    /// The TSIG key (RFC 8945) that signs requests to it, by name.
    pub key: Option<Name>,
}

/// Reads `ADDR`, `ADDR:PORT` or `[IPv6]:PORT` (port 53 if omitted) and an optional
/// `key NAME`.
///
/// # Errors
/// A message naming the entry.
pub fn parse_primary(text: &str) -> Result<Primary, String> {
    let bad = || format!("primary {text:?} is not ADDR[:PORT] [key NAME]");
    let mut words = text.split_whitespace();
    let addr_text = words.next().ok_or_else(bad)?;
    let addr = addr_text
        .parse::<std::net::SocketAddr>()
        .or_else(|_| {
            addr_text
                .parse::<std::net::IpAddr>()
                .map(|ip| std::net::SocketAddr::new(ip, 53))
        })
        .map_err(|_| bad())?;
    let key = match (words.next(), words.next(), words.next()) {
        (None, _, _) => None,
        (Some("key"), Some(name), None) => Some(
            Name::parse(name, Some(&Name::root()))
                .map_err(|e| format!("primary {text:?}: key name: {e}"))?
                .to_lowercase(),
        ),
        _ => return Err(bad()),
    };
    Ok(Primary { addr, key })
}

fn default_ttl() -> u32 {
    3600
}

/// A zone description together with where it was read from.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LoadedConfig {
    /// The parsed description.
    pub config: ZoneConfig,
    /// The TOML file (or a label for embedded text).
    pub path: PathBuf,
    /// Directory relative paths are resolved against.
    pub base_dir: PathBuf,
    /// The parsed origin.
    pub origin: Name,
}

impl LoadedConfig {
    /// Reads and parses a TOML zone description.
    ///
    /// # Errors
    /// [`ConfigError`] for I/O, TOML syntax or unknown keys (with line), or a bad origin.
    pub fn read(path: &Path) -> Result<LoadedConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        LoadedConfig::parse(&text, path, &base)
    }

    /// Parses TOML text; `path` labels errors, `base_dir` anchors relative paths.
    ///
    /// # Errors
    /// As [`LoadedConfig::read`].
    pub fn parse(text: &str, path: &Path, base_dir: &Path) -> Result<LoadedConfig, ConfigError> {
        let config: ZoneConfig = toml::from_str(text).map_err(|e| ConfigError::Toml {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        LoadedConfig::new(config, path, base_dir)
    }

    /// A zone description held as a TOML table inside another file (a `[[zone]]` table of
    /// pqdns-server's configuration file); `label` names it in errors (file and line),
    /// `base_dir` anchors relative paths.
    ///
    /// # Errors
    /// [`ConfigError::Toml`] for unknown or mistyped keys, [`ConfigError::Invalid`] for a bad
    /// origin.
    pub fn from_table(
        table: toml::Table,
        label: &Path,
        base_dir: &Path,
    ) -> Result<LoadedConfig, ConfigError> {
        let config: ZoneConfig =
            table
                .try_into()
                .map_err(|e: toml::de::Error| ConfigError::Toml {
                    path: label.to_path_buf(),
                    message: e.to_string(),
                })?;
        LoadedConfig::new(config, label, base_dir)
    }

    fn new(config: ZoneConfig, path: &Path, base_dir: &Path) -> Result<LoadedConfig, ConfigError> {
        let origin = Name::parse(&config.origin, None).map_err(|e| ConfigError::Invalid {
            path: path.to_path_buf(),
            message: format!(
                "origin {:?}: {e} (write it absolute, with a trailing dot)",
                config.origin
            ),
        })?;
        let loaded = LoadedConfig {
            config,
            path: path.to_path_buf(),
            base_dir: base_dir.to_path_buf(),
            origin,
        };
        if let Some(secondary) = &loaded.config.secondary {
            if loaded.config.file.is_some() || loaded.config.records.is_some() {
                return Err(loaded.invalid(
                    "a [secondary] zone's data comes from its primaries: remove `file` and \
                     `records`"
                        .into(),
                ));
            }
            if secondary.primaries.is_empty() {
                return Err(loaded.invalid("[secondary] primaries: name at least one".into()));
            }
            loaded.primaries()?;
            loaded.transfer_timeout(secondary)?;
        }
        Ok(loaded)
    }

    /// The `[secondary]` table, if the zone is transferred from primaries.
    pub fn secondary(&self) -> Option<&SecondaryConfig> {
        self.config.secondary.as_ref()
    }

    /// The primaries of a secondary zone, in order (none for other zones).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming an entry that is not `ADDR[:PORT] [key NAME]`.
    pub fn primaries(&self) -> Result<Vec<Primary>, ConfigError> {
        let Some(secondary) = self.secondary() else {
            return Ok(Vec::new());
        };
        secondary
            .primaries
            .iter()
            .map(|p| parse_primary(p).map_err(|m| self.invalid(format!("[secondary] {m}"))))
            .collect()
    }

    /// The longest transfer of a secondary zone, seconds (at least 1).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for a malformed duration.
    pub fn transfer_timeout(&self, secondary: &SecondaryConfig) -> Result<u64, ConfigError> {
        Ok(self
            .duration(&secondary.transfer_timeout, "transfer_timeout")?
            .max(1))
    }

    /// Where a secondary zone's last transferred copy is kept: `<state_directory>/<zone>.xfr`
    /// (master-file text, written atomically).
    pub fn transferred_path(&self, secondary: &SecondaryConfig) -> PathBuf {
        self.base_dir
            .join(&secondary.state_directory)
            .join(format!("{}.xfr", zone_file_stem(&self.origin)))
    }

    fn invalid(&self, message: String) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.clone(),
            message,
        }
    }

    /// Reads the zone's records (master file and/or inline records).
    ///
    /// # Errors
    /// [`ConfigError`] with file and line for zone-file errors, or if no records are given.
    pub fn read_zone(&self) -> Result<Zone, ConfigError> {
        if self.config.file.is_none() && self.config.records.is_none() {
            return Err(self.invalid(
                "give the zone data as `file = \"...\"` or `records = \"\"\"...\"\"\"`".into(),
            ));
        }
        if self.config.default_ttl > MAX_TTL {
            return Err(self.invalid(format!(
                "default_ttl {} is above 2^31-1 (RFC 2181 §8)",
                self.config.default_ttl
            )));
        }
        let reader = ZoneFileReader::new(Some(self.origin.clone()), Some(self.config.default_ttl));
        let configured = self
            .config
            .include_directory
            .as_ref()
            .map(|d| self.base_dir.join(d));
        let mut zone = Zone::new(self.origin.clone());
        if let Some(file) = &self.config.file {
            let path = self.base_dir.join(file);
            let reader = match &configured {
                Some(d) => reader.clone().with_include_dir(d),
                None => reader.clone(),
            };
            reader.read_file_into(&path, &mut zone)?;
        }
        if let Some(text) = &self.config.records {
            let label = format!("{} [records]", self.path.display());
            let dir = configured.unwrap_or_else(|| self.base_dir.clone());
            reader
                .with_include_dir(dir)
                .read_str_into(text, &label, &mut zone)?;
        }
        zone.check_apex().map_err(|source| ConfigError::Zone {
            path: self.path.clone(),
            source,
        })?;
        Ok(zone)
    }

    /// What signing does with DNSKEYs already in the zone data (`keep_dnskeys`).
    pub fn existing_dnssec(&self, signing: &SigningConfig) -> ExistingDnssec {
        if signing.keep_dnskeys {
            ExistingDnssec::KeepDnskeys
        } else {
            ExistingDnssec::Strip
        }
    }

    /// The signing section, if the zone is to be signed.
    pub fn signing(&self) -> Option<&SigningConfig> {
        self.config.signing.as_ref()
    }

    /// The algorithm-number profile for signing.
    ///
    /// # Errors
    /// [`ConfigError::Profile`] for unknown names.
    pub fn profile(&self, signing: &SigningConfig) -> Result<Profile, ConfigError> {
        let result = match (&*signing.profile, &signing.custom_profile) {
            ("custom", Some(c)) => Profile::custom("custom", &c.base, &c.numbers),
            ("custom", None) => {
                return Err(self
                    .invalid("profile = \"custom\" needs a [signing.custom_profile] table".into()))
            }
            (name, _) => Profile::named(name),
        };
        result.map_err(|source| ConfigError::Profile {
            path: self.path.clone(),
            source,
        })
    }

    /// The crypto provider.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for an unknown provider name.
    pub fn provider(&self, signing: &SigningConfig) -> Result<Provider, ConfigError> {
        Provider::named(&signing.provider).ok_or_else(|| {
            self.invalid(format!(
                "unknown provider {:?}; use \"default\" or \"liboqs\"",
                signing.provider
            ))
        })
    }

    /// The algorithms to sign with.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming an unknown or unavailable algorithm.
    pub fn algorithms(&self, signing: &SigningConfig) -> Result<Vec<Algorithm>, ConfigError> {
        if signing.algorithms.is_empty() {
            return Err(self.invalid("signing.algorithms is empty".into()));
        }
        signing
            .algorithms
            .iter()
            .map(|n| {
                let alg = Algorithm::from_name(n).ok_or_else(|| {
                    self.invalid(format!(
                        "unknown algorithm {n:?}; `pqdns-zone algorithms` lists them"
                    ))
                })?;
                match alg.unavailable_reason() {
                    Some(why) => Err(self.invalid(format!("{alg} is unavailable: {why}"))),
                    None if signing.mode == SigningMode::Online && MtlParams::of(alg).is_some() => {
                        Err(self.invalid(format!(
                            "{alg} cannot sign online (mode = \"online\"): an MTL signature \
                             is a leaf of a series whose ladder is signed with the zone"
                        )))
                    }
                    None => Ok(alg),
                }
            })
            .collect()
    }

    /// Signature inception/expiration and denial settings, relative to `now` (UNIX seconds).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for an unparsable duration or salt.
    pub fn policy(&self, signing: &SigningConfig, now: u64) -> Result<SigningPolicy, ConfigError> {
        let duration = |text: &str, what: &str| {
            parse_ttl(text).ok_or_else(|| {
                self.invalid(format!(
                    "bad {what} {text:?}: use seconds or units like 14d, 1h"
                ))
            })
        };
        let validity = duration(&signing.validity, "validity")?;
        let skew = duration(&signing.inception_offset, "inception_offset")?;
        let denial = match (signing.mode, signing.denial) {
            (SigningMode::Online, _) => Denial::Compact,
            (_, DenialKind::Nsec) => Denial::Nsec,
            (_, DenialKind::Nsec3) => {
                let salt = data_encoding::HEXLOWER_PERMISSIVE
                    .decode(signing.nsec3_salt.as_bytes())
                    .map_err(|_| {
                        self.invalid(format!("nsec3_salt {:?} is not hex", signing.nsec3_salt))
                    })?;
                Denial::Nsec3(Nsec3Params {
                    iterations: signing.nsec3_iterations,
                    salt,
                    opt_out: false,
                })
            }
        };
        Ok(SigningPolicy {
            inception: now.saturating_sub(u64::from(skew)),
            expiration: now + u64::from(validity),
            denial,
            published_dnskeys: None,
        })
    }

    /// How long before the signatures expire they are refreshed, in seconds: `refresh`, or a
    /// quarter of `validity`.
    ///
    /// # Errors
    /// [`ConfigError`] for an unparsable duration, or a refresh not shorter than the validity.
    pub fn refresh(&self, signing: &SigningConfig) -> Result<u64, ConfigError> {
        let validity = self.duration(&signing.validity, "validity")?;
        let Some(text) = &signing.refresh else {
            return Ok(validity / 4);
        };
        let refresh = self.duration(text, "refresh")?;
        if refresh >= validity {
            return Err(self.invalid(format!(
                "refresh {text:?} must be shorter than validity {:?}",
                signing.validity
            )));
        }
        Ok(refresh)
    }

    /// The jitter of new signatures' expirations, in seconds: `jitter`, or 1/28 of `validity`.
    ///
    /// # Errors
    /// [`ConfigError`] for an unparsable duration, or a jitter that leaves no time between the
    /// refresh and the earliest expiration (`jitter + refresh >= validity`).
    pub fn jitter(&self, signing: &SigningConfig) -> Result<u64, ConfigError> {
        let validity = self.duration(&signing.validity, "validity")?;
        let Some(text) = &signing.jitter else {
            return Ok(validity / 28);
        };
        let jitter = self.duration(text, "jitter")?;
        if jitter + self.refresh(signing)? >= validity {
            return Err(self.invalid(format!(
                "jitter {text:?} plus refresh must be shorter than validity {:?}",
                signing.validity
            )));
        }
        Ok(jitter)
    }

    /// `text` as a duration in seconds (`14d`, `3600`).
    fn duration(&self, text: &str, what: &str) -> Result<u64, ConfigError> {
        parse_ttl(text).map(u64::from).ok_or_else(|| {
            self.invalid(format!(
                "bad {what} {text:?}: use seconds or units like 14d, 1h"
            ))
        })
    }

    /// The key directory, resolved against the TOML file's directory.
    pub fn key_directory(&self, signing: &SigningConfig) -> PathBuf {
        self.base_dir.join(&signing.key_directory)
    }

    /// The state directory ([`SigningConfig::state_directory`], else the key directory),
    /// resolved against the TOML file's directory.
    pub fn state_directory(&self, signing: &SigningConfig) -> PathBuf {
        match &signing.state_directory {
            Some(dir) => self.base_dir.join(dir),
            None => self.key_directory(signing),
        }
    }

    /// Where the DS records of the zone's KSKs are published: `<state_dir>/<zone>.ds`
    /// (`root.ds` for the root, see [`zone_file_stem`]).
    pub fn ds_path(&self, signing: &SigningConfig) -> PathBuf {
        self.state_directory(signing)
            .join(format!("{}.ds", zone_file_stem(&self.origin)))
    }

    /// Where pqdns-server keeps the newest SOA serial it has served for the zone
    /// (`<state_dir>/<zone>.serial`, the number in decimal): state that must never go back,
    /// kept even when the served version is not persisted or is lost.
    pub fn serial_path(&self, signing: &SigningConfig) -> PathBuf {
        self.state_directory(signing)
            .join(format!("{}.serial", zone_file_stem(&self.origin)))
    }

    /// Where pqdns-server keeps the version of the zone it serves (`<state_dir>/<zone>.served`,
    /// master-file text) and the IXFR journal leading to it (`<state_dir>/<zone>.journal`).
    pub fn persisted_paths(&self, signing: &SigningConfig) -> (PathBuf, PathBuf) {
        let dir = self.state_directory(signing);
        let stem = zone_file_stem(&self.origin);
        (
            dir.join(format!("{stem}.served")),
            dir.join(format!("{stem}.journal")),
        )
    }

    /// Where the zone's algorithm rollover state is kept: `<state_dir>/<zone>.keystate`
    /// ([`KeyState`]).
    pub fn key_state_path(&self, signing: &SigningConfig) -> PathBuf {
        self.state_directory(signing)
            .join(format!("{}.keystate", zone_file_stem(&self.origin)))
    }

    /// The series files of the zone's MTL keys (`<state_dir>/<zone>+<alg>+<tag>.mtlseries`,
    /// [`crate::dnssec::mtl::series`]), open and locked for this signer, if any of `keys` is
    /// an MTL key: re-signings append to their series. The state directory is created if
    /// missing.
    ///
    /// # Errors
    /// [`ConfigError::Io`] when the state directory cannot be created;
    /// [`ConfigError::Invalid`] for a `mtl_series_capacity` of 0 or above 2^24;
    /// [`ConfigError::MtlSeries`] if another signer holds the files or they cannot be opened.
    pub fn mtl_series(
        &self,
        signing: &SigningConfig,
        keys: &[ZoneKey],
    ) -> Result<Option<SeriesFiles>, ConfigError> {
        if !keys
            .iter()
            .any(|k| MtlParams::of(k.key.algorithm()).is_some())
        {
            return Ok(None);
        }
        let capacity = signing.mtl_series_capacity.unwrap_or(DEFAULT_CAPACITY);
        if capacity == 0 || capacity > MAX_CAPACITY {
            return Err(self.invalid(format!(
                "mtl_series_capacity {capacity}: must be 1 to {MAX_CAPACITY} leaves"
            )));
        }
        let stem = zone_file_stem(&self.origin);
        // `pqdns-zone sign` may be the first to use the state directory.
        let dir = self.state_directory(signing);
        std::fs::create_dir_all(&dir).map_err(|source| ConfigError::Io {
            path: dir.clone(),
            source,
        })?;
        Ok(Some(SeriesFiles::open(&dir, &stem, capacity)?))
    }

    /// The configured algorithms as numbers under the zone's profile, with their names: what
    /// a rollover heads for ([`KeyState::advance`]).
    ///
    /// # Errors
    /// As [`LoadedConfig::algorithms`], or an algorithm the profile has no number for.
    pub fn wanted_algorithms(
        &self,
        signing: &SigningConfig,
    ) -> Result<Vec<(SecAlg, String)>, ConfigError> {
        let profile = self.profile(signing)?;
        self.algorithms(signing)?
            .into_iter()
            .map(|alg| {
                let number = profile.number(alg).ok_or_else(|| {
                    self.invalid(format!(
                        "profile {:?} has no number for {alg}",
                        profile.name()
                    ))
                })?;
                Ok((number, alg.to_string()))
            })
            .collect()
    }

    /// For a zone without rollover state: the algorithms of its key files in the key directory
    /// that are not `wanted`. When the state file of an algorithm rollover in progress is
    /// lost, the old algorithm's keys are still there, and the zone starts from both
    /// ([`KeyState::recovered`]), valid for a parent holding either DS.
    ///
    /// # Errors
    /// As [`LoadedConfig::profile`], or the key directory cannot be listed.
    fn leftover_algorithms(
        &self,
        signing: &SigningConfig,
        wanted: &[(SecAlg, String)],
    ) -> Result<Vec<(SecAlg, String)>, ConfigError> {
        let profile = self.profile(signing)?;
        let mut leftover: Vec<(SecAlg, String)> = Vec::new();
        for path in find_key_files(&self.key_directory(signing), &self.origin)? {
            let Some(number) = key_file_algorithm(&path) else {
                continue;
            };
            if wanted.iter().chain(&leftover).any(|(n, _)| *n == number) {
                continue;
            }
            let name = profile
                .algorithm(number)
                .map_or_else(|| number.to_string(), |a| a.to_string());
            tracing::warn!(
                zone = %self.origin, algorithm = %name, file = %path.display(),
                "no rollover state, but keys of an algorithm not configured: it stays \
                 published, signing and in the DS set until the rollover removes it"
            );
            leftover.push((number, name));
        }
        Ok(leftover)
    }

    /// The rollover waits and key lifetimes of the `[signing]` table, with `max_ttl` (seconds)
    /// the zone's largest TTL and the DNSKEY TTL from `dnskey_ttl` or the default TTL.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for an unparsable duration, or a key lifetime with CSKs.
    pub fn timings(&self, signing: &SigningConfig, max_ttl: u32) -> Result<Timings, ConfigError> {
        let lifetime = |text: &Option<String>, what: &str| {
            let Some(text) = text else {
                return Ok(None);
            };
            if signing.keys == KeyLayout::Csk {
                return Err(self.invalid(format!(
                    "{what} needs keys = \"ksk-zsk\": CSK rollovers are not supported"
                )));
            }
            self.duration(text, what).map(Some)
        };
        Ok(Timings {
            ksk_lifetime: lifetime(&signing.ksk_lifetime, "ksk_lifetime")?,
            zsk_lifetime: lifetime(&signing.zsk_lifetime, "zsk_lifetime")?,
            dnskey_ttl: u64::from(signing.dnskey_ttl.unwrap_or(self.config.default_ttl)),
            max_ttl: u64::from(max_ttl),
            propagation_delay: self.duration(&signing.propagation_delay, "propagation_delay")?,
            parent_ds_ttl: self.duration(&signing.parent_ds_ttl, "parent_ds_ttl")?,
            parent_propagation_delay: self.duration(
                &signing.parent_propagation_delay,
                "parent_propagation_delay",
            )?,
        })
    }

    /// Where `pqdns-zone sign` writes the signed zone unless told otherwise: the zone file's
    /// name with `.signed` appended, or `<zone>.zone.signed` beside the TOML file for inline
    /// records.
    pub fn signed_zone_path(&self) -> PathBuf {
        match &self.config.file {
            Some(file) => {
                let mut name = self.base_dir.join(file).into_os_string();
                name.push(".signed");
                PathBuf::from(name)
            }
            None => self
                .base_dir
                .join(format!("{}.zone.signed", zone_file_stem(&self.origin))),
        }
    }

    /// The keys to sign `zone` with at `now` (UNIX seconds), after taking the rollover steps
    /// due ([`crate::dnssec::rollover`]): reads the key state (every configured algorithm and
    /// its keys active when there is none yet), advances it towards the configured
    /// algorithms, generates the keys of new algorithms and the successors of keys past their
    /// lifetime, writes the state back when it changed (atomically, after the keys it names),
    /// and moves the key files the state no longer names into `<key_dir>/retired/`.
    ///
    /// # Errors
    /// As [`LoadedConfig::keys`]; [`ConfigError::KeyState`] for an unreadable or unwritable
    /// state file; [`ConfigError::Invalid`] for a key file that cannot be moved.
    pub fn rollover_keys(
        &self,
        signing: &SigningConfig,
        zone: &Zone,
        now: u64,
    ) -> Result<RolloverKeys, ConfigError> {
        let wanted = self.wanted_algorithms(signing)?;
        let timings = self.timings(signing, zone.max_ttl())?;
        let path = self.key_state_path(signing);
        let stored = KeyState::read(&path)?;
        let mut state = match stored.clone() {
            Some(state) => state,
            None => KeyState::recovered(&wanted, &self.leftover_algorithms(signing, &wanted)?, now),
        };
        let mut steps = state.advance(&wanted, &timings, now);
        let (mut keys, mut written) = self.keys_keeping(true, &state.signing())?;
        let ids: Vec<(SecAlg, u16, u16)> = keys
            .iter()
            .map(|k| (k.number, k.key_tag(), k.flags))
            .collect();
        state.register(&ids, now);
        for (alg, flags) in state.rolls_due(&timings, now) {
            let key = self.successor(signing, alg, flags, &keys)?;
            let (k, p) = key.write_files(&self.key_directory(signing))?;
            written.extend([k, p]);
            steps.push(state.start_roll(alg, flags, key.key_tag(), now));
            keys.push(key);
        }
        steps.extend(state.advance(&wanted, &timings, now));
        if stored.as_ref() != Some(&state) {
            state.write(&path)?;
        }
        let (keys, unnamed): (Vec<ZoneKey>, Vec<ZoneKey>) = keys
            .into_iter()
            .partition(|k| state.usage(k.number, k.key_tag(), k.flags) != Usage::default());
        let retired = self.retire_files(signing, &unnamed)?;
        let usage = |k: &ZoneKey| state.usage(k.number, k.key_tag(), k.flags);
        let published = keys
            .iter()
            .filter(|k| usage(k).published)
            .map(ZoneKey::dnskey_rdata)
            .collect();
        let unpublished = keys
            .iter()
            .filter(|k| !usage(k).published && usage(k).signs)
            .map(ZoneKey::dnskey_rdata)
            .collect();
        let ds = keys
            .iter()
            .filter(|k| usage(k).in_ds_set)
            .map(ZoneKey::dnskey_record)
            .collect();
        let signing_keys = keys.into_iter().filter(|k| usage(k).signs).collect();
        let next = state.next(&wanted, &timings, now);
        let orphans = orphan_private_files(&self.key_directory(signing), &self.origin);
        Ok(RolloverKeys {
            signing: signing_keys,
            published,
            unpublished,
            ds,
            written,
            retired,
            orphans,
            state,
            steps,
            next,
        })
    }

    /// A new key of `alg` and `flags` (a KSK or ZSK) to replace one of `keys`, with a key tag
    /// none of them has.
    fn successor(
        &self,
        signing: &SigningConfig,
        alg: SecAlg,
        flags: u16,
        keys: &[ZoneKey],
    ) -> Result<ZoneKey, ConfigError> {
        let profile = self.profile(signing)?;
        let provider = self.provider(signing)?;
        let algorithm = profile
            .algorithm(alg)
            .ok_or_else(|| self.invalid(format!("profile has no algorithm {alg}")))?;
        let role = if flags & 1 == 1 {
            KeyRole::Ksk
        } else {
            KeyRole::Zsk
        };
        let ttl = signing.dnskey_ttl.unwrap_or(self.config.default_ttl);
        loop {
            let key = ZoneKey::generate(&self.origin, algorithm, role, &profile, &provider, ttl)?;
            let tag = key.key_tag();
            if !keys.iter().any(|k| k.number == alg && k.key_tag() == tag) {
                return Ok(key);
            }
        }
    }

    /// Moves the files of `keys` into `<key_dir>/retired/` (kept, never deleted); returns
    /// the new paths of the `.key` files.
    fn retire_files(
        &self,
        signing: &SigningConfig,
        keys: &[ZoneKey],
    ) -> Result<Vec<PathBuf>, ConfigError> {
        let dir = self.key_directory(signing);
        let retired = dir.join("retired");
        let mut moved = Vec::new();
        for key in keys {
            let stem = key.file_stem();
            for ext in ["key", "private"] {
                let from = dir.join(format!("{stem}.{ext}"));
                let to = retired.join(format!("{stem}.{ext}"));
                std::fs::create_dir_all(&retired)
                    .and_then(|()| std::fs::rename(&from, &to))
                    .map_err(|e| {
                        self.invalid(format!(
                            "moving {} to {}: {e}",
                            from.display(),
                            retired.display()
                        ))
                    })?;
                if ext == "key" {
                    moved.push(to);
                }
            }
        }
        Ok(moved)
    }

    /// Loads the zone's keys from the key directory and, if `generate` is set, creates the
    /// missing ones (a KSK and a ZSK, or a CSK, per algorithm). Returns the keys and the paths
    /// of the files written.
    ///
    /// # Errors
    /// [`ConfigError`] for unreadable or mismatched key files, or a missing key with
    /// `generate` off (the message says which key and where it was looked for).
    pub fn keys(&self, generate: bool) -> Result<(Vec<ZoneKey>, Vec<PathBuf>), ConfigError> {
        self.keys_keeping(generate, &[])
    }

    /// [`LoadedConfig::keys`], also keeping the keys found for the algorithms `also` (the
    /// outgoing algorithms of a rollover; none is generated for them).
    ///
    /// # Errors
    /// As [`LoadedConfig::keys`].
    pub fn keys_keeping(
        &self,
        generate: bool,
        also: &[SecAlg],
    ) -> Result<(Vec<ZoneKey>, Vec<PathBuf>), ConfigError> {
        let signing = self
            .signing()
            .ok_or_else(|| self.invalid("no [signing] table".into()))?;
        let profile = self.profile(signing)?;
        let provider = self.provider(signing)?;
        let dir = self.key_directory(signing);
        let mut keys = Vec::new();
        for path in find_key_files(&dir, &self.origin)? {
            keys.push(ZoneKey::read_files(&path, &profile, &provider)?);
        }
        let ttl = signing.dnskey_ttl.unwrap_or(self.config.default_ttl);
        let roles: &[KeyRole] = match signing.keys {
            KeyLayout::KskZsk => &[KeyRole::Ksk, KeyRole::Zsk],
            KeyLayout::Csk => &[KeyRole::Csk],
        };
        let mut written = Vec::new();
        let wanted = self.algorithms(signing)?;
        for alg in &wanted {
            let number = profile.number(*alg).ok_or_else(|| {
                self.invalid(format!(
                    "profile {:?} has no number for {alg}",
                    profile.name()
                ))
            })?;
            for role in roles {
                let have = keys
                    .iter()
                    .any(|k| k.number == number && k.flags == role.flags());
                if have {
                    continue;
                }
                if !generate {
                    return Err(self.invalid(format!(
                        "no {role:?} for {alg} (algorithm {number}) in {}; run `pqdns-zone keygen` or let the server generate keys",
                        dir.display()
                    )));
                }
                let key = ZoneKey::generate(&self.origin, *alg, *role, &profile, &provider, ttl)?;
                let (k, p) = key.write_files(&dir)?;
                written.extend([k, p]);
                keys.push(key);
            }
        }
        // Keys in the directory for algorithms no longer configured (nor kept) are left out.
        let numbers: Vec<_> = wanted.iter().filter_map(|a| profile.number(*a)).collect();
        keys.retain(|k| numbers.contains(&k.number) || also.contains(&k.number));
        Ok((keys, written))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[secondary]`: primaries as `ADDR[:PORT] [key NAME]` (port 53 by default), the stored
    /// copy's path; zone data beside primaries, no primary, a bad entry or timeout are
    /// refused, naming the file.
    #[test]
    fn secondary_zones_name_primaries_and_no_data() {
        let parse = |body: &str| {
            LoadedConfig::parse(
                &format!("origin = \"example.\"\n{body}"),
                Path::new("z.toml"),
                Path::new("/base"),
            )
        };
        let cfg = parse(
            "[secondary]\nprimaries = [\"192.0.2.1\", \"[2001:db8::1]:5300 key Xfer-Key\"]\n",
        )
        .unwrap();
        assert_eq!(
            cfg.primaries().unwrap(),
            [
                Primary {
                    addr: "192.0.2.1:53".parse().unwrap(),
                    key: None
                },
                Primary {
                    addr: "[2001:db8::1]:5300".parse().unwrap(),
                    key: Some("xfer-key.".parse().unwrap())
                }
            ]
        );
        let secondary = cfg.secondary().unwrap();
        assert_eq!(
            cfg.transferred_path(secondary),
            Path::new("/base/state/example.xfr")
        );
        assert_eq!(cfg.transfer_timeout(secondary).unwrap(), 300);
        assert_eq!(secondary.max_transfer_bytes, 256 << 20);
        for (body, expected) in [
            (
                "records = \"@ SOA ns h 1 2 3 4 5\"\n[secondary]\nprimaries = [\"192.0.2.1\"]\n",
                "remove `file`",
            ),
            ("[secondary]\nprimaries = []\n", "at least one"),
            ("[secondary]\nprimaries = [\"nowhere\"]\n", "\"nowhere\""),
            (
                "[secondary]\nprimaries = [\"192.0.2.1 secret x\"]\n",
                "ADDR[:PORT] [key NAME]",
            ),
            (
                "[secondary]\nprimaries = [\"192.0.2.1\"]\ntransfer_timeout = \"soon\"\n",
                "transfer_timeout",
            ),
        ] {
            let err = parse(body).unwrap_err().to_string();
            assert!(
                err.contains("z.toml") && err.contains(expected),
                "{body}: {err}"
            );
        }
    }

    fn loaded(signing: &str) -> LoadedConfig {
        let text = format!(
            "origin = \"example.\"\nrecords = '''\n@ 300 SOA ns hostmaster 7 7200 3600 1209600 300\n@ 300 NS ns\nns 300 A 192.0.2.1\n'''\n[signing]\nalgorithms = [\"ECDSAP256SHA256\"]\n{signing}"
        );
        LoadedConfig::parse(&text, Path::new("z.toml"), Path::new("/nonexistent")).unwrap()
    }

    #[test]
    fn mtl_series_capacity_outside_1_to_2_pow_24_is_refused_naming_the_file() {
        let origin: Name = "example.".parse().unwrap();
        let key = ZoneKey::generate(
            &origin,
            Algorithm::MlDsaMtl44,
            KeyRole::Csk,
            &Profile::default_profile(),
            &Provider::default_provider(),
            300,
        )
        .unwrap();
        for bad in [0, MAX_CAPACITY + 1] {
            let cfg = loaded(&format!("mtl_series_capacity = {bad}"));
            let err = cfg
                .mtl_series(cfg.signing().unwrap(), std::slice::from_ref(&key))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("z.toml") && err.contains("mtl_series_capacity"),
                "{err}"
            );
            // Without an MTL key nothing is opened or checked.
            assert!(cfg
                .mtl_series(cfg.signing().unwrap(), &[])
                .unwrap()
                .is_none());
        }
    }

    #[test]
    fn refresh_defaults_to_a_quarter_of_the_validity_and_must_be_shorter() {
        let refresh = |signing: &str| {
            let cfg = loaded(signing);
            cfg.refresh(cfg.signing().unwrap())
        };
        assert_eq!(refresh("").unwrap(), 14 * 86_400 / 4);
        assert_eq!(refresh("validity = \"8\"").unwrap(), 2);
        assert_eq!(
            refresh("validity = \"1d\"\nrefresh = \"2h\"").unwrap(),
            7200
        );
        let err = refresh("validity = \"1h\"\nrefresh = \"1h\"")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("z.toml") && err.contains("shorter than validity"),
            "{err}"
        );
        assert!(refresh("refresh = \"soon\"").is_err());
    }

    #[test]
    fn jitter_defaults_to_a_28th_of_the_validity_and_leaves_time_before_expiry() {
        let jitter = |signing: &str| {
            let cfg = loaded(signing);
            cfg.jitter(cfg.signing().unwrap())
        };
        assert_eq!(jitter("").unwrap(), 12 * 3600);
        assert_eq!(jitter("jitter = \"1h\"").unwrap(), 3600);
        let err = jitter("validity = \"1d\"\nrefresh = \"12h\"\njitter = \"12h\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("plus refresh"), "{err}");
    }

    /// Issue 31 item 8: the rollover state file lost in the middle of ECDSA → ML-DSA-44: the
    /// ECDSA keys stay published, signing and in the DS set (a parent with the old DS still
    /// validates the zone), not retired at once; with the file, the ECDSA DS is withdrawn only
    /// through the rollover's steps.
    #[test]
    fn a_lost_rollover_state_keeps_the_old_algorithm() {
        let dir = tempfile::tempdir().unwrap();
        let at = |algorithms: &str| {
            let text = format!(
                "origin = \"example.\"\nrecords = '''\n@ 300 SOA ns hostmaster 7 7200 3600 1209600 300\n\
                 @ 300 NS ns\nns 300 A 192.0.2.1\n'''\n[signing]\nalgorithms = [{algorithms}]\n"
            );
            LoadedConfig::parse(&text, &dir.path().join("z.toml"), dir.path()).unwrap()
        };
        let ecdsa = SecAlg(13);
        let algorithms = |keys: &[ZoneKey]| -> Vec<SecAlg> {
            let mut a: Vec<SecAlg> = keys.iter().map(|k| k.number).collect();
            a.sort_by_key(|n| n.0);
            a.dedup();
            a
        };
        let now = 1_800_000_000;
        let first = at("\"ECDSAP256SHA256\"");
        let zone = first.read_zone().unwrap();
        first
            .rollover_keys(first.signing().unwrap(), &zone, now)
            .unwrap();
        let rolling = at("\"ML-DSA-44\"");
        let keys = rolling
            .rollover_keys(rolling.signing().unwrap(), &zone, now + 60)
            .unwrap();
        assert_eq!(algorithms(&keys.signing), [ecdsa, SecAlg(18)], "both sign");
        std::fs::remove_file(rolling.key_state_path(rolling.signing().unwrap())).unwrap();
        let keys = rolling
            .rollover_keys(rolling.signing().unwrap(), &zone, now + 120)
            .unwrap();
        assert!(keys.retired.is_empty(), "{:?}", keys.retired);
        assert!(keys.orphans.is_empty());
        // A .private file without its .key (a key generation cut short) is reported.
        let keydir = dir.path().join("keys");
        let orphan = keydir.join("Kexample.+013+00007.private");
        std::fs::write(&orphan, "Private-key-format: v1.3\n").unwrap();
        let reported = rolling
            .rollover_keys(rolling.signing().unwrap(), &zone, now + 121)
            .unwrap()
            .orphans;
        assert_eq!(reported, [orphan]);
        assert!(algorithms(&keys.signing).contains(&ecdsa));
        let ds_algorithms: Vec<u8> = keys.ds.iter().map(|r| r.rdata[3]).collect();
        assert_eq!(ds_algorithms, [13], "the parent is asked for no change yet");
        let published = |alg: u8| keys.published.iter().filter(|k| k[3] == alg).count();
        assert_eq!(published(13), 2, "KSK and ZSK of ECDSA stay published");
        assert_eq!(published(18), 2, "and ML-DSA-44's, which signed already");
    }

    #[test]
    fn the_soa_serial_can_be_raised() {
        let mut zone = loaded("").read_zone().unwrap();
        assert_eq!(zone.soa_serial(), 7);
        assert!(zone.set_soa_serial(8));
        assert_eq!(zone.soa_serial(), 8);
        let soa = zone.soa_fields().unwrap();
        assert_eq!(
            (soa.refresh, soa.minimum),
            (7200, 300),
            "only SERIAL changed"
        );
    }
}
