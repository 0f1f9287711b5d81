//! Bytes on the wire, counted at the socket: a wrapper around a stream socket that adds every
//! byte the kernel accepted from us (`poll_write`) and handed to us (`poll_read`) to shared
//! counters. Wrapped *below* TLS, so the counts include TLS records (handshake, alerts,
//! session tickets) and, for DoH, HTTP/2 framing. UDP datagrams are counted by the caller
//! with [`WireCounters::add_sent`] / [`WireCounters::add_received`].
//!
//! IP, UDP and TCP headers are not visible at the socket; [`HeaderEstimate`] estimates them
//! from the counted packets and connections and is always reported as an estimate.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Payload bytes and socket calls in each direction, shared by all connections of a run.
#[derive(Debug, Default)]
pub struct WireCounters {
    sent: AtomicU64,
    received: AtomicU64,
    send_calls: AtomicU64,
    receive_calls: AtomicU64,
    connections: AtomicU64,
}

/// A snapshot of [`WireCounters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct WireTotals {
    /// Bytes written to sockets (UDP payloads, or TCP payload incl. TLS records), bytes.
    pub sent: u64,
    /// Bytes read from sockets, bytes.
    pub received: u64,
    /// Successful write calls (datagrams for UDP; at least one TCP segment each).
    pub send_calls: u64,
    /// Successful non-empty read calls (datagrams for UDP).
    pub receive_calls: u64,
    /// TCP or QUIC connections opened.
    pub connections: u64,
}

