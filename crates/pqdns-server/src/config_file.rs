//! The configuration file of pqdns-server (`--config`; `/etc/pqdns/pqdns-server.toml` when
//! installed from the package): everything a server needs in one file.
//!
//! ```toml
//! [server]                      # server-wide: listeners, TLS, limits, RRL, cookies, user…
//! udp = ["192.0.2.53:53"]       # (the keys of a zone description's [server] table)
//! user = "pqdns"
//!
//! [[zone]]                      # a zone description file, as given to --zone
//! description = "zones/example.org.toml"
//!
//! [[zone]]                      # or a zone description inline, with the same keys
//! origin = "example.com."
//! file = "example.com.zone"
//! [zone.signing]
//! algorithms = ["ECDSAP256SHA256", "ML-DSA-44"]
//! ```
//!
//! Relative paths (descriptions, zone files, key directories) are relative to the directory of
//! the configuration file. The `[server]` tables of the zone descriptions keep working; the
//! configuration file's own `[server]` table comes first (the first table setting a key wins,
//! [`Settings::from_tables`](crate::settings::Settings::from_tables)).
//!
//! A reload (SIGHUP, `pqdns-ctl reload`, `--watch`) reads the file again
//! ([`crate::ServerHandle::reload`]): an inline zone is found again by its origin, so editing
//! its settings takes effect, and `[[zone]]` tables added or removed add or remove zones
//! without a restart (zones added at run time and catalog members stay). A file that no longer reads
//! changes nothing. Of the `[server]` table, a reload applies the listen addresses (`udp`,
//! `tcp`, `dot`, `doh`, `doq`: [`crate::reconfigure`]); the other keys take effect at the next
//! start, and a reload that finds them changed says so. Errors name the file and the
//! line of the `[[zone]]` table (or of the `[server]` key) they are about.

use std::path::{Path, PathBuf};

use pqdns_core::config::{ConfigError, LoadedConfig};
use pqdns_core::Name;
use serde::Deserialize;

use crate::settings::{ServerTable, SettingsError};
use crate::zones::ZoneSource;

/// A parsed configuration file: its `[server]` table and its zones, in file order.
#[derive(Clone, Debug)]
pub struct ConfigFile {
    /// The file.
    pub path: PathBuf,
    /// The directory relative paths are resolved against (the file's own).
    pub base_dir: PathBuf,
    /// The `[server]` table, if any.
    pub server: Option<ServerTable>,
    /// The `[server]` table as written, key by key (empty without one): a reload tells the
    /// keys it changed ([`crate::reconfigure`]).
    pub server_keys: toml::Table,
    /// One source per `[[zone]]` table: [`ZoneSource::File`] for `description = "…"`,
    /// [`ZoneSource::Inline`] for an inline description.
    pub zones: Vec<ZoneSource>,
}

/// Why a configuration file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigFileError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// TOML syntax, an unknown top-level key or a mistyped value (the message has the line).
    #[error("{}: {message}", path.display())]
    Toml {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A `[[zone]]` table is wrong: `file:line` of the table, and what is wrong.
    #[error("{}:{line}: [[zone]]: {message}", path.display())]
    Zone {
        /// The file.
        path: PathBuf,
        /// Line (from 1) of the `[[zone]]` header.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The `[server]` table is wrong.
    #[error(transparent)]
    Server(#[from] SettingsError),
}

/// The file's top level: only `server` and `zone` are allowed.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    /// Read with line numbers by `ServerTable::parse_document`; kept key by key here.
    #[serde(default)]
    server: toml::Table,
    #[serde(default)]
    zone: Vec<toml::Spanned<toml::Table>>,
}

/// The key of a `[[zone]]` table that names a zone description file.
const DESCRIPTION_KEY: &str = "description";

impl ConfigFile {
    /// Reads and checks the configuration file at `path`: TOML syntax, top-level keys, the
    /// `[server]` table's keys and types, and each `[[zone]]` table's form (a `description`
    /// path alone, or an inline description with a valid origin). The zones' data, keys and
    /// the ranges of the settings are checked later, as for `--zone` descriptions.
    ///
    /// # Errors
    /// [`ConfigFileError`], with the file and line.
    pub fn read(path: &Path) -> Result<ConfigFile, ConfigFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let base_dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let document = parse(&text, path)?;
        let server = ServerTable::parse_document(&text, path)?;
        let mut zones = Vec::with_capacity(document.zone.len());
        let mut origins: Vec<(Name, usize)> = Vec::new();
        for entry in document.zone {
            let line = line_of(&text, entry.span().start);
            let zone_error = |message: String| ConfigFileError::Zone {
                path: path.to_path_buf(),
                line,
                message,
            };
            let table = entry.into_inner();
            if let Some(description) = table.get(DESCRIPTION_KEY) {
                let Some(file) = description.as_str().filter(|_| table.len() == 1) else {
                    return Err(zone_error(format!(
                        "`{DESCRIPTION_KEY}` must be a path (a string) and the table's only key; \
                         write an inline zone without it"
                    )));
                };
                zones.push(ZoneSource::File(base_dir.join(file)));
                continue;
            }
            if table.contains_key("server") {
                return Err(zone_error(
                    "server settings belong in the file's [server] table, not in a zone".into(),
                ));
            }
            let loaded = inline_description(table, path, line, &base_dir)?;
            if let Some((_, first)) = origins.iter().find(|(o, _)| *o == loaded.origin) {
                return Err(zone_error(format!(
                    "zone {} is already configured at line {first}",
                    loaded.origin
                )));
            }
            origins.push((loaded.origin.clone(), line));
            zones.push(ZoneSource::Inline {
                config: path.to_path_buf(),
                origin: loaded.origin,
            });
        }
        Ok(ConfigFile {
            path: path.to_path_buf(),
            base_dir,
            server,
            server_keys: document.server,
            zones,
        })
    }
}

