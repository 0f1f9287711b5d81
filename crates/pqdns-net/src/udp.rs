//! DNS over UDP (RFC 1035 §4.2.1, RFC 6891 for sizes).
//!
//! The hot path moves datagrams in batches: one `recvmmsg(2)` waits for at least one query and
//! reads up to [`BATCH`], the answer engine writes each response into a buffer of its own, and
//! one `sendmmsg(2)` sends them all; batching only saves system calls. Each listening address
//! has `udp_threads` sockets joined by `SO_REUSEPORT`, and each socket one thread (from the
//! runtime's blocking pool) that owns its receive and response buffers, reused for every batch,
//! so the steady state allocates nothing outside the [`Service`], which takes one
//! [`Service::snapshot`] per batch. The socket's receive buffer is raised to [`RECV_BUFFER`]
//! bytes so that bursts are queued rather than dropped. Threads notice shutdown within
//! [`POLL_INTERVAL`].
//!
//! A query the service defers ([`Reply::Defer`]) is handed to the tokio runtime as a task that
//! awaits [`Service::respond_later`] and sends the answer through the same socket (shared, not
//! duplicated: the reply leaves from the address the query came to) with `MSG_DONTWAIT`, so a
//! full send buffer drops that answer as the network could. At most
//! [`crate::ListenConfig::max_deferred`] deferred queries per socket are in flight; more are
//! dropped (the client retries).
//!
//! A multi-message reply ([`Reply::Transfer`]) goes out as one datagram per message, from a
//! runtime task like a deferred answer (the same permits): a server pushing all the fragments
//! of a large answer to a client whose address a DNS cookie proved. Zone transfers are not
//! defined over UDP (RFC 5936 §4.2), so services only reply this way with messages meant as
//! datagrams. The datagrams are paced: [`PACE_BURST`] back to back (TCP's initial window,
//! RFC 6928), then [`PACE_GAP`] before the next burst, at most [`MAX_REPLY_DATAGRAMS`] in all.

