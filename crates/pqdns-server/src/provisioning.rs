//! Run-time provisioning: the set of zones served changes without a restart.
//!
//! - **Add and remove** ([`Provisioning::add_zone`], [`Provisioning::remove_zone`], also on
//!   [`crate::ServerHandle`]): under the service's lock on catalog changes (as transfers,
//!   reloads and dynamic updates take it), a zone is loaded as at start
//!   ([`crate::zones::load_source`]: signed, or a secondary zone's stored copy) and served, its
//!   refresh task started ([`crate::secondary::Secondaries::add`]); a removed zone's task stops
//!   and its queries get REFUSED (no zone is authoritative). A reload re-reads the zones as
//!   they are now, added ones included. What survives a restart: each zone's own state (keys,
//!   stored copy, serial, as at start); the list of zones added through
//!   [`Provisioning::add_zone`] is the configuration's business (pqdns-ctl's), while catalog
//!   members come back from the catalog's stored copy.
//! - **Catalog consumers** (RFC 9432 §5, [`crate::catalog_zone`]): each new version of a
//!   consumed catalog zone (a secondary zone, brought by NOTIFY or the refresh timer) is read;
//!   new members are added as [`ZoneSource::Member`] (the catalog's template: primaries, TSIG
//!   key, `[signing]`), dropped ones removed with their stored copy. A version that is not
//!   schema version 2 or lists more than `max_members` changes nothing (logged, counted in
//!   [`Provisioning::malformed_catalogs`]). The members of the version applied last are
//!   recorded beside the catalog's stored copy (`<catalog>.members`): a restart whose stored
//!   catalog is a malformed version serves those. A member already served from elsewhere stays
//!   where it is, unless its catalog's entry has a `coo` property naming this catalog: then
//!   this catalog takes it over (change of ownership, §5.6). A member whose unique ID changes
//!   is reset (§5.7): removed with its stored copy and added afresh, so it is transferred
//!   anew.
//! - **Catalog producers** (RFC 9432 §4): a zone with `[catalog] role = "producer"` lists the
//!   other zones served here (catalog zones excepted); whenever that set changes, a new
//!   version is made ([`crate::catalog_zone::produce`], serial
//!   [`crate::catalog_zone::next_serial`]), appended to its IXFR journal and announced by
//!   NOTIFY, like any changed zone.
//!
//! Consumers and producers are looked at by one task, woken after every change of the set of
//! zones and every transfer (`Provisioning::run`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use pqdns_core::Name;
use tokio::sync::Notify;
use tracing::{info, warn};

use crate::catalog::Catalog;
use crate::catalog_zone::{self, CatalogSettings, Member, Role};
use crate::notify;
use crate::secondary::{Secondaries, SecondaryError};
use crate::service::Authoritative;
use crate::zones::{load_source, read_config, LoadError, Signatures, ZoneReport, ZoneSource};

/// Why a zone could not be added or removed; nothing changed then.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProvisionError {
    /// The description, its data or its keys are wrong, or signing failed.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A secondary zone's settings are wrong (a primary's key is not defined).
    #[error(transparent)]
    Secondary(#[from] SecondaryError),
    /// A zone of that origin is served already.
    #[error("zone {0} is served already")]
    Duplicate(Name),
    /// No zone of that origin is served.
    #[error("zone {0} is not served here")]
    NotServed(Name),
}

/// One consumed catalog's state.
#[derive(Debug, Default)]
struct Consumed {
    /// The SOA serial of the version last applied.
    serial: Option<u32>,
    /// Its members and their unique IDs.
    ids: BTreeMap<Name, Vec<u8>>,
    /// Its members as read last, with their properties (for `coo`).
    members: BTreeMap<Name, Member>,
}

