//! `pqdns-bench soak`: many long-lived DoT (RFC 7858) and DoH (RFC 8484, POST over HTTP/2)
//! clients against one server for minutes, with the server's memory and descriptors sampled
//! every second: the check that connection state stays bounded.
//!
//! Clients alternate DoT, DoH; by index, half are *steady* (one connection, a query every 2–6
//! s, under the usual 10 s idle timeout), three in ten are *idle* (connect, ask once, stay until
//! the server closes the idle connection, wait 10–30 s, again) and two in ten *reconnect*
//! (connect, ask 1–3 times, close, wait 20–60 s, again; TLS sessions are resumed). Client `i`
//! connects from a loopback address of its own /24 shared by [`SoakConfig::per_prefix`]
//! clients, so per-prefix connection caps see many clients. Starts are spread over
//! [`SoakConfig::ramp`].
//!
//! Each second gives a row ([`Sample`]): answers, errors, timeouts, handshakes, connections
//! open on the client side, and per sampled process its RSS (`VmRSS`) and open descriptors.
//! Latency is per query on an open connection (connect and handshake not included).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::Full;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::client::TlsStream;

use crate::load::{
    doh_exchange, h2_handshake, length_prefixed, server_name, ExchangeError, H2Sender,
};
use crate::proc_stat::rss_kib;
use crate::query_source::{query_wire, QueryOptions, QuerySpec};
use crate::tls_client::{client_config, TlsClientError, TlsClientOptions};

/// How long one query, connect or handshake may take before it counts as a timeout.
pub const SOAK_TIMEOUT: Duration = Duration::from_secs(5);
/// Queries slower than this are counted apart (the bound for cached names).
pub const SLOW: Duration = Duration::from_secs(1);

/// What a soak run does.
#[derive(Clone, Debug)]
pub struct SoakConfig {
    /// DoT server address.
    pub dot: SocketAddr,
    /// DoH server address (HTTPS, path `/dns-query`).
    pub doh: SocketAddr,
    /// Concurrent clients.
    pub clients: usize,
    /// Length of the run.
    pub duration: Duration,
    /// Time over which client starts are spread.
    pub ramp: Duration,
    /// Clients per source /24 (loopback addresses 127.1.0.0 and up).
    pub per_prefix: usize,
    /// Questions asked in turn.
    pub queries: Vec<QuerySpec>,
    /// EDNS and header bits of the queries.
    pub edns: QueryOptions,
    /// TLS client settings (trust, groups).
    pub tls: TlsClientOptions,
    /// Processes sampled each second: (label, pid).
    pub processes: Vec<(String, u32)>,
}

/// One second of a soak run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Sample {
    /// Seconds since the start.
    pub second: u64,
    /// Answers received in that second.
    pub answers: u64,
    /// Failed connects, handshakes and queries (not timeouts), answers with an RCODE other
    /// than NOERROR or NXDOMAIN among them.
    pub errors: u64,
    /// Connects, handshakes or queries that took over [`SOAK_TIMEOUT`].
    pub timeouts: u64,
    /// TLS handshakes completed.
    pub handshakes: u64,
    /// Client connections open at the end of the second.
    pub open: u64,
    /// Per sampled process: RSS in KiB and open descriptors (0 if unreadable).
    pub processes: Vec<(u64, u64)>,
}

/// The whole run.
#[derive(Debug, serde::Serialize)]
pub struct SoakReport {
    /// Labels of the sampled processes, in [`Sample::processes`] order.
    pub labels: Vec<String>,
    /// One row per second.
    pub samples: Vec<Sample>,
    /// Answers in all.
    pub answers: u64,
    /// Errors in all.
    pub errors: u64,
    /// Timeouts in all.
    pub timeouts: u64,
    /// Queries slower than [`SLOW`].
    pub slow: u64,
    /// Query latency percentiles (50, 99, 99.9, max), milliseconds.
    pub latency_ms: [f64; 4],
    /// The first few distinct error messages.
    pub error_kinds: Vec<String>,
}

#[derive(Default)]
struct Counters {
    answers: AtomicU64,
    errors: AtomicU64,
    timeouts: AtomicU64,
    handshakes: AtomicU64,
    open: AtomicU64,
    slow: AtomicU64,
}

struct Soak {
    cfg: SoakConfig,
    dot_tls: Arc<rustls::ClientConfig>,
    doh_tls: Arc<rustls::ClientConfig>,
    counters: Counters,
    latency: Mutex<Histogram<u64>>,
    error_kinds: Mutex<Vec<String>>,
    deadline: Instant,
}

/// A client's open connection.
enum Conn {
    Dot(Box<TlsStream<TcpStream>>),
    Doh(H2Sender, JoinHandle<()>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Steady,
    Idle,
    Reconnect,
}

/// A small deterministic generator (xorshift64*) for each client's waits.
struct Rng(u64);

impl Rng {
    fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let r = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11;
        lo + (hi - lo).mul_f64(r as f64 / (1u64 << 53) as f64)
    }
}

