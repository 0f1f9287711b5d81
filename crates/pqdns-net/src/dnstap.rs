//! dnstap: DNS messages logged as they are answered, in the format NSD, Knot, BIND and unbound
//! write (the `dnstap.proto` schema, protocol buffers), carried by Frame Streams (content type
//! `protobuf:dnstap.Dnstap`) to a file or to a collector's Unix socket (`dnstap-read`,
//! `fstrm_capture`, `dnstap` of Knot and Go).
//!
//! Off the hot path: a serving thread only copies the DNS messages and a few numbers (kind,
//! transport, peer, times) into a staging buffer, under a lock that the writer takes once per
//! round: no encoding and, in the steady state, no allocation. There are [`SHARDS`] staging
//! buffers, each thread always using the same one, so serving threads do not contend; each
//! holds at most `queue` exchanges ([`DEFAULT_QUEUE`]) and [`BUFFER_BYTES`] bytes of messages.
//! One writer thread swaps every buffer for an empty one every [`POLL_INTERVAL`] (at once when
//! one is filling up), encodes the protobuf frames with `prost` into its write buffer (one
//! reused [`DnstapFrame`] per role and direction, so no allocation per message there either)
//! and writes it; nothing wakes it per message. A full staging buffer (a slow disk or collector)
//! drops the message and counts it ([`Dnstap::dropped`]); answers never wait. After a failed
//! write, logging stops. [`Dnstap::close`] writes what is staged and the STOP frame, and
//! flushes.
//!
//! [`DnstapFrame`] is the schema's `Dnstap` message as `prost` derives it; a unit test checks
//! the bytes of one frame against a known encoding.
//!
//! Frame Streams (fstrm, `farsightsec/fstrm` `docs/fstrm.txt`): a data frame is a 32-bit
//! big-endian length and the payload; a control frame is an escape (length 0), its own length
//! and a control type (ACCEPT 1, START 2, STOP 3, READY 4, FINISH 5) with optional content-type
//! fields. A file is unidirectional (START … STOP); a socket is bidirectional: READY, the
//! reader's ACCEPT, START, data frames, STOP (the connection is then closed).

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use prost::Message as _;

use crate::service::Transport;

/// Exchanges one staging buffer holds at most; beyond it they are dropped and counted.
pub const DEFAULT_QUEUE: usize = 16_384;
/// Bytes of DNS messages one staging buffer holds at most (8 MiB: at 100,000 exchanges a
/// second of 600 bytes, all from one thread, 140 ms of logging, for a write that stalls).
/// With [`DEFAULT_QUEUE`] entries of about 90 bytes, the [`SHARDS`] buffers and the
/// writer's spare hold at most about 85 MiB, when every thread's buffer is full at once.
pub const BUFFER_BYTES: usize = 8 << 20;
/// Staging buffers; each serving thread keeps to one of them.
pub const SHARDS: usize = 8;
/// The Frame Streams content type of dnstap.
pub const CONTENT_TYPE: &[u8] = b"protobuf:dnstap.Dnstap";
/// How long the writer sleeps between rounds, unless a staging buffer was a quarter full.
pub const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// Bytes encoded before a write to the file or socket.
const WRITE_BUFFER: usize = 1 << 20;
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
    /// The responder's address, 4 or 16 bytes: for RESOLVER_QUERY and RESOLVER_RESPONSE,
    /// the authority's (field 5).
    #[prost(bytes = "vec", optional, tag = "5")]
    pub response_address: Option<Vec<u8>>,
    /// The querier's port (field 6).
    #[prost(uint32, optional, tag = "6")]
    pub query_port: Option<u32>,
    /// The responder's port (field 7).
    #[prost(uint32, optional, tag = "7")]
    pub response_port: Option<u32>,
    /// When the query was received or sent: seconds since the UNIX epoch (field 8).
    #[prost(uint64, optional, tag = "8")]
    pub query_time_sec: Option<u64>,
    /// … and nanoseconds (field 9).
    #[prost(fixed32, optional, tag = "9")]
    pub query_time_nsec: Option<u32>,
    /// The query, wire format (field 10).
    #[prost(bytes = "vec", optional, tag = "10")]
    pub query_message: Option<Vec<u8>>,
    /// The zone the query was sent to, an uncompressed wire-format name: for RESOLVER_QUERY
    /// and RESOLVER_RESPONSE, the zone whose servers were asked (field 11).
    #[prost(bytes = "vec", optional, tag = "11")]
    pub query_zone: Option<Vec<u8>>,
    /// When the response was sent or received: seconds (field 12).
    #[prost(uint64, optional, tag = "12")]
    pub response_time_sec: Option<u64>,
    /// … and nanoseconds (field 13).
    #[prost(fixed32, optional, tag = "13")]
    pub response_time_nsec: Option<u32>,
    /// The response, wire format (field 14).
    #[prost(bytes = "vec", optional, tag = "14")]
    pub response_message: Option<Vec<u8>>,
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

