//! Binding the listeners and running them: [`Server::bind`] gives a [`ServerHandle`] with the
//! bound addresses (port 0 is resolved), reload and graceful shutdown. NOTIFY goes out to the
//! configured secondaries once the listeners run and after every successful reload. The
//! secondary zones' refresh tasks ([`crate::secondary`]) start once the listeners run. A reload
//! also changes the listeners ([`crate::reconfigure`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use pqdns_net::dnstap::{Dnstap, DEFAULT_QUEUE as DNSTAP_QUEUE};
use pqdns_net::tls::{CertificateInfo, TlsError};
use pqdns_net::{ListenError, Listeners};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::catalog::Catalog;
use crate::config_file::ConfigFile;
use crate::provisioning::{ProvisionError, Provisioning};
use crate::reconfigure::{changed_keys, ReloadReport, SettingsSource};
use crate::secondary::{Secondaries, SecondaryError};
use crate::service::Authoritative;
use crate::settings::Settings;
use crate::zones::{reload_all, LoadError, ZoneReport, ZoneSource};
use crate::{metrics, notify};
use pqdns_core::Name;

pub use pqdns_net::{LISTEN_BACKLOG, SHUTDOWN_GRACE};

/// The control operations ([`crate::control`]) as methods of [`ServerHandle`].
mod control;

/// What to serve and how.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Zone descriptions (re-read on reload).
    pub zones: Vec<ZoneSource>,
    /// Listeners, limits, TLS.
    pub settings: Settings,
}

