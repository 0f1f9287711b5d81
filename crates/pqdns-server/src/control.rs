//! The control channel: operations on a running server, as `pqdns-ctl` (like `knotc` and
//! `rndc`) asks for them over a Unix socket.
//!
//! Every operation is a method of [`ServerHandle`] (`status`, `zone_status`, `zone_reload`,
//! `zone_sign`, `zone_freeze`, …, in `server/control.rs`), so an embedder calls the same code
//! the socket does; [`execute`] maps a [`protocol::Command`] to its method and nothing else.
//! [`protocol`] is the wire format (one JSON object per line, versioned), [`socket`] the
//! listener (file mode 0660, peers checked by their credentials, bounded requests,
//! connections and time).
//!
//! `zone-freeze` holds dynamic updates (RFC 2136) of a zone: while frozen, an UPDATE is
//! answered REFUSED (as BIND's `rndc freeze` does), not queued. A frozen zone stays frozen
//! across restarts: `<state_dir>/<zone>.frozen` (written atomically, removed by `zone-thaw`)
//! marks it, and every load freezes the zones so marked.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{PoisonError, RwLock};

use pqdns_core::atomic_file::{write_atomic, FileMode};
use pqdns_core::config::{ConfigError, LoadedConfig};
use pqdns_core::dnssec::rollover::KeyStateError;
use pqdns_core::Name;

use crate::server::ServerHandle;
use crate::zones::{read_config, LoadError, ZoneSource};

pub mod protocol;
pub mod socket;

use protocol::{Command, Reply};