/// Which messages of its role an [`Entry`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Parts {
    /// The query and its response, logged together when the response is sent.
    Both,
    /// A query, logged when it is sent.
    Query,
    /// A response, logged when it is received.
    Response,
}

/// One staged exchange or message: the numbers of its frames. Its bytes follow those of the
/// entry before it in [`Batch::bytes`]: the zone, the query, the response.
#[derive(Clone, Copy, Debug)]
struct Entry {
    role: Role,
    parts: Parts,
    transport: Transport,
    /// The querier for [`Role::Auth`] and [`Role::Client`]; the authority for
    /// [`Role::Resolver`].
    peer: SocketAddr,
    /// Since the UNIX epoch.
    query_time: Duration,
    /// Since the UNIX epoch.
    response_time: Duration,
    zone_len: u32,
    query_len: u32,
    response_len: u32,
}

impl Entry {
    /// The messages this entry holds (what a drop loses).
    fn messages(&self) -> u64 {
        if self.parts == Parts::Both {
            2
        } else {
            1
        }
    }
}

/// A staging buffer: entries and, in order, their bytes.
#[derive(Debug, Default)]
struct Batch {
    entries: Vec<Entry>,
    bytes: Vec<u8>,
}

/// What the serving threads and the writer share.
#[derive(Debug)]
struct Shared {
    shards: [Mutex<Batch>; SHARDS],
    /// Entries per staging buffer at most.
    max_entries: usize,
    dropped: AtomicU64,
    /// Set by [`Dnstap::close`]: nothing more is staged.
    closed: AtomicBool,
    /// Set by the writer when a write failed: nothing more is staged.
    failed: AtomicBool,
}

/// Assigns threads to staging buffers in turn.
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's staging buffer.
    static SHARD: usize = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
}

/// Locks a mutex, ignoring poisoning (a staging buffer is consistent between calls).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Now, since the UNIX epoch, from `CLOCK_REALTIME_COARSE` (clock_gettime(2)): the time of
/// the last timer tick, read from memory without reading the hardware clock, so a few
/// milliseconds' resolution (`clock_getres`) for a fraction of the cost on the answering
/// path; the precise clock if that one is missing.
pub fn coarse_now() -> Duration {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME_COARSE) {
        Ok(t) => Duration::new(
            u64::try_from(t.tv_sec()).unwrap_or(0),
            u32::try_from(t.tv_nsec()).unwrap_or(0),
        ),
        Err(_) => since_epoch(SystemTime::now()),
    }
}

/// Since the UNIX epoch (zero before it).
fn since_epoch(time: SystemTime) -> Duration {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
}

