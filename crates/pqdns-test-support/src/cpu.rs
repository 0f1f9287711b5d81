//! The CPU time of the test process, for measurements that compare two ways of doing the same
//! work side by side in one run.

use std::process::Command;

/// This process's CPU time (user + system, all threads; not child processes), seconds, from
/// `/proc/self/stat` (fields 14 and 15, in clock ticks of `getconf CLK_TCK`, usually 10 ms:
/// measure work of many ticks, or many repetitions).
///
/// # Panics
/// Without `/proc` or `getconf` (Linux test machines have both).
pub fn process_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command name, which ends at the last ')'.
    let fields: Vec<&str> = stat[stat.rfind(')').expect("a stat line") + 2..]
        .split(' ')
        .collect();
    let ticks: f64 =
        fields[11].parse::<f64>().expect("utime") + fields[12].parse::<f64>().expect("stime");
    let hz = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .expect("getconf")
        .stdout;
    ticks
        / String::from_utf8_lossy(&hz)
            .trim()
            .parse::<f64>()
            .expect("CLK_TCK")
}
