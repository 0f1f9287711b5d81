//! Binding the listeners and running them: [`Server::bind`] gives a [`ServerHandle`] with the
//! bound addresses (port 0 is resolved), reload and graceful shutdown. NOTIFY goes out to the
//! configured secondaries once the listeners run and after every successful reload.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tracing::{info, warn};

use crate::catalog::Catalog;
use crate::settings::Settings;
use crate::tls::{self, Identity, TlsError, ALPN_DOT};
use crate::transport::{doh, dot, tcp, udp, ConnLimiter, Shared};
use crate::zones::{load_all, LoadError, ZoneReport, ZoneSource};
use crate::{metrics, notify};

/// How long shutdown waits for listeners to stop before aborting them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Accept queue length of the TCP, DoT and DoH listeners (capped by the kernel's
/// `net.core.somaxconn`, 4096 on Linux ≥ 5.4). tokio's `TcpListener::bind` uses 128, which
/// overflows when thousands of clients connect at once and costs each dropped SYN a 1 s
/// retransmission.
pub const LISTEN_BACKLOG: u32 = 4096;

/// A TCP listener on `addr` with [`LISTEN_BACKLOG`] and SO_REUSEADDR (as tokio's `bind`).
fn listen_tcp(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// What to serve and how.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Zone descriptions (re-read on reload).
    pub zones: Vec<ZoneSource>,
    /// Listeners, limits, TLS.
    pub settings: Settings,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A socket could not be bound.
    #[error("binding {transport} {addr}: {error}")]
    Bind {
        /// Transport name.
        transport: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        error: std::io::Error,
    },
    /// TLS setup failed.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// Addresses actually bound, per transport.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BoundAddrs {
    /// UDP sockets.
    pub udp: Vec<SocketAddr>,
    /// TCP listeners.
    pub tcp: Vec<SocketAddr>,
    /// DoT listeners.
    pub dot: Vec<SocketAddr>,
    /// DoH listeners.
    pub doh: Vec<SocketAddr>,
    /// The metrics listener, if configured.
    pub metrics: Option<SocketAddr>,
}

/// A running server.
#[derive(Debug)]
pub struct ServerHandle {
    shared: Arc<Shared>,
    zones: Vec<ZoneSource>,
    notify: Vec<SocketAddr>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    /// Bound addresses.
    pub addrs: BoundAddrs,
    /// The TLS certificate in use, if DoT or DoH listens.
    pub certificate: Option<Identity>,
}

/// Entry point: see [`Server::bind`].
#[derive(Debug)]
pub struct Server;

