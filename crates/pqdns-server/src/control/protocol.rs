//! The control protocol `pqdns-ctl` speaks to pqdns-server over its Unix socket
//! ([`crate::control::socket`]): one request and one response per connection, each a JSON
//! object on one line (UTF-8, ended by `\n`), both carrying [`PROTOCOL_VERSION`].
//!
//! A request names its command in `command` (kebab-case) and, for the zone commands, the zone
//! in `zone` (with or without the final dot):
//!
//! ```text
//! {"version":1,"command":"status"}
//! {"version":1,"command":"zone-status","zone":"example.com."}
//! ```
//!
//! The response says `ok` and carries either `result` (its `type` tells which of [`Reply`]'s
//! shapes follows) or `error` (a sentence for people):
//!
//! ```text
//! {"version":1,"ok":true,"result":{"type":"done","message":"example.com.: frozen"}}
//! {"version":1,"ok":false,"error":"no zone example.org. is served here"}
//! ```
//!
//! A request of another version is answered with an error naming the version spoken here.
//! Times are UNIX seconds (UTC). Requests are at most [`MAX_REQUEST_BYTES`] long; responses
//! at most [`MAX_RESPONSE_BYTES`].

use std::fmt;

use pqdns_core::time::to_display;
use serde::{Deserialize, Serialize};

/// The version of this protocol, in every request and response.
pub const PROTOCOL_VERSION: u32 = 1;

/// Longest request line the server reads, in bytes (with the `\n`).
pub const MAX_REQUEST_BYTES: usize = 4096;

/// Longest response line a client reads, in bytes (with the `\n`): 16 MiB, room for the
/// status of tens of thousands of zones.
pub const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// One request: the version and the command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// [`PROTOCOL_VERSION`] of the client.
    pub version: u32,
    /// What to do.
    #[serde(flatten)]
    pub command: Command,
}

impl Request {
    /// `command` in this protocol's version.
    pub fn new(command: Command) -> Request {
        Request {
            version: PROTOCOL_VERSION,
            command,
        }
    }
}

/// The commands, as `pqdns-ctl` names them (and as its `--help` describes them, with the
/// `cli` feature). `zone` is a zone's apex as served.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Subcommand))]
#[serde(tag = "command", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Command {
    /// The server: version, start time, number of zones, frozen zones, listening addresses.
    Status,
    /// Every zone served: role (primary, secondary), SOA serial, signed or not.
    ZoneList,
    /// One zone: serial, last load, next re-signing, earliest signature expiration, whether
    /// updates are frozen, the algorithm rollover's phases and next step, and for a secondary
    /// zone its primaries and refresh timers.
    ZoneStatus {
        /// The zone's apex (the final dot may be left out).
        zone: String,
    },
    /// Re-read the zone's description and file and sign it (fresh signatures are kept), as a
    /// reload does for every zone; then NOTIFY. The zone served before stays if it fails.
    ZoneReload {
        /// The zone's apex.
        zone: String,
    },
    /// Transfer a secondary zone whole (AXFR) from its primaries now. Returns at once; the
    /// new version is served when it is in (see zone-status).
    ZoneRetransfer {
        /// The zone's apex.
        zone: String,
    },
    /// Sign the zone anew now: every signature made again, the SOA serial raised; then
    /// NOTIFY.
    ZoneSign {
        /// The zone's apex.
        zone: String,
    },
    /// Send NOTIFY for the zone to the configured secondaries now.
    ZoneNotify {
        /// The zone's apex.
        zone: String,
    },
    /// Hold dynamic updates of the zone (to edit its file): UPDATEs are answered REFUSED
    /// until zone-thaw. Not kept across a restart.
    ZoneFreeze {
        /// The zone's apex.
        zone: String,
    },
    /// Accept dynamic updates of the zone again, and reload it.
    ZoneThaw {
        /// The zone's apex.
        zone: String,
    },
    /// The parent's DS RRset now equals the DS set the zone's algorithm rollover asked for
    /// (see zone-status): record it and reload the zone, which takes the next step. Does
    /// what `pqdns-zone rollover --ds-published` and a reload do, through the server.
    DsPublished {
        /// The zone's apex.
        zone: String,
    },
    /// The zone's keys: algorithm, role, key tag, rollover phase and since when.
    KeyList {
        /// The zone's apex.
        zone: String,
    },
    /// The counters of the metrics endpoint (queries by transport, type and RCODE,
    /// truncation, TLS handshakes, transfers, TSIG failures, …).
    Stats,
    /// Reload the TLS certificate, the configuration file (zones and listen addresses) and
    /// every zone, as SIGHUP does ([`crate::reconfigure`]).
    Reload,
}

/// One response: the outcome of a request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// [`PROTOCOL_VERSION`] of the server.
    pub version: u32,
    /// Whether the command succeeded.
    pub ok: bool,
    /// What it gave, when it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Reply>,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Response {
    /// A success carrying `reply`.
    pub fn ok(reply: Reply) -> Response {
        Response {
            version: PROTOCOL_VERSION,
            ok: true,
            result: Some(reply),
            error: None,
        }
    }

    /// A failure, with the reason.
    pub fn error(message: impl Into<String>) -> Response {
        Response {
            version: PROTOCOL_VERSION,
            ok: false,
            result: None,
            error: Some(message.into()),
        }
    }
}