/// The set of zones a running server serves, changed at run time (see the module doc).
#[derive(Debug)]
pub struct Provisioning {
    service: Arc<Authoritative>,
    secondaries: Arc<Secondaries>,
    targets: Vec<notify::Target>,
    /// The zone descriptions served, by origin: configured, added, catalog members.
    sources: Mutex<Vec<(Name, ZoneSource)>>,
    /// The origins of the zones the configuration gives (at start, or at the last reload that
    /// re-read it: [`Provisioning::plan`]); the others were added at run time or are catalog
    /// members.
    configured: Mutex<BTreeSet<Name>>,
    /// Consumed catalogs, by origin.
    consumed: Mutex<BTreeMap<Name, Consumed>>,
    /// Catalog versions not applied (wrong version, too many members).
    malformed: AtomicU64,
    /// Wakes [`Provisioning::run`].
    changed: Arc<Notify>,
}

impl Provisioning {
    /// The zones of `sources` (as configured), served by `service`, the secondary ones kept by
    /// `secondaries`; NOTIFY goes to `targets`.
    ///
    /// # Errors
    /// [`ProvisionError::Load`] for a description that cannot be read.
    pub(crate) fn new(
        sources: &[ZoneSource],
        service: Arc<Authoritative>,
        secondaries: Arc<Secondaries>,
        targets: Vec<notify::Target>,
    ) -> Result<Provisioning, ProvisionError> {
        let mut named = Vec::with_capacity(sources.len());
        for source in sources {
            named.push((origin_of(source)?, source.clone()));
        }
        Ok(Provisioning {
            changed: Arc::clone(&secondaries.changed),
            service,
            secondaries,
            targets,
            configured: Mutex::new(named.iter().map(|(o, _)| o.clone()).collect()),
            sources: Mutex::new(named),
            consumed: Mutex::new(BTreeMap::new()),
            malformed: AtomicU64::new(0),
        })
    }

    /// The zone descriptions served now, in the order they were added.
    pub fn sources(&self) -> Vec<ZoneSource> {
        self.lock_sources().iter().map(|(_, s)| s.clone()).collect()
    }

    /// Catalog versions that changed nothing because they were malformed (wrong schema
    /// version, more members than `max_members`), since start.
    pub fn malformed_catalogs(&self) -> u64 {
        self.malformed.load(Ordering::Relaxed)
    }

    fn lock_sources(&self) -> std::sync::MutexGuard<'_, Vec<(Name, ZoneSource)>> {
        self.sources.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts serving the zone `source` describes, without a restart: loaded (keyed and
    /// signed, or a secondary zone's stored copy) and swapped in under the lock on catalog
    /// changes, its refresh task started if it is a secondary zone, NOTIFY sent. Produced
    /// catalogs list it soon after.
    ///
    /// # Errors
    /// [`ProvisionError`]: a zone of that origin is served, or the zone cannot be loaded;
    /// nothing changes then.
    pub async fn add_zone(
        self: &Arc<Self>,
        source: ZoneSource,
    ) -> Result<ZoneReport, ProvisionError> {
        let this = Arc::clone(self);
        let mut reports = tokio::task::spawn_blocking(move || this.add_sources(vec![source]))
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;
        Ok(reports.pop().unwrap_or_default())
    }

    /// Stops serving the zone `origin` without a restart: its refresh task stops and queries
    /// for it get REFUSED. Its files (keys, stored copy, serial) stay. Removing a consumed
    /// catalog removes its members too. Returns the description it was served from.
    ///
    /// # Errors
    /// [`ProvisionError::NotServed`] if no zone of that origin is served.
    pub async fn remove_zone(
        self: &Arc<Self>,
        origin: &Name,
    ) -> Result<ZoneSource, ProvisionError> {
        let this = Arc::clone(self);
        let origin = origin.clone();
        tokio::task::spawn_blocking(move || {
            let removed = this.remove_origins(std::slice::from_ref(&origin), false);
            let source = removed
                .into_iter()
                .next()
                .ok_or(ProvisionError::NotServed(origin.clone()))?;
            let consumed = this
                .consumed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&origin);
            if let Some(c) = consumed {
                let members: Vec<Name> = c.ids.into_keys().collect();
                this.remove_origins(&members, true);
            }
            Ok(source)
        })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
    }

