//! Standard output for the command-line tools and the server, surviving a reader that went
//! away: `pqdns-zone verify big.zone | head -1`, or a server whose log pipe was closed, must
//! not panic (`println!` does, on EPIPE).
//!
//! [`line()`](fn@line) writes one line; after the first failed write, output stops for the rest of the
//! process and every call returns the same [`StdoutGone`]. A closed pipe is the reader's
//! choice and is not an error for a tool's exit status; any other failure (a full disk under
//! `> file`) is, and [`status`] reports it at exit.

use std::fmt;
use std::io::{self, Write};
use std::sync::Mutex;

/// Why standard output no longer takes text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StdoutGone {
    kind: io::ErrorKind,
    message: String,
}

impl StdoutGone {
    /// True if the reader closed the pipe (EPIPE): the usual end of `tool | head`, not a
    /// failure.
    pub fn is_closed_pipe(&self) -> bool {
        self.kind == io::ErrorKind::BrokenPipe
    }
}

impl fmt::Display for StdoutGone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "writing standard output: {}", self.message)
    }
}

impl std::error::Error for StdoutGone {}

static GONE: Mutex<Option<StdoutGone>> = Mutex::new(None);

fn gone() -> std::sync::MutexGuard<'static, Option<StdoutGone>> {
    GONE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Writes `args` and a newline to standard output, flushed.
///
/// # Errors
/// [`StdoutGone`] if this or an earlier write failed; nothing is written then.
pub fn line(args: fmt::Arguments<'_>) -> Result<(), StdoutGone> {
    let mut state = gone();
    if let Some(e) = &*state {
        return Err(e.clone());
    }
    let mut out = io::stdout().lock();
    let result = out
        .write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    result.map_err(|e| {
        let error = StdoutGone {
            kind: e.kind(),
            message: e.to_string(),
        };
        *state = Some(error.clone());
        error
    })
}

/// How standard output fared: `Ok` if every write succeeded or the reader closed the pipe,
/// else the first other failure (a tool should then exit with an error).
///
/// # Errors
/// The [`StdoutGone`] of the first failed write, unless it was a closed pipe.
pub fn status() -> Result<(), StdoutGone> {
    match &*gone() {
        Some(e) if !e.is_closed_pipe() => Err(e.clone()),
        _ => Ok(()),
    }
}

/// `println!` that never panics: writes a line with [`line()`](fn@line), ignoring the result (check
/// [`status`] before exiting).
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {{
        // A closed stdout is reported by `stdout::status()` at exit, not here.
        let _ = $crate::stdout::line(format_args!($($arg)*));
    }};
}
