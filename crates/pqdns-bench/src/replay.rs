//! `pqdns-bench replay`: the SIDN Labs method for the cost of TCP on an authoritative server
//! (`sidn-tcp-impact-on-authoritative-servers`): replay a query log with its relative timing,
//! sending every query over UDP and then, for X % of them, the same query again over a new TCP
//! connection (what a resolver does after a truncated answer), for X = 0, 10, …, 100, and once
//! with every query over TCP only. The server's CPU time per step (from `/proc/PID/stat`) is
//! fitted with a least-squares line over X; the cut-over point is the X at which UDP-then-TCP
//! costs as much as TCP-only.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::Semaphore;

use crate::proc_stat::Sampler;
use crate::query_source::{entries, parse_query, query_wire, QueryOptions, QuerySpec};

/// Most queries in flight during a replay (bounds sockets and memory).
pub const MAX_IN_FLIGHT: usize = 2000;
/// Timeout of each UDP or TCP exchange.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(2);

/// One logged query: offset from the log's start and the query.
#[derive(Clone, Debug, PartialEq)]
pub struct LoggedQuery {
    /// Offset from the first query, seconds.
    pub at: f64,
    /// The query.
    pub query: QuerySpec,
}

/// Parses a text query log. Lines are `TIME NAME TYPE` (TIME in seconds, any origin; offsets
/// are taken relative to the first line) or, without times, `NAME TYPE` (dnsperf format),
/// which are spread evenly at `rate` queries per second. `#` comments and blank lines are
/// skipped; at most `limit` queries are kept.
///
/// # Errors
/// A message naming the first bad line, or an empty log.
pub fn parse_log(text: &str, rate: f64, limit: usize) -> Result<Vec<LoggedQuery>, String> {
    let mut out = Vec::new();
    let mut first: Option<f64> = None;
    for (n, line) in entries(text).take(limit) {
        let words: Vec<&str> = line.split_ascii_whitespace().collect();
        let bad = |e: String| format!("line {n}: {e}");
        let (at, name, qtype) = match words[0].parse::<f64>() {
            Ok(t) if words.len() >= 2 && t.is_finite() => {
                let t0 = *first.get_or_insert(t);
                (t - t0, words[1], words.get(2).copied())
            }
            _ => {
                if !(rate > 0.0 && rate.is_finite()) {
                    return Err(bad("no time stamp and no positive --rate".into()));
                }
                (out.len() as f64 / rate, words[0], words.get(1).copied())
            }
        };
        if at < 0.0 {
            return Err(bad("time goes backwards".into()));
        }
        out.push(LoggedQuery {
            at,
            query: parse_query(name, qtype).map_err(bad)?,
        });
    }
    if out.is_empty() {
        return Err("the log holds no queries".into());
    }
    Ok(out)
}

/// True if query `index` is one of the `tcp_percent` % retried over TCP: an even spread
/// (Bresenham), so exactly round(N × X / 100) of N queries are chosen and the TCP retries are
/// spread over the whole replay.
pub fn retried_over_tcp(index: usize, tcp_percent: u32) -> bool {
    let p = u64::from(tcp_percent.min(100));
    let i = index as u64;
    ((i + 1) * p + 50) / 100 > (i * p + 50) / 100
}

/// Where the server answers UDP and TCP (usually the same address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoints {
    /// UDP address.
    pub udp: SocketAddr,
    /// TCP address.
    pub tcp: SocketAddr,
}

/// One replay step.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Step {
    /// Percent of queries retried over TCP after UDP; `None` for the TCP-only step.
    pub tcp_percent: Option<u32>,
    /// Queries in the log.
    pub queries: u64,
    /// UDP exchanges answered.
    pub udp_answered: u64,
    /// TCP exchanges answered.
    pub tcp_answered: u64,
    /// Exchanges that failed or timed out.
    pub failures: u64,
    /// Wall time of the step, seconds.
    pub wall_seconds: f64,
    /// Server CPU time during the step, seconds.
    pub server_cpu_seconds: f64,
    /// Server CPU time per logged query, µs.
    pub server_cpu_us_per_query: f64,
}