/// The zone description of `origin`, inline in the configuration file at `path`, read afresh.
///
/// # Errors
/// [`ConfigError`]: the file cannot be read or parsed, or no longer holds that zone inline.
pub fn read_inline(path: &Path, origin: &Name) -> Result<LoadedConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let base_dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let document = parse(&text, path).map_err(|e| ConfigError::Toml {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    for entry in document.zone {
        let line = line_of(&text, entry.span().start);
        let table = entry.into_inner();
        let same_origin = table
            .get("origin")
            .and_then(toml::Value::as_str)
            .and_then(|o| Name::parse(o, None).ok())
            .is_some_and(|o| o == *origin);
        if same_origin && !table.contains_key(DESCRIPTION_KEY) {
            return LoadedConfig::from_table(table, &zone_label(path, line), &base_dir);
        }
    }
    Err(ConfigError::Invalid {
        path: path.to_path_buf(),
        message: format!("zone {origin} is no longer configured inline here"),
    })
}

fn parse(text: &str, path: &Path) -> Result<Document, ConfigFileError> {
    toml::from_str(text).map_err(|e| ConfigFileError::Toml {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// An inline `[[zone]]` table as a zone description, its errors placed at its line.
fn inline_description(
    table: toml::Table,
    path: &Path,
    line: usize,
    base_dir: &Path,
) -> Result<LoadedConfig, ConfigFileError> {
    LoadedConfig::from_table(table, &zone_label(path, line), base_dir).map_err(|e| {
        let message = match e {
            ConfigError::Toml { message, .. } | ConfigError::Invalid { message, .. } => message,
            other => other.to_string(),
        };
        ConfigFileError::Zone {
            path: path.to_path_buf(),
            line,
            message,
        }
    })
}

/// How an inline zone is named in later errors: `FILE:LINE [[zone]]`.
fn zone_label(path: &Path, line: usize) -> PathBuf {
    PathBuf::from(format!("{}:{line} [[zone]]", path.display()))
}

/// The line (from 1) holding byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(0, |before| before.matches('\n').count())
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) -> PathBuf {
        let path = dir.join("pqdns-server.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn description_paths_and_inline_zones_in_file_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "[server]\nudp = [\"127.0.0.1:53\"]\n\n[[zone]]\ndescription = \"a.toml\"\n\n\
             [[zone]]\norigin = \"example.com.\"\nrecords = \"@ SOA ns h 1 2 3 4 5\"\n\
             [zone.signing]\nalgorithms = [\"ECDSAP256SHA256\"]\n",
        );
        let file = ConfigFile::read(&path).unwrap();
        let origin = Name::parse("example.com.", None).unwrap();
        assert_eq!(
            file.zones,
            vec![
                ZoneSource::File(dir.path().join("a.toml")),
                ZoneSource::Inline {
                    config: path.clone(),
                    origin: origin.clone()
                },
            ]
        );
        let udp = file.server.unwrap().udp.unwrap();
        assert_eq!(udp, vec!["127.0.0.1:53".parse().unwrap()]);
        let inline = read_inline(&path, &origin).unwrap();
        assert!(
            inline.config.signing.is_some(),
            "[zone.signing] belongs to the zone"
        );
        assert_eq!(inline.base_dir, dir.path());
    }

    #[test]
    fn errors_name_the_line_of_the_zone_table() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            // unknown key in an inline zone
            (
                "[[zone]]\norigin = \"a.\"\n\n[[zone]]\norigin = \"b.\"\nfiel = \"x\"\n",
                4,
                "fiel",
            ),
            // relative origin
            ("\n[[zone]]\norigin = \"example\"\n", 2, "absolute"),
            // description beside other keys
            (
                "[[zone]]\ndescription = \"a.toml\"\norigin = \"a.\"\n",
                1,
                "only key",
            ),
            // server settings inside a zone
            (
                "[[zone]]\norigin = \"a.\"\n[zone.server]\nudp = []\n",
                1,
                "[server] table",
            ),
            // the same zone twice
            (
                "[[zone]]\norigin = \"a.\"\n[[zone]]\norigin = \"A.\"\n",
                3,
                "line 1",
            ),
        ];
        for (text, line, needle) in cases {
            let path = write(dir.path(), text);
            let e = ConfigFile::read(&path).unwrap_err().to_string();
            let at = format!("pqdns-server.toml:{line}: [[zone]]");
            assert!(e.contains(&at) && e.contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn unknown_top_level_and_server_keys_are_refused_with_their_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "[server]\nudp = []\n\n[zones]\n");
        let e = ConfigFile::read(&path).unwrap_err().to_string();
        assert!(e.contains("line 4") && e.contains("zones"), "{e}");
        let path = write(dir.path(), "[server]\nudp = []\nrrl = 5\n");
        let e = ConfigFile::read(&path).unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("rrl"), "{e}");
    }

    #[test]
    fn a_removed_inline_zone_is_an_error_on_reread() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "[[zone]]\norigin = \"a.\"\n");
        let a = Name::parse("a.", None).unwrap();
        assert!(read_inline(&path, &a).is_ok());
        write(dir.path(), "[[zone]]\norigin = \"b.\"\n");
        let e = read_inline(&path, &a).unwrap_err().to_string();
        assert!(e.contains("no longer configured"), "{e}");
    }
}
