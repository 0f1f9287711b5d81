//! The serving loop: one thread per receive queue reads query frames from its AF_XDP socket,
//! hands each DNS message to [`Service::respond`] exactly as the socket path does (the
//! client's address and port, [`Transport::Udp`], one [`Service::snapshot`] per batch), writes
//! the answer into the query's frame behind Ethernet, IP and UDP headers of its own
//! ([`crate::frame`]) and transmits it.
//!
//! Answers the service gives later ([`Reply::Defer`]) and several datagrams for one query
//! ([`Reply::Transfer`], paced by [`PACE_BURST`] and [`PACE_GAP`], at most
//! [`MAX_REPLY_DATAGRAMS`]) are produced in runtime tasks and handed back to the queue's thread
//! through a channel of [`XdpConfig::max_deferred`] entries, which sends them from a frame kept
//! in reserve ([`crate::socket::RESERVE`]); at most `max_deferred` such replies per queue are in
//! flight, more are dropped (the client retries), as on the socket path. While one is in flight
//! the thread wakes every [`LATE_POLL`]; otherwise it sleeps in `poll(2)` up to
//! [`POLL_INTERVAL`] and notices shutdown within that time.
//!
//! An answer longer than the interface MTU cannot leave as one frame and the kernel's IP
//! fragmentation is not on this path: it is dropped and counted
//! ([`XdpStats::oversize`]). [`XdpListener::start`] refuses a configuration whose largest UDP
//! message does not fit the MTU, so only answers past the UDP limits (TSIG-signed ones) can be.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use pqdns_net::{
    Reply, Request, Service, Transfer, TransferEnd, Transport, MAX_REPLY_DATAGRAMS, PACE_BURST,
    PACE_GAP, POLL_INTERVAL,
};
use tokio::runtime::Handle;
use tokio::sync::Semaphore;
use tracing::{debug, info, warn};
use xdpilone::xdp::XdpDesc;

use crate::frame::{self, Route, MAX_ANSWER_HEADERS};
use crate::program::{Program, MAX_QUEUES};
use crate::socket::{XskSocket, FRAME_SIZE};
use crate::XdpError;

/// Frames read per batch (one [`Service::snapshot`] each).
pub const BATCH: u32 = 64;
/// Batches between two reads of the kernel's drop counters while frames keep coming.
const KERNEL_COUNTERS: u32 = 1024;
/// How often a queue's thread looks for answers sent later while some are in flight.
pub const LATE_POLL: Duration = Duration::from_millis(1);

/// What the fast path serves.
#[derive(Clone, Debug)]
pub struct XdpConfig {
    /// The network interface (e.g. `eth0`).
    pub interface: String,
    /// The UDP destination ports whose datagrams are answered here.
    pub ports: Vec<u16>,
    /// The largest DNS message the service writes over UDP, bytes (the server's EDNS UDP
    /// payload size): with IPv6 and UDP headers it must fit the interface MTU.
    pub max_message: usize,
    /// Most answers sent later (deferred, several datagrams) in flight per queue.
    pub max_deferred: usize,
    /// How long a deferred answer may take before it is given up.
    pub deferred_timeout: Duration,
}

/// Counters of the fast path since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpStats {
    /// Frames the XDP program redirected to the AF_XDP sockets.
    pub redirected: u64,
    /// Frames the XDP program passed to the kernel (other traffic, IP fragments, queues
    /// without a socket).
    pub passed: u64,
    /// Answers transmitted.
    pub answered: u64,
    /// Redirected frames that were not a whole UDP datagram with correct checksums.
    pub unreadable: u64,
    /// Answers dropped because they do not fit one frame of the interface's MTU.
    pub oversize: u64,
    /// Answers made later (deferred, several datagrams) dropped for want of a free frame
    /// (answers to queries in hand wait for room on the TX ring instead).
    pub tx_ring_full: u64,
    /// Frames the kernel dropped because an RX ring was full.
    pub rx_ring_full: u64,
    /// Frames the kernel could not receive because a fill ring was empty.
    pub fill_ring_empty: u64,
}

/// The counters the serving threads update.
#[derive(Debug, Default)]
struct Counters {
    answered: AtomicU64,
    unreadable: AtomicU64,
    oversize: AtomicU64,
    tx_ring_full: AtomicU64,
    /// Per queue: the kernel's RX-ring-full and fill-ring-empty counts.
    kernel: Mutex<Vec<(u64, u64)>>,
}