/// A least-squares line y = intercept + slope × x.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct LinearFit {
    /// Value at x = 0.
    pub intercept: f64,
    /// Change per unit x.
    pub slope: f64,
    /// Coefficient of determination (1 = every point on the line).
    pub r_squared: f64,
}

/// Ordinary least squares over `points`; `None` with fewer than two distinct x values.
pub fn linear_fit(points: &[(f64, f64)]) -> Option<LinearFit> {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if points.len() < 2 || sxx == 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let ss_res: f64 = points
        .iter()
        .map(|p| (p.1 - intercept - slope * p.0).powi(2))
        .sum();
    let ss_tot: f64 = points.iter().map(|p| (p.1 - my).powi(2)).sum();
    let r_squared = if ss_tot > 0.0 {
        1.0 - ss_res / ss_tot
    } else {
        1.0
    };
    Some(LinearFit {
        intercept,
        slope,
        r_squared,
    })
}

/// The whole replay result.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ReplayReport {
    /// Steps in the order run, the TCP-only step last.
    pub steps: Vec<Step>,
    /// Fit of server CPU µs per query over the TCP percentage.
    pub fit: Option<LinearFit>,
    /// Percentage of UDP-then-TCP queries at which the server spends as much CPU as with
    /// TCP only (may lie outside 0–100: then switching everything to TCP never pays, or
    /// always does).
    pub cut_over_percent: Option<f64>,
}

async fn udp_exchange(server: SocketAddr, wire: &[u8]) -> std::io::Result<()> {
    let socket = UdpSocket::bind(("127.0.0.1", 0)).await?;
    socket.connect(server).await?;
    socket.send(wire).await?;
    let mut buf = vec![0u8; crate::load::MAX_MESSAGE];
    loop {
        let n = socket.recv(&mut buf).await?;
        if n >= 2 && buf[..2] == wire[..2] {
            return Ok(());
        }
    }
}

