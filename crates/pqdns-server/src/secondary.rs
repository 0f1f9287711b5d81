//! The secondary role: zones whose description has a `[secondary]` table are transferred
//! from their primaries ([`crate::transfer_in`]: IXFR, AXFR, TSIG) and kept fresh.
//!
//! - **Timers** (RFC 1035 §4.3.5, [`Schedule`]): a zone is refreshed at start, then every
//!   SOA REFRESH seconds after a successful refresh, every RETRY seconds after a failed one;
//!   when EXPIRE seconds pass without a successful refresh, the zone answers SERVFAIL until
//!   one succeeds. The SOA timers are bounded to [`MIN_TIMER`]..[`MAX_TIMER`]. Primaries are
//!   tried in their configured order.
//! - **NOTIFY in** (RFC 1996 §3.7–§3.11, `Secondaries::notify`): a NOTIFY (QTYPE SOA) for a
//!   secondary zone from one of its primaries' addresses, or signed with one of their TSIG
//!   keys, is answered NOERROR with AA set and starts a refresh at once; from another source
//!   REFUSED; for a zone we are no secondary for NOTAUTH (as BIND answers).
//! - **Storage**: every new version is written to `<state_directory>/<zone>.xfr` (master-file
//!   text, atomically) before it is served; a start serves that copy (`crate::zones`) until
//!   the first refresh, and its modification time (touched by each successful refresh) is
//!   when it was last refreshed, so expiry survives a restart.
//! - **Serving**: a new version replaces the old one in the served catalog, its difference
//!   appended to the zone's IXFR journal ([`ServedZone::after`]) so that our own secondaries
//!   get IXFR. Transfers, reloads and dynamic updates change the catalog one at a time (under
//!   the service's lock on catalog changes); a reload keeps each secondary zone as the catalog
//!   in force has it ([`Secondaries::overlay`]), and every zone's expiry.
//! - **Inline signing** ([`crate::inline_signing`]): a secondary zone with `[signing]` keeps
//!   the transferred (unsigned) version beside the served one: IXFR requests carry its serial
//!   and apply to it. An IXFR is signed incrementally (its changed RRsets, under the lock on
//!   catalog changes, at a cost in proportion to the change) and its signed difference is
//!   the outgoing IXFR; an AXFR, or a change the incremental signer refuses, is signed by the
//!   signing path of a master file ([`crate::zones::sign_transferred`]: keys, rollovers,
//!   NSEC/NSEC3). The SOA serial is chosen by the `[signing] serial` policy from the signed
//!   serial served, independent of the primary's. The stored copy is the unsigned version
//!   (with a journal of the IXFR differences since it was written whole); a reload (and the
//!   signature refresh) signs it again.
//!
//! - **Control** ([`crate::control`]): `pqdns-ctl zone-retransfer` asks the refresh task for
//!   a whole transfer (AXFR) at once ([`Secondaries::retransfer`]); `zone-status` shows the
//!   timers the task follows ([`Secondaries::status`]).
//!
//! A zone never transferred and without a stored copy is not served (REFUSED). The
//! `[secondary]` settings are read when the zone is added (at start, or at run time by
//! [`crate::provisioning`]: [`Secondaries::add`] starts the zone's refresh task,
//! [`Secondaries::remove`] stops it); a reload does not change them.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pqdns_core::atomic_file::{AtomicFile, FileMode};
use pqdns_core::config::LoadedConfig;
use pqdns_core::wire::query::Query;
use pqdns_core::wire::tsig::KeyRing;
use pqdns_core::wire::{MessageWriter, Rcode, FLAG_AA};
use pqdns_core::{Name, RrType, Zone};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::answer::{Outcome, MAX_STREAM_MESSAGE};
use crate::catalog::{Catalog, ServedZone};
use crate::cookie::CookieCheck;
use crate::inline_signing::{InlineSigner, Next};
use crate::notify;
use crate::service::Authoritative;
use crate::transfer_in::{self, Limits, Primary, Refreshed};
use crate::zones::ZoneSource;

/// Smallest SOA timer used, milliseconds: a zone of REFRESH 0 is not refreshed in a loop.
pub const MIN_TIMER: u64 = 1_000;
/// Largest SOA timer used, milliseconds (4 weeks, BIND's bound of REFRESH and RETRY).
pub const MAX_TIMER: u64 = 28 * 86_400_000;
/// Wait before trying again when no copy exists yet (no SOA to take RETRY from),
/// milliseconds.
pub const FIRST_RETRY: u64 = 10_000;
/// Most refreshes (SOA query, transfer, inline signing, storing) at once, over all zones: a
/// thousand zones added at once (a catalog, [`crate::provisioning`]) do not open a thousand
/// connections to one primary (BIND's `transfers-in` default is 10).
pub const MAX_CONCURRENT_REFRESHES: usize = 16;

/// The slots of [`MAX_CONCURRENT_REFRESHES`].
#[derive(Debug)]
struct RefreshSlots(Arc<tokio::sync::Semaphore>);

impl Default for RefreshSlots {
    fn default() -> RefreshSlots {
        RefreshSlots(Arc::new(tokio::sync::Semaphore::new(
            MAX_CONCURRENT_REFRESHES,
        )))
    }
}