/// The fast path running on one interface; stops (threads joined, program detached) when
/// dropped.
#[derive(Debug)]
pub struct XdpListener {
    interface: String,
    ports: Vec<u16>,
    program: Program,
    threads: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
}

/// An answer produced in a runtime task, for the queue's thread to send.
struct Late {
    route: Route,
    message: Vec<u8>,
}

/// How a queue's thread hands deferred queries and multi-datagram replies to the runtime.
#[derive(Clone)]
struct Deferral {
    runtime: Handle,
    in_flight: Arc<Semaphore>,
    max: usize,
    timeout: Duration,
    late: SyncSender<Late>,
}

/// The receive queues of `interface` (the entries `rx-N` in sysfs), at least one.
fn queue_count(interface: &str) -> u32 {
    let dir = format!("/sys/class/net/{interface}/queues");
    let n = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count()
        })
        .unwrap_or(1);
    u32::try_from(n.max(1)).unwrap_or(1)
}

/// The MTU of `interface`, bytes.
fn mtu(interface: &str) -> Result<usize, XdpError> {
    let path = format!("/sys/class/net/{interface}/mtu");
    std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| XdpError::Interface(interface.to_string()))
}

impl XdpListener {
    /// Attaches the XDP program to `config.interface`, binds an AF_XDP socket to each of its
    /// receive queues and starts one serving thread per queue. `runtime` runs the answers
    /// the service gives later.
    ///
    /// # Errors
    /// [`XdpError`]: the interface does not exist, its MTU is too small for
    /// `config.max_message`, it has more than [`MAX_QUEUES`] queues, or the kernel refused the
    /// program or a socket (not root, no `CONFIG_XDP_SOCKETS`); nothing stays attached then.
    pub fn start<S: Service>(
        config: &XdpConfig,
        service: Arc<S>,
        runtime: Handle,
    ) -> Result<XdpListener, XdpError> {
        let interface = config.interface.clone();
        let mtu = mtu(&interface)?;
        let needed = config.max_message + MAX_ANSWER_HEADERS - frame::ETHERNET_HEADER;
        if needed > mtu || config.max_message + MAX_ANSWER_HEADERS > FRAME_SIZE as usize {
            return Err(XdpError::Mtu {
                interface,
                mtu,
                needed,
            });
        }
        let queues = queue_count(&interface);
        if queues > MAX_QUEUES {
            return Err(XdpError::Queues { interface, queues });
        }
        let mut program = Program::attach(&interface, &config.ports)?;
        let mut sockets = Vec::new();
        for queue in 0..queues {
            let socket = XskSocket::bind(&interface, queue)?;
            program.set_socket(queue, socket.fd())?;
            sockets.push(socket);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters {
            kernel: Mutex::new(vec![(0, 0); sockets.len()]),
            ..Counters::default()
        });
        let max_frame = mtu + frame::ETHERNET_HEADER;
        let mut threads = Vec::new();
        for (queue, socket) in sockets.into_iter().enumerate() {
            let (late, late_rx) = sync_channel(config.max_deferred.max(1));
            let deferral = Deferral {
                runtime: runtime.clone(),
                in_flight: Arc::new(Semaphore::new(config.max_deferred)),
                max: config.max_deferred,
                timeout: config.deferred_timeout,
                late,
            };
            let worker = Worker {
                socket,
                queue,
                service: Arc::clone(&service),
                deferral,
                late: late_rx,
                stop: Arc::clone(&stop),
                counters: Arc::clone(&counters),
                max_frame,
            };
            let thread = std::thread::Builder::new()
                .name(format!("xdp-{interface}-{queue}"))
                .spawn(move || worker.run())
                .map_err(|e| XdpError::Socket {
                    what: "starting a serving thread",
                    errno: e.raw_os_error().unwrap_or(0),
                })?;
            threads.push(thread);
        }
        info!(%interface, queues, mtu, ports = ?config.ports, "AF_XDP fast path started");
        Ok(XdpListener {
            interface,
            ports: config.ports.clone(),
            program,
            threads,
            stop,
            counters,
        })
    }