impl Shared {
    /// Stages `entry` with its zone, query and response bytes, or drops and counts it when
    /// this thread's staging buffer is full.
    fn stage(&self, entry: Entry, zone: &[u8], query: &[u8], response: &[u8]) {
        if self.closed.load(Ordering::Relaxed) || self.failed.load(Ordering::Relaxed) {
            return;
        }
        let shard = SHARD.with(|s| *s);
        let mut batch = lock(&self.shards[shard]);
        let needed = batch.bytes.len() + zone.len() + query.len() + response.len();
        if needed > BUFFER_BYTES || batch.entries.len() >= self.max_entries {
            drop(batch);
            self.dropped.fetch_add(entry.messages(), Ordering::Relaxed);
            return;
        }
        if needed > batch.bytes.capacity() {
            // Grows by doubling, but never beyond the bound.
            let target = (batch.bytes.capacity() * 2).clamp(needed, BUFFER_BYTES);
            let len = batch.bytes.len();
            batch.bytes.reserve_exact(target - len);
        }
        batch.bytes.extend_from_slice(zone);
        batch.bytes.extend_from_slice(query);
        batch.bytes.extend_from_slice(response);
        batch.entries.push(entry);
    }
}

/// A dnstap output; see the module documentation.
#[derive(Debug)]
pub struct Dnstap {
    shared: Arc<Shared>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    sink: Sink,
}

impl Dnstap {
    /// Opens `sink` (creating or truncating the file; connecting to the socket and doing the
    /// Frame Streams handshake) and starts the writer thread; `identity` and `version` go in
    /// every frame; each staging buffer holds at most `queue` exchanges (and
    /// [`BUFFER_BYTES`]).
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
                let mut file = std::fs::File::create(path).map_err(named)?;
                file.write_all(&control_frame(CONTROL_START, true))
                    .map_err(named)?;
                Box::new(file)
            }
            Sink::Socket(path) => Box::new(handshake(path).map_err(named)?),
        };
        let shared = Arc::new(Shared {
            shards: Default::default(),
            max_entries: queue.max(1),
            dropped: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            failed: AtomicBool::new(false),
        });
        let envelope = Envelope {
            identity: identity.as_bytes().to_vec(),
            version: version.as_bytes().to_vec(),
        };
        let writer = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("dnstap".into())
                .spawn(move || write_frames(&shared, out, &envelope))?
        };
        Ok(Dnstap {
            shared,
            writer: Mutex::new(Some(writer)),
            sink,
        })
    }

    /// Stages `query` and its `response` (wire format) of an exchange of `role` with `peer`
    /// over `transport`, now (the time of both messages, from the coarse clock: see
    /// [`coarse_now`]). Never blocks on the writer: when the staging buffer is full both are
    /// dropped and counted. Does nothing after [`Dnstap::close`].
    pub fn log_exchange(
        &self,
        role: Role,
        transport: Transport,
        peer: SocketAddr,
        query: &[u8],
        response: &[u8],
    ) {
        let now = coarse_now();
        let entry = Entry {
            role,
            parts: Parts::Both,
            transport,
            peer,
            query_time: now,
            response_time: now,
            zone_len: 0,
            query_len: len32(query),
            response_len: len32(response),
        };
        self.shared.stage(entry, &[], query, response);
    }

    /// Stages a RESOLVER_QUERY: `query` (wire format) sent at `sent` to the authority
    /// `server` over `transport`, for `zone` (an uncompressed wire-format name: the zone whose
    /// servers are asked). As [`Dnstap::log_exchange`], never blocks.
    pub fn log_resolver_query(
        &self,
        transport: Transport,
        server: SocketAddr,
        zone: &[u8],
        query: &[u8],
        sent: SystemTime,
    ) {
        let sent = since_epoch(sent);
        let entry = Entry {
            role: Role::Resolver,
            parts: Parts::Query,
            transport,
            peer: server,
            query_time: sent,
            response_time: sent,
            zone_len: len32(zone),
            query_len: len32(query),
            response_len: 0,
        };
        self.shared.stage(entry, zone, query, &[]);
    }

    /// Stages a RESOLVER_RESPONSE: `response` (wire format) received at `received` from the
    /// authority `server` over `transport`, to the query for `zone` sent at `sent`. As
    /// [`Dnstap::log_exchange`], never blocks.
    pub fn log_resolver_response(
        &self,
        transport: Transport,
        server: SocketAddr,
        zone: &[u8],
        sent: SystemTime,
        response: &[u8],
        received: SystemTime,
    ) {
        let entry = Entry {
            role: Role::Resolver,
            parts: Parts::Response,
            transport,
            peer: server,
            query_time: since_epoch(sent),
            response_time: since_epoch(received),
            zone_len: len32(zone),
            query_len: 0,
            response_len: len32(response),
        };
        self.shared.stage(entry, zone, &[], response);
    }

    /// Messages dropped so far because a staging buffer was full.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Where the frames go.
    pub fn sink(&self) -> &Sink {
        &self.sink
    }

    /// Stops logging: the writer writes what is staged and the STOP frame, flushes and ends.
    /// Later calls to log do nothing.
    pub fn close(&self) {
        if self.shared.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let writer = lock(&self.writer).take();
        if let Some(writer) = writer {
            writer.thread().unpark();
            let _ = writer.join();
        }
    }
}