/// A zone's SOA timers (RFC 1035 §3.3.13, §4.3.5), milliseconds, each within
/// [`MIN_TIMER`]..=[`MAX_TIMER`] (EXPIRE may be longer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timers {
    /// REFRESH: between successful refreshes.
    pub refresh: u64,
    /// RETRY: after a failed refresh.
    pub retry: u64,
    /// EXPIRE: without a successful refresh, the zone is no longer served.
    pub expire: u64,
}

impl Timers {
    /// The timers of `zone`'s SOA; `None` without a well-formed SOA.
    pub fn of(zone: &Zone) -> Option<Timers> {
        let soa = zone.soa_fields()?;
        let ms = |s: u32| (u64::from(s) * 1000).clamp(MIN_TIMER, MAX_TIMER);
        Some(Timers {
            refresh: ms(soa.refresh),
            retry: ms(soa.retry),
            expire: (u64::from(soa.expire) * 1000).max(MIN_TIMER),
        })
    }
}

/// When a secondary zone is refreshed next and when it expires, milliseconds since the UNIX
/// epoch; pure, so the timer logic is tested with any clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// When the copy was last known current (a successful refresh, or the stored copy's
    /// modification time); `None` before any copy.
    pub last_success: Option<u64>,
    /// When to refresh next.
    pub next_refresh: u64,
}

impl Schedule {
    /// At start (`now`): refresh at once; a stored copy last refreshed at `stored_at`.
    pub fn start(now: u64, stored_at: Option<u64>) -> Schedule {
        Schedule {
            last_success: stored_at,
            next_refresh: now,
        }
    }

    /// After a successful refresh at `now` (a transfer, or the primary's serial is ours).
    pub fn succeeded(&mut self, now: u64, timers: Timers) {
        self.last_success = Some(now);
        self.next_refresh = now.saturating_add(timers.refresh);
    }

    /// After a failed refresh at `now`: again after RETRY (or [`FIRST_RETRY`] without a copy).
    pub fn failed(&mut self, now: u64, timers: Option<Timers>) {
        self.next_refresh = now.saturating_add(timers.map_or(FIRST_RETRY, |t| t.retry));
    }

    /// When the copy expires, if it has been refreshed (or stored) at all.
    pub fn expires_at(&self, timers: Timers) -> Option<u64> {
        self.last_success.map(|t| t.saturating_add(timers.expire))
    }

    /// Whether the copy has expired at `now`.
    pub fn is_expired(&self, now: u64, timers: Timers) -> bool {
        self.expires_at(timers).is_some_and(|e| now >= e)
    }

    /// The next time something is due at `now`: the refresh, or the expiry if it comes
    /// first and has not passed.
    pub fn next_event(&self, now: u64, timers: Option<Timers>) -> u64 {
        let expiry = timers.and_then(|t| self.expires_at(t)).filter(|&e| e > now);
        expiry.map_or(self.next_refresh, |e| e.min(self.next_refresh))
    }
}