/// Why a control operation failed. The socket sends its text to the client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// The zone argument is not a domain name.
    #[error("{text:?} is not a zone name: {reason}")]
    BadName {
        /// What was given.
        text: String,
        /// Why it is no name.
        reason: String,
    },
    /// No zone of that name is configured.
    #[error("no zone {0} is configured here")]
    UnknownZone(Name),
    /// A zone description could not be read.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Loading or signing failed; the zone served before stays.
    #[error("{0} (the zone served before stays)")]
    Load(#[from] LoadError),
    /// The command needs a zone pqdns signs.
    #[error("zone {0} is not signed here (no [signing] table)")]
    NotSigned(Name),
    /// The command needs a secondary zone.
    #[error("zone {0} is not a secondary zone")]
    NotSecondary(Name),
    /// A secondary zone's data comes from its primaries, not from a file.
    #[error("zone {0} is a secondary zone: its data comes from its primaries (zone-retransfer)")]
    Secondary(Name),
    /// The key state file could not be read or written.
    #[error(transparent)]
    KeyState(#[from] KeyStateError),
    /// The zone has no key state yet.
    #[error("{}: no rollover state yet (it is written when the zone is first signed)", .0.display())]
    NoKeyState(PathBuf),
    /// `ds-published` while no algorithm or key waits for the parent.
    #[error("zone {0}: no algorithm or key waits for the parent's DS RRset")]
    NothingWaitsForDs(Name),
    /// The mark of a frozen zone could not be written or removed.
    #[error("{}: {error}", path.display())]
    Frozen {
        /// The file (`<state_dir>/<zone>.frozen`).
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// `stats` on a server that counts nothing (no metrics endpoint and no control socket).
    #[error("nothing is counted: the server has neither a metrics endpoint nor a control socket")]
    NoMetrics,
}

/// Runs `command` on the server of `handle`: the method of [`ServerHandle`] that does it.
///
/// # Errors
/// The [`ControlError`] of the operation.
pub async fn execute(handle: &ServerHandle, command: &Command) -> Result<Reply, ControlError> {
    let done = |message: String| Ok(Reply::Done { message });
    match command {
        Command::Status => Ok(Reply::Status(handle.status())),
        Command::ZoneList => Ok(Reply::ZoneList {
            zones: handle.zone_list(),
        }),
        Command::ZoneStatus { zone } => {
            handle.zone_status(&zone_name(zone)?).map(Reply::ZoneStatus)
        }
        Command::ZoneReload { zone } => loaded(handle.zone_reload(&zone_name(zone)?).await),
        Command::ZoneSign { zone } => loaded(handle.zone_sign(&zone_name(zone)?).await),
        Command::ZoneThaw { zone } => loaded(handle.zone_thaw(&zone_name(zone)?).await),
        Command::DsPublished { zone } => loaded(handle.ds_published(&zone_name(zone)?).await),
        Command::ZoneRetransfer { zone } => {
            let zone = zone_name(zone)?;
            handle.zone_retransfer(&zone)?;
            done(format!(
                "{zone}: transferring the whole zone (AXFR) from its primaries"
            ))
        }
        Command::ZoneNotify { zone } => {
            let zone = zone_name(zone)?;
            let targets = handle.zone_notify(&zone)?;
            done(format!("{zone}: NOTIFY sent to {targets} secondaries"))
        }
        Command::ZoneFreeze { zone } => {
            let zone = zone_name(zone)?;
            let state = if handle.zone_freeze(&zone)? {
                "frozen: dynamic updates are answered REFUSED until zone-thaw"
            } else {
                "already frozen"
            };
            done(format!("{zone}: {state}"))
        }
        Command::KeyList { zone } => {
            let zone = zone_name(zone)?;
            Ok(Reply::KeyList {
                keys: handle.key_list(&zone)?,
                zone: zone.to_string(),
            })
        }
        Command::Stats => Ok(Reply::Stats {
            counters: handle.stats()?,
        }),
        Command::Reload => {
            let report = handle.reload_report().await?;
            Ok(Reply::Loaded {
                zones: handle.zone_list(),
                started: report.started,
                stopped: report.stopped,
                needs_restart: report.needs_restart,
            })
        }
    }
}

fn loaded(summary: Result<protocol::ZoneSummary, ControlError>) -> Result<Reply, ControlError> {
    summary.map(|s| Reply::Loaded {
        zones: vec![s],
        started: Vec::new(),
        stopped: Vec::new(),
        needs_restart: Vec::new(),
    })
}

/// A zone's apex from the command line: `example.com` or `example.com.`.
///
/// # Errors
/// [`ControlError::BadName`].
pub fn zone_name(text: &str) -> Result<Name, ControlError> {
    let absolute = if text.ends_with('.') {
        text.to_owned()
    } else {
        format!("{text}.")
    };
    absolute.parse().map_err(|e| ControlError::BadName {
        text: text.to_owned(),
        reason: format!("{e}"),
    })
}

/// Where the zone `cfg` describes is marked frozen across restarts: `<state_dir>/<zone>.frozen`
/// (signed zones, the only ones that take updates; `None` for the others).
pub(crate) fn frozen_path(cfg: &LoadedConfig) -> Option<PathBuf> {
    let signing = cfg.signing()?;
    Some(cfg.persisted_paths(signing).0.with_extension("frozen"))
}

/// Marks the zone `cfg` describes frozen across restarts (`frozen`) or not.
///
/// # Errors
/// [`ControlError::Frozen`].
pub(crate) fn persist_frozen(cfg: &LoadedConfig, frozen: bool) -> Result<(), ControlError> {
    let Some(path) = frozen_path(cfg) else {
        return Ok(());
    };
    let done = if frozen {
        let text = "; pqdns-ctl zone-freeze: dynamic updates get REFUSED until zone-thaw\n";
        write_atomic(&path, text.as_bytes(), FileMode::Public)
    } else {
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    };
    done.map_err(|error| ControlError::Frozen { path, error })
}

/// Freezes each zone of `sources` that is marked frozen ([`frozen_path`]); a description that
/// does not read is skipped (the load that follows reports it).
pub(crate) fn restore_frozen(frozen: &Frozen, sources: &[ZoneSource]) {
    for source in sources {
        let Ok(cfg) = read_config(source) else {
            continue;
        };
        if frozen_path(&cfg).is_some_and(|p| p.exists()) && frozen.freeze(&cfg.origin) {
            tracing::info!(zone = %cfg.origin, "frozen before the restart: dynamic updates get REFUSED until zone-thaw");
        }
    }
}

/// The zones whose dynamic updates are held (`zone-freeze`), which the UPDATE handler checks
/// first ([`crate::update`]).
#[derive(Debug, Default)]
pub(crate) struct Frozen(RwLock<BTreeSet<Name>>);

impl Frozen {
    /// Whether `zone`'s updates are held.
    pub(crate) fn contains(&self, zone: &Name) -> bool {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(zone)
    }

    /// Holds `zone`'s updates; `false` if they were held already.
    pub(crate) fn freeze(&self, zone: &Name) -> bool {
        self.0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(zone.clone())
    }

    /// Accepts `zone`'s updates again; `false` if they were not held.
    pub(crate) fn thaw(&self, zone: &Name) -> bool {
        self.0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(zone)
    }

    /// The frozen zones, in canonical order.
    pub(crate) fn list(&self) -> Vec<Name> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_names_with_or_without_the_final_dot() {
        let want: Name = "example.com.".parse().unwrap();
        assert_eq!(zone_name("example.com").unwrap(), want);
        assert_eq!(zone_name("example.com.").unwrap(), want);
        assert!(matches!(
            zone_name("a..b"),
            Err(ControlError::BadName { .. })
        ));
    }
}
