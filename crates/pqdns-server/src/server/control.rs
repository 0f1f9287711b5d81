//! The control operations as methods of [`ServerHandle`] ([`crate::control`]): one place for
//! each, called by the control socket and by embedders alike. Changes of the served catalog
//! take the lock every change takes (reloads, dynamic updates, transfers), so none is lost.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError};

use pqdns_core::config::LoadedConfig;
use pqdns_core::dnssec::rollover::{KeyState, Next};
use pqdns_core::wire::rdata::Rrsig;
use pqdns_core::{Name, Zone};

use super::ServerHandle;
use crate::control::protocol::{
    Counter, KeyInfo, PhaseSince, Rollover, SecondaryTimers, ServerStatus, ZoneStatus, ZoneSummary,
};
use crate::control::{persist_frozen, ControlError};
use crate::notify;
use crate::secondary::Timers;
use crate::zones::{read_config, reload_with, LoadError, Signatures, ZoneReport, ZoneSource};

/// What the handle remembers of each zone's last load, for `zone-status`.
#[derive(Debug)]
pub(super) struct Loads {
    /// When the handle was made, UNIX seconds.
    started: u64,
    by_zone: std::sync::Mutex<BTreeMap<Name, Load>>,
}

#[derive(Clone, Copy, Debug)]
struct Load {
    /// When, UNIX seconds.
    at: u64,
    /// When its signatures are refreshed next ([`ZoneReport::refresh_at`]).
    refresh_at: Option<u64>,
    /// Whether it was signed.
    signed: bool,
}

impl Loads {
    pub(super) fn new() -> Loads {
        Loads {
            started: pqdns_core::time::now(),
            by_zone: std::sync::Mutex::default(),
        }
    }

    /// Records the loads of `reports` at `now`: all the zones (forgetting the others) when
    /// `all`, else those only. Returns the earliest refresh time of every zone.
    pub(super) fn record(&self, reports: &[ZoneReport], now: u64, all: bool) -> Option<u64> {
        let mut map = self.by_zone.lock().unwrap_or_else(PoisonError::into_inner);
        if all {
            map.clear();
        }
        for r in reports {
            let Some(origin) = &r.origin else { continue };
            let load = Load {
                at: now,
                refresh_at: r.refresh_at,
                signed: r.key_dir.is_some(),
            };
            map.insert(origin.clone(), load);
        }
        map.values().filter_map(|l| l.refresh_at).min()
    }

    fn get(&self, origin: &Name) -> Option<Load> {
        self.by_zone
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(origin)
            .copied()
    }
}

/// A 32-bit RRSIG time (RFC 4034 §3.1.5: serial arithmetic) as UNIX seconds: the time within
/// 2^31 seconds of `now` that it names.
fn rrsig_time(t: u32, now: u64) -> u64 {
    // Modulo 2^32, as RFC 4034 §3.1.5 compares them.
    let delta = t.wrapping_sub(now as u32) as i32;
    now.saturating_add_signed(i64::from(delta))
}

/// The earliest expiration of any RRSIG record in `zone`, UNIX seconds.
fn earliest_expiry(zone: &Zone, now: u64) -> Option<u64> {
    zone.nodes
        .values()
        .flat_map(|node| node.values())
        .chain(zone.nsec3.values())
        .flat_map(|set| &set.rrsigs)
        .filter_map(|rdata| Rrsig::parse(rdata))
        .map(|sig| rrsig_time(sig.expiration, now))
        .min()
}

impl ServerHandle {
    /// The server: version, start time, zones, frozen zones and listening addresses.
    pub fn status(&self) -> ServerStatus {
        let a = &self.listening();
        let listeners = [
            ("udp", &a.udp),
            ("tcp", &a.tcp),
            ("dot", &a.dot),
            ("doh", &a.doh),
            ("doq", &a.doq),
        ]
        .into_iter()
        .flat_map(|(kind, addrs)| addrs.iter().map(move |addr| format!("{kind} {addr}")))
        .chain(a.metrics.map(|m| format!("metrics {m}")))
        .collect();
        ServerStatus {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            started: self.loads.started,
            zones: self.service.catalog().zones().count(),
            frozen: self
                .service
                .frozen
                .list()
                .iter()
                .map(ToString::to_string)
                .collect(),
            listeners,
        }
    }

