//! Log output of the daemons (pqdns-server, pqdns-resolver) on standard error, through
//! `tracing-subscriber`:
//!
//! - [`LogFormat::Text`]: one line per event; with ANSI colours only on a terminal, and
//!   without a timestamp when standard error is the systemd journal (`JOURNAL_STREAM` names
//!   its device and inode, systemd.exec(5)), which stamps every line itself.
//! - [`LogFormat::Json`]: one JSON object per line (timestamp, level, target, fields), for log
//!   shippers.
//!
//! The filter is the user's (`--log-level`) plus [`crate::LOG_DIRECTIVES`] for the targets it
//! does not name.

use std::io::IsTerminal;
use std::str::FromStr;

use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

impl FromStr for LogFormat {
    type Err = String;

    /// `text` or `json`.
    fn from_str(s: &str) -> Result<LogFormat, String> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(format!("log format {s:?} is neither \"text\" nor \"json\"")),
        }
    }
}

/// Installs the global log subscriber: `filter` (a level or `tracing` directives) in `format`
/// on standard error.
///
/// # Errors
/// A message naming the filter when it does not parse.
pub fn init(filter: &str, format: LogFormat) -> Result<(), String> {
    let mut env_filter =
        EnvFilter::try_new(filter).map_err(|e| format!("--log-level {filter:?}: {e}"))?;
    // Dependencies that log per remote event (h2 on HTTP/2 reset floods) are quietened unless
    // the filter names them; pqdns-net counts and summarizes those events instead.
    for directive in crate::LOG_DIRECTIVES {
        let target = directive.split('=').next().unwrap_or_default();
        if !filter.contains(target) {
            if let Ok(d) = directive.parse() {
                env_filter = env_filter.add_directive(d);
            }
        }
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(env_filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text if stderr_is_journal() => builder.with_ansi(false).without_time().init(),
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
    }
    Ok(())
}

/// Whether standard error is the stream systemd connected to the journal: `JOURNAL_STREAM`
/// holds `DEVICE:INODE` of that stream (systemd.exec(5)), which a child whose standard error
/// was redirected no longer matches.
fn stderr_is_journal() -> bool {
    let Some(value) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Ok(stat) = nix::sys::stat::fstat(std::io::stderr()) else {
        return false;
    };
    journal_stream_is(&value.to_string_lossy(), stat.st_dev, stat.st_ino)
}

/// Whether a `JOURNAL_STREAM` value names device `dev` and inode `ino`.
fn journal_stream_is(value: &str, dev: u64, ino: u64) -> bool {
    value
        .split_once(':')
        .is_some_and(|(d, i)| d.parse() == Ok(dev) && i.parse() == Ok(ino))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_stream_names_device_and_inode() {
        assert!(journal_stream_is("8:1234", 8, 1234));
        assert!(!journal_stream_is("8:1234", 8, 1235));
        assert!(!journal_stream_is("9:1234", 8, 1234));
        assert!(!journal_stream_is("garbage", 8, 1234));
        assert!(!journal_stream_is("", 0, 0));
    }

    #[test]
    fn formats_parse() {
        assert_eq!("text".parse(), Ok(LogFormat::Text));
        assert_eq!("json".parse(), Ok(LogFormat::Json));
        assert!("JSON".parse::<LogFormat>().is_err());
    }
}