    /// The interface served.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// The UDP ports served.
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// The counters so far.
    pub fn stats(&self) -> XdpStats {
        let c = &self.counters;
        let program = self.program.counters();
        let kernel = c.kernel.lock().unwrap_or_else(PoisonError::into_inner);
        XdpStats {
            redirected: program.redirected,
            passed: program.passed,
            answered: c.answered.load(Ordering::Relaxed),
            unreadable: c.unreadable.load(Ordering::Relaxed),
            oversize: c.oversize.load(Ordering::Relaxed),
            tx_ring_full: c.tx_ring_full.load(Ordering::Relaxed),
            rx_ring_full: kernel.iter().map(|k| k.0).sum(),
            fill_ring_empty: kernel.iter().map(|k| k.1).sum(),
        }
    }
}

impl Drop for XdpListener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            if thread.join().is_err() {
                warn!(interface = %self.interface, "an AF_XDP serving thread panicked");
            }
        }
    }
}

/// One queue's serving thread.
struct Worker<S: Service> {
    socket: XskSocket,
    queue: usize,
    service: Arc<S>,
    deferral: Deferral,
    late: Receiver<Late>,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    /// The longest frame the interface sends (MTU plus Ethernet header), bytes.
    max_frame: usize,
}

impl<S: Service> Worker<S> {
    fn run(mut self) {
        let mut received = Vec::with_capacity(BATCH as usize);
        let mut outgoing = Vec::with_capacity(BATCH as usize);
        let mut response = Vec::with_capacity(FRAME_SIZE as usize);
        let mut batches = 0u32;
        while !self.stop.load(Ordering::Relaxed) {
            self.socket.refill();
            // Answers the TX ring had no room for last time go first; while they wait, fewer
            // queries are taken (the rest wait on the RX ring, where the kernel counts what
            // overflows as `rx_ring_full`).
            let room = BATCH - u32::try_from(outgoing.len()).unwrap_or(BATCH);
            self.socket.receive(room, &mut received);
            if !received.is_empty() {
                let snapshot = self.service.snapshot();
                for desc in &received {
                    match self.answer(&snapshot, desc, &mut response) {
                        Some(len) => outgoing.push(XdpDesc {
                            addr: desc.addr,
                            len,
                            options: 0,
                        }),
                        None => self.socket.release(desc.addr),
                    }
                }
            }
            let mut late_sent = false;
            while outgoing.len() < BATCH as usize {
                let Ok(late) = self.late.try_recv() else {
                    break;
                };
                late_sent = true;
                if let Some(desc) = self.send_late(&late) {
                    outgoing.push(desc);
                }
            }
            // What the TX ring does not take now (the kernel has not sent enough yet, e.g. a
            // veth peer that is behind) stays in `outgoing`, at most one batch, for the next
            // round.
            let taken = self.socket.transmit(&outgoing);
            outgoing.drain(..taken);
            self.counters
                .answered
                .fetch_add(taken as u64, Ordering::Relaxed);
            batches = batches.wrapping_add(1);
            let idle = received.is_empty() && !late_sent;
            // The kernel's drop counters: read when idle, and every KERNEL_COUNTERS batches
            // under load.
            if idle || batches.is_multiple_of(KERNEL_COUNTERS) {
                self.update_kernel_counters();
            }
            if idle {
                self.wait(!outgoing.is_empty());
            }
        }
    }

