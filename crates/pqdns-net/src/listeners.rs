//! Binding every listener of a [`ListenConfig`] and running them for one [`Service`]:
//! [`Listeners::bind`] binds all sockets first (so a failure leaves nothing running), then
//! starts UDP serving threads and the TCP, DoT, DoH and DoQ accept loops; the returned handle
//! knows the bound addresses (port 0 resolved), replaces the TLS certificate on request and
//! shuts everything down gracefully.
//!
//! Each listener (a transport on one address) has a stop signal of its own, so the set can
//! change while serving: [`Listeners::prepare`] binds the addresses a new configuration adds
//! (all or none: a failure names the address and changes nothing), [`Listeners::apply`]
//! starts them and stops those it removes, and leaves the others and their connections alone
//! ([`crate::listen_change`]).

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
use crate::listen_change::ListenChange;
use crate::service::{Service, Transport};
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

/// Addresses actually bound, per transport: one type for every program serving with
/// pqdns-net (the authoritative server's `ServerHandle::addrs` is one too).
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
    /// The metrics listener ([`crate::metrics_http`]), if the program runs one: set by the
    /// program; [`Listeners`] leave it as it is.
    pub metrics: Option<SocketAddr>,
}

impl BoundAddrs {
    /// Every bound address, all transports and the metrics listener.
    pub fn all(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        [&self.udp, &self.tcp, &self.dot, &self.doh, &self.doq]
            .into_iter()
            .flatten()
            .copied()
            .chain(self.metrics)
    }
}

/// Running listeners; see the module documentation.
#[derive(Debug)]
pub struct Listeners {
    /// Changed when every listener shuts down ([`Listeners::shutdown_signal`]).
    shutdown: watch::Sender<bool>,
    /// One entry per listener (transport and configured address), in start order.
    running: Vec<Running>,
    /// The configuration running: its addresses, and the settings listeners started with.
    config: ListenConfig,
    /// TLS of the DoT, DoH and DoQ listeners, made when the first of them starts.
    tls: Option<Tls>,
    /// Bound addresses, kept current by [`Listeners::apply`].
    pub addrs: BoundAddrs,
}

/// One listener: a transport on one configured address, with a stop signal of its own.
#[derive(Debug)]
struct Running {
    transport: Transport,
    /// The address as configured (port 0 stays 0): what [`ListenChange`] matches.
    configured: SocketAddr,
    /// The address bound.
    bound: SocketAddr,
    /// Changed to stop this listener and its connections alone.
    stop: watch::Sender<bool>,
    /// Its accept loop, QUIC endpoints or UDP serving threads.
    tasks: Vec<JoinHandle<()>>,
}

/// TLS of the DoT, DoH and DoQ listeners: one certificate, a server configuration per ALPN
/// set.
#[derive(Clone, Debug)]
struct Tls {
    certificate: Arc<ServerCertificate>,
    dot: Arc<rustls::ServerConfig>,
    doh: Arc<rustls::ServerConfig>,
    doq: Arc<rustls::ServerConfig>,
}

impl Tls {
    /// Loads (or generates) the certificate of `c.tls` covering `listen` (off the executor:
    /// reading PEM files and generating a key block).
    async fn load(c: &ListenConfig, listen: Vec<SocketAddr>) -> Result<Tls, ListenError> {
        let settings = c.tls.clone();
        let load = tokio::task::spawn_blocking(move || ServerCertificate::load(&settings, &listen));
        let certificate = load.await.map_err(|e| TlsError::Io {
            path: c.tls.generated_cert_dir.clone(),
            error: std::io::Error::other(e),
        })??;
        let config =
            |alpn: &[&[u8]]| tls::server_config(c.tls.policy, Arc::clone(&certificate), alpn);
        Ok(Tls {
            dot: config(&[ALPN_DOT])?,
            doh: config(&[ALPN_H2, ALPN_HTTP1])?,
            doq: config(&[ALPN_DOQ])?,
            certificate,
        })
    }
}

