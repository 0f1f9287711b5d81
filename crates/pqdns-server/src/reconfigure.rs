//! What a reload (SIGHUP, `pqdns-ctl reload`, [`ServerHandle::reload_report`]) changes while
//! serving, and what waits for a restart.
//!
//! Changed live, with a configuration file ([`ServerHandle::reload_configuration_from`]):
//! - the zones ([`crate::provisioning`]): `[[zone]]` tables added and removed, and a zone whose
//!   `primaries` were added or removed changes role (its refresh task started or stopped);
//! - the listen addresses of `[server]` ([`LIVE_KEYS`]: `udp`, `tcp`, `dot`, `doh`, `doq`;
//!   [`pqdns_net::listen_change`]), when the handle knows how to read the settings
//!   ([`ServerHandle::reload_settings_with`], as pqdns-server does). The addresses added are
//!   bound before anything changes: one that cannot be bound fails the whole reload with an
//!   error naming its transport and address, and the listeners and zones served before stay.
//!   Once the zones are loaded, the new listeners start, and those whose address was removed
//!   stop accepting and tell their open connections to finish (a stream connection after the
//!   message in progress), within [`pqdns_net::SHUTDOWN_GRACE`]. A listener whose address
//!   stays is not touched: its open TCP and DoT connections carry on.
//!
//! Every other key of `[server]` (limits, TLS settings, metrics, control socket, dnstap, the
//! user, AF_XDP, RRL, cookies, …) takes effect at the next start: a reload that finds one
//! changed names it in [`ReloadReport::needs_restart`] and logs a warning, rather than ignore
//! it. So does a change of the UDP listeners while the AF_XDP fast path serves their ports
//! (`xdp`: it keeps the ports of the start).

use std::error::Error;
use std::sync::Arc;

use crate::config_file::ConfigFile;
use crate::settings::Settings;
use crate::zones::ZoneReport;
#[cfg(doc)]
use crate::ServerHandle;

/// How a reload turns the configuration file read again into the server's settings: the
/// file's `[server]` table, the zone descriptions' ones and whatever overrides them (the
/// command line of pqdns-server), as at start.
pub type SettingsSource =
    Arc<dyn Fn(&ConfigFile) -> Result<Settings, Box<dyn Error + Send + Sync>> + Send + Sync>;

/// The `[server]` keys a reload applies: the listen addresses.
pub const LIVE_KEYS: &[&str] = &["udp", "tcp", "dot", "doh", "doq"];

/// What a reload did.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ReloadReport {
    /// The zones loaded.
    pub zones: Vec<ZoneReport>,
    /// Listeners started, as `KIND ADDR` with the address bound (`tcp 127.0.0.1:5300`).
    pub started: Vec<String>,
    /// Listeners stopped, as `KIND ADDR`.
    pub stopped: Vec<String>,
    /// `[server]` settings that changed and take effect at the next start, by key, sorted.
    pub needs_restart: Vec<String>,
}

/// The keys of a `[server]` table whose values differ between `before` and `after` (added,
/// removed or changed), but [`LIVE_KEYS`]; sorted.
pub fn changed_keys(before: &toml::Table, after: &toml::Table) -> Vec<String> {
    let mut keys: Vec<String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| !LIVE_KEYS.contains(&k.as_str()) && before.get(*k) != after.get(*k))
        .cloned()
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys added, removed and changed are named once each; listen addresses and keys left
    /// alone are not.
    #[test]
    fn changed_keys_but_the_listen_addresses() {
        let before: toml::Table = toml::from_str(
            "udp = [\"127.0.0.1:53\"]\nrrl_rate = 100\nidle_timeout = 10\nuser = \"pqdns\"\n",
        )
        .unwrap();
        let after: toml::Table = toml::from_str(
            "udp = [\"127.0.0.1:5300\"]\ntcp = []\nrrl_rate = 50\nuser = \"pqdns\"\nmetrics = \"127.0.0.1:9153\"\n",
        )
        .unwrap();
        assert_eq!(
            changed_keys(&before, &after),
            ["idle_timeout", "metrics", "rrl_rate"]
        );
        assert!(changed_keys(&after, &after).is_empty());
    }
}