impl ServerConfig {
    /// Serve `zones` with `settings`.
    pub fn new(zones: Vec<ZoneSource>, settings: Settings) -> ServerConfig {
        ServerConfig { zones, settings }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A DNS listener could not be bound, or TLS could not be set up.
    #[error(transparent)]
    Listen(#[from] ListenError),
    /// The dnstap output could not be opened.
    #[error(transparent)]
    Dnstap(std::io::Error),
    /// A secondary zone's settings are wrong (a primary's key is not defined).
    #[error(transparent)]
    Secondary(#[from] SecondaryError),
    /// A zone description cannot be read.
    #[error(transparent)]
    Provision(#[from] ProvisionError),
    /// The AF_XDP fast path could not start on an interface ([`crate::xdp`]).
    #[error("{0}")]
    Xdp(String),
    /// The metrics listener could not be bound.
    #[error("binding metrics {addr}: {error}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        error: std::io::Error,
    },
}

/// Addresses actually bound, per transport, and the metrics listener's.
pub use pqdns_net::BoundAddrs;

/// The addresses of `listeners`, with `metrics`.
fn with_metrics(listeners: &BoundAddrs, metrics: Option<SocketAddr>) -> BoundAddrs {
    let mut addrs = listeners.clone();
    addrs.metrics = metrics;
    addrs
}

/// A running server.
#[derive(Debug)]
pub struct ServerHandle {
    service: Arc<Authoritative>,
    /// Changed by reloads ([`crate::reconfigure`]), never locked across an await.
    listeners: std::sync::Mutex<Listeners>,
    /// Held by a reload from reading the configuration to its end, so that two reloads (a
    /// SIGHUP and `pqdns-ctl reload`) do not bind the same new addresses.
    reloading: tokio::sync::Mutex<()>,
    /// The AF_XDP fast path ([`crate::xdp`]), stopped before the listeners.
    xdp: crate::xdp::Running,
    metrics_task: Option<JoinHandle<()>>,
    /// The zones served, changed at run time.
    provisioning: Arc<Provisioning>,
    /// Applies consumed catalogs and keeps produced ones current.
    provisioning_task: JoinHandle<()>,
    notify: Vec<notify::Target>,
    secondaries: Arc<Secondaries>,
    /// When the signatures of the last load need refreshing (UNIX seconds).
    refresh_at: std::sync::Mutex<Option<u64>>,
    /// Each zone's last load, for the control operations.
    loads: control::Loads,
    /// Woken when a control operation changed `refresh_at` (see
    /// [`ServerHandle::refresh_due_changed`]).
    refresh_changed: tokio::sync::Notify,
    /// What [`ServerHandle::reload`] re-reads for the zones to serve, if anything
    /// ([`ServerHandle::reload_configuration_from`]).
    configuration: std::sync::Mutex<Option<Configuration>>,
    /// How a reload reads the listen addresses ([`ServerHandle::reload_settings_with`]).
    settings: std::sync::Mutex<Option<ReadSettings>>,
    /// Addresses bound at start; [`ServerHandle::listening`] gives those bound now.
    pub addrs: BoundAddrs,
}

/// The configuration file a reload re-reads ([`ServerHandle::reload_configuration_from`]).
#[derive(Debug)]
struct Configuration {
    /// The file.
    path: PathBuf,
    /// The zones given beside it (`--zone`), served too.
    beside: Vec<ZoneSource>,
    /// Its `[server]` table as read at start, key by key: a reload names the keys changed
    /// since that take effect at the next start ([`crate::reconfigure`]).
    server: toml::Table,
}

/// A [`SettingsSource`] (a closure, shown by name in `Debug`).
#[derive(Clone)]
struct ReadSettings(SettingsSource);

impl std::fmt::Debug for ReadSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SettingsSource")
    }
}

/// What a reload reads from the configuration file.
struct Configured {
    /// The zones it gives, with those given beside it.
    zones: Vec<ZoneSource>,
    /// The server settings it gives, if the handle knows how to read them.
    settings: Option<Settings>,
    /// The `[server]` keys changed since the start that a reload does not apply.
    changed: Vec<String>,
}

/// Entry point: see [`Server::bind`].
#[derive(Debug)]
pub struct Server;

impl Server {
    /// Binds every listener of `config.settings` and starts serving `catalog`. Must be called
    /// inside a multi-threaded tokio runtime.
    ///
    /// # Errors
    /// [`ServerError`] if an address cannot be bound or TLS cannot be set up; nothing keeps
    /// running then.
    pub async fn bind(config: ServerConfig, catalog: Catalog) -> Result<ServerHandle, ServerError> {
        let s = &config.settings;
        let dnstap = match &s.dnstap {
            Some(sink) => Some(Arc::new(
                Dnstap::open(
                    sink.clone(),
                    "pqdns-server",
                    concat!("pqdns-server ", env!("CARGO_PKG_VERSION")),
                    DNSTAP_QUEUE,
                )
                .map_err(ServerError::Dnstap)?,
            )),
            None => None,
        };
        let secondaries = Arc::new(Secondaries::new(&config.zones, &s.tsig_keys)?);
        let service = Arc::new(
            Authoritative::new(catalog, s)
                .with_dnstap(dnstap)
                .with_secondaries(Arc::clone(&secondaries)),
        );
        let metrics_listener = match s.metrics {
            Some(addr) => {
                let bind_err = |error| ServerError::Bind { addr, error };
                let l = TcpListener::bind(addr).await.map_err(bind_err)?;
                Some((l.local_addr().map_err(bind_err)?, l))
            }
            None => None,
        };
        let listeners = Listeners::bind(&s.listen_config(), Arc::clone(&service)).await?;
        let xdp = crate::xdp::start(s, &listeners.addrs.udp, &service).map_err(ServerError::Xdp)?;
        let addrs = with_metrics(
            &listeners.addrs,
            metrics_listener.as_ref().map(|(addr, _)| *addr),
        );
        let metrics_task = metrics_listener.map(|(_, l)| {
            tokio::spawn(metrics::serve(
                l,
                Arc::clone(&service),
                s.idle_timeout,
                listeners.shutdown_signal(),
                crate::xdp::watch(&xdp),
            ))
        });
        let targets = notify::targets(s);
        let provisioning = Arc::new(Provisioning::new(
            &config.zones,
            Arc::clone(&service),
            Arc::clone(&secondaries),
            targets.clone(),
        )?);
        notify::spawn_all(service.catalog(), &targets);
        secondaries.spawn(&service, &targets);
        let provisioning_task = tokio::spawn(Arc::clone(&provisioning).run());
        Ok(ServerHandle {
            service,
            listeners: std::sync::Mutex::new(listeners),
            reloading: tokio::sync::Mutex::new(()),
            xdp,
            metrics_task,
            provisioning,
            provisioning_task,
            notify: targets,
            secondaries,
            refresh_at: std::sync::Mutex::new(None),
            loads: control::Loads::new(),
            refresh_changed: tokio::sync::Notify::new(),
            configuration: std::sync::Mutex::new(None),
            settings: std::sync::Mutex::new(None),
            addrs,
        })
    }
}

impl ServerHandle {
    /// The interfaces of the AF_XDP fast path ([`crate::xdp`]) and the UDP ports each serves.
    pub fn xdp_interfaces(&self) -> Vec<(String, Vec<u16>)> {
        #[cfg(feature = "xdp")]
        return self
            .xdp
            .iter()
            .map(|l| (l.interface().to_string(), l.ports().to_vec()))
            .collect();
        #[cfg(not(feature = "xdp"))]
        Vec::new()
    }