    /// What a reload serves (the caller holds the lock on catalog changes; nothing changes
    /// until [`Provisioning::commit`]): with `configured` (the zones the configuration gives
    /// now, re-read from the configuration file), those in place of the ones it gave before,
    /// so zones are added and removed; without, the zones served now. Zones added at run time
    /// ([`Provisioning::add_zone`]) and catalog members stay either way, but the members of a
    /// consumed catalog the configuration no longer gives (RFC 9432 §5: they go with their
    /// catalog). A zone added at run time that the configuration now gives with the same
    /// description becomes a configured one; with another description both stay and the load
    /// fails ([`crate::catalog::CatalogError::Duplicate`]).
    ///
    /// # Errors
    /// [`LoadError`] for a configured description that cannot be read.
    pub(crate) fn plan(&self, configured: Option<&[ZoneSource]>) -> Result<Reload, LoadError> {
        let current = self.lock_sources().clone();
        let was_configured = self.lock_configured().clone();
        let Some(configured) = configured else {
            return Ok(Reload {
                sources: current,
                configured: was_configured,
                added: Vec::new(),
                removed: Vec::new(),
            });
        };
        let mut sources = Vec::with_capacity(configured.len());
        for source in configured {
            sources.push((origin_of(source)?, source.clone()));
        }
        let now_configured: BTreeSet<Name> = sources.iter().map(|(o, _)| o.clone()).collect();
        let orphans: BTreeSet<Name> = {
            let consumed = self.consumed.lock().unwrap_or_else(PoisonError::into_inner);
            was_configured
                .difference(&now_configured)
                .filter_map(|catalog| consumed.get(catalog))
                .flat_map(|c| c.ids.keys().cloned())
                .collect()
        };
        for (origin, source) in &current {
            let adopted = sources.iter().any(|(o, s)| o == origin && s == source);
            if !was_configured.contains(origin) && !orphans.contains(origin) && !adopted {
                sources.push((origin.clone(), source.clone()));
            }
        }
        let before: BTreeSet<&Name> = current.iter().map(|(o, _)| o).collect();
        let after: BTreeSet<&Name> = sources.iter().map(|(o, _)| o).collect();
        Ok(Reload {
            added: sources
                .iter()
                .filter(|(o, _)| !before.contains(o))
                .cloned()
                .collect(),
            removed: before.difference(&after).map(|o| (*o).clone()).collect(),
            configured: now_configured,
            sources,
        })
    }

    /// Makes `reload` the set of zones served, once its zones are loaded (the caller holds the
    /// lock on catalog changes and swaps the loaded catalog in after): the refresh tasks of the
    /// secondary zones added start, those of the zones removed stop, and those of the zones
    /// kept follow their descriptions ([`Secondaries::follow`]: a zone whose `primaries` were
    /// added or removed changes role).
    ///
    /// # Errors
    /// A secondary zone's settings are wrong ([`SecondaryError`], as a [`LoadError`]); nothing
    /// changed then.
    pub(crate) fn commit(&self, reload: Reload) -> Result<(), LoadError> {
        let invalid = |source: &ZoneSource, e: SecondaryError| {
            LoadError::Config(pqdns_core::config::ConfigError::Invalid {
                path: PathBuf::from(source.to_string()),
                message: e.to_string(),
            })
        };
        // Zones kept may have changed role (`primaries` added or removed) or primaries: read
        // before anything changes.
        let mut kept = Vec::new();
        for (origin, source) in &reload.sources {
            if !reload.added.iter().any(|(o, _)| o == origin) {
                let described = self.secondaries.read(origin, source);
                kept.push((origin, described.map_err(|e| invalid(source, e))?));
            }
        }
        for (i, (_, source)) in reload.added.iter().enumerate() {
            if let Err(e) = self.secondaries.add(source) {
                for (origin, _) in &reload.added[..i] {
                    self.secondaries.remove(origin);
                }
                return Err(invalid(source, e));
            }
        }
        for (origin, described) in kept {
            self.secondaries.follow(origin, described);
        }
        let mut consumed = self.consumed.lock().unwrap_or_else(PoisonError::into_inner);
        for origin in &reload.removed {
            self.secondaries.remove(origin);
            consumed.remove(origin);
            info!(zone = %origin, "zone removed by the configuration: queries for it get REFUSED");
        }
        drop(consumed);
        for (origin, source) in &reload.added {
            info!(zone = %origin, %source, "zone added by the configuration");
        }
        *self.lock_sources() = reload.sources;
        *self.lock_configured() = reload.configured;
        Ok(())
    }

