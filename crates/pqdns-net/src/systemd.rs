//! The systemd service protocol for `Type=notify` units (sd_notify(3)), through the
//! `sd-notify` crate: readiness once the zones (or the resolver) serve, `RELOADING=1` and
//! `READY=1` around a reload, `STOPPING=1` at shutdown, and keep-alive pings for the watchdog
//! (`WatchdogSec=`). Every call does nothing when the process was not started by systemd
//! (no `NOTIFY_SOCKET`); a failed send is logged, never fatal.

use std::time::Duration;

use sd_notify::NotifyState;
use tracing::warn;

/// Tells systemd the service is ready, with a one-line `status` shown by `systemctl status`.
pub fn ready(status: &str) {
    send("READY", &[NotifyState::Ready, NotifyState::Status(status)]);
}

/// Tells systemd a reload started (`RELOADING=1` with the monotonic time systemd 253+
/// needs for `Type=notify-reload`); [`ready`] ends it.
pub fn reloading() {
    let mut states = vec![NotifyState::Reloading];
    if let Ok(now) = NotifyState::monotonic_usec_now() {
        states.push(now);
    }
    send("RELOADING", &states);
}

/// Tells systemd the service is stopping.
pub fn stopping() {
    send("STOPPING", &[NotifyState::Stopping]);
}

/// The interval at which to ping the watchdog, if systemd asked for one (`WATCHDOG_USEC`
/// for this process): half the watchdog timeout, as sd_watchdog_enabled(3) advises.
pub fn watchdog_interval() -> Option<Duration> {
    sd_notify::watchdog_enabled().map(|timeout| timeout / 2)
}

/// Pings the watchdog every `interval` until the task is dropped; spawn it on the runtime
/// that serves, so a stalled runtime stops the pings and systemd restarts the service.
pub async fn watchdog(interval: Duration) {
    let mut tick = tokio::time::interval(interval);
    loop {
        tick.tick().await;
        send("WATCHDOG", &[NotifyState::Watchdog]);
    }
}

fn send(kind: &str, states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        warn!(kind, error = %e, "could not notify systemd");
    }
}
