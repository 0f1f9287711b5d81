//! dnstap: DNS messages logged as they are answered, in the format NSD, Knot, BIND and unbound
//! write (the `dnstap.proto` schema, protocol buffers through `prost`), carried by Frame
//! Streams (content type `protobuf:dnstap.Dnstap`) to a file or to a collector's Unix socket
//! (`dnstap-read`, `fstrm_capture`, `dnstap` of Knot and Go).
//!
//! Off the hot path: [`Dnstap::log_exchange`] copies a query and its response into a bounded
//! queue ([`DEFAULT_QUEUE`] exchanges) and returns; one writer thread encodes and writes, and
//! polls the queue rather than being woken per message. A full queue (a slow disk or
//! collector) drops the exchange and counts it ([`Dnstap::dropped`]); answers never wait.
//! [`Dnstap::close`] writes the STOP frame and flushes.
//!
//! Frame Streams (fstrm, `farsightsec/fstrm` `docs/fstrm.txt`): a data frame is a 32-bit
//! big-endian length and the payload; a control frame is an escape (length 0), its own length
//! and a control type (ACCEPT 1, START 2, STOP 3, READY 4, FINISH 5) with optional content-type
//! fields. A file is unidirectional (START … STOP); a socket is bidirectional: READY, the
//! reader's ACCEPT, START, data frames, STOP (the connection is then closed).

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use prost::Message as _;

use crate::service::Transport;

/// Messages waiting for the writer at most; beyond it they are dropped and counted.
pub const DEFAULT_QUEUE: usize = 8192;
/// The Frame Streams content type of dnstap.
pub const CONTENT_TYPE: &[u8] = b"protobuf:dnstap.Dnstap";
/// Bytes buffered before a write to the file or socket.
const WRITE_BUFFER: usize = 1 << 20;
/// How long the writer sleeps when the queue is empty (the queue holds [`DEFAULT_QUEUE`]
/// entries: at 100,000 exchanges a second, 80 ms).
const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// Longest wait for a collector's ACCEPT or FINISH control frame.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest control frame accepted from a collector, in bytes (fstrm's own limit is 512).
const MAX_CONTROL_FRAME: u32 = 512;

const CONTROL_ACCEPT: u32 = 1;
const CONTROL_START: u32 = 2;
const CONTROL_STOP: u32 = 3;
const CONTROL_READY: u32 = 4;
const FIELD_CONTENT_TYPE: u32 = 1;

/// The `Dnstap` message of `dnstap.proto` (the envelope).
#[derive(Clone, PartialEq, prost::Message)]
pub struct DnstapFrame {
    /// The server's identity (field 1).
    #[prost(bytes = "bytes", optional, tag = "1")]
    pub identity: Option<Bytes>,
    /// The software's version (field 2).
    #[prost(bytes = "bytes", optional, tag = "2")]
    pub version: Option<Bytes>,
    /// The logged message (field 14).
    #[prost(message, optional, tag = "14")]
    pub message: Option<DnstapMessage>,
    /// Always 1, MESSAGE (field 15).
    #[prost(int32, required, tag = "15")]
    pub r#type: i32,
}

/// The `Message` message of `dnstap.proto`: one DNS message and where it went.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DnstapMessage {
    /// [`Kind`] (field 1).
    #[prost(int32, required, tag = "1")]
    pub r#type: i32,
    /// 1 INET, 2 INET6 (field 2).
    #[prost(int32, optional, tag = "2")]
    pub socket_family: Option<i32>,
    /// 1 UDP, 2 TCP, 3 DOT, 4 DOH, 7 DOQ (field 3).
    #[prost(int32, optional, tag = "3")]
    pub socket_protocol: Option<i32>,
    /// The querier's address, 4 or 16 bytes (field 4).
    #[prost(bytes = "vec", optional, tag = "4")]
    pub query_address: Option<Vec<u8>>,
    /// The querier's port (field 6).
    #[prost(uint32, optional, tag = "6")]
    pub query_port: Option<u32>,
    /// When the query was received or sent: seconds since the UNIX epoch (field 8).
    #[prost(uint64, optional, tag = "8")]
    pub query_time_sec: Option<u64>,
    /// … and nanoseconds (field 9).
    #[prost(fixed32, optional, tag = "9")]
    pub query_time_nsec: Option<u32>,
    /// The query, wire format (field 10).
    #[prost(bytes = "bytes", optional, tag = "10")]
    pub query_message: Option<Bytes>,
    /// When the response was sent or received: seconds (field 12).
    #[prost(uint64, optional, tag = "12")]
    pub response_time_sec: Option<u64>,
    /// … and nanoseconds (field 13).
    #[prost(fixed32, optional, tag = "13")]
    pub response_time_nsec: Option<u32>,
    /// The response, wire format (field 14).
    #[prost(bytes = "bytes", optional, tag = "14")]
    pub response_message: Option<Bytes>,
}