    /// Sleeps until a frame arrives, for [`LATE_POLL`] while answers sent later are in flight
    /// or answers wait for room on the TX ring (`backlog`), and [`POLL_INTERVAL`] otherwise.
    fn wait(&self, backlog: bool) {
        let busy = backlog || self.deferral.in_flight.available_permits() < self.deferral.max;
        let timeout = if busy { LATE_POLL } else { POLL_INTERVAL };
        let mut fd = libc::pollfd {
            fd: self.socket.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd, the count 1; poll(2) only writes its revents.
        unsafe {
            libc::poll(&mut fd, 1, ms);
        }
    }

    fn update_kernel_counters(&self) {
        let drops = self.socket.kernel_drops();
        let mut kernel = self
            .counters
            .kernel
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = kernel.get_mut(self.queue) {
            *slot = drops;
        }
    }

    /// Answers the query in the frame of `desc`; returns the answer frame's length, or `None`
    /// if nothing is sent now from that frame.
    fn answer(
        &mut self,
        snapshot: &S::Snapshot,
        desc: &XdpDesc,
        response: &mut Vec<u8>,
    ) -> Option<u32> {
        let Worker {
            socket,
            service,
            deferral,
            counters,
            max_frame,
            ..
        } = self;
        let frame = socket.frame(desc.addr);
        let Some(query) = frame.get(..desc.len as usize) else {
            counters.unreadable.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let datagram = match frame::read(query) {
            Ok(d) => d,
            Err(e) => {
                debug!(reason = ?e, "unreadable frame on the AF_XDP path");
                counters.unreadable.fetch_add(1, Ordering::Relaxed);
                return None;
            }
        };
        let route = datagram.route;
        let request = Request::new(&query[datagram.payload], route.client, Transport::Udp);
        response.clear();
        let len = match service.respond(snapshot, &request, response, 0) {
            Reply::Ready(info) => info.len.min(response.len()),
            Reply::Defer(deferred) => {
                defer(service, deferral, &request, route, deferred);
                return None;
            }
            Reply::Transfer(messages) => {
                send_messages(deferral, route, messages);
                return None;
            }
            // A kind of reply this listener does not know: nothing is sent.
            _ => return None,
        };
        if len == 0 {
            return None;
        }
        let at = route.header_len();
        if at + len > frame.len().min(*max_frame) {
            counters.oversize.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        frame[at..at + len].copy_from_slice(&response[..len]);
        frame::write_answer(frame, &route, len).and_then(|n| u32::try_from(n).ok())
    }

    /// Writes an answer made later into a free frame; returns its descriptor.
    fn send_late(&mut self, late: &Late) -> Option<XdpDesc> {
        let Some(addr) = self.socket.take_free() else {
            self.counters.tx_ring_full.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let at = late.route.header_len();
        let frame = self.socket.frame(addr);
        let len = late.message.len();
        let written = if at + len <= frame.len().min(self.max_frame) {
            frame[at..at + len].copy_from_slice(&late.message);
            frame::write_answer(frame, &late.route, len)
        } else {
            self.counters.oversize.fetch_add(1, Ordering::Relaxed);
            None
        };
        match written.and_then(|n| u32::try_from(n).ok()) {
            Some(len) => Some(XdpDesc {
                addr,
                len,
                options: 0,
            }),
            None => {
                self.socket.release(addr);
                None
            }
        }
    }
}

/// Hands a deferred query to the runtime; its answer comes back through the channel.
fn defer<S: Service>(
    service: &Arc<S>,
    d: &Deferral,
    request: &Request<'_>,
    route: Route,
    deferred: S::Deferred,
) {
    let Ok(permit) = Arc::clone(&d.in_flight).try_acquire_owned() else {
        debug!(peer = %route.client, "too many deferred AF_XDP queries in flight; dropped");
        return;
    };
    let task = Arc::clone(service).respond_later(request.to_owned(), deferred, Vec::new(), 0);
    let (late, limit) = (d.late.clone(), d.timeout);
    d.runtime.spawn(async move {
        let Ok((mut message, info)) = tokio::time::timeout(limit, task).await else {
            debug!(peer = %route.client, "deferred AF_XDP query timed out; no response");
            return;
        };
        drop(permit);
        if info.len == 0 || info.len > message.len() {
            return;
        }
        message.truncate(info.len);
        if late.try_send(Late { route, message }).is_err() {
            debug!(peer = %route.client, "AF_XDP late answers full; dropped");
        }
    });
}

/// Hands a multi-message reply to the runtime, which paces its datagrams to the thread.
fn send_messages<T: Transfer>(d: &Deferral, route: Route, mut messages: T) {
    let Ok(permit) = Arc::clone(&d.in_flight).try_acquire_owned() else {
        debug!(peer = %route.client, "too many AF_XDP replies in flight; dropped");
        messages.end(TransferEnd::WriteFailed);
        return;
    };
    let late = d.late.clone();
    d.runtime.spawn(async move {
        let mut end = TransferEnd::Complete;
        for sent in 0..MAX_REPLY_DATAGRAMS {
            let mut message = Vec::new();
            let Some(len) = messages.next_message(&mut message, 0) else {
                break;
            };
            if sent > 0 && sent % PACE_BURST == 0 {
                tokio::time::sleep(PACE_GAP).await;
            }
            message.truncate(len);
            match late.try_send(Late { route, message }) {
                Ok(()) => {}
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                    end = TransferEnd::WriteFailed;
                    break;
                }
            }
        }
        messages.end(end);
        drop(permit);
    });
}