/// A socket bound for a listener that does not serve yet.
#[derive(Debug)]
enum Socket {
    /// The sockets of one UDP address (`udp_threads`).
    Udp(Vec<std::net::UdpSocket>),
    /// A TCP, DoT or DoH listener.
    Stream(TcpListener),
    /// The endpoints of one DoQ address (`doq_endpoints`).
    Quic(Vec<quinn::Endpoint>),
}

/// The sockets of a [`ListenChange`], bound but not serving ([`Listeners::prepare`]); give it
/// to [`Listeners::apply`], or drop it to close them and change nothing.
#[derive(Debug)]
pub struct Prepared {
    change: ListenChange,
    /// Transport, configured address, bound address and socket of each listener to start.
    sockets: Vec<(Transport, SocketAddr, SocketAddr, Socket)>,
    /// TLS, if listeners need it (made now if none ran before).
    tls: Option<Tls>,
    /// The configuration once applied.
    config: ListenConfig,
}

impl Prepared {
    /// What applying it changes.
    pub fn change(&self) -> &ListenChange {
        &self.change
    }

    /// The listeners it starts: transport and bound address (port 0 resolved).
    pub fn starting(&self) -> impl Iterator<Item = (Transport, SocketAddr)> + '_ {
        self.sockets.iter().map(|(t, _, bound, _)| (*t, *bound))
    }
}

