//! Binding every listener of a [`ListenConfig`] and running them for one [`Service`]:
//! [`Listeners::bind`] binds all sockets first (so a failure leaves nothing running), then
//! starts UDP serving threads and the TCP, DoT and DoH accept loops; the returned handle knows
//! the bound addresses (port 0 resolved), replaces the TLS certificate on request and shuts
//! everything down gracefully.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tracing::warn;

use crate::doq::{self, ALPN_DOQ};
use crate::limit::ConnLimiter;
use crate::service::Service;
use crate::tcp::StreamLimits;
use crate::tls::{
    self, CertificateInfo, ServerCertificate, TlsError, TlsSettings, ALPN_DOT, ALPN_H2, ALPN_HTTP1,
};
use crate::udp::Deferral;
use crate::{doh, tcp, udp};

/// How long [`Listeners::shutdown`] waits for the listeners to stop before aborting them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Accept queue length of the TCP, DoT and DoH listeners (capped by the kernel's
/// `net.core.somaxconn`, 4096 on Linux ≥ 5.4). tokio's `TcpListener::bind` uses 128, which
/// overflows when thousands of clients connect at once and costs each dropped SYN a 1 s
/// retransmission.
pub const LISTEN_BACKLOG: u32 = 4096;
/// Default idle timeout of stream connections (RFC 7766 §6.2.3), in seconds.
pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 10;
/// Default cap on simultaneous connections per stream listener.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// Default cap on simultaneous connections from one client (address prefix,
/// [`DEFAULT_CLIENT_PREFIX`]) per stream listener.
pub const DEFAULT_MAX_CONNECTIONS_PER_IP: usize = 32;
/// Default prefix lengths that make one client for [`ListenConfig::max_connections_per_ip`]:
/// IPv4 /24, IPv6 /56 (as response-rate limiting counts clients), so a host with many
/// addresses cannot take every connection slot.
pub const DEFAULT_CLIENT_PREFIX: (u8, u8) = (24, 56);
/// Default time a TLS handshake (DoT, DoH) may take, in seconds.
pub const DEFAULT_HANDSHAKE_TIMEOUT_SECS: u64 = 3;
/// Default number of threads, each with its own socket, serving one UDP address.
pub const DEFAULT_UDP_THREADS: usize = 1;
/// Default cap on deferred queries in flight per UDP socket.
pub const DEFAULT_MAX_DEFERRED: usize = 4096;
/// Default time a deferred query may take, in seconds.
pub const DEFAULT_DEFERRED_TIMEOUT_SECS: u64 = 10;
/// Default DoH URI path (RFC 8484 §4.1 example).
pub const DEFAULT_DOH_PATH: &str = "/dns-query";

/// A TCP listener on `addr` with [`LISTEN_BACKLOG`] and SO_REUSEADDR (as tokio's `bind`).
///
/// # Errors
/// The operating system's error from creating, binding or listening.
pub fn listen_tcp(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// What to listen on, and the limits of every listener.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ListenConfig {
    /// UDP listen addresses.
    pub udp: Vec<SocketAddr>,
    /// TCP listen addresses.
    pub tcp: Vec<SocketAddr>,
    /// DNS-over-TLS listen addresses.
    pub dot: Vec<SocketAddr>,
    /// DNS-over-HTTPS listen addresses.
    pub doh: Vec<SocketAddr>,
    /// DNS-over-QUIC listen addresses (UDP).
    pub doq: Vec<SocketAddr>,
    /// DoH URI path (starts with `/`).
    pub doh_path: String,
    /// Threads, each with its own `SO_REUSEPORT` socket, per UDP address (at least 1).
    pub udp_threads: usize,
    /// QUIC endpoints, each with its own `SO_REUSEPORT` socket, per DoQ address (at least 1;
    /// default: the available cores, at most 8). quinn makes a connection's first server
    /// flight, certificate signature included, under its endpoint's lock, so one endpoint
    /// signs handshakes one at a time while its socket fills; the kernel spreads clients over
    /// the sockets by address and port.
    pub doq_endpoints: usize,
    /// How long a TCP, DoT, DoH or DoQ connection may sit idle, and any single write may
    /// block.
    pub idle_timeout: Duration,
    /// How long a DoT or DoH TLS handshake may take.
    pub handshake_timeout: Duration,
    /// Connections per stream listener.
    pub max_connections: usize,
    /// Connections per client per stream listener: per address prefix of
    /// [`ListenConfig::client_prefix`] bits.
    pub max_connections_per_ip: usize,
    /// Prefix lengths (IPv4, IPv6) that make one client for `max_connections_per_ip`; 32 and
    /// 128 count each address.
    pub client_prefix: (u8, u8),
    /// Deferred queries in flight per UDP socket; more are dropped.
    pub max_deferred: usize,
    /// How long a deferred query may take; after that no response is sent (DoH: 504).
    pub deferred_timeout: Duration,
    /// TLS for DoT and DoH.
    pub tls: TlsSettings,
}