/// Milliseconds since the UNIX epoch of `time`.
fn millis(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One secondary zone: its primaries, bounds, stored copy and the trigger NOTIFY pulls.
#[derive(Debug)]
struct SecondaryZone {
    origin: Name,
    /// Its description (signed again after each transfer when inline signing).
    source: ZoneSource,
    /// The transferred (unsigned) version and its signer, when the zone is signed here
    /// (`[signing]`). Otherwise the served version is the transferred one.
    inline: Option<Arc<InlineSigner>>,
    /// Whether pqdns signs it (`[signing]`): `inline` is made only for a zone to serve, so
    /// that reading a description to compare it ([`Secondaries::read`]) reads no stored copy.
    signed: bool,
    /// Catalog swaps of this zone by its refresh task, for [`Secondaries::overlay`].
    generation: AtomicU64,
    primaries: Vec<Primary>,
    limits: Limits,
    /// `<state_directory>/<zone>.xfr`.
    path: PathBuf,
    refresh_now: Notify,
    /// The next refresh transfers the whole zone (AXFR) whatever the serials say.
    retransfer: AtomicBool,
    /// The refresh task's schedule, as it last stood.
    schedule: Mutex<Option<Schedule>>,
}

/// Why the secondary zones could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("{file}: [secondary]: {message}")]
pub struct SecondaryError {
    /// The zone description.
    pub file: String,
    /// What is wrong.
    pub message: String,
}

/// The secondary zones of a server and their refresh tasks.
#[derive(Debug, Default)]
pub struct Secondaries {
    zones: Mutex<BTreeMap<Name, Arc<SecondaryZone>>>,
    /// How many zones `zones` has, read without the lock (on every request).
    count: AtomicUsize,
    tasks: Mutex<BTreeMap<Name, JoinHandle<()>>>,
    /// The TSIG keys primaries are named by.
    keys: Arc<KeyRing>,
    /// The service and NOTIFY targets the refresh tasks serve, once [`Secondaries::spawn`]
    /// ran (zones added later get their task at once).
    running: Mutex<Option<(Weak<Authoritative>, Vec<notify::Target>)>>,
    /// Woken when a zone's served version changes (a transfer, an expiry): the catalog zones
    /// consumed and produced ([`crate::provisioning`]) look again.
    pub(crate) changed: Arc<Notify>,
    /// Shared by the refresh tasks.
    slots: RefreshSlots,
}

impl Secondaries {
    /// The secondary zones among `sources`, their primaries' keys looked up in `keys`.
    ///
    /// # Errors
    /// [`SecondaryError`] for a description that cannot be read or a key no `tsig_keys` file
    /// defines.
    pub fn new(sources: &[ZoneSource], keys: &Arc<KeyRing>) -> Result<Secondaries, SecondaryError> {
        let mut zones = BTreeMap::new();
        for source in sources {
            if let Some(zone) = secondary_zone(source, keys)? {
                zones.insert(zone.origin.clone(), Arc::new(zone));
            }
        }
        Ok(Secondaries {
            count: AtomicUsize::new(zones.len()),
            zones: Mutex::new(zones),
            keys: Arc::clone(keys),
            ..Secondaries::default()
        })
    }

    /// Adds the zone of `source` if it is a secondary zone (replacing one of the same origin)
    /// and starts its refresh task if the tasks run; `Ok(false)` if it is none.
    ///
    /// # Errors
    /// As [`Secondaries::new`].
    pub fn add(&self, source: &ZoneSource) -> Result<bool, SecondaryError> {
        let Some(zone) = secondary_zone(source, &self.keys)? else {
            return Ok(false);
        };
        self.insert(zone);
        Ok(true)
    }

    /// Reads the description `source` of the zone `origin` and compares it with the zone as
    /// it is now, for [`Secondaries::follow`]; the stored copy of an inline-signed secondary
    /// zone is read only if the zone is to change.
    ///
    /// # Errors
    /// As [`Secondaries::new`].
    pub(crate) fn read(
        &self,
        origin: &Name,
        source: &ZoneSource,
    ) -> Result<Described, SecondaryError> {
        let change = match (self.zone(origin), settings_of(source, &self.keys)?) {
            (None, None) => Change::Unchanged,
            (Some(was), Some(now)) if same_settings(&was, &now) => Change::Unchanged,
            (_, None) => Change::To(None),
            (_, Some(_)) => Change::To(secondary_zone(source, &self.keys)?.map(Box::new)),
        };
        Ok(Described(change))
    }

    /// Follows the description of the zone `origin` (read by [`Secondaries::read`]), served
    /// before and still served after a reload, which may have changed its role: a zone that
    /// became a secondary one (`primaries` added) gets its refresh task, one that no longer is
    /// (`primaries` removed) loses it (its transferred copy stays on disk), and a secondary
    /// zone whose primaries, their keys, its transfer limits or its inline signing changed gets
    /// its task restarted with them. A secondary zone that did not change keeps its task and
    /// schedule. Returns whether anything changed.
    pub(crate) fn follow(&self, origin: &Name, described: Described) -> bool {
        match described.0 {
            Change::Unchanged => false,
            Change::To(None) => {
                self.remove(origin);
                info!(zone = %origin, "no longer a secondary zone: its refresh task stopped");
                true
            }
            Change::To(Some(now)) => {
                let what = if self.zone(origin).is_some() {
                    "secondary zone settings changed: its refresh task restarted"
                } else {
                    "now a secondary zone: its refresh task started"
                };
                self.insert(*now);
                info!(zone = %origin, "{what}");
                true
            }
        }
    }

    /// Adds `zone` (replacing one of the same origin) and starts its refresh task if the tasks
    /// run.
    fn insert(&self, zone: SecondaryZone) {
        let zone = Arc::new(zone);
        self.stop_task(&zone.origin);
        let mut zones = self.zones.lock().unwrap_or_else(PoisonError::into_inner);
        zones.insert(zone.origin.clone(), Arc::clone(&zone));
        self.count.store(zones.len(), Ordering::SeqCst);
        drop(zones);
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((service, targets)) = &*running {
            if let Some(service) = service.upgrade() {
                self.start_task(zone, service, targets.clone());
            }
        }
    }

    /// Stops the refresh task of `origin` and forgets the zone; `false` if it is no secondary
    /// zone here. The served version stays until the caller removes it from the catalog.
    pub fn remove(&self, origin: &Name) -> bool {
        self.stop_task(origin);
        let mut zones = self.zones.lock().unwrap_or_else(PoisonError::into_inner);
        let removed = zones.remove(origin).is_some();
        self.count.store(zones.len(), Ordering::SeqCst);
        removed
    }

    /// The stored copy's path of the secondary zone `origin`, if it is one.
    pub fn stored_path(&self, origin: &Name) -> Option<PathBuf> {
        let zones = self.zones.lock().unwrap_or_else(PoisonError::into_inner);
        zones.get(origin).map(|z| z.path.clone())
    }

    fn stop_task(&self, origin: &Name) {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(task) = tasks.remove(origin) {
            task.abort();
        }
    }

    fn start_task(
        &self,
        zone: Arc<SecondaryZone>,
        service: Arc<Authoritative>,
        targets: Vec<notify::Target>,
    ) {
        let changed = Arc::clone(&self.changed);
        let slots = Arc::clone(&self.slots.0);
        let origin = zone.origin.clone();
        let task = tokio::spawn(async move {
            Secondaries::run(&zone, &service, &targets, &changed, &slots).await
        });
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(old) = tasks.insert(origin, task) {
            old.abort();
        }
    }

    fn zone(&self, origin: &Name) -> Option<Arc<SecondaryZone>> {
        let zones = self.zones.lock().unwrap_or_else(PoisonError::into_inner);
        zones.get(origin).cloned()
    }

    /// True without secondary zones.
    pub fn is_empty(&self) -> bool {
        self.count.load(Ordering::Relaxed) == 0
    }

    /// The secondary zone `origin`'s primaries and, once its refresh task runs, its schedule;
    /// `None` if `origin` is no secondary zone here.
    pub fn status(&self, origin: &Name) -> Option<(Vec<SocketAddr>, Option<Schedule>)> {
        let z = self.zone(origin)?;
        let primaries = z.primaries.iter().map(|p| p.addr).collect();
        let schedule = *z.schedule.lock().unwrap_or_else(PoisonError::into_inner);
        Some((primaries, schedule))
    }

    /// Makes the secondary zone `origin`'s refresh task transfer the whole zone (AXFR, RFC
    /// 5936) from its primaries now; `false` if `origin` is no secondary zone here.
    pub fn retransfer(&self, origin: &Name) -> bool {
        let Some(z) = self.zone(origin) else {
            return false;
        };
        z.retransfer.store(true, Ordering::SeqCst);
        z.refresh_now.notify_one();
        info!(zone = %origin, "retransfer asked for: AXFR from the primaries");
        true
    }

    /// Replaces the catalog of `service` by `make(current)` for `zone`'s refresh task, under
    /// the lock every catalog change takes (reloads, dynamic updates: none is lost to another),
    /// counted in the zone's generation; `make` returning `None` changes nothing.
    fn swap_zone(
        zone: &SecondaryZone,
        service: &Authoritative,
        make: impl FnOnce(&Catalog) -> Option<Catalog>,
    ) {
        let _one_at_a_time = service.lock_catalog_changes();
        let current = service.catalog();
        if let Some(next) = make(&current) {
            service.set_catalog(next);
            zone.generation.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The generations of the zones (see [`Secondaries::overlay`]), taken before a reload.
    pub fn generations(&self) -> BTreeMap<Name, u64> {
        let zones = self.zones.lock().unwrap_or_else(PoisonError::into_inner);
        zones
            .iter()
            .map(|(origin, z)| (origin.clone(), z.generation.load(Ordering::SeqCst)))
            .collect()
    }

    /// `loaded` (a reload's catalog, begun when the zones were at `generations`) with each
    /// secondary zone that its refresh task swapped since as `current` serves it (a transfer
    /// came during the reload), and the expiry of every secondary zone as `current` has it.
    pub fn overlay(
        &self,
        mut loaded: Catalog,
        current: &Catalog,
        generations: &BTreeMap<Name, u64>,
    ) -> Catalog {
        let zones = self.zones.lock().unwrap_or_else(PoisonError::into_inner);
        for z in zones.values() {
            let Some(&before) = generations.get(&z.origin) else {
                continue;
            };
            let Some(served) = current.zone(&z.origin) else {
                continue;
            };
            if z.generation.load(Ordering::SeqCst) != before {
                loaded.insert(served.clone());
            } else if let Some(reloaded) = loaded.zone_mut(&z.origin) {
                reloaded.expired = served.expired;
            }
        }
        loaded
    }

    /// Each new version transferred is announced to `targets` (NOTIFY, RFC 1996).
    pub fn spawn(&self, service: &Arc<Authoritative>, targets: &[notify::Target]) {
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((Arc::downgrade(service), targets.to_vec()));
        let zones: Vec<_> = self
            .zones
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        for zone in zones {
            self.start_task(zone, Arc::clone(service), targets.to_vec());
        }
    }

    /// Stops the refresh tasks (a transfer in progress is dropped; nothing half-written is
    /// served or stored).
    pub fn stop(&self) {
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) = None;
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        for task in tasks.into_values() {
            task.abort();
        }
    }

    /// The NOTIFY answer (RFC 1996) to `q` from `client`, signed (by the caller) with the key
    /// named `key` when it carried a valid TSIG; written to `out[base..]`.
    pub(crate) fn notify(
        &self,
        q: &Query<'_>,
        client: IpAddr,
        key: Option<&Name>,
        out: &mut Vec<u8>,
        base: usize,
        tsig_room: usize,
    ) -> Outcome {
        let qname = q.qname.to_name();
        let zone = self.zone(&qname);
        let rcode = match zone {
            // RFC 1996 §3.7: the QTYPE of a NOTIFY is SOA.
            _ if q.qtype != RrType::SOA => Rcode::FORMERR,
            None => Rcode::NOTAUTH,
            Some(z) => {
                let allowed = z.primaries.iter().any(|p| {
                    p.addr.ip() == client || p.key.as_ref().is_some_and(|k| Some(k.name()) == key)
                });
                if allowed {
                    info!(zone = %qname, %client, "NOTIFY: refreshing");
                    z.refresh_now.notify_one();
                    Rcode::NOERROR
                } else {
                    warn!(zone = %qname, %client, "NOTIFY from a source that is no primary refused");
                    Rcode::REFUSED
                }
            }
        };
        let limit = MAX_STREAM_MESSAGE.saturating_sub(tsig_room);
        let mut w = MessageWriter::response(out, base, limit, q.header);
        let _fits = w.question(q.qname.as_wire(), q.qtype, q.qclass);
        if rcode == Rcode::NOERROR {
            w.set_flag(FLAG_AA);
        }
        Outcome {
            len: w.finish(rcode),
            rcode,
            truncated: false,
            qtype: Some(q.qtype),
            error: None,
            cache_ttl: None,
            cookie: CookieCheck::Absent,
        }
    }

    /// The refresh loop of `zone` (see the module doc).
    async fn run(
        zone: &SecondaryZone,
        service: &Authoritative,
        targets: &[notify::Target],
        changed: &Notify,
        slots: &tokio::sync::Semaphore,
    ) {
        let now = || millis(SystemTime::now());
        let stored_at = std::fs::metadata(&zone.path)
            .and_then(|m| m.modified())
            .ok()
            .map(millis);
        let mut schedule = Schedule::start(now(), stored_at);
        loop {
            *zone.schedule.lock().unwrap_or_else(PoisonError::into_inner) = Some(schedule);
            // Shared, not copied: a signed zone's copy costs as much as signing a change.
            let current = service.catalog().shared(&zone.origin);
            let timers = current.as_ref().and_then(|z| Timers::of(&z.zone));
            let at = schedule.next_event(now(), timers);
            let wait = Duration::from_millis(at.saturating_sub(now()));
            let notified = tokio::select! {
                () = tokio::time::sleep(wait) => false,
                () = zone.refresh_now.notified() => true,
            };
            let t = now();
            if let (Some(served), Some(timers)) = (&current, timers) {
                if schedule.is_expired(t, timers) && !served.expired {
                    warn!(zone = %zone.origin, serial = served.zone.soa_serial(), "expired: no successful refresh for the SOA EXPIRE time; answering SERVFAIL");
                    Secondaries::set_expired(zone, service, true);
                }
            }
            if !notified && t < schedule.next_refresh {
                continue;
            }
            // At most MAX_CONCURRENT_REFRESHES at once (never closed: `ok()` is always Some).
            let slot = slots.acquire().await.ok();
            let refreshed =
                Secondaries::refresh(zone, service, current.as_deref(), targets, changed).await;
            drop(slot);
            // The timers of the version served now: a transfer changed it, or the catalog got
            // the zone meanwhile (the binary loads its zones after binding; a failure must then
            // wait RETRY, not FIRST_RETRY).
            let timers = service
                .catalog()
                .zone(&zone.origin)
                .and_then(|z| Timers::of(&z.zone));
            match (refreshed, timers) {
                (Ok(()), Some(timers)) => schedule.succeeded(now(), timers),
                (Ok(()), None) => {}
                (Err(()), timers) => schedule.failed(now(), timers),
            }
        }
    }

    /// One refresh from the primaries in order; `Err` when none gave a current copy.
    async fn refresh(
        zone: &SecondaryZone,
        service: &Authoritative,
        current: Option<&ServedZone>,
        targets: &[notify::Target],
        changed: &Notify,
    ) -> Result<(), ()> {
        // Inline signing: the transferred version, not the signed one served.
        let unsigned = zone.inline.as_ref().and_then(|i| i.unsigned());
        let ours = match &zone.inline {
            // `pqdns-ctl zone-retransfer`: AXFR, whatever the serials.
            _ if zone.retransfer.swap(false, Ordering::SeqCst) => None,
            Some(_) => unsigned.as_deref(),
            None => current.map(|z| &z.zone),
        };
        for primary in &zone.primaries {
            let result = transfer_in::refresh(primary, &zone.origin, ours, zone.limits).await;
            let metrics = service.metrics.as_deref();
            match result {
                Ok(Refreshed::UpToDate) => {
                    let path = zone.path.clone();
                    let touched = tokio::task::spawn_blocking(move || {
                        std::fs::File::options()
                            .write(true)
                            .open(&path)
                            .and_then(|f| f.set_modified(SystemTime::now()))
                    })
                    .await;
                    if let Ok(Err(e)) = touched {
                        warn!(zone = %zone.origin, file = %zone.path.display(), "stored copy not touched: {e}");
                    }
                    if current.is_some_and(|z| z.expired) {
                        info!(zone = %zone.origin, "refreshed after expiry: served again");
                        Secondaries::set_expired(zone, service, false);
                    }
                    return Ok(());
                }
                Ok(Refreshed::Transferred {
                    zone: new,
                    incremental,
                    differences,
                    bytes,
                }) => {
                    let serial = new.soa_serial();
                    let stored = match &zone.inline {
                        // Inline signing: signed before it is served, so a signing failure
                        // leaves all as it was (the next refresh tries again).
                        Some(inline) => {
                            match Secondaries::sign(zone, inline, service, new, &differences).await
                            {
                                Ok(()) => Ok(()),
                                Err(e) => Err(format!("not signed: {e}")),
                            }
                        }
                        None => match store(&zone.path, new.clone()).await {
                            Ok(()) => {
                                Secondaries::swap_zone(zone, service, |catalog| {
                                    let mut next = catalog.rebuilt();
                                    next.insert(
                                        ServedZone::new(new).after(catalog.zone(&zone.origin)),
                                    );
                                    Some(next)
                                });
                                Ok(())
                            }
                            Err(e) => Err(format!("not stored in {}: {e}", zone.path.display())),
                        },
                    };
                    if let Err(e) = stored {
                        warn!(zone = %zone.origin, serial, "transferred version {e}; not served");
                        if let Some(m) = metrics {
                            m.transfer_in(None);
                        }
                        continue;
                    }
                    changed.notify_one();
                    if let Some(m) = metrics {
                        m.transfer_in(Some(incremental));
                    }
                    let kind = if incremental { "IXFR" } else { "AXFR" };
                    info!(zone = %zone.origin, primary = %primary.addr, serial, bytes, "{kind} received, serving the new version");
                    notify::spawn_zone(&service.catalog(), &zone.origin, targets);
                    return Ok(());
                }
                Err(e) => {
                    if let Some(m) = metrics {
                        m.transfer_in(None);
                    }
                    warn!(zone = %zone.origin, primary = %primary.addr, "refresh failed, nothing changed: {e}");
                }
            }
        }
        Err(())
    }

    fn set_expired(zone: &SecondaryZone, service: &Authoritative, expired: bool) {
        Secondaries::swap_zone(zone, service, |catalog| {
            let mut next = catalog.rebuilt();
            if let Some(z) = next.zone_mut(&zone.origin) {
                z.expired = expired;
            }
            Some(next)
        });
    }

    /// Signs the transferred version `new` of the inline-signed `zone` (IXFR `differences`,
    /// empty after an AXFR) and serves it: incrementally under the lock on catalog changes,
    /// else whole on a blocking thread ([`crate::inline_signing`]), stored before it is served.
    async fn sign(
        zone: &SecondaryZone,
        inline: &Arc<InlineSigner>,
        service: &Authoritative,
        new: Zone,
        differences: &[pqdns_core::Record],
    ) -> Result<(), String> {
        let metrics = service.metrics.as_deref();
        let now = pqdns_core::time::now();
        let mut result = Ok(None);
        let mut whole = Some(new);
        Secondaries::swap_zone(zone, service, |catalog| {
            let new = whole.take()?;
            match inline.incremental(&zone.source, new, differences, catalog, now) {
                Ok(Next::Signed(signed)) => {
                    result = Ok(Some(signed.signatures));
                    Some(catalog.with_shared(signed.served))
                }
                Ok(Next::Whole(new)) => {
                    whole = Some(new);
                    None
                }
                Err(e) => {
                    result = Err(e.to_string());
                    None
                }
            }
        });
        if let Some(signatures) = result? {
            if let Some(m) = metrics {
                m.inline_signing(Some(signatures));
            }
            return Ok(());
        }
        let Some(new) = whole else {
            return Ok(());
        };
        let signed = inline.whole(&zone.source, new, service.catalog()).await?;
        Secondaries::swap_zone(zone, service, |catalog| {
            let mut next = catalog.rebuilt();
            next.insert(signed.after(catalog.zone(&zone.origin)));
            Some(next)
        });
        if let Some(m) = metrics {
            m.inline_signing(None);
        }
        Ok(())
    }
}

/// The secondary zone `source` describes, its primaries' keys looked up in `keys`; `None` if
/// it has no `[secondary]` table.
/// A zone description compared with the zone served ([`Secondaries::read`]).
#[derive(Debug)]
pub(crate) struct Described(Change);

/// What [`Secondaries::follow`] does.
#[derive(Debug)]
enum Change {
    /// Nothing: the same role and settings.
    Unchanged,
    /// The zone becomes this secondary zone, or (`None`) no secondary zone.
    To(Option<Box<SecondaryZone>>),
}

/// Whether two readings of a secondary zone's description transfer alike: the same
/// primaries with the same keys, limits, stored copy and inline signing.
fn same_settings(a: &SecondaryZone, b: &SecondaryZone) -> bool {
    let primaries = |z: &SecondaryZone| -> Vec<(SocketAddr, Option<Name>)> {
        (z.primaries.iter())
            .map(|p| (p.addr, p.key.as_ref().map(|k| k.name().clone())))
            .collect()
    };
    primaries(a) == primaries(b)
        && a.limits.max_bytes == b.limits.max_bytes
        && a.limits.timeout == b.limits.timeout
        && a.path == b.path
        && a.signed == b.signed
}

/// The secondary zone `source` describes, to serve (`None`: it has no primaries).
fn secondary_zone(
    source: &ZoneSource,
    keys: &KeyRing,
) -> Result<Option<SecondaryZone>, SecondaryError> {
    described(source, keys, true)
}

/// [`secondary_zone`] without its inline signer (no stored copy read), to compare.
fn settings_of(
    source: &ZoneSource,
    keys: &KeyRing,
) -> Result<Option<SecondaryZone>, SecondaryError> {
    described(source, keys, false)
}

/// The secondary zone `source` describes; with the inline signer of a zone signed here (and
/// its stored copy read) if `to_serve`.
fn described(
    source: &ZoneSource,
    keys: &KeyRing,
    to_serve: bool,
) -> Result<Option<SecondaryZone>, SecondaryError> {
    let error = |message: String| SecondaryError {
        file: source.to_string(),
        message,
    };
    let cfg = crate::zones::read_config(source).map_err(|e| error(e.to_string()))?;
    let Some(secondary) = cfg.secondary() else {
        return Ok(None);
    };
    let mut primaries = Vec::new();
    for p in cfg.primaries().map_err(|e| error(e.to_string()))? {
        let key = match &p.key {
            Some(name) => Some(keys.get(name.as_wire()).cloned().ok_or_else(|| {
                error(format!(
                    "key {name} of primary {}: no tsig_keys file defines it",
                    p.addr
                ))
            })?),
            None => None,
        };
        primaries.push(Primary { addr: p.addr, key });
    }
    let timeout = cfg
        .transfer_timeout(secondary)
        .map_err(|e| error(e.to_string()))?;
    Ok(Some(SecondaryZone {
        origin: cfg.origin.clone(),
        primaries,
        limits: Limits {
            max_bytes: usize::try_from(secondary.max_transfer_bytes).unwrap_or(usize::MAX),
            timeout: Duration::from_secs(timeout),
        },
        path: cfg.transferred_path(secondary),
        refresh_now: Notify::new(),
        retransfer: AtomicBool::new(false),
        schedule: Mutex::new(None),
        source: source.clone(),
        inline: cfg.signing().filter(|_| to_serve).map(|_| {
            Arc::new(InlineSigner::new(
                cfg.transferred_path(secondary),
                read_stored(&cfg),
            ))
        }),
        signed: cfg.signing().is_some(),
        generation: AtomicU64::new(0),
    }))
}

/// Writes `zone` to `path` atomically (master-file text), on a blocking thread.
async fn store(path: &std::path::Path, zone: Zone) -> std::io::Result<()> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = AtomicFile::create(&path, FileMode::Public)?;
        zone.write_master_file(&mut file)?;
        file.commit()
    })
    .await
    .map_err(std::io::Error::other)?
}