    /// Every zone served, in canonical order, with its serial.
    pub fn zone_list(&self) -> Vec<ZoneSummary> {
        self.service
            .catalog()
            .zones()
            .map(|z| self.summary(&z.zone.origin))
            .collect()
    }

    /// `origin` as served now.
    fn summary(&self, origin: &Name) -> ZoneSummary {
        let secondary = self.secondaries.status(origin).is_some();
        ZoneSummary {
            zone: origin.to_string(),
            role: if secondary { "secondary" } else { "primary" }.to_owned(),
            serial: self
                .service
                .catalog()
                .zone(origin)
                .map(|z| z.zone.soa_serial()),
            signed: self.loads.get(origin).is_some_and(|l| l.signed),
        }
    }

    /// The source and description of the configured zone `origin`.
    fn source_of(&self, origin: &Name) -> Result<(ZoneSource, LoadedConfig), ControlError> {
        for source in &self.provisioning.sources() {
            let cfg = read_config(source)?;
            if cfg.origin == *origin {
                return Ok((source.clone(), cfg));
            }
        }
        Err(ControlError::UnknownZone(origin.clone()))
    }

    /// One zone in detail: serial, last load, next re-signing, earliest signature expiration,
    /// whether updates are frozen, the rollover's phases and next step (signed zones), the
    /// SOA timers (secondary zones).
    ///
    /// # Errors
    /// [`ControlError::UnknownZone`], or the description or key state cannot be read.
    pub fn zone_status(&self, origin: &Name) -> Result<ZoneStatus, ControlError> {
        let (_, cfg) = self.source_of(origin)?;
        let now = pqdns_core::time::now();
        let catalog = self.service.catalog();
        let served = catalog.zone(origin);
        let load = self.loads.get(origin);
        let rollover = match (cfg.signing(), served) {
            (Some(signing), Some(served)) => {
                rollover(&cfg, signing, &served.zone, now, &origin.to_string())?
            }
            _ => None,
        };
        let secondary = self
            .secondaries
            .status(origin)
            .map(|(primaries, schedule)| {
                let ms = |t: u64| t / 1000;
                let timers = served.and_then(|z| Timers::of(&z.zone));
                SecondaryTimers {
                    primaries: primaries.iter().map(ToString::to_string).collect(),
                    last_success: schedule.and_then(|s| s.last_success).map(ms),
                    next_refresh: schedule.map(|s| ms(s.next_refresh)),
                    expires: schedule
                        .zip(timers)
                        .and_then(|(s, t)| s.expires_at(t))
                        .map(ms),
                }
            });
        Ok(ZoneStatus {
            summary: self.summary(origin),
            last_load: load.map(|l| l.at),
            next_resign: load.and_then(|l| l.refresh_at),
            earliest_expiry: served.and_then(|z| earliest_expiry(&z.zone, now)),
            frozen: self.service.frozen.contains(origin),
            expired: served.is_some_and(|z| z.expired),
            rollover,
            secondary,
        })
    }

    /// Re-reads and re-signs the zone `origin` from its description and file (a `.dynamic`
    /// file of updates applies while the file is unchanged), keeping its fresh signatures, as
    /// a reload does for every zone; then NOTIFY. A secondary zone with inline signing is
    /// signed again from its stored copy.
    ///
    /// # Errors
    /// [`ControlError::Secondary`] for a secondary zone without signing; the load's error
    /// (the zone served before stays).
    pub async fn zone_reload(&self, origin: &Name) -> Result<ZoneSummary, ControlError> {
        self.load_one(origin, Signatures::Keep).await
    }

    /// Signs the zone `origin` anew now: every signature is made again (new inception and
    /// expiration) and the SOA serial goes up; then NOTIFY.
    ///
    /// # Errors
    /// [`ControlError::NotSigned`] for a zone without `[signing]`; as
    /// [`ServerHandle::zone_reload`].
    pub async fn zone_sign(&self, origin: &Name) -> Result<ZoneSummary, ControlError> {
        self.load_one(origin, Signatures::Renew).await
    }