/// The default [`ListenConfig::doq_endpoints`]: the available cores, 1 to 8.
pub fn default_doq_endpoints() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 8))
}

impl ListenConfig {
    /// No listeners, default limits, and a self-signed certificate kept in
    /// `generated_cert_dir` if DoT or DoH listeners are added.
    pub fn new(generated_cert_dir: PathBuf) -> ListenConfig {
        ListenConfig {
            udp: Vec::new(),
            tcp: Vec::new(),
            dot: Vec::new(),
            doh: Vec::new(),
            doq: Vec::new(),
            doh_path: DEFAULT_DOH_PATH.into(),
            udp_threads: DEFAULT_UDP_THREADS,
            doq_endpoints: default_doq_endpoints(),
            idle_timeout: Duration::from_secs(DEFAULT_IDLE_TIMEOUT_SECS),
            handshake_timeout: Duration::from_secs(DEFAULT_HANDSHAKE_TIMEOUT_SECS),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_ip: DEFAULT_MAX_CONNECTIONS_PER_IP,
            client_prefix: DEFAULT_CLIENT_PREFIX,
            max_deferred: DEFAULT_MAX_DEFERRED,
            deferred_timeout: Duration::from_secs(DEFAULT_DEFERRED_TIMEOUT_SECS),
            tls: TlsSettings {
                generated_cert_dir,
                ..TlsSettings::default()
            },
        }
    }
}