impl Drop for Dnstap {
    fn drop(&mut self) {
        self.close();
    }
}

/// A DNS message's length as staged (at most 65,535 bytes, so it fits).
fn len32(bytes: &[u8]) -> u32 {
    u32::try_from(bytes.len()).unwrap_or(u32::MAX)
}

/// What every frame carries besides its message.
struct Envelope {
    identity: Vec<u8>,
    version: Vec<u8>,
}

/// The writer's frames, one per role and direction, reused from message to message: a field
/// keeps its buffer, so encoding allocates nothing once the buffers have grown.
struct Frames([DnstapFrame; 6]);

impl Frames {
    fn new(envelope: &Envelope) -> Frames {
        let frame = DnstapFrame {
            identity: Some(Bytes::copy_from_slice(&envelope.identity)),
            version: Some(Bytes::copy_from_slice(&envelope.version)),
            message: Some(DnstapMessage::default()),
            r#type: 1,
        };
        Frames(std::array::from_fn(|_| frame.clone()))
    }

    /// Appends the Frame Streams data frame of `message` (of `kind`, from `entry`) to `buf`:
    /// its length, then the `Dnstap` protobuf, encoded by `prost`.
    fn encode(
        &mut self,
        buf: &mut Vec<u8>,
        kind: Kind,
        entry: &Entry,
        zone: &[u8],
        message: &[u8],
    ) -> std::io::Result<()> {
        let slot = (entry.role as usize) * 2 + usize::from(kind.is_query());
        let frame = &mut self.0[slot];
        fill(
            frame.message.get_or_insert_with(DnstapMessage::default),
            kind,
            entry,
            zone,
            message,
        );
        let len = u32::try_from(frame.encoded_len())
            .map_err(|_| std::io::Error::other("dnstap frame over 4 GiB"))?;
        buf.extend_from_slice(&len.to_be_bytes());
        frame.encode(buf).map_err(std::io::Error::other)
    }
}

/// `field` set to `bytes`, keeping its buffer.
fn set(field: &mut Option<Vec<u8>>, bytes: &[u8]) {
    let v = field.get_or_insert_with(Vec::new);
    v.clear();
    v.extend_from_slice(bytes);
}

/// The `Message` of `dnstap.proto` for `message` of `kind` from `entry`: the peer as querier
/// (fields 4, 6) or, for the resolver's own queries, as responder (5, 7); the query time; the
/// query or the response (with its time); the zone, if any.
fn fill(m: &mut DnstapMessage, kind: Kind, entry: &Entry, zone: &[u8], message: &[u8]) {
    m.r#type = kind as i32;
    m.socket_protocol = Some(protocol(entry.transport));
    let port = Some(u32::from(entry.peer.port()));
    let (address, port_field) = match entry.role {
        Role::Resolver => (&mut m.response_address, &mut m.response_port),
        Role::Auth | Role::Client => (&mut m.query_address, &mut m.query_port),
    };
    *port_field = port;
    match entry.peer.ip() {
        IpAddr::V4(a) => {
            m.socket_family = Some(1);
            set(address, &a.octets());
        }
        IpAddr::V6(a) => {
            m.socket_family = Some(2);
            set(address, &a.octets());
        }
    }
    m.query_time_sec = Some(entry.query_time.as_secs());
    m.query_time_nsec = Some(entry.query_time.subsec_nanos());
    if kind.is_query() {
        set(&mut m.query_message, message);
    } else {
        m.response_time_sec = Some(entry.response_time.as_secs());
        m.response_time_nsec = Some(entry.response_time.subsec_nanos());
        set(&mut m.response_message, message);
    }
    if zone.is_empty() {
        m.query_zone = None;
    } else {
        set(&mut m.query_zone, zone);
    }
}