/// What a command gave.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Reply {
    /// `status`.
    Status(ServerStatus),
    /// `zone-list`.
    ZoneList {
        /// The zones, in canonical order.
        zones: Vec<ZoneSummary>,
    },
    /// `zone-status`.
    ZoneStatus(ZoneStatus),
    /// `key-list`.
    KeyList {
        /// The zone.
        zone: String,
        /// Its keys, as the rollover state has them.
        keys: Vec<KeyInfo>,
    },
    /// `stats`.
    Stats {
        /// Every counter, named as the metrics endpoint names it (with its labels).
        counters: Vec<Counter>,
    },
    /// `zone-reload`, `zone-sign`, `zone-thaw`, `ds-published`, `reload`: the zones loaded.
    Loaded {
        /// Each zone loaded, with the serial it is served with now.
        zones: Vec<ZoneSummary>,
        /// `reload`: the listeners started, as `KIND ADDR`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        started: Vec<String>,
        /// `reload`: the listeners stopped, as `KIND ADDR`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        stopped: Vec<String>,
        /// `reload`: `[server]` settings changed that take effect at the next start, by key.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        needs_restart: Vec<String>,
    },
    /// The other commands: what was done.
    Done {
        /// A sentence.
        message: String,
    },
}

/// The server as a whole.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerStatus {
    /// pqdns-server's version.
    pub version: String,
    /// When the server started, UNIX seconds.
    pub started: u64,
    /// Zones served.
    pub zones: usize,
    /// Zones whose updates are held (`zone-freeze`).
    pub frozen: Vec<String>,
    /// Listening addresses, as `KIND ADDR` (`udp 127.0.0.1:53`).
    pub listeners: Vec<String>,
}

/// One zone in a list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneSummary {
    /// The apex.
    pub zone: String,
    /// `primary` or `secondary`.
    pub role: String,
    /// The SOA serial served (`None`: a secondary zone not yet transferred).
    pub serial: Option<u32>,
    /// Whether pqdns signs it.
    pub signed: bool,
}

/// One zone in detail (`zone-status`). Times are UNIX seconds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneStatus {
    /// The zone, its role, serial and whether it is signed here.
    #[serde(flatten)]
    pub summary: ZoneSummary,
    /// When this server last loaded (read, or signed) it; `None`: not since it started.
    pub last_load: Option<u64>,
    /// When its signatures are refreshed next (or its rollover takes a step).
    pub next_resign: Option<u64>,
    /// The earliest expiration of its RRSIG records (RFC 4034 §3.1.5).
    pub earliest_expiry: Option<u64>,
    /// Whether dynamic updates are held (`zone-freeze`).
    pub frozen: bool,
    /// A secondary zone past its SOA EXPIRE time without a refresh (answered SERVFAIL).
    pub expired: bool,
    /// The algorithm rollover, for signed zones with a key state.
    pub rollover: Option<Rollover>,
    /// The SOA timers, for secondary zones.
    pub secondary: Option<SecondaryTimers>,
}

/// Where a zone's algorithm rollover stands (`pqdns_core::dnssec::rollover`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rollover {
    /// Each algorithm with its phase and when it entered it.
    pub algorithms: Vec<PhaseSince>,
    /// What comes next, in words.
    pub next: String,
    /// When it comes, if a time decides it.
    pub next_at: Option<u64>,
}

/// An algorithm or key in a phase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseSince {
    /// The algorithm (`ML-DSA-44`) or key (`ML-DSA-44 KSK 12345`).
    pub name: String,
    /// The phase (`active`).
    pub phase: String,
    /// Since when, UNIX seconds.
    pub since: u64,
}

/// A secondary zone's refresh timers (RFC 1035 §4.3.5), UNIX seconds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecondaryTimers {
    /// The primaries, in the order they are asked.
    pub primaries: Vec<String>,
    /// When the copy was last known current.
    pub last_success: Option<u64>,
    /// When it is refreshed next.
    pub next_refresh: Option<u64>,
    /// When it expires without a refresh.
    pub expires: Option<u64>,
}

/// A key of a zone (`key-list`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyInfo {
    /// Algorithm number (RFC 4034 §2.1.3).
    pub algorithm: u8,
    /// Key tag (RFC 4034 Appendix B).
    pub tag: u16,
    /// DNSKEY flags: 257 KSK, 256 ZSK.
    pub flags: u16,
    /// `ECDSAP256SHA256 KSK 12345`.
    pub label: String,
    /// Its phase (`active`, `prepublished`, `submitted`, `retired`).
    pub phase: String,
    /// Since when, UNIX seconds.
    pub since: u64,
}

/// One counter of the metrics endpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Counter {
    /// Its name with labels, as in the Prometheus text (`pqdns_queries_total{…}`).
    pub name: String,
    /// Its value.
    pub value: f64,
}

