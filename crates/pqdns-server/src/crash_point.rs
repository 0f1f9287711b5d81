//! Crash points: where the durability tests (issue 28, must-show 3: "SIGKILL in the middle of
//! applying an UPDATE → the zone is either before or after it, never between") stop the
//! server in the middle of applying a dynamic update (RFC 2136).
//!
//! Only with the `crash-points` feature, which only test builds turn on (pqdns-test-support
//! asks for it; the package and `cargo build -p pqdns-server` leave it off): then
//! `PQDNS_TEST_CRASH_AT=<point>` ([`CrashPoint::name`]) makes the process abort
//! (`std::process::abort`) the first time it reaches that point, which leaves its files as
//! SIGKILL (an operator's `kill -9`, the OOM killer) would at that instant: no destructor runs,
//! nothing more is written, what was written is as the kernel has it.
//! Without the feature [`reached`] is an empty inline function and the variable is never read.

/// A point of applying an update, in the order they are reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CrashPoint {
    /// The `.dynamic` record is written; nothing of the change is on disk yet.
    Marked,
    /// Half of the change's journal entry is written (an append cut short).
    JournalTorn,
    /// The whole entry is written but not yet synced.
    JournalWritten,
    /// The entry is synced; the new version is not served yet (nor the update answered).
    JournalSynced,
    /// Writing whole: the new served version (`<zone>.served`) is in place, its journal not.
    ServedWritten,
}

impl CrashPoint {
    /// The value of `PQDNS_TEST_CRASH_AT` that stops the process here.
    #[cfg_attr(not(feature = "crash-points"), allow(dead_code))]
    pub(crate) const fn name(self) -> &'static str {
        match self {
            CrashPoint::Marked => "marked",
            CrashPoint::JournalTorn => "journal-torn",
            CrashPoint::JournalWritten => "journal-written",
            CrashPoint::JournalSynced => "journal-synced",
            CrashPoint::ServedWritten => "served-written",
        }
    }
}

/// Aborts the process if `PQDNS_TEST_CRASH_AT` names `point`, after running `before` (what
/// the process was doing at the instant it died, e.g. half a write).
#[cfg(feature = "crash-points")]
pub(crate) fn reached_after(point: CrashPoint, before: impl FnOnce()) {
    static AT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let at = AT.get_or_init(|| std::env::var("PQDNS_TEST_CRASH_AT").ok());
    if at.as_deref() == Some(point.name()) {
        before();
        eprintln!("PQDNS_TEST_CRASH_AT={}: aborting", point.name());
        std::process::abort();
    }
}

/// Without the `crash-points` feature: nothing.
#[cfg(not(feature = "crash-points"))]
#[inline(always)]
pub(crate) fn reached_after(_point: CrashPoint, _before: impl FnOnce()) {}

/// Aborts the process if `PQDNS_TEST_CRASH_AT` names `point` ([`reached_after`]).
#[inline(always)]
pub(crate) fn reached(point: CrashPoint) {
    reached_after(point, || {});
}