/// The writer thread: [`write_rounds`], then, if a write failed, logging stops.
fn write_frames(shared: &Shared, mut out: Box<dyn Write + Send>, envelope: &Envelope) {
    if let Err(e) = write_rounds(shared, &mut out, envelope) {
        shared.failed.store(true, Ordering::Relaxed);
        tracing::warn!(error = %e, "dnstap: writing failed; logging stops");
    }
}

/// Every round, swaps each staging buffer for the spare one, encodes the frames of what it
/// took into a buffer and writes that once it holds [`WRITE_BUFFER`] bytes. When no staging
/// buffer was a quarter full, writes what is left, flushes and sleeps [`POLL_INTERVAL`] (or
/// until [`Dnstap::close`] wakes it). After close, a last round takes what was staged before
/// it, then the STOP frame ends the stream. A socket is closed after STOP without waiting
/// for the collector's FINISH.
fn write_rounds(shared: &Shared, out: &mut dyn Write, envelope: &Envelope) -> std::io::Result<()> {
    let mut spare = Batch::default();
    let mut frames = Frames::new(envelope);
    let mut buf = Vec::with_capacity(WRITE_BUFFER + 2 * (1 << 16));
    loop {
        let closing = shared.closed.load(Ordering::Acquire);
        let mut busy = false;
        for shard in &shared.shards {
            std::mem::swap(&mut *lock(shard), &mut spare);
            busy |= spare.bytes.len() > BUFFER_BYTES / 4;
            let mut at = 0;
            let mut take = |len: u32| {
                let bytes = &spare.bytes[at..at + len as usize];
                at += len as usize;
                bytes
            };
            for entry in &spare.entries {
                let zone = take(entry.zone_len);
                let query = take(entry.query_len);
                let response = take(entry.response_len);
                let (query_kind, response_kind) = entry.role.kinds();
                if entry.parts != Parts::Response {
                    frames.encode(&mut buf, query_kind, entry, zone, query)?;
                }
                if entry.parts != Parts::Query {
                    frames.encode(&mut buf, response_kind, entry, zone, response)?;
                }
                if buf.len() >= WRITE_BUFFER {
                    out.write_all(&buf)?;
                    buf.clear();
                }
            }
            spare.entries.clear();
            spare.bytes.clear();
        }
        if closing {
            break;
        }
        if !busy {
            out.write_all(&buf)?;
            buf.clear();
            out.flush()?;
            std::thread::park_timeout(POLL_INTERVAL);
        }
    }
    out.write_all(&buf)?;
    out.write_all(&control_frame(CONTROL_STOP, false))?;
    out.flush()
}

