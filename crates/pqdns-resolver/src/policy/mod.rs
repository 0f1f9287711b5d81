//! Resolver policy (issue 29): per-domain forward and stub zones ([`forward`]), local zones
//! ([`local_zone`]), access control per client prefix ([`access`]), insecure domains
//! ([`insecure`]) and negative trust anchors ([`crate::nta`], RFC 7646), read from the tables
//! of the configuration file beside its options:
//!
//! ```toml
//! [[forward-zone]]
//! name = "corp.example."
//! upstreams = ["tls://192.0.2.1:853#dns.corp.example"]
//! pq-only = true
//! insecure = true          # an insecure domain (also on [[stub-zone]])
//!
//! [[stub-zone]]
//! name = "lab.example."
//! servers = ["192.0.2.53", "192.0.2.54:5353"]
//!
//! [[local-zone]]
//! name = "home.arpa."
//! type = "static"          # or "refuse", "nxdomain", "redirect"
//! records = ["nas.home.arpa. 3600 IN A 192.0.2.7"]
//!
//! [[access-control]]
//! prefix = "10.0.0.0/8"
//! action = "allow"         # or "allow-snoop", "refuse", "deny"
//!
//! [[domain-insecure]]
//! name = "lab.example."
//!
//! [[negative-trust-anchor]]
//! name = "broken.example."
//! until = 2026-11-27T12:00:00Z   # an offset date-time, at most a week ahead
//! ```
//!
//! A [`PolicySource`] reads the file ([`PolicySource::load`]); an error names the file and the
//! line. [`crate::service::RecursiveService::install_policy`] puts a [`Policy`] in place as a
//! whole, while queries run: the answer cache, the cache of raw responses and open
//! connections stay — but when the insecure domains or the negative trust anchors change, the
//! answer cache is emptied, as answers validated under the old rules must not be served. The
//! program does this at start and on SIGHUP; a file that does not load leaves the policy in
//! use as it was.

pub mod access;
mod file;
pub mod forward;
pub mod insecure;
pub mod local_zone;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::Name;
use pqdns_net::acl::{AllowList, IpPrefix, PrefixMap};
use pqdns_net::dnstap::Dnstap;

use crate::nta::{NegativeTrustAnchors, MAX_LIFETIME};
use crate::transport::{Client, TlsOptions, Transport};
use access::{AccessControl, Action};
use forward::{RouteKind, Upstream, ZoneRoute};
use insecure::InsecureDomains;
use local_zone::{LocalType, LocalZone, LocalZones};

/// The top-level keys of the policy tables, which the option parser leaves alone.
pub const TABLES: &[&str] = &[
    "forward-zone",
    "stub-zone",
    "local-zone",
    "access-control",
    "domain-insecure",
    "negative-trust-anchor",
];

/// Most tables of each kind in one file (with [`MAX_LOCAL_RECORDS`] and [`MAX_SERVERS`], a
/// bound on what a file can make the resolver hold).
pub const MAX_TABLES: usize = 10_000;
/// Most records of one local zone.
pub const MAX_LOCAL_RECORDS: usize = 10_000;
/// Most upstreams or servers of one forward or stub zone.
pub const MAX_SERVERS: usize = 16;