    /// The AF_XDP fast path's counters per interface (feature `xdp`).
    #[cfg(feature = "xdp")]
    pub fn xdp_stats(&self) -> Vec<(String, pqdns_xdp::XdpStats)> {
        self.xdp
            .iter()
            .map(|l| (l.interface().to_string(), l.stats()))
            .collect()
    }

    /// Reloads the TLS certificate and key (logging the outcome; on failure the old ones stay),
    /// then re-reads, re-keys and re-signs every zone; on success the new zones replace the old
    /// ones atomically and NOTIFY is sent (in the background) to the configured secondaries;
    /// on failure the old ones stay and the error is returned. [`ServerHandle::reload_report`]
    /// with the zones only.
    ///
    /// # Errors
    /// As [`ServerHandle::reload_report`].
    pub async fn reload(&self) -> Result<Vec<ZoneReport>, LoadError> {
        self.reload_report().await.map(|r| r.zones)
    }

    /// [`ServerHandle::reload`], telling what it changed: the zones loaded, the listeners
    /// started and stopped, and the server settings changed that take effect at the next
    /// start (also logged); see [`crate::reconfigure`].
    ///
    /// With a configuration file ([`ServerHandle::reload_configuration_from`]), the file is
    /// read again first and the zones it gives now are served: `[[zone]]` tables added are
    /// loaded and served, those removed are no longer served (queries get REFUSED), in the same
    /// catalog swap as the reload of the others; zones added at run time and catalog members
    /// stay (but the members of a consumed catalog removed). A zone whose `primaries` were
    /// added or removed changes role. With [`ServerHandle::reload_settings_with`] too, the
    /// listen addresses it gives now are listened on: new ones are bound before the zones are
    /// loaded and serve once they are; removed ones stop after. A file that does not read
    /// (its error names the file and line), an address that cannot be bound, or a zone that
    /// fails to load changes nothing.
    ///
    /// # Errors
    /// [`LoadError::Listen`] naming the transport and address that cannot be bound,
    /// [`LoadError::ConfigFile`] or [`LoadError::Settings`] for the configuration file, or the
    /// [`LoadError`] of the first zone that failed.
    pub async fn reload_report(&self) -> Result<ReloadReport, LoadError> {
        let _one = self.reloading.lock().await;
        match self.reload_tls() {
            Ok(Some(cert)) => info!(
                file = %cert.cert_path.display(), sha256 = %cert.fingerprint,
                "TLS certificate reloaded"
            ),
            Ok(None) => {}
            Err(e) => warn!("TLS certificate reload failed, still serving the previous one: {e}"),
        }
        let configured = self.configured()?;
        let (zones, settings, mut needs_restart) = match configured {
            Some(c) => (Some(c.zones), c.settings, c.changed),
            None => (None, None, Vec::new()),
        };
        // Bound now, so that an address in use fails the reload before anything changes.
        let prepared = match &settings {
            Some(settings) => {
                let prepare = self.lock_listeners().prepare(&settings.listen_config());
                Some(prepare.await?)
            }
            None => None,
        };
        if let Some(p) = &prepared {
            let change = p.change();
            // As the [server] table names them.
            let key = |k: &&str| match *k {
                "idle_timeout" => "tcp_idle_timeout".to_owned(),
                other => other.to_owned(),
            };
            needs_restart.extend(change.needs_restart.iter().map(key));
            let udp = pqdns_net::Transport::Udp;
            let udp_changed = (change.start.iter().chain(&change.stop)).any(|(t, _)| *t == udp);
            if udp_changed && !self.xdp_interfaces().is_empty() {
                needs_restart.push("xdp".to_owned());
            }
        }
        needs_restart.sort();
        needs_restart.dedup();
        let zones = self.load(pqdns_core::time::now(), zones).await?;
        let mut report = ReloadReport {
            zones,
            needs_restart,
            ..ReloadReport::default()
        };
        if let Some(prepared) = prepared {
            let name =
                |(t, addr): (pqdns_net::Transport, SocketAddr)| format!("{} {addr}", t.name());
            report.started = prepared.starting().map(name).collect();
            let stopping = self.lock_listeners().apply(prepared, &self.service);
            report.stopped = stopping.stopped().iter().copied().map(name).collect();
            stopping.finished().await;
        }
        for listener in &report.started {
            info!(%listener, "listener started by the reload");
        }
        for listener in &report.stopped {
            info!(%listener, "listener stopped by the reload");
        }
        if !report.needs_restart.is_empty() {
            warn!(
                keys = %report.needs_restart.join(" "),
                "[server] settings changed that take effect at the next start"
            );
        }
        Ok(report)
    }