impl Server {
    /// Binds every listener of `config.settings` and starts serving `catalog`. Must be called
    /// inside a tokio runtime.
    ///
    /// # Errors
    /// [`ServerError`] if an address cannot be bound or TLS cannot be set up; nothing keeps
    /// running then.
    pub async fn bind(config: ServerConfig, catalog: Catalog) -> Result<ServerHandle, ServerError> {
        let s = &config.settings;
        let shared = Arc::new(Shared::new(catalog, s));
        let (tx, rx) = watch::channel(false);
        let mut addrs = BoundAddrs::default();
        let mut tasks = Vec::new();
        let bind_err = |transport, addr| {
            move |error| ServerError::Bind {
                transport,
                addr,
                error,
            }
        };

        let certificate = if s.dot.is_empty() && s.doh.is_empty() {
            None
        } else {
            Some(tls::load_or_generate(&s.tls)?)
        };
        // Bind everything first so that a failure leaves nothing running.
        let mut udp_sockets = Vec::new();
        for &addr in &s.udp {
            let group = udp::bind(addr, s.udp_threads).map_err(bind_err("UDP", addr))?;
            if let Some(first) = group.first() {
                addrs
                    .udp
                    .push(first.local_addr().map_err(bind_err("UDP", addr))?);
            }
            udp_sockets.extend(group.into_iter().map(Arc::new));
        }
        let mut listeners = Vec::new();
        for (kind, list, out) in [
            ("TCP", &s.tcp, &mut addrs.tcp),
            ("DoT", &s.dot, &mut addrs.dot),
            ("DoH", &s.doh, &mut addrs.doh),
        ] {
            for &addr in list {
                let l = listen_tcp(addr).map_err(bind_err(kind, addr))?;
                out.push(l.local_addr().map_err(bind_err(kind, addr))?);
                listeners.push((kind, l));
            }
        }
        let metrics_listener = match s.metrics {
            Some(addr) => {
                let l = TcpListener::bind(addr)
                    .await
                    .map_err(bind_err("metrics", addr))?;
                addrs.metrics = Some(l.local_addr().map_err(bind_err("metrics", addr))?);
                Some(l)
            }
            None => None,
        };
        let acceptors = match &certificate {
            Some(id) => Some((
                TlsAcceptor::from(tls::server_config(s.tls.policy, id, &[ALPN_DOT])?),
                TlsAcceptor::from(tls::server_config(s.tls.policy, id, &[b"h2", b"http/1.1"])?),
            )),
            None => None,
        };

        for socket in udp_sockets {
            let (shared, rx) = (Arc::clone(&shared), rx.clone());
            tasks.push(tokio::task::spawn_blocking(move || {
                udp::serve(&socket, &shared, &rx);
            }));
        }
        let doh_path: Arc<str> = Arc::from(s.doh_path.as_str());
        for (kind, listener) in listeners {
            let limiter = ConnLimiter::new(s.max_connections, s.max_connections_per_ip);
            let shared = Arc::clone(&shared);
            let rx = rx.clone();
            let task = match (kind, &acceptors) {
                ("DoT", Some((dot_acceptor, _))) => tokio::spawn(dot::serve(
                    listener,
                    dot_acceptor.clone(),
                    shared,
                    limiter,
                    rx,
                )),
                ("DoH", Some((_, doh_acceptor))) => tokio::spawn(doh::serve(
                    listener,
                    doh_acceptor.clone(),
                    shared,
                    limiter,
                    Arc::clone(&doh_path),
                    rx,
                )),
                _ => tokio::spawn(tcp::serve(listener, shared, limiter, rx)),
            };
            tasks.push(task);
        }
        if let Some(listener) = metrics_listener {
            tasks.push(tokio::spawn(metrics::serve(
                listener,
                Arc::clone(&shared),
                rx.clone(),
            )));
        }
        notify::spawn_all(shared.catalog(), &s.notify);
        Ok(ServerHandle {
            shared,
            zones: config.zones,
            notify: config.settings.notify.clone(),
            shutdown: tx,
            tasks,
            addrs,
            certificate,
        })
    }
}

impl ServerHandle {
    /// Re-reads, re-keys and re-signs every zone; on success the new zones replace the old
    /// ones atomically and NOTIFY is sent (in the background) to the configured secondaries;
    /// on failure the old ones stay and the error is returned.
    ///
    /// # Errors
    /// The [`LoadError`] of the first zone that failed.
    pub async fn reload(&self) -> Result<Vec<ZoneReport>, LoadError> {
        let zones = self.zones.clone();
        let loaded = tokio::task::spawn_blocking(move || load_all(&zones, pqdns_core::time::now()))
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;
        let (catalog, reports) = loaded;
        self.shared.set_catalog(catalog);
        info!(zones = reports.len(), "zones loaded");
        notify::spawn_all(self.shared.catalog(), &self.notify);
        Ok(reports)
    }

    /// The catalog being served.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.shared.catalog()
    }

    /// Stops accepting, lets open connections finish their current message, and waits up to
    /// [`SHUTDOWN_GRACE`] for the listeners to stop.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        for task in self.tasks {
            let abort = task.abort_handle();
            if tokio::time::timeout(SHUTDOWN_GRACE, task).await.is_err() {
                warn!("a listener did not stop in time; aborting it");
                abort.abort();
            }
        }
    }
}