/// The stored copy of the secondary zone `cfg` describes, if there is one that reads as a
/// zone (an unusable one is logged and left for the first transfer to replace), with the
/// IXFR differences its journal holds replayed (`<zone>.xfr-journal`, [`crate::inline_signing`]).
pub fn read_stored(cfg: &LoadedConfig) -> Option<Zone> {
    let path = cfg.transferred_path(cfg.secondary()?);
    if !path.exists() {
        return None;
    }
    let zone = pqdns_core::zonefile::ZoneFileReader::new(Some(cfg.origin.clone()), None)
        .read_file(&path)
        .map_err(|e| e.to_string())
        .and_then(|records| {
            Zone::from_records(cfg.origin.clone(), records).map_err(|e| e.to_string())
        });
    match zone {
        Ok(mut zone) => {
            crate::inline_signing::replay_stored(&path, &mut zone);
            info!(zone = %cfg.origin, serial = zone.soa_serial(), file = %path.display(), "secondary zone: serving the stored copy until the first refresh");
            Some(zone)
        }
        Err(e) => {
            warn!(zone = %cfg.origin, file = %path.display(), "stored copy unusable, waiting for a transfer: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timers = Timers {
        refresh: 60_000,
        retry: 10_000,
        expire: 100_000,
    };

    /// NOTIFY in (RFC 1996): from a primary's address, or signed with a primary's key,
    /// NOERROR with AA and a refresh started; from elsewhere REFUSED; for a zone we are no
    /// secondary for NOTAUTH. A primary's key that no `tsig_keys` file defines is an error.
    #[test]
    fn notify_is_answered_by_source_and_zone() {
        use pqdns_core::wire::tsig::{Algorithm, Key};
        use pqdns_core::wire::{Header, FLAG_QR};
        let dir = tempfile::tempdir().unwrap();
        let toml = dir.path().join("sec.toml");
        std::fs::write(
            &toml,
            "origin = \"example.\"\n[secondary]\nprimaries = [\"192.0.2.1\", \"192.0.2.2:5300 key k\"]\n",
        )
        .unwrap();
        let key = Key::generate(&"k.".parse().unwrap(), Algorithm::HmacSha256).unwrap();
        let mut ring = KeyRing::new();
        let none = Secondaries::new(&[ZoneSource::File(toml.clone())], &Arc::new(KeyRing::new()))
            .unwrap_err();
        assert!(none.to_string().contains("key k."), "{none}");
        ring.insert(key.clone());
        let secondaries = Secondaries::new(&[ZoneSource::File(toml)], &Arc::new(ring)).unwrap();
        let zone = |origin: &str| {
            let origin: Name = origin.parse().unwrap();
            let records =
                pqdns_core::zonefile::ZoneFileReader::new(Some(origin.clone()), Some(300))
                    .read_str("@ SOA ns h 5 60 30 600 300\n", "t")
                    .unwrap();
            Zone::from_records(origin, records).unwrap()
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let refreshing = || {
            let z = secondaries.zone(&"example.".parse().unwrap()).unwrap();
            let wait =
                async { tokio::time::timeout(Duration::ZERO, z.refresh_now.notified()).await };
            rt.block_on(wait).is_ok()
        };
        let k = key.name().clone();
        for (origin, client, key, rcode) in [
            ("example.", "192.0.2.1", None, Rcode::NOERROR),
            ("example.", "203.0.113.9", Some(&k), Rcode::NOERROR),
            ("example.", "203.0.113.9", None, Rcode::REFUSED),
            ("other.", "192.0.2.1", None, Rcode::NOTAUTH),
        ] {
            let wire = crate::notify::build(&zone(origin), 77);
            let q =
                crate::request::parse_with(&wire, None, crate::request::SECONDARY_OPCODES).unwrap();
            let mut out = Vec::new();
            let o = secondaries.notify(&q, client.parse().unwrap(), key, &mut out, 0, 0);
            assert_eq!(o.rcode, rcode, "{origin} from {client}");
            let header = Header::parse(&out[..o.len]).unwrap();
            assert!(header.has(FLAG_QR) && header.id == 77);
            assert_eq!(header.has(FLAG_AA), rcode == Rcode::NOERROR);
            assert_eq!(
                refreshing(),
                rcode == Rcode::NOERROR,
                "{origin} from {client}"
            );
        }
    }

    /// A reload's catalog keeps its own version of a secondary zone unless the zone's task
    /// swapped in another while it ran; the expiry always comes from the catalog in force.
    #[test]
    fn a_reload_keeps_transfers_made_while_it_ran() {
        let dir = tempfile::tempdir().unwrap();
        let toml = dir.path().join("sec.toml");
        std::fs::write(
            &toml,
            "origin = \"example.\"\n[secondary]\nprimaries = [\"192.0.2.1\"]\n",
        )
        .unwrap();
        let secondaries =
            Secondaries::new(&[ZoneSource::File(toml)], &Arc::new(KeyRing::new())).unwrap();
        let version = |serial: u32, expired: bool| {
            let origin: Name = "example.".parse().unwrap();
            let records =
                pqdns_core::zonefile::ZoneFileReader::new(Some(origin.clone()), Some(300))
                    .read_str(&format!("@ SOA ns h {serial} 60 30 600 300\n"), "t")
                    .unwrap();
            let mut z = ServedZone::new(Zone::from_records(origin, records).unwrap());
            z.expired = expired;
            Catalog::new([z]).unwrap()
        };
        let origin: Name = "example.".parse().unwrap();
        let state = |c: &Catalog| {
            let z = c.zone(&origin).unwrap();
            (z.zone.soa_serial(), z.expired)
        };
        let before = secondaries.generations();
        let kept = secondaries.overlay(version(1, false), &version(1, true), &before);
        assert_eq!(
            state(&kept),
            (1, true),
            "no transfer: the reload's, expiry as served"
        );
        secondaries
            .zone(&origin)
            .unwrap()
            .generation
            .fetch_add(1, Ordering::SeqCst);
        let replaced = secondaries.overlay(version(1, false), &version(2, false), &before);
        assert_eq!(
            state(&replaced),
            (2, false),
            "a transfer during the reload wins"
        );
    }

    /// The timers come from the SOA, bounded: REFRESH 0 is one second, not a busy loop.
    #[test]
    fn timers_come_from_the_soa_bounded() {
        let text = "@ SOA ns h 1 0 30 4000000000 300\n@ NS ns\n";
        let records =
            pqdns_core::zonefile::ZoneFileReader::new(Some("example.".parse().unwrap()), Some(300))
                .read_str(text, "t")
                .unwrap();
        let zone = Zone::from_records("example.".parse().unwrap(), records).unwrap();
        let t = Timers::of(&zone).unwrap();
        assert_eq!((t.refresh, t.retry), (MIN_TIMER, 30_000));
        assert_eq!(t.expire, 4_000_000_000_000);
    }

    /// RFC 1035 §4.3.5 with an injected clock: refresh at start; REFRESH after a success,
    /// RETRY after a failure; expiry EXPIRE after the last success, not moved by failures,
    /// and lifted by the next success.
    #[test]
    fn refresh_retry_expire() {
        let mut s = Schedule::start(1_000, None);
        assert_eq!(s.next_refresh, 1_000);
        assert!(
            !s.is_expired(u64::MAX, T),
            "nothing to expire before a copy"
        );
        s.failed(1_000, None);
        assert_eq!(s.next_refresh, 1_000 + FIRST_RETRY);
        s.succeeded(20_000, T);
        assert_eq!(s.next_refresh, 80_000);
        assert_eq!(s.next_event(20_000, Some(T)), 80_000);
        s.failed(80_000, Some(T));
        assert_eq!(s.next_refresh, 90_000);
        for t in [90_000, 100_000, 110_000] {
            s.failed(t, Some(T));
        }
        assert!(!s.is_expired(119_999, T));
        assert!(s.is_expired(120_000, T));
        assert_eq!(s.expires_at(T), Some(120_000));
        // The expiry is the next event when it comes before the refresh.
        let mut late = s;
        late.next_refresh = 200_000;
        assert_eq!(late.next_event(110_000, Some(T)), 120_000);
        assert_eq!(
            late.next_event(130_000, Some(T)),
            200_000,
            "past expiry: only refreshes"
        );
        s.succeeded(125_000, T);
        assert!(!s.is_expired(125_000, T));
    }

    /// A stored copy expires EXPIRE after it was last refreshed, even across a restart.
    #[test]
    fn a_stored_copy_keeps_its_age() {
        let s = Schedule::start(500_000, Some(450_000));
        assert_eq!(s.next_refresh, 500_000, "refreshed at once");
        assert!(!s.is_expired(549_999, T));
        assert!(s.is_expired(550_000, T));
    }
}