    fn lock_configured(&self) -> std::sync::MutexGuard<'_, BTreeSet<Name>> {
        self.configured
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `sources` in one catalog change (blocking: loading signs).
    fn add_sources(&self, sources: Vec<ZoneSource>) -> Result<Vec<ZoneReport>, ProvisionError> {
        let mut named = Vec::with_capacity(sources.len());
        for source in sources {
            named.push((origin_of(&source)?, source));
        }
        let now = pqdns_core::time::now();
        let reports = {
            let _changing = self.service.lock_catalog_changes();
            let served = self.service.catalog();
            let mut next = served.rebuilt();
            let mut reports = Vec::with_capacity(named.len());
            {
                let known = self.lock_sources();
                for (origin, _) in &named {
                    if known.iter().any(|(o, _)| o == origin) || served.zone(origin).is_some() {
                        return Err(ProvisionError::Duplicate(origin.clone()));
                    }
                }
            }
            for (_, source) in &named {
                let (zone, report) = load_source(source, now, Some(&served), Signatures::Keep)?;
                if let Some(zone) = zone {
                    next.insert(zone);
                }
                reports.push(report);
            }
            for (i, (_, source)) in named.iter().enumerate() {
                if let Err(e) = self.secondaries.add(source) {
                    // All or nothing: the refresh tasks already started stop again.
                    for (origin, _) in &named[..i] {
                        self.secondaries.remove(origin);
                    }
                    return Err(e.into());
                }
            }
            self.service.set_catalog(next);
            self.lock_sources().extend(named.iter().cloned());
            reports
        };
        let catalog = self.service.catalog();
        for (origin, source) in &named {
            info!(zone = %origin, %source, "zone added");
            notify::spawn_zone(&catalog, origin, &self.targets);
        }
        self.changed.notify_one();
        Ok(reports)
    }