/// What a logged message is (`Message.Type` of `dnstap.proto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// A query received by an authoritative server.
    AuthQuery = 1,
    /// A response sent by an authoritative server.
    AuthResponse = 2,
    /// A query sent by a resolver to an authority.
    ResolverQuery = 3,
    /// A response received by a resolver from an authority.
    ResolverResponse = 4,
    /// A query received by a resolver from a client.
    ClientQuery = 5,
    /// A response sent by a resolver to a client.
    ClientResponse = 6,
}

impl Kind {
    fn is_query(self) -> bool {
        matches!(
            self,
            Kind::AuthQuery | Kind::ResolverQuery | Kind::ClientQuery
        )
    }
}

/// Whose exchange a query and its response are: the message kinds they are logged as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Role {
    /// An authoritative server's: AUTH_QUERY and AUTH_RESPONSE.
    Auth,
    /// A resolver's with an authority: RESOLVER_QUERY and RESOLVER_RESPONSE.
    Resolver,
    /// A resolver's with its client: CLIENT_QUERY and CLIENT_RESPONSE.
    Client,
}

impl Role {
    fn kinds(self) -> (Kind, Kind) {
        match self {
            Role::Auth => (Kind::AuthQuery, Kind::AuthResponse),
            Role::Resolver => (Kind::ResolverQuery, Kind::ResolverResponse),
            Role::Client => (Kind::ClientQuery, Kind::ClientResponse),
        }
    }
}

/// Where dnstap goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sink {
    /// A file, written afresh (Frame Streams unidirectional).
    File(PathBuf),
    /// A collector listening on a Unix socket (Frame Streams bidirectional).
    Socket(PathBuf),
}

impl std::str::FromStr for Sink {
    type Err = String;

    /// `unix:PATH` for a socket, else a file path.
    fn from_str(s: &str) -> Result<Sink, String> {
        match s.strip_prefix("unix:") {
            Some("") => Err("dnstap: `unix:` needs a socket path".into()),
            Some(path) => Ok(Sink::Socket(path.into())),
            None if s.is_empty() => Err("dnstap: empty path".into()),
            None => Ok(Sink::File(s.into())),
        }
    }
}