/// Why a policy file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A syntax error, a wrong value or a table that contradicts another: `file:line`.
    #[error("{}:{line}: {message}", path.display())]
    Setting {
        /// The file.
        path: PathBuf,
        /// Line, from 1.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// The policy the service and resolver follow, checked and ready to install.
pub struct Policy {
    pub(crate) access: AccessControl,
    pub(crate) local: LocalZones,
    pub(crate) routes: Vec<ZoneRoute>,
    pub(crate) insecure: InsecureDomains,
    pub(crate) negative: NegativeTrustAnchors,
}

impl Policy {
    /// No forward, stub or local zone, insecure domain or negative trust anchor, and the
    /// allow-list `allow` (answered whatever RD).
    pub fn allow_list(allow: AllowList) -> Policy {
        Policy {
            access: AccessControl::AllowList(allow),
            local: LocalZones::default(),
            routes: Vec::new(),
            insecure: InsecureDomains::default(),
            negative: NegativeTrustAnchors::new(),
        }
    }
}

/// The part of a [`Policy`] the service consults per query.
pub(crate) struct ServicePolicy {
    pub(crate) access: AccessControl,
    pub(crate) local: LocalZones,
}

impl From<Policy> for ServicePolicy {
    fn from(p: Policy) -> ServicePolicy {
        ServicePolicy {
            access: p.access,
            local: p.local,
        }
    }
}

/// Where the policy is read from, and what the command line gives with it.
#[derive(Clone)]
pub struct PolicySource {
    path: PathBuf,
    /// The allow-list without `[[access-control]]` tables.
    allow: AllowList,
    /// `allow` was given (`--allow`), so `[[access-control]]` tables are a contradiction.
    allow_given: bool,
    /// Timeout of one exchange with an upstream.
    timeout: Duration,
    /// CA files of DoT, DoH and DoQ upstreams (empty: the system's store).
    ca_files: Vec<PathBuf>,
    dnstap: Option<Arc<Dnstap>>,
}

impl PolicySource {
    /// The tables of `path`; without `[[access-control]]` tables, the allow-list `allow`
    /// applies (`given`: it was configured explicitly, e.g. by `--allow`, and then such tables
    /// are an error rather than a silent replacement).
    pub fn new(path: PathBuf, allow: AllowList, given: bool) -> PolicySource {
        PolicySource {
            path,
            allow,
            allow_given: given,
            timeout: crate::resolve::DEFAULT_TIMEOUT,
            ca_files: Vec::new(),
            dnstap: None,
        }
    }

    /// Upstream exchanges time out after `timeout`; TLS upstreams chain to `ca_files` (empty:
    /// the system's store); queries and answers are logged to `dnstap`.
    pub fn with_upstreams(
        mut self,
        timeout: Duration,
        ca_files: Vec<PathBuf>,
        dnstap: Option<Arc<Dnstap>>,
    ) -> PolicySource {
        self.timeout = timeout;
        self.ca_files = ca_files;
        self.dnstap = dnstap;
        self
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads and checks the file.
    ///
    /// # Errors
    /// [`PolicyError`] with the file and line of the first problem.
    pub fn load(&self) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(&self.path).map_err(|source| PolicyError::Io {
            path: self.path.clone(),
            source,
        })?;
        self.parse(&text)
    }

    /// Checks the tables of `text` (the file's contents), negative trust anchors' times
    /// against the real clock.
    ///
    /// # Errors
    /// As [`PolicySource::load`].
    pub fn parse(&self, text: &str) -> Result<Policy, PolicyError> {
        self.parse_at(text, pqdns_core::time::now())
    }

    /// [`PolicySource::parse`] at `now` (UNIX seconds): a negative trust anchor may end at
    /// most [`MAX_LIFETIME`] after it.
    fn parse_at(&self, text: &str, now: u64) -> Result<Policy, PolicyError> {
        let at = |offset: usize, message: String| PolicyError::Setting {
            path: self.path.clone(),
            line: file::line_of(text, offset),
            message,
        };
        let tables: file::Tables = toml::from_str(text).map_err(|e: toml::de::Error| {
            at(e.span().map_or(0, |s| s.start), e.message().to_owned())
        })?;
        let counts = [
            tables.forward_zone.len(),
            tables.stub_zone.len(),
            tables.local_zone.len(),
            tables.access_control.len(),
            tables.domain_insecure.len(),
            tables.negative_trust_anchor.len(),
        ];
        if counts.iter().any(|n| *n > MAX_TABLES) {
            return Err(at(0, format!("more than {MAX_TABLES} tables of one kind")));
        }
        let zone_name = |n: &toml::Spanned<String>| {
            n.get_ref()
                .parse::<Name>()
                .map(|n| n.to_lowercase())
                .map_err(|e| at(n.span().start, format!("name {:?}: {e}", n.get_ref())))
        };
        let mut routed = HashSet::new();
        let mut routes = Vec::new();
        let mut insecure = Vec::new();
        for d in &tables.domain_insecure {
            insecure.push(zone_name(&d.name)?);
        }
        for z in &tables.forward_zone {
            let name = zone_name(&z.name)?;
            if z.insecure {
                insecure.push(name.clone());
            }
            let list = z.upstreams.get_ref();
            if list.is_empty() || list.len() > MAX_SERVERS {
                let m = format!("{name}: give 1 to {MAX_SERVERS} upstreams");
                return Err(at(z.upstreams.span().start, m));
            }
            let upstreams = list
                .iter()
                .map(|u| {
                    u.get_ref()
                        .parse::<Upstream>()
                        .map_err(|m| at(u.span().start, m))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let first = &upstreams[0];
            if upstreams
                .iter()
                .any(|u| u.transport != first.transport || u.tls_name != first.tls_name)
            {
                let m = format!("{name}: all upstreams of a zone use one scheme and TLS name");
                return Err(at(z.upstreams.span().start, m));
            }
            let tls = TlsOptions {
                pq_only: z.pq_only,
                ca_files: self.ca_files.clone(),
                server_name: first.tls_name.clone(),
                ..TlsOptions::default()
            };
            let mut client = Client::new(first.transport, self.timeout, tls)
                .map_err(|e| at(z.upstreams.span().start, format!("{name}: {e}")))?;
            client.set_dnstap(self.dnstap.clone());
            if !routed.insert(name.clone()) {
                return Err(at(
                    z.name.span().start,
                    format!("{name}: a second zone of this name"),
                ));
            }
            let servers = upstreams.iter().map(|u| u.addr).collect();
            routes.push(ZoneRoute {
                name,
                kind: RouteKind::Forward {
                    client: Box::new(client),
                    servers,
                },
            });
        }
        for z in &tables.stub_zone {
            let name = zone_name(&z.name)?;
            if z.insecure {
                insecure.push(name.clone());
            }
            let list = z.servers.get_ref();
            if list.is_empty() || list.len() > MAX_SERVERS {
                let m = format!("{name}: give 1 to {MAX_SERVERS} servers");
                return Err(at(z.servers.span().start, m));
            }
            let servers = list
                .iter()
                .map(|s| match s.get_ref().parse::<Upstream>() {
                    Ok(u) if u.transport == Transport::Udp => Ok(u.addr),
                    _ => Err(at(
                        s.span().start,
                        format!("server {:?}: expected IP or IP:PORT", s.get_ref()),
                    )),
                })
                .collect::<Result<Vec<SocketAddr>, _>>()?;
            if !routed.insert(name.clone()) {
                return Err(at(
                    z.name.span().start,
                    format!("{name}: a second zone of this name"),
                ));
            }
            routes.push(ZoneRoute {
                name,
                kind: RouteKind::Stub { servers },
            });
        }
        let mut local = LocalZones::default();
        for z in &tables.local_zone {
            let name = zone_name(&z.name)?;
            let kind: LocalType = z
                .kind
                .get_ref()
                .parse()
                .map_err(|m| at(z.kind.span().start, m))?;
            if z.records.len() > MAX_LOCAL_RECORDS {
                let m = format!("{name}: more than {MAX_LOCAL_RECORDS} records");
                return Err(at(z.name.span().start, m));
            }
            let reader = ZoneFileReader::new(Some(name.clone()), Some(3600));
            let mut records = Vec::with_capacity(z.records.len());
            for r in &z.records {
                let line = r.get_ref();
                // One record per string: no directives ($INCLUDE would read files).
                if line.trim_start().starts_with('$') || line.contains('\n') {
                    let m = format!("{line:?}: one record per string, no directives");
                    return Err(at(r.span().start, m));
                }
                let mut read = reader
                    .read_str(line, "record")
                    .map_err(|e| at(r.span().start, format!("{line:?}: {}", e.message)))?;
                records.append(&mut read);
            }
            let zone =
                LocalZone::new(&name, kind, records).map_err(|m| at(z.name.span().start, m))?;
            if !local.insert(name.clone(), zone) {
                return Err(at(
                    z.name.span().start,
                    format!("{name}: a second local zone of this name"),
                ));
            }
        }
        let access = if tables.access_control.is_empty() {
            AccessControl::AllowList(self.allow.clone())
        } else {
            let first = tables.access_control[0].prefix.span().start;
            if self.allow_given {
                let m = "[[access-control]] tables and --allow exclude each other".to_owned();
                return Err(at(first, m));
            }
            let entries = tables
                .access_control
                .iter()
                .map(|a| {
                    let prefix: IpPrefix = a
                        .prefix
                        .get_ref()
                        .parse()
                        .map_err(|e| at(a.prefix.span().start, format!("{e}")))?;
                    let action: Action = a
                        .action
                        .get_ref()
                        .parse()
                        .map_err(|m| at(a.action.span().start, m))?;
                    Ok((prefix, action))
                })
                .collect::<Result<Vec<_>, PolicyError>>()?;
            AccessControl::Table(PrefixMap::new(entries))
        };
        let mut negative = NegativeTrustAnchors::new();
        for t in &tables.negative_trust_anchor {
            let name = zone_name(&t.name)?;
            let until = t.until.span().start;
            let Some(expires) = file::unix_seconds(t.until.get_ref()) else {
                let m = "until: give a date, time and offset, e.g. 2026-11-27T12:00:00Z".into();
                return Err(at(until, m));
            };
            if expires > now.saturating_add(u64::from(MAX_LIFETIME)) {
                let m = format!(
                    "{name}: until is more than {MAX_LIFETIME} s (one week) ahead; negative \
                     trust anchors expire (RFC 7646)"
                );
                return Err(at(until, m));
            }
            if negative.entries().any(|(d, _)| *d == name) {
                let m = format!("{name}: a second negative trust anchor of this name");
                return Err(at(t.name.span().start, m));
            }
            negative.add(name, expires);
        }
        Ok(Policy {
            access,
            local,
            routes,
            insecure: InsecureDomains::new(insecure),
            negative,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> PolicySource {
        PolicySource::new("r.toml".into(), AllowList::default(), false)
    }

    #[test]
    fn tables_beside_options_are_read() {
        let text = "udp = [\"127.0.0.1:53\"]\ncache-size = 8\n\
            [[forward-zone]]\nname = \"Corp.Example.\"\nupstreams = [\"tls://192.0.2.1#dns.example\", \"tls://192.0.2.2#dns.example\"]\npq-only = true\n\
            [[stub-zone]]\nname = \"lab.example.\"\nservers = [\"192.0.2.53\", \"[::1]:5353\"]\n\
            [[local-zone]]\nname = \"home.arpa.\"\ntype = \"static\"\nrecords = [\"nas 60 IN A 192.0.2.7\", \"home.arpa. 60 IN SOA ns hm 1 2 3 4 5\"]\n\
            [[access-control]]\nprefix = \"10.0.0.0/8\"\naction = \"allow-snoop\"\n";
        let p = source().parse(text).unwrap();
        assert_eq!(p.routes.len(), 2);
        assert_eq!(p.routes[0].name, "corp.example.".parse().unwrap());
        assert!(
            matches!(&p.routes[0].kind, RouteKind::Forward { servers, .. } if servers.len() == 2)
        );
        assert!(
            matches!(&p.routes[1].kind, RouteKind::Stub { servers } if servers[0].port() == 53)
        );
        assert!(!p.local.is_empty());
        assert!(matches!(p.access, AccessControl::Table(_)));
        assert!(p.insecure.is_empty() && p.negative.is_empty());
    }

    #[test]
    fn insecure_domains_and_negative_trust_anchors() {
        let now = 1_800_000_000; // 2027-01-15T08:00:00Z
        let text = "[[forward-zone]]\nname = \"Corp.Example.\"\nupstreams = [\"192.0.2.1\"]\ninsecure = true\n\
            [[stub-zone]]\nname = \"lab.example.\"\nservers = [\"192.0.2.53\"]\n\
            [[domain-insecure]]\nname = \"test.\"\n\
            [[negative-trust-anchor]]\nname = \"broken.example.\"\nuntil = 2027-01-15T09:00:00Z\n\
            [[negative-trust-anchor]]\nname = \"other.example.\"\nuntil = 2027-01-15T10:00:00+02:00\n";
        let p = source().parse_at(text, now).unwrap();
        let names = |v: &[&str]| v.iter().map(|n| n.parse().unwrap()).collect::<Vec<Name>>();
        assert_eq!(p.insecure.names(), names(&["corp.example.", "test."]));
        let ntas: Vec<(Name, u64)> = p.negative.entries().map(|(d, e)| (d.clone(), e)).collect();
        assert_eq!(
            ntas,
            vec![
                ("broken.example.".parse().unwrap(), now + 3600),
                ("other.example.".parse().unwrap(), now),
            ]
        );
        let cases = [
            (
                "[[negative-trust-anchor]]\nname = \"x.\"\nuntil = 2027-01-22T08:00:01Z\n",
                3,
                "one week",
            ),
            (
                "[[negative-trust-anchor]]\nname = \"x.\"\nuntil = 2027-01-15T09:00:00\n",
                3,
                "offset",
            ),
            ("[[negative-trust-anchor]]\nname = \"x.\"\n", 1, "until"),
            (
                "[[negative-trust-anchor]]\nname = \"x.\"\nuntil = 2027-01-15T09:00:00Z\n\
              [[negative-trust-anchor]]\nname = \"X.\"\nuntil = 2027-01-15T09:00:00Z\n",
                5,
                "second",
            ),
            ("[[domain-insecure]]\nname = \"x..\"\n", 2, "x.."),
        ];
        for (text, line, what) in cases {
            let e = source().parse_at(text, now).err().unwrap().to_string();
            assert!(
                e.contains(&format!("r.toml:{line}:")) && e.contains(what),
                "{text:?}: {e}"
            );
        }
        // At a week exactly: accepted.
        let week = "[[negative-trust-anchor]]\nname = \"x.\"\nuntil = 2027-01-22T08:00:00Z\n";
        assert!(source().parse_at(week, now).is_ok());
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            ("[[local-zone]]\nname = \"x.\"\ntype = \"open\"\n", 3, "open"),
            ("[[local-zone]]\nname = \"x.\"\ntype = \"static\"\nrecords = [\"y. A 1.2.3.4\"]\n", 2, "outside"),
            ("[[local-zone]]\nname = \"x.\"\ntype = \"static\"\nrecords = [\"a A 1.2.3\"]\n", 4, "a A 1.2.3"),
            ("\n[[forward-zone]]\nname = \"x.\"\nupstreams = [\"tls://192.0.2.1\", \"192.0.2.2\"]\n", 4, "one scheme"),
            ("[[forward-zone]]\nname = \"x.\"\nupstreams = [\"nowhere\"]\n", 3, "nowhere"),
            ("[[stub-zone]]\nname = \"x.\"\nservers = [\"tls://192.0.2.1\"]\ncolour = 1\n", 4, "colour"),
            ("[[access-control]]\nprefix = \"10.0.0.0/40\"\naction = \"allow\"\n", 2, "0..=32"),
            ("[[access-control]]\nprefix = \"10.0.0.0/8\"\naction = \"open\"\n", 3, "open"),
            ("[[stub-zone]]\nname = \"x.\"\nservers = [\"1.2.3.4\"]\n[[forward-zone]]\nname = \"X.\"\nupstreams = [\"1.2.3.4\"]\n", 2, "second"),
        ];
        for (text, line, what) in cases {
            let e = source().parse(text).err().unwrap().to_string();
            assert!(
                e.contains(&format!("r.toml:{line}:")) && e.contains(what),
                "{text:?}: {e}"
            );
        }
        let given = PolicySource::new("r.toml".into(), AllowList::default(), true);
        let e = given
            .parse("[[access-control]]\nprefix = \"::1\"\naction = \"allow\"\n")
            .err()
            .unwrap();
        assert!(e.to_string().contains("--allow"), "{e}");
    }
}
