//! CPU time and memory of processes, from `getrusage(2)` (this process) and `/proc/PID/stat`,
//! `/proc/PID/status`, `/proc/meminfo` (any process; proc(5)). A [`Sampler`] thread reads a
//! process every interval to find its peak CPU utilisation and peak resident set size during a
//! run, the way the PQC-DNS study reports "server CPU (%)" (peak sampled utilisation divided by
//! the number of cores) and "memory (%)" (resident memory over total memory).

#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// User + system CPU time of this process (all threads) so far, from `getrusage(RUSAGE_SELF)`
/// (microsecond resolution).
pub fn self_cpu_time() -> Duration {
    // SAFETY: getrusage writes one `rusage` into the zeroed struct we own; no pointers escape.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return Duration::ZERO;
        }
        usage
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Clock ticks per second of `/proc/PID/stat` times (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf takes an integer name and has no memory effects.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as u64
    } else {
        100
    }
}

/// Online CPU cores (divisor of the CPU percentages, as in the study).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// User + system CPU time of process `pid` (all threads), from fields 14 and 15 of
/// `/proc/PID/stat`; `None` if the process is gone or the file does not parse.
pub fn process_cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces: split after it.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // `rest` starts at field 3 (state), so utime (14) and stime (15) are at 11 and 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let ticks = utime + stime;
    let hz = clock_ticks_per_second();
    Some(Duration::from_secs(ticks / hz) + Duration::from_nanos((ticks % hz) * 1_000_000_000 / hz))
}

fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Resident set size of `pid` now (`VmRSS`), KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmRSS:")
}

/// Peak resident set size of `pid` since it started (`VmHWM`), KiB.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmHWM:")
}

/// Total memory of the machine (`MemTotal` in `/proc/meminfo`), KiB.
pub fn mem_total_kib() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// What a [`Sampler`] saw of one process over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct ProcessUsage {
    /// CPU time used during the run (user + system, all threads), seconds.
    pub cpu_seconds: f64,
    /// CPU time ÷ wall time ÷ cores × 100: average utilisation of the whole machine, percent.
    pub cpu_pct_avg: f64,
    /// Highest utilisation over one sampling interval ÷ cores × 100, percent (the study's
    /// definition of CPU %). 0 when the run was shorter than one interval.
    pub cpu_pct_peak: f64,
    /// Highest resident set size sampled during the run, KiB.
    pub rss_peak_kib: u64,
    /// `rss_peak_kib` ÷ `MemTotal` × 100, percent (the study's memory %).
    pub mem_pct_peak: f64,
}

/// Samples one process's CPU time and RSS every interval on a background thread.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<(f64, u64)>,
    pid: u32,
    start_cpu: Duration,
    start: Instant,
}

impl Sampler {
    /// Starts sampling `pid` every `interval`; `None` if `/proc/PID/stat` cannot be read.
    pub fn start(pid: u32, interval: Duration) -> Option<Sampler> {
        let start_cpu = process_cpu_time(pid)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let (mut peak_util, mut peak_rss) = (0.0f64, rss_kib(pid).unwrap_or(0));
            let (mut last_cpu, mut last_t) = (start_cpu, Instant::now());
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(interval);
                let (Some(cpu), now) = (process_cpu_time(pid), Instant::now()) else {
                    break;
                };
                let wall = now - last_t;
                if wall >= interval / 2 {
                    let util = (cpu.saturating_sub(last_cpu)).as_secs_f64() / wall.as_secs_f64();
                    peak_util = peak_util.max(util);
                    (last_cpu, last_t) = (cpu, now);
                }
                peak_rss = peak_rss.max(rss_kib(pid).unwrap_or(0));
            }
            (peak_util, peak_rss)
        });
        Some(Sampler {
            stop,
            thread,
            pid,
            start_cpu,
            start: Instant::now(),
        })
    }

    /// Stops sampling and summarises the run.
    pub fn finish(self) -> ProcessUsage {
        let wall = self.start.elapsed().as_secs_f64();
        let end_cpu = process_cpu_time(self.pid).unwrap_or(self.start_cpu);
        self.stop.store(true, Ordering::Relaxed);
        let (peak_util, peak_rss) = self.thread.join().unwrap_or((0.0, 0));
        let peak_rss = peak_rss.max(rss_kib(self.pid).unwrap_or(0));
        let cores = cores() as f64;
        let cpu_seconds = end_cpu.saturating_sub(self.start_cpu).as_secs_f64();
        ProcessUsage {
            cpu_seconds,
            cpu_pct_avg: if wall > 0.0 {
                cpu_seconds / wall / cores * 100.0
            } else {
                0.0
            },
            cpu_pct_peak: peak_util / cores * 100.0,
            rss_peak_kib: peak_rss,
            mem_pct_peak: mem_total_kib()
                .filter(|&t| t > 0)
                .map_or(0.0, |t| peak_rss as f64 / t as f64 * 100.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(d: Duration) -> u64 {
        let start = Instant::now();
        let mut x = 0u64;
        while start.elapsed() < d {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        x
    }

    /// A busy loop of 400 ms wall time is at most 400 ms of CPU, and at least some of it even
    /// when other tests share the cores. Other tests of this binary run in parallel and add
    /// their CPU to the process, so the upper bound allows every core for the whole wall time;
    /// the bounds still catch unit errors (ticks vs seconds, µs vs s).
    #[test]
    fn getrusage_and_proc_stat_see_a_busy_loop() {
        let before = self_cpu_time();
        let before_proc = process_cpu_time(std::process::id()).unwrap();
        let start = Instant::now();
        busy(Duration::from_millis(400));
        let used = (self_cpu_time() - before).as_secs_f64();
        let used_proc = (process_cpu_time(std::process::id()).unwrap() - before_proc).as_secs_f64();
        let most = start.elapsed().as_secs_f64() * cores() as f64 + 0.02;
        assert!(
            (0.05..=most).contains(&used),
            "getrusage: {used} s, at most {most}"
        );
        assert!(
            (0.05..=most).contains(&used_proc),
            "/proc stat: {used_proc} s"
        );
    }

    fn state(pid: u32) -> Option<char> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat[stat.rfind(')')? + 2..].chars().next()
    }

    /// A separate busy process (a shell loop), sampled until it exits (a zombie keeps its
    /// times until reaped): its CPU time is at most its wall time, its peak at most one core.
    #[test]
    fn sampler_sees_a_busy_child_process() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .spawn()
            .unwrap();
        let start = Instant::now();
        let sampler = Sampler::start(child.id(), Duration::from_millis(50)).unwrap();
        // Bounded: the loop takes well under a second; give up after 30 s.
        while state(child.id()) != Some('Z') && start.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let usage = sampler.finish();
        let wall = start.elapsed().as_secs_f64();
        child.wait().unwrap();
        assert!(
            usage.cpu_seconds > 0.0 && usage.cpu_seconds <= wall + 0.02,
            "{usage:?} {wall}"
        );
        let one_core = 100.0 / cores() as f64;
        assert!(usage.cpu_pct_peak <= one_core * 1.6, "{usage:?}");
        assert!(
            usage.rss_peak_kib > 0 && usage.mem_pct_peak < 1.0,
            "{usage:?}"
        );
    }

    #[test]
    fn gone_process_reads_as_none() {
        assert!(process_cpu_time(u32::MAX).is_none());
        assert!(Sampler::start(u32::MAX, Duration::from_millis(10)).is_none());
    }
}