/// Why the listeners could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ListenError {
    /// A socket could not be bound.
    #[error("binding {transport} {addr}: {error}")]
    Bind {
        /// Transport name (`UDP`, `TCP`, `DoT`, `DoH`).
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
#[non_exhaustive]
pub struct BoundAddrs {
    /// UDP sockets (one per configured address, whatever `udp_threads` is).
    pub udp: Vec<SocketAddr>,
    /// TCP listeners.
    pub tcp: Vec<SocketAddr>,
    /// DoT listeners.
    pub dot: Vec<SocketAddr>,
    /// DoH listeners.
    pub doh: Vec<SocketAddr>,
    /// DoQ endpoints (UDP).
    pub doq: Vec<SocketAddr>,
}

impl BoundAddrs {
    /// Every bound address, all transports.
    pub fn all(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        [&self.udp, &self.tcp, &self.dot, &self.doh, &self.doq]
            .into_iter()
            .flatten()
            .copied()
    }
}

/// Running listeners; see the module documentation.
#[derive(Debug)]
pub struct Listeners {
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    certificate: Option<Arc<ServerCertificate>>,
    /// Bound addresses.
    pub addrs: BoundAddrs,
}

impl Listeners {
    /// Binds every listener of `config` and starts serving `service`. Must be called inside a
    /// multi-threaded tokio runtime (UDP serving threads come from its blocking pool).
    ///
    /// # Errors
    /// [`ListenError`] if an address cannot be bound or TLS cannot be set up; nothing keeps
    /// running then.
    pub async fn bind<S: Service>(
        config: &ListenConfig,
        service: Arc<S>,
    ) -> Result<Listeners, ListenError> {
        let c = config;
        let (tx, rx) = watch::channel(false);
        let mut addrs = BoundAddrs::default();
        let bind_err = |transport, addr| {
            move |error| ListenError::Bind {
                transport,
                addr,
                error,
            }
        };
        // Bind everything first so that a failure leaves nothing running.
        let mut udp_sockets = Vec::new();
        for &addr in &c.udp {
            let group = udp::bind(addr, c.udp_threads).map_err(bind_err("UDP", addr))?;
            if let Some(first) = group.first() {
                addrs
                    .udp
                    .push(first.local_addr().map_err(bind_err("UDP", addr))?);
            }
            udp_sockets.extend(group.into_iter().map(Arc::new));
        }
        let mut listeners = Vec::new();
        for (kind, list, out) in [
            ("TCP", &c.tcp, &mut addrs.tcp),
            ("DoT", &c.dot, &mut addrs.dot),
            ("DoH", &c.doh, &mut addrs.doh),
        ] {
            for &addr in list {
                let l = listen_tcp(addr).map_err(bind_err(kind, addr))?;
                out.push(l.local_addr().map_err(bind_err(kind, addr))?);
                listeners.push((kind, l));
            }
        }
        let certificate = if c.dot.is_empty() && c.doh.is_empty() && c.doq.is_empty() {
            None
        } else {
            let tls_addrs: Vec<SocketAddr> = (addrs.dot.iter().chain(&addrs.doh))
                .chain(&c.doq)
                .copied()
                .collect();
            // Reading PEM files and generating a self-signed key block: off the executor.
            let tls = c.tls.clone();
            let load =
                tokio::task::spawn_blocking(move || ServerCertificate::load(&tls, &tls_addrs));
            Some(load.await.map_err(|e| TlsError::Io {
                path: c.tls.generated_cert_dir.clone(),
                error: std::io::Error::other(e),
            })??)
        };
        let acceptors = match &certificate {
            Some(cert) => Some((
                TlsAcceptor::from(tls::server_config(
                    c.tls.policy,
                    Arc::clone(cert),
                    &[ALPN_DOT],
                )?),
                TlsAcceptor::from(tls::server_config(
                    c.tls.policy,
                    Arc::clone(cert),
                    &[ALPN_H2, ALPN_HTTP1],
                )?),
            )),
            None => None,
        };
        let mut quic = Vec::new();
        if let Some(cert) = &certificate {
            let config = tls::server_config(c.tls.policy, Arc::clone(cert), &[ALPN_DOQ])?;
            for &addr in &c.doq {
                let group = doq::bind(addr, Arc::clone(&config), c.idle_timeout, c.doq_endpoints)
                    .map_err(bind_err("DoQ", addr))?;
                let first = group.first().map(|e| e.local_addr());
                if let Some(local) = first {
                    addrs.doq.push(local.map_err(bind_err("DoQ", addr))?);
                }
                quic.push(group);
            }
        }

        let mut tasks = Vec::new();
        let runtime = tokio::runtime::Handle::current();
        for socket in udp_sockets {
            let (service, rx) = (Arc::clone(&service), rx.clone());
            let deferral = Deferral {
                runtime: runtime.clone(),
                in_flight: Arc::new(Semaphore::new(c.max_deferred)),
                timeout: c.deferred_timeout,
            };
            tasks.push(tokio::task::spawn_blocking(move || {
                udp::serve(&socket, &service, &deferral, &rx);
            }));
        }
        let limits = StreamLimits {
            idle: c.idle_timeout,
            handshake: c.handshake_timeout,
            deferred: c.deferred_timeout,
        };
        let limiter = || {
            let (v4, v6) = c.client_prefix;
            ConnLimiter::per_prefix(c.max_connections, c.max_connections_per_ip, v4, v6)
        };
        let doh_path: Arc<str> = Arc::from(c.doh_path.as_str());
        for (kind, listener) in listeners {
            let limiter = limiter();
            let service = Arc::clone(&service);
            let rx = rx.clone();
            let task = match (kind, &acceptors) {
                ("DoT", Some((dot_acceptor, _))) => tokio::spawn(tcp::serve(
                    listener,
                    Some(dot_acceptor.clone()),
                    service,
                    limiter,
                    limits,
                    rx,
                )),
                ("DoH", Some((_, doh_acceptor))) => tokio::spawn(doh::serve(
                    listener,
                    doh_acceptor.clone(),
                    service,
                    limiter,
                    limits,
                    Arc::clone(&doh_path),
                    rx,
                )),
                _ => tokio::spawn(tcp::serve(listener, None, service, limiter, limits, rx)),
            };
            tasks.push(task);
        }
        for group in quic {
            // The endpoints of one address share its connection limits.
            let limiter = limiter();
            for endpoint in group {
                let (service, rx) = (Arc::clone(&service), rx.clone());
                tasks.push(tokio::spawn(doq::serve(
                    endpoint,
                    service,
                    Arc::clone(&limiter),
                    limits,
                    rx,
                )));
            }
        }
        Ok(Listeners {
            shutdown: tx,
            tasks,
            certificate,
            addrs,
        })
    }

    /// The TLS certificate in use, if DoT, DoH or DoQ listens.
    pub fn certificate(&self) -> Option<CertificateInfo> {
        self.certificate.as_ref().map(|c| c.info())
    }

    /// Reads the TLS certificate and key again (see [`ServerCertificate::reload`]); new
    /// handshakes get the new ones. `Ok(None)` if no listener uses TLS.
    ///
    /// # Errors
    /// [`TlsError`] naming the file at fault; the certificate in use stays then.
    pub fn reload_tls(&self) -> Result<Option<CertificateInfo>, TlsError> {
        self.certificate.as_ref().map(|c| c.reload()).transpose()
    }

    /// A receiver that changes when shutdown starts, for tasks that should stop with the
    /// listeners.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Stops accepting, tells open connections to finish (a stream connection stops after the
    /// message in progress; HTTP/2 gets GOAWAY), and waits up to [`SHUTDOWN_GRACE`] for the
    /// listeners to stop.
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