    /// Removes the zones `origins` in one catalog change (those not served are skipped);
    /// with `forget`, their stored transferred copies are deleted too (a catalog member
    /// dropped or reset: re-added, it is transferred afresh). Returns the sources removed.
    fn remove_origins(&self, origins: &[Name], forget: bool) -> Vec<ZoneSource> {
        let wanted: BTreeSet<&Name> = origins.iter().collect();
        let mut stored: Vec<PathBuf> = Vec::new();
        let removed = {
            let _changing = self.service.lock_catalog_changes();
            let mut sources = self.lock_sources();
            let (gone, kept): (Vec<_>, Vec<_>) =
                sources.drain(..).partition(|(o, _)| wanted.contains(o));
            *sources = kept;
            drop(sources);
            self.lock_configured().retain(|o| !wanted.contains(o));
            let mut next = self.service.catalog().rebuilt();
            for (origin, _) in &gone {
                stored.extend(self.secondaries.stored_path(origin).filter(|_| forget));
                self.secondaries.remove(origin);
                next.remove(origin);
            }
            self.service.set_catalog(next);
            gone
        };
        for path in stored {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => warn!(file = %path.display(), "stored copy not deleted: {e}"),
            }
        }
        for (origin, source) in &removed {
            info!(zone = %origin, %source, "zone removed: queries for it get REFUSED");
        }
        if !removed.is_empty() {
            self.changed.notify_one();
        }
        removed.into_iter().map(|(_, s)| s).collect()
    }

    /// Looks at the catalog zones after every change until `self` is dropped (the server's
    /// shutdown aborts the task); also once at start.
    pub(crate) async fn run(self: Arc<Self>) {
        loop {
            let this = Arc::clone(&self);
            let done = tokio::task::spawn_blocking(move || this.reconcile()).await;
            if let Err(e) = done {
                if e.is_panic() {
                    std::panic::resume_unwind(e.into_panic());
                }
                return;
            }
            self.changed.notified().await;
        }
    }

    /// Wakes the task that looks at the catalog zones (after a reload).
    pub(crate) fn wake(&self) {
        self.changed.notify_one();
    }

    /// The catalog zones among the configured sources (members are never catalogs).
    fn catalogs(&self) -> Vec<(Name, ZoneSource, CatalogSettings)> {
        let sources: Vec<(Name, ZoneSource)> = self
            .lock_sources()
            .iter()
            .filter(|(_, s)| !matches!(s, ZoneSource::Member { .. }))
            .cloned()
            .collect();
        let mut catalogs = Vec::new();
        for (origin, source) in sources {
            let settings = read_config(&source)
                .map_err(|e| e.to_string())
                .and_then(|cfg| CatalogSettings::of(&cfg).map_err(|e| e.to_string()));
            match settings {
                Ok(Some(settings)) => catalogs.push((origin, source, settings)),
                Ok(None) => {}
                Err(e) => warn!(zone = %origin, %source, "catalog settings unreadable: {e}"),
            }
        }
        catalogs
    }

    /// Applies every consumed catalog's new version, then makes produced catalogs current.
    fn reconcile(&self) {
        let catalogs = self.catalogs();
        for (origin, source, settings) in catalogs.iter().filter(|c| c.2.role == Role::Consumer) {
            self.consume(origin, source, settings);
        }
        let catalog_origins: BTreeSet<&Name> = catalogs.iter().map(|c| &c.0).collect();
        for (origin, _, settings) in catalogs.iter().filter(|c| c.2.role == Role::Producer) {
            self.produce(origin, settings, &catalog_origins);
        }
    }

    /// Applies the served version of the consumed catalog `origin` (RFC 9432 §5).
    fn consume(&self, origin: &Name, source: &ZoneSource, settings: &CatalogSettings) {
        let Some(served) = self.service.catalog().zone(origin).cloned() else {
            return;
        };
        let serial = served.zone.soa_serial();
        let (done, owned) = {
            let consumed = self.consumed.lock().unwrap_or_else(PoisonError::into_inner);
            let state = consumed.get(origin);
            (
                state.is_some_and(|c| c.serial == Some(serial)),
                state.map(|c| c.ids.clone()).unwrap_or_default(),
            )
        };
        if done {
            return;
        }
        let mut skipped = Vec::new();
        let applied = self
            .secondaries
            .stored_path(origin)
            .map(|p| p.with_extension("members"));
        let members = match catalog_zone::parse(&served.zone, settings.max_members, &mut skipped) {
            Ok(members) => {
                if let Some(path) = &applied {
                    write_applied(path, &members);
                }
                members
            }
            Err(e) => {
                self.malformed.fetch_add(1, Ordering::Relaxed);
                warn!(catalog = %origin, serial, "catalog zone not applied, its members stay as they were: {e}");
                let mut consumed = self.consumed.lock().unwrap_or_else(PoisonError::into_inner);
                let state = consumed.entry(origin.clone()).or_default();
                let first = state.serial.is_none() && state.ids.is_empty();
                state.serial = Some(serial);
                drop(consumed);
                // After a restart, the members stay as the last version applied left them.
                match applied.as_deref().filter(|_| first).and_then(read_applied) {
                    Some(members) => {
                        info!(catalog = %origin, members = members.len(), "serving the members of the catalog version last applied");
                        members
                    }
                    None => return,
                }
            }
        };
        for reason in &skipped {
            warn!(catalog = %origin, serial, "catalog member ignored: {reason}");
        }
        let mut remove: Vec<Name> = Vec::new();
        let mut add: Vec<ZoneSource> = Vec::new();
        let mut taken_over: Vec<(Name, Name)> = Vec::new();
        let mut conflicts = 0usize;
        let served_by: BTreeMap<Name, ZoneSource> = self.lock_sources().iter().cloned().collect();
        for (zone, member) in &members {
            let member_source = ZoneSource::Member {
                catalog: Box::new(source.clone()),
                origin: zone.clone(),
            };
            match owned.get(zone) {
                Some(id) if *id == member.id => {}
                Some(_) => {
                    // §5.7: a new unique ID resets the member: its state is dropped.
                    info!(catalog = %origin, zone = %zone, "member zone reset (new unique ID): transferred afresh");
                    remove.push(zone.clone());
                    add.push(member_source);
                }
                None => match served_by.get(zone) {
                    None => add.push(member_source),
                    Some(ZoneSource::Member { catalog: other, .. }) => {
                        let other_origin = origin_of(other).ok();
                        let coo = other_origin.as_ref().and_then(|o| {
                            let consumed =
                                self.consumed.lock().unwrap_or_else(PoisonError::into_inner);
                            consumed
                                .get(o)
                                .and_then(|c| c.members.get(zone))
                                .and_then(|m| m.coo.clone())
                        });
                        if coo.as_ref() == Some(origin) {
                            // §5.6: the old owner's entry names us: we take the member over.
                            if let Some(o) = other_origin {
                                taken_over.push((o, zone.clone()));
                            }
                            remove.push(zone.clone());
                            add.push(member_source);
                        } else {
                            conflicts += 1;
                            warn!(catalog = %origin, zone = %zone, "member zone is another catalog's (no coo property names this one): left there");
                        }
                    }
                    Some(_) => {
                        conflicts += 1;
                        warn!(catalog = %origin, zone = %zone, "member zone is configured here already: left as configured");
                    }
                },
            }
        }
        for zone in owned.keys() {
            if !members.contains_key(zone) {
                remove.push(zone.clone());
            }
        }
        let (added, removed) = (add.len(), remove.len());
        if !remove.is_empty() {
            self.remove_origins(&remove, true);
        }
        let mut ids = owned;
        ids.retain(|z, _| members.contains_key(z));
        if !add.is_empty() {
            let names: Vec<Name> = add.iter().filter_map(|s| origin_of(s).ok()).collect();
            match self.add_sources(add) {
                Ok(_) => {
                    for zone in names {
                        if let Some(m) = members.get(&zone) {
                            ids.insert(zone, m.id.clone());
                        }
                    }
                }
                Err(e) => {
                    // All or nothing: the next version (or this one, next time) tries again.
                    warn!(catalog = %origin, serial, "catalog members not added: {e}");
                    conflicts += 1;
                    for zone in names {
                        ids.remove(&zone);
                    }
                }
            }
        }
        let groups: BTreeSet<&Vec<u8>> = members.values().flat_map(|m| &m.groups).collect();
        info!(
            catalog = %origin, serial, members = members.len(), added, removed,
            groups = groups.len(), "catalog zone applied"
        );
        let mut consumed = self.consumed.lock().unwrap_or_else(PoisonError::into_inner);
        for (old, zone) in taken_over {
            if let Some(c) = consumed.get_mut(&old) {
                c.ids.remove(&zone);
            }
        }
        let state = consumed.entry(origin.clone()).or_default();
        // With members left out (another catalog's), look again next time.
        state.serial = (conflicts == 0).then_some(serial);
        state.ids = ids;
        state.members = members;
    }

    /// Makes the produced catalog `origin` list the zones served now (catalogs excepted), if
    /// it does not already (RFC 9432 §4).
    fn produce(&self, origin: &Name, settings: &CatalogSettings, catalogs: &BTreeSet<&Name>) {
        let changed = {
            let _changing = self.service.lock_catalog_changes();
            let served = self.service.catalog();
            let members: Vec<&Name> = served
                .zones()
                .map(|z| &z.zone.origin)
                .filter(|o| !catalogs.contains(o))
                .collect();
            let previous = served.zone(origin);
            let listed = previous.and_then(|p| catalog_zone::members_of(&p.zone));
            if listed
                .as_ref()
                .is_some_and(|l| l.iter().eq(members.iter().copied()))
            {
                false
            } else {
                let serial = catalog_zone::next_serial(
                    previous.map(|p| p.zone.soa_serial()),
                    pqdns_core::time::now(),
                );
                match catalog_zone::produce(
                    origin,
                    members.iter().copied(),
                    settings.group.as_deref(),
                    serial,
                ) {
                    Ok(zone) => {
                        let zone = crate::catalog::ServedZone::new(zone).after(previous);
                        info!(catalog = %origin, serial, members = members.len(), "produced catalog zone: new version");
                        let mut next: Catalog = served.rebuilt();
                        next.insert(zone);
                        self.service.set_catalog(next);
                        true
                    }
                    Err(e) => {
                        warn!(catalog = %origin, "produced catalog zone not made: {e}");
                        false
                    }
                }
            }
        };
        if changed {
            notify::spawn_zone(&self.service.catalog(), origin, &self.targets);
        }
    }
}