/// `YYYY-MM-DD HH:MM:SS UTC`, or `-`.
fn time(t: Option<u64>) -> String {
    t.map_or_else(|| "-".to_owned(), to_display)
}

impl fmt::Display for ZoneSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let serial = self
            .serial
            .map_or_else(|| "-".to_owned(), |s| s.to_string());
        let signed = if self.signed { "signed" } else { "unsigned" };
        write!(
            f,
            "{:<30} {:<9} serial {serial:<10} {signed}",
            self.zone, self.role
        )
    }
}

/// Human-readable output of `pqdns-ctl` (without `--json`).
impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Status(s) => {
                writeln!(f, "pqdns-server {}", s.version)?;
                writeln!(f, "started:   {}", to_display(s.started))?;
                writeln!(f, "zones:     {}", s.zones)?;
                if !s.frozen.is_empty() {
                    writeln!(f, "frozen:    {}", s.frozen.join(" "))?;
                }
                for l in &s.listeners {
                    writeln!(f, "listening: {l}")?;
                }
                Ok(())
            }
            Reply::ZoneList { zones } => zones.iter().try_for_each(|z| writeln!(f, "{z}")),
            Reply::Loaded {
                zones,
                started,
                stopped,
                needs_restart,
            } => {
                zones.iter().try_for_each(|z| writeln!(f, "{z}"))?;
                for l in started {
                    writeln!(f, "started:   {l}")?;
                }
                for l in stopped {
                    writeln!(f, "stopped:   {l}")?;
                }
                if !needs_restart.is_empty() {
                    let keys = needs_restart.join(" ");
                    writeln!(f, "needs restart: {keys} (changed in [server]; they take effect at the next start)")?;
                }
                Ok(())
            }
            Reply::ZoneStatus(z) => {
                writeln!(f, "{}", z.summary)?;
                writeln!(f, "last load:        {}", time(z.last_load))?;
                if z.summary.signed {
                    writeln!(f, "next re-signing:  {}", time(z.next_resign))?;
                }
                writeln!(f, "earliest expiry:  {}", time(z.earliest_expiry))?;
                writeln!(
                    f,
                    "updates:          {}",
                    if z.frozen { "frozen" } else { "accepted" }
                )?;
                if z.expired {
                    writeln!(f, "expired:          yes (answered SERVFAIL)")?;
                }
                if let Some(r) = &z.rollover {
                    for a in &r.algorithms {
                        writeln!(
                            f,
                            "algorithm:        {:<20} {:<12} since {}",
                            a.name,
                            a.phase,
                            to_display(a.since)
                        )?;
                    }
                    match r.next_at {
                        Some(at) => {
                            writeln!(f, "rollover next:    {} at {}", r.next, to_display(at))?
                        }
                        None => writeln!(f, "rollover next:    {}", r.next)?,
                    }
                }
                if let Some(s) = &z.secondary {
                    writeln!(f, "primaries:        {}", s.primaries.join(" "))?;
                    writeln!(f, "last refresh:     {}", time(s.last_success))?;
                    writeln!(f, "next refresh:     {}", time(s.next_refresh))?;
                    writeln!(f, "expires:          {}", time(s.expires))?;
                }
                Ok(())
            }
            Reply::KeyList { zone, keys } => {
                writeln!(f, "zone {zone}")?;
                for k in keys {
                    writeln!(
                        f,
                        "{:<34} {:<12} since {}",
                        k.label,
                        k.phase,
                        to_display(k.since)
                    )?;
                }
                Ok(())
            }
            Reply::Stats { counters } => counters
                .iter()
                .try_for_each(|c| writeln!(f, "{} {}", c.name, c.value)),
            Reply::Done { message } => writeln!(f, "{message}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire form is the documented one (the module doc and docs/guide/control.md).
    #[test]
    fn requests_and_responses_read_as_documented() {
        let r: Request =
            serde_json::from_str(r#"{"version":1,"command":"zone-status","zone":"example.com."}"#)
                .unwrap();
        assert_eq!(
            r.command,
            Command::ZoneStatus {
                zone: "example.com.".into()
            }
        );
        assert_eq!(
            serde_json::to_string(&Request::new(Command::Status)).unwrap(),
            r#"{"version":1,"command":"status"}"#
        );
        assert_eq!(
            serde_json::to_string(&Response::ok(Reply::Done {
                message: "example.com.: frozen".into()
            }))
            .unwrap(),
            r#"{"version":1,"ok":true,"result":{"type":"done","message":"example.com.: frozen"}}"#
        );
        assert_eq!(
            serde_json::to_string(&Response::error("no zone")).unwrap(),
            r#"{"version":1,"ok":false,"error":"no zone"}"#
        );
        // An unknown command, or a zone command without its zone, is not a request.
        for bad in [
            r#"{"version":1,"command":"zone-delete","zone":"a."}"#,
            r#"{"version":1,"command":"zone-sign"}"#,
            r#"{"command":"status"}"#,
        ] {
            assert!(serde_json::from_str::<Request>(bad).is_err(), "{bad}");
        }
    }
}