    async fn load_one(
        &self,
        origin: &Name,
        signatures: Signatures,
    ) -> Result<ZoneSummary, ControlError> {
        let (source, cfg) = self.source_of(origin)?;
        if cfg.signing().is_none() {
            if cfg.secondary().is_some() {
                return Err(ControlError::Secondary(origin.clone()));
            }
            if signatures == Signatures::Renew {
                return Err(ControlError::NotSigned(origin.clone()));
            }
        }
        let now = pqdns_core::time::now();
        let service = Arc::clone(&self.service);
        let secondaries = Arc::clone(&self.secondaries);
        let reports = tokio::task::spawn_blocking(move || {
            let _changing = service.lock_catalog_changes();
            let generations = secondaries.generations();
            let served = service.catalog();
            let (loaded, reports) = reload_with(&[source], now, Some(&served), signatures)?;
            let mut next = served.rebuilt();
            for zone in loaded.zones() {
                next.insert(zone.clone());
            }
            service.set_catalog(secondaries.overlay(next, &served, &generations));
            Ok::<_, LoadError>(reports)
        })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;
        let refresh_at = self.loads.record(&reports, now, false);
        *self
            .refresh_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = refresh_at;
        self.refresh_changed.notify_one();
        notify::spawn_zone(&self.service.catalog(), origin, &self.notify);
        Ok(self.summary(origin))
    }

    /// Transfers the secondary zone `origin` whole (AXFR, RFC 5936) from its primaries now,
    /// in the background: the new version is served (and NOTIFY sent) once it is in.
    ///
    /// # Errors
    /// [`ControlError::NotSecondary`], [`ControlError::UnknownZone`].
    pub fn zone_retransfer(&self, origin: &Name) -> Result<(), ControlError> {
        if self.secondaries.retransfer(origin) {
            return Ok(());
        }
        self.source_of(origin)?;
        Err(ControlError::NotSecondary(origin.clone()))
    }

    /// Sends NOTIFY (RFC 1996) for the zone `origin` to the configured secondaries, in the
    /// background; returns how many.
    ///
    /// # Errors
    /// [`ControlError::UnknownZone`] when it is not served.
    pub fn zone_notify(&self, origin: &Name) -> Result<usize, ControlError> {
        let catalog = self.service.catalog();
        if catalog.zone(origin).is_none() {
            return Err(ControlError::UnknownZone(origin.clone()));
        }
        notify::spawn_zone(&catalog, origin, &self.notify);
        Ok(self.notify.len())
    }

    /// Holds dynamic updates of `origin`: they are answered REFUSED until
    /// [`ServerHandle::zone_thaw`], also after a restart (`<state_dir>/<zone>.frozen`).
    /// Returns `false` if they were held already.
    ///
    /// # Errors
    /// [`ControlError::UnknownZone`], [`ControlError::Frozen`].
    pub fn zone_freeze(&self, origin: &Name) -> Result<bool, ControlError> {
        let (_, cfg) = self.source_of(origin)?;
        persist_frozen(&cfg, true)?;
        Ok(self.service.frozen.freeze(origin))
    }

    /// Accepts dynamic updates of `origin` again, then reloads it
    /// ([`ServerHandle::zone_reload`]: its file may have been edited while frozen); the mark
    /// that kept it frozen across restarts is removed first.
    ///
    /// # Errors
    /// [`ControlError::Frozen`]; as [`ServerHandle::zone_reload`].
    pub async fn zone_thaw(&self, origin: &Name) -> Result<ZoneSummary, ControlError> {
        let (_, cfg) = self.source_of(origin)?;
        persist_frozen(&cfg, false)?;
        self.service.frozen.thaw(origin);
        if cfg.secondary().is_some() && cfg.signing().is_none() {
            return Ok(self.summary(origin));
        }
        self.zone_reload(origin).await
    }

    /// Records that the parent's DS RRset now equals the DS set the rollover of `origin`
    /// asked for (`pqdns-zone rollover --ds-published`), under the lock on catalog changes,
    /// then reloads the zone, which takes the rollover's next step.
    ///
    /// # Errors
    /// [`ControlError::NotSigned`], [`ControlError::NoKeyState`],
    /// [`ControlError::NothingWaitsForDs`], a key state file that cannot be read or written,
    /// or the reload's error.
    pub async fn ds_published(&self, origin: &Name) -> Result<ZoneSummary, ControlError> {
        let (_, cfg) = self.source_of(origin)?;
        let signing = cfg
            .signing()
            .ok_or_else(|| ControlError::NotSigned(origin.clone()))?;
        let path = cfg.key_state_path(signing);
        let now = pqdns_core::time::now();
        {
            let _changing = self.service.lock_catalog_changes();
            let mut state =
                KeyState::read(&path)?.ok_or_else(|| ControlError::NoKeyState(path.clone()))?;
            if !state.confirm_ds(now) {
                return Err(ControlError::NothingWaitsForDs(origin.clone()));
            }
            state.write(&path)?;
        }
        tracing::info!(zone = %origin, "the parent's DS RRset is published (pqdns-ctl ds-published)");
        self.zone_reload(origin).await
    }