/// The zones a reload serves ([`Provisioning::plan`]), and how they differ from those served.
#[derive(Debug)]
pub(crate) struct Reload {
    /// Every zone description to load, by origin.
    sources: Vec<(Name, ZoneSource)>,
    /// The origins the configuration gives.
    configured: BTreeSet<Name>,
    /// The zones not served before.
    added: Vec<(Name, ZoneSource)>,
    /// The zones served before and not after.
    removed: Vec<Name>,
}

impl Reload {
    /// The zone descriptions to load.
    pub(crate) fn sources(&self) -> Vec<ZoneSource> {
        self.sources.iter().map(|(_, s)| s.clone()).collect()
    }
}

/// Writes the members of the catalog version just applied to `path` (`<catalog>.members`
/// beside its stored copy: one `<hex ID> <zone>` per line, atomically), so that a restart
/// whose stored catalog is a version not applied (malformed) serves the members the last
/// applied one listed. A failure is logged.
fn write_applied(path: &std::path::Path, members: &BTreeMap<Name, Member>) {
    let text: String = members
        .values()
        .map(|m| format!("{} {}\n", data_encoding::HEXLOWER.encode(&m.id), m.zone))
        .collect();
    if let Err(e) = pqdns_core::atomic_file::write_atomic(
        path,
        text.as_bytes(),
        pqdns_core::atomic_file::FileMode::Public,
    ) {
        warn!(file = %path.display(), "catalog members not recorded: {e}");
    }
}

/// The members [`write_applied`] left in `path`; `None` if there is no such file or it is
/// unreadable (logged).
fn read_applied(path: &std::path::Path) -> Option<BTreeMap<Name, Member>> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut members = BTreeMap::new();
    for line in text.lines() {
        let parsed = line.split_once(' ').and_then(|(id, zone)| {
            let id = data_encoding::HEXLOWER.decode(id.as_bytes()).ok()?;
            let zone: Name = zone.parse().ok()?;
            Some(Member {
                zone,
                id,
                groups: Vec::new(),
                coo: None,
            })
        });
        let Some(member) = parsed else {
            warn!(file = %path.display(), "recorded catalog members unreadable: {line:?}");
            return None;
        };
        members.insert(member.zone.clone(), member);
    }
    Some(members)
}

/// The origin of the zone `source` describes.
fn origin_of(source: &ZoneSource) -> Result<Name, LoadError> {
    match source {
        ZoneSource::Member { origin, .. } => Ok(origin.clone()),
        _ => Ok(read_config(source)?.origin),
    }
}