    /// From now on, [`ServerHandle::reload`] reads again the configuration file `read` was read
    /// from (at start) and serves the zones it gives then, with `beside` (zones given outside
    /// the file, as `--zone`); see [`crate::config_file`].
    pub fn reload_configuration_from(&self, read: &ConfigFile, beside: Vec<ZoneSource>) {
        *self
            .configuration
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Configuration {
            path: read.path.clone(),
            beside,
            server: read.server_keys.clone(),
        });
    }

    /// From now on, [`ServerHandle::reload`] turns the configuration file it reads again
    /// ([`ServerHandle::reload_configuration_from`]) into settings with `source`, and listens
    /// on the addresses they give ([`crate::reconfigure`]).
    pub fn reload_settings_with(&self, source: SettingsSource) {
        *self
            .settings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(ReadSettings(source));
    }

    /// What the configuration file gives now; `None` without a configuration file.
    fn configured(&self) -> Result<Option<Configured>, LoadError> {
        let configuration = self
            .configuration
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(c) = configuration.as_ref() else {
            return Ok(None);
        };
        let file = ConfigFile::read(&c.path)?;
        let source = self
            .settings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let settings = match source {
            Some(ReadSettings(source)) => Some(source(&file).map_err(LoadError::Settings)?),
            None => None,
        };
        let mut changed = changed_keys(&c.server, &file.server_keys);
        if settings.is_none() {
            // Not read: the listen addresses too wait for a restart.
            changed.extend(crate::reconfigure::LIVE_KEYS.iter().filter_map(|k| {
                let k = (*k).to_owned();
                (c.server.get(&k) != file.server_keys.get(&k)).then_some(k)
            }));
        }
        let mut zones = file.zones;
        zones.extend(c.beside.iter().cloned());
        Ok(Some(Configured {
            zones,
            settings,
            changed,
        }))
    }

    /// The listeners, locked (never across an await).
    fn lock_listeners(&self) -> std::sync::MutexGuard<'_, Listeners> {
        self.listeners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The addresses listened on now (changed by reloads), and the metrics listener's.
    pub fn listening(&self) -> BoundAddrs {
        with_metrics(&self.lock_listeners().addrs, self.addrs.metrics)
    }

    /// Reads, keys and signs every zone (on blocking threads); on success the new zones
    /// replace the served ones atomically and NOTIFY is sent; on failure nothing changes. The
    /// zones' part of [`ServerHandle::reload`], and the first load after [`Server::bind`]
    /// (which may start with an empty catalog, so that no file is written before every
    /// address is bound).
    ///
    /// # Errors
    /// The [`LoadError`] of the first zone that failed.
    ///
    /// Signed zones get a SOA serial above the one served, if their file's is not
    /// ([`crate::zones::load_zone`]), so NOTIFY makes secondaries transfer the new signatures.
    pub async fn load_zones(&self) -> Result<Vec<ZoneReport>, LoadError> {
        self.load_zones_at(pqdns_core::time::now()).await
    }

    /// [`ServerHandle::load_zones`] signing at `now` (UNIX seconds) instead of the system
    /// clock: signature inception and expiration, the refresh time and time-based SOA serials
    /// follow `now`. For tests and simulations that drive a zone through days or months of
    /// re-signing in seconds (with [`ServerHandle::refresh_due`] as the schedule).
    ///
    /// # Errors
    /// The [`LoadError`] of the first zone that failed.
    pub async fn load_zones_at(&self, now: u64) -> Result<Vec<ZoneReport>, LoadError> {
        self.load(now, None).await
    }

    /// Loads the zones served at `now`, with `configured` (the zones the configuration gives
    /// now) in place of those it gave before ([`Provisioning::plan`]); then the zones frozen
    /// before a restart are frozen again ([`crate::control`]).
    async fn load(
        &self,
        now: u64,
        configured: Option<Vec<ZoneSource>>,
    ) -> Result<Vec<ZoneReport>, LoadError> {
        let service = Arc::clone(&self.service);
        let secondaries = Arc::clone(&self.secondaries);
        let provisioning = Arc::clone(&self.provisioning);
        // Under the lock on catalog changes: a dynamic update or a transfer is neither lost nor
        // applied to a catalog this reload replaces.
        let reports = tokio::task::spawn_blocking(move || {
            let _changing = service.lock_catalog_changes();
            let plan = provisioning.plan(configured.as_deref())?;
            let zones = plan.sources();
            let generations = secondaries.generations();
            let served = service.catalog();
            let (catalog, reports) = reload_all(&zones, now, Some(&served))?;
            provisioning.commit(plan)?;
            // Secondary zones as served now, not as their stored copies say.
            service.set_catalog(secondaries.overlay(catalog, &served, &generations));
            crate::control::restore_frozen(&service.frozen, &zones);
            Ok::<_, LoadError>(reports)
        })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;
        let refresh_at = self.loads.record(&reports, now, true);
        *self.refresh_at.lock().unwrap_or_else(|e| e.into_inner()) = refresh_at;
        info!(zones = reports.len(), refresh_at, "zones loaded");
        notify::spawn_all(self.service.catalog(), &self.notify);
        self.provisioning.wake();
        Ok(reports)
    }