/// The `socket_protocol` number of `transport` (`dnstap.proto`'s `SocketProtocol`).
fn protocol(transport: Transport) -> i32 {
    match transport {
        Transport::Udp => 1,
        Transport::Tcp => 2,
        Transport::Dot => 3,
        Transport::Doh => 4,
        Transport::Doq => 7,
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

    fn peer_octets(peer: SocketAddr) -> Vec<u8> {
        match peer.ip() {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        }
    }

    #[test]
    fn a_file_holds_start_the_frames_in_order_and_stop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.fstrm");
        let tap = Dnstap::open(Sink::File(path.clone()), "ns1", "pqdns 0.1", 16).unwrap();
        let peer: SocketAddr = "[2001:db8::1]:5300".parse().unwrap();
        let before = since_epoch(SystemTime::now());
        tap.log_exchange(Role::Auth, Transport::Doq, peer, b"query", b"response");
        let after = since_epoch(SystemTime::now());
        let authority: SocketAddr = "192.0.2.53:853".parse().unwrap();
        let sent = SystemTime::UNIX_EPOCH + Duration::new(1_700_000_000, 5);
        let received = sent + Duration::from_millis(30);
        let zone = b"\x07example\x00";
        tap.log_resolver_query(Transport::Dot, authority, zone, b"upstream q", sent);
        tap.log_resolver_response(
            Transport::Dot,
            authority,
            zone,
            sent,
            b"upstream r",
            received,
        );
        tap.close();
        tap.log_exchange(Role::Auth, Transport::Udp, peer, b"after", b"close");
        let bytes = std::fs::read(&path).unwrap();
        // START with the content type, as fstrm writes it.
        assert_eq!(&bytes[..12], &[0, 0, 0, 0, 0, 0, 0, 34, 0, 0, 0, 2]);
        assert_eq!(&bytes[20..42], CONTENT_TYPE);
        let (controls, frames) = read_file(&bytes);
        assert_eq!(controls, vec![CONTROL_START, CONTROL_STOP]);
        assert_eq!(frames.len(), 4, "nothing after close");
        let q = frames[0].message.as_ref().unwrap();
        assert_eq!(
            (q.r#type, q.socket_family, q.socket_protocol),
            (1, Some(2), Some(7))
        );
        assert_eq!(q.query_address.as_deref(), Some(&peer_octets(peer)[..]));
        assert_eq!(q.query_port, Some(5300));
        assert_eq!(q.query_message.as_deref(), Some(&b"query"[..]));
        assert!(q.response_message.is_none());
        // The coarse clock lags by at most its resolution (a timer tick; 100 ms is generous).
        let logged = Duration::new(q.query_time_sec.unwrap(), q.query_time_nsec.unwrap());
        let tick = Duration::from_millis(100);
        assert!(
            before <= logged + tick && logged <= after,
            "{before:?} {logged:?} {after:?}"
        );
        let r = frames[1].message.as_ref().unwrap();
        assert_eq!(r.r#type, 2);
        assert_eq!(r.response_message.as_deref(), Some(&b"response"[..]));
        assert_eq!(frames[1].identity.as_deref(), Some(&b"ns1"[..]));
        // The resolver's query and response: the authority is the responder, the zone and
        // both times are there.
        let (rq, rr) = (
            frames[2].message.as_ref().unwrap(),
            frames[3].message.as_ref().unwrap(),
        );
        assert_eq!((rq.r#type, rr.r#type), (3, 4));
        for m in [rq, rr] {
            assert_eq!((m.socket_family, m.socket_protocol), (Some(1), Some(3)));
            assert_eq!(m.response_address.as_deref(), Some(&[192, 0, 2, 53][..]));
            assert_eq!(m.response_port, Some(853));
            assert!(m.query_address.is_none() && m.query_port.is_none());
            assert_eq!(m.query_zone.as_deref(), Some(&zone[..]));
            assert_eq!(
                (m.query_time_sec, m.query_time_nsec),
                (Some(1_700_000_000), Some(5))
            );
        }
        assert_eq!(rq.query_message.as_deref(), Some(&b"upstream q"[..]));
        assert!(rq.response_message.is_none() && rq.response_time_sec.is_none());
        assert_eq!(rr.response_message.as_deref(), Some(&b"upstream r"[..]));
        assert_eq!(
            (rr.response_time_sec, rr.response_time_nsec),
            (Some(1_700_000_000), Some(30_000_005))
        );
        assert!(rr.query_message.is_none());
        assert_eq!(tap.dropped(), 0);
    }

    fn envelope() -> Envelope {
        Envelope {
            identity: b"id".to_vec(),
            version: b"v".to_vec(),
        }
    }

    /// The frame's protobuf, without the Frame Streams length (which it checks).
    fn encoded(kind: Kind, entry: &Entry, zone: &[u8], message: &[u8]) -> Vec<u8> {
        let mut buf = Vec::new();
        Frames::new(&envelope())
            .encode(&mut buf, kind, entry, zone, message)
            .unwrap();
        let len = u32::from_be_bytes(buf[..4].try_into().unwrap()) as usize;
        assert_eq!(len, buf.len() - 4, "the frame's length");
        buf.split_off(4)
    }

    fn entry(role: Role, transport: Transport, peer: &str) -> Entry {
        Entry {
            role,
            parts: Parts::Both,
            transport,
            peer: peer.parse().unwrap(),
            query_time: Duration::new(1_609_664_398, 355_231_260),
            response_time: Duration::new(1_609_664_399, 7),
            zone_len: 0,
            query_len: 0,
            response_len: 0,
        }
    }

    /// The known encoding of one frame: field tags and wire types as `dnstap.proto` defines
    /// them (fixed32 nanoseconds, field 14 for the message, 15 for the type), and the
    /// `socket_protocol` numbers of every transport (BIND 9.18's `dnstap-read` prints only
    /// UDP and TCP).
    #[test]
    fn the_protobuf_encoding_follows_the_schema() {
        let e = entry(Role::Client, Transport::Udp, "10.0.0.210:55142");
        let expected: Vec<u8> = [
            &[10, 2, b'i', b'd', 18, 1, b'v'][..],
            &[
                114, 30, 8, 5, 16, 1, 24, 1, 34, 4, 10, 0, 0, 210, 48, 230, 174, 3,
            ],
            &[64, 142, 143, 198, 255, 5, 77, 28, 102, 44, 21, 82, 1, 0xab],
            &[120, 1],
        ]
        .concat();
        assert_eq!(encoded(Kind::ClientQuery, &e, &[], &[0xab]), expected);
        for (transport, number) in [
            (Transport::Udp, 1),
            (Transport::Tcp, 2),
            (Transport::Dot, 3),
            (Transport::Doh, 4),
            (Transport::Doq, 7),
        ] {
            let e = entry(Role::Client, transport, "10.0.0.210:55142");
            let bytes = encoded(Kind::ClientQuery, &e, &[], &[0xab]);
            // socket_protocol: tag 24, then the number.
            assert_eq!(&bytes[13..15], &[24, number], "{transport:?}");
        }
    }

    #[test]
    fn a_full_staging_buffer_drops_and_counts_instead_of_waiting() {
        let dir = tempfile::tempdir().unwrap();
        // A collector that accepts and then never reads: the socket buffer fills, the writer
        // blocks, the staging buffer fills.
        let path = dir.path().join("collector.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let (done, finished) = std::sync::mpsc::channel::<()>();
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
        // At most 4 exchanges staged, and what the writer took cannot pass the socket.
        assert!(tap.dropped() >= 2 * 150, "{}", tap.dropped());
        assert_eq!(tap.dropped() % 2, 0, "two messages per exchange");
        done.send(()).unwrap();
        collector.join().unwrap();
    }

    /// A staging buffer holds at most [`BUFFER_BYTES`] of messages: beyond, messages are
    /// dropped even under the entry bound.
    #[test]
    fn a_staging_buffer_is_bounded_in_bytes() {
        let shared = Shared {
            shards: Default::default(),
            max_entries: usize::MAX,
            dropped: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            failed: AtomicBool::new(false),
        };
        let e = entry(Role::Auth, Transport::Udp, "127.0.0.1:1");
        let message = vec![0u8; 65_535];
        let fits = BUFFER_BYTES / (2 * message.len());
        for _ in 0..fits + 3 {
            shared.stage(e, &[], &message, &message);
        }
        assert_eq!(shared.dropped.load(Ordering::Relaxed), 6);
        let shard = SHARD.with(|s| *s);
        let batch = lock(&shared.shards[shard]);
        assert_eq!(batch.entries.len(), fits);
        assert!(batch.bytes.capacity() <= BUFFER_BYTES);
    }
}