/// The loopback source address of client `i`: /24s from 127.1.0.0 up, `per_prefix` clients
/// each.
pub fn source_address(i: usize, per_prefix: usize) -> IpAddr {
    let per = per_prefix.clamp(1, 250);
    let prefix = (i / per) as u32 + 256; // 127.1.0.0/24 onwards
    let host = (i % per) as u32 + 1;
    IpAddr::V4(Ipv4Addr::from((127 << 24) | (prefix << 8) | host))
}

impl Soak {
    fn note_error(&self, e: &dyn std::fmt::Display) {
        self.counters.errors.fetch_add(1, Ordering::Relaxed);
        let mut kinds = self.error_kinds.lock().unwrap_or_else(|p| p.into_inner());
        let text = e.to_string();
        if kinds.len() < 20 && !kinds.contains(&text) {
            kinds.push(text);
        }
    }

    /// Runs `f` within [`SOAK_TIMEOUT`], counting a failure or timeout.
    async fn bounded<T, E: std::fmt::Display>(
        &self,
        f: impl std::future::Future<Output = Result<T, E>>,
    ) -> Option<T> {
        match tokio::time::timeout(SOAK_TIMEOUT, f).await {
            Ok(Ok(v)) => Some(v),
            Ok(Err(e)) => {
                self.note_error(&e);
                None
            }
            Err(_) => {
                self.counters.timeouts.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    async fn connect(&self, doh: bool, source: IpAddr) -> Result<Conn, ExchangeError> {
        let target = if doh { self.cfg.doh } else { self.cfg.dot };
        let socket = TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(source, 0))?;
        let tcp = socket.connect(target).await?;
        tcp.set_nodelay(true)?;
        let config = if doh { &self.doh_tls } else { &self.dot_tls };
        let tls = tokio_rustls::TlsConnector::from(Arc::clone(config))
            .connect(server_name(&self.cfg.tls, target)?, tcp)
            .await?;
        self.counters.handshakes.fetch_add(1, Ordering::Relaxed);
        if !doh {
            return Ok(Conn::Dot(Box::new(tls)));
        }
        let (send, task) = h2_handshake(tls).await?;
        Ok(Conn::Doh(send, task))
    }

    async fn exchange(&self, conn: &mut Conn, wire: &[u8]) -> Result<(), ExchangeError> {
        let answer = match conn {
            Conn::Dot(s) => length_prefixed(s.as_mut(), wire).await?,
            Conn::Doh(send, _) => {
                let request = http::Request::post(format!("https://{}/dns-query", self.cfg.doh))
                    .header("content-type", "application/dns-message")
                    .body(Full::new(Bytes::copy_from_slice(wire)))
                    .map_err(|e| ExchangeError::Http(e.to_string()))?;
                doh_exchange(send, request).await?
            }
        };
        if answer.len() < 12 || answer[..2] != wire[..2] || answer[2] & 0x80 == 0 {
            return Err(ExchangeError::BadAnswer("not the answer to the query"));
        }
        // The questions exist or are proven not to (NXDOMAIN); SERVFAIL, REFUSED and the
        // rest are failures, not answers.
        if !matches!(answer[3] & 0x0f, 0 | 3) {
            return Err(ExchangeError::BadAnswer(
                "RCODE other than NOERROR or NXDOMAIN",
            ));
        }
        Ok(())
    }

    /// One query on `conn`; false if it failed (the connection is then dropped).
    async fn ask(&self, conn: &mut Conn, n: u64) -> bool {
        let spec = &self.cfg.queries[(n % self.cfg.queries.len() as u64) as usize];
        let wire = query_wire(spec, (n as u16).wrapping_mul(0x9e37), self.cfg.edns);
        let start = Instant::now();
        if self.bounded(self.exchange(conn, &wire)).await.is_none() {
            return false;
        }
        let took = start.elapsed();
        self.counters.answers.fetch_add(1, Ordering::Relaxed);
        if took > SLOW {
            self.counters.slow.fetch_add(1, Ordering::Relaxed);
        }
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX).max(1);
        self.latency
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .saturating_record(us);
        true
    }

    /// Waits until the server closes `conn` (or the run ends).
    async fn until_closed(&self, conn: &mut Conn) {
        let end = tokio::time::sleep_until(self.deadline.into());
        match conn {
            Conn::Dot(s) => {
                let mut buf = [0u8; 512];
                tokio::select! {
                    _ = end => {}
                    _ = async { while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {} } => {}
                }
            }
            Conn::Doh(_, task) => {
                tokio::select! {
                    _ = end => {}
                    _ = task => {}
                }
            }
        }
    }

    async fn client(self: Arc<Self>, i: usize) {
        let cfg = &self.cfg;
        let start = cfg.ramp.mul_f64(i as f64 / cfg.clients.max(1) as f64);
        tokio::time::sleep(start).await;
        let role = match i % 10 {
            0..=4 => Role::Steady,
            5..=7 => Role::Idle,
            _ => Role::Reconnect,
        };
        let doh = i % 2 == 1;
        let source = source_address(i, cfg.per_prefix);
        let mut rng = Rng((i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut n = i as u64;
        let secs = Duration::from_secs;
        while Instant::now() < self.deadline {
            let Some(mut conn) = self.bounded(self.connect(doh, source)).await else {
                tokio::time::sleep(rng.between(secs(1), secs(3))).await;
                continue;
            };
            self.counters.open.fetch_add(1, Ordering::Relaxed);
            match role {
                Role::Steady => {
                    while Instant::now() < self.deadline && self.ask(&mut conn, n).await {
                        n += 1;
                        tokio::time::sleep(rng.between(secs(2), secs(6))).await;
                    }
                }
                Role::Idle => {
                    if self.ask(&mut conn, n).await {
                        self.until_closed(&mut conn).await;
                    }
                }
                Role::Reconnect => {
                    let times = 1 + (rng.between(secs(0), secs(3)).as_secs());
                    for _ in 0..times {
                        n += 1;
                        if !self.ask(&mut conn, n).await {
                            break;
                        }
                    }
                }
            }
            drop(conn);
            self.counters.open.fetch_sub(1, Ordering::Relaxed);
            let wait = match role {
                Role::Steady => secs(1),
                Role::Idle => rng.between(secs(10), secs(30)),
                Role::Reconnect => rng.between(secs(20), secs(60)),
            };
            tokio::time::sleep(wait).await;
        }
    }
}

/// Open descriptors of `pid` (entries of `/proc/PID/fd`).
fn descriptors(pid: u32) -> Option<u64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64)
}

/// Runs the soak; `row` sees each second's sample as it is taken.
///
/// # Errors
/// A TLS configuration that cannot be built.
pub async fn run(
    cfg: SoakConfig,
    mut row: impl FnMut(&Sample),
) -> Result<SoakReport, TlsClientError> {
    let dot_tls = client_config(&cfg.tls, pqdns_net::tls::ALPN_DOT, true, cfg.clients)?;
    let doh_tls = client_config(&cfg.tls, pqdns_net::tls::ALPN_H2, true, cfg.clients)?;
    let start = Instant::now();
    let soak = Arc::new(Soak {
        deadline: start + cfg.duration,
        cfg,
        dot_tls,
        doh_tls,
        counters: Counters::default(),
        latency: Mutex::new(
            Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds"),
        ),
        error_kinds: Mutex::new(Vec::new()),
    });
    let clients: Vec<JoinHandle<()>> = (0..soak.cfg.clients)
        .map(|i| tokio::spawn(Arc::clone(&soak).client(i)))
        .collect();
    let mut samples = Vec::new();
    let mut last = [0u64; 4];
    let mut tick = tokio::time::interval_at(
        (start + Duration::from_secs(1)).into(),
        Duration::from_secs(1),
    );
    let c = &soak.counters;
    while Instant::now() < soak.deadline {
        tick.tick().await;
        let now =
            [&c.answers, &c.errors, &c.timeouts, &c.handshakes].map(|a| a.load(Ordering::Relaxed));
        let sample = Sample {
            second: start.elapsed().as_secs_f64().round() as u64,
            answers: now[0] - last[0],
            errors: now[1] - last[1],
            timeouts: now[2] - last[2],
            handshakes: now[3] - last[3],
            open: c.open.load(Ordering::Relaxed),
            processes: (soak.cfg.processes.iter())
                .map(|(_, pid)| (rss_kib(*pid).unwrap_or(0), descriptors(*pid).unwrap_or(0)))
                .collect(),
        };
        last = now;
        row(&sample);
        samples.push(sample);
    }
    for client in clients {
        client.abort();
    }
    let latency = soak.latency.lock().unwrap_or_else(|p| p.into_inner());
    let ms = |q: f64| latency.value_at_quantile(q) as f64 / 1000.0;
    let report = SoakReport {
        labels: soak.cfg.processes.iter().map(|(l, _)| l.clone()).collect(),
        samples,
        answers: c.answers.load(Ordering::Relaxed),
        errors: c.errors.load(Ordering::Relaxed),
        timeouts: c.timeouts.load(Ordering::Relaxed),
        slow: c.slow.load(Ordering::Relaxed),
        latency_ms: [ms(0.5), ms(0.99), ms(0.999), latency.max() as f64 / 1000.0],
        error_kinds: soak
            .error_kinds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone(),
    };
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_fill_one_slash_24_after_another() {
        assert_eq!(source_address(0, 25).to_string(), "127.1.0.1");
        assert_eq!(source_address(24, 25).to_string(), "127.1.0.25");
        assert_eq!(source_address(25, 25).to_string(), "127.1.1.1");
        assert_eq!(source_address(9_999, 25).to_string(), "127.2.143.25");
    }
}