    /// The keys of the signed zone `origin` with their rollover phases, as its key state has
    /// them.
    ///
    /// # Errors
    /// [`ControlError::NotSigned`], [`ControlError::NoKeyState`], or the file cannot be read.
    pub fn key_list(&self, origin: &Name) -> Result<Vec<KeyInfo>, ControlError> {
        let (_, cfg) = self.source_of(origin)?;
        let signing = cfg
            .signing()
            .ok_or_else(|| ControlError::NotSigned(origin.clone()))?;
        let path = cfg.key_state_path(signing);
        let state = KeyState::read(&path)?.ok_or(ControlError::NoKeyState(path))?;
        Ok(state
            .keys
            .iter()
            .map(|k| KeyInfo {
                algorithm: k.algorithm,
                tag: k.tag,
                flags: k.flags,
                label: state.label(k),
                phase: k.phase.name().to_owned(),
                since: k.since,
            })
            .collect())
    }

    /// The counters of the metrics endpoint, named as it names them (labels included).
    ///
    /// # Errors
    /// [`ControlError::NoMetrics`] when nothing is counted.
    pub fn stats(&self) -> Result<Vec<Counter>, ControlError> {
        let metrics = self
            .service
            .metrics
            .as_ref()
            .ok_or(ControlError::NoMetrics)?;
        Ok(metrics
            .render()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (name, value) = l.rsplit_once(' ')?;
                Some(Counter {
                    name: name.to_owned(),
                    value: value.parse().ok()?,
                })
            })
            .collect())
    }
}

/// The rollover of the signed zone `zone` (served now): phases from its key state and the
/// next step, as `pqdns-zone rollover` shows them; `None` before the state is written.
fn rollover(
    cfg: &LoadedConfig,
    signing: &pqdns_core::config::SigningConfig,
    zone: &Zone,
    now: u64,
    name: &str,
) -> Result<Option<Rollover>, ControlError> {
    let Some(state) = KeyState::read(&cfg.key_state_path(signing))? else {
        return Ok(None);
    };
    let wanted = cfg.wanted_algorithms(signing)?;
    let timings = cfg.timings(signing, zone.max_ttl())?;
    let due = state.clone().advance(&wanted, &timings, now);
    let steps = |steps: &[pqdns_core::dnssec::rollover::Step]| {
        steps
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (next, next_at) = if due.is_empty() {
        match state.next(&wanted, &timings, now) {
            Next::Settled => ("nothing: every algorithm is active".to_owned(), None),
            Next::ParentDs => (
                format!(
                    "the parent's DS RRset must equal the DS set asked for; then \
                     `pqdns-ctl ds-published {name}`"
                ),
                None,
            ),
            Next::At(at, s) => (steps(&s), Some(at)),
        }
    } else {
        (
            format!("due now, at the next re-signing: {}", steps(&due)),
            Some(now),
        )
    };
    Ok(Some(Rollover {
        algorithms: state
            .algorithms
            .iter()
            .map(|a| PhaseSince {
                name: a.name.clone(),
                phase: a.phase.name().to_owned(),
                since: a.since,
            })
            .collect(),
        next,
        next_at,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4034 §3.1.5: a 32-bit time names the moment within 2^31 s of now, also across the
    /// 2106 wrap.
    #[test]
    fn rrsig_times_around_now() {
        let now = 1_800_000_000;
        assert_eq!(rrsig_time(1_800_086_400, now), now + 86_400);
        assert_eq!(rrsig_time(1_799_913_600, now), now - 86_400);
        let after_wrap = (1u64 << 32) + 100;
        assert_eq!(rrsig_time(100, (1u64 << 32) - 100), after_wrap);
    }
}