impl WireCounters {
    /// Adds `n` bytes sent in one socket call.
    pub fn add_sent(&self, n: usize) {
        self.sent.fetch_add(n as u64, Ordering::Relaxed);
        self.send_calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `n` bytes received in one socket call.
    pub fn add_received(&self, n: usize) {
        self.received.fetch_add(n as u64, Ordering::Relaxed);
        self.receive_calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `bytes` sent in `datagrams` datagrams (a QUIC connection's totals).
    pub fn add_sent_datagrams(&self, bytes: u64, datagrams: u64) {
        self.sent.fetch_add(bytes, Ordering::Relaxed);
        self.send_calls.fetch_add(datagrams, Ordering::Relaxed);
    }

    /// Adds `bytes` received in `datagrams` datagrams (a QUIC connection's totals).
    pub fn add_received_datagrams(&self, bytes: u64, datagrams: u64) {
        self.received.fetch_add(bytes, Ordering::Relaxed);
        self.receive_calls.fetch_add(datagrams, Ordering::Relaxed);
    }

    /// Counts one TCP or QUIC connection opened.
    pub fn add_connection(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    /// The totals so far.
    pub fn totals(&self) -> WireTotals {
        WireTotals {
            sent: self.sent.load(Ordering::Relaxed),
            received: self.received.load(Ordering::Relaxed),
            send_calls: self.send_calls.load(Ordering::Relaxed),
            receive_calls: self.receive_calls.load(Ordering::Relaxed),
            connections: self.connections.load(Ordering::Relaxed),
        }
    }
}

/// A stream that counts the bytes passing through it into [`WireCounters`].
#[derive(Debug)]
pub struct CountingStream<S> {
    inner: S,
    counters: Arc<WireCounters>,
}

impl<S> CountingStream<S> {
    /// Wraps `inner`; counts go to `counters`.
    pub fn new(inner: S, counters: Arc<WireCounters>) -> CountingStream<S> {
        CountingStream { inner, counters }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for CountingStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 {
            self.counters.add_received(n);
        }
        poll
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for CountingStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = poll {
            if n > 0 {
                self.counters.add_sent(n);
            }
        }
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// IPv4 header without options, bytes (RFC 791).
pub const IPV4_HEADER: u64 = 20;
/// IPv6 fixed header, bytes (RFC 8200).
pub const IPV6_HEADER: u64 = 40;
/// UDP header, bytes (RFC 768).
pub const UDP_HEADER: u64 = 8;
/// TCP header with the timestamp option Linux sends on every segment, bytes (RFC 9293,
/// RFC 7323): 20 + 12.
pub const TCP_HEADER: u64 = 32;
/// TCP header of a SYN or SYN-ACK with MSS, SACK-permitted, timestamps and window scale, bytes.
pub const TCP_SYN_HEADER: u64 = 40;
/// Packets of a TCP open and close that carry no payload: SYN, SYN-ACK, ACK, FIN, ACK, FIN,
/// ACK (the two SYNs are counted with [`TCP_SYN_HEADER`]).
pub const TCP_CONTROL_PACKETS: u64 = 7;

/// IP/UDP/TCP header bytes *estimated* for a run: one packet per counted socket call (a write
/// larger than one MSS is counted as ceil(bytes / MSS) packets in total), seven control packets
/// per TCP connection, no pure ACKs beyond those (delayed ACKs usually ride on data). Link-layer
/// framing is not included. This is an estimate: the socket API does not show segments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HeaderEstimate {
    /// Estimated header bytes sent, bytes.
    pub sent: u64,
    /// Estimated header bytes received, bytes.
    pub received: u64,
}

impl HeaderEstimate {
    /// Estimates headers for `totals` over UDP (`udp`) or TCP, on IPv4 or IPv6, with TCP
    /// maximum segment size `mss` bytes (65483 on Linux loopback, 1460 on Ethernet).
    pub fn estimate(totals: &WireTotals, udp: bool, ipv6: bool, mss: u64) -> HeaderEstimate {
        let ip = if ipv6 { IPV6_HEADER } else { IPV4_HEADER };
        if udp {
            return HeaderEstimate {
                sent: totals.send_calls * (ip + UDP_HEADER),
                received: totals.receive_calls * (ip + UDP_HEADER),
            };
        }
        let mss = mss.max(1);
        let packets = |bytes: u64, calls: u64| calls.max(bytes.div_ceil(mss));
        let conns = totals.connections;
        // Client side sends SYN, ACK, FIN and ACK; the server SYN-ACK, FIN and ACK.
        let control = |syns: u64, others: u64| {
            syns * conns * (ip + TCP_SYN_HEADER) + others * conns * (ip + TCP_HEADER)
        };
        HeaderEstimate {
            sent: packets(totals.sent, totals.send_calls) * (ip + TCP_HEADER) + control(1, 3),
            received: packets(totals.received, totals.receive_calls) * (ip + TCP_HEADER)
                + control(1, 2),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn counts_both_directions_of_an_in_memory_stream() {
        let (a, mut b) = tokio::io::duplex(64);
        let counters = Arc::new(WireCounters::default());
        let mut a = CountingStream::new(a, counters.clone());
        a.write_all(b"hello").await.unwrap();
        b.write_all(b"worlds!").await.unwrap();
        let mut buf = [0u8; 7];
        a.read_exact(&mut buf).await.unwrap();
        let t = counters.totals();
        assert_eq!((t.sent, t.received), (5, 7));
        assert_eq!(t.send_calls, 1);
    }

    #[test]
    fn header_estimate_for_udp_and_one_tcp_exchange() {
        let udp = WireTotals {
            sent: 40,
            received: 100,
            send_calls: 1,
            receive_calls: 1,
            connections: 0,
        };
        let e = HeaderEstimate::estimate(&udp, true, false, 1460);
        assert_eq!((e.sent, e.received), (28, 28));
        let tcp = WireTotals {
            connections: 1,
            ..udp
        };
        let e = HeaderEstimate::estimate(&tcp, false, false, 1460);
        // One data segment (52) + SYN (60) + 3 × 52 control packets.
        assert_eq!(e.sent, 52 + 60 + 3 * 52);
        assert_eq!(e.received, 52 + 60 + 2 * 52);
    }
}