impl std::fmt::Display for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Sink::File(p) => write!(f, "{}", p.display()),
            Sink::Socket(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// A query and its response on their way to the writer: one allocation, one queue slot.
struct Exchange {
    role: Role,
    transport: Transport,
    peer: SocketAddr,
    time: SystemTime,
    /// The query, then the response.
    bytes: Vec<u8>,
    /// Where the response starts in `bytes`.
    split: usize,
}

/// What the writer is sent.
enum Item {
    Exchange(Exchange),
    /// Write STOP, flush and end.
    Close,
}

/// A dnstap output; see the module documentation.
#[derive(Debug)]
pub struct Dnstap {
    queue: SyncSender<Item>,
    closed: AtomicBool,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    dropped: Arc<AtomicU64>,
    sink: Sink,
}

impl Dnstap {
    /// Opens `sink` (creating or truncating the file; connecting to the socket and doing the
    /// Frame Streams handshake) and starts the writer thread; `identity` and `version` go in
    /// every frame.
    ///
    /// # Errors
    /// The I/O error of opening, connecting or the handshake, with the sink named.
    pub fn open(
        sink: Sink,
        identity: &str,
        version: &str,
        queue: usize,
    ) -> std::io::Result<Dnstap> {
        let named =
            |e: std::io::Error| std::io::Error::new(e.kind(), format!("dnstap {sink}: {e}"));
        let out: Box<dyn Write + Send> = match &sink {
            Sink::File(path) => {
                let file = std::fs::File::create(path).map_err(named)?;
                let mut file = std::io::BufWriter::with_capacity(WRITE_BUFFER, file);
                file.write_all(&control_frame(CONTROL_START, true))
                    .map_err(named)?;
                Box::new(file)
            }
            Sink::Socket(path) => {
                let stream = handshake(path).map_err(named)?;
                Box::new(std::io::BufWriter::with_capacity(WRITE_BUFFER, stream))
            }
        };
        let (tx, rx) = mpsc::sync_channel(queue.max(1));
        let envelope = (
            Bytes::copy_from_slice(identity.as_bytes()),
            Bytes::copy_from_slice(version.as_bytes()),
        );
        let writer = std::thread::Builder::new()
            .name("dnstap".into())
            .spawn(move || write_frames(rx, out, envelope))?;
        Ok(Dnstap {
            queue: tx,
            closed: AtomicBool::new(false),
            writer: Mutex::new(Some(writer)),
            dropped: Arc::new(AtomicU64::new(0)),
            sink,
        })
    }

    /// Queues `query` and its `response` (wire format) of an exchange of `role` with `peer`
    /// over `transport`, now. Never blocks: when the queue is full both are dropped and
    /// counted. Does nothing after [`Dnstap::close`].
    pub fn log_exchange(
        &self,
        role: Role,
        transport: Transport,
        peer: SocketAddr,
        query: &[u8],
        response: &[u8],
    ) {
        if self.closed.load(Ordering::Relaxed) {
            return;
        }
        let mut bytes = Vec::with_capacity(query.len() + response.len());
        bytes.extend_from_slice(query);
        bytes.extend_from_slice(response);
        let exchange = Exchange {
            role,
            transport,
            peer,
            time: SystemTime::now(),
            bytes,
            split: query.len(),
        };
        if self.queue.try_send(Item::Exchange(exchange)).is_err() {
            self.dropped.fetch_add(2, Ordering::Relaxed);
        }
    }

    /// Messages dropped so far because the queue was full (two per exchange).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Where the frames go.
    pub fn sink(&self) -> &Sink {
        &self.sink
    }

    /// Stops logging: the writer writes what is queued and the STOP frame, flushes and ends.
    /// Later [`Dnstap::log_exchange`] calls do nothing.
    pub fn close(&self) {
        if self.closed.swap(true, Ordering::Relaxed) {
            return;
        }
        // Waits for room: the writer drains the queue (it keeps reading even after a failed
        // write), so this ends.
        let _ = self.queue.send(Item::Close);
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(writer) = writer {
            let _ = writer.join();
        }
    }
}

impl Drop for Dnstap {
    fn drop(&mut self) {
        self.close();
    }
}

/// The writer thread: two frames per exchange until [`Item::Close`], then STOP. When the queue
/// runs empty it flushes and sleeps [`POLL_INTERVAL`] instead of blocking on the queue, so
/// that logging never has to wake it (a system call per message on the answering threads).
/// A socket is closed after STOP without waiting for the collector's FINISH.
fn write_frames(rx: Receiver<Item>, mut out: Box<dyn Write + Send>, envelope: (Bytes, Bytes)) {
    let mut buf = Vec::with_capacity(1024);
    let mut failed = false;
    loop {
        let mut exchange = match rx.try_recv() {
            Ok(Item::Exchange(exchange)) => exchange,
            Ok(Item::Close) | Err(mpsc::TryRecvError::Disconnected) => break,
            Err(mpsc::TryRecvError::Empty) => {
                if !failed && out.flush().is_err() {
                    failed = true;
                }
                std::thread::sleep(POLL_INTERVAL);
                continue;
            }
        };
        if failed {
            continue;
        }
        let (query_kind, response_kind) = exchange.role.kinds();
        // Shared, not copied, by the two frames' messages.
        let mut response = Bytes::from(std::mem::take(&mut exchange.bytes));
        let query = response.split_to(exchange.split);
        for (kind, message) in [(query_kind, query), (response_kind, response)] {
            buf.clear();
            buf.extend_from_slice(&[0; 4]);
            frame(kind, &exchange, message, &envelope)
                .encode(&mut buf)
                .expect("a Vec grows as needed");
            let len = u32::try_from(buf.len() - 4).unwrap_or(u32::MAX);
            buf[..4].copy_from_slice(&len.to_be_bytes());
            if let Err(e) = out.write_all(&buf) {
                tracing::warn!(error = %e, "dnstap: writing failed; logging stops");
                failed = true;
                break;
            }
        }
    }
    if failed {
        return;
    }
    let _ = out.write_all(&control_frame(CONTROL_STOP, false));
    let _ = out.flush();
}

/// The protobuf envelope of `message`, of `kind`, from `entry`'s exchange.
fn frame(
    kind: Kind,
    entry: &Exchange,
    message: Bytes,
    (identity, version): &(Bytes, Bytes),
) -> DnstapFrame {
    let since = entry
        .time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let (sec, nsec) = (Some(since.as_secs()), Some(since.subsec_nanos()));
    let (family, address) = match entry.peer.ip() {
        std::net::IpAddr::V4(a) => (1, a.octets().to_vec()),
        std::net::IpAddr::V6(a) => (2, a.octets().to_vec()),
    };
    let protocol = match entry.transport {
        Transport::Udp => 1,
        Transport::Tcp => 2,
        Transport::Dot => 3,
        Transport::Doh => 4,
        Transport::Doq => 7,
    };
    let bytes = message;
    let mut message = DnstapMessage {
        r#type: kind as i32,
        socket_family: Some(family),
        socket_protocol: Some(protocol),
        query_address: Some(address),
        query_port: Some(u32::from(entry.peer.port())),
        ..DnstapMessage::default()
    };
    if kind.is_query() {
        (message.query_time_sec, message.query_time_nsec) = (sec, nsec);
        message.query_message = Some(bytes);
    } else {
        (message.response_time_sec, message.response_time_nsec) = (sec, nsec);
        message.response_message = Some(bytes);
    }
    DnstapFrame {
        identity: Some(identity.clone()),
        version: Some(version.clone()),
        message: Some(message),
        r#type: 1,
    }
}

/// A control frame of `kind`, with the dnstap content type when `content_type` is set.
fn control_frame(kind: u32, content_type: bool) -> Vec<u8> {
    let mut body = kind.to_be_bytes().to_vec();
    if content_type {
        body.extend_from_slice(&FIELD_CONTENT_TYPE.to_be_bytes());
        body.extend_from_slice(&(CONTENT_TYPE.len() as u32).to_be_bytes());
        body.extend_from_slice(CONTENT_TYPE);
    }
    let mut frame = 0u32.to_be_bytes().to_vec();
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    frame
}

/// Connects to the collector at `path`: READY, its ACCEPT (naming our content type), START.
fn handshake(path: &Path) -> std::io::Result<UnixStream> {
    let mut stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    stream.write_all(&control_frame(CONTROL_READY, true))?;
    let accept = read_control(&mut stream)?;
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    if accept.first() != Some(&CONTROL_ACCEPT) {
        return Err(bad("the collector did not ACCEPT"));
    }
    stream.write_all(&control_frame(CONTROL_START, true))?;
    Ok(stream)
}

/// Reads one control frame: its type first, then each field's type (contents are skipped).
fn read_control(stream: &mut impl Read) -> std::io::Result<Vec<u32>> {
    let mut word = [0u8; 4];
    let mut next = |stream: &mut dyn Read| -> std::io::Result<u32> {
        stream.read_exact(&mut word)?;
        Ok(u32::from_be_bytes(word))
    };
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    if next(stream)? != 0 {
        return Err(bad("expected a control frame"));
    }
    let len = next(stream)?;
    if !(4..=MAX_CONTROL_FRAME).contains(&len) {
        return Err(bad("control frame of a bad length"));
    }
    let mut body = vec![0u8; len as usize];
    stream.read_exact(&mut body)?;
    let mut types = vec![u32::from_be_bytes([body[0], body[1], body[2], body[3]])];
    let mut at = 4;
    while at + 8 <= body.len() {
        let field = u32::from_be_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
        let flen =
            u32::from_be_bytes([body[at + 4], body[at + 5], body[at + 6], body[at + 7]]) as usize;
        types.push(field);
        at = at.saturating_add(8).saturating_add(flen);
    }
    Ok(types)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frames of a Frame Streams file: control frames as (type, content types), data
    /// frames decoded.
    fn read_file(bytes: &[u8]) -> (Vec<u32>, Vec<DnstapFrame>) {
        let (mut controls, mut data) = (Vec::new(), Vec::new());
        let mut at = 0;
        while at < bytes.len() {
            let len = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            at += 4;
            if len == 0 {
                let clen = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
                let kind = u32::from_be_bytes(bytes[at + 4..at + 8].try_into().unwrap());
                controls.push(kind);
                at += 4 + clen;
            } else {
                data.push(DnstapFrame::decode(&bytes[at..at + len]).unwrap());
                at += len;
            }
        }
        (controls, data)
    }

    #[test]
    fn a_file_holds_start_the_frames_in_order_and_stop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.fstrm");
        let tap = Dnstap::open(Sink::File(path.clone()), "ns1", "pqdns 0.1", 16).unwrap();
        let peer: SocketAddr = "[2001:db8::1]:5300".parse().unwrap();
        tap.log_exchange(Role::Auth, Transport::Doq, peer, b"query", b"response");
        tap.close();
        tap.log_exchange(Role::Auth, Transport::Udp, peer, b"after", b"close");
        let bytes = std::fs::read(&path).unwrap();
        // START with the content type, as fstrm writes it.
        assert_eq!(&bytes[..12], &[0, 0, 0, 0, 0, 0, 0, 34, 0, 0, 0, 2]);
        assert_eq!(&bytes[20..42], CONTENT_TYPE);
        let (controls, frames) = read_file(&bytes);
        assert_eq!(controls, vec![CONTROL_START, CONTROL_STOP]);
        assert_eq!(frames.len(), 2, "nothing after close");
        let q = frames[0].message.as_ref().unwrap();
        assert_eq!(
            (q.r#type, q.socket_family, q.socket_protocol),
            (1, Some(2), Some(7))
        );
        assert_eq!(q.query_address.as_deref(), Some(&peer_octets(peer)[..]));
        assert_eq!(q.query_port, Some(5300));
        assert_eq!(q.query_message.as_deref(), Some(&b"query"[..]));
        assert!(q.response_message.is_none() && q.query_time_sec.is_some());
        let r = frames[1].message.as_ref().unwrap();
        assert_eq!(r.r#type, 2);
        assert_eq!(r.response_message.as_deref(), Some(&b"response"[..]));
        assert_eq!(frames[1].identity.as_deref(), Some(&b"ns1"[..]));
        assert_eq!(tap.dropped(), 0);
    }

    fn peer_octets(peer: SocketAddr) -> Vec<u8> {
        match peer.ip() {
            std::net::IpAddr::V4(a) => a.octets().to_vec(),
            std::net::IpAddr::V6(a) => a.octets().to_vec(),
        }
    }

    /// The known encoding of one frame: field tags and wire types as `dnstap.proto` defines
    /// them (fixed32 nanoseconds, field 14 for the message, 15 for the type).
    #[test]
    fn the_protobuf_encoding_follows_the_schema() {
        let entry = Exchange {
            role: Role::Client,
            transport: Transport::Udp,
            peer: "10.0.0.210:55142".parse().unwrap(),
            time: SystemTime::UNIX_EPOCH + Duration::new(1_609_664_398, 355_231_260),
            bytes: vec![0xab, 0xcd],
            split: 1,
        };
        let envelope = (Bytes::from_static(b"id"), Bytes::from_static(b"v"));
        let query = Bytes::from_static(&[0xab]);
        let bytes = frame(Kind::ClientQuery, &entry, query, &envelope).encode_to_vec();
        let expected: Vec<u8> = [
            &[10, 2, b'i', b'd', 18, 1, b'v'][..],
            &[
                114, 30, 8, 5, 16, 1, 24, 1, 34, 4, 10, 0, 0, 210, 48, 230, 174, 3,
            ],
            &[64, 142, 143, 198, 255, 5, 77, 28, 102, 44, 21, 82, 1, 0xab],
            &[120, 1],
        ]
        .concat();
        assert_eq!(bytes, expected);
    }

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let dir = tempfile::tempdir().unwrap();
        // A collector that accepts and then never reads: the socket buffer fills, the writer
        // blocks, the queue fills.
        let path = dir.path().join("collector.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let (done, finished) = mpsc::channel::<()>();
        let collector = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            assert_eq!(
                read_control(&mut s).unwrap(),
                vec![CONTROL_READY, FIELD_CONTENT_TYPE]
            );
            s.write_all(&control_frame(CONTROL_ACCEPT, true)).unwrap();
            // Holds the connection, unread, until the test is done.
            let _ = finished.recv_timeout(Duration::from_secs(60));
        });
        let tap = Dnstap::open(Sink::Socket(path), "ns1", "v", 4).unwrap();
        let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let big = vec![0u8; 60_000];
        let started = std::time::Instant::now();
        for _ in 0..200 {
            tap.log_exchange(Role::Auth, Transport::Tcp, peer, &big, &big);
        }
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "log waited for the writer"
        );
        assert!(tap.dropped() > 0);
        done.send(()).unwrap();
        collector.join().unwrap();
    }
}