use std::io::{self, IoSlice, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::socket::{recvmmsg, sendmmsg, sendto, MsgFlags, MultiHeaders, SockaddrStorage};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::runtime::Handle;
use tokio::sync::{watch, Semaphore};
use tracing::debug;

use crate::service::{Reply, Request, Service, Transfer, TransferEnd, Transport};

/// Largest datagram read, in bytes.
pub const MAX_DATAGRAM: usize = 65535;
/// Datagrams read and answered per system call pair.
pub const BATCH: usize = 32;
/// Receive buffer requested for each UDP socket, in bytes (the kernel caps it at
/// `net.core.rmem_max`).
pub const RECV_BUFFER: usize = 4 << 20;
/// Longest a serving thread blocks in a receive before it checks for shutdown.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// Datagrams of a multi-message reply sent back to back before a pause.
pub const PACE_BURST: usize = 10;
/// Pause between bursts of a multi-message reply.
pub const PACE_GAP: Duration = Duration::from_millis(1);
/// Most datagrams one multi-message reply may send (a 65535-byte answer cut for a 1232-byte
/// budget takes about 60); the rest are not sent.
pub const MAX_REPLY_DATAGRAMS: usize = 128;
/// Capacity each response buffer starts with, in bytes (the largest EDNS payload servers
/// commonly accept; buffers grow if a service writes more).
const RESPONSE_CAPACITY: usize = 4096;

/// How a serving thread hands deferred queries to the runtime.
#[derive(Clone, Debug)]
pub(crate) struct Deferral {
    /// The runtime that runs [`Service::respond_later`].
    pub runtime: Handle,
    /// Permits for deferred queries in flight on one socket.
    pub in_flight: Arc<Semaphore>,
    /// How long one may take before it is given up.
    pub timeout: Duration,
}

/// Binds `count` blocking UDP sockets on `addr` (at least one), each with a
/// [`RECV_BUFFER`]-byte receive buffer and a [`POLL_INTERVAL`] receive timeout. With more than
/// one, the sockets share the address through `SO_REUSEPORT` and the kernel spreads clients
/// over them by address and port, so each can have a thread of its own; two threads on one
/// socket would both wake for every datagram.
///
/// # Errors
/// The operating system's error from creating or binding a socket.
pub(crate) fn bind(addr: SocketAddr, count: usize) -> io::Result<Vec<UdpSocket>> {
    let mut sockets: Vec<UdpSocket> = Vec::with_capacity(count.max(1));
    let mut addr = addr;
    while sockets.len() < count.max(1) {
        let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
        // A burst of datagrams (many QUIC handshakes at once, too) would overflow the default.
        if let Err(e) = socket.set_recv_buffer_size(RECV_BUFFER) {
            debug!(%addr, error = %e, "could not raise the UDP receive buffer");
        }
        socket.set_read_timeout(Some(POLL_INTERVAL))?;
        if count > 1 {
            socket.set_reuse_port(true)?;
        }
        socket.bind(&addr.into())?;
        let socket = UdpSocket::from(socket);
        // Port 0 picks a port for the first socket; the others join it there.
        addr = socket.local_addr()?;
        sockets.push(socket);
    }
    Ok(sockets)
}

/// One thread's buffers: [`BATCH`] receive slots of [`MAX_DATAGRAM`] bytes and as many responses.
struct Batch {
    recv: Vec<u8>,
    /// Message headers for `recvmmsg`; `sendmmsg` gets its own, because it points theirs at
    /// addresses that live only during the call.
    recv_headers: MultiHeaders<SockaddrStorage>,
    send_headers: MultiHeaders<SockaddrStorage>,
    /// Length and source of each datagram of the current batch.
    received: [(usize, Option<SockaddrStorage>); BATCH],
    responses: [Vec<u8>; BATCH],
}

impl Batch {
    fn new() -> Batch {
        Batch {
            recv: vec![0; BATCH * MAX_DATAGRAM],
            recv_headers: MultiHeaders::preallocate(BATCH, None),
            send_headers: MultiHeaders::preallocate(BATCH, None),
            received: [(0, None); BATCH],
            responses: std::array::from_fn(|_| Vec::with_capacity(RESPONSE_CAPACITY)),
        }
    }

    /// Waits for at least one datagram (up to the socket's timeout) and reads up to [`BATCH`];
    /// returns how many.
    fn receive(&mut self, fd: i32) -> io::Result<usize> {
        let mut slots = self.recv.chunks_exact_mut(MAX_DATAGRAM);
        let mut iovs: [[IoSliceMut<'_>; 1]; BATCH] =
            std::array::from_fn(|_| [IoSliceMut::new(slots.next().unwrap_or_default())]);
        let results = recvmmsg(
            fd,
            &mut self.recv_headers,
            iovs.iter_mut(),
            MsgFlags::MSG_WAITFORONE,
            None,
        )?;
        let mut n = 0;
        for (slot, msg) in self.received.iter_mut().zip(results) {
            *slot = (msg.bytes, msg.address);
            n += 1;
        }
        Ok(n)
    }

    /// Sends the non-empty responses among the first `n`, blocking while the socket's send
    /// buffer is full; returns how many the kernel took.
    fn send(&mut self, fd: i32, n: usize) -> io::Result<usize> {
        let mut order = [0usize; BATCH];
        let mut count = 0;
        for i in 0..n {
            if !self.responses[i].is_empty() {
                order[count] = i;
                count += 1;
            }
        }
        if count == 0 {
            return Ok(0);
        }
        let iovs: [[IoSlice<'_>; 1]; BATCH] =
            std::array::from_fn(|i| [IoSlice::new(&self.responses[order[i.min(count - 1)]])]);
        let addrs: [Option<SockaddrStorage>; BATCH] =
            std::array::from_fn(|i| self.received[order[i.min(count - 1)]].1);
        let sent = sendmmsg(
            fd,
            &mut self.send_headers,
            &iovs[..count],
            &addrs[..count],
            [],
            MsgFlags::empty(),
        )?;
        Ok(sent.count())
    }
}

/// Serves queries on `socket` with `service` until `shutdown` changes; blocks the calling
/// thread.
pub(crate) fn serve<S: Service>(
    socket: &Arc<UdpSocket>,
    service: &Arc<S>,
    deferral: &Deferral,
    shutdown: &watch::Receiver<bool>,
) {
    let fd = socket.as_raw_fd();
    let mut batch = Batch::new();
    while !shutdown.has_changed().unwrap_or(true) {
        let n = match batch.receive(fd) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => {
                debug!(error = %e, "UDP receive error");
                continue;
            }
        };
        answer_batch(socket, service, deferral, &mut batch, n);
        let mut sent = match batch.send(fd, n) {
            Ok(sent) => sent,
            Err(e) => {
                debug!(error = %e, "UDP send error");
                0
            }
        };
        // What one sendmmsg did not take goes one datagram at a time.
        for i in (0..n).filter(|&i| !batch.responses[i].is_empty()) {
            if sent > 0 {
                sent -= 1;
                continue;
            }
            let Some(peer) = batch.received[i].1.and_then(socket_addr) else {
                continue;
            };
            if let Err(e) = socket.send_to(&batch.responses[i], peer) {
                debug!(%peer, error = %e, "UDP send error");
            }
        }
    }
}

/// Answers the first `n` datagrams of `batch`; a response left empty is not sent.
fn answer_batch<S: Service>(
    socket: &Arc<UdpSocket>,
    service: &Arc<S>,
    deferral: &Deferral,
    batch: &mut Batch,
    n: usize,
) {
    let snapshot = service.snapshot();
    for i in 0..n {
        let (len, peer) = batch.received[i];
        let response = &mut batch.responses[i];
        response.clear();
        let Some(client) = peer.and_then(socket_addr) else {
            continue;
        };
        let message = &batch.recv[i * MAX_DATAGRAM..i * MAX_DATAGRAM + len];
        let request = Request::new(message, client, Transport::Udp);
        match service.respond(&snapshot, &request, response, 0) {
            Reply::Ready(info) => response.truncate(info.len),
            Reply::Defer(deferred) => {
                response.clear();
                defer(socket, service, deferral, &request, deferred);
            }
            Reply::Transfer(messages) => {
                response.clear();
                send_messages(socket, deferral, client, messages);
            }
        }
    }
}

/// Hands a deferred query to the runtime; its answer is sent from the task.
fn defer<S: Service>(
    socket: &Arc<UdpSocket>,
    service: &Arc<S>,
    deferral: &Deferral,
    request: &Request<'_>,
    deferred: S::Deferred,
) {
    let Ok(permit) = Arc::clone(&deferral.in_flight).try_acquire_owned() else {
        debug!(peer = %request.client, "too many deferred UDP queries in flight; dropped");
        return;
    };
    let client = request.client;
    let task = Arc::clone(service).respond_later(request.to_owned(), deferred, Vec::new(), 0);
    let (socket, limit) = (Arc::clone(socket), deferral.timeout);
    deferral.runtime.spawn(async move {
        let Ok((buf, info)) = tokio::time::timeout(limit, task).await else {
            debug!(peer = %client, "deferred UDP query timed out; no response");
            return;
        };
        drop(permit);
        if info.len == 0 || info.len > buf.len() {
            return;
        }
        let to = SockaddrStorage::from(client);
        if let Err(e) = sendto(
            socket.as_raw_fd(),
            &buf[..info.len],
            &to,
            MsgFlags::MSG_DONTWAIT,
        ) {
            debug!(peer = %client, error = %e, "UDP send error (deferred answer)");
        }
    });
}

/// Hands a multi-message reply to the runtime, which sends its messages to `client` as paced
/// datagrams.
fn send_messages<T: Transfer>(
    socket: &Arc<UdpSocket>,
    deferral: &Deferral,
    client: SocketAddr,
    mut messages: T,
) {
    let Ok(permit) = Arc::clone(&deferral.in_flight).try_acquire_owned() else {
        debug!(peer = %client, "too many UDP replies in flight; multi-message reply dropped");
        messages.end(TransferEnd::WriteFailed);
        return;
    };
    let socket = Arc::clone(socket);
    deferral.runtime.spawn(async move {
        let to = SockaddrStorage::from(client);
        let mut buf = Vec::with_capacity(RESPONSE_CAPACITY);
        let mut end = TransferEnd::Complete;
        for sent in 0..MAX_REPLY_DATAGRAMS {
            let Some(len) = messages.next_message(&mut buf, 0) else {
                break;
            };
            if sent > 0 && sent % PACE_BURST == 0 {
                tokio::time::sleep(PACE_GAP).await;
            }
            let Some(datagram) = buf.get(..len) else {
                break;
            };
            if let Err(e) = sendto(socket.as_raw_fd(), datagram, &to, MsgFlags::MSG_DONTWAIT) {
                debug!(peer = %client, error = %e, "UDP send error (multi-message reply)");
                end = TransferEnd::WriteFailed;
                break;
            }
        }
        messages.end(end);
        drop(permit);
    });
}

/// The IPv4 or IPv6 address in a received source address.
fn socket_addr(addr: SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = addr.as_sockaddr_in() {
        return Some(SocketAddr::V4((*v4).into()));
    }
    addr.as_sockaddr_in6()
        .map(|v6| SocketAddr::V6((*v6).into()))
}