/// Listeners that [`Listeners::apply`] stopped, finishing their open connections.
#[derive(Debug)]
#[must_use = "the stopped listeners finish in the background unless waited for"]
pub struct Stopping {
    /// Transport and bound address of each listener stopped.
    stopped: Vec<(Transport, SocketAddr)>,
    /// Kept until the tasks end, so that they see a stop and not a vanished sender.
    signals: Vec<watch::Sender<bool>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Stopping {
    /// Nothing stopping yet.
    fn new() -> Stopping {
        Stopping {
            stopped: Vec::new(),
            signals: Vec::new(),
            tasks: Vec::new(),
        }
    }

    /// Signals `listener` to stop and takes it over.
    fn stop(&mut self, listener: Running) {
        let _ = listener.stop.send(true);
        self.stopped.push((listener.transport, listener.bound));
        self.signals.push(listener.stop);
        self.tasks.extend(listener.tasks);
    }

    /// The listeners stopped: transport and bound address.
    pub fn stopped(&self) -> &[(Transport, SocketAddr)] {
        &self.stopped
    }

    /// Waits up to [`SHUTDOWN_GRACE`] for the stopped listeners and their connections to
    /// finish, then aborts what is left.
    pub async fn finished(self) {
        join_within_grace(self.tasks).await;
        drop(self.signals);
    }
}

/// Waits for `tasks` up to [`SHUTDOWN_GRACE`] in all, then aborts those still running.
async fn join_within_grace(tasks: Vec<JoinHandle<()>>) {
    let deadline = tokio::time::Instant::now() + SHUTDOWN_GRACE;
    for task in tasks {
        let abort = task.abort_handle();
        if tokio::time::timeout_at(deadline, task).await.is_err() {
            warn!("a listener did not stop in time; aborting it");
            abort.abort();
        }
    }
}

/// The name of `transport` in errors (`UDP`, `TCP`, `DoT`, `DoH`, `DoQ`).
fn label(transport: Transport) -> &'static str {
    match transport {
        Transport::Udp => "UDP",
        Transport::Tcp => "TCP",
        Transport::Dot => "DoT",
        Transport::Doh => "DoH",
        Transport::Doq => "DoQ",
    }
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
        let mut none = config.clone();
        for list in [
            &mut none.udp,
            &mut none.tcp,
            &mut none.dot,
            &mut none.doh,
            &mut none.doq,
        ] {
            list.clear();
        }
        let mut listeners = Listeners {
            shutdown: watch::channel(false).0,
            running: Vec::new(),
            config: none,
            tls: None,
            addrs: BoundAddrs::default(),
        };
        let prepared = listeners.prepare(config).await?;
        // Nothing ran before: nothing stops.
        listeners.apply(prepared, &service).finished().await;
        Ok(listeners)
    }

    /// Binds the listeners `wanted` has and these do not run ([`ListenChange::between`]), and
    /// makes TLS if they are the first to need it; nothing serves or stops yet. The future
    /// borrows nothing, so the listeners may be locked only while this is called.
    ///
    /// # Errors
    /// [`ListenError`] naming the transport and address that cannot be bound, or the TLS
    /// failure; every socket bound for it is closed then, and the running listeners are
    /// untouched.
    pub fn prepare(
        &self,
        wanted: &ListenConfig,
    ) -> impl std::future::Future<Output = Result<Prepared, ListenError>> + Send + 'static {
        let change = ListenChange::between(&self.config, wanted);
        // The addresses wanted, with the settings the running listeners have.
        let mut config = self.config.clone();
        for (list, new) in [
            (&mut config.udp, &wanted.udp),
            (&mut config.tcp, &wanted.tcp),
            (&mut config.dot, &wanted.dot),
            (&mut config.doh, &wanted.doh),
            (&mut config.doq, &wanted.doq),
        ] {
            list.clone_from(new);
        }
        let tls = self.tls.clone();
        async move {
            let c = &config;
            let mut sockets = Vec::new();
            for &(transport, addr) in &change.start {
                let err = |error| ListenError::Bind {
                    transport: label(transport),
                    addr,
                    error,
                };
                match transport {
                    Transport::Udp => {
                        let group = udp::bind(addr, c.udp_threads).map_err(err)?;
                        if let Some(first) = group.first() {
                            let local = first.local_addr().map_err(err)?;
                            sockets.push((transport, addr, local, Socket::Udp(group)));
                        }
                    }
                    Transport::Tcp | Transport::Dot | Transport::Doh => {
                        let l = listen_tcp(addr).map_err(err)?;
                        let local = l.local_addr().map_err(err)?;
                        sockets.push((transport, addr, local, Socket::Stream(l)));
                    }
                    Transport::Doq => {}
                }
            }
            let needs_tls = !(c.dot.is_empty() && c.doh.is_empty() && c.doq.is_empty());
            let tls = match tls {
                Some(tls) => Some(tls),
                None if needs_tls => {
                    // The self-signed certificate covers the addresses bound.
                    let listen = (sockets.iter())
                        .filter(|(t, ..)| matches!(t, Transport::Dot | Transport::Doh))
                        .map(|(_, _, local, _)| *local)
                        .chain(c.doq.iter().copied())
                        .collect();
                    Some(Tls::load(c, listen).await?)
                }
                None => None,
            };
            if let Some(tls) = &tls {
                for &(transport, addr) in &change.start {
                    if transport != Transport::Doq {
                        continue;
                    }
                    let err = |error| ListenError::Bind {
                        transport: label(transport),
                        addr,
                        error,
                    };
                    let group =
                        doq::bind(addr, Arc::clone(&tls.doq), c.idle_timeout, c.doq_endpoints)
                            .map_err(err)?;
                    if let Some(first) = group.first() {
                        let local = first.local_addr().map_err(err)?;
                        sockets.push((transport, addr, local, Socket::Quic(group)));
                    }
                }
            }
            Ok(Prepared {
                change,
                sockets,
                tls,
                config,
            })
        }
    }

    /// Starts serving `service` on the sockets of `prepared` and stops the listeners it
    /// removes: each stops accepting at once and tells its open connections to finish (as
    /// [`Listeners::shutdown`] does for all); the returned [`Stopping`] waits for them.
    /// Listeners that stay are not touched, nor their connections. Must be called inside a
    /// multi-threaded tokio runtime.
    pub fn apply<S: Service>(&mut self, prepared: Prepared, service: &Arc<S>) -> Stopping {
        let Prepared {
            change,
            sockets,
            tls,
            config,
        } = prepared;
        if self.tls.is_none() {
            self.tls = tls;
        }
        let c = &config;
        let runtime = tokio::runtime::Handle::current();
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
        for (transport, configured, bound, socket) in sockets {
            let (stop, rx) = watch::channel(false);
            let service = Arc::clone(service);
            let tasks = match socket {
                Socket::Udp(group) => group
                    .into_iter()
                    .map(|socket| {
                        let socket = Arc::new(socket);
                        let (service, rx) = (Arc::clone(&service), rx.clone());
                        let deferral = Deferral {
                            runtime: runtime.clone(),
                            in_flight: Arc::new(Semaphore::new(c.max_deferred)),
                            timeout: c.deferred_timeout,
                        };
                        tokio::task::spawn_blocking(move || {
                            udp::serve(&socket, &service, &deferral, &rx);
                        })
                    })
                    .collect(),
                Socket::Stream(listener) => {
                    let limiter = limiter();
                    let task = match (transport, &self.tls) {
                        (Transport::Dot, Some(tls)) => tokio::spawn(tcp::serve(
                            listener,
                            Some(TlsAcceptor::from(Arc::clone(&tls.dot))),
                            service,
                            limiter,
                            limits,
                            rx,
                        )),
                        (Transport::Doh, Some(tls)) => tokio::spawn(doh::serve(
                            listener,
                            TlsAcceptor::from(Arc::clone(&tls.doh)),
                            service,
                            limiter,
                            limits,
                            Arc::clone(&doh_path),
                            rx,
                        )),
                        _ => tokio::spawn(tcp::serve(listener, None, service, limiter, limits, rx)),
                    };
                    vec![task]
                }
                Socket::Quic(group) => {
                    // The endpoints of one address share its connection limits.
                    let limiter = limiter();
                    group
                        .into_iter()
                        .map(|endpoint| {
                            tokio::spawn(doq::serve(
                                endpoint,
                                Arc::clone(&service),
                                Arc::clone(&limiter),
                                limits,
                                rx.clone(),
                            ))
                        })
                        .collect()
                }
            };
            self.running.push(Running {
                transport,
                configured,
                bound,
                stop,
                tasks,
            });
        }
        let mut stopping = Stopping::new();
        for &(transport, addr) in &change.stop {
            let found = (self.running.iter())
                .position(|r| r.transport == transport && r.configured == addr);
            if let Some(i) = found {
                stopping.stop(self.running.remove(i));
            }
        }
        self.config = config;
        let mut addrs = BoundAddrs {
            metrics: self.addrs.metrics,
            ..BoundAddrs::default()
        };
        for r in &self.running {
            let list = match r.transport {
                Transport::Udp => &mut addrs.udp,
                Transport::Tcp => &mut addrs.tcp,
                Transport::Dot => &mut addrs.dot,
                Transport::Doh => &mut addrs.doh,
                Transport::Doq => &mut addrs.doq,
            };
            list.push(r.bound);
        }
        self.addrs = addrs;
        stopping
    }

    /// The TLS certificate in use, if DoT, DoH or DoQ listens.
    pub fn certificate(&self) -> Option<CertificateInfo> {
        self.tls.as_ref().map(|t| t.certificate.info())
    }

    /// Reads the TLS certificate and key again (see [`ServerCertificate::reload`]); new
    /// handshakes get the new ones. `Ok(None)` if no listener uses TLS.
    ///
    /// # Errors
    /// [`TlsError`] naming the file at fault; the certificate in use stays then.
    pub fn reload_tls(&self) -> Result<Option<CertificateInfo>, TlsError> {
        self.tls
            .as_ref()
            .map(|t| t.certificate.reload())
            .transpose()
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
        let mut stopping = Stopping::new();
        for r in self.running {
            stopping.stop(r);
        }
        stopping.finished().await;
    }
}