    /// Starts serving the zone `source` describes without a restart
    /// ([`Provisioning::add_zone`]: loaded and signed as at start, a secondary zone's refresh
    /// task started, NOTIFY sent); a reload re-reads it with the others.
    ///
    /// # Errors
    /// [`ProvisionError`] if a zone of that origin is served or it cannot be loaded; nothing
    /// changes then.
    pub async fn add_zone(&self, source: ZoneSource) -> Result<ZoneReport, ProvisionError> {
        self.provisioning.add_zone(source).await
    }

    /// Stops serving the zone `origin` without a restart ([`Provisioning::remove_zone`]: its
    /// refresh task stops, queries for it get REFUSED, its files stay); returns the
    /// description it was served from.
    ///
    /// # Errors
    /// [`ProvisionError::NotServed`] if no zone of that origin is served.
    pub async fn remove_zone(&self, origin: &Name) -> Result<ZoneSource, ProvisionError> {
        self.provisioning.remove_zone(origin).await
    }

    /// The set of zones served and the catalog zones consumed and produced
    /// ([`crate::provisioning`]).
    pub fn provisioning(&self) -> &Arc<Provisioning> {
        &self.provisioning
    }

    /// When the signatures of the zones loaded last need refreshing, UNIX seconds (the
    /// earliest expiration minus the zone's `refresh` setting); `None` if no zone is signed
    /// here, or before this handle loaded zones itself (a catalog handed to [`Server::bind`]
    /// comes without its refresh times: call [`ServerHandle::load_zones`] to start the
    /// schedule). A program serving with this handle calls [`ServerHandle::load_zones`] then
    /// (pqdns-server does, beside SIGHUP), so no expired signature is ever served.
    pub fn refresh_due(&self) -> Option<u64> {
        *self.refresh_at.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Resolves when [`ServerHandle::refresh_due`] changed by a control operation on one
    /// zone ([`crate::control`]: a reload, re-signing or rollover step), so that a program
    /// waiting for the time it read before looks again.
    pub async fn refresh_due_changed(&self) {
        self.refresh_changed.notified().await;
    }

    /// Reads the TLS certificate and key files again (regenerating a missing self-signed
    /// certificate); new handshakes get them. `Ok(None)` without DoT and DoH listeners.
    ///
    /// # Errors
    /// [`TlsError`] naming the file at fault; the certificate in use stays then.
    pub fn reload_tls(&self) -> Result<Option<CertificateInfo>, TlsError> {
        self.lock_listeners().reload_tls()
    }

    /// The TLS certificate in use, if DoT or DoH listens.
    pub fn certificate(&self) -> Option<CertificateInfo> {
        self.lock_listeners().certificate()
    }

    /// The catalog being served.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.service.catalog()
    }

    /// Stops accepting, lets open connections finish their current message, and waits up to
    /// [`SHUTDOWN_GRACE`] for the listeners to stop.
    pub async fn shutdown(self) {
        self.provisioning_task.abort();
        self.secondaries.stop();
        // Its threads notice the stop within pqdns_net::POLL_INTERVAL; joined off the runtime.
        let xdp = self.xdp;
        if tokio::task::spawn_blocking(move || crate::xdp::stop(xdp))
            .await
            .is_err()
        {
            warn!("an AF_XDP serving thread did not stop cleanly");
        }
        let listeners = self
            .listeners
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        listeners.shutdown().await;
        if let Some(tap) = self.service.dnstap() {
            tap.close();
            info!(sink = %tap.sink(), dropped = tap.dropped(), "dnstap closed");
        }
        if let Some(task) = self.metrics_task {
            let abort = task.abort_handle();
            if tokio::time::timeout(SHUTDOWN_GRACE, task).await.is_err() {
                warn!("the metrics listener did not stop in time; aborting it");
                abort.abort();
            }
        }
    }
}