async fn tcp_exchange(server: SocketAddr, wire: &[u8]) -> Result<(), String> {
    let mut stream = TcpStream::connect(server)
        .await
        .map_err(|e| e.to_string())?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    crate::load::length_prefixed(&mut stream, wire)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Replays `log` once against `server` (UDP and TCP addresses) with `tcp_percent`
/// of the queries retried over TCP, or all over TCP only when `tcp_percent` is `None`;
/// `speed` > 1 replays faster than logged. Samples `server_pid`'s CPU time.
pub async fn step(
    server: Endpoints,
    server_pid: u32,
    log: &[LoggedQuery],
    tcp_percent: Option<u32>,
    speed: f64,
    edns: QueryOptions,
) -> Step {
    let sampler = Sampler::start(server_pid, Duration::from_millis(100));
    let limit = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(log.len());
    for (i, q) in log.iter().enumerate() {
        let at = start + Duration::from_secs_f64(q.at / speed.max(1e-6));
        tokio::time::sleep_until(at.into()).await;
        let Ok(permit) = limit.clone().acquire_owned().await else {
            break;
        };
        let wire = query_wire(&q.query, i as u16, edns);
        tasks.push(tokio::spawn(async move {
            let _permit = permit;
            let (mut udp, mut tcp, mut failed) = (0u64, 0u64, 0u64);
            let retry = match tcp_percent {
                Some(p) => {
                    match tokio::time::timeout(EXCHANGE_TIMEOUT, udp_exchange(server.udp, &wire))
                        .await
                    {
                        Ok(Ok(())) => udp += 1,
                        _ => failed += 1,
                    }
                    retried_over_tcp(i, p)
                }
                None => true,
            };
            if retry {
                match tokio::time::timeout(EXCHANGE_TIMEOUT, tcp_exchange(server.tcp, &wire)).await
                {
                    Ok(Ok(())) => tcp += 1,
                    _ => failed += 1,
                }
            }
            (udp, tcp, failed)
        }));
    }
    let mut out = Step {
        tcp_percent,
        queries: log.len() as u64,
        ..Step::default()
    };
    for t in tasks {
        let (u, t, f) = t.await.unwrap_or((0, 0, 1));
        out.udp_answered += u;
        out.tcp_answered += t;
        out.failures += f;
    }
    out.wall_seconds = start.elapsed().as_secs_f64();
    out.server_cpu_seconds = sampler.map_or(0.0, |s| s.finish().cpu_seconds);
    out.server_cpu_us_per_query = out.server_cpu_seconds * 1e6 / log.len().max(1) as f64;
    out
}

/// Runs every step (`percents`, then TCP-only), fits the line and finds the cut-over.
pub async fn run(
    server: Endpoints,
    server_pid: u32,
    log: &[LoggedQuery],
    percents: &[u32],
    speed: f64,
    edns: QueryOptions,
) -> ReplayReport {
    let mut steps = Vec::new();
    for &p in percents {
        steps.push(step(server, server_pid, log, Some(p), speed, edns).await);
    }
    let tcp_only = step(server, server_pid, log, None, speed, edns).await;
    let points: Vec<(f64, f64)> = steps
        .iter()
        .filter_map(|s| {
            s.tcp_percent
                .map(|p| (f64::from(p), s.server_cpu_us_per_query))
        })
        .collect();
    let fit = linear_fit(&points);
    let cut_over_percent = fit
        .filter(|f| f.slope != 0.0)
        .map(|f| (tcp_only.server_cpu_us_per_query - f.intercept) / f.slope);
    steps.push(tcp_only);
    ReplayReport {
        steps,
        fit,
        cut_over_percent,
    }
}

impl ReplayReport {
    /// CSV: one line per step.
    pub fn to_csv(&self) -> String {
        let mut s = String::from(
            "tcp_percent,queries,udp_answered,tcp_answered,failures,wall_s,server_cpu_s,server_cpu_us_per_query\n",
        );
        for st in &self.steps {
            s.push_str(&format!(
                "{},{},{},{},{},{:.3},{:.3},{:.2}\n",
                st.tcp_percent
                    .map_or("tcp-only".to_string(), |p| p.to_string()),
                st.queries,
                st.udp_answered,
                st.tcp_answered,
                st.failures,
                st.wall_seconds,
                st.server_cpu_seconds,
                st.server_cpu_us_per_query
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_the_asked_share_is_retried_and_spread_out() {
        for p in [0, 10, 25, 33, 50, 90, 100] {
            let n = (0..1000).filter(|&i| retried_over_tcp(i, p)).count();
            assert_eq!(n, (1000 * p as usize + 50) / 100, "{p} %");
        }
        // 50 %: every other query, not the first half.
        let first: Vec<bool> = (0..4).map(|i| retried_over_tcp(i, 50)).collect();
        assert_eq!(first.iter().filter(|&&b| b).count(), 2);
    }

    #[test]
    fn fit_of_known_points() {
        let f = linear_fit(&[(0.0, 10.0), (50.0, 35.0), (100.0, 60.0)]).unwrap();
        assert!((f.slope - 0.5).abs() < 1e-12 && (f.intercept - 10.0).abs() < 1e-12);
        assert!((f.r_squared - 1.0).abs() < 1e-12);
        let noisy = linear_fit(&[(0.0, 0.0), (1.0, 2.0), (2.0, 1.0), (3.0, 3.0)]).unwrap();
        // Hand-computed: slope 0.8, intercept 0.3, R² = 0.64.
        assert!((noisy.slope - 0.8).abs() < 1e-12 && (noisy.intercept - 0.3).abs() < 1e-12);
        assert!((noisy.r_squared - 0.64).abs() < 1e-12);
        assert!(linear_fit(&[(1.0, 1.0), (1.0, 2.0)]).is_none());
    }

    #[test]
    fn logs_with_and_without_times() {
        let timed = parse_log("100.5 www.example.com A\n101.0 example.com SOA\n", 0.0, 10).unwrap();
        assert_eq!((timed[0].at, timed[1].at), (0.0, 0.5));
        let untimed = parse_log("a.example A\nb.example AAAA\n", 4.0, 10).unwrap();
        assert_eq!(untimed[1].at, 0.25);
        assert!(parse_log("a.example A\n", 0.0, 10).is_err());
        assert!(parse_log("5 a.example A\n4 b.example A\n", 0.0, 10).is_err());
    }
}
